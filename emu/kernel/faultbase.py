"""Faults as data: the base value and the plan, below every layer that defines faults.

A `Fault` is a frozen value with a time (``at``) and an ``apply(sim)`` that performs it; a
`FaultPlan` is an ordered list of them that prints as the code rebuilding it and round-trips
through JSON. The kernel's, Kubernetes' and Ray's fault values (``emu.faults``,
``emu.kube.faults``) all subclass `Fault`, which registers each subclass by name for loading.

Every fault is checked when it is built: a time or duration (any field named ``at``,
``duration``, ``seconds``, ``hold``, ``after``, ``build_seconds`` or ending in ``_seconds``) that
is negative, NaN or infinite, or a ``count`` below 1, is a `ValueError` — such a fault could never
happen as written. ``optional=True`` marks a fault that may legitimately not take effect (see
``emu.faults.UnperformedFaults``); it is printed only when set, so plans print as before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
import orjson

_FAULT_TYPES: dict[str, type[Fault]] = {}


_TIME_FIELDS = frozenset({"at", "duration", "seconds", "hold", "after", "build_seconds"})


def _is_time_field(name: str) -> bool:
    return name in _TIME_FIELDS or name.endswith("_seconds")


def _with_optional(gen_repr: Any) -> Any:
    def __repr__(self: Fault) -> str:
        text: str = gen_repr(self)
        if self.optional and text.endswith(")"):
            text = text[:-1] + ("optional=True)" if text.endswith("()") else ", optional=True)")
        return text

    __repr__._emu_optional = True  # type: ignore[attr-defined]
    return __repr__


@attrs.frozen
class Fault:
    """A fault at virtual time ``at`` (seconds from the start of the run).

    ``optional`` (keyword-only, printed only when set): the fault may not take effect without
    that being an error at the end of the run."""

    at: float = attrs.field(kw_only=True, default=0.0)
    optional: bool = attrs.field(kw_only=True, default=False, repr=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _FAULT_TYPES[cls.__name__] = cls
        gen = cls.__dict__.get("__repr__")
        if gen is not None and not getattr(gen, "_emu_optional", False):
            cls.__repr__ = _with_optional(gen)  # type: ignore[method-assign]

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(type(self)):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if _is_time_field(field.name) and (math.isnan(value) or math.isinf(value)
                                               or value < 0):
                raise ValueError(f"{type(self).__name__}: {field.name} must be a finite, "
                                 f"non-negative number of seconds, not {value!r}")
            if field.name == "count" and value < 1:
                raise ValueError(f"{type(self).__name__}: count must be at least 1 (or None "
                                 f"for every match), not {value!r}")

    def apply(self, sim: Any) -> Any:
        """Perform the fault. Returns None when it took effect; a string saying why it did not;
        or a function returning either, asked at the end of the run (for faults whose effect is
        known only later, such as a request matcher)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        out = {"type": type(self).__name__, **attrs.asdict(self, recurse=False)}
        if not out.get("optional"):
            out.pop("optional", None)
        return out


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


