"""Stateful fuzzing: random sequences of API verbs against a model, with two invariants.

- ``resourceVersion`` strictly increases: every successful write takes exactly the next revision,
  every rejected one takes none;
- a watch opened at the start sees every change exactly once, in commit order, and its events
  agree with the model (ADDED for creates, DELETED when an object goes).

The watch is drained without an event loop: `WatchStream.__anext__` only awaits when its queue is
empty, so a queued event is taken by stepping the coroutine once.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from emu.apiserver.errors import ApiError
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom

NAMES = st.sampled_from(["a", "b", "c"])
LABELS = st.sampled_from([None, {"app": "x"}, {"app": "y"}, {"tier": "t"}])
FINALIZERS = st.sampled_from([[], ["x.io/f"]])


def take_ready(stream: Any) -> list[dict[str, Any]]:
    """Events already queued on ``stream``, without awaiting."""
    out = []
    while stream.pending:
        coro = stream.__anext__()
        try:
            coro.send(None)
        except StopIteration as done:
            out.append(done.value)
        else:  # pragma: no cover - would mean the queue was empty after all
            coro.close()
            raise AssertionError("a queued watch event needed to wait")
    return out


class ApiMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0
        self.api = APIServer(clock=lambda: self.t, rng=SimRandom(3))
        self.start = self.api.resource_version
        self.watch = self.api.watch("ConfigMap", "default", resource_version=str(self.start))
        self.rev = self.start
        self.model: dict[str, dict[str, Any]] = {}  # name -> {"finalizers", "deleting"}
        self.expected: list[tuple[str, str, int]] = []  # (type, name, rv) per committed change
        self.seen: list[tuple[str, str, int]] = []

    def _wrote(self, type_: str, name: str) -> None:
        self.rev += 1
        self.expected.append((type_, name, self.rev))

    def _check_no_write(self) -> None:
        assert self.api.resource_version == self.rev

    @rule(name=NAMES, labels=LABELS, finalizers=FINALIZERS)
    def create(self, name: str, labels: dict[str, str] | None, finalizers: list[str]) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": "default", "finalizers": finalizers}
        if labels:
            meta["labels"] = labels
        try:
            out = self.api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                   "data": {"v": "0"}})
        except ApiError as err:
            assert name in self.model and err.reason == "AlreadyExists"
            self._check_no_write()
            return
        assert name not in self.model
        self._wrote("ADDED", name)
        assert out["metadata"]["resourceVersion"] == str(self.rev)
        self.model[name] = {"finalizers": finalizers, "deleting": False}

    @rule(name=NAMES, value=st.text("xyz", max_size=3), stale=st.booleans())
    def update(self, name: str, value: str, stale: bool) -> None:
        try:
            obj = self.api.get("ConfigMap", name, "default")
        except ApiError:
            assert name not in self.model
            return
        if stale:
            obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) - 1)
        changed = obj["data"] != {"v": value}
        obj["data"] = {"v": value}
        try:
            out = self.api.update(obj)
        except ApiError as err:
            assert stale and err.reason == "Conflict"
            self._check_no_write()
            return
        assert not stale
        if changed:
            self._wrote("MODIFIED", name)
            assert out["metadata"]["resourceVersion"] == str(self.rev)
        else:
            self._check_no_write()

    @rule(name=NAMES, labels=LABELS)
    def patch_labels(self, name: str, labels: dict[str, str] | None) -> None:
        before = self.api.resource_version
        try:
            self.api.patch("ConfigMap", name, {"metadata": {"labels": labels}},
                           namespace="default")
        except ApiError as err:
            assert name not in self.model and err.reason == "NotFound"
            self._check_no_write()
            return
        if self.api.resource_version != before:
            self._wrote("MODIFIED", name)

    @rule(name=NAMES, policy=st.sampled_from([None, "Foreground", "Orphan", "Background"]))
    def delete(self, name: str, policy: str | None) -> None:
        try:
            self.api.delete("ConfigMap", name, "default", propagation_policy=policy)
        except ApiError as err:
            assert name not in self.model and err.reason == "NotFound"
            self._check_no_write()
            return
        state = self.model[name]
        fins = list(state["finalizers"])
        if policy is not None:  # kube: drop both GC finalizers, add back what the policy says
            base = [f for f in fins if f not in ("orphan", "foregroundDeletion")]
            base += {"Orphan": ["orphan"], "Foreground": ["foregroundDeletion"]}.get(policy, [])
            if set(base) != set(fins):
                fins = base
        if state["deleting"]:
            if fins == state["finalizers"]:
                self._check_no_write()
            elif fins:
                self._wrote("MODIFIED", name)
                state["finalizers"] = fins
            else:  # the policy took the last finalizer away: deleted now
                self._wrote("DELETED", name)
                del self.model[name]
        elif fins:
            self._wrote("MODIFIED", name)
            state.update(finalizers=fins, deleting=True)
        else:
            self._wrote("DELETED", name)
            del self.model[name]

    @precondition(lambda self: any(s["deleting"] for s in self.model.values()))
    @rule(data=st.data())
    def finish_finalizing(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, s in self.model.items()
                                                if s["deleting"])))
        obj = self.api.get("ConfigMap", name, "default")
        obj["metadata"]["finalizers"] = []
        self.api.update(obj)
        self._wrote("DELETED", name)
        del self.model[name]

    @rule(seconds=st.integers(0, 100))
    def time_passes(self, seconds: int) -> None:
        self.t += seconds

    @invariant()
    def resource_version_strictly_increases_one_per_write(self) -> None:
        assert self.api.resource_version == self.rev

    @invariant()
    def watch_from_the_start_sees_every_change_once_in_order(self) -> None:
        for event in take_ready(self.watch):
            meta = event["object"]["metadata"]
            self.seen.append((event["type"], meta["name"], int(meta["resourceVersion"])))
        assert self.seen == self.expected

    @invariant()
    def list_agrees_with_the_model(self) -> None:
        items = self.api.list("ConfigMap", "default")["items"]
        assert [o["metadata"]["name"] for o in items] == sorted(self.model)

    def teardown(self) -> None:
        self.watch.close()


ApiMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
test_api_state_machine = ApiMachine.TestCase
