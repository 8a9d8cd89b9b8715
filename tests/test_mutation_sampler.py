"""scripts/mutation.py: the mutator's points, stable ids, seeded samples and equivalents file."""

from __future__ import annotations

import ast
import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent

SOURCE = '''\
def f(a, b):
    """Docstrings are not mutated."""
    if a < b and not a:
        return 1
    x = 2.0
    return x
'''


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts/mutation.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_kind_of_mutation_is_enumerated_and_each_mutant_parses() -> None:
    m = _script()
    mutants = m.enumerate_mutants("x.py", SOURCE)
    by_op = {(mu.op, SOURCE[mu.start:mu.end], mu.replacement) for mu in mutants}
    assert ("cmp", "a < b", "a >= b") in by_op
    assert ("boundary", "a < b", "a <= b") in by_op
    assert ("boolop", "a < b and not a", "a < b or not a") in by_op
    assert ("negate", "a < b and not a", "not (a < b and not a)") in by_op
    assert ("unnot", "not a", "a") in by_op
    assert ("const", "1", "2") in by_op and ("const", "2.0", "4.0") in by_op
    assert ("delete", "return 1", "pass") in by_op
    assert not [mu for mu in mutants if "Docstrings" in SOURCE[mu.start:mu.end]]
    for mu in mutants:
        ast.parse(mu.apply(SOURCE))
        assert mu.apply(SOURCE) != SOURCE


def test_ids_are_stable_across_unrelated_edits_and_samples_follow_the_seed() -> None:
    m = _script()
    ids = [mu.id for mu in m.enumerate_mutants("x.py", SOURCE)]
    shifted = [mu.id for mu in m.enumerate_mutants("x.py", "import os\n\n\n" + SOURCE)]
    assert ids == shifted and len(set(ids)) == len(ids)
    mutants = m.enumerate_mutants("x.py", SOURCE)
    one = m.sample(mutants, 3, random.Random(5))
    assert one == m.sample(mutants, 3, random.Random(5)) and len(one) == 3


def test_the_equivalents_file_names_existing_mutants_each_with_a_reason() -> None:
    m = _script()
    listed = m.load_equivalent()
    assert listed and all(reason for reason in listed.values())
    for ident in listed:
        module = ident.split(":", 1)[0]
        assert module in m.MODULES
        known = {mu.id for mu in m.enumerate_mutants(module, (ROOT / module).read_text())}
        assert ident in known, f"stale entry in mutation_equivalent.txt: {ident}"



METHOD_SOURCE = '''\
class C:
    @property
    def g(self, a, b):
        if a:
            return 1
        elif not b:
            return 2
        return 3

    def h(self):
        return 4
'''


def test_the_syntax_check_reads_only_the_innermost_function_around_a_point() -> None:
    """A risky mutant (``unnot``, a compound statement's deletion) is parsed on its innermost
    function alone, under ``if 1:`` when the function is indented: the same verdict as parsing
    the whole module, at a fraction of the cost."""
    m = _script()
    tree = ast.parse(METHOD_SOURCE)
    spans = m._function_spans(tree, m._offsets(METHOD_SOURCE))
    assert len(spans) == 2 and all(indented for _s, _e, indented in spans)
    start = METHOD_SOURCE.index("not b")
    assert m._parses(METHOD_SOURCE, start, start + len("not b"), "b", spans)
    assert not m._parses(METHOD_SOURCE, start, start + len("not b"), "b:", spans)
    ret = METHOD_SOURCE.index("return 4")
    assert m._parses(METHOD_SOURCE, ret, ret + len("return 4"), "pass", spans)
    assert not m._parses(METHOD_SOURCE, ret, ret + len("return 4"), "else:", spans)
    for mu in m.enumerate_mutants("x.py", METHOD_SOURCE):
        ast.parse(mu.apply(METHOD_SOURCE))
