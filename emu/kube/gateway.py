"""A Gateway API implementation: the controller that accepts Gateways and HTTPRoutes, and the data
plane that routes a Gateway's traffic by the HTTPRoutes' weights.

Why: KubeRay's incremental upgrade (``NewClusterWithIncrementalUpgrade``) moves traffic between two
RayClusters by rewriting the weights of an HTTPRoute, and waits for the Gateway and the route to be
accepted by whatever implements the Gateway API in the cluster (Istio, Envoy Gateway, ...). Without
one, a real cluster's upgrade never starts; with one, users see their requests split by the weights.
This module is that implementation, modelled on Istio's gateway controller: opt in with
``KubeConfig(gateway_classes=("istio",))``, as installing Istio is on a real cluster.

The controller (process ``gateway-controller``):

- creates each named GatewayClass that does not exist (Istio installs its ``istio`` class), with
  controllerName ``istio.io/gateway-controller`` for ``istio`` and ``emu.kuberay.dev/gateway`` for
  any other name, and sets its ``Accepted`` condition;
- for each Gateway of a managed class: ``Accepted`` and ``Programmed`` True (with the generation
  observed), each listener's status, and ``status.addresses`` = the Gateway's in-cluster host name
  ``<gateway>-<class>.<namespace>.svc.cluster.local`` (Istio's generated Service), where the data
  plane listens on every listener port;
- for each HTTPRoute attached (``parentRefs``) to such a Gateway: a ``status.parents`` entry with
  ``Accepted`` True and ``ResolvedRefs`` True when every backend Service exists (False,
  ``BackendNotFound``, otherwise).

Status is written only when it changed, after a batching delay (`SYNC_DELAY`) so a burst of events
makes one pass.

The data plane, per request to the Gateway's address: the attached HTTPRoutes' rules are matched
on the path (``PathPrefix`` and ``Exact``; the longest match wins, the oldest route on a tie); one
backendRef is chosen at random in proportion to its weight (default 1) with the simulation's
seeded stream; the request goes to the backend Service's address (``<svc>.<ns>.svc.cluster.local:
<port>``, i.e. through kube-proxy) keeping the caller as its source. No matching rule → 404; no
backend with a non-zero weight, or a backend Service that does not exist → 500, as the Gateway API
specifies; a backend that refuses or resets the connection (no ready endpoint) → 503 with
Envoy's "upstream connect error" text. The data plane reads the routes from the controller's
caches at request time, so a weight change reaches it as soon as the watch does (a real proxy
takes its configuration push too).

Not emulated: hostnames and header/query matches (a route with ``hostnames`` matches any host),
filters, TLS listeners, cross-namespace ``ReferenceGrant`` checks, the Gateway's own Deployment
and Service objects (its address answers without them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, is_not_found
from ..client.client import Client
from ..client.informer import FuncHandler, Informer
from ..kernel.network import CallInfo, ConnectionRefused, ConnectionReset, Handler
from ..kernel.process import Process
from .common import KeyQueue, Obj, rfc3339

if TYPE_CHECKING:
    from .cluster import KubeCluster

GATEWAY_API = "gateway.networking.k8s.io/v1"
ISTIO_CONTROLLER = "istio.io/gateway-controller"
EMU_CONTROLLER = "emu.kuberay.dev/gateway"
#: Batching of the controller's passes (events closer than this make one pass).
SYNC_DELAY = 0.1
_KEY = "all"


def controller_name(gateway_class: str) -> str:
    """The controllerName the class is created with (Istio's for ``istio``)."""
    return ISTIO_CONTROLLER if gateway_class == "istio" else EMU_CONTROLLER


def gateway_host(gateway: Obj) -> str:
    """The in-cluster host name a Gateway answers at (Istio's ``<gateway>-<class>`` Service)."""
    meta = gateway["metadata"]
    cls = (gateway.get("spec") or {}).get("gatewayClassName", "")
    return f"{meta['name']}-{cls}.{meta.get('namespace', 'default')}.svc.cluster.local"


def _condition(ctype: str, status: bool, reason: str, message: str, generation: int,
               old: list[Obj], now: str) -> Obj:
    """A metav1.Condition; its lastTransitionTime kept when the status did not change."""
    text = "True" if status else "False"
    prev = next((c for c in old if c.get("type") == ctype), None)
    since = prev["lastTransitionTime"] if prev is not None and prev.get("status") == text \
        and prev.get("lastTransitionTime") else now
    return {"type": ctype, "status": text, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": since}


def _path_match(match: Obj, path: str) -> int | None:
    """The length of the rule match for ``path`` (None: no match). Default: PathPrefix ``/``."""
    pm = match.get("path") or {}
    kind = pm.get("type", "PathPrefix")
    value = str(pm.get("value", "/"))
    if kind == "Exact":
        return len(value) if path == value else None
    prefix = value.rstrip("/")
    if prefix == "" or path == prefix or path.startswith(prefix + "/"):
        return len(prefix)
    return None


class GatewayController:
    """The controller process and the data plane it registers on the network."""

    def __init__(self, cluster: KubeCluster, classes: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.classes = tuple(classes)
        self.rng = cluster.world.rng.fork("gateway")
        self.process: Process | None = None
        self.client: Client | None = None
        self.gateways: Informer | None = None
        self.routes: Informer | None = None
        self.services: Informer | None = None
        self.queue: KeyQueue | None = None
        #: Network addresses registered per Gateway key.
        self._registered: dict[str, list[str]] = {}
        #: Requests forwarded per (Gateway key, backend Service name), for tests and benchmarks.
        self.forwarded: dict[tuple[str, str], int] = {}
        #: Of those, the ones the backend refused or reset (answered 503 by the Gateway).
        self.upstream_errors: dict[tuple[str, str], int] = {}

    async def main(self, process: Process) -> None:
        self.process = process
        self._registered = {}
        self.client = Client(self.cluster.world.network, process=process)
        self.queue = KeyQueue(process, "gateway")
        informers = []
        for kind in ("GatewayClass", "Gateway", "HTTPRoute", "Service"):
            inf = Informer(self.client, kind)
            inf.add_event_handler(FuncHandler(
                on_add=self._changed, on_update=lambda _o, _n: self._changed(None),
                on_delete=self._changed))
            informers.append(inf)
        _classes, self.gateways, self.routes, self.services = informers
        self._classes = _classes
        for inf in informers:
            process.spawn(inf.run())
        for inf in informers:
            await inf.wait_synced()
        await self._ensure_classes()
        self.queue.add(_KEY)
        await self.queue.run(self._sync)

    def _changed(self, _obj: Obj | None) -> None:
        if self.queue is not None:
            self.queue.add_after(_KEY, SYNC_DELAY)

    async def _ensure_classes(self) -> None:
        assert self.client is not None
        for name in self.classes:
            if self._classes.get(name) is not None:
                continue
            try:
                await self.client.create({
                    "apiVersion": GATEWAY_API, "kind": "GatewayClass",
                    "metadata": {"name": name},
                    "spec": {"controllerName": controller_name(name)}})
            except ApiError as err:
                if err.code != 409:
                    raise

    # -- the controller --------------------------------------------------------------------------

    def _managed_gateways(self) -> list[Obj]:
        assert self.gateways is not None
        return [g for g in self.gateways.list()
                if (g.get("spec") or {}).get("gatewayClassName") in self.classes]

    async def _sync(self, _key: str) -> None:
        assert self.client is not None and self.routes is not None
        now = rfc3339(self.cluster.world.now)
        for name in self.classes:
            cls = self._classes.get(name)
            if cls is not None:
                await self._write_status(cls, {"conditions": [_condition(
                    "Accepted", True, "Accepted", "Handled by the emulated gateway controller",
                    int(cls["metadata"].get("generation", 1)),
                    (cls.get("status") or {}).get("conditions") or [], now)]})
        gateways = self._managed_gateways()
        for gw in gateways:
            await self._sync_gateway(gw, now)
        keys = {self._key(g) for g in gateways}
        for key in [k for k in self._registered if k not in keys]:
            for addr in self._registered.pop(key):
                self.cluster.world.network.unregister(addr)
        for route in self.routes.list():
            await self._sync_route(route, gateways, now)

    @staticmethod
    def _key(obj: Obj) -> str:
        return f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"

    async def _sync_gateway(self, gw: Obj, now: str) -> None:
        key = self._key(gw)
        gen = int(gw["metadata"].get("generation", 1))
        old = (gw.get("status") or {}).get("conditions") or []
        listeners = (gw.get("spec") or {}).get("listeners") or []
        host = gateway_host(gw)
        wanted = [f"{host}:{int(listener.get('port', 80))}" for listener in listeners]
        network = self.cluster.world.network
        for addr in self._registered.get(key, []):
            if addr not in wanted:
                network.unregister(addr)
        for addr in wanted:
            if addr not in self._registered.get(key, []):
                network.register(addr, self._handler(key), process=self.process)
        self._registered[key] = wanted
        attached = self._attached_routes(gw)
        status = {
            "addresses": [{"type": "Hostname", "value": host}],
            "conditions": [
                _condition("Accepted", True, "Accepted", "Resource accepted", gen, old, now),
                _condition("Programmed", True, "Programmed", "Resource programmed", gen, old,
                           now)],
            "listeners": [{
                "name": listener.get("name", ""), "attachedRoutes": len(attached),
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "conditions": [
                    _condition(c, True, c, "", gen, next(
                        (ls.get("conditions") or [] for ls in
                         (gw.get("status") or {}).get("listeners") or []
                         if ls.get("name") == listener.get("name")), []), now)
                    for c in ("Accepted", "Programmed", "ResolvedRefs")]}
                for listener in listeners],
        }
        await self._write_status(gw, status)

    def _parent_gateway(self, route: Obj, ref: Obj, gateways: list[Obj]) -> Obj | None:
        if ref.get("kind", "Gateway") != "Gateway":
            return None
        ns = ref.get("namespace") or route["metadata"].get("namespace", "default")
        return next((g for g in gateways if g["metadata"]["name"] == ref.get("name")
                     and g["metadata"].get("namespace", "default") == ns), None)

    def _attached_routes(self, gw: Obj) -> list[Obj]:
        assert self.routes is not None
        out = []
        for route in self.routes.list():
            refs = (route.get("spec") or {}).get("parentRefs") or []
            if any(self._parent_gateway(route, ref, [gw]) is not None for ref in refs):
                out.append(route)
        return sorted(out, key=lambda r: (r["metadata"].get("creationTimestamp", ""),
                                          self._key(r)))

    def _missing_backend(self, route: Obj) -> str | None:
        assert self.services is not None
        ns = route["metadata"].get("namespace", "default")
        for rule in (route.get("spec") or {}).get("rules") or []:
            for ref in rule.get("backendRefs") or []:
                if ref.get("kind", "Service") != "Service":
                    continue
                if self.services.get(ref.get("name", ""), ref.get("namespace") or ns) is None:
                    return str(ref.get("name", ""))
        return None

    async def _sync_route(self, route: Obj, gateways: list[Obj], now: str) -> None:
        gen = int(route["metadata"].get("generation", 1))
        old_parents = (route.get("status") or {}).get("parents") or []
        missing = self._missing_backend(route)
        parents = [p for p in old_parents if p.get("controllerName") not in
                   {controller_name(c) for c in self.classes}]
        for ref in (route.get("spec") or {}).get("parentRefs") or []:
            gw = self._parent_gateway(route, ref, gateways)
            if gw is None:
                continue
            cls = gw["spec"]["gatewayClassName"]
            old = next((p.get("conditions") or [] for p in old_parents
                        if p.get("parentRef") == ref), [])
            parents.append({
                "parentRef": ref, "controllerName": controller_name(cls),
                "conditions": [
                    _condition("Accepted", True, "Accepted", "Route was valid", gen, old, now),
                    _condition("ResolvedRefs", missing is None,
                               "ResolvedRefs" if missing is None else "BackendNotFound",
                               "All references resolved" if missing is None else
                               f"backend({missing}) not found", gen, old, now)]})
        if parents or old_parents:
            await self._write_status(route, {"parents": parents})

    async def _write_status(self, obj: Obj, status: Obj) -> None:
        """Write ``status`` (merged over the stored one) when it differs."""
        assert self.client is not None
        merged = dict(obj.get("status") or {})
        merged.update(status)
        if merged == (obj.get("status") or {}):
            return
        updated = dict(obj)
        updated["status"] = merged
        try:
            await self.client.update_status(updated)
        except ApiError as err:
            if err.code == 409 or is_not_found(err):
                self._changed(None)  # a newer version is on its way: sync again
                return
            raise

    # -- the data plane --------------------------------------------------------------------------

    def _handler(self, gateway_key: str) -> Handler:
        async def forward(payload: Any, info: CallInfo) -> Any:
            return await self._route(gateway_key, payload, info)

        return forward

    def _pick_rule(self, gw: Obj, path: str) -> tuple[Obj, Obj] | None:
        best: tuple[int, Obj, Obj] | None = None
        for route in self._attached_routes(gw):
            for rule in (route.get("spec") or {}).get("rules") or []:
                for match in rule.get("matches") or [{}]:
                    length = _path_match(match, path)
                    if length is not None and (best is None or length > best[0]):
                        best = (length, route, rule)
        return None if best is None else (best[1], best[2])

    async def _route(self, gateway_key: str, payload: Any, info: CallInfo) -> Any:
        assert self.gateways is not None and self.services is not None
        ns, _, name = gateway_key.partition("/")
        gw = self.gateways.get(name, ns)
        if gw is None:
            return _reply(404, "gateway not found")
        path = str((payload or {}).get("path") or "/").split("?", 1)[0]
        picked = self._pick_rule(gw, path)
        if picked is None:
            return _reply(404, "")
        route, rule = picked
        refs = [r for r in rule.get("backendRefs") or [] if int(r.get("weight", 1)) > 0]
        total = sum(int(r.get("weight", 1)) for r in refs)
        if total <= 0:
            return _reply(500, "no healthy upstream")
        roll = self.rng.randrange(total)
        ref = refs[-1]
        for candidate in refs:
            roll -= int(candidate.get("weight", 1))
            if roll < 0:
                ref = candidate
                break
        svc_ns = ref.get("namespace") or route["metadata"].get("namespace", "default")
        if self.services.get(ref.get("name", ""), svc_ns) is None:
            return _reply(500, "no healthy upstream")
        stat = (gateway_key, str(ref.get("name", "")))
        self.forwarded[stat] = self.forwarded.get(stat, 0) + 1
        world = self.cluster.world
        src = world.processes.find(info.src)
        if src is not None and not src.alive:
            src = None
        address = f"{ref['name']}.{svc_ns}.svc.cluster.local:{int(ref.get('port', 80))}"
        try:
            return await world.network.call(src, address, payload, verb=info.verb,
                                            kind=info.kind, name=info.name,
                                            namespace=info.namespace,
                                            caller=None if src is not None else info.src)
        except (ConnectionRefused, ConnectionReset) as err:
            # Envoy answers for an upstream it could not reach (no ready endpoint, reset)
            self.upstream_errors[stat] = self.upstream_errors.get(stat, 0) + 1
            reason = "connection failure" if isinstance(err, ConnectionRefused) else \
                "connection termination"
            return _reply(503, "upstream connect error or disconnect/reset before headers. "
                               f"reset reason: {reason}")


def _reply(status: int, body: str) -> Obj:
    return {"status": status, "headers": {"content-type": "text/plain"}, "body": body}
