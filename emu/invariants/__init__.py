"""Invariants that watch a run and report what broke: KubeRay's contracts as values.

Attach them before the workload is applied; they observe through ``sim.trace`` and the API
server's own watches (beside the network, so no fault hides anything from them)::

    from emu.invariants import Monitors, kuberay_invariants

    monitors = Monitors.attach(sim, kuberay_invariants())
    ...                                # apply, inject faults, let the world settle
    await monitors.assert_ok(sim)      # InvariantViolated names every violation

The interface is in `emu.invariants.base`; each invariant lives in its own module with its
rationale and bound. The leadership checkers (`TwoLeaderChecker`, `LeadershipTenures`,
`LeaseHolderChecker`) are the older, lower-level API in `emu.invariants.leadership`.
"""

from __future__ import annotations

from .base import (
    BaseMonitor,
    Invariant,
    InvariantViolated,
    Monitor,
    Monitors,
    Violation,
    kuberay_invariants,
)
from .leadership import (
    HolderViolation,
    LeadershipTenures,
    LeaseHolderChecker,
    Tenure,
    TwoLeaderChecker,
    TwoLeaderWindow,
)
from .heads import OneLiveHead
from .twoleaders import TwoLeaderWindows

__all__ = [
    "BaseMonitor", "HolderViolation", "Invariant", "InvariantViolated", "LeadershipTenures",
    "LeaseHolderChecker", "Monitor", "Monitors", "OneLiveHead", "Tenure", "TwoLeaderChecker", "TwoLeaderWindow",
    "TwoLeaderWindows", "Violation", "kuberay_invariants",
]
