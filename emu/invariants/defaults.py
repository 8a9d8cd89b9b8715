"""The default invariant set (`kuberay_invariants`): one value of each KubeRay invariant."""

from __future__ import annotations

from .base import Invariant
from .cleanup import Cleanup
from .heads import OneLiveHead
from .initializing import InitializingTimeoutHonoured
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


def default_set() -> list[Invariant]:
    """A fresh list, so a caller may append its own invariants."""
    return [
        OneLiveHead(),
        OneJobRunPerAttempt(),
        RayJobStatusConsistent(),
        RetryAttemptsFenced(),
        SubmitterLossRecovered(),
        ServesReadyCluster(),
        NoRefusedRequestsDuringSwitch(),
        InitializingTimeoutHonoured(),
        SuspendedClusterHasNoPods(),
        EventuallySteady(),
        Cleanup(),
        TwoLeaderWindows(),
    ]
