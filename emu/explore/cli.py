"""``emu explore WORKLOAD [--budget N|DURATION] [--seed S] [-j N | --ray [ADDR]] [--out DIR]
[--invariants MODULE:ATTR] [--json]``: the command line of the explorer. WORKLOAD is a
built-in, a scenario, or ``module:attr`` (your own `Workload`, docs/explore.md "Your own
operator").

Exit status: 1 when there are findings or runs that raised, 0 when neither, 2 on bad input (an
unknown workload, a budget that is neither a count nor a duration, a store made for another
workload, a workload whose reference run raises). With ``--json`` the last line of output is
``{"runs": N, "seed": S, "findings": [{"invariant", "message", "plan", "knobs", "seed",
"replay", "test_file", "digest", "known", "class", "mitigation", "go", "emulator", ...}, ...],
"errors": [{"run", "error", "plan", "knobs"}, ...],
"unshrunk": [...], "idle": [...], "partial": K}`` (``unshrunk``: failing plan shapes not shrunk,
each with the finding that explains it, or 0 when its invariant had its ``--per-invariant``
shrinks; ``idle``: runs none of whose faults took effect, with why).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from typing import Any

import orjson

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """``"2000"`` → 2000 runs; ``"90s"``, ``"5m"``, ``"1h"`` → a wall-clock duration (seconds).
    A `ValueError` naming the text otherwise."""
    text = text.strip()
    if text.isdigit():
        n = int(text)
        if n < 1:
            raise ValueError(f"--budget must be at least 1 run, not {text!r}")
        return n, None
    m = _DURATION.match(text)
    if m:
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
        if seconds <= 0:
            raise ValueError(f"--budget must be a positive duration, not {text!r}")
        return None, seconds
    raise ValueError(f"--budget takes a number of runs (2000) or a duration (90s, 5m, 1h), "
                     f"not {text!r}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", nargs="?", default=None,
                   help="a built-in workload (raycluster, rayjob, rayservice), a scenario name "
                        "(see `emu list`), or MODULE:ATTR, your own Workload value (or a "
                        "function returning one) in a module on PYTHONPATH")
    p.add_argument("-f", "--file", metavar="FILE.yaml",
                   help="explore your own manifests (a kind: KnobSpace document declares knobs)")
    p.add_argument("--budget", default=None,
                   help="runs (e.g. 2000) or a wall-clock duration (90s, 5m); default 200")
    p.add_argument("--seed", type=int, default=None, help="the seed of every run (default 0)")
    p.add_argument("--jobs", "-j", type=int, default=1, help="local worker processes (default 1)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on a Ray cluster (ray.init() locally when no ADDRESS)")
    p.add_argument("--ray-cpus", type=int, default=None,
                   help="CPUs of a local Ray started by --ray (default: Ray's)")
    p.add_argument("--out", metavar="DIR",
                   help="the result store and findings (default emu-explore/WORKLOAD-seedS); "
                        "a later run with the same DIR resumes")
    p.add_argument("--families", metavar="A,B",
                   help="only these plan families (crash-after-writes, pause-before-writes, "
                        "lose-responses, pod-loss, outages, perturbations, serve-failures); "
                        "default: the workload's, else all but serve-failures")
    p.add_argument("--search", choices=("uniform", "guided"), default=None,
                   help="uniform: the candidate plans in order (default); guided: most of each "
                        "round of runs mutates the runs that reached something new")
    p.add_argument("--invariants", metavar="MODULE:ATTR", default=None,
                   help="check your own invariants instead of KubeRay's: an Invariant value, "
                        "a list of them, or a function returning either, in a module on "
                        "PYTHONPATH")
    p.add_argument("--json", action="store_true", help="end with one JSON object")
    p.add_argument("--known", action="store_true",
                   help="list the known KubeRay findings (F1..) with what to do about each, "
                        "and exit (with --json: as one JSON object)")
    p.add_argument("--shrink-budget", type=int, default=None,
                   help="runs spent shrinking each finding (default 60)")
    p.add_argument("--per-invariant", type=int, default=None, metavar="N",
                   help="shrink at most N failing runs of each invariant, new fault families "
                        "first; the rest are listed, not dropped (default 3)")
    p.add_argument("--no-fork", action="store_true",
                   help="play every run in this process, not in a forked worker (no "
                        "wall-clock limit per run; for debugging)")
    p.add_argument("--seeds", type=int, default=None,
                   help="legacy: run the scenario WORKLOAD under N seeds, its own checks only")
    p.add_argument("--start", type=int, default=None,
                   help="legacy: the first seed of --seeds (default 0)")


#: The explorer's options a legacy ``--seeds`` sweep has no use for, by their flag.
SEARCH_ONLY = {"file": "-f", "budget": "--budget", "seed": "--seed", "ray": "--ray",
               "ray_cpus": "--ray-cpus", "out": "--out", "json": "--json",
               "families": "--families", "search": "--search",
               "shrink_budget": "--shrink-budget", "per_invariant": "--per-invariant",
               "no_fork": "--no-fork", "invariants": "--invariants"}
#: What an option left out means (the parser keeps None, so a given option can be told apart).
DEFAULTS = {"budget": "200", "seed": 0, "shrink_budget": 60, "per_invariant": 3, "start": 0,
            "search": "uniform"}


def mode_error(args: argparse.Namespace) -> str | None:
    """What is wrong with combining these options, or None: an option the chosen mode would
    accept and silently ignore is refused instead (the legacy ``--seeds`` sweep takes only
    WORKLOAD, --start and -j; --start needs --seeds, --ray-cpus needs --ray; --known takes only
    --json)."""
    if getattr(args, "known", False):
        given = [flag for name, flag in {**SEARCH_ONLY, "seeds": "--seeds", "start": "--start",
                                         "workload": "WORKLOAD"}.items()
                 if name != "json" and getattr(args, name, None) not in (None, False)]
        if given or args.jobs != 1:
            return (f"--known lists the known findings and takes only --json, not "
                    f"{', '.join(given) or '-j'}")
        return None
    if args.seeds is not None:
        given = [flag for name, flag in SEARCH_ONLY.items()
                 if getattr(args, name, None) not in (None, False)]
        if given:
            return (f"--seeds (the legacy seed sweep of a scenario) does not take "
                    f"{', '.join(given)}; leave out --seeds to explore")
    elif args.start is not None:
        return "--start is the first seed of --seeds; the explorer takes --seed"
    if args.ray_cpus is not None and args.ray is None:
        return "--ray-cpus sets the CPUs of a local Ray started by --ray; add --ray"
    if args.ray_cpus is not None and args.ray:
        return (f"--ray-cpus sets the CPUs of a local Ray; the cluster at {args.ray} has its "
                "own")
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None and (name != "start" or args.seeds is not None):
            setattr(args, name, value)
    return None


#: Failing runs past the shrink cap printed in full; the rest are counted (all are in --json).
SHOWN_UNSHRUNK = 5


def _fail(message: str) -> int:
    print(f"emu explore: {message}", file=sys.stderr)
    return 2


def run_explore(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import workload as wl_mod

    error = mode_error(args)
    if error is not None:
        return _fail(error)
    if getattr(args, "known", False):
        return print_known(args.json)
    if (args.workload is None) == (args.file is None):
        return _fail("give a WORKLOAD (raycluster, rayjob, rayservice or a scenario) or -f FILE")
    try:
        budget, duration = parse_budget(args.budget)
    except ValueError as err:
        return _fail(str(err))
    if args.jobs < 1:
        return _fail(f"--jobs must be at least 1, not {args.jobs}")
    if args.jobs > 1 and args.ray is not None:
        return _fail("choose -j N or --ray, not both")
    if args.shrink_budget < 0:
        return _fail(f"--shrink-budget must be 0 or more, not {args.shrink_budget}")
    if args.per_invariant < 1:
        return _fail(f"--per-invariant must be at least 1, not {args.per_invariant}")
    try:
        workload = (wl_mod.from_file(args.file) if args.file
                    else wl_mod.resolve(args.workload))
    except (KeyError, ValueError) as err:
        return _fail(str(err.args[0]) if err.args else str(err))
    if args.families is not None:
        import attrs

        from .plans import check_families

        families = tuple(f.strip() for f in args.families.split(",") if f.strip())
        try:
            check_families(families)
        except ValueError as err:
            return _fail(f"--families: {err}")
        if not families:
            return _fail("--families names no family")
        workload = attrs.evolve(workload, families=families)
    invariants = None
    if getattr(args, "invariants", None) is not None:
        try:
            invariants = load_invariants(args.invariants)
        except ValueError as err:
            return _fail(str(err))
    out = Path(args.out) if args.out else Path("emu-explore") / f"{workload.name}-seed{args.seed}"
    source = f"-f {args.file}" if args.file else workload.name
    command = f"emu explore {source} --seed {args.seed} --budget {args.budget}" + (
        f" --families {','.join(workload.families)}" if args.families is not None else "") + (
        " --search guided" if args.search == "guided" else "") + (
        f" --invariants {args.invariants}" if invariants is not None else "")
    return _explore(args, workload, budget, duration, out, command, invariants)


def load_invariants(ref: str) -> list[Any]:
    """``--invariants MODULE:ATTR``: an `Invariant` value, a list or tuple of them, or a
    function returning either; a `ValueError` naming what is not an invariant."""
    from ..invariants import Invariant
    from .workload import load_python

    obj = load_python(ref, "--invariants")
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    bad = [repr(i) for i in items if not isinstance(i, Invariant)]
    if bad or not items:
        raise ValueError(f"--invariants {ref!r} must give Invariant values (emu.invariants."
                         f"Invariant), not {', '.join(bad) or 'an empty list'}")
    return items


def _explore(args: argparse.Namespace, workload: Any, budget: int | None,
             duration: float | None, out: Any, command: str,
             invariants: list[Any] | None = None) -> int:
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .search import (
        Executor,
        NoPlans,
        ProcessExecutor,
        RayExecutor,
        ReferenceRunError,
        explore,
    )
    from .store import StoreMismatch

    fork = False if args.no_fork else None
    if args.ray is not None:
        executor: Executor = RayExecutor(args.ray or None, args.ray_cpus, fork=fork)
    elif args.jobs > 1:
        executor = ProcessExecutor(args.jobs, fork=fork)
    else:
        executor = Executor(fork=fork)
    console = Console(stderr=True)
    start = time.perf_counter()
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[rate]:.1f} runs/s"),
                      TextColumn("findings: {task.fields[found]}"), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task(f"explore {workload.name}", total=budget or 0, rate=0.0,
                                found=0)

            def progress(done: int, total: int, found: int) -> None:
                wall = time.perf_counter() - start
                bar.update(task, completed=done, total=total, found=found,
                           rate=done / wall if wall > 0 else 0.0)

            result = explore(workload, budget=budget, duration=duration, seed=args.seed,
                             executor=executor, out=out, shrink_budget=args.shrink_budget,
                             progress=progress, replay_command=command,
                             per_invariant=args.per_invariant, search=args.search,
                             invariants=invariants)
    except (StoreMismatch, ReferenceRunError, NoPlans) as err:
        return _fail(str(err))
    finally:
        executor.close()
    findings = []
    for f in result.findings:
        item = f.to_json()
        item["replay"] = f"pytest {f.test_file}" if f.test_file else command
        findings.append(item)
    errors = [{"run": n, "error": e.error, "plan": repr(e.spec.plan),
               "knobs": workload.changed(e.spec.knob_map)} for n, e in _numbered(result)]
    failed = 1 if findings or errors else 0
    if args.json:
        sys.stdout.write(orjson.dumps({"runs": result.runs, "seed": args.seed,
                                       "findings": findings, "errors": errors,
                                       "unshrunk": [u.to_json() for u in result.unshrunk],
                                       "idle": [{"run": n, "plan": repr(r.spec.plan),
                                                 "knobs": workload.changed(r.spec.knob_map),
                                                 "unperformed": list(r.unperformed)}
                                                for n, r in result.idle],
                                       "partial": result.partial,
                                       "notes": list(result.notes),
                                       "wall_seconds": round(result.wall, 3)},
                                      default=str).decode() + "\n")
        return failed
    for note in result.notes:
        print(f"note: {note}")
    for n, f in enumerate(result.findings, 1):
        print(f"finding {n}: [{f.invariant}] {f.message}")
        if f.also:
            print(f"  also:   the same run broke {', '.join(f.also)}")
        if f.verdict is not None:
            for line in verdict_lines(f.verdict):
                print(line)
        if f.without_faults and f.knobs:
            print("  plan:   [] (no fault: these knobs alone break it; it explains every "
                  "failing run of this invariant with them)")
        elif f.without_faults:
            print("  plan:   [] (no fault: the reference run, at the default knobs, already "
                  "breaks it; it explains every failing run of this invariant)")
        else:
            print(f"  plan:   {f.plan!r}")
        if f.knobs:
            print(f"  knobs:  {f.knobs}")
        if f.shrink_cut:
            print(f"  shrunk: {f.shrink_runs} runs, all of --shrink-budget: a larger one may "
                  "shrink it further")
        print(f"  seed:   {f.seed}" + (f"  (trace digest {f.digest[:16]})" if f.digest else ""))
        print(f"  test:   {f.test_file}")
        print(f"  html:   {f.html}")
        print(f"  replay: pytest {f.test_file}")
    explained = sum(1 for u in result.unshrunk if u.explained)
    capped = [u for u in result.unshrunk if not u.explained]
    if explained:
        print(f"{explained} other failing plan shape(s) contain a finding's minimized shape "
              f"(not shrunk; --json lists them)")
    for u in capped[:SHOWN_UNSHRUNK]:
        print(f"not shrunk (--per-invariant {args.per_invariant} reached): [{u.invariant}] "
              f"run {u.run}: {u.message}")
        print(f"  plan:   {u.plan!r}")
        if u.knobs:
            print(f"  knobs:  {u.knobs}")
    if len(capped) > SHOWN_UNSHRUNK:
        counts = Counter(u.invariant for u in capped[SHOWN_UNSHRUNK:])
        print(f"... and {len(capped) - SHOWN_UNSHRUNK} more not shrunk ("
              + ", ".join(f"{n} {inv}" for inv, n in sorted(counts.items()))
              + "): --json lists them; a larger --per-invariant shrinks them")
    for e in errors[:SHOWN_ERRORS]:
        print(f"run error: run {e['run']}: {e['error']}")
        print(f"  plan:   {e['plan']}")
        if e["knobs"]:
            print(f"  knobs:  {e['knobs']}")
    if len(errors) > SHOWN_ERRORS:
        print(f"... and {len(errors) - SHOWN_ERRORS} more run error(s): --json lists them")
    if result.idle:
        reasons = "; ".join(f"{n} x {why}" for why, n in result.idle_reasons()[:3])
        print(f"{len(result.idle)} of the {result.runs} runs performed no fault of their plan "
              f"(it found nothing to act on), so they tested nothing the reference run did "
              f"not" + (f": {reasons}" if reasons else "") + " (--json lists them)")
    if result.partial:
        print(f"{result.partial} run(s) performed only some of their plan's faults")
    played = result.runs - result.reused
    rate = (f", {played / result.wall:.1f} runs/s played" if played and result.wall > 0
            else "")
    first = (f", first after {result.first_finding_wall:.1f}s"
             if result.first_finding_wall is not None else "")
    print(f"{result.runs} runs of seed {args.seed} ({result.reused} from {out}) in "
          f"{result.wall:.1f}s wall ({executor.jobs} worker(s){rate}); "
          f"{len(result.findings)} distinct finding(s){first}, {len(errors)} run error(s)")
    return failed


#: Runs that raised printed in full; the rest are counted (all are in --json).
SHOWN_ERRORS = 5


def print_known(as_json: bool) -> int:
    """``emu explore --known``: the known findings shipped with the package, each with its Go
    functions, upstream links and what to do."""
    from .known import KNOWN

    if as_json:
        sys.stdout.write(orjson.dumps({"known": [
            {"id": k.id, "title": k.title, "go": list(k.go), "links": list(k.links),
             "mitigation": k.mitigation,
             "variants": [{"variant": s.variant, "invariants": sorted(s.invariants),
                           **({"mitigation": s.mitigation} if s.mitigation else {})}
                          for s in k.shapes]} for k in KNOWN]}).decode() + "\n")
        return 0
    for k in KNOWN:
        print(f"{k.id}. {k.title}")
        print(f"  go:     {'; '.join(k.go)}")
        if k.links:
            print(f"  links:  {' '.join(k.links)}")
        print(f"  avoid:  {k.mitigation}")
        for shape in k.shapes:
            if shape.mitigation:
                print(f"  avoid ({shape.variant}): {shape.mitigation}")
    return 0


def verdict_lines(verdict: Any) -> list[str]:
    """A finding's known id, class and mitigation, as the text report prints them (three or
    four lines; --json carries every Go function and link)."""
    if verdict.known == "new":
        lines = ["  known:  new (no known finding has this shape; emu explore --known lists them)"]
    else:
        lines = [f"  known:  {verdict.known}, {verdict.variant or verdict.title} "
                 "(emu explore --known)"]
    go = (f" ({verdict.go[0]}" + (f", +{len(verdict.go) - 1} more in --json" if len(verdict.go) > 1
                                   else "") + ")") if verdict.go else ""
    if verdict.klass == "kuberay":
        lines.append(f"  class:  kuberay{go}")
    else:
        lines.append(f"  class:  {verdict.klass}: {verdict.basis}")
    if verdict.known != "new" or verdict.mitigation:
        lines.append(f"  avoid:  {verdict.mitigation or 'none known'}")
    return lines


def _numbered(result: Any) -> list[tuple[int, Any]]:
    """The runs that raised, each with its 1-based number in plan order."""
    return list(zip(result.error_runs, result.errors, strict=True))
