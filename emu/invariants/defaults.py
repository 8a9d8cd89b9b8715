"""The default invariant set (`kuberay_invariants`): one value of each KubeRay invariant."""

from __future__ import annotations

from .base import Invariant
from .heads import OneLiveHead
from .twoleaders import TwoLeaderWindows


def default_set() -> list[Invariant]:
    """A fresh list, so a caller may append its own invariants."""
    return [
        OneLiveHead(),
        TwoLeaderWindows(),
    ]
