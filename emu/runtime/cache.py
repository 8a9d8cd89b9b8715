"""The manager's informer cache and the cached client controllers read through.

Port of controller-runtime ``pkg/cache`` (``informer_cache.go``, ``multi_namespace_cache.go``)
and the delegating client of ``pkg/client``, reduced to what a controller can observe:

- informers are created on first use (`Cache.get_informer`), by a controller's source when the
  controller starts or by a read: a standby replica whose controllers have not started has none,
  so a new leader starts **cold** and lists everything before its first reconcile;
- once the cache has started, a new informer starts at once; before, it waits for `Cache.start`;
- watch namespaces (``DefaultNamespaces``) scope every informer: one informer per namespace when
  several are given; per-kind label selectors (``ByObject``) hide objects outside them, as
  KubeRay's cache selectors hide unlabelled Pods and Jobs;
- `CachedClient` reads from the cache (blocking until the kind has synced; an object the cache
  has not seen is `NotFound`) and writes through the process's `Client` to the API server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..apiserver.errors import BadRequest, NotFound
from ..client.client import Client, ObjectList
from ..client.informer import EventHandler, Informer
from ..kernel.process import Process
from ..kernel.rng import SimRandom

Obj = dict[str, Any]


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class CacheOptions:
    """Port of ``cache.Options`` (the parts KubeRay sets)."""

    #: Namespaces every informer is limited to. Defaults to () = all namespaces.
    default_namespaces: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    #: Kind → label selector its informer uses (``ByObject[...].Label``). Defaults to none.
    by_object: dict[str, str] = attrs.field(factory=dict)


class KindInformer:
    """The informers of one kind: one for all namespaces, or one per watched namespace."""

    def __init__(self, kind: str, informers: dict[str | None, Informer]) -> None:
        self.kind = kind
        self.informers = informers
        self.started = False

    def __repr__(self) -> str:
        return f"<KindInformer {self.kind} namespaces={list(self.informers)}>"

    def has_synced(self) -> bool:
        return all(inf.has_synced() for inf in self.informers.values())

    async def wait_synced(self) -> None:
        for inf in self.informers.values():
            await inf.wait_synced()

    def add_event_handler(self, handler: EventHandler) -> None:
        for inf in self.informers.values():
            inf.add_event_handler(handler)

    def covers(self, namespace: str | None) -> bool:
        return None in self.informers or namespace is None or namespace in self.informers

    def get(self, name: str, namespace: str | None) -> Obj | None:
        inf = self.informers.get(None) or self.informers.get(namespace)
        return inf.get(name, namespace) if inf is not None else None

    def list(self, namespace: str | None, label_selector: str | dict[str, str] | None) -> list[Obj]:
        if None in self.informers:
            return self.informers[None].list(namespace, label_selector)
        if namespace is not None:
            inf = self.informers.get(namespace)
            return inf.list(namespace, label_selector) if inf is not None else []
        out: list[Obj] = []
        for ns in sorted(k for k in self.informers if k is not None):
            out.extend(self.informers[ns].list(None, label_selector))
        return out


class Cache:
    """The informer cache of one manager; its informers run as tasks of the manager's process."""

    def __init__(self, client: Client, options: CacheOptions | None = None, *,
                 process: Process | None = None, rng: SimRandom | None = None,
                 on_informer: Callable[[str], None] | None = None) -> None:
        self.client = client
        self.options = options or CacheOptions()
        self.process = process
        self.rng = rng
        self._kinds: dict[str, KindInformer] = {}
        self._started = False
        self._on_informer = on_informer
        self._tasks: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        return f"<Cache kinds={list(self._kinds)}>"

    @property
    def started(self) -> bool:
        return self._started

    def kinds(self) -> list[str]:
        """Kinds with an informer, in the order they were first asked for."""
        return list(self._kinds)

    def get_informer(self, kind: str) -> KindInformer:
        """The informer for ``kind``, created (and started if the cache runs) on first use."""
        ki = self._kinds.get(kind)
        if ki is not None:
            return ki
        selector = self.options.by_object.get(kind)
        namespaces: list[str | None] = list(self.options.default_namespaces) or [None]
        informers: dict[str | None, Informer] = {}
        for ns in namespaces:
            rng = self.rng.fork(f"informer:{kind}:{ns or '*'}") if self.rng is not None else None
            informers[ns] = Informer(self.client, kind, namespace=ns, label_selector=selector,
                                     rng=rng)
        ki = KindInformer(kind, informers)
        self._kinds[kind] = ki
        if self._on_informer is not None:
            self._on_informer(kind)
        if self._started:
            self._run(ki)
        return ki

    def _run(self, ki: KindInformer) -> None:
        if ki.started:
            return
        ki.started = True
        for ns, inf in ki.informers.items():
            coro = inf.run()
            name = f"informer:{ki.kind}:{ns or '*'}"
            if self.process is not None:
                self.process.spawn(coro, name=name)
            else:
                self._tasks.append(asyncio.ensure_future(coro))

    async def start(self) -> None:
        """Port of ``informerCache.Start``: run every informer asked for so far and any later."""
        self._started = True
        for ki in list(self._kinds.values()):
            self._run(ki)
        await asyncio.Event().wait()

    async def wait_for_cache_sync(self) -> bool:
        """Port of ``WaitForCacheSync``: wait until every informer so far has listed once."""
        for ki in list(self._kinds.values()):
            await ki.wait_synced()
        return True


def _not_found(kind: str, name: str) -> NotFound:
    return NotFound(kind.lower() + ("" if kind.endswith("s") else "s"), name)


class CachedClient:
    """Port of the manager's default client: reads from the cache, writes to the API server.

    ``get``/``list`` block until the kind's informer has synced (controller-runtime does the
    same), so the first read on a cold cache costs a list. Writes go through ``writer`` (the
    process's `Client`) and so meet every fault on the network.
    """

    def __init__(self, cache: Cache, writer: Client) -> None:
        self.cache = cache
        self.writer = writer

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        ki = self.cache.get_informer(kind)
        if not ki.covers(namespace):
            raise BadRequest(f'unable to get: {namespace}/{name} because of unknown namespace '
                             f'for the cache')
        await ki.wait_synced()
        obj = ki.get(name, namespace)
        if obj is None:
            raise _not_found(kind, name)
        return obj

    async def list(self, kind: str, namespace: str | None = None, *,
                   label_selector: str | dict[str, str] | None = None) -> ObjectList:
        ki = self.cache.get_informer(kind)
        await ki.wait_synced()
        return ObjectList(ki.list(namespace, label_selector))

    # -- writes go to the API server ------------------------------------------------------------

    async def create(self, obj: Obj, *, namespace: str | None = None) -> Obj:
        return await self.writer.create(obj, namespace=namespace)

    async def update(self, obj: Obj) -> Obj:
        return await self.writer.update(obj)

    async def update_status(self, obj: Obj) -> Obj:
        return await self.writer.update_status(obj)

    async def patch(self, kind: str, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> Obj:
        return await self.writer.patch(kind, name, patch, namespace, patch_type=patch_type,
                                       subresource=subresource)

    async def delete(self, kind: str, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None) -> Obj:
        return await self.writer.delete(kind, name, namespace,
                                        propagation_policy=propagation_policy,
                                        grace_period_seconds=grace_period_seconds,
                                        preconditions=preconditions)

    async def delete_collection(self, kind: str, namespace: str | None = None, *,
                                label_selector: str | dict[str, str] | None = None) -> Obj:
        return await self.writer.delete_collection(kind, namespace, label_selector=label_selector)
