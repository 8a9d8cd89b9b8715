"""The search: reference run → candidate plans → runs (here, ``-j N`` processes, or Ray tasks)
→ findings, deduplicated, shrunk, exported.

`explore` is what ``emu explore`` calls; each stage it uses is a module of its own. Runs are
cut into batches of consecutive specs; a batch goes to one `runner.ForkServer` (by default a
forked worker playing fresh worlds). Results are put back in spec order before
anything is decided, so the findings of a ``--seed`` and ``--budget`` (a number of runs) are the
same whichever executor ran them. A duration budget stops after the batch that crosses it, so
what it finds depends on the machine's speed (said in docs/explore.md).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..faults import FaultPlan
from . import guide, plans
from .faults import AtCall
from .known import Verdict, classify
from .runner import ForkServer, RunResult, RunSpec
from .shrink import shape, shrink
from .store import Store
from .workload import Workload

Obj = dict[str, Any]

#: Runs per fork-server batch (one `prepare` each).
BATCH = 16
#: How the search picks its plans (`explore`'s ``search``).
SEARCHES = ("uniform", "guided")


@attrs.frozen
class Finding:
    """A distinct violation: the invariant, what was seen, the minimized run that shows it and
    where its pytest file and timeline were written."""

    invariant: str
    message: str
    at: float
    knobs: dict[str, Any]
    plan: FaultPlan
    seed: int
    workload: str
    replay: str = ""
    test_file: str = ""
    html: str = ""
    excerpt: str = attrs.field(default="", repr=False)
    runs_to_find: int = 0
    shrink_runs: int = 0
    #: The other invariants the minimized run also broke (a steadiness finding whose run also
    #: had two live heads says so here, so its cause is not left to a replay).
    also: tuple[str, ...] = ()
    #: The trace digest of the exported run (its pytest file replays that very run).
    digest: str = ""
    #: The shrinker spent its whole budget: the plan may shrink further with a larger one.
    shrink_cut: bool = False
    #: Which known finding it matches, its class and what to do (`emu.explore.known`).
    verdict: Verdict | None = None
    #: The emulator's own consistency checks the minimized run broke (`emu.explore.checks`).
    emulator: tuple[Obj, ...] = ()

    @property
    def without_faults(self) -> bool:
        """Whether no fault is needed: the reference run (no fault, default knobs) already
        breaks the invariant, or with `knobs`, those knob settings alone do."""
        return not self.plan.faults

    def to_json(self) -> Obj:
        return {"invariant": self.invariant, "message": self.message, "at": self.at,
                "seed": self.seed, "plan": repr(self.plan), "knobs": dict(self.knobs),
                "without_faults": self.without_faults, "replay": self.replay,
                "test_file": self.test_file, "html": self.html, "digest": self.digest,
                "runs_to_find": self.runs_to_find, "shrink_runs": self.shrink_runs,
                "shrink_cut": self.shrink_cut,
                "also": list(self.also),
                **(self.verdict.to_json() if self.verdict is not None
                   else {"known": None, "class": None, "mitigation": None}),
                "emulator": list(self.emulator)}


class NoPlans(RuntimeError):
    """The plan families generate nothing for this workload (no operator call, no transition
    they key on): a search would run nothing and report nothing found."""


class ReferenceRunError(RuntimeError):
    """The reference run (no fault, default knobs) itself raised: nothing can be explored
    until the workload runs (a controller that does not start, a manifest refused...)."""


@attrs.frozen
class Unshrunk:
    """A failing run whose plan shape was not shrunk, and why, so no failure is dropped unseen:
    ``explained`` names the finding (1-based) whose minimized shape its plan contains, with the
    finding's knob changes among its own (most likely the same bug with extra faults); 0 means
    its invariant had had its ``per_invariant`` shrinks already."""

    invariant: str
    message: str
    knobs: dict[str, Any]
    plan: FaultPlan
    run: int
    explained: int = 0

    def to_json(self) -> Obj:
        return {"invariant": self.invariant, "message": self.message, "plan": repr(self.plan),
                "knobs": dict(self.knobs), "run": self.run, "explained_by": self.explained}


@attrs.frozen
class ExploreResult:
    runs: int
    findings: tuple[Finding, ...]
    errors: tuple[RunResult, ...]
    wall: float
    first_finding_wall: float | None
    reused: int = 0
    #: Failing plan shapes not shrunk (explained by a finding, or past the shrink cap).
    unshrunk: tuple[Unshrunk, ...] = ()
    #: The runs (1-based, in plan order) none of whose faults took effect: they tested
    #: nothing the reference run did not, so they are counted apart, never as tested plans.
    idle: tuple[tuple[int, RunResult], ...] = ()
    #: How many runs performed some of their plan's faults but not all.
    partial: int = 0
    #: Each of `errors`' run numbers (1-based, in plan order), to name it.
    error_runs: tuple[int, ...] = ()
    #: What the user should know about the search itself (a family with nothing to act on).
    notes: tuple[str, ...] = ()

    def idle_reasons(self) -> list[tuple[str, int]]:
        """Why the idle runs' faults never took effect: (fault type: why, runs), most
        frequent first."""
        counts: Counter[str] = Counter()
        for _, r in self.idle:
            counts.update({f"{str(u['fault']).split('(', 1)[0]}: {u['why']}"
                           for u in r.unperformed})
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


# ---------------------------------------------------------------------------------------------
# Executors: each runs batches of specs and yields (batch index, results) as they finish
# ---------------------------------------------------------------------------------------------


def _run_batch(args: tuple[Workload, int, list[Obj], bool | None, Any]) -> list[Obj]:
    """A worker's job (a -j process or a Ray task): one fork-server batch; plain dicts cross
    the process boundary."""
    workload, seed, specs, fork, invariants = args
    server = ForkServer(workload, seed, invariants, fork=fork)
    return [r.to_dict() for r in server.run([RunSpec.from_dict(s) for s in specs])]


class Executor:
    """Runs batches in this process."""

    jobs = 1

    def __init__(self, fork: bool | None = None) -> None:
        self.fork = fork
        #: The invariants every run checks (None: `emu.invariants.kuberay_invariants()`).
        self.invariants: Any = None

    def map(self, workload: Workload, seed: int, batches: Sequence[list[RunSpec]]
            ) -> Iterator[tuple[int, list[RunResult]]]:
        for i, batch in enumerate(batches):
            server = ForkServer(workload, seed, self.invariants, fork=self.fork)
            yield i, list(server.run(batch))

    def close(self) -> None:
        pass


class ProcessExecutor(Executor):
    """``-j N``: batches in N worker processes (each a fork-server)."""

    def __init__(self, jobs: int, fork: bool | None = None) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        super().__init__(fork)
        self.jobs = jobs
        self.pool = ProcessPoolExecutor(max_workers=jobs,
                                        mp_context=multiprocessing.get_context("fork"))

    def map(self, workload: Workload, seed: int, batches: Sequence[list[RunSpec]]
            ) -> Iterator[tuple[int, list[RunResult]]]:
        from concurrent.futures import as_completed

        futures = {self.pool.submit(_run_batch, (workload, seed, [s.to_dict() for s in b],
                                                 self.fork, self.invariants)): i
                   for i, b in enumerate(batches)}
        for fut in as_completed(futures):
            yield futures[fut], [RunResult.from_dict(d) for d in fut.result()]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


#: How many times a local ``ray.init`` is tried (see `_ray_init`).
LOCAL_RAY_STARTS = 3


def _ray_init(ray: Any, kwargs: dict[str, Any], *, local: bool) -> None:
    """``ray.init(**kwargs)``; a local start that fails only because its raylet took more than
    Ray's fixed 30 s to register (``Node.__init__``; not configurable) is shut down and tried
    again, up to `LOCAL_RAY_STARTS` times: on a loaded machine that window is missed although
    nothing is wrong. Any other error, and every error joining a cluster, is raised at once."""
    for attempt in range(1, LOCAL_RAY_STARTS + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as err:
            if not local or "timed out during startup" not in str(err) \
                    or attempt == LOCAL_RAY_STARTS:
                raise
            ray.shutdown()


class RayExecutor(Executor):
    """``--ray [ADDRESS]``: batches as tasks on a Ray cluster (``ray.init()`` locally when no
    address is given, with ``num_cpus`` CPUs); the worker processes run fork-servers too."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 fork: bool | None = None) -> None:
        import ray

        super().__init__(fork)
        self.ray = ray
        self.started = not ray.is_initialized()
        if self.started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "configure_logging": False}
            if address:
                kwargs["address"] = address
            else:
                import os
                import sys

                # local workers import what the driver can (your workload's install module)
                kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(
                    p for p in sys.path if p)}}
                if num_cpus:
                    kwargs["num_cpus"] = num_cpus
            _ray_init(ray, kwargs, local=not address)
        self.jobs = int(ray.cluster_resources().get("CPU", 1))
        self.task = ray.remote(num_cpus=1)(_run_batch)

    def map(self, workload: Workload, seed: int, batches: Sequence[list[RunSpec]]
            ) -> Iterator[tuple[int, list[RunResult]]]:
        refs = {self.task.remote((workload, seed, [s.to_dict() for s in b],
                                  self.fork, self.invariants)): i
                for i, b in enumerate(batches)}
        pending = list(refs)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for ref in done:
                yield refs[ref], [RunResult.from_dict(d) for d in self.ray.get(ref)]

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


# ---------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------


def _batches(specs: Sequence[RunSpec], size: int) -> list[list[RunSpec]]:
    return [list(specs[i:i + size]) for i in range(0, len(specs), size)]


def _family(spec: RunSpec) -> tuple[str, ...]:
    """A plan's fault family: the sorted kinds of fault it uses (an `AtCall` by what it does),
    without targets, times or counts."""
    return tuple(sorted(type(f.then).__name__ if isinstance(f, AtCall) else type(f).__name__
                        for f in spec.plan))


def _contains(big: tuple[Any, ...], small: tuple[Any, ...]) -> bool:
    """Whether plan shape ``big`` has every fault of ``small`` (as many times)."""
    return not Counter(small) - Counter(big)


#: The families built on the operator's own calls (the rest key on transitions and times).
CALL_FAMILIES = ("crash-after-writes", "pause-before-writes", "lose-responses", "perturbations")


def _notes(workload: Workload, actions: Sequence[Obj]) -> tuple[str, ...]:
    """What the reference run says the search cannot do: with no call by a process named like
    ``Setup.operator``, the families built on the operator's calls have no plan (a misnamed
    operator would weaken the search silently)."""
    if workload.scenario is not None or any(a["type"] == "call" for a in actions):
        return ()
    wanted = [f for f in CALL_FAMILIES if not workload.families or f in workload.families]
    if not wanted:
        return ()
    return (f"the reference run recorded no call by a process named like "
            f"{workload.setup.operator!r}, so the {', '.join(wanted)} famil"
            f"{'y has' if len(wanted) == 1 else 'ies have'} no plan: check Setup.operator "
            "(a part of your controller's process names)",)


def explore(workload: Workload, *, budget: int | None = 200, duration: float | None = None,
            seed: int = 0, executor: Executor | None = None, out: str | Path | None = None,
            shrink_budget: int = 60, export: bool = True,
            progress: Callable[[int, int, int], None] | None = None,
            replay_command: str = "", batch: int = BATCH, per_invariant: int = 3,
            invariants: Sequence[Any] | None = None, search: str = "uniform") -> ExploreResult:
    """Search ``workload`` for invariant violations with ``budget`` runs (or for ``duration``
    wall seconds) from ``seed``; shrink and export each distinct finding (into ``out``/findings
    when ``out`` is given). ``progress(done, total, findings)`` is told after each batch. At
    failing runs are shrunk simplest first, at most ``per_invariant`` of each invariant, a new
    fault family before one already shrunk, skipping a run whose plan contains a finding's
    minimized shape; the findings are what remains distinct by (invariant, minimized plan
    shape), and every failing shape not shrunk is listed in `ExploreResult.unshrunk`. ``invariants``
    replace `emu.invariants.kuberay_invariants()` (values, so they travel to workers).
    ``search``: ``uniform`` runs the candidate plans in their order; ``guided`` runs them in
    rounds and gives most of each round to mutations of the runs that reached something new
    (`guide.Guided`)."""
    if search not in SEARCHES:
        raise ValueError(f"search is one of {', '.join(SEARCHES)}, not {search!r}")
    from .export import export_finding

    executor = executor or Executor()
    executor.invariants = list(invariants) if invariants is not None else None
    store = Store(out, workload=workload.name, seed=seed)
    start = time.perf_counter()
    total = budget if budget is not None else 10_000
    # 1. the reference run (no faults, default knobs), and the candidates it suggests
    [reference] = list(ForkServer(workload, seed, executor.invariants, fork=False)
                       .run([RunSpec()], record=True))
    if reference.error:
        raise ReferenceRunError(f"the reference run of {workload.name!r} (no fault, default "
                                f"knobs, seed {seed}) raised: {reference.error}")
    specs = plans.candidates(workload, reference.actions, seed, total)
    notes = _notes(workload, reference.actions)
    if not specs:
        calls = sum(1 for a in reference.actions if a["type"] == "call")
        moves = sum(1 for a in reference.actions if a["type"] == "transition")
        named = ", ".join(workload.families) or "all but the opt-in ones"
        raise NoPlans(f"no plan to run: the plan families ({named}) generate none for "
                      f"{workload.name!r}, whose reference run had {calls} call(s) by a process "
                      f"named like {workload.setup.operator!r} and {moves} state "
                      "transition(s); check Setup.operator and the families")
    # 2. run them (the store's results are reused), in order: all of them (uniform), or in
    # rounds whose plans the runs before them choose (guided)
    reused = 0
    first_finding: float | None = None
    findings_seen = 0
    results: list[RunResult | None] = []
    stopped = False
    guided = (guide.Guided(workload, reference.actions, specs, seed) if search == "guided"
              else None)

    def run_round(round_specs: list[RunSpec]) -> bool:
        """Play ``round_specs`` (appended to ``results`` in order); False once the duration
        is spent."""
        nonlocal reused, first_finding, findings_seen
        base = len(results)
        results.extend([None] * len(round_specs))
        todo: list[int] = []
        for i, spec in enumerate(round_specs):
            hit = store.get(spec.key())
            if hit is not None:
                results[base + i] = hit
                reused += 1
            else:
                todo.append(i)
        if progress and base == 0:
            progress(reused, len(specs), 0)
        # a small search still gives every worker a batch (a batch's size never changes what
        # a budget of runs finds: results are put back in plan order)
        size = max(1, min(batch, -(-len(todo) // max(1, executor.jobs))))
        batches = _batches([round_specs[i] for i in todo], size)
        offsets = [todo[j * size:(j + 1) * size] for j in range(len(batches))]
        for bi, batch_results in executor.map(workload, seed, batches):
            for idx, r in zip(offsets[bi], batch_results, strict=True):
                results[base + idx] = r
                store.add(r)
                if r.violations:
                    findings_seen += 1
                    if first_finding is None:
                        first_finding = time.perf_counter() - start
            if progress:
                progress(sum(r is not None for r in results), len(specs), findings_seen)
            if duration is not None and time.perf_counter() - start >= duration:
                return False
        return True

    if guided is None:
        stopped = not run_round(list(specs))
    else:
        while len(results) < total and not stopped:
            round_specs = guided.next(min(guide.ROUND, total - len(results)))
            if not round_specs:
                break
            stopped = not run_round(round_specs)
            if not stopped:
                guided.observe([r for r in results[-len(round_specs):] if r is not None])
    if stopped:
        # keep only the prefix of runs that finished, so the outcome is a prefix of the order
        cut = next((i for i, r in enumerate(results) if r is None), len(results))
        results = results[:cut]
    finished = [r for r in results if r is not None]
    # 3. distinct findings: first run of each (invariant, plan shape), in spec order
    groups: dict[tuple[Any, ...], tuple[int, RunResult, Obj]] = {}
    for i, r in enumerate(finished):
        for v in r.violations:
            key = (v["invariant"], shape(r.spec))
            if key not in groups:
                groups[key] = (i, r, v)
    # 4. shrink each, then dedupe again by (invariant, minimized shape)
    shrink_exec = Executor(executor.fork)
    shrink_exec.invariants = executor.invariants

    def run_specs(batch_specs: list[RunSpec]) -> list[RunResult]:
        out_results: list[RunResult] = []
        for _, rs in executor.map(workload, seed, _batches(batch_specs, batch)) \
                if executor.jobs > 1 else shrink_exec.map(workload, seed, [batch_specs]):
            out_results.extend(rs)
        key_order = {s.key(): n for n, s in enumerate(batch_specs)}
        return sorted(out_results, key=lambda r: key_order[r.spec.key()])

    minimized: dict[tuple[Any, ...], Finding] = {}

    def found(invariant: str, v: Obj, spec: RunSpec, violations: Sequence[Obj],
              runs_to_find: int, spent: int, emulator: Sequence[Obj] = ()) -> Finding:
        knobs = workload.changed(spec.knob_map)
        verdict = classify(workload, spec.knob_map, spec.plan, invariant, v, violations,
                           emulator)
        finding = Finding(invariant=invariant, message=str(v["message"]), at=float(v["at"]),
                          knobs=knobs, plan=spec.plan, seed=seed, workload=workload.name,
                          replay=replay_command, runs_to_find=runs_to_find, shrink_runs=spent,
                          shrink_cut=0 < shrink_budget <= spent,
                          also=tuple(sorted({str(x["invariant"]) for x in violations}
                                            - {invariant})),
                          verdict=verdict, emulator=tuple(emulator))
        if export and out is not None:
            paths = export_finding(Path(out) / "findings", workload, RunSpec(knobs, spec.plan),
                                   seed, invariant, finding.message, finding.at,
                                   replay_command=replay_command,
                                   invariants=executor.invariants, verdict=verdict)
            finding = attrs.evolve(finding, test_file=paths["test_file"], html=paths["html"],
                                   excerpt=paths["excerpt"], digest=paths["digest"])
        return finding

    # An invariant the reference run (no fault, default knobs) already breaks is a finding
    # with an empty plan, and it explains every failing run of that invariant: shrinking one
    # of them would blame a fault that plays no part (a goal the workload never reaches, a
    # bug that needs no fault).
    for v in reference.violations:
        key = (str(v["invariant"]), ())
        if key not in minimized:
            minimized[key] = found(key[0], v, RunSpec(), reference.violations, 0, 0,
                                   reference.emulator)
    unshrunk: list[Unshrunk] = []
    shrunk_per_invariant: dict[str, int] = {}
    families: dict[str, set[tuple[str, ...]]] = {}
    # Simplest first (fewest faults, fewest knobs changed, earliest run), at most
    # `per_invariant` shrinks of each invariant, a failing run of a fault family not shrunk yet
    # for its invariant before one of a family already shrunk. A failing run whose plan
    # contains the minimized shape of a finding of its invariant, with the finding's knob
    # changes among its own, is explained by it. Every failing shape not shrunk is listed.
    pending = sorted(groups.items(), key=lambda kv: (
        len(kv[1][1].spec.plan), len(workload.changed(kv[1][1].spec.knob_map)), kv[1][0]))
    family_of = {key: _family(r.spec) for key, (_i, r, _v) in groups.items()}
    while pending:
        pick = next((n for n, (key, _) in enumerate(pending)
                     if family_of[key] not in families.get(key[0], set())), 0)
        (invariant, group_shape), (i, r, v) = pending.pop(pick)
        changed = workload.changed(r.spec.knob_map)
        explained = next((n for n, (key, f) in enumerate(minimized.items(), 1)
                          if key[0] == invariant and _contains(group_shape, key[1])
                          and f.knobs.items() <= changed.items()), 0)
        if explained or shrunk_per_invariant.get(invariant, 0) >= per_invariant:
            unshrunk.append(Unshrunk(invariant=invariant, message=str(v["message"]),
                                     knobs=changed, plan=r.spec.plan,
                                     run=i + 1, explained=explained))
            continue
        shrunk_per_invariant[invariant] = shrunk_per_invariant.get(invariant, 0) + 1
        families.setdefault(invariant, set()).add(family_of[(invariant, group_shape)])
        small, spent = shrink(workload, r, invariant, run_specs, budget=shrink_budget)
        sv = next(x for x in small.violations if x["invariant"] == invariant)
        key = (invariant, shape(small.spec))
        if key in minimized:
            continue
        minimized[key] = found(invariant, sv, small.spec, small.violations, i + 1, spent,
                               small.emulator)
    errors = tuple((i + 1, r) for i, r in enumerate(finished) if r.error)
    return ExploreResult(runs=len(finished), findings=tuple(minimized.values()),
                         errors=tuple(r for _, r in errors), error_runs=tuple(n for n, _ in errors),
                         wall=time.perf_counter() - start, first_finding_wall=first_finding,
                         reused=reused, unshrunk=tuple(unshrunk), notes=notes,
                         idle=tuple((i + 1, r) for i, r in enumerate(finished) if r.idle),
                         partial=sum(1 for r in finished
                                     if r.unperformed and r.performed and not r.error))
