"""Watches: streams of changes, fanned out only to the watchers that can match.

`WatchHub` indexes open watches by kind and namespace (``None`` = all namespaces), so a write
costs time proportional to the watchers of its kind in its namespace, not to every watch. A
`WatchStream` queues the stored `Entry` of each change it accepted and decodes it only when the
consumer asks for it (each consumer gets its own fresh dict). The event is a `WatchEvent`, a dict
that also carries the stored bytes and labels it was decoded from, so an informer can cache those
instead of the decoded tree (one shared, immutable copy instead of one per informer).

Selector semantics follow kube's watch cache (``cacheWatcher.convertToWatchEvent``): an object
that stops matching is delivered as DELETED, one that starts matching as ADDED. Bookmarks, when
asked for, are sent after ``bookmark_interval`` virtual seconds without an event, from a loop
timer armed only while the consumer waits (nothing polls).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import orjson

from .errors import Gone
from .kinds import KindInfo
from .selectors import FieldSelector, LabelSelector
from .store import Change, Entry, Store, Table

#: The annotation of the bookmark that ends ``sendInitialEvents`` (``metav1.InitialEventsAnnotationKey``).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

#: Seconds of silence before a watch that allows bookmarks gets one (kube sends about one a minute).
BOOKMARK_INTERVAL = 60.0

# A queued item: (type, what is sent, resourceVersion override or None). What is sent is the
# stored `Entry` for ADDED, MODIFIED and DELETED; the encoded Status for ERROR; for BOOKMARK b""
# (the end of a watch-list's initial events) or None.
_Item = tuple[str, Entry | bytes | None, str | None]


class WatchEvent(dict[str, Any]):
    """A decoded ``{"type": ..., "object": ...}`` event of an object, as a plain dict reads it,
    that also holds what the store holds for that object: ``data``, its serialized bytes (None
    when the event's resourceVersion is not the stored one: an object that left a selector is
    sent as DELETED at the revision that moved it), and ``labels``, the store's own label map.
    Both are shared with the store and with every other watcher: never mutate ``labels``."""

    __slots__ = ("data", "labels")

    data: bytes | None
    labels: dict[str, str]


#: The start of an encoded event line, by type, up to the stored object's bytes.
_LINE_START = {t: b'{"type":"' + t.encode() + b'","object":' for t in ("ADDED", "MODIFIED",
                                                                        "DELETED")}


class WatchStream:
    """One open watch. Async-iterate it for ``{"type": ..., "object": ...}`` events."""

    def __init__(self, hub: WatchHub | None, info: KindInfo, namespace: str | None,
                 labels: LabelSelector | None, fields: FieldSelector | None, *,
                 bookmarks: bool = False, bookmark_interval: float = BOOKMARK_INTERVAL,
                 timeout: float | None = None) -> None:
        self._hub = hub
        self.info = info
        self.namespace = namespace
        self._labels = labels if labels is not None and not labels.empty else None
        self._fields = fields if fields is not None and not fields.empty else None
        self._queue: deque[_Item] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._bookmarks = bookmarks
        self._bookmark_interval = bookmark_interval
        self._timeout = timeout
        self._deadline: asyncio.TimerHandle | None = None
        self._ending = False  # deliver what is queued, then stop (after an ERROR event)
        self.closed = False
        self.delivered = 0
        #: When set, iterating yields each event as its JSON line (``{"type":..,"object":..}``
        #: and a newline), built from the stored bytes without decoding them: for HTTP servers,
        #: which would only encode the decoded object again (`take_ready` drains the queue).
        self.encoded = False
        #: the revision the watch starts after: changes at or below it are not delivered and no
        #: bookmark goes below it (kube's cacheWatcher filters the same way), so a watch from a
        #: future resourceVersion sees only what comes after that version
        self.start_rev = 0

    # -- filling -----------------------------------------------------------------------------

    def _passes(self, entry: Entry) -> bool:
        if self._labels is not None and not self._labels.matches(entry.labels):
            return False
        return self._fields is None or self._fields.matches(entry.field_values())

    def offer(self, change: Change) -> None:
        """Queue ``change`` if it concerns this watch (called on every matching-kind write)."""
        if change.rev <= self.start_rev:
            return
        if self._labels is None and self._fields is None:
            self._queue.append((change.type, change.entry, None))
        else:
            prev = change.prev
            if change.type == "DELETED":
                if prev is not None and self._passes(prev):
                    self._queue.append(("DELETED", change.entry, None))
                else:
                    return
            else:
                cur = self._passes(change.entry)
                old = prev is not None and self._passes(prev)
                if cur and old:
                    self._queue.append(("MODIFIED", change.entry, None))
                elif cur:
                    self._queue.append(("ADDED", change.entry, None))
                elif old:
                    assert prev is not None
                    self._queue.append(("DELETED", prev, change.entry.rv))
                else:
                    return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def add_initial(self, entries: list[Entry]) -> None:
        self._queue.extend([("ADDED", entry, None) for entry in entries])

    def end_initial(self, rev: int) -> None:
        """Queue the bookmark that ends a watch-list's initial events (``sendInitialEvents``)."""
        self._queue.append(("BOOKMARK", b"", str(rev)))

    def fail(self, status: dict[str, Any]) -> None:
        """Queue an ERROR event carrying ``status``; the stream ends after it."""
        self._queue.append(("ERROR", orjson.dumps(status), None))
        self._ending = True

    # -- consuming ---------------------------------------------------------------------------

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> Any:
        while not self._queue:
            if self.closed or self._ending:
                self.close()
                raise StopAsyncIteration
            loop = asyncio.get_running_loop()
            if self._timeout is not None and self._deadline is None:
                self._deadline = loop.call_later(self._timeout, self._expire)
            waiter = self._waiter = loop.create_future()
            timer = (loop.call_later(self._bookmark_interval, self._bookmark)
                     if self._bookmarks else None)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        if self.closed:
            raise StopAsyncIteration
        item = self._queue.popleft()
        self.delivered += 1
        if self.encoded:
            return self._encode(item)
        return self._event(item)

    def _event(self, item: _Item) -> dict[str, Any]:
        type_, sent, rv = item
        if type(sent) is Entry:
            event = WatchEvent(type=type_, object=orjson.loads(sent.data))
            if rv is None:
                event.data = sent.data
            else:
                event["object"]["metadata"]["resourceVersion"] = rv
                event.data = None
            event.labels = sent.labels
            return event
        if type_ == "BOOKMARK":
            obj: dict[str, Any] = {"kind": self.info.kind, "apiVersion": self.info.api_version,
                                   "metadata": {"resourceVersion": rv}}
            if sent is not None:  # the end of a watch-list's initial events
                obj["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
        else:
            assert isinstance(sent, bytes)
            obj = orjson.loads(sent)
        return {"type": type_, "object": obj}

    def _encode(self, item: _Item) -> bytes:
        type_, sent, rv = item
        if rv is None and type(sent) is Entry:
            return _LINE_START[type_] + sent.data + b"}\n"
        return orjson.dumps(self._event(item)) + b"\n"

    def take_ready(self) -> list[Any]:
        """Every event queued now, without waiting (as `encoded` lines when that is set): an
        HTTP server writes the events that are ready together in one chunk (a watch from
        version 0 replays the whole collection at once)."""
        if self.closed:
            return []
        queue = self._queue
        convert = self._encode if self.encoded else self._event
        out = [convert(queue.popleft()) for _ in range(len(queue))]
        self.delivered += len(out)
        return out

    def take_chunk(self) -> bytes:
        """`take_ready` for an `encoded` stream, as one bytes (a watch from version 0 replays
        thousands of events: this is its inner loop)."""
        if self.closed or not self._queue:
            return b""
        queue, encode, start = self._queue, self._encode, _LINE_START
        chunk = b"".join([start[t] + e.data + b"}\n" if rv is None and type(e) is Entry
                          else encode((t, e, rv)) for t, e, rv in queue])
        self.delivered += len(queue)
        queue.clear()
        return chunk

    def _bookmark(self) -> None:
        if self.closed or self._queue:
            return
        rev = self._hub.store.rev if self._hub is not None else 0
        if rev < self.start_rev:
            return
        self._queue.append(("BOOKMARK", None, str(rev)))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _expire(self) -> None:
        self._ending = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """End the stream: a pending or later ``__anext__`` raises StopAsyncIteration."""
        if self.closed:
            return
        self.closed = True
        if self._hub is not None:
            self._hub.remove(self)
        if self._deadline is not None:
            self._deadline.cancel()
        self._queue.clear()
        self._wake()

    @property
    def pending(self) -> int:
        """Events queued but not yet consumed."""
        return len(self._queue)


#: Fields whose ``=`` value also indexes watches: kube's watch-cache trigger functions
#: (``pod.NodeNameTriggerFunc``), so a write to a Pod reaches only the kubelet of its Node
#: instead of being offered to every kubelet's watch.
TRIGGER_FIELD = "spec.nodeName"


class WatchHub:
    """Open watches by kind and namespace; receives every committed change from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._by_kind: dict[tuple[str, str], dict[str | None, dict[int, WatchStream]]] = {}
        #: Watches with a ``spec.nodeName=<value>`` field selector, by kind, namespace, value.
        self._by_trigger: dict[tuple[str, str],
                               dict[tuple[str | None, str], dict[int, WatchStream]]] = {}
        self._trigger_of: dict[int, tuple[str | None, str]] = {}
        store.listeners.append(self.publish)

    def _publish_triggered(self, change: Change) -> None:
        by_value = self._by_trigger.get(change.table.gk)
        if not by_value:
            return
        values = [(change.entry.fields or {}).get(TRIGGER_FIELD, "")]
        if change.prev is not None:
            old = (change.prev.fields or {}).get(TRIGGER_FIELD, "")
            if old != values[0]:
                values.append(old)
        for ns in (change.entry.ns, None):
            for value in values:
                streams = by_value.get((ns, value))
                if streams:
                    for stream in list(streams.values()):
                        stream.offer(change)

    def publish(self, change: Change) -> None:
        self._publish_triggered(change)
        by_ns = self._by_kind.get(change.table.gk)
        if not by_ns:
            return
        scoped = by_ns.get(change.entry.ns)
        if scoped:
            for stream in list(scoped.values()):
                stream.offer(change)
        everywhere = by_ns.get(None)
        if everywhere:
            for stream in list(everywhere.values()):
                stream.offer(change)

    def open(self, table: Table, namespace: str | None, labels: LabelSelector | None,
             fields: FieldSelector | None, resource_version: int | None, *,
             bookmarks: bool = False, bookmark_interval: float = BOOKMARK_INTERVAL,
             timeout: float | None = None, send_initial_events: bool | None = None
             ) -> WatchStream:
        """Start a watch. ``resource_version`` None (or 0) sends the current objects as ADDED
        first; otherwise every change after it is replayed from the history, or an ERROR 410 is
        sent when that history is compacted. ``send_initial_events`` True (a watch-list) sends
        the current objects then a bookmark annotated `INITIAL_EVENTS_END`; False with no
        version starts at the current revision with nothing first. Synchronous, so nothing can
        slip in between the snapshot and the registration."""
        stream = WatchStream(self, table.info, namespace, labels, fields, bookmarks=bookmarks,
                             bookmark_interval=bookmark_interval, timeout=timeout)
        store = self.store
        if send_initial_events:
            stream.add_initial(table.select(namespace, labels, fields))
            stream.end_initial(store.rev)
            stream.start_rev = store.rev
        elif send_initial_events is False and not resource_version:
            stream.start_rev = store.rev
        elif resource_version:
            stream.start_rev = resource_version
            if resource_version < store.compacted:
                stream.fail(Gone(f"too old resource version: {resource_version} "
                                 f"({store.compacted})").status)
                stream._hub = None
                return stream
            gk = table.gk
            for change in store.since(resource_version):
                if change.table.gk == gk and (namespace is None
                                              or change.entry.ns == namespace):
                    stream.offer(change)
        else:
            stream.add_initial(table.select(namespace, labels, fields))
            stream.start_rev = store.rev
        trigger = fields.value_for(TRIGGER_FIELD) if fields is not None else None
        if trigger is not None:
            self._trigger_of[id(stream)] = (namespace, trigger)
            self._by_trigger.setdefault(table.gk, {}).setdefault(
                (namespace, trigger), {})[id(stream)] = stream
            return stream
        self._by_kind.setdefault(table.gk, {}).setdefault(namespace, {})[id(stream)] = stream
        return stream

    def remove(self, stream: WatchStream) -> None:
        trigger = self._trigger_of.pop(id(stream), None)
        if trigger is not None:
            by_value = self._by_trigger.get((stream.info.group, stream.info.kind)) or {}
            streams = by_value.get(trigger)
            if streams is not None:
                streams.pop(id(stream), None)
                if not streams:
                    del by_value[trigger]
            return
        by_ns = self._by_kind.get((stream.info.group, stream.info.kind))
        if by_ns is None:
            return
        scoped = by_ns.get(stream.namespace)
        if scoped is not None:
            scoped.pop(id(stream), None)
            if not scoped:
                del by_ns[stream.namespace]

    def count(self) -> int:
        return sum(len(s) for by_ns in self._by_kind.values() for s in by_ns.values()) + len(
            self._trigger_of)
