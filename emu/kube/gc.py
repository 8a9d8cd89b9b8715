"""The garbage collector: dependents follow their owners out, by propagation policy.

A port of ``pkg/controller/garbagecollector`` (``GraphBuilder.processGraphChanges``,
``attemptToDeleteItem``, ``processDeletingDependentsItem``, ``orphanDependents``):

- it watches every kind the API server serves (its discovery, and every kind served later, such
  as a CRD created after the world started), and keeps a graph of ownerReferences by uid;
- **background**: an object whose owners are all gone is deleted (the owner's absence is confirmed
  by a live GET, by uid, as ``isDangling`` does); an owner that still exists keeps it, and
  references to owners that are gone are removed;
- **foreground**: an owner deleted with ``propagationPolicy: Foreground`` carries the
  ``foregroundDeletion`` finalizer; its dependents are deleted (themselves in foreground when they
  have dependents), and the finalizer is removed once no dependent with ``blockOwnerDeletion``
  remains, which lets the API server remove the owner;
- **orphan**: an owner with the ``orphan`` finalizer has its uid removed from every dependent's
  ownerReferences, then the finalizer removed.

Namespace deletion is done by the API server itself (it deletes what the namespace holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..apiserver.errors import ApiError, is_conflict, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.process import Process
from .common import KeyQueue, Obj

if TYPE_CHECKING:
    from .cluster import KubeCluster

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
#: Kinds nobody makes dependents of; not watched.
UNWATCHED = frozenset({("", "Event"), ("events.k8s.io", "Event")})


@attrs.define(eq=False)
class GraphNode:
    """One object in the ownership graph (``node`` in graph.go)."""

    uid: str
    api_version: str
    kind: str
    namespace: str | None
    name: str
    owners: list[Obj] = attrs.field(factory=list)
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    dependents: dict[str, None] = attrs.field(factory=dict)

    @property
    def deleting_dependents(self) -> bool:
        return self.deleting and FOREGROUND in self.finalizers


class GarbageCollector:
    """The garbage collector process."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.graph: dict[str, GraphNode] = {}
        self._waiting_for_owner: dict[str, dict[str, None]] = {}
        self.informers: dict[tuple[str, str], Informer] = {}
        self._namespaced: dict[tuple[str, str], bool] = {}
        self.process: Process | None = None
        self.client: Client | None = None
        self.queue: KeyQueue | None = None

    def _kinds(self) -> list[Any]:
        api = getattr(self.cluster.world, "api", None)
        if api is None:
            return []
        return [k for k in api.kinds.all() if (k.group, k.kind) not in UNWATCHED]

    async def main(self, process: Process) -> None:
        self.process = process
        # a restart rebuilds the graph from fresh lists: an owner deleted meanwhile is absent,
        # so its dependents are found dangling (a kept graph would hold it for good)
        self.graph, self._waiting_for_owner = {}, {}
        self.informers, self._namespaced = {}, {}
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "garbage-collector")
        for info in self._kinds():
            self._watch(process, info)
        api = getattr(self.cluster.world, "api", None)
        if api is not None and self._served not in api.kinds.listeners:
            # kube's collector rediscovers served kinds every 30 s (``GarbageCollector.Sync``)
            # and starts monitors for new ones; here a kind registered later (a CRD created
            # after the world started) is watched as soon as it is served
            api.kinds.listeners.append(self._served)
        for inf in list(self.informers.values()):
            await inf.wait_synced()
        await self.queue.run(self.sync)

    def _served(self, info: Any) -> None:
        """A kind newly served by the API server: watch it (while this collector runs)."""
        process = self.process
        if process is not None and process.alive and (info.group, info.kind) not in UNWATCHED:
            self._watch(process, info)

    def _watch(self, process: Process, info: Any) -> None:
        """Start the monitor (an informer feeding the graph) of one served kind."""
        key = (info.api_version, info.kind)
        if key in self.informers:
            return
        assert self.client is not None
        inf = Informer(self.client, info.kind, api_version=info.api_version)
        inf.add_event_handler(FuncHandler(
            on_add=self._upsert, on_update=lambda _o, n: self._upsert(n),
            on_delete=self._deleted))
        self.informers[key] = inf
        self._namespaced[key] = info.namespaced
        process.spawn(inf.run(), name=f"{process.name}:informer:{info.kind}")

    # -- the graph -------------------------------------------------------------------------------

    def _upsert(self, obj: Obj) -> None:
        """``processGraphChanges`` for an add or update."""
        assert self.queue is not None
        meta = obj["metadata"]
        uid = meta["uid"]
        owners = list(meta.get("ownerReferences") or [])
        finalizers = tuple(meta.get("finalizers") or ())
        deleting = bool(meta.get("deletionTimestamp"))
        node = self.graph.get(uid)
        if node is None:
            node = GraphNode(uid, obj["apiVersion"], obj["kind"], meta.get("namespace"),
                             meta["name"])
            # dependents seen before their owner (another kind's informer was ahead)
            node.dependents.update(self._waiting_for_owner.pop(uid, {}))
            self.graph[uid] = node
        elif node.owners == owners and node.finalizers == finalizers and \
                node.deleting == deleting:
            return
        old_owner_uids = [o.get("uid") for o in node.owners]
        new_owner_uids = [o.get("uid") for o in owners]
        for ouid in old_owner_uids:
            if ouid not in new_owner_uids and ouid in self.graph:
                self.graph[ouid].dependents.pop(uid, None)
                if self.graph[ouid].deleting_dependents:
                    self.queue.add(f"delete:{ouid}")
        for ouid in new_owner_uids:
            owner = self.graph.get(ouid)
            if owner is not None:
                owner.dependents[uid] = None
            else:
                self._waiting_for_owner.setdefault(ouid, {})[uid] = None
            if owner is None or owner.deleting_dependents:
                self.queue.add(f"delete:{uid}")  # is the owner gone, or waiting for us?
        node.owners, node.finalizers = owners, finalizers
        became_deleting = deleting and not node.deleting
        node.deleting = deleting
        if deleting and ORPHAN in finalizers:
            self.queue.add(f"orphan:{uid}")
        if deleting and FOREGROUND in finalizers:
            self.queue.add(f"delete:{uid}")
            if became_deleting:
                for dep in node.dependents:
                    self.queue.add(f"delete:{dep}")

    def _deleted(self, obj: Obj) -> None:
        assert self.queue is not None
        uid = obj["metadata"]["uid"]
        node = self.graph.pop(uid, None)
        if node is None:
            return
        for dep in node.dependents:
            self.queue.add(f"delete:{dep}")
        for owner_ref in node.owners:
            owner = self.graph.get(owner_ref.get("uid", ""))
            if owner is not None:
                owner.dependents.pop(uid, None)
                if owner.deleting_dependents:
                    self.queue.add(f"delete:{owner.uid}")

    def _cached(self, node: GraphNode) -> Obj | None:
        inf = self.informers.get((node.api_version, node.kind))
        if inf is None:
            return None
        return inf.get(node.name, node.namespace)

    # -- work ------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        action, _, uid = key.partition(":")
        if action == "orphan":
            await self.attempt_to_orphan(uid)
        else:
            await self.attempt_to_delete(uid)

    async def _owner_state(self, node: GraphNode, ref: Obj) -> str:
        """``solid``, ``dangling`` or ``waiting`` (for its dependents' deletion)."""
        owner = self.graph.get(ref.get("uid", ""))
        if owner is not None:
            return "waiting" if owner.deleting_dependents else "solid"
        assert self.client is not None
        namespaced = self._namespaced.get((ref.get("apiVersion", ""), ref.get("kind", "")), True)
        try:
            live = await self.client.get(ref.get("kind", ""), ref.get("name", ""),
                                         node.namespace if namespaced else None,
                                         api_version=ref.get("apiVersion"))
        except ApiError as err:
            if is_not_found(err):
                return "dangling"
            raise
        if live["metadata"].get("uid") != ref.get("uid"):
            return "dangling"
        meta = live["metadata"]
        if meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or []):
            return "waiting"
        return "solid"

    async def attempt_to_delete(self, uid: str) -> None:
        """``attemptToDeleteItem``."""
        assert self.client is not None and self.process is not None
        node = self.graph.get(uid)
        if node is None:
            return
        obj = self._cached(node)
        if obj is None or obj["metadata"].get("uid") != uid:
            return
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if meta.get("deletionTimestamp"):
            if FOREGROUND in finalizers:
                await self.process_deleting_dependents(node, obj)
            return
        owners = meta.get("ownerReferences") or []
        if not owners:
            return
        states = {ref.get("uid"): await self._owner_state(node, ref) for ref in owners}
        solid = [r for r in owners if states[r.get("uid")] == "solid"]
        if solid:
            gone = [r for r in owners if states[r.get("uid")] != "solid"]
            if gone:
                await self._set_owners(node, obj, solid)
            return
        waiting = any(states[r.get("uid")] == "waiting" for r in owners)
        if waiting and node.dependents:
            policy = "Foreground"
        elif ORPHAN in finalizers:
            policy = "Orphan"
        elif FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self.process.log("gc_delete", kind=node.kind, namespace=node.namespace, name=node.name,
                         policy=policy)
        try:
            await self.client.delete(node.kind, node.name, node.namespace,
                                     api_version=node.api_version, propagation_policy=policy,
                                     preconditions={"uid": uid})
        except ApiError as err:
            if not (is_not_found(err) or is_conflict(err)):
                raise

    async def process_deleting_dependents(self, node: GraphNode, obj: Obj) -> None:
        """``processDeletingDependentsItem``: remove ``foregroundDeletion`` once no dependent
        blocks it; otherwise make sure the blocking ones are being deleted."""
        assert self.queue is not None
        blocking = []
        for dep_uid in node.dependents:
            dep = self.graph.get(dep_uid)
            if dep is None:
                continue
            ref = next((o for o in dep.owners if o.get("uid") == node.uid), None)
            if ref is not None and ref.get("blockOwnerDeletion"):
                blocking.append(dep)
        if not blocking:
            await self._remove_finalizer(node, obj, FOREGROUND)
            return
        for dep in blocking:
            if not dep.deleting:
                self.queue.add(f"delete:{dep.uid}")

    async def attempt_to_orphan(self, uid: str) -> None:
        """``orphanDependents`` then remove the ``orphan`` finalizer."""
        node = self.graph.get(uid)
        if node is None:
            return
        obj = self._cached(node)
        if obj is None or ORPHAN not in (obj["metadata"].get("finalizers") or []):
            return
        for dep_uid in list(node.dependents):
            dep = self.graph.get(dep_uid)
            if dep is None:
                continue
            dep_obj = self._cached(dep)
            if dep_obj is None:
                continue
            keep = [o for o in dep_obj["metadata"].get("ownerReferences") or []
                    if o.get("uid") != uid]
            await self._set_owners(dep, dep_obj, keep)
        await self._remove_finalizer(node, obj, ORPHAN)

    async def _set_owners(self, node: GraphNode, obj: Obj, owners: list[Obj]) -> None:
        assert self.client is not None
        try:
            await self.client.patch(node.kind, node.name,
                                    {"metadata": {"ownerReferences": owners or None,
                                                  "resourceVersion": obj["metadata"]
                                                  ["resourceVersion"]}},
                                    node.namespace, api_version=node.api_version)
        except ApiError as err:
            if not is_not_found(err):
                raise

    async def _remove_finalizer(self, node: GraphNode, obj: Obj, finalizer: str) -> None:
        assert self.client is not None
        rest = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        try:
            await self.client.patch(node.kind, node.name,
                                    {"metadata": {"finalizers": rest or None,
                                                  "resourceVersion": obj["metadata"]
                                                  ["resourceVersion"]}},
                                    node.namespace, api_version=node.api_version)
        except ApiError as err:
            if not is_not_found(err):
                raise
