"""Fuzz the API server against kube-apiserver's contract with a Hypothesis state machine.

Random manifests of every served kind go through every write path (create, update with stale
and fresh resourceVersions, update_status, merge / JSON / strategic patches, deletes with each
propagation policy and grace period, finalizer removal, delete_collection by selector), with
two writers racing on one object, watches opened and restarted from random resourceVersions
(past, current, future, compacted) with label and field selectors, paginated lists with a write
between pages, and a small history window so compaction happens all the time. Checked after
every step, from the store's own commit log (recorded by a listener) and an independent model of
selectors and compaction:

- the commit log's revisions go up by exactly one per change, and every answer's
  resourceVersion is the revision of the change it made (no-op writes make none);
- every watch stream equals the commit log from its start revision, filtered by its selector as
  kube's watch cache does (no lost, duplicated or reordered events, list→watch included);
- 410 exactly when the requested revision is compacted (watches, Exact lists, continue tokens);
- a paginated list equals the state at its first page's revision, even with writes in between;
- nothing but `ApiError` subclasses is ever raised.

    PYTHONPATH=. python benchmarks/fuzz_apiserver.py --ops 100000 [--steps 60] [--json]
    PYTHONPATH=. python benchmarks/fuzz_apiserver.py --ops 1000000 --soak 1   # the soak

Prints operations per second and findings (a Hypothesis falsifying example, shrunk, with the
``@reproduce_failure`` blob to replay it); exits 1 on a finding. Examples are random, as
Hypothesis draws them; a finding is replayed from its blob.
``tests/apiserver/test_fuzz_apiserver.py`` runs a CI-sized batch.

Over 500 lines: one state machine whose rules share the commit log and the model; split, the
contract it checks would be scattered.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import random
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from emu.apiserver.errors import ApiError
from emu.apiserver.server import APIServer
from emu.apiserver.store import Change
from emu.kernel.rng import SimRandom

Obj = dict[str, Any]
NAMES = ("a", "b", "c")
NAMESPACES = ("default", "other")
LABEL_VALUES = ("x", "y")
HISTORY = 40  # small, so compaction happens every few dozen writes
STEPS = 60


def _containers() -> list[Obj]:
    return [{"name": "main", "image": "busybox:1.36"}]


def _pod_template(name: str) -> Obj:
    return {"metadata": {"labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "containers": _containers()}}


#: One valid manifest body per served kind (everything but apiVersion, kind and metadata).
TEMPLATES: dict[tuple[str, str], Callable[[str], Obj]] = {
    ("v1", "ConfigMap"): lambda n: {"data": {"k": "v"}},
    ("v1", "Secret"): lambda n: {"data": {"k": base64.b64encode(n.encode()).decode()}},
    ("v1", "Pod"): lambda n: {"spec": {"containers": _containers()}},
    ("v1", "Service"): lambda n: {"spec": {"ports": [{"port": 80}], "selector": {"app": n}}},
    ("v1", "ServiceAccount"): lambda n: {},
    ("v1", "Endpoints"): lambda n: {"subsets": []},
    ("v1", "PersistentVolumeClaim"): lambda n: {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
    ("v1", "Event"): lambda n: {"involvedObject": {"kind": "Pod", "name": n, "namespace": "default"},
                                "reason": "Fuzzed", "message": "m", "type": "Normal"},
    ("apps/v1", "Deployment"): lambda n: {"spec": {"selector": {"matchLabels": {"app": n}},
                                                   "template": _pod_template(n)}},
    ("apps/v1", "ReplicaSet"): lambda n: {"spec": {"selector": {"matchLabels": {"app": n}},
                                                   "template": _pod_template(n)}},
    ("batch/v1", "Job"): lambda n: {"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": _containers()}}}},
    ("coordination.k8s.io/v1", "Lease"): lambda n: {"spec": {"holderIdentity": n}},
    ("discovery.k8s.io/v1", "EndpointSlice"): lambda n: {"addressType": "IPv4", "endpoints": []},
    ("v1", "Node"): lambda n: {"spec": {}},
    ("ray.io/v1", "RayCluster"): lambda n: {"spec": {"headGroupSpec": {"template": {"spec": {
        "containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}}}},
}
KINDS = tuple(sorted(TEMPLATES))
#: Rules name one of the (up to three) kinds an example chose, so writes and watches meet.
KIND_IX = st.integers(0, 2)


def manifest(kind: tuple[str, str], name: str, ns: str, labels: dict[str, str] | None,
             finalizers: list[str]) -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": kind[0], "kind": kind[1], "metadata": meta, **TEMPLATES[kind](name)}


# -- an independent model of label selectors -------------------------------------------------------

Selector = tuple[str, ...]  # ("app", "=", "x") | ("app", "!=", "x") | ("app", "exists") | ...


def selector_text(sel: Selector | None) -> str | None:
    if sel is None:
        return None
    if sel[1] == "exists":
        return sel[0]
    if sel[1] == "!exists":
        return "!" + sel[0]
    if sel[1] == "in":
        return f"{sel[0]} in ({','.join(sel[2:])})"
    return f"{sel[0]}{sel[1]}{sel[2]}"


def selector_matches(sel: Selector | None, labels: dict[str, str]) -> bool:
    if sel is None:
        return True
    key, op = sel[0], sel[1]
    if op == "=":
        return labels.get(key) == sel[2]
    if op == "!=":
        return labels.get(key) != sel[2]
    if op == "exists":
        return key in labels
    if op == "!exists":
        return key not in labels
    return labels.get(key) in sel[2:]


SELECTORS = st.one_of(
    st.none(),
    st.tuples(st.just("app"), st.sampled_from(["=", "!="]), st.sampled_from(LABEL_VALUES)),
    st.tuples(st.sampled_from(["app", "tier"]), st.sampled_from(["exists", "!exists"])),
    st.just(("app", "in", "x", "y")),
)
LABELS = st.one_of(st.none(), st.fixed_dictionaries({"app": st.sampled_from(LABEL_VALUES)}),
                   st.fixed_dictionaries({"app": st.sampled_from(LABEL_VALUES),
                                          "tier": st.just("t")}))


class Finding(AssertionError):
    """A contract violation (raised inside the state machine so Hypothesis shrinks it)."""


class LogEntry:
    __slots__ = ("gk", "labels", "name", "ns", "prev_labels", "rev", "type")

    def __init__(self, change: Change) -> None:
        self.rev = change.rev
        self.type = change.type
        self.gk = change.table.gk
        self.ns = change.entry.ns
        self.name = change.entry.name
        self.labels = orjson.loads(change.entry.data)["metadata"].get("labels") or {}
        self.prev_labels = (None if change.prev is None else
                            orjson.loads(change.prev.data)["metadata"].get("labels") or {})


def take_ready(stream: Any) -> list[Obj]:
    """Events already queued on a watch, without an event loop."""
    out = []
    while stream.pending:
        coro = stream.__anext__()
        try:
            coro.send(None)
        except StopIteration as done:
            out.append(done.value)
        else:
            coro.close()
            raise Finding("a queued watch event needed to wait")
    return out


class Watch:
    def __init__(self, stream: Any, gk: tuple[str, str], ns: str | None, sel: Selector | None,
                 name: str | None, expected: list[tuple[str, str, int]], start: int) -> None:
        self.stream, self.gk, self.ns, self.sel, self.name = stream, gk, ns, sel, name
        self.expected = expected
        self.start = start
        self.seen: list[tuple[str, str, int]] = []


class ApiContract(RuleBasedStateMachine):
    """One fresh server per example; see the module docstring for what is checked."""

    ops = 0
    #: watch events compared with the commit log, over all examples
    events = 0

    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0
        self.api = APIServer(clock=lambda: self.t, rng=SimRandom(7), history_window=HISTORY)
        self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
        self.log: list[LogEntry] = []
        self.api.store.listeners.append(self._commit)
        self.rev = self.api.resource_version
        self.watches: list[Watch] = []
        self.kinds: list[tuple[str, str]] = list(KINDS[:1])
        # model: (gk, ns, name) -> (labels, rv) folded from the commit log
        self.state: dict[tuple[tuple[str, str], str, str], tuple[dict[str, str], int]] = {}

    @initialize(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True))
    def choose_kinds(self, kinds: list[tuple[str, str]]) -> None:
        self.kinds = kinds

    # -- the commit log and the model ----------------------------------------------------------

    def _commit(self, change: Change) -> None:
        entry = LogEntry(change)
        self.log.append(entry)
        key = (entry.gk, entry.ns, entry.name)
        if entry.type == "DELETED":
            self.state.pop(key, None)
        else:
            self.state[key] = (entry.labels, entry.rev)
        for w in self.watches:
            if entry.gk != w.gk or (w.ns is not None and entry.ns != w.ns) or entry.rev <= w.start:
                continue
            if w.name is not None and entry.name != w.name:
                continue
            event = self._expected_event(w.sel, entry)
            if event is not None:
                w.expected.append(event)

    @staticmethod
    def _expected_event(sel: Selector | None, e: LogEntry) -> tuple[str, str, int] | None:
        cur = selector_matches(sel, e.labels)
        old = e.prev_labels is not None and selector_matches(sel, e.prev_labels)
        if e.type == "DELETED":
            return ("DELETED", e.name, e.rev) if old else None
        if cur and old:
            return ("MODIFIED", e.name, e.rev)
        if cur:
            return ("ADDED", e.name, e.rev)
        return ("DELETED", e.name, e.rev) if old else None

    def _compacted(self) -> int:
        return max(0, self.api.resource_version - HISTORY)

    def call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run one server call: an ApiError is an answer (returned), anything else a finding."""
        ApiContract.ops += 1
        try:
            return fn(*args, **kw)
        except ApiError as err:
            return err
        except Exception as err:
            raise Finding(f"{fn.__name__} raised {type(err).__name__}, not an ApiError: {err}") \
                from err

    def _wrote(self, out: Any, key: tuple[tuple[str, str], str, str] | None = None) -> None:
        """An answer's resourceVersion is that of the last change it made, or of the stored
        object when it made none."""
        if isinstance(out, ApiError) or not isinstance(out, dict):
            return
        rv = (out.get("metadata") or {}).get("resourceVersion")
        if rv is None or out.get("kind") == "Status":
            return
        if int(rv) > self.api.resource_version:
            raise Finding(f"answer resourceVersion {rv} is ahead of the store "
                          f"({self.api.resource_version})")

    # -- writes ---------------------------------------------------------------------------------

    @rule(kind_ix=KIND_IX, name=st.sampled_from(NAMES),
          ns=st.sampled_from(NAMESPACES), labels=LABELS,
          finalizers=st.sampled_from([[], ["fuzz.io/f"]]), dry=st.booleans())
    def create(self, kind_ix: int, name: str, ns: str, labels: Any,
               finalizers: list[str], dry: bool) -> None:
        self._create(self.kinds[kind_ix % len(self.kinds)], name, ns, labels, finalizers, dry)

    def _create(self, kind: tuple[str, str], name: str, ns: str, labels: Any,
                finalizers: list[str], dry: bool) -> None:
        before = self.api.resource_version
        out = self.call(self.api.create, manifest(kind, name, ns, labels, finalizers),
                        dry_run=dry)
        if isinstance(out, ApiError):
            return
        if dry:
            if self.api.resource_version != before or "resourceVersion" in out["metadata"]:
                raise Finding("a dry-run create wrote or answered a resourceVersion")
            return
        if out["metadata"]["resourceVersion"] != str(self.api.resource_version):
            raise Finding("create answered a resourceVersion other than its commit's")

    @staticmethod
    def _choose(data: Any, options: list[Any]) -> Any:
        """Draw one of ``options`` from Hypothesis's data, or from the soak's `random.Random`."""
        if isinstance(data, random.Random):
            return data.choice(options)
        return data.draw(st.sampled_from(options))

    def _pick(self, data: Any) -> tuple[tuple[str, str], str, str] | None:
        keys = sorted(k for k in self.state if k[0][1] != "Namespace")
        return self._choose(data, keys) if keys else None

    def _get(self, key: tuple[tuple[str, str], str, str]) -> Obj | None:
        (group, kind), ns, name = key
        info = self.api.kinds.resolve(kind, f"{group}/v1" if group else "v1")
        out = self.call(self.api.get, kind, name, ns, api_version=info.api_version)
        return None if isinstance(out, ApiError) else out

    @rule(data=st.data(), labels=LABELS, stale=st.booleans(), value=st.sampled_from("pqr"))
    def update(self, data: Any, labels: Any, stale: bool, value: str) -> None:
        key = self._pick(data)
        obj = self._get(key) if key else None
        if obj is None:
            return
        if stale:
            obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) - 1)
        obj["metadata"]["labels"] = labels or {}
        obj.setdefault("metadata", {}).setdefault("annotations", {})["fuzz"] = value
        out = self.call(self.api.update, obj)
        if stale and not isinstance(out, ApiError):
            raise Finding("an update with a stale resourceVersion succeeded")
        self._wrote(out)

    @rule(data=st.data(), phase=st.sampled_from(["Pending", "Running", "Done"]))
    def update_status(self, data: Any, phase: str) -> None:
        key = self._pick(data)
        obj = self._get(key) if key else None
        if obj is None:
            return
        obj["status"] = {"phase": phase} if key and key[0][1] in ("Pod", "Namespace") else {}
        self._wrote(self.call(self.api.update_status, obj))

    @rule(data=st.data(), ptype=st.sampled_from(["merge", "json", "strategic"]), labels=LABELS)
    def patch(self, data: Any, ptype: str, labels: Any) -> None:
        key = self._pick(data)
        if key is None:
            return
        (group, kind), ns, name = key
        body: Any
        if ptype == "json":
            body = [{"op": "add", "path": "/metadata/labels", "value": labels or {}}]
        else:
            body = {"metadata": {"labels": labels}}
        out = self.call(self.api.patch, kind, name, body, namespace=ns, patch_type=ptype,
                        api_version=f"{group}/v1" if group else "v1")
        self._wrote(out)

    @rule(data=st.data(), policy=st.sampled_from([None, "Background", "Foreground", "Orphan"]),
          grace=st.sampled_from([None, 0, 5, 60]), dry=st.booleans())
    def delete(self, data: Any, policy: str | None, grace: int | None,
               dry: bool) -> None:
        key = self._pick(data)
        if key is None:
            return
        (group, kind), ns, name = key
        before = self.api.resource_version
        out = self.call(self.api.delete, kind, name, ns, propagation_policy=policy,
                        grace_period_seconds=grace, dry_run=dry,
                        api_version=f"{group}/v1" if group else "v1")
        if dry and self.api.resource_version != before:
            raise Finding("a dry-run delete wrote")
        self._wrote(out)

    @rule(data=st.data())
    def remove_finalizers(self, data: Any) -> None:
        key = self._pick(data)
        obj = self._get(key) if key else None
        if obj is None or not obj["metadata"].get("finalizers"):
            return
        obj["metadata"]["finalizers"] = []
        self._wrote(self.call(self.api.update, obj))

    @rule(kind_ix=KIND_IX, ns=st.sampled_from(NAMESPACES), sel=SELECTORS)
    def delete_collection(self, kind_ix: int, ns: str, sel: Selector | None) -> None:
        kind = self.kinds[kind_ix % len(self.kinds)]
        out = self.call(self.api.delete_collection, kind[1], ns, label_selector=selector_text(sel),
                        api_version=kind[0])
        if isinstance(out, ApiError):
            return
        for item in out["items"]:
            labels = (item.get("metadata") or {}).get("labels") or {}
            if item.get("kind") != "Status" and not selector_matches(sel, labels):
                raise Finding(f"delete_collection {selector_text(sel)} deleted {labels}")

    @rule(data=st.data())
    def conflicting_writers(self, data: Any) -> None:
        """Two writers read the same version; the second write must be a Conflict."""
        key = self._pick(data)
        first = self._get(key) if key else None
        if first is None:
            return
        second = json.loads(json.dumps(first))
        first["metadata"].setdefault("annotations", {})["writer"] = "one"
        second["metadata"].setdefault("annotations", {})["writer"] = "two"
        one = self.call(self.api.update, first)
        if isinstance(one, ApiError) or one["metadata"]["resourceVersion"] == \
                second["metadata"]["resourceVersion"]:
            return  # the first write failed or changed nothing
        two = self.call(self.api.update, second)
        if not (isinstance(two, ApiError) and two.code == 409) and two is not None:
            raise Finding(f"the second of two racing writers was not a Conflict: {two!r:.200}")

    @rule(seconds=st.sampled_from([0, 1, 30, 120]))
    def time_passes(self, seconds: int) -> None:
        self.t += seconds

    # -- reads ----------------------------------------------------------------------------------

    @precondition(lambda self: len(self.watches) < 4)
    @rule(kind_ix=KIND_IX, ns=st.sampled_from([None, *NAMESPACES]), sel=SELECTORS,
          by_name=st.sampled_from([None, "a"]),
          start=st.sampled_from(["list", "current", "past", "future", "ancient", "watch-list"]),
          back=st.integers(1, 2 * HISTORY))
    def open_watch(self, kind_ix: int, ns: str | None, sel: Selector | None,
                   by_name: str | None, start: str, back: int) -> None:
        kind = self.kinds[kind_ix % len(self.kinds)]
        self._open(kind, ns, sel, by_name, start, back)

    @precondition(lambda self: len(self.watches) < 4)
    @rule(data=st.data(), sel=SELECTORS,
          start=st.sampled_from(["list", "current", "past", "watch-list"]),
          back=st.integers(1, HISTORY))
    def watch_a_written_kind(self, data: Any, sel: Selector | None, start: str,
                             back: int) -> None:
        """Most drawn kinds have seen no write yet: watch one that has, across namespaces."""
        key = self._pick(data)
        if key is None:
            return
        (group, kind), _, _ = key
        self._open((f"{group}/v1" if group else "v1", kind), None, sel, None, start, back)

    def _open(self, kind: tuple[str, str], ns: str | None, sel: Selector | None,
              by_name: str | None, start: str, back: int) -> None:
        api = self.api
        info = api.kinds.resolve(kind[1], kind[0])
        gk = (info.group, info.kind)
        if not info.namespaced:
            ns = None  # a cluster-scoped kind ignores the request's namespace
        cur = api.resource_version
        rv: int | None = {"list": None, "current": cur, "past": max(1, cur - back),
                          "future": cur + back, "ancient": 1, "watch-list": None}[start]
        kw: Obj = {}
        if start == "watch-list":
            kw = {"send_initial_events": True, "resource_version_match": "NotOlderThan",
                  "allow_bookmarks": True}
        stream = self.call(api.watch, kind[1], ns, label_selector=selector_text(sel),
                           field_selector=f"metadata.name={by_name}" if by_name else None,
                           resource_version=None if rv is None else str(rv),
                           api_version=kind[0], **kw)
        if isinstance(stream, ApiError):
            raise Finding(f"opening a watch failed: {stream!r}")
        expected: list[tuple[str, str, int]] = []
        if rv is None:  # the current objects first, in key order
            for (g, o_ns, name), (labels, orv) in sorted(self.state.items()):
                if g == gk and (ns is None or o_ns == ns) and selector_matches(sel, labels) \
                        and (by_name is None or name == by_name):
                    expected.append(("ADDED", name, orv))
            if start == "watch-list":
                expected.append(("BOOKMARK", "", cur))
            first = cur
        elif rv < self._compacted():
            events = take_ready(stream)
            if [e["type"] for e in events] != ["ERROR"] or events[0]["object"]["code"] != 410:
                raise Finding(f"a watch from compacted {rv} (compacted {self._compacted()}) "
                              f"got {[e['type'] for e in events]}")
            return
        else:
            first = rv
            for e in self.log:
                if e.rev > rv and e.gk == gk and (ns is None or e.ns == ns) and \
                        (by_name is None or e.name == by_name):
                    event = self._expected_event(sel, e)
                    if event is not None:
                        expected.append(event)
        self.watches.append(Watch(stream, gk, ns, sel, by_name, expected, first))

    @precondition(lambda self: bool(self.watches))
    @rule(data=st.data())
    def restart_watch(self, data: Any) -> None:
        """Close a watch and resume from the last revision it saw, as a reflector does."""
        w = self._choose(data, list(range(len(self.watches))))
        watch = self.watches.pop(w)
        self._drain(watch)
        watch.stream.close()
        last = max([r for _, _, r in watch.seen] + [watch.start])
        info = self.api.kinds.resolve(watch.gk[1], None if not watch.gk[0] else
                                      f"{watch.gk[0]}/v1")
        kind = (info.api_version, info.kind)
        cur = self.api.resource_version
        self._open(kind, watch.ns, watch.sel, watch.name, "past", cur - last)

    def _drain(self, w: Watch) -> None:
        for event in take_ready(w.stream):
            meta = event["object"]["metadata"]
            name = "" if event["type"] == "BOOKMARK" else meta["name"]
            w.seen.append((event["type"], name, int(meta["resourceVersion"])))

    @rule(kind_ix=KIND_IX, ns=st.sampled_from([None, *NAMESPACES]), sel=SELECTORS,
          limit=st.integers(1, 3), write_between=st.booleans())
    def paginated_list(self, kind_ix: int, ns: str | None, sel: Selector | None,
                       limit: int, write_between: bool) -> None:
        kind = self.kinds[kind_ix % len(self.kinds)]
        info = self.api.kinds.resolve(kind[1], kind[0])
        gk = (info.group, info.kind)
        if not info.namespaced:
            ns = None
        want = [(o_ns, name, rv) for (g, o_ns, name), (labels, rv) in sorted(self.state.items())
                if g == gk and (ns is None or o_ns == ns) and selector_matches(sel, labels)]
        got: list[tuple[str, str, int]] = []
        token = None
        first_rev = None
        while True:
            page = self.call(self.api.list, kind[1], ns, label_selector=selector_text(sel),
                             limit=limit, continue_=token, api_version=kind[0])
            if isinstance(page, ApiError):
                if page.code == 410 and first_rev is not None and first_rev < self._compacted():
                    return  # 410 exactly because the first page's revision is compacted
                raise Finding(f"a list page failed: {page!r}")
            if first_rev is None:
                first_rev = int(page["metadata"]["resourceVersion"])
            elif first_rev < self._compacted():
                raise Finding(f"a continuation at compacted {first_rev} was served")
            got += [(o["metadata"].get("namespace", ""), o["metadata"]["name"],
                     int(o["metadata"]["resourceVersion"])) for o in page["items"]]
            token = page["metadata"].get("continue")
            if not token:
                break
            if write_between:
                self._create(kind, "z", ns or "default", {"app": "x"}, [], False)
        if got != want:
            raise Finding(f"paginated list {got} != state at its revision {want}")

    @rule(back=st.integers(0, 2 * HISTORY), kind_ix=KIND_IX)
    def exact_list(self, back: int, kind_ix: int) -> None:
        kind = self.kinds[kind_ix % len(self.kinds)]
        rev = max(1, self.api.resource_version - back)
        out = self.call(self.api.list, kind[1], resource_version=str(rev),
                        resource_version_match="Exact", api_version=kind[0])
        gone = isinstance(out, ApiError) and out.code == 410
        if gone != (rev < self._compacted()):
            raise Finding(f"Exact list at {rev} (compacted {self._compacted()}): "
                          f"{'410' if gone else 'served'}")

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def revisions_go_up_by_one(self) -> None:
        tail = self.log[-50:]
        for prev, nxt in itertools.pairwise(tail):
            if nxt.rev != prev.rev + 1:
                raise Finding(f"revision {prev.rev} was followed by {nxt.rev}")
        if self.log and self.log[-1].rev != self.api.resource_version:
            raise Finding("the store's revision is not its last change's")

    @invariant()
    def watches_equal_the_commit_log(self) -> None:
        for w in self.watches:
            before = len(w.seen)
            self._drain(w)
            ApiContract.events += len(w.seen) - before
            if w.seen != w.expected[:len(w.seen)] or len(w.seen) != len(w.expected):
                raise Finding(f"watch {w.gk} ns={w.ns} sel={selector_text(w.sel)} from "
                              f"{w.start}: saw {w.seen[-5:]}, the log says {w.expected[-5:]}")

    def teardown(self) -> None:
        for w in self.watches:
            w.stream.close()


def _describe(err: BaseException) -> str:
    """A finding's message with the shrunk steps Hypothesis attached to it."""
    return "\n".join([f"{type(err).__name__}: {err}", *getattr(err, "__notes__", ())])


def run(ops: int, steps: int = STEPS) -> dict[str, Any]:
    """Run batches of examples until ``ops`` server calls were made; the result has the counts,
    the rate and the first finding (None when the contract held)."""
    ApiContract.ops = ApiContract.events = 0
    start = time.perf_counter()
    finding = None
    while ApiContract.ops < ops:
        # Hypothesis starts a run with its simplest (near-empty) examples, so runs stay long
        # enough to get past them; the total may overshoot ``ops`` by one run.
        conf = settings(max_examples=max(20, min(200, (ops - ApiContract.ops) // steps + 1)),
                        stateful_step_count=steps, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck),
                        phases=[Phase.generate, Phase.shrink], print_blob=True)
        try:
            run_state_machine_as_test(ApiContract, settings=conf,
                                      _min_steps=steps // 2)
        except Exception as err:  # a Finding, shrunk; or a bug in this harness
            finding = "\n\n".join(_describe(e) for e in getattr(err, "exceptions", [err]))
            break
    seconds = time.perf_counter() - start
    return {"ops": ApiContract.ops, "seconds": round(seconds, 2),
            "ops_per_s": round(ApiContract.ops / seconds) if seconds else 0,
            "watch_events_checked": ApiContract.events,
            "finding": finding}


# -- the soak driver: the same rules, drawn by a seeded random.Random -----------------------------

def _sel(rng: random.Random) -> Selector | None:
    return rng.choice([None, ("app", rng.choice(["=", "!="]), rng.choice(LABEL_VALUES)),
                       (rng.choice(["app", "tier"]), rng.choice(["exists", "!exists"])),
                       ("app", "in", "x", "y")])


def _labels(rng: random.Random) -> dict[str, str] | None:
    return rng.choice([None, {"app": rng.choice(LABEL_VALUES)},
                       {"app": rng.choice(LABEL_VALUES), "tier": "t"}])


#: Each rule's arguments as the soak draws them: the same spaces as the rules' strategies.
SOAK_ARGS: dict[str, Callable[[random.Random], Obj]] = {
    "create": lambda r: {"kind_ix": r.randrange(3), "name": r.choice(NAMES),
                         "ns": r.choice(NAMESPACES), "labels": _labels(r),
                         "finalizers": r.choice([[], ["fuzz.io/f"]]), "dry": r.random() < .5},
    "update": lambda r: {"data": r, "labels": _labels(r), "stale": r.random() < .5,
                         "value": r.choice("pqr")},
    "update_status": lambda r: {"data": r, "phase": r.choice(["Pending", "Running", "Done"])},
    "patch": lambda r: {"data": r, "ptype": r.choice(["merge", "json", "strategic"]),
                        "labels": _labels(r)},
    "delete": lambda r: {"data": r, "policy": r.choice([None, "Background", "Foreground",
                                                        "Orphan"]),
                         "grace": r.choice([None, 0, 5, 60]), "dry": r.random() < .5},
    "remove_finalizers": lambda r: {"data": r},
    "delete_collection": lambda r: {"kind_ix": r.randrange(3), "ns": r.choice(NAMESPACES),
                                    "sel": _sel(r)},
    "conflicting_writers": lambda r: {"data": r},
    "time_passes": lambda r: {"seconds": r.choice([0, 1, 30, 120])},
    "open_watch": lambda r: {"kind_ix": r.randrange(3), "ns": r.choice([None, *NAMESPACES]),
                             "sel": _sel(r), "by_name": r.choice([None, "a"]),
                             "start": r.choice(["list", "current", "past", "future", "ancient",
                                                "watch-list"]),
                             "back": r.randint(1, 2 * HISTORY)},
    "watch_a_written_kind": lambda r: {"data": r, "sel": _sel(r),
                                       "start": r.choice(["list", "current", "past",
                                                          "watch-list"]),
                                       "back": r.randint(1, HISTORY)},
    "restart_watch": lambda r: {"data": r},
    "paginated_list": lambda r: {"kind_ix": r.randrange(3), "ns": r.choice([None, *NAMESPACES]),
                                 "sel": _sel(r), "limit": r.randint(1, 3),
                                 "write_between": r.random() < .5},
    "exact_list": lambda r: {"back": r.randint(0, 2 * HISTORY), "kind_ix": r.randrange(3)},
}
_NEEDS_FREE_WATCH = frozenset(("open_watch", "watch_a_written_kind"))


def soak(ops: int, seed: int, steps: int = STEPS) -> dict[str, Any]:
    """The same machine driven by ``random.Random(seed)`` instead of Hypothesis's engine, which
    spends most of a step choosing it: for a million operations. No shrinking: a finding names
    the seed, the example and its steps, so it replays."""
    rng = random.Random(seed)
    names = sorted(SOAK_ARGS)
    ApiContract.ops = ApiContract.events = 0
    start = time.perf_counter()
    finding = None
    example = 0
    while ApiContract.ops < ops and finding is None:
        example += 1
        machine = ApiContract()
        done: list[str] = []
        try:
            machine.choose_kinds(rng.sample(KINDS, rng.randint(1, 3)))
            for _ in range(steps):
                name = rng.choice(names)
                if (name in _NEEDS_FREE_WATCH and len(machine.watches) >= 4) or (
                        name == "restart_watch" and not machine.watches):
                    continue
                kwargs = SOAK_ARGS[name](rng)
                shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k != "data")
                done.append(f"{name}({shown})")
                getattr(machine, name)(**kwargs)
                machine.revisions_go_up_by_one()
                machine.watches_equal_the_commit_log()
        except Exception as err:
            finding = (f"{type(err).__name__}: {err}\nseed {seed}, example {example}, steps:\n  "
                       + "\n  ".join(done[-25:]) + "\n" + "".join(
                           traceback.format_exception_only(type(err), err)).strip())
        finally:
            machine.teardown()
    seconds = time.perf_counter() - start
    return {"ops": ApiContract.ops, "seconds": round(seconds, 2),
            "ops_per_s": round(ApiContract.ops / seconds) if seconds else 0,
            "watch_events_checked": ApiContract.events, "examples": example,
            "driver": f"random (seed {seed})", "finding": finding}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ops", type=int, default=20_000, help="server calls to make")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps per example")
    parser.add_argument("--soak", type=int, metavar="SEED", default=None,
                        help="drive the rules with random.Random(SEED) instead of Hypothesis's "
                             "engine (much faster; no shrinking): for the million-op soak")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.ops < 1:
        parser.error("--ops must be at least 1")
    result = (run(args.ops, args.steps) if args.soak is None
              else soak(args.ops, args.soak, args.steps))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"fuzz_apiserver: {result['ops']:,} operations in {result['seconds']} s "
              f"({result['ops_per_s']:,} ops/s), {result['watch_events_checked']:,} watch events "
              "checked against the commit log")
        print("finding: " + (result["finding"] or "none: the contract held"))
    return 1 if result["finding"] else 0


if __name__ == "__main__":
    sys.exit(main())
