"""tests/conftest.py: how scripts/test.sh's xdist workers share the suite."""

from __future__ import annotations

from tests.conftest import _scope


def test_each_file_is_a_unit_and_the_wall_clock_folders_are_one() -> None:
    assert _scope("tests/kube/test_gc.py::test_x") == "tests/kube/test_gc.py"
    assert _scope("tests/kube/test_gc.py::TestA::test_y") == "tests/kube/test_gc.py"
    assert _scope("tests/test_architecture.py::test_z") == "tests/test_architecture.py"
    units = {_scope(n) for n in ("tests/realray/test_contract.py::test_a",
                                 "tests/realop/test_parts.py::test_b",
                                 "tests/go/test_client_go.py::test_c")}
    assert units == {"wall-clock"}
    assert _scope("tests/realray_like/test_x.py::t") == "tests/realray_like/test_x.py"
