"""Event sources: an informer's events, filtered by predicates, mapped by a handler, queued.

Port of controller-runtime ``pkg/internal/source/kind.go`` (``Kind.Start``, ``WaitForSync``) and
``event_handler.go`` (predicates are asked first; only then the handler maps the event).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..client.informer import EventHandler as InformerHandler
from .cache import Cache, KindInformer
from .handler import EventHandler, Queue
from .predicate import Predicate

Obj = dict[str, Any]


class _Adapter(InformerHandler):
    """Port of ``internal.EventHandler``: informer callbacks → predicates → handler → queue."""

    def __init__(self, handler: EventHandler, predicates: Sequence[Predicate], queue: Queue) -> None:
        self.handler = handler
        self.predicates = tuple(predicates)
        self.queue = queue

    def on_add(self, obj: Obj) -> None:
        if all(p.create(obj) for p in self.predicates):
            self.handler.create(obj, self.queue)

    def on_update(self, old: Obj, new: Obj) -> None:
        if all(p.update(old, new) for p in self.predicates):
            self.handler.update(old, new, self.queue)

    def on_delete(self, obj: Obj) -> None:
        if all(p.delete(obj) for p in self.predicates):
            self.handler.delete(obj, self.queue)


class Kind:
    """Port of ``source.Kind``: watch one kind through the manager's cache."""

    def __init__(self, cache: Cache, kind: str, handler: EventHandler,
                 predicates: Sequence[Predicate] = ()) -> None:
        self.cache = cache
        self.kind = kind
        self.handler = handler
        self.predicates = tuple(predicates)
        self._informer: KindInformer | None = None

    def __str__(self) -> str:
        return f"kind source: {self.kind}"

    def start(self, queue: Queue) -> None:
        """Get (creating, and so starting) the kind's informer and register the handler."""
        self._informer = self.cache.get_informer(self.kind)
        self._informer.add_event_handler(_Adapter(self.handler, self.predicates, queue))

    async def wait_for_sync(self) -> None:
        if self._informer is None:
            raise RuntimeError(f"{self}: wait_for_sync before start")
        await self._informer.wait_synced()
