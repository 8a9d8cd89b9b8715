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

The contents are kept in memory and written to the volume's directory only once a program of
the Pod looks at its mounts (`Mounts`): every Pod of a standard cluster has a token volume that
the emulated programs never read, and a world with files in its work directory cannot be
snapshotted (`emu.snapshots`).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, ValuesView
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
        #: Every file's text, by its path in the volume (what `materialize` writes).
        self.files: dict[str, str] = {}
        #: Whether the files are on disk (and later writes go there too).
        self.materialized = False

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
        if self.files.get(rel) == text:
            return
        self.files[rel] = text
        if self.materialized:
            self._write_file(rel, text)

    def _write_file(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def materialize(self) -> None:
        """Write the files into the volume's directory (once; later writes follow)."""
        if self.materialized:
            return
        self.materialized = True
        for rel, text in sorted(self.files.items()):
            self._write_file(rel, text)

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


class Mounts(dict[str, Path]):
    """A container's mounts (mount path → host directory) whose projected volumes are written
    to disk when looked at: one by `look_at` (what `ContainerContext.host_paths` calls for the
    mounts covering a path), every one on ``get``, ``[]``, iteration, ``items``, ``values`` or
    ``copy`` (a program that walks its mounts itself; ``dict(mounts)`` iterates)."""

    def __init__(self, paths: dict[str, Path], pending: dict[str, ProjectedVolume]) -> None:
        super().__init__(paths)
        self._pending = pending

    def look_at(self, mount: str) -> None:
        volume = self._pending.pop(mount, None)
        if volume is not None:
            volume.materialize()

    def _look(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, {}
            for volume in pending.values():
                volume.materialize()

    def get(self, key: str, default: Any = None) -> Any:
        self._look()
        return super().get(key, default)

    def __getitem__(self, key: str) -> Path:
        self._look()
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        self._look()
        return super().__iter__()

    def items(self) -> ItemsView[str, Path]:  # type: ignore[override]
        self._look()
        return super().items()

    def values(self) -> ValuesView[Path]:  # type: ignore[override]
        self._look()
        return super().values()

    def copy(self) -> dict[str, Path]:
        self._look()
        return dict(dict.items(self))
