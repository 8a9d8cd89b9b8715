"""Seeded mutation sampler: would our tests notice if this line were wrong?

A small AST-based mutator (no dependency: mutmut and cosmic-ray both want to own the test run and
the tree, and we only need a reproducible sample). It enumerates every mutation point of a module
in source order — flipped comparisons, swapped ``and``/``or``, negated ``if``/``while``
conditions, changed numeric constants and booleans, deleted statements — draws a sample with
``random.Random(seed)``, and runs each mutant against that module's own fast tests (``MODULES``
below) in a private copy of the tree, so the working tree never holds a mutant, even on Ctrl-C.

Mutant ids are stable across unrelated edits (module, enclosing function, operator and a hash of
the original and replacement text), so ``scripts/mutation_equivalent.txt`` can list the mutants
judged equivalent, one per line with a one-line reason; they are left out of the score, and
``--check-equivalent`` re-runs exactly those to confirm each still survives and still exists.

    nice -n 19 python scripts/mutation.py --seed 1 --sample 30
    nice -n 19 python scripts/mutation.py --module emu/runtime/leaderelection.py --sample 0
    nice -n 19 python scripts/mutation.py --check-equivalent
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "scripts" / "mutation_equivalent.txt"

# module -> the fast tests that own its behaviour (a mutant is killed when these fail)
MODULES: dict[str, list[str]] = {
    "emu/apiserver/server.py": [
        "tests/conformance", "tests/apiserver/test_unit_store.py",
        "tests/apiserver/test_unit_validation_kinds.py",
    ],
    "emu/kuberay/rayjob.py": [
        "tests/kuberay/test_rayjob_pinned.py",
        "tests/kuberay/test_rayjob_controller_unit.py",
        "tests/kuberay/test_rayjob_controller.py",
        "tests/kuberay/test_rayjob_controller_suspended.py",
        "tests/kuberay/test_rayjob_support.py",
    ],
    "emu/kuberay/raycluster.py": [
        "tests/kuberay/test_raycluster_pinned.py",
        "tests/kuberay/test_raycluster_controller_unit.py",
        "tests/kuberay/test_raycluster_controller.py",
        "tests/kuberay/test_raycluster_gcs_ft.py",
        "tests/kuberay/test_raycluster_support.py",
    ],
    "emu/runtime/leaderelection.py": [
        "tests/runtime/test_leaderelection_pinned.py",
        "tests/runtime/test_leaderelection.py",
    ],
}

_CMP_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
# boundary shifts catch off-by-one tests miss: < vs <=
_CMP_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
}


@dataclass(frozen=True)
class Mutant:
    module: str
    qualname: str
    op: str
    line: int
    start: int  # character offsets into the module source
    end: int
    replacement: str
    digest: str  # hash of (function, operator, original text, replacement, occurrence)

    @property
    def id(self) -> str:
        return f"{self.module}:{self.qualname}:{self.op}:{self.digest}"

    def apply(self, source: str) -> str:
        return source[:self.start] + self.replacement + source[self.end:]


def _offsets(source: str) -> list[int]:
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    starts.append(total)
    return starts


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _unparse_cmp(node: ast.Compare, i: int, new: type[ast.cmpop]) -> str:
    ops = list(node.ops)
    ops[i] = new()
    return ast.unparse(ast.Compare(left=node.left, ops=ops, comparators=node.comparators))


def _const_replacements(value: object) -> list[str]:
    if isinstance(value, bool):
        return [repr(not value)]
    if isinstance(value, int):
        return ["1"] if value == 0 else [repr(value + 1), "0"]
    if isinstance(value, float):
        return ["1.0"] if value == 0 else [repr(value * 2), "0.0"]
    return []


class _Collector(ast.NodeVisitor):
    """Walks a module in source order and records (node, op, replacement text) points."""

    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.source = source
        self.starts = _offsets(source)
        self.scope: list[str] = []
        self.points: list[tuple[str, str, int, int, int, str]] = []

    def _span(self, node: ast.AST) -> tuple[int, int]:
        s = self.starts[node.lineno - 1]  # type: ignore[attr-defined]
        e = self.starts[node.end_lineno - 1]  # type: ignore[attr-defined]
        return (s + _col(self.source, s, node.col_offset),  # type: ignore[attr-defined]
                e + _col(self.source, e, node.end_col_offset))  # type: ignore[attr-defined]

    def _add(self, node: ast.AST, op: str, replacement: str) -> None:
        start, end = self._span(node)
        self.points.append((".".join(self.scope) or "<module>", op,
                            node.lineno, start, end, replacement))  # type: ignore[attr-defined]

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        self._body(node.body)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _body(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if _is_docstring(stmt) or isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom)):
                self.visit(stmt)
                continue
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._add(stmt, "delete", "pass")
            self.visit(stmt)

    def generic_visit(self, node: ast.AST) -> None:
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._body(value)
            elif isinstance(value, list):
                for v in value:
                    if isinstance(v, ast.AST):
                        self.visit(v)
            elif isinstance(value, ast.AST):
                self.visit(value)
            del field

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:  # annotations are not behaviour
            self.visit(node.value)

    def visit_arguments(self, node: ast.arguments) -> None:
        for d in [*node.defaults, *[k for k in node.kw_defaults if k is not None]]:
            self.visit(d)

    def _negate(self, node: ast.If | ast.While | ast.IfExp) -> None:
        start, end = self._span(node.test)  # ast.get_source_segment re-splits the whole file
        text = self.source[start:end]
        self._add(node.test, "negate", f"not ({text})")

    def visit_If(self, node: ast.If) -> None:
        self._negate(node)
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        if not (isinstance(node.test, ast.Constant) and node.test.value is True):
            self._negate(node)
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._negate(node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, cmpop in enumerate(node.ops):
            flip = _CMP_FLIP.get(type(cmpop))
            if flip is not None:
                self._add(node, "cmp", _unparse_cmp(node, i, flip))
            bound = _CMP_BOUNDARY.get(type(cmpop))
            if bound is not None:
                self._add(node, "boundary", _unparse_cmp(node, i, bound))
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self._add(node, "boolop", ast.unparse(ast.BoolOp(op=other, values=node.values)))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._add(node, "unnot", ast.unparse(node.operand))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        for rep in _const_replacements(node.value):
            self._add(node, "const", rep)


def _col(source: str, line_start: int, byte_col: int) -> int:
    """ast columns are UTF-8 byte offsets; convert to a character offset within the line."""
    line_end = source.find("\n", line_start)
    line = source[line_start:line_end if line_end >= 0 else len(source)]
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _function_spans(tree: ast.Module, starts: list[int]) -> list[tuple[int, int, bool]]:
    """(start offset, end offset, indented) of every function's whole lines, decorators
    included."""
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((starts[first - 1], starts[node.end_lineno or node.lineno],
                          node.col_offset > 0))
    return spans


def _parses(source: str, start: int, end: int, rep: str,
            spans: list[tuple[int, int, bool]]) -> bool:
    """Whether the mutated source parses, checked on the innermost function around the point
    (under ``if 1:`` when it is indented): a 50-line function parses in a fraction of the time a
    1,000-line module does, and a syntax error in the point's function is one in the module."""
    lo, hi, indented = 0, len(source), False
    for s, e, ind in spans:
        if s <= start and end <= e and e - s <= hi - lo:
            lo, hi, indented = s, e, ind
    text = source[lo:start] + rep + source[end:hi]
    try:
        ast.parse("if 1:\n" + text if indented else text)
    except SyntaxError:
        return False
    return True


def enumerate_mutants(module: str, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    col = _Collector(module, source)
    col.visit(tree)
    spans = _function_spans(tree, col.starts)
    seen: dict[str, int] = {}
    out: list[Mutant] = []
    for qualname, op, line, start, end, rep in col.points:
        original = source[start:end]
        if original == rep:
            continue
        # Expression replacements keep their span's syntax, and `pass` replaces any simple
        # statement; only compound statements (an `elif`'s span) and unwrapped operands can
        # break it, so only those are parsed.
        risky = op == "unnot" or (op == "delete" and (original.rstrip().endswith(":")
                                                      or "\n" in original))
        if risky and not _parses(source, start, end, rep, spans):
            continue
        key = f"{qualname}|{op}|{original}|{rep}"
        n = seen.get(key, 0)
        seen[key] = n + 1
        digest = hashlib.sha1(f"{key}|{n}".encode()).hexdigest()[:10]
        out.append(Mutant(module, qualname, op, line, start, end, rep, digest))
    return out


def mutant_diff(m: Mutant, source: str) -> str:
    mutated = m.apply(source)
    return "".join(difflib.unified_diff(
        source.splitlines(keepends=True), mutated.splitlines(keepends=True),
        fromfile=f"a/{m.module}", tofile=f"b/{m.module}", n=1))


def load_equivalent() -> dict[str, str]:
    """id -> reason, from scripts/mutation_equivalent.txt (``<id>  # <reason>``)."""
    out: dict[str, str] = {}
    if not EQUIVALENT_FILE.exists():
        return out
    for raw in EQUIVALENT_FILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        ident, _, reason = line.partition("#")
        if not reason.strip():
            raise SystemExit(f"{EQUIVALENT_FILE.name}: {ident.strip()} has no reason")
        out[ident.strip()] = reason.strip()
    return out


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", ".mypy_cache",
                                    ".ruff_cache", ".pytest_cache", "node_modules")
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def _pytest(tree: Path, tests: list[str], timeout: float) -> str:
    """Runs the tests in the copy; returns 'passed', 'failed' or 'timeout'."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-m", "not external", *tests]
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout"
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return "passed" if rc == 0 else "failed"


def _existing(tree: Path, tests: list[str], without_pinned: bool) -> list[str]:
    return [t for t in tests if (tree / t).exists() and not (without_pinned and "_pinned" in t)]


def sample(mutants: list[Mutant], n: int, rng: random.Random) -> list[Mutant]:
    if n <= 0 or n >= len(mutants):
        return list(mutants)
    picked = sorted(rng.sample(range(len(mutants)), n))
    return [mutants[i] for i in picked]


def run(args: argparse.Namespace) -> int:
    equivalent = load_equivalent()
    modules = args.module or list(MODULES)
    for mod in modules:
        if mod not in MODULES:
            raise SystemExit(f"unknown module {mod!r}; known: {', '.join(MODULES)}")
    rng = random.Random(args.seed)
    plan: list[tuple[str, str, list[Mutant]]] = []
    all_ids: set[str] = set()
    for mod in modules:
        source = (ROOT / mod).read_text()
        mutants = enumerate_mutants(mod, source)
        all_ids.update(m.id for m in mutants)
        if args.check_equivalent:
            chosen = [m for m in mutants if m.id in equivalent]
        elif args.only:
            chosen = [m for m in mutants if m.id in args.only and m.id not in equivalent]
        else:
            # the sample is drawn before dropping equivalents so the same seed keeps its sample
            chosen = [m for m in sample(mutants, args.sample, rng) if m.id not in equivalent]
        plan.append((mod, source, chosen))
        print(f"{mod}: {len(mutants)} mutation points, running {len(chosen)}", flush=True)
    if args.list:
        for _mod, _source, chosen in plan:
            for m in chosen:
                print(f"{m.id}  line {m.line}")
        return 0
    if args.check_equivalent:
        stale = [i for i in equivalent if i not in all_ids and i.split(":")[0] in modules]
        for i in stale:
            print(f"STALE equivalent entry (no such mutant any more): {i}")

    interrupted = False
    summary: list[tuple[str, int, int, int, int]] = []
    survivors: list[tuple[Mutant, str]] = []
    killed_equivalents: list[Mutant] = []
    with tempfile.TemporaryDirectory(prefix="emu-mutation-") as tmp:
        tree = Path(tmp) / "tree"
        _copy_tree(tree)
        try:
            for mod, source, chosen in plan:
                tests = _existing(tree, MODULES[mod], args.without_pinned)
                t0 = time.monotonic()  # noqa: TID251 (real time: a per-mutant timeout)
                base = _pytest(tree, tests, args.timeout_max)
                baseline = time.monotonic() - t0  # noqa: TID251
                if base != "passed":
                    print(f"{mod}: the unmutated tests {base}; fix them first")
                    return 2
                timeout = min(args.timeout_max, max(args.timeout_min, baseline * args.timeout_factor))
                print(f"{mod}: baseline {baseline:.1f}s, per-mutant timeout {timeout:.0f}s",
                      flush=True)
                killed = survived = timedout = 0
                target = tree / mod
                try:
                    for k, m in enumerate(chosen, 1):
                        target.write_text(m.apply(source))
                        outcome = _pytest(tree, tests, timeout)
                        target.write_text(source)
                        if outcome == "failed":
                            killed += 1
                            if args.check_equivalent:
                                killed_equivalents.append(m)
                        elif outcome == "timeout":
                            timedout += 1
                        else:
                            survived += 1
                            survivors.append((m, source))
                        tag = {"failed": "killed", "passed": "SURVIVED"}.get(outcome, outcome)
                        print(f"  [{k}/{len(chosen)}] {tag:8} {m.id} line {m.line}", flush=True)
                finally:
                    target.write_text(source)
                summary.append((mod, len(chosen), killed, survived, timedout))
        except KeyboardInterrupt:
            interrupted = True
            print("\ninterrupted; the working tree was never mutated (mutants ran in a copy)")

    if survivors and not args.check_equivalent:
        print("\n== surviving mutants ==")
        for m, source in survivors:
            print(f"# {m.id}")
            print(mutant_diff(m, source))
    if args.check_equivalent:
        for m in killed_equivalents:
            print(f"NOT EQUIVALENT (a test kills it; drop it from {EQUIVALENT_FILE.name}): {m.id}")
    drawn = (f"{len(args.only)} chosen ids" if args.only else
             "listed equivalents" if args.check_equivalent else
             f"seed {args.seed}, sample {args.sample or 'all'}")
    print(f"\n== score ({drawn}) ==")
    tot_k = tot_n = 0
    for mod, n, k, s, t in summary:
        score = 100.0 * (k + t) / n if n else 100.0
        tot_k += k + t
        tot_n += n
        print(f"{mod:34} mutants {n:4}  killed {k:4}  survived {s:4}  timeout {t:3}  "
              f"score {score:5.1f}%")
    listed = sum(1 for i in equivalent if i.split(":", 1)[0] in modules)
    if args.check_equivalent:
        print(f"{len(killed_equivalents)} of {tot_n} listed equivalents killed (each should "
              "survive)")
    elif tot_n:
        print(f"{'total':34} mutants {tot_n:4}  score {100.0 * tot_k / tot_n:5.1f}% "
              f"(timeouts count as killed; equivalents listed for these modules, left out: "
              f"{listed})")
    if interrupted:
        return 130
    if args.check_equivalent:
        return 1 if killed_equivalents else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sample", type=int, default=30, help="mutants per module; 0 = all")
    p.add_argument("--module", action="append", help="restrict to this module (repeatable)")
    p.add_argument("--timeout-factor", type=float, default=3.0,
                   help="per-mutant timeout as a multiple of the unmutated run's duration")
    p.add_argument("--timeout-min", type=float, default=30.0)
    p.add_argument("--timeout-max", type=float, default=600.0)
    p.add_argument("--without-pinned", action="store_true",
                   help="leave out the *_pinned.py tests (the score before they were written)")
    p.add_argument("--only", action="append", metavar="ID",
                   help="run just this mutant (repeatable), e.g. an earlier run's survivors")
    p.add_argument("--list", action="store_true", help="print the sampled mutant ids and stop")
    p.add_argument("--check-equivalent", action="store_true",
                   help=f"run only the mutants in {EQUIVALENT_FILE.name}: each must survive")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
