"""A Kubernetes client for one process identity; every verb travels over the emulated network.

A controller's client is to the emulated API server what client-go's typed clients are to the real
one: it sends a request and gets back the object or an `ApiError`. Because each call goes through
`emu.kernel.network`, an outage, a partition, added latency or a lost response reaches exactly the
process that owns this client, and a paused process stops at its calls.

Kinds are named as people write them: ``"Pod"``, ``"RayCluster"``, a plural (``"rayclusters"``), or
with ``api_version="ray.io/v1"`` where a kind name is ambiguous (``Event``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any

from ..apiserver.errors import BadRequest
from ..apiserver.request import PATCH_TYPES, ApiRequest
from ..apiserver.validation import FIELD_VALIDATION
from ..kernel.network import Network
from ..kernel.process import Process

#: The API server's address on the emulated network.
APISERVER = "apiserver"


class ObjectList(list[dict[str, Any]]):
    """The items of a list call, with the collection's ``resourceVersion`` and, for a page of a
    paginated list, the ``continue_`` token of the next page ("" on the last page) and the
    server's ``remaining_item_count`` (None when it gives none)."""

    resource_version: str = ""
    continue_: str = ""
    remaining_item_count: int | None = None

    def __init__(self, items: list[dict[str, Any]], resource_version: str = "",
                 continue_: str = "", remaining_item_count: int | None = None) -> None:
        super().__init__(items)
        self.resource_version = resource_version
        self.continue_ = continue_
        self.remaining_item_count = remaining_item_count


def _meta(obj: dict[str, Any]) -> tuple[str, str | None, str | None]:
    if not isinstance(obj, dict):
        raise BadRequest(f"an object must be a mapping, not {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise BadRequest("Object 'Kind' is missing in the object")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise BadRequest(f"{kind}: metadata must be a mapping, not {type(meta).__name__}")
    api_version = obj.get("apiVersion")
    return kind, meta.get("namespace"), api_version if isinstance(api_version, str) else None


class Client:
    """API verbs for one identity. Errors are `emu.ApiError` subclasses or network errors.

    ``field_validation`` (``Strict``, ``Warn`` or ``Ignore``: kube's ``fieldValidation``) is
    sent with every create, update and patch that does not name its own; None sends none, and
    the API server applies its default (``Warn``: unknown fields are dropped), as client-go
    does. `Simulation.client` gives a test's clients ``Strict``, as kubectl sends."""

    def __init__(self, network: Network, *, process: Process | None = None,
                 identity: str | None = None, server: str = APISERVER,
                 timeout: float | None = None, field_validation: str | None = None) -> None:
        self.network = network
        self.process = process
        self.identity = identity or (process.name if process is not None else "test")
        self.server = server
        self.timeout = timeout
        self.field_validation = check_field_validation_option(field_validation)

    def __repr__(self) -> str:
        return f"<Client {self.identity} -> {self.server}>"

    def _call(self, req: ApiRequest) -> Awaitable[Any]:
        # Hands back the network's coroutine for the verb to await (no coroutine of its own:
        # one frame less to create and resume on every request).
        return self.network.call(
            self.process, self.server, req, verb=req.verb, kind=req.kind, name=req.name or "",
            namespace=req.namespace or "", timeout=self.timeout,
            caller=None if self.process is not None else self.identity,
        )

    def _validation(self, field_validation: str | None) -> str | None:
        """A write's ``fieldValidation``: its own, else this client's."""
        if field_validation is None:
            return self.field_validation
        return check_field_validation_option(field_validation)

    # -- reads -----------------------------------------------------------------------------------

    async def server_version(self) -> dict[str, Any]:
        """``GET /version`` (client-go's ``ServerVersion``): major, minor, gitVersion ..."""
        return dict(await self._call(ApiRequest("version", "")))

    async def get(self, kind: str, name: str, namespace: str | None = None, *,
                  resource_version: str | None = None,
                  api_version: str | None = None) -> dict[str, Any]:
        """The object, or `NotFound`. ``resource_version``: not older than that version."""
        opts: dict[str, Any] = {}
        if resource_version is not None:
            opts["resource_version"] = resource_version
        return await self._call(ApiRequest("get", kind, api_version, namespace, name, None, opts))

    async def list(self, kind: str, namespace: str | None = None, *,
                   label_selector: str | dict[str, str] | None = None,
                   field_selector: str | None = None, resource_version: str | None = None,
                   resource_version_match: str | None = None, limit: int | None = None,
                   continue_: str | None = None,
                   api_version: str | None = None, encoded: bool = False) -> ObjectList:
        """Matching objects (sorted by namespace and name) and the list's resourceVersion.
        ``encoded`` asks for each item as the API server stored it (its JSON bytes, shared with
        the store: an informer caches them as they are); a server that ignores it sends dicts.

        ``limit`` asks for one page; the result's ``continue_`` token, passed back as
        ``continue_``, reads the next page at the first page's revision (`Gone` once that
        revision is compacted). ``resource_version_match="Exact"`` reads the state at
        ``resource_version``; ``"NotOlderThan"`` any state at least that new.
        """
        opts: dict[str, Any] = {}
        if label_selector:
            opts["label_selector"] = selector_text(label_selector)
        if field_selector:
            opts["field_selector"] = field_selector
        if resource_version is not None:
            opts["resource_version"] = resource_version
        if resource_version_match is not None:
            opts["resource_version_match"] = resource_version_match
        if limit is not None:
            opts["limit"] = limit
        if continue_:
            opts["continue"] = continue_
        if encoded:
            opts["encoded"] = True
        out = await self._call(ApiRequest("list", kind, api_version, namespace, None, None, opts))
        meta = out.get("metadata") or {}
        return ObjectList(out.get("items") or [], meta.get("resourceVersion", ""),
                          meta.get("continue", ""), meta.get("remainingItemCount"))

    async def list_all(self, kind: str, namespace: str | None = None, *, limit: int = 500,
                       label_selector: str | dict[str, str] | None = None,
                       field_selector: str | None = None,
                       api_version: str | None = None) -> ObjectList:
        """Every matching object, read in pages of ``limit`` as client-go's pager does (one
        consistent snapshot: the first page's resourceVersion)."""
        first = await self.list(kind, namespace, label_selector=label_selector,
                                field_selector=field_selector, limit=limit,
                                api_version=api_version)
        items = list(first)
        token = first.continue_
        while token:
            page = await self.list(kind, namespace, label_selector=label_selector,
                                   field_selector=field_selector, limit=limit, continue_=token,
                                   api_version=api_version)
            items.extend(page)
            token = page.continue_
        return ObjectList(items, first.resource_version)

    async def watch(self, kind: str, namespace: str | None = None, *,
                    label_selector: str | dict[str, str] | None = None,
                    field_selector: str | None = None, resource_version: str | None = None,
                    allow_bookmarks: bool = False, timeout_seconds: float | None = None,
                    send_initial_events: bool | None = None,
                    resource_version_match: str | None = None,
                    api_version: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """A stream of ``{"type": ..., "object": ...}`` events; faults can break it
        (`emu.kernel.network.ConnectionReset`). Close it with ``aclose()`` or by leaving it.

        ``timeout_seconds`` ends the stream after that long (virtual); ``send_initial_events``
        with ``resource_version_match="NotOlderThan"`` and ``allow_bookmarks`` is a watch-list:
        the current objects, then a bookmark annotated ``k8s.io/initial-events-end``."""
        opts: dict[str, Any] = {"allow_bookmarks": allow_bookmarks}
        if timeout_seconds is not None:
            opts["timeout_seconds"] = timeout_seconds
        if send_initial_events is not None:
            opts["send_initial_events"] = send_initial_events
        if resource_version_match is not None:
            opts["resource_version_match"] = resource_version_match
        if label_selector:
            opts["label_selector"] = selector_text(label_selector)
        if field_selector:
            opts["field_selector"] = field_selector
        if resource_version is not None:
            opts["resource_version"] = resource_version
        req = ApiRequest("watch", kind, api_version, namespace, None, None, opts)
        stream = await self.network.stream(
            self.process, self.server, req, kind=kind, namespace=namespace or "",
            timeout=self.timeout, caller=None if self.process is not None else self.identity,
        )
        return _close_on_exit(stream)

    # -- writes ----------------------------------------------------------------------------------

    async def create(self, obj: dict[str, Any], *, namespace: str | None = None,
                     dry_run: bool = False, field_validation: str | None = None
                     ) -> dict[str, Any]:
        """Create; `AlreadyExists` when the name is taken.

        ``namespace`` is the request's namespace (the URL's, in real Kubernetes): it fills an
        object that names none, and is ignored for cluster-scoped kinds.
        """
        kind, ns, api_version = _meta(obj)
        ns = ns or namespace
        opts = _write_opts(dry_run, self._validation(field_validation))
        name = obj.get("metadata", {}).get("name")
        return await self._call(ApiRequest("create", kind, api_version, ns, name, obj, opts))

    async def create_token(self, name: str, token_request: dict[str, Any],
                           namespace: str) -> dict[str, Any]:
        """A token for the ServiceAccount ``namespace/name`` (client-go's ``CreateToken``, the
        ``serviceaccounts/token`` subresource): ``token_request`` is an
        ``authentication.k8s.io/v1`` TokenRequest; the answer carries ``status.token``."""
        return await self._call(ApiRequest("create", "ServiceAccount", "v1", namespace, name,
                                           token_request, {"subresource": "token"}))

    async def update(self, obj: dict[str, Any], *, dry_run: bool = False,
                     field_validation: str | None = None) -> dict[str, Any]:
        """Replace; `Conflict` when ``metadata.resourceVersion`` is stale."""
        kind, ns, api_version = _meta(obj)
        name = obj.get("metadata", {}).get("name")
        return await self._call(ApiRequest("update", kind, api_version, ns, name, obj,
                                           _write_opts(dry_run,
                                                       self._validation(field_validation))))

    async def update_status(self, obj: dict[str, Any], *, dry_run: bool = False,
                            field_validation: str | None = None) -> dict[str, Any]:
        """Replace only the status (the ``/status`` subresource)."""
        kind, ns, api_version = _meta(obj)
        name = obj.get("metadata", {}).get("name")
        return await self._call(ApiRequest("update_status", kind, api_version, ns, name, obj,
                                           _write_opts(dry_run,
                                                       self._validation(field_validation))))

    async def patch(self, kind: str, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None,
                    dry_run: bool = False, field_validation: str | None = None,
                    api_version: str | None = None) -> dict[str, Any]:
        """Patch with ``merge`` (RFC 7386), ``json`` (RFC 6902) or ``strategic`` merge."""
        if patch_type not in PATCH_TYPES:
            raise BadRequest(f"unknown patch type {patch_type!r}: use one of "
                             + ", ".join(repr(p) for p in PATCH_TYPES))
        opts: dict[str, Any] = {"patch_type": patch_type,
                                **_write_opts(dry_run, self._validation(field_validation))}
        if subresource:
            opts["subresource"] = subresource
        return await self._call(ApiRequest("patch", kind, api_version, namespace, name, patch, opts))

    async def delete(self, kind: str, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None, dry_run: bool = False,
                     api_version: str | None = None) -> dict[str, Any]:
        """Delete; the object (still there with ``deletionTimestamp`` while finalizers or a grace
        period hold it) or a success Status. `NotFound` when it does not exist."""
        opts: dict[str, Any] = _write_opts(dry_run, None)
        if propagation_policy is not None:
            opts["propagation_policy"] = propagation_policy
        if grace_period_seconds is not None:
            opts["grace_period_seconds"] = grace_period_seconds
        if preconditions is not None:
            opts["preconditions"] = preconditions
        return await self._call(ApiRequest("delete", kind, api_version, namespace, name, None, opts))

    async def delete_collection(self, kind: str, namespace: str | None = None, *,
                                label_selector: str | dict[str, str] | None = None,
                                field_selector: str | None = None,
                                propagation_policy: str | None = None,
                                grace_period_seconds: int | None = None, dry_run: bool = False,
                                api_version: str | None = None) -> dict[str, Any]:
        """``DeleteAllOf``: delete every matching object."""
        opts: dict[str, Any] = _write_opts(dry_run, None)
        if propagation_policy is not None:
            opts["propagation_policy"] = propagation_policy
        if grace_period_seconds is not None:
            opts["grace_period_seconds"] = grace_period_seconds
        if label_selector:
            opts["label_selector"] = selector_text(label_selector)
        if field_selector:
            opts["field_selector"] = field_selector
        return await self._call(ApiRequest("delete_collection", kind, api_version, namespace, None,
                                           None, opts))


def check_field_validation_option(value: str | None) -> str | None:
    """``value`` if it is a ``fieldValidation`` kube knows (or None); a ValueError naming the
    choices otherwise (a typo must not quietly mean the server's default)."""
    if value is None or value in FIELD_VALIDATION:
        return value
    raise ValueError(f"field_validation must be one of {', '.join(map(repr, FIELD_VALIDATION))} "
                     f"or None (the server's default, Warn), not {value!r}")


def _write_opts(dry_run: bool, field_validation: str | None) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if dry_run:
        opts["dry_run"] = True
    if field_validation is not None:
        opts["field_validation"] = field_validation
    return opts


def selector_text(selector: str | dict[str, str]) -> str:
    """A label selector as text; a dict is ``matchLabels`` (``{"a": "b"}`` → ``a=b``)."""
    if isinstance(selector, str):
        return selector
    if isinstance(selector, dict):  # on every cached list a controller makes: kept lean
        if len(selector) == 1:
            for k, v in selector.items():
                return f"{k}={v}"
        return ",".join([f"{k}={v}" for k, v in sorted(selector.items())])
    raise BadRequest(f"a label selector is a string or a mapping, not {type(selector).__name__}")


async def _close_on_exit(stream: Any) -> AsyncIterator[dict[str, Any]]:
    try:
        async for item in stream:
            yield item
    finally:
        stream.close()
