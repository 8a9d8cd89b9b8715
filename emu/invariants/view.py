"""What every KubeRay invariant reads: the API server's committed objects, as they commit.

One `WorldView` per `Simulation`, shared by all monitors attached to it. It listens on the store
itself (``sim.api.store.listeners``, the same feed the API server's watches are filled from), so it
sees every committed write at the instant it commits — beside the network, where no partition,
outage, lost response or informer lag can hide or delay anything — and it never schedules a task
or emits a trace event, so attaching invariants leaves a run's trace digest unchanged.

It keeps a decoded copy of each object of the kinds invariants read (`KINDS`), remembers every
object's owner references after it is gone (so cleanup can follow an owner chain), and calls its
subscribers with ``(kind, type, obj, old)`` after updating its copy.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ..apiserver.store import Change
    from ..simulation import Simulation

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
Listener = Callable[[str, str, Obj, "Obj | None"], None]

#: The kinds any invariant of this package reads.
KINDS = frozenset({"Node", "Pod", "Service", "Job", "PersistentVolumeClaim", "RayCluster",
                   "RayJob", "RayService"})

_VIEWS: weakref.WeakKeyDictionary[Any, WorldView] = weakref.WeakKeyDictionary()


def ref(kind: str, obj: Obj) -> str:
    """``Kind/namespace/name`` of ``obj``, as violations name objects."""
    meta = obj.get("metadata") or {}
    return f"{kind}/{meta.get('namespace', '')}/{meta.get('name', '')}"


def labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def condition(obj: Obj, ctype: str) -> Obj:
    """The object's status condition of type ``ctype`` (a copy), or ``{}``."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return {}


def pod_ready(pod: Obj) -> bool:
    """Phase Running and condition Ready True (what kube-proxy and KubeRay call ready)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def pod_live(pod: Obj) -> bool:
    """Not terminating and not in a terminal phase: a Pod that runs or will run."""
    phase = (pod.get("status") or {}).get("phase")
    return not deleting(pod) and phase not in ("Succeeded", "Failed")


class WorldView:
    """The decoded objects of `KINDS` as the API server has them now, and who owns whom."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.objects: dict[str, dict[Key, Obj]] = {k: {} for k in sorted(KINDS)}
        #: (namespace, ``ray.io/cluster`` label) → that cluster's Pods by name.
        self._ray_pods: dict[Key, dict[str, Obj]] = {}
        #: uid → (kind, namespace, name, owner uids), kept after deletion.
        self.uids: dict[str, tuple[str, str, str, tuple[str, ...]]] = {}
        #: uid → virtual time the object was removed from the API server.
        self.gone_at: dict[str, float] = {}
        self._listeners: list[Listener] = []
        self.changed = asyncio.Event()
        store = sim.api.store
        for (_, kind), table in sorted(store.tables.items()):
            if kind in KINDS:
                for entry in list(table.objs.values()):
                    self._put(kind, orjson.loads(entry.data))
        store.listeners.append(self._on_change)

    @classmethod
    def of(cls, sim: Simulation) -> WorldView:
        """The view of ``sim`` (created on first use)."""
        view = _VIEWS.get(sim)
        if view is None:
            view = _VIEWS[sim] = cls(sim)
        return view

    def subscribe(self, listener: Listener, *, replay: Iterable[str] = ()) -> None:
        """Call ``listener(kind, type, obj, old)`` after every committed write of `KINDS`; and
        at once with ``ADDED`` for each object of the ``replay`` kinds already there (a monitor
        attached mid-run starts from what exists)."""
        self._listeners.append(listener)
        for kind in replay:
            for obj in self.all(kind):
                listener(kind, "ADDED", obj, None)

    @property
    def now(self) -> float:
        return self.sim.now

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.objects[kind].get((namespace, name))

    def all(self, kind: str) -> Iterator[Obj]:
        return iter(list(self.objects[kind].values()))

    def select(self, kind: str, namespace: str, **want: str) -> list[Obj]:
        """Objects of ``kind`` in ``namespace`` whose labels include ``want`` (label keys have
        dots and slashes: pass them as ``**{"ray.io/cluster": name}``). Pods selected by
        ``ray.io/cluster`` come from an index."""
        cluster = want.get("ray.io/cluster")
        if kind == "Pod" and cluster is not None:
            pool: Iterator[Obj] = iter(list(self._ray_pods.get((namespace, cluster), {})
                                           .values()))
        else:
            pool = (o for (ns, _), o in list(self.objects[kind].items()) if ns == namespace)
        return [o for o in pool if all(labels(o).get(k) == v for k, v in want.items())]

    def node_note(self, pod: Obj) -> str:
        """`` on Node N (Ready Unknown)`` when the Pod's Node is not Ready, else "": such a
        Pod's phase is the last its kubelet reported, not necessarily what runs."""
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        obj = self.objects["Node"].get(("", node)) if node else None
        if obj is None:
            return ""
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready" and c.get("status") != "True":
                return f" on Node {node} (Ready {c.get('status')})"
        return ""

    def owned_by(self, uid: str) -> list[tuple[str, Obj]]:
        """Objects still present whose owner chain (through any kind seen) reaches ``uid``."""
        out: list[tuple[str, Obj]] = []
        for kind in sorted(KINDS):
            for obj in self.objects[kind].values():
                if self._reaches(str((obj.get("metadata") or {}).get("uid", "")), uid, 0):
                    out.append((kind, obj))
        return out

    def _reaches(self, uid: str, root: str, depth: int) -> bool:
        if depth > 8 or uid not in self.uids:
            return False
        return any(owner == root or self._reaches(owner, root, depth + 1)
                   for owner in self.uids[uid][3])

    def _index(self, kind: str, obj: Obj, present: bool) -> None:
        if kind != "Pod":
            return
        cluster = labels(obj).get("ray.io/cluster")
        if cluster is None:
            return
        meta = obj["metadata"]
        key = (str(meta.get("namespace", "")), cluster)
        if present:
            self._ray_pods.setdefault(key, {})[str(meta.get("name", ""))] = obj
        else:
            pods = self._ray_pods.get(key)
            if pods is not None:
                pods.pop(str(meta.get("name", "")), None)
                if not pods:
                    del self._ray_pods[key]

    def _put(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        old = self.objects[kind].get(key)
        if old is not None:
            self._index(kind, old, False)
        self.objects[kind][key] = obj
        self._index(kind, obj, True)
        uid = str(meta.get("uid", ""))
        if uid:
            owners = tuple(str(r.get("uid")) for r in meta.get("ownerReferences") or []
                           if r.get("uid"))
            self.uids[uid] = (kind, key[0], key[1], owners)

    def _on_change(self, change: Change) -> None:
        kind = change.table.info.kind
        if kind not in KINDS:
            return
        obj: Obj = orjson.loads(change.entry.data)
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        old = self.objects[kind].get(key)
        if change.type == "DELETED":
            if old is not None:
                self._index(kind, old, False)
            self.objects[kind].pop(key, None)
            uid = str(meta.get("uid", ""))
            if uid:
                self.gone_at[uid] = self.sim.now
        else:
            self._put(kind, obj)
        for listener in self._listeners:
            listener(kind, change.type, obj, old)
        self.changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Wait (virtual time) for the next committed write of `KINDS`, at most ``timeout``."""
        self.changed.clear()
        if timeout <= 0:
            return
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except TimeoutError:
            pass
