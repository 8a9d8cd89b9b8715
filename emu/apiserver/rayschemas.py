"""The structural schemas the built-in ray.io kinds are served with (before any CRD is applied).

Why: the API server serves RayCluster, RayJob, RayService and RayCronJob from the start, and they must be
validated, pruned and defaulted by the same mechanism as an applied CRD (`emu.apiserver.schema`).
These schemas are derived from KubeRay's CRDs (``ray-operator/config/crd/bases``, v1) down to
what decides validity and defaults: every ``spec`` field of the real CRDs is declared (unknown ones
are pruned), with the real types, ``required`` lists, int32 formats, minimums, defaults and
``x-kubernetes-validations`` rules; Pod templates, Services and the other nested objects keep
their content (``x-kubernetes-preserve-unknown-fields``) instead of the full Kubernetes schemas.
Applying the real CRDs replaces these with the full schemas.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

_OBJ: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STR: Obj = {"type": "string"}
_BOOL: Obj = {"type": "boolean"}
_NUM: Obj = {"type": "number"}
_STR_MAP: Obj = {"type": "object", "additionalProperties": {"type": "string"}}


def _int(**extra: Any) -> Obj:
    return {"type": "integer", "format": "int32", **extra}


_MANAGED_BY: Obj = {"type": "string", "x-kubernetes-validations": [
    {"message": "the managedBy field is immutable", "rule": "self == oldSelf"},
    {"message": "the managedBy field value must be either 'ray.io/kuberay-operator' or "
                "'kueue.x-k8s.io/multikueue'",
     "rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']"}]}

_HEAD_GROUP: Obj = {"type": "object", "required": ["template"], "properties": {
    "enableIngress": _BOOL, "headService": _OBJ, "ingressOptions": _OBJ, "labels": _STR_MAP,
    "rayStartParams": _STR_MAP, "resources": _STR_MAP, "serviceType": _STR, "template": _OBJ}}

_WORKER_GROUP: Obj = {
    "type": "object", "required": ["groupName", "maxReplicas", "minReplicas", "template"],
    "properties": {
        "groupName": _STR, "idleTimeoutSeconds": _int(), "labels": _STR_MAP,
        "maxReplicas": _int(default=2147483647), "minReplicas": _int(default=0),
        "numOfHosts": _int(default=1), "priority": _int(), "rayStartParams": _STR_MAP,
        "replicas": _int(default=0), "resources": _STR_MAP, "scaleStrategy": _OBJ,
        "suspend": _BOOL, "template": _OBJ}}

_GCS_FT: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
    "backend": {"type": "string", "x-kubernetes-validations": [
        {"message": "gcsFaultToleranceOptions.backend is immutable",
         "rule": "self == oldSelf"}]}}}

RAYCLUSTER_SPEC: Obj = {"type": "object", "required": ["headGroupSpec"], "properties": {
    "authOptions": _OBJ, "autoscalerOptions": _OBJ, "enableInTreeAutoscaling": _BOOL,
    "gcsFaultToleranceOptions": _GCS_FT, "headGroupSpec": _HEAD_GROUP,
    "headServiceAnnotations": _STR_MAP, "historyServerOptions": _OBJ, "managedBy": _MANAGED_BY,
    "networkPolicy": _OBJ, "rayVersion": _STR, "suspend": _BOOL, "tlsOptions": _OBJ,
    "upgradeStrategy": _OBJ, "workerGroupSpecs": {"type": "array", "items": _WORKER_GROUP}}}

_DELETION_STRATEGY: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                           "x-kubernetes-validations": [
    {"message": "legacy policies (onSuccess/onFailure) and deletionRules cannot be used "
                "together within the same deletionStrategy",
     "rule": "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))"},
    {"message": "deletionStrategy requires either BOTH onSuccess and onFailure, OR the "
                "deletionRules field (cannot be empty)",
     "rule": "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))"}]}

RAYJOB_SPEC: Obj = {"type": "object", "properties": {
    "activeDeadlineSeconds": _int(), "backoffLimit": _int(default=0),
    "clusterSelector": _STR_MAP, "deletionStrategy": _DELETION_STRATEGY, "entrypoint": _STR,
    "entrypointNumCpus": _NUM, "entrypointNumGpus": _NUM, "entrypointResources": _STR,
    "jobId": _STR, "managedBy": _MANAGED_BY, "metadata": _STR_MAP,
    "preRunningDeadlineSeconds": _int(minimum=1), "rayClusterSpec": RAYCLUSTER_SPEC,
    "runtimeEnvYAML": _STR, "shutdownAfterJobFinishes": _BOOL,
    "submissionMode": {"type": "string", "default": "K8sJobMode"}, "submitterConfig": _OBJ,
    "submitterPodTemplate": _OBJ, "suspend": _BOOL, "ttlSecondsAfterFinished": _int()}}

RAYSERVICE_SPEC: Obj = {"type": "object", "required": ["rayClusterConfig"], "properties": {
    "deploymentUnhealthySecondThreshold": _int(), "excludeHeadPodFromServeSvc": _BOOL,
    "managedBy": _MANAGED_BY, "rayClusterConfig": RAYCLUSTER_SPEC,
    "rayClusterDeletionDelaySeconds": _int(minimum=0), "serveConfigV2": _STR,
    "serveService": _OBJ, "serviceUnhealthySecondThreshold": _int(), "suspend": _BOOL,
    "upgradeStrategy": _OBJ}}


RAYCRONJOB_SPEC: Obj = {"type": "object", "required": ["jobTemplate", "schedule"], "properties": {
    "jobTemplate": RAYJOB_SPEC, "schedule": _STR, "suspend": _BOOL,
    "timeZone": {"type": "string", "minLength": 1}}}


def _root(spec: Obj) -> Obj:
    return {"type": "object", "properties": {
        "apiVersion": _STR, "kind": _STR, "metadata": {"type": "object"}, "spec": spec,
        "status": _OBJ}}


#: Kind → the openAPIV3Schema it is served with.
RAY_SCHEMAS: dict[str, Obj] = {
    "RayCluster": _root(RAYCLUSTER_SPEC),
    "RayJob": _root(RAYJOB_SPEC),
    "RayService": _root(RAYSERVICE_SPEC),
    "RayCronJob": _root(RAYCRONJOB_SPEC),
}
