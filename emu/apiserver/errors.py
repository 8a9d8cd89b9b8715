"""API errors: exceptions that carry the Kubernetes ``Status`` a real API server would send.

Each error keeps Kubernetes' text *and* structured fields, so a test can match the whole message
(``pods "x" not found``) or check ``err.code == 404`` / ``err.reason == "NotFound"``, and the HTTP
facade can send ``err.status`` as the response body unchanged. Messages follow
k8s.io/apimachinery/pkg/api/errors (``NewNotFound``, ``NewConflict``, ``NewInvalid``, …).

Controllers import this module (as KubeRay imports ``k8s.io/apimachinery/pkg/api/errors``); the
``is_*`` helpers mirror ``errors.IsNotFound`` and friends.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class StatusCause:
    """One field-level cause of an Invalid error (``metav1.StatusCause``)."""

    type: str
    message: str
    field: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.type, "message": self.message, "field": self.field}


@attrs.frozen
class Status:
    """``metav1.Status`` for a failure."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _status_dict(self.message, self.reason, self.code, self.details)


def status_details(details: dict[str, Any]) -> dict[str, Any]:
    """``metav1.StatusDetails`` as Go encodes it: empty fields (``group: ""`` of a core kind,
    a cause's empty ``field``) are omitted (all are ``omitempty``)."""
    if "causes" not in details and "" not in details.values():
        return details  # the errors built here: nothing to drop (a stale update's 409)
    out = {k: v for k, v in details.items() if v not in ("", None, [])}
    causes = out.get("causes")
    if isinstance(causes, list):
        out["causes"] = [{k: v for k, v in c.items() if v != ""} if isinstance(c, dict) else c
                         for c in causes]
    return out


def _status_dict(message: str, reason: str, code: int, details: dict[str, Any] | None
                 ) -> dict[str, Any]:
    """A failure ``Status`` as the wire carries it, in ``metav1.Status``'s field order: kind,
    apiVersion, metadata, status, message, reason, details, code."""
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "message": message}
    if reason:  # omitempty (an admission webhook's denial may give none)
        out["reason"] = reason
    if details:
        cleaned = status_details(details)
        if cleaned:
            out["details"] = cleaned
    out["code"] = code
    return out


class ApiError(Exception):
    """An error response from the API server."""

    code: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None,
                 code: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason
        self.details: dict[str, Any] = details or {}

    @property
    def status(self) -> dict[str, Any]:
        """The ``Status`` object as the wire carries it (built without a `Status` value: every
        refused request, a stale update's 409 above all, sends one)."""
        return _status_dict(self.message, self.reason, self.code, self.details)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code} {self.reason}: {self.message!r})"

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> ApiError:
        """Rebuild the matching exception from a ``Status`` body."""
        reason = status.get("reason", "")
        code = int(status.get("code", 500))
        sub = _BY_REASON.get(reason, ApiError)
        err = sub.__new__(sub)
        ApiError.__init__(err, status.get("message", ""), details=status.get("details"),
                          code=code, reason=reason or None)
        cont = (status.get("metadata") or {}).get("continue")
        if cont and isinstance(err, Gone):
            err.continue_token = cont
        return err


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    """``StatusDetails`` of an error about one object; a core kind's empty group is left out,
    as Go's encoder omits it."""
    return {"name": name, "group": group, "kind": kind} if group else \
        {"name": name, "kind": kind}


class NotFound(ApiError):
    """404: the object (or kind) does not exist."""

    code = 404
    reason = "NotFound"

    def __init__(self, resource: str, name: str, group: str = "") -> None:
        super().__init__(f'{_qualified(resource, group)} "{name}" not found',
                         details=_details(name, group, resource))


class AlreadyExists(ApiError):
    """409: a create whose name is taken."""

    code = 409
    reason = "AlreadyExists"

    def __init__(self, resource: str, name: str, group: str = "") -> None:
        super().__init__(f'{_qualified(resource, group)} "{name}" already exists',
                         details=_details(name, group, resource))


#: Why a stale update is refused (``NewConflict``'s usual reason: ``OptimisticLockErrorMsg``).
_MODIFIED = "the object has been modified; please apply your changes to the latest version and " \
    "try again"


class Conflict(ApiError):
    """409: an update or delete precondition on a stale resourceVersion (or uid) failed."""

    code = 409
    reason = "Conflict"

    def __init__(self, resource: str, name: str, group: str = "", why: str = _MODIFIED) -> None:
        ApiError.__init__(
            self, f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
            details=_details(name, group, resource),
        )


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` name each field."""

    code = 422
    reason = "Invalid"

    def __init__(self, kind: str, name: str, causes: list[StatusCause], group: str = "") -> None:
        self.causes = causes
        shown = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
        text = shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"
        qualified = f"{kind}.{group}" if group else kind
        super().__init__(
            f'{qualified} "{name}" is invalid: {text}',
            details={"name": name, "group": group, "kind": kind,
                     "causes": [c.to_dict() for c in causes]},
        )


class Gone(ApiError):
    """410: a watch from a resourceVersion older than the history window."""

    code = 410
    reason = "Expired"
    continue_token = ""

    def __init__(self, message: str, *, continue_token: str = "") -> None:
        super().__init__(message)
        #: for a compacted list continuation: a token reading the rest at the latest revision
        self.continue_token = continue_token

    @property
    def status(self) -> dict[str, Any]:
        out = super().status
        if self.continue_token:
            out["metadata"] = {"continue": self.continue_token}
        return out


class BadRequest(ApiError):
    """400: a malformed request (not an object, wrong types, a bad selector)."""

    code = 400
    reason = "BadRequest"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class Forbidden(ApiError):
    """403: the request is not allowed (e.g. a create in a terminating namespace)."""

    code = 403
    reason = "Forbidden"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)

    @classmethod
    def for_object(cls, resource: str, group: str, name: str, why: str) -> Forbidden:
        """``errors.NewForbidden``: ``<resource>[.<group>] "<name>" is forbidden: <why>``,
        with the object in the details (what an admission plugin's refusal carries)."""
        return cls(f'{_qualified(resource, group)} "{name}" is forbidden: {why}',
                   details=_details(name, group, resource))


class MethodNotAllowed(ApiError):
    """405: the verb does not apply to this resource."""

    code = 405
    reason = "MethodNotAllowed"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class RequestEntityTooLarge(ApiError):
    """413: the object is larger than the 1.5 MiB the store accepts."""

    code = 413
    reason = "RequestEntityTooLarge"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class UnsupportedMediaType(ApiError):
    """415: a patch type the kind does not support."""

    code = 415
    reason = "UnsupportedMediaType"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class TooManyRequests(ApiError):
    """429: throttled."""

    code = 429
    reason = "TooManyRequests"

    def __init__(self, message: str = "Too many requests, please try again later.") -> None:
        super().__init__(message)


class InternalError(ApiError):
    """500: the server failed."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str = "Internal error occurred") -> None:
        super().__init__(message)


class ServiceUnavailable(ApiError):
    """503: the server cannot serve now."""

    code = 503
    reason = "ServiceUnavailable"

    def __init__(self, message: str = "the server is currently unable to handle the request") -> None:
        super().__init__(message)


class ServerTimeout(ApiError):
    """504: the server gave up waiting; the request may still take effect."""

    code = 504
    reason = "Timeout"

    def __init__(self, message: str = "the server was unable to return a response in the time "
                                      "allotted, but may still be processing the request") -> None:
        super().__init__(message)


_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls
    for cls in (NotFound, AlreadyExists, Conflict, Invalid, Gone, BadRequest, Forbidden,
                MethodNotAllowed, RequestEntityTooLarge, UnsupportedMediaType, TooManyRequests,
                InternalError, ServiceUnavailable, ServerTimeout)
}


def is_not_found(err: BaseException) -> bool:
    """``errors.IsNotFound``."""
    return isinstance(err, ApiError) and err.reason == "NotFound"


def is_already_exists(err: BaseException) -> bool:
    """``errors.IsAlreadyExists``."""
    return isinstance(err, ApiError) and err.reason == "AlreadyExists"


def is_conflict(err: BaseException) -> bool:
    """``errors.IsConflict``."""
    return isinstance(err, ApiError) and err.reason == "Conflict"


def is_invalid(err: BaseException) -> bool:
    """``errors.IsInvalid``."""
    return isinstance(err, ApiError) and err.reason == "Invalid"


def is_gone(err: BaseException) -> bool:
    """``errors.IsResourceExpired`` / ``IsGone``."""
    return isinstance(err, ApiError) and err.code == 410
