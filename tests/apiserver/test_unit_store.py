"""The MVCC store: revisions, bounded history, label and owner indexes."""

from __future__ import annotations

import pytest

from emu.apiserver.kinds import builtin_registry
from emu.apiserver.selectors import parse_label_selector
from emu.apiserver.store import Entry, Store

CM = builtin_registry().resolve("ConfigMap")
POD = builtin_registry().resolve("Pod")


def entry(name: str, rev: int, labels=None, owners=(), ns="default") -> Entry:
    return Entry(ns, name, b"{}", rev, f"uid-{name}", labels or {}, owners, None, (), False)


def test_commit_requires_the_next_revision():
    store = Store()
    table = store.table(CM)
    store.commit(table, "ADDED", entry("a", 1), None)
    with pytest.raises(AssertionError):
        store.commit(table, "ADDED", entry("b", 5), None)
    assert store.rev == 1


def test_history_is_bounded_and_remembers_what_it_compacted():
    store = Store(history_window=2)
    table = store.table(CM)
    for i in range(1, 5):
        store.commit(table, "ADDED", entry(f"o{i}", i), None)
    assert [c.rev for c in store.history] == [3, 4]
    assert store.compacted == 2
    assert [c.rev for c in store.since(2)] == [3, 4]
    assert [c.rev for c in store.since(3)] == [4]
    assert list(store.since(4)) == []


def test_history_window_must_be_positive():
    with pytest.raises(ValueError, match="history_window must be at least 1, not 0"):
        Store(history_window=0)


def test_label_index_answers_selectors_and_is_cleaned_up():
    store = Store()
    table = store.table(CM)
    a1 = entry("a", 1, {"app": "x"})
    store.commit(table, "ADDED", a1, None)
    store.commit(table, "ADDED", entry("b", 2, {"app": "y"}), None)
    sel = parse_label_selector("app=x")
    assert [e.name for e in table.select(None, sel, None)] == ["a"]
    a2 = entry("a", 3, {"app": "z"})
    store.commit(table, "MODIFIED", a2, a1)
    assert table.select(None, sel, None) == []
    assert "x" not in table.label_index["app"]
    store.commit(table, "DELETED", entry("a", 4, {"app": "z"}), a2)
    assert table.label_index == {"app": {"y": {("default", "b"): None}}}
    assert table.by_ns == {"default": {"b": table.objs[("default", "b")]}}


def test_owner_index_tracks_dependents_across_kinds():
    store = Store()
    cms, pods = store.table(CM), store.table(POD)
    store.commit(pods, "ADDED", entry("p", 1, owners=("owner",)), None)
    c = entry("c", 2, owners=("owner",))
    store.commit(cms, "ADDED", c, None)
    assert [e.name for e in store.dependents("owner")] == ["c", "p"]
    store.commit(cms, "MODIFIED", entry("c", 3), c)
    assert [e.name for e in store.dependents("owner")] == ["p"]
    assert store.dependents("nobody") == []


def test_listeners_see_every_commit():
    store = Store()
    seen = []
    store.listeners.append(lambda change: seen.append((change.type, change.rev)))
    table = store.table(CM)
    store.commit(table, "ADDED", entry("a", 1), None)
    assert seen == [("ADDED", 1)]


def test_a_kind_listener_hears_only_its_kinds_after_the_other_listeners():
    store = Store()
    heard = []
    store.listeners.append(lambda c: heard.append(("all", c.entry.name)))
    store.listen_kinds([("", "Pod")], lambda c: heard.append(("pods", c.entry.name)))
    store.commit(store.table(CM), "ADDED", entry("cm", 1), None)
    store.commit(store.table(POD), "ADDED", entry("p", 2), None)
    assert heard == [("all", "cm"), ("all", "p"), ("pods", "p")]
