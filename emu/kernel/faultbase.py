"""Faults as data: the base value and the plan, below every layer that defines faults.

A `Fault` is a frozen value with a time (``at``) and an ``apply(sim)`` that performs it; a
`FaultPlan` is an ordered list of them that prints as the code rebuilding it and round-trips
through JSON. The kernel's, Kubernetes' and Ray's fault values (``emu.faults``,
``emu.kube.faults``) all subclass `Fault`, which registers each subclass by name for loading.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs
import orjson

_FAULT_TYPES: dict[str, type[Fault]] = {}


@attrs.frozen
class Fault:
    """A fault at virtual time ``at`` (seconds from the start of the run)."""

    at: float = attrs.field(kw_only=True, default=0.0)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _FAULT_TYPES[cls.__name__] = cls

    def apply(self, sim: Any) -> None:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **attrs.asdict(self)}


def fault_from_dict(item: dict[str, Any]) -> Fault:
    """Rebuild a fault from `Fault.to_dict` output (nested faults included)."""
    item = dict(item)
    type_name = item.pop("type", None)
    ftype = _FAULT_TYPES.get(str(type_name))
    if ftype is None:
        raise ValueError(f"unknown fault type {type_name!r}; known: "
                         + ", ".join(sorted(_FAULT_TYPES)))
    for key, value in list(item.items()):
        if isinstance(value, dict) and "type" in value:
            item[key] = fault_from_dict(value)
    return ftype(**item)


def _to_tuple(faults: Iterable[Fault]) -> tuple[Fault, ...]:
    return tuple(faults)


@attrs.frozen
class FaultPlan:
    """An ordered list of faults; ``repr`` is the code that rebuilds it."""

    faults: tuple[Fault, ...] = attrs.field(converter=_to_tuple, factory=tuple)

    def __iter__(self) -> Iterator[Fault]:
        return iter(self.faults)

    def __len__(self) -> int:
        return len(self.faults)

    def __repr__(self) -> str:
        return "[" + ", ".join(repr(f) for f in self.faults) + "]"

    def to_json(self) -> str:
        return orjson.dumps([f.to_dict() for f in self.faults]).decode()

    @classmethod
    def from_json(cls, text: str) -> FaultPlan:
        return cls(fault_from_dict(item) for item in orjson.loads(text))


