"""Projected volumes as the kubelet fills them in (``pkg/volume/projected``): each source's files
in the one directory, and the bound ServiceAccount tokens of ``serviceAccountToken`` sources
requested and refreshed as the kubelet's token manager does (``pkg/kubelet/token``).

A standard cluster's Pods all have one (``kube-api-access-*``, the ServiceAccount admission's,
`emu.apiserver.serviceaccount`): ``token``, ``ca.crt`` and ``namespace`` under
``/var/run/secrets/kubernetes.io/serviceaccount``, as a program in a real Pod finds them.

Sources: ``serviceAccountToken`` (a TokenRequest for the Pod's ServiceAccount, bound to the Pod,
with the source's ``audience`` and ``expirationSeconds``), ``configMap`` and ``secret`` (their
``items``, else every key; ``optional``), ``downwardAPI`` (``metadata.name``, ``namespace``,
``uid``, ``labels`` and ``annotations`` as the kubelet formats them) and ``clusterTrustBundle``
is refused by name (not emulated). A token is asked for again once 80 % of its lifetime (24 h
at most) has passed (``requiresRefresh``, without its jitter); the files are refreshed when a
program asks for fresh volumes (`PodWorker.sync_projected_volumes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kernel import clock
from .common import ConfigError, Obj

if TYPE_CHECKING:
    from .kubelet import PodWorker

#: ``maxTTL`` of the kubelet's token manager: a token is refreshed at least daily.
MAX_TOKEN_TTL = 24 * 3600.0
#: A ``serviceAccountToken`` source's default ``expirationSeconds`` (an hour).
DEFAULT_TOKEN_SECONDS = 3600


def _format_map(values: dict[str, Any]) -> str:
    """``fieldpath.FormatMap``: ``key="value"`` lines, sorted, the value Go-quoted."""
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return "\n".join(f"{k}={quote(str(v))}" for k, v in sorted(values.items()))


class ProjectedVolume:
    """One Pod's projected volume ``name`` in ``path``: `fill` writes every source's files."""

    def __init__(self, worker: PodWorker, name: str, path: Path, pod: Obj) -> None:
        self.worker = worker
        self.name = name
        self.path = path
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.service_account = str(spec.get("serviceAccountName") or "default")
        self.labels: dict[str, Any] = dict(meta.get("labels") or {})
        self.annotations: dict[str, Any] = dict(meta.get("annotations") or {})
        #: When each token file must be asked for again (virtual seconds), by its path.
        self.refresh_at: dict[str, float] = {}

    async def fill(self, source: Obj) -> None:
        """Write every source of the volume (its ``projected`` object); raises `ConfigError`
        (or the API's error) when one cannot be written yet."""
        self.path.mkdir(parents=True, exist_ok=True)
        for item in source.get("sources") or []:
            if not isinstance(item, dict):
                continue
            if "serviceAccountToken" in item:
                await self._token(item["serviceAccountToken"] or {})
            elif "configMap" in item or "secret" in item:
                await self._object(item)
            elif "downwardAPI" in item:
                self._downward(item["downwardAPI"] or {})
            elif "clusterTrustBundle" in item:
                raise ConfigError("clusterTrustBundle projections are not emulated")

    def _write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    async def _token(self, src: Obj) -> None:
        rel = str(src.get("path") or "token")
        due = self.refresh_at.get(rel)
        now = clock.now()
        if due is not None and now < due:
            return
        seconds = int(src.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS)
        spec: Obj = {"expirationSeconds": seconds,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                        "name": self.worker.name, "uid": self.worker.uid}}
        if src.get("audience"):
            spec["audiences"] = [str(src["audience"])]
        client = self.worker.kubelet.client
        assert client is not None
        answer = await client.create_token(self.service_account, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
            self.worker.namespace)
        self._write(rel, str(answer["status"]["token"]))
        expires = clock.parse_time(answer["status"]["expirationTimestamp"])
        # requiresRefresh: within 20 % of the requested lifetime of the expiry, or a day old
        self.refresh_at[rel] = min(expires - seconds * 0.2, now + MAX_TOKEN_TTL)

    async def _object(self, item: Obj) -> None:
        kind, src = (("ConfigMap", item["configMap"]) if "configMap" in item
                     else ("Secret", item["secret"]))
        src = src or {}
        optional = bool(src.get("optional"))
        obj = await self.worker._lookup(kind, str(src.get("name", "")), optional)
        if obj is None:
            return
        data = self.worker._data(obj)
        items = src.get("items")
        if not items:
            for k, v in sorted(data.items()):
                self._write(k, v)
            return
        for entry in items:
            if entry.get("key") in data:
                self._write(str(entry.get("path") or entry["key"]), data[entry["key"]])
            elif not optional:
                raise ConfigError(f"{kind.lower()} references non-existent config key: "
                                  f"{entry.get('key')}")

    def _downward(self, src: Obj) -> None:
        values = {"metadata.name": self.worker.name,
                  "metadata.namespace": self.worker.namespace, "metadata.uid": self.worker.uid}
        for entry in src.get("items") or []:
            field = str((entry.get("fieldRef") or {}).get("fieldPath", ""))
            if field in values:
                text = values[field]
            elif field == "metadata.labels":
                text = _format_map(self.labels)
            elif field == "metadata.annotations":
                text = _format_map(self.annotations)
            elif field.startswith("metadata.labels['"):
                text = str(self.labels.get(field[len("metadata.labels['"):-2], ""))
            elif field.startswith("metadata.annotations['"):
                text = str(self.annotations.get(field[len("metadata.annotations['"):-2], ""))
            else:
                raise ConfigError(f"downwardAPI field {field or entry!r} is not emulated in "
                                  f"a volume")
            self._write(str(entry.get("path", "")), text)
