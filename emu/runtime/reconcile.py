"""What a reconciler is given and what it answers: `Request`, `Result`, `TerminalError`.

Port of controller-runtime ``pkg/reconcile/reconcile.go``. The contract is the one controller-runtime
states on its ``Reconciler`` interface, and the controller (`emu.runtime.controller`) enforces it:

- If the reconciler raises, the Result is ignored and the request is requeued using exponential
  backoff (the rate limiter); ``requeue_after`` is ignored, with a warning in the trace.
- A `TerminalError` is not requeued at all (and its backoff is not forgotten).
- ``requeue_after > 0`` forgets the key's backoff and re-adds it after that many seconds.
- ``requeue=True`` (deprecated in Go, kept because ported code uses it) re-adds it rate limited.
- Otherwise the key is forgotten and waits for the next event.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs


@attrs.frozen(order=True, cache_hash=True)
class Request:
    """The key of the object to reconcile: its namespace (empty when cluster-scoped) and name."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/name``, client-go's MetaNamespaceKey."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return self.key

    @classmethod
    def for_object(cls, obj: dict[str, object]) -> Request:
        """The request that names ``obj``."""
        meta = obj.get("metadata") or {}
        assert isinstance(meta, dict)
        return cls(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


@attrs.frozen
class Result:
    """What the reconciler wants next. Defaults to "done until something changes"."""

    requeue: bool = False
    requeue_after: float = 0.0

    def is_zero(self) -> bool:
        return not self.requeue and self.requeue_after <= 0


class TerminalError(Exception):
    """Port of ``reconcile.TerminalError`` (reconcile.go): an error that retrying cannot fix.

    The controller records it and does not requeue the request.
    """

    def __init__(self, err: BaseException | str) -> None:
        self.err = err if isinstance(err, BaseException) else Exception(err)
        super().__init__(f"terminal error: {self.err}")


@runtime_checkable
class Reconciler(Protocol):
    """Drives one object towards its desired state.

    "If the returned error is non-nil, the Result is ignored and the request will be requeued
    using exponential backoff. The only exception is if the error is a TerminalError in which case
    no requeuing happens." (controller-runtime, reconcile.go). Here "returned error" is "raised".
    """

    async def reconcile(self, request: Request) -> Result: ...
