"""The Service and Pod proxies: ``/api/v1/namespaces/{ns}/services/{name}[:port]/proxy/{path}``
(and ``pods/{name}[:port]/proxy/...``), which ``kubectl proxy`` users and dashboards reach a
Service through (the Ray dashboard at ``.../services/{cluster}-head-svc:dashboard/proxy/``, say).

The request goes on the emulated network to the Service's port as an HTTP-shaped call (the wire
shape `emu.ray.net` documents, as ``--expose`` sends it), from the caller's own network identity,
so faults reach it; the answer comes back as the response. The port is resolved as kube-apiserver
resolves it (``pkg/registry/core/service/storage``): ``name``, ``name:port`` or
``scheme:name:port``, where ``port`` is a port's name or number (no port: the unnamed port); one
the Service does not declare is a 503 ``no service port N found``, an unreachable one a 503 ``no
endpoints available``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import orjson

from ..apiserver.errors import ApiError
from ..apiserver.request import ApiRequest
from ..kernel.network import NetworkError
from .wire import HttpRequest, HttpResponse

if TYPE_CHECKING:
    from .gateway import Gateway

_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/(services|pods)/([^/]+)/proxy(/.*)?$")

#: Request headers not passed on (hop-by-hop, and the API server's own credentials).
_DROP = frozenset({"authorization", "connection", "keep-alive", "transfer-encoding", "upgrade",
                   "proxy-authorization", "te", "trailer", "host", "content-length"})


def service_proxy_path(path: str) -> tuple[str, str, str, str] | None:
    """(namespace, ``services`` or ``pods``, ``name[:port]``, the path after ``proxy``) of a
    proxy path."""
    found = _PATH.match(path)
    if found is None:
        return None
    return found.group(1), found.group(2), found.group(3), found.group(4) or "/"


def _unavailable(message: str) -> ApiError:
    return ApiError.from_status({"code": 503, "reason": "ServiceUnavailable",
                                 "message": message})


async def proxy(gw: Gateway, req: HttpRequest, namespace: str, plural: str, target: str,
                rest: str) -> HttpResponse:
    """Forward ``req`` to the Service or Pod; its answer, or a kube ``Status``."""
    parts = target.split(":")
    if len(parts) > 3 or not parts[-2 if len(parts) == 3 else 0]:
        what = "service" if plural == "services" else "pod"
        raise ApiError.from_status({"code": 400, "reason": "BadRequest",
                                    "message": f"invalid {what} request {target!r}"})
    name = parts[1] if len(parts) == 3 else parts[0]
    port = parts[-1] if len(parts) >= 2 else ""
    caller = gw.caller(req)
    if plural == "pods":
        return await _to_pod(gw, req, caller, namespace, name, port, rest)
    svc = await gw.call(caller, ApiRequest("get", "Service", "v1", namespace, name))
    ports = (svc.get("spec") or {}).get("ports") or []
    number = None
    for p in ports:
        if port.isdigit() and p.get("port") == int(port):
            number = p.get("port")
            break
        if not port.isdigit() and (p.get("name") or "") == port:
            number = p.get("port")
            break
    if number is None:
        if port.isdigit():
            raise _unavailable(f'no service port {port} found for service "{name}"')
        raise _unavailable(f'no endpoints available for service "{target}"')
    return await _forward(gw, req, caller, f"{name}.{namespace}.svc.cluster.local:{number}",
                          rest, f'no endpoints available for service "{target}"')


async def _to_pod(gw: Gateway, req: HttpRequest, caller: str, namespace: str, name: str,
                  port: str, rest: str) -> HttpResponse:
    """``pods/NAME[:PORT]/proxy``: the Pod's IP on that port (no port: its first container
    port, as kube picks it)."""
    pod = await gw.call(caller, ApiRequest("get", "Pod", "v1", namespace, name))
    if not port:
        for c in (pod.get("spec") or {}).get("containers") or []:
            if c.get("ports"):
                port = str(c["ports"][0].get("containerPort", ""))
                break
    ip = (pod.get("status") or {}).get("podIP")
    if not port.isdigit() or not ip:
        raise ApiError.from_status({
            "code": 503, "reason": "ServiceUnavailable",
            "message": f'pod "{name}" has no IP or port to proxy to'})
    return await _forward(gw, req, caller, f"{ip}:{port}", rest,
                          f"error trying to reach service: dial tcp {ip}:{port}: connect: "
                          "connection refused")


async def _forward(gw: Gateway, req: HttpRequest, caller: str, address: str, rest: str,
                   unreachable: str) -> HttpResponse:
    query = f"?{urlencode(req.query)}" if req.query else ""
    headers = {k.lower(): v for k, v in req.headers.items() if k.lower() not in _DROP}
    payload = {"method": req.method, "path": rest + query, "headers": headers,
               "body": req.body.decode(errors="replace") if req.body else None}
    try:
        answer: Any = await gw.sim.network.call(None, address, payload, verb="http",
                                                caller=caller)
    except NetworkError:
        raise _unavailable(unreachable) from None
    if not isinstance(answer, dict):
        raise _unavailable(f"{address} did not answer with an HTTP response")
    out_headers = {str(k).lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
    ctype = out_headers.pop("content-type", "text/plain").split(";")[0].strip() or "text/plain"
    out_headers.pop("content-length", None)
    body = answer.get("body")
    data = body.encode() if isinstance(body, str) else orjson.dumps(body) if body else b""
    return HttpResponse(int(answer.get("status", 200)), data, ctype,
                        tuple(sorted(out_headers.items())))
