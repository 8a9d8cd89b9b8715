"""The MVCC store, the etcd analog: serialized objects, one global revision, history, indexes.

Each stored object is an `Entry`: its orjson bytes (immutable, so a read is ``orjson.loads`` and
never shares mutable state with the store) plus the few values the server needs without decoding
it (revision, uid, labels, owner uids, selectable fields, finalizers). Every write gets the next
revision and appends a `Change` to a bounded history, which watches replay from; changes older
than the window are compacted, and a watch from before them gets 410.

Indexes keep list and dependents queries off full scans: per kind by namespace and by label
(key → value → objects), and across kinds by owner uid (``ownerReferences``). `Entry`, `Change`
and `Table` are plain ``__slots__`` classes rather than attrs: they are built on every write.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..kernel.jsonbytes import exact
from .kinds import KindInfo
from .selectors import FieldSelector, LabelSelector

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds


class Entry:
    """One stored version of one object."""

    __slots__ = ("data", "deleting", "fields", "finalizers", "labels", "name", "ns", "owners",
                 "rev", "rv", "uid")

    def __init__(self, ns: str, name: str, data: bytes, rev: int, uid: str,
                 labels: dict[str, str], owners: tuple[str, ...],
                 fields: dict[str, str] | None, finalizers: tuple[str, ...],
                 deleting: bool) -> None:
        self.ns = ns
        self.name = name
        # a stored version lives long (current objects, the history, informers' caches)
        self.data = exact(data)
        self.rev = rev
        self.rv = str(rev)
        self.uid = uid
        self.labels = labels
        self.owners = owners
        self.fields = fields
        self.finalizers = finalizers
        self.deleting = deleting

    def field_values(self) -> dict[str, str]:
        """Selectable field values (``metadata.name``, ``status.phase``, ...)."""
        out = {"metadata.name": self.name, "metadata.namespace": self.ns}
        if self.fields:
            out.update(self.fields)
        return out


def _share_unchanged(entry: Entry, prev: Entry) -> None:
    """Point ``entry`` at ``prev``'s values where they are equal: the history keeps every
    version, and most writes (status updates) change none of these, so each version kept its
    own copy of the same labels, uid and selectable fields (informers share the labels too)."""
    entry.ns, entry.name = prev.ns, prev.name
    if entry.uid == prev.uid:
        entry.uid = prev.uid
    if entry.labels == prev.labels:
        entry.labels = prev.labels
    if entry.fields == prev.fields:
        entry.fields = prev.fields
    if entry.owners == prev.owners:
        entry.owners = prev.owners
    if entry.finalizers == prev.finalizers:
        entry.finalizers = prev.finalizers


class Change:
    """One committed write: what a watch delivers. ``prev`` is the version it replaced."""

    __slots__ = ("entry", "prev", "rev", "table", "type")

    def __init__(self, rev: int, type: str, table: Table, entry: Entry,
                 prev: Entry | None) -> None:
        self.rev = rev
        self.type = type
        self.table = table
        self.entry = entry
        self.prev = prev


class Table:
    """All objects of one kind, with their namespace and label indexes."""

    __slots__ = ("by_ns", "gk", "info", "label_index", "objs")

    def __init__(self, info: KindInfo) -> None:
        self.info = info
        self.gk = (info.group, info.kind)
        self.objs: dict[Key, Entry] = {}
        self.by_ns: dict[str, dict[str, Entry]] = {}
        self.label_index: dict[str, dict[str, dict[Key, None]]] = {}

    def _index_labels(self, key: Key, labels: dict[str, str]) -> None:
        idx = self.label_index
        for k, v in labels.items():
            by_value = idx.get(k)
            if by_value is None:
                by_value = idx[k] = {}
            keys = by_value.get(v)
            if keys is None:
                keys = by_value[v] = {}
            keys[key] = None

    def _unindex_labels(self, key: Key, labels: dict[str, str]) -> None:
        idx = self.label_index
        for k, v in labels.items():
            by_value = idx[k]
            keys = by_value[v]
            del keys[key]
            if not keys:
                del by_value[v]
                if not by_value:
                    del idx[k]

    def put(self, entry: Entry, prev: Entry | None) -> None:
        key = (entry.ns, entry.name)
        self.objs[key] = entry
        ns_objs = self.by_ns.get(entry.ns)
        if ns_objs is None:
            ns_objs = self.by_ns[entry.ns] = {}
        ns_objs[entry.name] = entry
        if prev is None:
            self._index_labels(key, entry.labels)
        elif prev.labels != entry.labels:
            self._unindex_labels(key, prev.labels)
            self._index_labels(key, entry.labels)

    def remove(self, prev: Entry) -> None:
        key = (prev.ns, prev.name)
        del self.objs[key]
        ns_objs = self.by_ns[prev.ns]
        del ns_objs[prev.name]
        if not ns_objs:
            del self.by_ns[prev.ns]
        self._unindex_labels(key, prev.labels)

    def count(self, ns: str) -> int:
        return len(self.by_ns.get(ns, ()))

    def select(self, ns: str | None, labels: LabelSelector | None,
               fields: FieldSelector | None) -> list[Entry]:
        """Matching entries in etcd key order (namespace, then name)."""
        candidates: Iterable[Entry]
        name = fields.value_for("metadata.name") if fields is not None else None
        if name is not None and ns is not None:
            one = self.objs.get((ns, name))
            candidates = [one] if one is not None else []
        elif labels is not None and (terms := labels.index_terms()):
            keys = self._keys_for_terms(terms)
            objs = self.objs
            candidates = [objs[k] for k in sorted(keys) if ns is None or k[0] == ns]
        elif ns is not None:
            ns_objs = self.by_ns.get(ns)
            candidates = [ns_objs[n] for n in sorted(ns_objs)] if ns_objs else []
        else:
            objs = self.objs
            candidates = [objs[k] for k in sorted(objs)]
        out = []
        lab_empty = labels is None or labels.empty
        fld_empty = fields is None or fields.empty
        for e in candidates:
            if not lab_empty and not labels.matches(e.labels):  # type: ignore[union-attr]
                continue
            if not fld_empty and not fields.matches(e.field_values()):  # type: ignore[union-attr]
                continue
            out.append(e)
        return out

    def page(self, objs: dict[Key, Entry], ns: str | None, labels: LabelSelector | None,
             fields: FieldSelector | None, after: Key | None, limit: int
             ) -> tuple[list[Entry], bool, int]:
        """One page of a list in key order: up to ``limit`` matching entries after the key
        ``after`` (``limit`` 0: all), whether more match, and how many keys of the range remain
        unread after the page (etcd's count, which ignores selectors). ``objs`` is this table's
        objects now or at an older revision (`Store.snapshot`)."""
        if objs is self.objs and after is None and limit <= 0:
            return self.select(ns, labels, fields), False, 0
        keys = sorted(k for k in objs if ns is None or k[0] == ns)
        start = 0
        if after is not None:
            start = bisect.bisect_right(keys, after)
        lab_empty = labels is None or labels.empty
        fld_empty = fields is None or fields.empty
        out: list[Entry] = []
        for i in range(start, len(keys)):
            e = objs[keys[i]]
            if not lab_empty and not labels.matches(e.labels):  # type: ignore[union-attr]
                continue
            if not fld_empty and not fields.matches(e.field_values()):  # type: ignore[union-attr]
                continue
            if limit > 0 and len(out) == limit:
                return out, True, len(keys) - i
            out.append(e)
        return out, False, 0

    def _keys_for_terms(self, terms: list[tuple[str, tuple[str, ...] | None]]
                        ) -> dict[Key, None] | set[Key]:
        """Keys carrying every term, starting from the smallest term's set."""
        sets: list[dict[Key, None]] = []
        for key, values in terms:
            by_value = self.label_index.get(key)
            if not by_value:
                return {}
            vals = values if values is not None else tuple(by_value)
            if len(vals) == 1:
                sets.append(by_value.get(vals[0], {}))
            else:
                merged: dict[Key, None] = {}
                for val in vals:
                    merged.update(by_value.get(val, {}))
                sets.append(merged)
        sets.sort(key=len)
        first = sets[0]
        if len(sets) == 1:
            return first
        rest = sets[1:]
        return {k: None for k in first if all(k in s for s in rest)}


class Store:
    """Tables by kind, the global revision, the bounded history and the owner index."""

    def __init__(self, history_window: int = 10_000) -> None:
        if history_window < 1:
            raise ValueError(f"history_window must be at least 1, not {history_window}")
        self.rev = 0
        self.window = history_window
        #: the newest revision no longer in the history (a watch from before it gets 410).
        self.compacted = 0
        self.history: deque[Change] = deque()
        self.tables: dict[tuple[str, str], Table] = {}
        self.owners: dict[str, dict[tuple[tuple[str, str], str, str], None]] = {}
        self.listeners: list[Callable[[Change], None]] = []
        #: Listeners told only of changes to some kinds, by (group, kind) (`listen_kinds`).
        self.kind_listeners: dict[tuple[str, str], list[Callable[[Change], None]]] = {}

    def listen_kinds(self, kinds: Iterable[tuple[str, str]],
                     listener: Callable[[Change], None]) -> None:
        """Call ``listener`` with every later change to one of ``kinds`` ((group, kind) pairs),
        in commit order, after the `listeners` (every other write costs it nothing)."""
        for gk in sorted(kinds):
            self.kind_listeners.setdefault(gk, []).append(listener)

    def table(self, info: KindInfo) -> Table:
        table = self.tables.get((info.group, info.kind))
        if table is None:
            table = self.tables[(info.group, info.kind)] = Table(info)
        elif table.info is not info:
            table.info = info
        return table

    def commit(self, table: Table, type: str, entry: Entry, prev: Entry | None) -> Change:
        """Make a write visible: indexes, history, watchers. ``entry.rev`` must be rev + 1."""
        assert entry.rev == self.rev + 1, (entry.rev, self.rev)
        self.rev = entry.rev
        if type == "DELETED":
            assert prev is not None
            table.remove(prev)
        else:
            if prev is not None:
                _share_unchanged(entry, prev)
            table.put(entry, prev)
        old_owners = prev.owners if prev is not None else ()
        new_owners = entry.owners if type != "DELETED" else ()
        if old_owners != new_owners:
            ref = (table.gk, entry.ns, entry.name)
            for uid in old_owners:
                deps = self.owners.get(uid)
                if deps is not None:
                    deps.pop(ref, None)
                    if not deps:
                        del self.owners[uid]
            for uid in new_owners:
                self.owners.setdefault(uid, {})[ref] = None
        change = Change(entry.rev, type, table, entry, prev)
        history = self.history
        history.append(change)
        if len(history) > self.window:
            self.compacted = history.popleft().rev
        for listener in self.listeners:
            listener(change)
        if self.kind_listeners:
            for listener in self.kind_listeners.get(table.gk, ()):
                listener(change)
        return change

    def since(self, rev: int) -> Iterator[Change]:
        """Changes with revision > ``rev``, oldest first (caller checks `compacted`)."""
        history = self.history
        n = len(history)
        i = n
        while i > 0 and history[i - 1].rev > rev:
            i -= 1
        for j in range(i, n):
            yield history[j]

    def snapshot(self, table: Table, rev: int) -> dict[Key, Entry] | None:
        """``table``'s objects as they were at revision ``rev`` (a consistent read at an older
        revision, as etcd's MVCC serves one), or None when the history no longer reaches back
        that far. Rebuilt from the current objects by undoing, newest first, every change after
        ``rev``: the cost is the number of changes since then, not the size of the table."""
        if rev >= self.rev:
            return table.objs
        if rev < self.compacted:
            return None
        objs = dict(table.objs)
        gk = table.gk
        history = self.history
        i = len(history)
        while i > 0:
            i -= 1
            change = history[i]
            if change.rev <= rev:
                break
            if change.table.gk != gk:
                continue
            key = (change.entry.ns, change.entry.name)
            if change.prev is None:
                objs.pop(key, None)
            else:
                objs[key] = change.prev
        return objs

    def dependents(self, uid: str) -> list[Entry]:
        """Entries whose ownerReferences name ``uid``, in (kind, namespace, name) order."""
        out = []
        for gk, ns, name in sorted(self.owners.get(uid, ())):
            table = self.tables.get(gk)
            if table is not None:
                entry = table.objs.get((ns, name))
                if entry is not None:
                    out.append(entry)
        return out

    def stats(self) -> dict[str, Any]:
        return {"revision": self.rev, "compacted": self.compacted, "history": len(self.history),
                "objects": sum(len(t.objs) for t in self.tables.values())}
