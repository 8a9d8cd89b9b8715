"""An informer: list, then watch, into a local cache; relist on 410 Gone.

This is client-go's reflector + store + shared informer, reduced to what controllers observe:
- the cache is empty until the first list completes (`Informer.synced`): a new leader starts cold;
- watch events are applied in order, each exactly once; a broken stream is re-watched from the last
  seen resourceVersion after a backoff (800 ms doubling to 30 s, jittered from the seeded RNG);
  a 410 Gone relists;
- ``lag`` delays every event's application by a fixed number of virtual seconds, to make stale
  reads on purpose (the cache a controller reads from is behind the API server);
- observation faults (`ObservationFaults`, made by ``emu.faults``' `InformerLag`, `StaleList`,
  `CoalesceEvents` and `ShuffleLists`) perturb what one process's informers observe: a lagging
  watch of one kind, a first list served at an older revision, events coalesced to the latest
  state per object (as a relist delivers them), and a seeded shuffle of list order (Go's cache
  returns map order). They act here, never in controllers.

The cache keeps each object as the API server stored it: its serialized bytes (the very bytes
object the store holds, handed over with the watch event or list item, so an object costs the
informers that cache it a key and a reference, not a decoded tree each) and its labels, for the
indexes. A read decodes (`get`, `list`: one ``orjson.loads``, which is also the copy a caller may
mutate); an event is decoded once by the watch stream and that object is handed to each of its
handlers, then dropped (an update's old object is decoded from the cached bytes when there are
handlers). Handlers are called synchronously, in order; the handlers of one event share its
decoded object, so they must not mutate it (nothing they do reaches the cache, but the next
handler would see it).
"""

from __future__ import annotations

import asyncio
import builtins
import random
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import orjson

from ..apiserver.errors import ApiError, is_gone
from ..apiserver.selectors import LabelSelector, parse_label_selector
from ..apiserver.watch import WatchEvent
from ..kernel.network import Network, NetworkError
from .client import Client, ObjectList, selector_text

Obj = dict[str, Any]
Labels = dict[str, str]

_loads = orjson.loads


def object_key(obj: Obj) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), client-go's MetaNamespaceKey."""
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _namespace_of(key: str) -> str | None:
    """The namespace in an `object_key` (None for a cluster-scoped object: names have no /)."""
    at = key.find("/")
    return key[:at] if at >= 0 else None


def _stored(event: dict[str, Any], obj: Obj) -> tuple[bytes, Labels | None]:
    """The bytes and labels to cache for an ADDED or MODIFIED event's object: the store's own
    when the event carries them (a `WatchEvent` from the API server), else encoded from the
    decoded object (an event from elsewhere: one extra encode) with a private copy of its
    labels, since handlers get that object."""
    if type(event) is WatchEvent and event.data is not None:
        return event.data, event.labels or None
    labels = (obj.get("metadata") or {}).get("labels")
    return orjson.dumps(obj), (dict(labels) if labels else None)


class EventHandler:
    """Callbacks for cache changes; override what you need (client-go ResourceEventHandler)."""

    def on_add(self, obj: Obj) -> None:
        pass

    def on_update(self, old: Obj, new: Obj) -> None:
        pass

    def on_delete(self, obj: Obj) -> None:
        pass


class FuncHandler(EventHandler):
    """An `EventHandler` from plain functions."""

    def __init__(self, on_add: Callable[[Obj], None] | None = None,
                 on_update: Callable[[Obj, Obj], None] | None = None,
                 on_delete: Callable[[Obj], None] | None = None) -> None:
        self._add, self._update, self._delete = on_add, on_update, on_delete

    def on_add(self, obj: Obj) -> None:
        if self._add:
            self._add(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        if self._update:
            self._update(old, new)

    def on_delete(self, obj: Obj) -> None:
        if self._delete:
            self._delete(obj)


class Informer:
    """A cached, watched view of one kind (optionally one namespace and a label selector).

    The cache holds the API server's stored bytes of each object; `get` and `list` decode them,
    so what a reader gets is its own copy."""

    BACKOFF_INITIAL = 0.8
    BACKOFF_MAX = 30.0

    def __init__(self, client: Client, kind: str, *, namespace: str | None = None,
                 label_selector: str | dict[str, str] | None = None,
                 field_selector: str | None = None, api_version: str | None = None,
                 lag: float = 0.0, rng: random.Random | None = None) -> None:
        if lag < 0:
            raise ValueError(f"informer lag can't be negative: {lag}")
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self.label_selector = selector_text(label_selector) if label_selector else None
        self.field_selector = field_selector
        self.api_version = api_version
        self.lag = lag
        self._rng = rng
        #: key -> the object's serialized bytes (shared with the API server's store)
        self._cache: dict[str, bytes] = {}
        #: key -> the object's labels, for objects that have some (read only: often the store's)
        self._labels: dict[str, Labels] = {}
        # Indexes, so a namespace or label-selector list is not a scan of the whole cache:
        # namespace -> keys, and (label key, value) -> keys (dicts used as ordered sets).
        self._by_ns: dict[str, dict[str, None]] = {}
        self._by_label: dict[tuple[str, str], dict[str, None]] = {}
        self._selectors: dict[str, LabelSelector] = {}
        self._handlers: list[EventHandler] = []
        self.synced = asyncio.Event()
        self.last_resource_version = ""
        self.relists = 0
        self._pending: deque[tuple[float, dict[str, Any]]] = deque()
        self._pending_ready = asyncio.Event()
        self._applier: asyncio.Future[None] | None = None
        self._obs = observation_faults(client.network)
        #: events held by a `CoalesceEvents` window: the latest per object key
        self._coalesced: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"<Informer {self.kind} ns={self.namespace or '*'} objects={len(self._cache)}>"

    # -- reading the cache -----------------------------------------------------------------------

    def has_synced(self) -> bool:
        return self.synced.is_set()

    async def wait_synced(self) -> None:
        await self.synced.wait()

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        """The cached object (decoded: the caller's own copy), or None."""
        data = self._cache.get(f"{namespace}/{name}" if namespace else name)
        return _loads(data) if data is not None else None

    def list(self, namespace: str | None = None,
             label_selector: str | dict[str, str] | None = None) -> builtins.list[Obj]:
        """Cached objects (decoded: the caller's own copies), sorted by key, filtered by
        namespace and labels."""
        return [_loads(data) for data in self._select(namespace, label_selector)]

    def peek_list(self, namespace: str | None = None,
                  label_selector: str | dict[str, str] | None = None) -> builtins.list[Obj]:
        """The same as `list`. (It once handed out the cached objects themselves, which the
        caller was not to mutate; the cache now holds bytes and every read decodes, so there is
        nothing cheaper to share. Kept for its callers.)"""
        return self.list(namespace, label_selector)

    def _select(self, namespace: str | None,
                label_selector: str | dict[str, str] | None) -> builtins.list[bytes]:
        """The stored bytes of the cached objects a list returns, in its order."""
        matcher = self._selector(label_selector) if label_selector else None
        candidates: dict[str, None] | None = None
        if namespace is not None:
            candidates = self._by_ns.get(namespace, {})
        if matcher is not None:
            # Start from the smallest term, sizing each without copying it: a term many objects
            # share (``ray.io/node-type=head``) would make every such list O(cache).
            by_label = self._by_label
            best: builtins.list[dict[str, None]] | None = None
            best_size = len(candidates) if candidates is not None else -1
            for key, values in matcher.index_terms():
                if values is None:
                    continue
                sets = [found for value in values if (found := by_label.get((key, value)))]
                size = sum(len(found) for found in sets)
                if best_size < 0 or size < best_size:
                    best, best_size = sets, size
            if best is not None:
                if len(best) == 1:
                    candidates = best[0]
                else:
                    candidates = {}
                    for found in best:
                        candidates.update(found)
        cache = self._cache
        keys = sorted(cache) if candidates is None else sorted(candidates)
        if namespace is None and matcher is None:
            out = [cache[key] for key in keys]
        else:
            labels_of = self._labels
            out = []
            for key in keys:
                data = cache.get(key)
                if data is None:
                    continue
                if namespace is not None and _namespace_of(key) != namespace:
                    continue
                if matcher is not None and not matcher.matches(labels_of.get(key) or {}):
                    continue
                out.append(data)
        if self._obs.rules and len(out) > 1:
            self._shuffle(out)
        return out

    def _shuffle(self, items: builtins.list[Any]) -> None:
        """Shuffle ``items`` in place when a `ShuffleLists` rule matches (Go's map order)."""
        rule = self._obs._active(self, "shuffle")
        if rule is not None and rule.rng is not None and len(items) > 1:
            rule.rng.shuffle(items)
            rule.hits += 1

    def _selector(self, selector: str | dict[str, str]) -> LabelSelector:
        text = selector_text(selector)
        parsed = self._selectors.get(text)
        if parsed is None:
            if len(self._selectors) > 1024:
                self._selectors.clear()
            parsed = self._selectors[text] = parse_label_selector(text)
        return parsed

    def _index(self, key: str, labels: Labels | None) -> None:
        ns_keys = self._by_ns.get(_namespace_of(key) or "")
        if ns_keys is None:
            ns_keys = self._by_ns[_namespace_of(key) or ""] = {}
        ns_keys[key] = None
        if labels:
            self._labels[key] = labels
            by_label = self._by_label
            for label, value in labels.items():
                by_label.setdefault((label, str(value)), {})[key] = None

    def _unindex(self, key: str) -> None:
        ns_keys = self._by_ns.get(_namespace_of(key) or "")
        if ns_keys is not None:
            ns_keys.pop(key, None)
        labels = self._labels.pop(key, None)
        if labels:
            for label, value in labels.items():
                keys = self._by_label.get((label, str(value)))
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del self._by_label[(label, str(value))]

    def _store(self, key: str, data: bytes, labels: Labels | None) -> bytes | None:
        """Cache ``data`` under ``key``; the bytes it replaced, or None."""
        old = self._cache.get(key)
        if old is not None:
            if labels == self._labels.get(key):  # the indexes stay; keep the newer map
                self._cache[key] = data
                if labels:
                    self._labels[key] = labels
                return old
            self._unindex(key)
        self._cache[key] = data
        self._index(key, labels)
        return old

    def _remove(self, key: str) -> bytes | None:
        old = self._cache.pop(key, None)
        if old is not None:
            self._unindex(key)
        return old

    def keys(self) -> builtins.list[str]:
        return sorted(self._cache)

    def add_event_handler(self, handler: EventHandler) -> None:
        """Receive every later change; objects already cached are replayed as adds."""
        self._handlers.append(handler)
        keys = sorted(self._cache)
        if self._obs.rules:
            self._shuffle(keys)
        for key in keys:
            handler.on_add(_loads(self._cache[key]))

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = self.BACKOFF_INITIAL
        if self.lag > 0:
            self._ensure_applier()
        obs = self._obs
        obs._seq += 1
        token = obs._seq
        obs._informers[token] = self
        try:
            need_list = True
            while True:
                try:
                    if need_list:
                        await self._list()
                        need_list = False
                    await self._watch()
                    backoff = self.BACKOFF_INITIAL
                except ApiError as err:
                    if is_gone(err):
                        need_list = True
                        continue
                    await self._backoff(backoff)
                    backoff = min(backoff * 2, self.BACKOFF_MAX)
                except NetworkError:
                    await self._backoff(backoff)
                    backoff = min(backoff * 2, self.BACKOFF_MAX)
        finally:
            obs._informers.pop(token, None)
            if self._applier is not None:
                self._applier.cancel()
                self._applier = None

    def _ensure_applier(self) -> None:
        if self._applier is None or self._applier.done():
            self._applier = asyncio.ensure_future(self._apply_pending())

    async def _backoff(self, seconds: float) -> None:
        jitter = self._rng.random() * seconds if self._rng is not None else 0.0
        await asyncio.sleep(seconds + jitter)

    async def _list(self) -> None:
        obs = self._obs
        stale = obs._active(self, "stale") if obs.rules and self.relists == 0 else None
        # the stored bytes of each item, which the cache keeps as they are (dicts from a server
        # that ignores the option, or a `StaleList` fault, are handled below too)
        items = await self.client.list(self.kind, self.namespace, api_version=self.api_version,
                                       label_selector=self.label_selector,
                                       field_selector=self.field_selector, encoded=True)
        if stale is not None and stale.list_at is not None:
            items = stale.list_at(self, items)
        self.relists += 1
        self._pending.clear()
        self._coalesced.clear()
        # key -> (stored bytes, labels, the decoded object while handlers still need it)
        fresh: dict[str, tuple[bytes, Labels | None, Obj | None]] = {}
        keep = bool(self._handlers)
        for item in items:
            if isinstance(item, bytes):
                data, obj = item, _loads(item)
            else:  # already decoded: encode it once to cache it
                data, obj = orjson.dumps(item), item
            labels = (obj.get("metadata") or {}).get("labels")
            # the labels are copied only when the object goes on to handlers, who hold it
            fresh[object_key(obj)] = (data, (dict(labels) if keep else labels) if labels else None,
                                      obj if keep else None)
        gone_keys = sorted(set(self._cache) - set(fresh))
        fresh_keys = sorted(fresh)
        if obs.rules:
            self._shuffle(gone_keys)
            self._shuffle(fresh_keys)
        for key in gone_keys:
            gone = self._remove(key)
            if gone is not None and self._handlers:
                gone_obj = _loads(gone)
                for h in self._handlers:
                    h.on_delete(gone_obj)
        for key in fresh_keys:
            data, labels, new = fresh.pop(key)
            old = self._store(key, data, labels)
            if new is None or not self._handlers:
                continue
            if old is None:
                for h in self._handlers:
                    h.on_add(new)
            elif old is not data and old != data:  # a new resourceVersion (it is in the bytes)
                old_obj = _loads(old)
                for h in self._handlers:
                    h.on_update(old_obj, new)
        self.last_resource_version = items.resource_version
        self.synced.set()
        if stale is not None and stale.hold > 0:
            await asyncio.sleep(stale.hold)  # the cache stays at the old revision meanwhile

    async def _watch(self) -> None:
        stream = await self.client.watch(
            self.kind, self.namespace, label_selector=self.label_selector,
            field_selector=self.field_selector, resource_version=self.last_resource_version,
            allow_bookmarks=True, api_version=self.api_version,
        )
        loop = asyncio.get_running_loop()
        async for event in stream:
            etype = event.get("type")
            if etype == "ERROR":
                raise ApiError.from_status(event.get("object") or {})
            rv = event.get("object", {}).get("metadata", {}).get("resourceVersion")
            if rv:
                self.last_resource_version = rv
            if etype == "BOOKMARK":
                continue
            if self._obs.rules or self._coalesced:
                self._deliver(event)
            elif self.lag > 0 or self._pending:
                self._pending.append((loop.time() + self.lag, event))
                self._ensure_applier()
                self._pending_ready.set()
            else:
                self._apply(event)

    def _deliver(self, event: dict[str, Any]) -> None:
        """An event through the observation faults: coalesced, then lagged, then applied."""
        rule = self._obs._active(self, "coalesce") if self._obs.rules else None
        if rule is not None:
            key = object_key(event["object"])
            self._coalesced.pop(key, None)  # the latest state goes last, as a relist has it
            self._coalesced[key] = event
            rule.hits += 1
            return
        if self._coalesced:
            self._flush_coalesced()
        self._enqueue(event)

    def _enqueue(self, event: dict[str, Any]) -> None:
        lag = self.lag
        rule = self._obs._active(self, "lag") if self._obs.rules else None
        if rule is not None:
            lag += rule.seconds
            rule.hits += 1
        if lag > 0 or self._pending:
            self._pending.append((asyncio.get_running_loop().time() + lag, event))
            self._ensure_applier()
            self._pending_ready.set()
        else:
            self._apply(event)

    def _flush_coalesced(self) -> None:
        """Deliver what a coalescing window held, as a relist would: deletions of cached
        objects, then the latest state of each other object, each in key order."""
        if not self._coalesced:
            return
        held, self._coalesced = self._coalesced, {}
        keys = sorted(held)
        for key in keys:
            if held[key]["type"] == "DELETED":
                self._enqueue(held[key])
        for key in keys:
            if held[key]["type"] != "DELETED":
                self._enqueue(held[key])

    async def _apply_pending(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._pending:
                self._pending_ready.clear()
                await self._pending_ready.wait()
            due, event = self._pending[0]
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
                continue
            self._pending.popleft()
            self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        obj = event["object"]
        key = object_key(obj)
        etype = event["type"]
        if etype == "DELETED":
            if self._remove(key) is not None:
                for h in self._handlers:
                    h.on_delete(obj)
            return
        data, labels = _stored(event, obj)
        previous = self._store(key, data, labels)
        handlers = self._handlers
        if not handlers:
            return
        if previous is None:
            for h in handlers:
                h.on_add(obj)
        else:
            old = _loads(previous)
            for h in handlers:
                h.on_update(old, obj)


# -- observation faults ----------------------------------------------------------------------------


@attrs.define(eq=False)
class ObservationRule:
    """One active perturbation of what matching informers observe (made by the fault values
    `emu.faults.InformerLag`, `StaleList`, `CoalesceEvents` and `ShuffleLists`).

    ``process`` matches the informer's process name or host (or its client's identity; None:
    every process); ``kinds`` the informer's kind as it was asked for (empty: every kind).
    ``hits`` counts how often the rule changed what an informer observed, so a fault that
    never did is reported as not performed."""

    effect: str  # "lag" | "stale" | "coalesce" | "shuffle"
    process: str | None = None
    kinds: frozenset[str] = frozenset()
    seconds: float = 0.0
    until: float | None = None
    hold: float = 0.0
    rng: random.Random | None = None
    #: for "stale": (informer, the fresh list) -> the list served at the older revision
    list_at: Callable[[Informer, ObjectList], ObjectList] | None = None
    hits: int = 0
    id: int = 0

    def matches(self, inf: Informer) -> bool:
        if self.kinds and inf.kind not in self.kinds:
            return False
        if self.process is None:
            return True
        proc = inf.client.process
        if proc is not None:
            return self.process in (proc.name, proc.host)
        return self.process == inf.client.identity


class ObservationFaults:
    """The observation rules active in one world, and the informers running in it (in start
    order, so a rule's start or end reaches them deterministically). Reached from an informer
    through its client's network (`observation_faults`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.rules: dict[int, ObservationRule] = {}
        self._seq = 0
        self._informers: dict[int, Informer] = {}

    def add(self, rule: ObservationRule) -> ObservationRule:
        """Activate ``rule``; informers it matches see its effect from now on."""
        self._seq += 1
        rule.id = self._seq
        self.rules[rule.id] = rule
        return rule

    def remove(self, rule: ObservationRule) -> None:
        """End ``rule``: informers whose events it coalesced get the latest state now."""
        if self.rules.pop(rule.id, None) is None:
            return
        if rule.effect == "coalesce":
            for inf in list(self._informers.values()):
                inf._flush_coalesced()

    def informers(self) -> list[Informer]:
        """The running informers, in start order."""
        return list(self._informers.values())

    def _active(self, inf: Informer, effect: str) -> ObservationRule | None:
        now = self._clock()
        found = None
        for rule in self.rules.values():
            if rule.effect != effect or (rule.until is not None and now >= rule.until):
                continue
            if rule.matches(inf):
                found = rule
        return found


_OBSERVATION: weakref.WeakKeyDictionary[Network, ObservationFaults] = weakref.WeakKeyDictionary()


def observation_faults(network: Network) -> ObservationFaults:
    """The observation rules of the world ``network`` belongs to (created on first use)."""
    obs = _OBSERVATION.get(network)
    if obs is None:
        clock = getattr(network, "_clock", None) or (lambda: asyncio.get_event_loop().time())
        obs = _OBSERVATION[network] = ObservationFaults(clock)
    return obs
