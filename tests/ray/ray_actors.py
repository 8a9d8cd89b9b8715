"""Actor classes the fake Ray's tests create (importable by name, as Ray needs)."""

from __future__ import annotations

from typing import Any


class Counter:
    """Counts in memory; a restart starts again from ``start``."""

    def __init__(self, start: int = 0) -> None:
        self.value = start

    def incr(self, by: int = 1) -> int:
        self.value += by
        return self.value

    def get(self) -> int:
        return self.value


class CheckpointedCounter(Counter):
    """A counter that uses the checkpoint hook: its progress survives its worker's death."""

    def save_checkpoint(self) -> dict[str, Any]:
        return {"value": self.value}

    def load_checkpoint(self, state: dict[str, Any]) -> None:
        self.value = int(state["value"])


class Exploding:
    def __init__(self) -> None:
        raise RuntimeError("constructor failed on purpose")
