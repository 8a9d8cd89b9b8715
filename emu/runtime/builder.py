"""The controller builder: ``For`` / ``Owns`` / ``Watches``, then ``Complete``.

Port of controller-runtime ``pkg/builder/controller.go``::

    new_controller_managed_by(mgr).for_("RayCluster", api_version="ray.io/v1") \\
        .owns("Pod").owns("Service") \\
        .with_options(ControllerOptions(max_concurrent_reconciles=4)) \\
        .complete(RayClusterReconciler(mgr.get_client()))

The controller is named after the ``For`` kind in lower case unless `Builder.named` says
otherwise, and is added to the manager as a leader-election runnable (unless its options say
it needs no election).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .controller import Controller, ControllerOptions
from .handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    EventHandler,
    MapFunc,
)
from .predicate import Predicate
from .reconcile import Reconciler
from .source import Kind

if TYPE_CHECKING:
    from .manager import Manager


@attrs.frozen
class _Watch:
    kind: str
    handler: EventHandler
    predicates: tuple[Predicate, ...]


class Builder:
    """Port of ``builder.TypedBuilder``."""

    def __init__(self, manager: Manager) -> None:
        self._mgr = manager
        self._for: _Watch | None = None
        self._for_api_version: str | None = None
        self._owns: list[_Watch] = []
        self._watches: list[_Watch] = []
        self._global: list[Predicate] = []
        self._options = ControllerOptions()
        self._name = ""

    def for_(self, kind: str, *, api_version: str | None = None,
             predicates: tuple[Predicate, ...] = ()) -> Builder:
        """``For``: reconcile objects of this kind when they change."""
        if self._for is not None:
            raise ValueError("For(...) should only be called once, could not assign multiple "
                             "objects for reconciliation")
        self._for = _Watch(kind, EnqueueRequestForObject(), tuple(predicates))
        self._for_api_version = api_version
        return self

    def owns(self, kind: str, *, predicates: tuple[Predicate, ...] = ()) -> Builder:
        """``Owns``: reconcile the ``For`` object that is the controller owner of a changed
        object of this kind."""
        self._owns.append(_Watch(kind, EventHandler(), tuple(predicates)))
        return self

    def watches(self, kind: str, handler: EventHandler | MapFunc, *,
                predicates: tuple[Predicate, ...] = ()) -> Builder:
        """``Watches``: reconcile what ``handler`` (or a mapping function) says."""
        h = handler if isinstance(handler, EventHandler) else EnqueueRequestsFromMapFunc(handler)
        self._watches.append(_Watch(kind, h, tuple(predicates)))
        return self

    def with_event_filter(self, pred: Predicate) -> Builder:
        """``WithEventFilter``: a predicate applied to every watch."""
        self._global.append(pred)
        return self

    def with_options(self, options: ControllerOptions) -> Builder:
        self._options = options
        return self

    def named(self, name: str) -> Builder:
        self._name = name
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        """``Complete``/``Build``: create the controller, its watches, and add it to the manager."""
        if self._for is None:
            raise ValueError("must provide an object for reconciliation")
        for_kind = self._for.kind
        name = self._name or for_kind.lower()
        ctrl = Controller(name, reconciler, self._options, process=self._mgr.process)
        ctrl.for_kind = for_kind
        cache = self._mgr.get_cache()
        glob = tuple(self._global)
        ctrl.watch(Kind(cache, for_kind, self._for.handler, glob + self._for.predicates))
        for own in self._owns:
            handler = EnqueueRequestForOwner(for_kind, self._for_api_version,
                                             only_controller=True)
            ctrl.watch(Kind(cache, own.kind, handler, glob + own.predicates))
        for w in self._watches:
            ctrl.watch(Kind(cache, w.kind, w.handler, glob + w.predicates))
        self._mgr.add(ctrl)
        return ctrl


def new_controller_managed_by(manager: Manager) -> Builder:
    """Port of ``builder.ControllerManagedBy``."""
    return Builder(manager)
