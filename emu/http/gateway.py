"""The Kubernetes REST API over the emulated API server: URL and verb in, `ApiRequest` out.

`Gateway.handle` takes one `HttpRequest` and answers it the way kube-apiserver would: discovery,
OpenAPI, every verb on every served kind (built-ins, KubeRay's kinds, and CRDs applied at run
time), the ``status`` and ``scale`` subresources, Pod ``log``, list and watch with selectors,
``resourceVersion``, bookmarks and 410 Gone, the three patch types plus server-side apply, and
``Table`` responses for ``kubectl get``; paths no kind serves fall through to the Service proxy
(`emu.http.proxy`) and the ``kubectl auth`` reviews (`emu.http.reviews`). It keeps no semantics of
its own: each resource request becomes the same `ApiRequest` the in-process client sends, and
travels over the emulated network from the caller's identity (the product name of its
``User-Agent``: ``kubectl``, ``kopf``, ``OpenAPI-Generator``...), so network faults reach HTTP
clients exactly as they reach processes.

This module is longer than 500 lines because routing, the subresources and the body decoding
share the request-scoped helpers kept on `_Call`; splitting them would spread one request's path
over several files.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from ..apiserver.errors import (
    ApiError,
    BadRequest,
    Invalid,
    MethodNotAllowed,
    RequestEntityTooLarge,
    UnsupportedMediaType,
)
from ..apiserver.kinds import KindInfo
from ..apiserver.patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from ..apiserver.rbac import AUTHENTICATED, SYSTEM_MASTERS, UserInfo
from ..apiserver.request import ApiRequest
from ..apiserver.tokens import STATIC_USER, TokenError
from ..apiserver.validation import forbidden, invalid, strict_error
from ..apiserver.watch import WatchStream
from ..client.client import APISERVER
from ..kernel.clock import parse_time, to_datetime
from ..kernel.network import ConnectionReset, NetworkError, Timeout
from ..kernel.paced import wall_speed
from . import discovery, openapi, reviews, tables
from .logs import LogFollowers, check_started, container_process, pod_log
from .proxy import proxy, service_proxy_path
from .scale import ScalePaths, replicas_patch, scalable, scale_of, scale_paths
from .wire import DEFAULT_MAX_BODY, JSON, Dropped, HttpRequest, HttpResponse, WatchResponse

if TYPE_CHECKING:
    from ..simulation import Simulation

Obj = dict[str, Any]

#: Content types of PATCH bodies and the patch type each one names.
PATCH_CONTENT_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}

_PRODUCT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

#: How many distinct header values the gateway's small parse caches keep before starting over.
_MEMO = 256

#: The parameters of a request without a query (read-only, shared).
_NO_PARAMS: Mapping[str, str] = MappingProxyType({})

#: The verbs whose answer is the object as stored (when not a dry run), so the stored bytes
#: can be sent as they are instead of encoding the decoded answer again.
_STORED_ANSWER = frozenset(("get", "create", "update", "update_status", "patch"))


def _resource_path(path: str) -> bool:
    """Whether ``path`` names resources (``/api/v1/pods``, ``/apis/g/v/x``), not discovery."""
    parts = [p for p in path.split("/") if p]
    return (parts[:1] == ["api"] and len(parts) >= 3) or \
        (parts[:1] == ["apis"] and len(parts) >= 4)


def caller_identity(user_agent: str, default: str = "http") -> str:
    """The network identity of an HTTP caller: the product of its User-Agent (``kubectl/v1.32
    (linux/amd64)`` → ``kubectl``), or ``default``."""
    found = _PRODUCT.match(user_agent.strip())
    return found.group(0) if found else default


def _answer_format(accept: str) -> str | None:
    if not accept.strip():
        return "json"
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("application/json", "*/*", "application/*", "*"):
            return "json"
        if media == "application/yaml":
            return "yaml"
    return None


def _not_acceptable() -> ApiError:
    return ApiError.from_status({
        "code": 406, "reason": "NotAcceptable",
        "message": "only the following media types are accepted: application/json, "
                   "application/yaml (this server answers no protobuf or CBOR)"})


def _status_response(err: ApiError) -> HttpResponse:
    return HttpResponse.error(err.status, err.code)


#: The kind with an ``approval`` subresource (``kubectl certificate approve|deny``).
APPROVABLE = ("certificates.k8s.io", "CertificateSigningRequest")


def approval(current: Obj, sent: Any, now: str) -> Obj:
    """The CertificateSigningRequest a PUT to ``/approval`` writes, as kube's approval
    strategy does: the stored object with the sent ``status.conditions`` (Approved, Denied),
    their ``lastUpdateTime`` and ``lastTransitionTime`` filled in when missing; spec and the
    issued certificate stay as stored. A condition type once set may not be removed (422)."""
    if not isinstance(sent, dict):
        raise BadRequest("the body of an approval must be a CertificateSigningRequest")
    conditions = (sent.get("status") or {}).get("conditions") or []
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        raise BadRequest("status.conditions of an approval must be a list of objects")
    old = {c.get("type"): c for c in (current.get("status") or {}).get("conditions") or []
           if isinstance(c, dict)}
    types = {c.get("type") for c in conditions}
    name = str((current.get("metadata") or {}).get("name", ""))
    causes = [invalid("status.conditions", sorted(str(t) for t in types),
                      "Approved and Denied conditions are mutually exclusive")] \
        if {"Approved", "Denied"} <= types else []
    causes += [forbidden("status.conditions", f"updates may not remove a condition of type "
                                              f'"{t}"')
               for t in ("Approved", "Denied", "Failed") if t in old and t not in types]
    if causes:
        raise Invalid("CertificateSigningRequest", name, causes, "certificates.k8s.io")
    filled = []
    for cond in conditions:
        cond = {**cond}
        cond.setdefault("lastUpdateTime", now)
        before = old.get(cond.get("type"))
        if "lastTransitionTime" not in cond:
            cond["lastTransitionTime"] = before.get("lastTransitionTime", now) \
                if before is not None and before.get("status") == cond.get("status") else now
        filled.append(cond)
    meta = {**(current.get("metadata") or {})}
    if (sent.get("metadata") or {}).get("resourceVersion"):
        meta["resourceVersion"] = sent["metadata"]["resourceVersion"]
    return {**current, "metadata": meta,
            "status": {**(current.get("status") or {}), "conditions": filled}}


def _bool(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "t", "yes")


def _int(req: HttpRequest, name: str) -> int | None:
    raw = req.param(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f'invalid value for query parameter "{name}": {raw!r} is not an '
                         "integer") from None


class Gateway:
    """Answers Kubernetes HTTP requests from one simulation's API server.

    ``identity`` fixes the caller's network identity (default: from the User-Agent); ``token``
    requires ``Authorization: Bearer <token>``; ``client_certs``: a request may log in with a
    client certificate the cluster CA signed (`emu.http.tls`), and must log in somehow;
    ``max_body`` bounds request bodies (413).
    """

    def __init__(self, sim: Simulation, *, identity: str | None = None,
                 token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
                 server_url: str = "", client_certs: bool = False) -> None:
        self.sim = sim
        self.identity = identity
        self.token = token
        self.client_certs = client_certs
        if token is not None:  # a TokenReview of it authenticates as kind's admin user
            sim.api.tokens.static[token] = UserInfo(STATIC_USER, (SYSTEM_MASTERS, AUTHENTICATED))
        self.max_body = max_body
        self.server_url = server_url
        self.requests = 0
        #: Send stored bytes as they are (watch events, List items, single objects) rather
        #: than encoding the API server's decoded answer again; off only to measure the gain
        #: (benchmarks/http.py runs workload W both ways).
        self.stored_bytes = True
        self._index: dict[tuple[str, str, str], KindInfo] = {}
        self._index_gen = -1
        self._followers: LogFollowers | None = None
        # per-request parsing that depends on one header only, remembered by the header's text
        # (clients send the same few User-Agent and Accept values on every request)
        self._identities: dict[str, str] = {}
        self._accepts: dict[str, tuple[str | None, bool]] = {}
        self._media: dict[str, str] = {}

    def _authenticated(self, req: HttpRequest) -> bool:
        """kube-apiserver's union of authenticators, in its order: a client certificate
        (x509), the static bearer token, a ServiceAccount token the world issued. A certificate
        outside its dates fails only its own authenticator: a token may still log in."""
        if req.peer is not None and self._client_certificate(req):
            return True
        if self.token is not None and req.header("authorization") == f"Bearer {self.token}":
            return True
        return self._service_account_bearer(req)

    def _client_certificate(self, req: HttpRequest) -> bool:
        """Whether ``req``'s verified client certificate authenticates now (the world's clock);
        if so the request is made as its user (CN) and groups (O), whose RBAC applies. The
        network identity is the user's name; a second certificate naming the same user in
        other groups gets an identity of its own (``user (group, ...)``)."""
        from .tls import ClientIdentity, client_identity

        assert req.peer is not None
        found = client_identity(req.peer, to_datetime(self.sim.now))
        if not isinstance(found, ClientIdentity):
            return False
        user = UserInfo(found.user, (*found.groups, AUTHENTICATED))
        identities = self.sim.rbac.identities
        caller = found.user
        if identities.get(caller, user) != user:
            caller = f"{found.user} ({', '.join(found.groups)})"
        if caller not in identities:
            self.sim.rbac.assign(caller, user)
        req.caller = caller
        return True

    def _service_account_bearer(self, req: HttpRequest) -> bool:
        """Whether ``req`` carries a token the world issued (``kubectl create token``) that
        authenticates now; if so the request is made as that ServiceAccount (its RBAC
        applies)."""
        scheme, _, token = req.header("authorization").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        try:
            found = self.sim.api.tokens.authenticate(token.strip())
        except TokenError:
            return False
        if found is None:
            return False
        username = str(found[0]["username"])
        prefix, _, rest = username.partition("system:serviceaccount:")
        namespace, _, name = rest.partition(":")
        if prefix or not namespace or not name:
            return False
        self.sim.rbac.assign(username, UserInfo.service_account(namespace, name))
        req.caller = username
        return True

    def log_followers(self) -> LogFollowers:
        if self._followers is None:
            self._followers = LogFollowers(self.sim)
        return self._followers

    def kind_at(self, group: str, version: str, plural: str, *,
                listed_at: str | None = None) -> KindInfo | None:
        """The kind served at ``<group>/<version>/<plural>``; the index is rebuilt when the
        registry changes (a CRD applied), since this runs on every request. With ``listed_at``
        (and any ``version``): the kind only listed at that version (`KindInfo.also_served`)."""
        kinds = self.sim.api.kinds
        if self._index_gen != kinds.generation:
            self._index = {(i.group, i.version, i.plural): i for i in kinds.all()}
            self._index_gen = kinds.generation
        if listed_at is not None:
            return next((i for i in kinds.all() if i.group == group and i.plural == plural
                         and listed_at in i.also_served), None)
        return self._index.get((group, version, plural))

    # -- entry point -------------------------------------------------------------------------

    async def handle(self, req: HttpRequest) -> HttpResponse | WatchResponse:
        """Answer one request; raises `Dropped` when the emulated network lost it."""
        self.requests += 1
        if (self.token is not None or self.client_certs) and not self._authenticated(req):
            return HttpResponse.error({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                       "status": "Failure", "message": "Unauthorized",
                                       "reason": "Unauthorized", "code": 401}, 401)
        if "impersonate-user" in req.headers and _resource_path(req.path):
            # kubectl --as: refused, not silently ignored (discovery is the same for anyone)
            return _status_response(BadRequest(
                f"impersonation (Impersonate-User: {req.headers['impersonate-user']}) is not "
                "supported by kuberay-emu: the request would run as this client's own identity "
                f"({self.caller(req)}); give a caller an identity with sim.rbac.assign in a "
                "test instead"))
        if len(req.body) > self.max_body:
            return _status_response(RequestEntityTooLarge(
                f"the request body is {len(req.body)} bytes; the limit is {self.max_body}"))
        try:
            return await self._route(req)
        except ApiError as err:
            if err.code == 404:  # a path no kind serves: a review, or a Service proxy?
                review = reviews.at_path(req.path)
                if review is not None:
                    if req.method != "POST":  # create-only, as kube serves them
                        return _status_response(MethodNotAllowed(
                            "the server does not allow this method on the requested resource"))
                    return await self.handle_review(req, review)
                proxied = service_proxy_path(req.path)
                if proxied is not None:
                    return await self.handle_proxy(req, proxied)
            return _status_response(err)
        except Timeout as err:
            raise Dropped(str(err), timeout=True) from err
        except NetworkError as err:
            raise Dropped(str(err), timeout=False) from err

    async def handle_proxy(self, req: HttpRequest, proxied: tuple[str, str, str, str]
                           ) -> HttpResponse:
        """``/api/v1/namespaces/NS/services|pods/NAME[:PORT]/proxy/...`` (`emu.http.proxy`)."""
        return await self._answered(proxy(self, req, *proxied))

    async def handle_review(self, req: HttpRequest, review: tuple[str, str, str]
                            ) -> HttpResponse:
        """``kubectl auth can-i`` / ``whoami``: a create-only review answered from the world's
        RBAC (`emu.http.reviews`), after a read over the emulated network so its faults apply."""
        return await self._answered(self._review(req, review))

    async def _review(self, req: HttpRequest, review: tuple[str, str, str]) -> HttpResponse:
        await self._reachable(req)
        ctype = self.media_type(req.headers.get("content-type", JSON))
        if ctype == "application/vnd.kubernetes.protobuf":
            from .protobuf import decode

            body: Any = decode(req.body)
        else:
            try:
                body = orjson.loads(req.body) if req.body else None
            except orjson.JSONDecodeError as exc:
                raise BadRequest(f"the request body is not valid JSON: {exc}") from None
        if reviews.REVIEWS[review] == "TokenReview":  # answered by the API server's tokens
            areq = ApiRequest("create", "TokenReview", f"{review[0]}/{review[1]}", None, None,
                              body)
            return HttpResponse(201, orjson.dumps(await self.call(self.caller(req), areq)))
        out = reviews.answer(self.sim, self.caller(req), review, body)
        return HttpResponse(201, orjson.dumps(out))

    @staticmethod
    async def _answered(answer: Awaitable[HttpResponse]) -> HttpResponse:
        """``answer``'s response; an API error as its `Status`, a call the emulated network
        lost as `Dropped` (what `handle` does around a resource request)."""
        try:
            return await answer
        except ApiError as err:
            return _status_response(err)
        except Timeout as err:
            raise Dropped(str(err), timeout=True) from err
        except NetworkError as err:
            raise Dropped(str(err), timeout=False) from err

    async def _reachable(self, req: HttpRequest) -> None:
        """Discovery, OpenAPI and health documents are computed here, not by a verb; a cheap
        read over the emulated network first makes network faults reach them too."""
        probe = ApiRequest("get", "Namespace", "v1", None, "default")
        try:
            await self.call(self.caller(req), probe)
        except ApiError:
            pass  # the server answered: it is reachable

    def _route(self, req: HttpRequest) -> Awaitable[HttpResponse | WatchResponse]:
        """The answer's coroutine (a plain function: one coroutine less per request)."""
        path = req.path.rstrip("/") or "/"
        parts = path.split("/")
        if parts[0] == "":  # the leading slash
            del parts[0]
        if "" in parts:  # an empty segment (``//``): dropped, as the paths below expect
            parts = [p for p in parts if p]
        # resource paths first: nearly every request is one
        if len(parts) >= 3 and parts[0] == "api":
            return _Call(self, req, "", parts[1], parts[2:]).run()
        if len(parts) >= 4 and parts[0] == "apis":
            return _Call(self, req, parts[1], parts[2], parts[3:]).run()
        return self._route_other(req, path, parts)

    async def _route_other(self, req: HttpRequest, path: str, parts: list[str]
                           ) -> HttpResponse | WatchResponse:
        """Discovery, OpenAPI, health and version documents, and resource paths of other
        shapes."""
        api = self.sim.api
        if len(parts) < 3 or parts[0] not in ("api", "apis") or \
                (parts[0] == "apis" and len(parts) < 4):
            await self._reachable(req)
        if path in ("/healthz", "/livez", "/readyz"):
            return HttpResponse(200, b"ok", "text/plain")
        if path == "/version":
            return HttpResponse.json(api.version_info())
        if path == "/.well-known/openid-configuration":  # ServiceAccount issuer discovery
            return HttpResponse.json(api.tokens.openid_configuration(self.server_url))
        if path == "/openid/v1/jwks":
            return HttpResponse(200, orjson.dumps(api.tokens.jwks()), "application/jwk-set+json")
        if path in ("/api", "/apis") and discovery.wants_aggregated(req.header("accept")):
            listing = discovery.aggregated(api.kinds, core=path == "/api",
                                           scalable=scalable(self.sim))
            return HttpResponse(200, orjson.dumps(listing), discovery.AGGREGATED)
        if path == "/api":
            return HttpResponse.json(discovery.core_versions(self.server_url))
        if path == "/apis":
            return HttpResponse.json(discovery.group_list(api.kinds))
        if parts[:1] == ["openapi"]:
            crds = api.list("CustomResourceDefinition")["items"] if len(parts) > 1 else []
            return openapi.serve(api.kinds, parts[1:], req, crds, api.version)
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if len(parts) == 2:
                found = discovery.group(api.kinds, parts[1])
                if found is None:
                    raise _no_resource()
                return HttpResponse.json(found)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError.from_status({"code": 404, "reason": "NotFound",
                                        "message": "the server could not find the requested "
                                                   "resource"})
        if not rest:
            doc = discovery.resource_list(api.kinds, group, version, scalable(self.sim))
            if doc is None:
                raise _no_resource()
            return HttpResponse.json(doc)
        return await _Call(self, req, group, version, rest).run()

    # -- the network ---------------------------------------------------------------------------

    def caller(self, req: HttpRequest) -> str:
        if req.caller is not None:
            return req.caller
        if self.identity:
            return self.identity
        agent = req.headers.get("user-agent", "")
        found = self._identities.get(agent)
        if found is None:
            if len(self._identities) >= _MEMO:
                self._identities.clear()
            found = self._identities[agent] = caller_identity(agent)
        return found

    def media_type(self, content_type: str) -> str:
        """A Content-Type's media type, lower case, without parameters (remembered by text)."""
        found = self._media.get(content_type)
        if found is None:
            if len(self._media) >= _MEMO:
                self._media.clear()
            found = self._media[content_type] = content_type.split(";")[0].strip().lower()
        return found

    def accept_of(self, req: HttpRequest) -> tuple[str | None, bool]:
        """What a resource request's ``Accept`` header lets the server answer in (``"json"``,
        ``"yaml"``, or None: only protobuf or CBOR, say, 406 as kube-apiserver answers a custom
        resource asked for in protobuf; the first media type served wins) and whether it asks
        for a Table; remembered by the header's text (one lookup, on every resource request)."""
        accept = req.headers.get("accept", "")
        found = self._accepts.get(accept)
        if found is None:
            if len(self._accepts) >= _MEMO:
                self._accepts.clear()
            found = self._accepts[accept] = (_answer_format(req.header("accept")),
                                             tables.wants_table(req))
        return found

    async def call(self, caller: str, areq: ApiRequest) -> Any:
        """Send ``areq`` to the API server over the emulated network as ``caller``."""
        return await self.sim.network.call(
            None, APISERVER, areq, verb=areq.verb, kind=areq.kind, name=areq.name or "",
            namespace=areq.namespace or "", caller=caller)


_NO_PROCESSES = ("kuberay-emu runs emulated programs, not container processes: there is "
                 "nothing to {}. Read what the container did with kubectl logs")
_PORT_FORWARD = ("kuberay-emu does not forward ports through the API server; start emu serve "
                 "with --expose svc/[NAMESPACE/]NAME:PORT[:LOCAL] to reach an emulated Service "
                 "over HTTP")
_PROXY = ("kuberay-emu proxies only to Services and Pods "
          "(/api/v1/namespaces/NS/services/NAME:PORT/proxy/); start emu serve with --expose "
          "svc/[NAMESPACE/]NAME:PORT[:LOCAL] or use the Service proxy to reach an emulated "
          "server over HTTP")

#: Subresources kube serves that this emulator does not, by kind: the clear 400 their callers
#: get (kubectl exec, attach, cp, port-forward, proxy) instead of a bare 404.
_NOT_EMULATED: dict[str, dict[str, str]] = {
    "exec": {"Pod": _NO_PROCESSES.format("exec into (kubectl exec and kubectl cp)")},
    "attach": {"Pod": _NO_PROCESSES.format("attach to")},
    "portforward": {"Pod": _PORT_FORWARD},
    "proxy": {"Node": _PROXY},
    "ephemeralcontainers": {"Pod": "kuberay-emu does not run ephemeral containers "
                                   "(kubectl debug); read the Pod with kubectl describe and "
                                   "kubectl logs"},
}


def warning_header(text: str) -> str:
    """A ``Warning`` header's value as kube-apiserver writes it (RFC 7234's warn-code 299, no
    agent, the text as a quoted string: ``299 - "unknown field \\"spec.foo\\""``)."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _headers(warnings: list[str]) -> tuple[tuple[str, str], ...]:
    """The ``Warning`` headers of a request's warnings: one each, a repeat sent once, one with a
    control character not at all (kube's header recorder drops both)."""
    seen: list[str] = []
    for text in warnings:
        if text not in seen and text.isprintable():
            seen.append(text)
    return tuple(("Warning", warning_header(text)) for text in seen)


def _no_resource() -> ApiError:
    return ApiError.from_status({"code": 404, "reason": "NotFound",
                                 "message": "the server could not find the requested resource"})


class _Call:
    """One resource request, parsed: kind, namespace, name, subresource."""

    def __init__(self, gw: Gateway, req: HttpRequest, group: str, version: str,
                 rest: list[str]) -> None:
        self.gw = gw
        self.req = req
        self.caller = gw.caller(req)
        # the query's parameters, the last value of each as `HttpRequest.param` reads them (one
        # dict for the few every request looks at; most requests have no query at all)
        params = dict(req.query) if req.query else _NO_PARAMS
        self.params = params
        #: The Accept header's answer format and whether it asks for a Table
        #: (`Gateway.accept_of`).
        self.format, self.table = gw.accept_of(req)
        ns: str | None = None
        watch_path = False
        if rest[0] == "watch":  # the deprecated /watch/ prefix
            watch_path = True
            rest = rest[1:]
        if rest and rest[0] == "namespaces" and len(rest) >= 3 and not (
                len(rest) == 3 and not group and rest[2] in ("status", "finalize")
                and gw.kind_at(group, version, rest[2]) is None):  # not a Namespace's own path
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _no_resource()
        info = gw.kind_at(group, version, rest[0])
        if info is None:
            listed = gw.kind_at(group, "", rest[0], listed_at=version)
            if listed is not None:
                raise ApiError.from_status({
                    "code": 404, "reason": "NotFound",
                    "message": f"{group}/{version} {listed.plural} is listed in discovery (the "
                               f"CustomResourceDefinition serves it) but the emulator serves "
                               f"{listed.kind} at its storage version {listed.api_version} only "
                               f"(no conversion between versions)"})
            raise _no_resource()
        if ns is not None and not info.namespaced:
            raise _no_resource()
        self.info: KindInfo = info
        self.namespace = ns
        self.name: str | None = rest[1] if len(rest) >= 2 else None
        self.sub: str | None = rest[2] if len(rest) == 3 else None
        self.watch = watch_path or _bool(params.get("watch"))
        self.dry_run = params.get("dryRun") == "All"
        self._orphan: bool | None = None
        #: The body `_json_body` decoded from JSON, and how many bytes it came in.
        self._raw: tuple[Any, int] | None = None
        #: kube-apiserver's warnings for this request (``fieldValidation=Warn``, kube's
        #: default: the unknown and duplicate fields it dropped), sent as ``Warning`` headers.
        self._warnings: list[str] | None = None

    def areq(self, verb: str, body: Any = None, **options: Any) -> ApiRequest:
        return self._areq(verb, body, options)

    def _areq(self, verb: str, body: Any, options: dict[str, Any]) -> ApiRequest:
        """`areq` with the options as a dict of its own (changed here)."""
        if verb not in ("get", "list", "watch"):
            if self.dry_run:
                options["dry_run"] = True
            if "field_validation" not in options:
                # kube-apiserver's default is Warn: an HTTP client's body is decoded (its
                # unknown nested fields dropped) as if it had asked for it
                options["field_validation"] = self.params.get("fieldValidation") or "Warn"
            if self._warnings is None:
                self._warnings = []
            options["warnings"] = self._warnings  # what the API server warns of, as headers
            if "field_manager" not in options and verb in ("update", "update_status"):
                manager = self.params.get("fieldManager")
                if manager:  # the Update entry's name on an applied object
                    options["field_manager"] = manager
                elif self.req.caller is not None:
                    # a caller named by its credentials: kube's default manager is still the
                    # User-Agent's product (prefixFromUserAgent)
                    options["field_manager"] = caller_identity(
                        self.req.header("user-agent"))
            raw = self._raw
            if raw is not None and body is raw[0]:
                # the request's own bytes are what kube-apiserver's body limit counts (the
                # API server need not encode the body again to measure it)
                options["body_size"] = raw[1]
        if None in options.values():  # an option left out (most requests have none)
            for key in [k for k, v in options.items() if v is None]:
                del options[key]
        info = self.info
        return ApiRequest(verb, info.kind, info.api_version, self.namespace, self.name, body,
                          options)

    def send(self, verb: str, body: Any = None, **options: Any) -> Awaitable[Any]:
        """`Gateway.call` of this request's `areq` (the network's coroutine, not a wrapper)."""
        areq = self._areq(verb, body, options)
        return self.gw.sim.network.call(
            None, APISERVER, areq, verb=verb, kind=areq.kind, name=areq.name or "",
            namespace=areq.namespace or "", caller=self.caller)

    # -- dispatch --------------------------------------------------------------------------------

    def run(self) -> Awaitable[HttpResponse | WatchResponse]:
        """The answer's coroutine (a plain function: one coroutine less per request)."""
        answer = self.format
        if answer == "json" or self.sub == "log":
            return self._run()
        if answer is None or self.watch:
            raise _not_acceptable()
        return self._run_yaml()

    async def _run_yaml(self) -> HttpResponse | WatchResponse:
        out = await self._run()  # YAML: kube-apiserver serves it for objects and lists
        if isinstance(out, HttpResponse) and out.content_type == JSON:
            text = yaml.safe_dump(orjson.loads(out.body), sort_keys=False)
            return HttpResponse(out.status, text.encode(), "application/yaml", out.headers)
        return out

    async def _run(self) -> HttpResponse | WatchResponse:
        method = self.req.method.upper()
        if self.sub is not None:
            return await self._subresource(method)
        if self.name is None:
            if method == "GET":
                return await (self._watch() if self.watch else self._list())
            if method == "POST":
                return self._reply(await self.send("create", self._json_body(),
                                                   encoded=self.encoded()), 201, "create")
            if method == "DELETE":
                opts = self._delete_options()
                opts.pop("preconditions", None)
                return self._reply(await self.send(
                    "delete_collection", None, label_selector=self.req.param("labelSelector"),
                    field_selector=self.req.param("fieldSelector"), **opts))
            raise MethodNotAllowed(f"{method} is not supported on a collection")
        if method == "GET":
            if self.watch:
                return await self._watch()
            return self._reply(await self.send(
                "get", resource_version=self.req.param("resourceVersion") or None,
                encoded=self.encoded()), 200, "get")
        if method == "PUT":
            return self._reply(await self.send("update", self._json_body(),
                                               encoded=self.encoded()), 200, "update")
        if method == "PATCH":
            return await self._patch(None)
        if method == "DELETE":
            opts = self._delete_options()
            out = await self.send("delete", None, **opts)
            # kube's DeleteResource: 202 Accepted only when the object lingers and the caller
            # set orphanDependents=false; 200 otherwise (graceful Pods and finalizers included).
            lingers = out.get("kind") != "Status" and \
                bool((out.get("metadata") or {}).get("deletionTimestamp"))
            return self._reply(out, 202 if lingers and self._orphan is False else 200)
        raise MethodNotAllowed(f"{method} is not supported on {self.info.resource}")

    def encoded(self) -> bool | None:
        """Whether to ask the API server for the stored bytes as the answer (its ``encoded``
        option): when they are what this request answers with as they are (no Table, no dry
        run). True or None (an option left out)."""
        if self.dry_run or self.table or not self.gw.stored_bytes:
            return None
        return True

    def _reply(self, obj: Any, status: int = 200, verb: str = "") -> HttpResponse:
        out = self._answer(obj, status, verb)
        if self._warnings:
            out.headers = (*out.headers, *_headers(self._warnings))
        return out

    def _answer(self, obj: Any, status: int, verb: str) -> HttpResponse:
        if type(obj) is bytes:  # the stored bytes, asked for with `encoded`
            return HttpResponse(status, obj)
        if status < 300 and isinstance(obj, dict) and self.table \
                and obj.get("kind") != "Status":
            obj = tables.to_table(self.gw.sim, self.info, obj, self.req)
        elif verb in _STORED_ANSWER and not self.dry_run and self.gw.stored_bytes:
            stored = self._stored_bytes(obj)
            if stored is not None:
                return HttpResponse(status, stored)
        return HttpResponse.json(obj, status)

    def _stored_bytes(self, obj: Any) -> bytes | None:
        """The stored encoding of ``obj`` when the store still holds it at the same version
        (the API server answers a read or a write with the decoded stored bytes; a write that
        landed since, during network latency, makes the versions differ)."""
        if not isinstance(obj, dict):
            return None
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return None
        info = self.info
        table = self.gw.sim.api.store.tables.get((info.group, info.kind))
        if table is None:
            return None
        entry = table.objs.get((meta.get("namespace") or "", meta.get("name") or ""))
        if entry is None or entry.rv != meta.get("resourceVersion"):
            return None
        return entry.data

    # -- bodies --------------------------------------------------------------------------------

    def _json_body(self) -> Any:
        ctype = self.gw.media_type(self.req.headers.get("content-type", JSON))
        body = self.req.body
        if ctype == "application/vnd.kubernetes.protobuf":
            from .protobuf import decode

            return decode(body, status=self.sub == "status")
        mode = self.params.get("fieldValidation") or "Warn"
        if ctype in ("application/yaml", "application/apply-patch+yaml"):
            if mode != "Ignore" and body:
                self._repeated_yaml_keys(body, mode)
            try:
                return yaml.safe_load(body.decode()) if body else None
            except (yaml.YAMLError, UnicodeDecodeError) as exc:
                raise BadRequest(f"error decoding YAML: {exc}") from None
        if ctype not in ("", JSON, "*/*") and ctype not in PATCH_CONTENT_TYPES:
            raise UnsupportedMediaType(
                f'the body of the request was in an unknown format ("{ctype}") - accepted media '
                "types include: application/json, application/yaml")
        if not body:
            raise BadRequest("the request body is empty; a JSON object was expected")
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"the request body is not valid JSON: {exc}") from None
        if (mode != "Ignore" and self.req.method.upper() != "DELETE"
                and orjson.dumps(decoded) != body):
            # a body that is its own decoded value's compact encoding (kubectl's, Go's and
            # orjson's as they usually write) cannot repeat a key: the re-encoding would give
            # each key once. Any other body goes through the slower check.
            self._duplicate_json_fields(body, mode)
        self._raw = (decoded, len(body))
        return decoded

    def _found(self, problems: list[str], mode: str) -> None:
        """Strict refuses the body's ``problems`` with kube's 400; Warn sends them back as
        warnings (the body's later value kept, as Go's decoder and orjson keep it)."""
        if mode == "Strict":
            raise strict_error(self.info.kind, self.info.api_version, problems)
        if self._warnings is None:
            self._warnings = []
        self._warnings.extend(problems)

    def _duplicate_json_fields(self, body: bytes, mode: str) -> None:
        """A JSON object giving a key twice: kube's ``duplicate field "paused"`` (orjson keeps
        the last value silently): a second decode, with Python's json, which hands each
        object's pairs to a hook. The hook only compares two lengths (a Python loop over every
        key would cost as much again as the decode); the keys are named only then."""
        objects: list[list[tuple[str, Any]]] = []

        def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
            out = dict(items)
            if len(out) != len(items):
                objects.append(items)
            return out

        json.loads(body, object_pairs_hook=pairs)
        if not objects:
            return
        repeated: list[str] = []
        for items in objects:
            seen: set[str] = set()
            for key, _ in items:
                if key in seen and f'duplicate field "{key}"' not in repeated:
                    repeated.append(f'duplicate field "{key}"')
                seen.add(key)
        self._found(repeated, mode)

    def _repeated_yaml_keys(self, body: bytes, mode: str) -> None:
        """A YAML body giving a key twice: kube's ``yaml: unmarshal errors: line N: key "k"
        already set in map``, refused under Strict, a warning under Warn."""
        from ..client.apply import load_yaml

        try:
            docs = load_yaml(body.decode())
        except (yaml.YAMLError, UnicodeDecodeError):
            return  # the decode below says what is wrong
        repeated = [r for _, found in docs for r in found]
        if repeated:  # one error under Strict, one warning per key under Warn (as kube's
            # parseYAMLWarnings splits the yaml error)
            self._found(["yaml: unmarshal errors:\n  " + "\n  ".join(repeated)]
                        if mode == "Strict" else repeated, mode)

    def _delete_options(self) -> Obj:
        body: Any = {}
        if self.req.body.strip():
            body = self._json_body()
            if not isinstance(body, dict):
                raise BadRequest("the body of a delete must be a DeleteOptions object")
        policy = self.req.param("propagationPolicy") or body.get("propagationPolicy")
        orphan = self.req.param("orphanDependents")
        if orphan is None and "orphanDependents" in body:
            orphan = str(body["orphanDependents"])
        self._orphan = None if orphan is None else _bool(orphan)
        if policy is None and orphan is not None:
            policy = "Orphan" if _bool(orphan) else "Background"
        grace = _int(self.req, "gracePeriodSeconds")
        if grace is None:
            grace = body.get("gracePeriodSeconds")
        if body.get("dryRun") == ["All"]:
            self.dry_run = True
        return {"propagation_policy": policy, "grace_period_seconds": grace,
                "preconditions": body.get("preconditions") or None}

    # -- list and watch ------------------------------------------------------------------------

    def _selectors(self) -> Obj:
        return {"label_selector": self.req.param("labelSelector") or None,
                "field_selector": self.req.param("fieldSelector") or None}

    async def _list(self) -> HttpResponse:
        req = self.req
        decoded = self.table or not self.gw.stored_bytes
        out = await self.send("list", None, resource_version=req.param("resourceVersion") or None,
                              resource_version_match=req.param("resourceVersionMatch") or None,
                              limit=_int(req, "limit") or None,
                              **{"continue": req.param("continue") or None},
                              encoded=None if decoded else True,
                              **self._selectors())
        if decoded:
            return self._reply(out)
        # the items are the stored bytes: the List is written around them, not re-encoded
        items = out.pop("items")
        head = orjson.dumps(out)
        return HttpResponse(200, b"".join((head[:-1], b',"items":[', b",".join(items), b"]}")))

    async def _watch(self) -> WatchResponse:
        sel = self._selectors()
        if self.name is not None:  # GET .../name?watch=1: a watch on one object
            by_name = f"metadata.name={self.name}"
            sel["field_selector"] = f"{sel['field_selector']},{by_name}" \
                if sel["field_selector"] else by_name
        seconds = _int(self.req, "timeoutSeconds")
        # the client counts wall seconds: under `emu serve --speed N` that is N times as many
        # virtual seconds (kube's informers expect a watch to last its timeout in real time)
        timeout = None if seconds is None else seconds * wall_speed()
        areq = ApiRequest("watch", self.info.kind, self.info.api_version, self.namespace, None,
                          None, {k: v for k, v in {
                              "resource_version": self.req.param("resourceVersion") or None,
                              "allow_bookmarks": _bool(self.req.param("allowWatchBookmarks")),
                              "resource_version_match":
                                  self.req.param("resourceVersionMatch") or None,
                              "send_initial_events": None if self.req.param("sendInitialEvents")
                              is None else _bool(self.req.param("sendInitialEvents")),
                              "timeout_seconds": timeout, **sel}.items() if v is not None})
        stream = await self.gw.sim.network.stream(
            None, APISERVER, areq, kind=self.info.kind, namespace=self.namespace or "",
            caller=self.caller)
        as_table = self.table
        sim, info, req = self.gw.sim, self.info, self.req
        inner = getattr(stream, "_inner", None)  # the API server's end, behind the network's
        if not isinstance(inner, WatchStream):
            inner = None
        # The first ready event travels over the network (faults, latency); the others ready
        # with it follow in the same chunk.
        if as_table or inner is None or not self.gw.stored_bytes:
            async def chunks() -> AsyncIterator[bytes]:
                try:
                    async for first in stream:
                        events = [first, *inner.take_ready()] if inner is not None else [first]
                        lines = []
                        for event in events:
                            if as_table and event.get("type") in ("ADDED", "MODIFIED",
                                                                  "DELETED"):
                                event = {"type": event["type"],
                                         "object": tables.to_table(sim, info, event["object"],
                                                                   req)}
                            lines.append(orjson.dumps(event) + b"\n")
                        yield b"".join(lines)
                except ConnectionReset:
                    return  # the emulated connection broke: the HTTP stream ends, as kube's does
                finally:
                    stream.close()

            return WatchResponse(chunks(), stream.close)
        # The stored bytes go out as they are.
        inner.encoded = True
        raw = inner

        async def raw_chunks() -> AsyncIterator[bytes]:
            try:
                async for first in stream:
                    rest = raw.take_chunk()
                    yield first + rest if rest else first
            except ConnectionReset:
                return
            finally:
                stream.close()

        return WatchResponse(raw_chunks(), stream.close)

    # -- patch, apply --------------------------------------------------------------------------

    def _patch_type(self) -> str:
        ctype = self.req.header("content-type").split(";")[0].strip().lower()
        found = PATCH_CONTENT_TYPES.get(ctype)
        if found is None:
            raise UnsupportedMediaType(
                f'the body of the request was in an unknown format ("{ctype}") - accepted media '
                "types include: application/json-patch+json, application/merge-patch+json, "
                "application/strategic-merge-patch+json, application/apply-patch+yaml")
        return found

    async def _patch(self, sub: str | None) -> HttpResponse:
        ptype = self._patch_type()
        body = self._json_body()
        opts: Obj = {"patch_type": ptype, "subresource": sub}
        if ptype == "apply":
            manager = self.req.param("fieldManager")
            if not manager:
                raise BadRequest("PATCH /apply requests require a non-empty fieldManager")
            opts["field_manager"] = manager
            opts["force"] = _bool(self.req.param("force"))
        elif self.req.param("fieldManager"):
            opts["field_manager"] = self.req.param("fieldManager")
        return self._reply(await self.send("patch", body, encoded=self.encoded(), **opts), 200,
                           "patch")

    # -- subresources --------------------------------------------------------------------------

    async def _subresource(self, method: str) -> HttpResponse | WatchResponse:
        sub = self.sub
        if sub == "status" and self.info.has_status:
            if method == "GET":
                return self._reply(await self.send("get", encoded=self.encoded()), 200, "get")
            if method == "PUT":
                return self._reply(await self.send("update_status", self._json_body(),
                                                   encoded=self.encoded()), 200, "update_status")
            if method == "PATCH":
                return await self._patch("status")
        elif sub == "scale" and (paths := scale_paths(self.gw.sim, self.info)) is not None:
            return await self._scale(method, paths)
        elif sub == "approval" and (self.info.group, self.info.kind) == APPROVABLE:
            if method == "GET":
                return self._reply(await self.send("get"), 200, "get")
            if method == "PUT":
                return self._reply(await self.send("update_status", approval(
                    await self.send("get"), self._json_body(), self.gw.sim.api._now())),
                    200, "update_status")
        elif sub == "log" and self.info.kind == "Pod" and not self.info.group and method == "GET":
            pod = await self.send("get")
            container = self.req.param("container")
            tail = _int(self.req, "tailLines")
            if tail is not None and tail < 0:
                tail = None  # kubectl's --tail=-1: everything
            since = self._log_since()
            previous = _bool(self.req.param("previous"))
            container_process(pod, container)  # 400 for a container the Pod does not have
            if not previous:
                check_started(pod, container)
            if _bool(self.req.param("follow")) and not previous:
                chunks, close = self.gw.log_followers().follow(pod, container, tail, since)
                return WatchResponse(chunks, close, "text/plain")
            text = pod_log(self.gw.sim, pod, container, tail, previous=previous, since=since,
                           limit_bytes=_int(self.req, "limitBytes"))
            return HttpResponse(200, text.encode(), "text/plain")
        elif sub == "eviction" and self.info.kind == "Pod" and not self.info.group and \
                method == "POST":
            return self._reply(await self.send("create", self._json_body(),
                                               subresource="eviction"), 201)
        elif sub == "token" and self.info.kind == "ServiceAccount" and not self.info.group:
            if method == "POST":  # kubectl create token (emu.apiserver.tokens)
                return HttpResponse.json(await self.send("create", self._json_body(),
                                                         subresource="token"), 201)
        elif sub == "finalize" and self.info.kind == "Namespace" and method == "PUT":
            return self._reply(await self.send("update", self._json_body()))
        elif sub == "proxy" and self.info.kind in ("Service", "Pod") and not self.info.group \
                and self.namespace is not None and self.name is not None:
            return await proxy(self.gw, self.req, self.namespace, self.info.plural, self.name,
                               "/")
        elif sub in _NOT_EMULATED and not self.info.group and \
                self.info.kind in _NOT_EMULATED[sub]:
            await self.send("get")  # a missing object is still a 404, as kube answers
            raise BadRequest(_NOT_EMULATED[sub][self.info.kind])
        else:
            raise _no_resource()
        raise MethodNotAllowed(f"{method} is not supported on {self.info.plural}/{sub}")

    def _log_since(self) -> float | None:
        """The virtual time a log starts at: ``sinceSeconds`` before now, or ``sinceTime``
        (kube refuses both together, and a non-positive ``sinceSeconds``)."""
        seconds = _int(self.req, "sinceSeconds")
        when = self.req.param("sinceTime")
        if seconds is not None and when:
            raise BadRequest("at most one of sinceTime or sinceSeconds may be specified")
        if seconds is not None:
            if seconds < 1:
                raise BadRequest("sinceSeconds: Invalid value: must be greater than 0")
            return self.gw.sim.now - seconds
        if when:
            try:
                return parse_time(when)
            except ValueError:
                raise BadRequest(f'invalid value for query parameter "sinceTime": {when!r} is '
                                 "not an RFC 3339 time") from None
        return None

    async def _scale(self, method: str, paths: ScalePaths) -> HttpResponse:
        obj = await self.send("get")
        scale = scale_of(obj, paths)
        if method == "GET":
            if self.table:  # kubectl get --subresource=scale
                return HttpResponse.json(tables.to_table(self.gw.sim, tables.SCALE, scale,
                                                         self.req))
            return HttpResponse.json(scale)
        if method == "PUT":
            wanted = self._json_body()
        elif method == "PATCH":
            ptype = self._patch_type()
            body = self._json_body()
            if ptype == "json":
                wanted = apply_json_patch(scale, body)
            elif ptype == "strategic":
                wanted = apply_strategic_merge_patch(scale, body, {})
            else:
                wanted = apply_merge_patch(scale, body)
        else:
            raise MethodNotAllowed(f"{method} is not supported on {self.info.plural}/scale")
        if not isinstance(wanted, dict):
            raise BadRequest("a Scale must be a JSON object")
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError.from_status({
                "code": 422, "reason": "Invalid",
                "message": f'Scale.autoscaling "{self.name}" is invalid: spec.replicas: Invalid '
                           f"value: {replicas!r}: must be greater than or equal to 0"})
        patch = replicas_patch(paths, replicas)
        rv = (wanted.get("metadata") or {}).get("resourceVersion")
        if rv:
            patch["metadata"] = {"resourceVersion": rv}
        out = await self.send("patch", patch, patch_type="merge")
        return HttpResponse.json(scale_of(out, paths))
