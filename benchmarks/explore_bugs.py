"""The fixed KubeRay bugs of tests/explore/test_reintroduced_bugs.py (and #715 of
test_explore_search.py), each as a workload, the invariant that shows it and a function that
puts the bug back into the port (monkeypatching; emu/kuberay itself is never changed): for
benchmarks/explore.py's "CPU seconds to the first finding", uniform against guided.

They live in tests/explore/reintroduced.py, the one source the tests use as well; this module
puts that folder on ``sys.path`` (as the RayJob and RayService benchmarks do for tests/kuberay)
and names them.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "explore"))

from reintroduced import BUGS, Bug, broad

__all__ = ["BUGS", "Bug", "broad"]
