"""Predicates: which cache events reach a controller's work queue.

Port of controller-runtime ``pkg/predicate/predicate.go``. A predicate answers, per event kind,
whether the event should be handled; the common ones drop the updates a controller does not care
about (``GenerationChangedPredicate`` drops status-only writes, which is how a controller avoids
reconciling its own status updates forever). Objects are the informer's cached dicts: read them,
never mutate them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]


def _meta(obj: Obj | None) -> dict[str, Any]:
    if obj is None:
        return {}
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class Predicate:
    """Port of ``predicate.Funcs``: every event passes unless a method says otherwise."""

    def create(self, obj: Obj) -> bool:
        return True

    def update(self, old: Obj, new: Obj) -> bool:
        return True

    def delete(self, obj: Obj) -> bool:
        return True

    def generic(self, obj: Obj) -> bool:
        return True


class Funcs(Predicate):
    """A predicate from plain functions; a missing one lets its events pass."""

    def __init__(self, create: Callable[[Obj], bool] | None = None,
                 update: Callable[[Obj, Obj], bool] | None = None,
                 delete: Callable[[Obj], bool] | None = None,
                 generic: Callable[[Obj], bool] | None = None) -> None:
        self._create, self._update, self._delete, self._generic = create, update, delete, generic

    def create(self, obj: Obj) -> bool:
        return self._create(obj) if self._create else True

    def update(self, old: Obj, new: Obj) -> bool:
        return self._update(old, new) if self._update else True

    def delete(self, obj: Obj) -> bool:
        return self._delete(obj) if self._delete else True

    def generic(self, obj: Obj) -> bool:
        return self._generic(obj) if self._generic else True


def new_predicate_funcs(filter_fn: Callable[[Obj], bool]) -> Predicate:
    """Port of ``predicate.NewPredicateFuncs``: one filter on the object (the new one on update)."""
    return Funcs(create=filter_fn, update=lambda _old, new: filter_fn(new), delete=filter_fn,
                 generic=filter_fn)


class ResourceVersionChangedPredicate(Predicate):
    """Port of ``ResourceVersionChangedPredicate``: drop updates that change nothing (resyncs)."""

    def update(self, old: Obj, new: Obj) -> bool:
        return _meta(old).get("resourceVersion") != _meta(new).get("resourceVersion")


class GenerationChangedPredicate(Predicate):
    """Port of ``GenerationChangedPredicate``: pass updates only when ``metadata.generation``
    changed, i.e. the spec changed; status-only and metadata-only writes are dropped."""

    def update(self, old: Obj, new: Obj) -> bool:
        return _meta(old).get("generation") != _meta(new).get("generation")


class LabelChangedPredicate(Predicate):
    """Port of ``LabelChangedPredicate``: pass updates that change labels."""

    def update(self, old: Obj, new: Obj) -> bool:
        return (_meta(old).get("labels") or {}) != (_meta(new).get("labels") or {})


class AnnotationChangedPredicate(Predicate):
    """Port of ``AnnotationChangedPredicate``: pass updates that change annotations."""

    def update(self, old: Obj, new: Obj) -> bool:
        return (_meta(old).get("annotations") or {}) != (_meta(new).get("annotations") or {})


class _And(Predicate):
    def __init__(self, preds: tuple[Predicate, ...]) -> None:
        self.preds = preds

    def create(self, obj: Obj) -> bool:
        return all(p.create(obj) for p in self.preds)

    def update(self, old: Obj, new: Obj) -> bool:
        return all(p.update(old, new) for p in self.preds)

    def delete(self, obj: Obj) -> bool:
        return all(p.delete(obj) for p in self.preds)

    def generic(self, obj: Obj) -> bool:
        return all(p.generic(obj) for p in self.preds)


class _Or(_And):
    def create(self, obj: Obj) -> bool:
        return any(p.create(obj) for p in self.preds)

    def update(self, old: Obj, new: Obj) -> bool:
        return any(p.update(old, new) for p in self.preds)

    def delete(self, obj: Obj) -> bool:
        return any(p.delete(obj) for p in self.preds)

    def generic(self, obj: Obj) -> bool:
        return any(p.generic(obj) for p in self.preds)


class _Not(Predicate):
    def __init__(self, pred: Predicate) -> None:
        self.pred = pred

    def create(self, obj: Obj) -> bool:
        return not self.pred.create(obj)

    def update(self, old: Obj, new: Obj) -> bool:
        return not self.pred.update(old, new)

    def delete(self, obj: Obj) -> bool:
        return not self.pred.delete(obj)

    def generic(self, obj: Obj) -> bool:
        return not self.pred.generic(obj)


def and_(*preds: Predicate) -> Predicate:
    """Port of ``predicate.And``: every predicate must pass."""
    return _And(preds)


def or_(*preds: Predicate) -> Predicate:
    """Port of ``predicate.Or``: one passing predicate is enough."""
    return _Or(preds)


def not_(pred: Predicate) -> Predicate:
    """Port of ``predicate.Not``."""
    return _Not(pred)
