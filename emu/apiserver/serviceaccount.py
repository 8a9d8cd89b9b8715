"""The ServiceAccount admission plugin (``plugin/pkg/admission/serviceaccount/admission.go``), on
in a standard cluster (`APIServer.service_account_admission`), as kube-apiserver always has it.

On a Pod's CREATE (`admit`): ``spec.serviceAccountName`` defaults to ``default``; the
ServiceAccount must exist (else kube's 403 ``error looking up service account NS/NAME:
serviceaccount "NAME" not found``: a Pod created in a Namespace the serviceaccount controller
has not reached yet is refused, as in kube); and unless the Pod or its ServiceAccount turns
``automountServiceAccountToken`` off, every container without a mount at
`TOKEN_MOUNT_PATH` gets one of a projected volume ``kube-api-access-<5 random>``: a bound token
(``expirationSeconds: 3607``), ``kube-root-ca.crt``'s ``ca.crt`` and the namespace
(``mountServiceAccountToken``, ``TokenVolumeSource``). The kubelet fills the volume in
(`emu.kube.kubelet`). Mirror Pods are left alone, as kube leaves them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from .errors import Forbidden

if TYPE_CHECKING:
    from .server import APIServer

Obj = dict[str, Any]

#: ``DefaultAPITokenMountPath``.
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: ``ServiceAccountVolumeName``: the projected volume's name before its random suffix.
VOLUME_PREFIX = "kube-api-access-"
#: ``serviceaccount.WarnOnlyBoundTokenExpirationSeconds``: the token the volume asks for.
TOKEN_EXPIRATION_SECONDS = 3607
#: ``api.ProjectedVolumeSourceDefaultMode`` (0644), set explicitly by the plugin.
DEFAULT_MODE = 0o644
_MIRROR = "kubernetes.io/config.mirror"


def token_volume_source() -> Obj:
    """``TokenVolumeSource``: the projected volume the plugin adds."""
    return {"defaultMode": DEFAULT_MODE, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                                 "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                 "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}


def admit(api: APIServer, pod: Obj, namespace: str, shown_name: str) -> None:
    """The plugin's ``Admit`` for a Pod being created (``pod`` changed in place); raises kube's
    403 when its ServiceAccount does not exist. ``shown_name``: the name kube's error names
    (the ``generateName`` when the request gave no name: admission runs before the name is
    generated)."""
    meta = pod.get("metadata") or {}
    if _MIRROR in (meta.get("annotations") or {}):
        return
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    spec = pod["spec"] = dict(spec)  # the caller's object is left alone
    name = spec.get("serviceAccountName") or "default"
    spec["serviceAccountName"] = name
    entry = api.store.table(api.kinds.resolve("ServiceAccount")).objs.get((namespace, name))
    if entry is None:
        raise Forbidden.for_object("pods", "", shown_name,
                                   f"error looking up service account {namespace}/{name}: "
                                   f'serviceaccount "{name}" not found')
    automount = spec.get("automountServiceAccountToken")
    if automount is None:  # the ServiceAccount's say, decoded only when the Pod has none
        automount = orjson.loads(entry.data).get("automountServiceAccountToken")
    if automount is False:
        return
    _mount_service_account_token(api, spec)


def _mount_service_account_token(api: APIServer, spec: Obj) -> None:
    """``mountServiceAccountToken``: the volume (an existing ``kube-api-access-*`` one is
    reused) and a read-only mount of it in every container that has none at the path."""
    volumes = spec.get("volumes") or []
    names = {v.get("name") for v in volumes if isinstance(v, dict)}
    existing = next((v["name"] for v in volumes if isinstance(v, dict)
                     and str(v.get("name", "")).startswith(VOLUME_PREFIX)), None)
    volume = existing
    while volume is None or volume in names - {existing}:
        volume = VOLUME_PREFIX + api._rng.name_suffix(5)
    mount = {"name": volume, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
    needed = False
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        containers = spec[key] = list(containers)
        for i, c in enumerate(containers):
            if not isinstance(c, dict):
                continue
            mounts = c.get("volumeMounts") or []
            if any(isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH
                   for m in mounts):
                continue
            containers[i] = {**c, "volumeMounts": [*mounts, dict(mount)]}
            needed = True
    if existing is None and needed:
        spec["volumes"] = [*volumes, {"name": volume, "projected": token_volume_source()}]
