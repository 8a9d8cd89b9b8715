"""What a client sends to the API server over the emulated network.

One value per request, so the network can match faults on it (verb, kind, name, namespace) and the
HTTP facade can build it from a URL. ``kind`` is what the caller wrote (``"Pod"``,
``"RayCluster"``, or a plural such as ``"rayclusters"``); ``api_version`` narrows it when set
(``"ray.io/v1"``). The server resolves both through its kind registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

VERBS = ("get", "list", "create", "update", "update_status", "patch", "delete",
         "delete_collection", "watch")

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


#: The options of a request that gives none (read-only: one value shared by all of them).
NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


class ApiRequest(NamedTuple):
    """A request: verb, target, body and options.

    A named tuple rather than an attrs value: one is built for every request, and a tuple is
    built in a third of the time (issue 17); it is as immutable.

    Options by verb (all optional):
    - get: ``resource_version``.
    - list / watch / delete_collection: ``label_selector``, ``field_selector``,
      ``resource_version``; list also ``resource_version_match``, ``limit``, ``continue``;
      watch also ``allow_bookmarks`` (bool).
    - create / update / update_status / patch: ``dry_run`` (bool).
    - patch: ``patch_type`` (a key of `PATCH_TYPES`), ``subresource`` (``"status"`` or None).
    - delete: ``propagation_policy`` (``Background`` | ``Foreground`` | ``Orphan``),
      ``preconditions`` ({"uid": .., "resourceVersion": ..}), ``grace_period_seconds``.
    """

    verb: str
    kind: str
    api_version: str | None = None
    namespace: str | None = None
    name: str | None = None
    body: Any = None
    options: Mapping[str, Any] = NO_OPTIONS
