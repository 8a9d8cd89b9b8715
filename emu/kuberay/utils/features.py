"""KubeRay's feature gates, as a value per operator process.

Port of ``ray-operator/pkg/features/features.go`` and of the ``--feature-gates`` parsing that
``main.go`` delegates to component-base ``featureGate.Set``. In Go the gates are one process-wide
mutable registry; here several operator processes share one Python process, so gates are a frozen
value that the operator builds once from its flags and hands to whatever asks ``enabled(...)``.

Deviation: component-base also knows Kubernetes' own gates (``AllAlpha``, ``AllBeta``, the API
server's gates) through ``DefaultMutableFeatureGate``; this registry knows only KubeRay's, so
naming any other gate is "unrecognized feature gate".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

RAY_CLUSTER_STATUS_CONDITIONS: Final = "RayClusterStatusConditions"
RAY_JOB_DELETION_POLICY: Final = "RayJobDeletionPolicy"
RAY_MULTI_HOST_INDEXING: Final = "RayMultiHostIndexing"
RAY_SERVICE_INCREMENTAL_UPGRADE: Final = "RayServiceIncrementalUpgrade"
RAY_CRON_JOB: Final = "RayCronJob"
SIDECAR_SUBMITTER_RESTART: Final = "SidecarSubmitterRestart"
RAY_CLUSTER_NETWORK_POLICY: Final = "RayClusterNetworkPolicy"
GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE: Final = "GCSFaultToleranceEmbeddedStorage"
RAY_CLUSTER_MTLS: Final = "RayClusterMTLS"
RAY_CLUSTER_HISTORY_SERVER: Final = "RayClusterHistoryServer"
KUBERNETES_WAS: Final = "KubernetesWAS"

#: ``defaultFeatureGates``: beta gates default on, alpha gates default off (SPEC §1.4).
DEFAULT_FEATURE_GATES: Final[Mapping[str, bool]] = {
    RAY_CLUSTER_STATUS_CONDITIONS: True,
    RAY_JOB_DELETION_POLICY: True,
    RAY_MULTI_HOST_INDEXING: True,
    RAY_SERVICE_INCREMENTAL_UPGRADE: True,
    RAY_CRON_JOB: False,
    SIDECAR_SUBMITTER_RESTART: False,
    RAY_CLUSTER_NETWORK_POLICY: False,
    GCS_FAULT_TOLERANCE_EMBEDDED_STORAGE: False,
    RAY_CLUSTER_MTLS: False,
    RAY_CLUSTER_HISTORY_SERVER: False,
    KUBERNETES_WAS: False,
}


def _sorted_copy(m: Mapping[str, bool]) -> dict[str, bool]:
    return dict(sorted(m.items()))


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value that component-base would refuse; the text is Go's."""


@attrs.frozen
class FeatureGates:
    """The gates one operator process runs with. Defaults to `DEFAULT_FEATURE_GATES`."""

    overrides: Mapping[str, bool] = attrs.field(factory=dict, converter=_sorted_copy)

    def enabled(self, name: str) -> bool:
        """Port of `Enabled` (features.go). An unknown name is a programming error, as in Go."""
        if name in self.overrides:
            return self.overrides[name]
        if name not in DEFAULT_FEATURE_GATES:
            raise KeyError(f"feature {name!r} is not registered in FeatureGate")
        return DEFAULT_FEATURE_GATES[name]

    def as_dict(self) -> dict[str, bool]:
        """Every known gate and its value, as ``LogFeatureGates`` logs them."""
        return {name: self.enabled(name) for name in DEFAULT_FEATURE_GATES}


#: The gates of an operator started without ``--feature-gates``.
DEFAULTS: Final = FeatureGates()


def _parse_bool(text: str) -> bool | None:
    """``strconv.ParseBool``: the spellings Go accepts, else None."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def parse_feature_gates(value: str) -> FeatureGates:
    """Port of component-base ``featureGate.Set`` as ``main.go`` calls it on ``--feature-gates``.

    ``"Name=bool,Name2=bool"``; empty items are skipped; keys and values are trimmed. Errors carry
    component-base's messages: ``missing bool value for X``, ``invalid value of X=v, err: ...``,
    ``unrecognized feature gate: X``. Syntax errors are reported in input order; unknown names are
    checked afterwards in sorted order (Go iterates a map there, so its choice among several unknown
    names is random).
    """
    parsed: dict[str, bool] = {}
    for item in value.split(","):
        if item == "":
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {key}")
        raw = raw.strip()
        flag = _parse_bool(raw)
        if flag is None:
            raise FeatureGateError(
                f'invalid value of {key}={raw}, err: strconv.ParseBool: parsing "{raw}": invalid syntax')
        parsed[key] = flag
    for key in sorted(parsed):
        if key not in DEFAULT_FEATURE_GATES:
            raise FeatureGateError(f"unrecognized feature gate: {key}")
    return FeatureGates(parsed)
