"""What every built-in controller shares: a per-key work loop, quantities, conditions, owners.

Each controller in ``emu.kube`` is a process with its own `Client` and informers, like the real
kube-controller-manager loops. `KeyQueue` is the small work queue they run on (client-go's
``workqueue`` reduced to what they need): a key is queued once however often it is added, ``add_after``
delays it (the EndpointSlice propagation delay, a Job's deadline), and a failed sync is retried with
client-go's default per-item backoff (5 ms doubling to 1000 s). It lives here rather than in
``emu.runtime`` so the built-ins don't wait on that package; they keep the same semantics.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

from ..apiserver.errors import ApiError
from ..kernel import clock
from ..kernel.network import NetworkError
from ..kernel.process import Process, ProcessGone

Obj = dict[str, Any]

#: client-go ``DefaultControllerRateLimiter`` per-item backoff.
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0


class KeyQueue:
    """A deduplicating queue of keys with delayed adds and per-key failure backoff.

    A key being synced can be added again; it is then synced once more after the current sync
    (client-go's dirty/processing sets), never twice at the same time.
    """

    def __init__(self, process: Process, name: str) -> None:
        self._process = process
        self.name = name
        self._queue: dict[str, None] = {}
        self._processing: dict[str, None] = {}
        self._dirty: dict[str, None] = {}
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        """Queue ``key`` now (once, however many times it is added before it is synced)."""
        if key in self._processing:
            self._dirty[key] = None
            return
        if key not in self._queue:
            self._queue[key] = None
            self._wake.set()

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending add wins (batching)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        if self._process.alive:
            self.add(key)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def retry(self, key: str) -> float:
        """Queue ``key`` again after its backoff; the delay used."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(BACKOFF_BASE * 2**n, BACKOFF_MAX)
        self.add_after(key, delay)
        return delay

    async def run(self, sync: Callable[[str], Awaitable[None]]) -> None:
        """Sync keys one at a time, in the order they were queued, until the process ends."""
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            key = next(iter(self._queue))
            del self._queue[key]
            self._processing[key] = None
            try:
                await sync(key)
            except (ApiError, NetworkError) as err:
                delay = self.retry(key)
                self._process.log("sync_error", controller=self.name, key=key,
                                  error=f"{type(err).__name__}: {err}", retry_in=delay)
            except (asyncio.CancelledError, ProcessGone):
                raise
            else:
                self.forget(key)
            finally:
                self._processing.pop(key, None)
                if key in self._dirty:
                    del self._dirty[key]
                    self.add(key)


# -- quantities ------------------------------------------------------------------------------------

_SUFFIXES = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(value: Any) -> float:
    """``resource.Quantity`` text (``500m``, ``1Gi``, ``2``) as a number of base units."""
    if isinstance(value, bool):
        raise ValueError(f"quantities are numbers or strings, not {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    m = _QUANTITY.match(str(value).strip())
    if m is None or m.group(2) not in _SUFFIXES:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', not {value!r}")
    return float(m.group(1)) * _SUFFIXES[m.group(2)]


def milli(value: Any) -> int:
    """A quantity in thousandths, rounded up (CPU in millicores)."""
    return math.ceil(parse_quantity(value) * 1000 - 1e-9)


def whole(value: Any) -> int:
    """A quantity as a whole number, rounded up (memory in bytes, a Pod count)."""
    return math.ceil(parse_quantity(value) - 1e-9)


def pod_requests(pod: Obj) -> tuple[int, int]:
    """(millicores, bytes) the scheduler charges for a Pod: the sum over containers, or the largest
    init container when that is larger (``resourcehelper.PodRequests``)."""
    spec = pod.get("spec") or {}

    def total(containers: list[Obj]) -> tuple[int, int]:
        cpu = mem = 0
        for c in containers:
            req = (c.get("resources") or {}).get("requests") or {}
            if "cpu" in req:
                cpu += milli(req["cpu"])
            if "memory" in req:
                mem += whole(req["memory"])
        return cpu, mem

    cpu, mem = total(spec.get("containers") or [])
    for init in spec.get("initContainers") or []:
        icpu, imem = total([init])
        cpu, mem = max(cpu, icpu), max(mem, imem)
    return cpu, mem


#: Resources the scheduler tracks by name; any other name a Node advertises is an extended
#: resource (``nvidia.com/gpu``, ``google.com/tpu``), counted in whole units.
STANDARD_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage", "storage")


def pod_extended_requests(pod: Obj) -> dict[str, int]:
    """The extended resources a Pod requests (a container's request, or its limit when only the
    limit is given, as API defaulting copies limits to requests), summed over containers, or
    the largest init container's when larger; sorted by name."""
    spec = pod.get("spec") or {}

    def of(c: Obj) -> dict[str, int]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: whole(v) for k, v in merged.items()
                if k not in STANDARD_RESOURCES and not k.startswith("hugepages-")}

    out: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for k, n in of(c).items():
            out[k] = out.get(k, 0) + n
    for c in spec.get("initContainers") or []:
        for k, n in of(c).items():
            out[k] = max(out.get(k, 0), n)
    return {k: n for k, n in sorted(out.items()) if n > 0}


# -- object helpers --------------------------------------------------------------------------------


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def key_of(obj: Obj) -> str:
    m = meta(obj)
    ns = m.get("namespace")
    return f"{ns}/{m.get('name')}" if ns else str(m.get("name"))


def split_key(key: str) -> tuple[str | None, str]:
    ns, _, name = key.rpartition("/")
    return (ns or None), name



def controller_ref(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any (``metav1.GetControllerOf``)."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_reference(owner: Obj, *, controller: bool = True,
                    block_owner_deletion: bool = True) -> Obj:
    """``metav1.NewControllerRef``: an ownerReference to ``owner``."""
    m = meta(owner)
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": m["name"],
            "uid": m["uid"], "controller": controller,
            "blockOwnerDeletion": block_owner_deletion}


def is_terminating(obj: Obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def get_condition(status: Obj | None, ctype: str) -> Obj | None:
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def condition_true(obj: Obj, ctype: str) -> bool:
    cond = get_condition(obj.get("status"), ctype)
    return cond is not None and cond.get("status") == "True"


def set_condition(conditions: list[Obj], new: Obj) -> list[Obj]:
    """Replace the condition of ``new``'s type, keeping ``lastTransitionTime`` (and the probe
    time) when the status did not change; append when absent. Returns the new list."""
    out = []
    found = False
    for cond in conditions:
        if cond.get("type") == new["type"]:
            found = True
            merged = dict(new)
            if cond.get("status") == new.get("status") and cond.get("lastTransitionTime"):
                merged["lastTransitionTime"] = cond["lastTransitionTime"]
            out.append(merged)
        else:
            out.append(cond)
    if not found:
        out.append(dict(new))
    return out


def pod_is_ready(pod: Obj) -> bool:
    return condition_true(pod, "Ready")


def pod_is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def template_hash(template: Obj) -> str:
    """A stable short hash of a Pod template (the ``pod-template-hash`` label's role), written
    in Kubernetes' safe alphabet so it never spells words or confuses digits."""
    import orjson

    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int.from_bytes(digest[:8], "big")
    out = []
    for _ in range(10):
        n, r = divmod(n, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        scaled = int(text[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(text)


class Expectations:
    """Creates and deletes a controller made but its cache has not shown yet
    (``controller.ControllerExpectations``): until they show, counting the cache would count
    wrong, so the controller waits instead of acting twice. Forgotten after ``timeout``."""

    def __init__(self, timeout: float = 300.0) -> None:
        self.timeout = timeout
        self._items: dict[str, dict[str, tuple[str, float]]] = {}

    def expect_create(self, key: str, name: str) -> None:
        self._items.setdefault(key, {})[name] = ("create", clock.now())

    def expect_delete(self, key: str, name: str) -> None:
        self._items.setdefault(key, {})[name] = ("delete", clock.now())

    def satisfied(self, key: str, cached: Callable[[str], Obj | None]) -> bool:
        """Whether every expectation of ``key`` shows in the cache (``cached(name)``)."""
        items = self._items.get(key)
        if not items:
            return True
        now = clock.now()
        for name, (action, when) in list(items.items()):
            obj = cached(name)
            seen = obj is not None if action == "create" else (
                obj is None or bool(meta(obj).get("deletionTimestamp")))
            if seen or now - when > self.timeout:
                del items[name]
        if not items:
            del self._items[key]
            return True
        return False

    def clear(self, key: str) -> None:
        self._items.pop(key, None)


class OwnedPods:
    """Pod names per owner key, from the Pods' controller references: the ReplicaSet and
    DaemonSet controllers' ``getPodsFor…`` without a List, fed by their Pod informer's events.

    ``changed`` is the informer handler; it returns the owner key it touched (or None for a Pod
    another kind controls) so the controller can queue it. ``pods`` answers in name order and
    drops a Pod whose controller reference names another object of the same name (an owner
    deleted and recreated: a different uid).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._names: dict[str, dict[str, None]] = {}

    def changed(self, pod: Obj, deleted: bool = False) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != self.kind:
            return None
        key = f"{pod['metadata']['namespace']}/{ref['name']}"
        names = self._names.setdefault(key, {})
        if deleted:
            names.pop(pod["metadata"]["name"], None)
        else:
            names[pod["metadata"]["name"]] = None
        return key

    def pods(self, owner: Obj, cached: Callable[[str, str], Obj | None]) -> list[Obj]:
        """The Pods ``owner`` controls, looked up with ``cached(name, namespace)``."""
        m = owner["metadata"]
        out = []
        for name in sorted(self._names.get(f"{m['namespace']}/{m['name']}", {})):
            pod = cached(name, m["namespace"])
            if pod is not None and (controller_ref(pod) or {}).get("uid") == m["uid"]:
                out.append(pod)
        return out

    def forget(self, key: str) -> None:
        self._names.pop(key, None)


_TS_CACHE: dict[int, str] = {}


def rfc3339(seconds: float) -> str:
    """`emu.kernel.clock.rfc3339`, memoised per whole second (the format has no fraction, and
    status writes ask for the same second thousands of times)."""
    key = math.floor(seconds)
    text = _TS_CACHE.get(key)
    if text is None:
        if len(_TS_CACHE) > 4096:
            _TS_CACHE.clear()
        text = _TS_CACHE[key] = clock.rfc3339(key)
    return text


class ConfigError(Exception):
    """A container can't be created from its config yet (CreateContainerConfigError): a missing
    ConfigMap, Secret or key, a volume source that cannot be filled in."""
