"""Event handlers: turn a cache event into the requests a controller's queue receives.

Port of controller-runtime ``pkg/handler`` (``enqueue.go``, ``enqueue_owner.go``,
``enqueue_mapped.go``). Three ways to decide what to reconcile when an object changes:

- `EnqueueRequestForObject`: the object itself (``For``);
- `EnqueueRequestForOwner`: the owner named by the object's *controller* ownerReference
  (``Owns``: a Pod event reconciles its RayCluster);
- `EnqueueRequestsFromMapFunc`: whatever a mapping function returns (``Watches``). The function
  may be async (it may read through the cached client); its requests are then added when it
  finishes, from a task of the same process.

Handlers are called synchronously from the informer, in event order; the queue deduplicates.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from .reconcile import Request

Obj = dict[str, Any]
MapFunc = Callable[[Obj], "Iterable[Request] | Awaitable[Iterable[Request]]"]


class Queue(Protocol):
    def add(self, item: Request) -> None: ...


class EventHandler:
    """Port of ``handler.TypedEventHandler``: one method per event kind."""

    def create(self, obj: Obj, queue: Queue) -> None:
        pass

    def update(self, old: Obj, new: Obj, queue: Queue) -> None:
        pass

    def delete(self, obj: Obj, queue: Queue) -> None:
        pass

    def generic(self, obj: Obj, queue: Queue) -> None:
        pass


class EnqueueRequestForObject(EventHandler):
    """Port of ``EnqueueRequestForObject`` (enqueue.go): reconcile the object that changed."""

    def create(self, obj: Obj, queue: Queue) -> None:
        queue.add(Request.for_object(obj))

    def update(self, old: Obj, new: Obj, queue: Queue) -> None:
        queue.add(Request.for_object(new if new is not None else old))

    def delete(self, obj: Obj, queue: Queue) -> None:
        queue.add(Request.for_object(obj))

    def generic(self, obj: Obj, queue: Queue) -> None:
        queue.add(Request.for_object(obj))


def _group(api_version: str | None) -> str:
    if not api_version or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


class EnqueueRequestForOwner(EventHandler):
    """Port of ``EnqueueRequestForOwner`` (enqueue_owner.go): reconcile the owner of type
    ``owner_kind`` (group taken from ``owner_api_version`` when given). With ``only_controller``
    (``OnlyControllerOwner()``, what ``Owns`` uses) only the reference with ``controller: true``
    counts. Owners are assumed namespaced, in the object's namespace."""

    def __init__(self, owner_kind: str, owner_api_version: str | None = None, *,
                 only_controller: bool = True) -> None:
        self.owner_kind = owner_kind
        self.owner_group = _group(owner_api_version) if owner_api_version else None
        self.only_controller = only_controller

    def get_owner_reconcile_request(self, obj: Obj) -> list[Request]:
        """Port of ``enqueueRequestForOwner.getOwnerReconcileRequest``."""
        meta = obj.get("metadata") or {}
        out: list[Request] = []
        for ref in meta.get("ownerReferences") or []:
            if self.only_controller and not ref.get("controller"):
                continue
            if ref.get("kind") != self.owner_kind:
                continue
            if self.owner_group is not None and _group(ref.get("apiVersion")) != self.owner_group:
                continue
            out.append(Request(str(meta.get("namespace") or ""), str(ref.get("name") or "")))
        return out

    def _add(self, objs: Iterable[Obj | None], queue: Queue) -> None:
        seen: dict[Request, None] = {}
        for obj in objs:
            if obj is not None:
                for req in self.get_owner_reconcile_request(obj):
                    seen[req] = None
        for req in seen:
            queue.add(req)

    def create(self, obj: Obj, queue: Queue) -> None:
        self._add([obj], queue)

    def update(self, old: Obj, new: Obj, queue: Queue) -> None:
        self._add([old, new], queue)

    def delete(self, obj: Obj, queue: Queue) -> None:
        self._add([obj], queue)

    def generic(self, obj: Obj, queue: Queue) -> None:
        self._add([obj], queue)


class EnqueueRequestsFromMapFunc(EventHandler):
    """Port of ``EnqueueRequestsFromMapFunc`` (enqueue_mapped.go): reconcile what ``fn(obj)``
    returns; on update both the old and the new object are mapped, requests deduplicated."""

    def __init__(self, fn: MapFunc) -> None:
        self.fn = fn
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def _map(self, objs: list[Obj | None], queue: Queue) -> None:
        results = [self.fn(o) for o in objs if o is not None]
        if any(inspect.isawaitable(r) for r in results):
            task = asyncio.ensure_future(self._map_async(results, queue))
            self._tasks[id(task)] = task
            task.add_done_callback(lambda t: self._tasks.pop(id(t), None))
            return
        self._add_all(results, queue)  # type: ignore[arg-type]

    async def _map_async(self, results: list[Any], queue: Queue) -> None:
        done = [await r if inspect.isawaitable(r) else r for r in results]
        self._add_all(done, queue)

    @staticmethod
    def _add_all(results: list[Iterable[Request]], queue: Queue) -> None:
        seen: dict[Request, None] = {}
        for reqs in results:
            for req in reqs:
                seen[req] = None
        for req in seen:
            queue.add(req)

    def create(self, obj: Obj, queue: Queue) -> None:
        self._map([obj], queue)

    def update(self, old: Obj, new: Obj, queue: Queue) -> None:
        self._map([old, new], queue)

    def delete(self, obj: Obj, queue: Queue) -> None:
        self._map([obj], queue)

    def generic(self, obj: Obj, queue: Queue) -> None:
        self._map([obj], queue)
