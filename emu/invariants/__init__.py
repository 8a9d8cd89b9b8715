"""Invariants that watch a run and report what broke: KubeRay's contracts as values.

Attach them before the workload is applied; they observe through ``sim.trace`` and the API
server's own commit feed (beside the network, so no fault hides anything from them)::

    from emu.invariants import Monitors, kuberay_invariants

    monitors = Monitors.attach(sim, kuberay_invariants())
    ...                                # apply, inject faults, let the world settle
    await monitors.assert_ok(sim)      # InvariantViolated names every violation

The interface is in `emu.invariants.base`; each invariant's module states its rationale (the
KubeRay or Kubernetes contract, with its SPEC.md section and Go function) and its bound:

===================================================  ==============================================
``one-live-head`` (`OneLiveHead`)                    `emu.invariants.heads`
``one-job-run-per-attempt`` (`OneJobRunPerAttempt`)  `emu.invariants.rayjob`
``rayjob-status-consistent``                         `emu.invariants.rayjob`
``retry-attempts-fenced``                            `emu.invariants.rayjob`
``rayjob-submitter-recovered``                       `emu.invariants.rayjob`
``rayservice-serves-ready-cluster``                  `emu.invariants.rayservice`
``rayservice-no-refused-requests-during-switch``     `emu.invariants.rayservice`
``rayservice-initializing-timeout``                  `emu.invariants.initializing`
``suspended-cluster-has-no-pods``                    `emu.invariants.suspend`
``eventually-steady`` (`EventuallySteady`)           `emu.invariants.liveness`
``cleanup-after-delete`` (`Cleanup`)                 `emu.invariants.cleanup`
``two-leader-window`` (information only)             `emu.invariants.twoleaders`
===================================================  ==============================================

The leadership checkers (`TwoLeaderChecker`, `LeadershipTenures`, `LeaseHolderChecker`) are the
older, lower-level API in `emu.invariants.leadership`.
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
from .cleanup import Cleanup
from .heads import OneLiveHead
from .initializing import InitializingTimeoutHonoured
from .leadership import (
    HolderViolation,
    LeadershipTenures,
    LeaseHolderChecker,
    Tenure,
    TwoLeaderChecker,
    TwoLeaderWindow,
)
from .liveness import EventuallySteady
from .rayjob import (
    OneJobRunPerAttempt,
    RayJobStatusConsistent,
    RetryAttemptsFenced,
    SubmitterLossRecovered,
)
from .rayservice import NoRefusedRequestsDuringSwitch, ServesReadyCluster
from .suspend import SuspendedClusterHasNoPods
from .twoleaders import TwoLeaderWindows

__all__ = [
    "BaseMonitor", "Cleanup", "EventuallySteady", "HolderViolation",
    "InitializingTimeoutHonoured", "Invariant",
    "InvariantViolated", "LeadershipTenures", "LeaseHolderChecker", "Monitor", "Monitors",
    "NoRefusedRequestsDuringSwitch", "OneJobRunPerAttempt", "OneLiveHead",
    "RayJobStatusConsistent", "RetryAttemptsFenced", "ServesReadyCluster",
    "SubmitterLossRecovered", "SuspendedClusterHasNoPods", "Tenure",
    "TwoLeaderChecker", "TwoLeaderWindow", "TwoLeaderWindows", "Violation", "kuberay_invariants",
]
