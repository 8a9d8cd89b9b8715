"""Scale expectations: Pods this process created or deleted and has not yet seen in its cache.

Port of ``ray-operator/controllers/ray/expectations/scale_expectations.go``. The RayCluster
reconciler records every Pod it creates or deletes; before it touches a group again it asks
`RayClusterScaleExpectation.is_satisfied`, which reads each recorded Pod back through the
*cached* client:

- a create is satisfied once the cache has the Pod, or `EXPECTATIONS_TIMEOUT` (30 s) after it was
  recorded;
- a delete is satisfied only when the cache says NotFound — there is no timeout, so a Pod stuck
  terminating blocks its group in this process.

Satisfied records are dropped; one unsatisfied record makes the whole group wait. The records live
only in this process's memory (SPEC §1.8): a new leader starts with none and trusts its cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from emu.apiserver.errors import ApiError

#: ``expectations.HeadGroup``: the group key of the head Pod.
HEAD_GROUP = ""
#: ``ScaleAction`` values.
CREATE = "create"
DELETE = "delete"
#: ``ExpectationsTimeout``: a create counts as seen this long after it was recorded.
EXPECTATIONS_TIMEOUT = 30.0


class _PodReader(Protocol):
    async def get(self, kind: str, name: str, namespace: str | None = None) -> Any: ...


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


@attrs.define
class _RayPod:
    """``rayPod``: one recorded create or delete."""

    name: str
    namespace: str
    ray_cluster: str
    group: str
    action: str
    record_timestamp: float

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_key(self) -> str:
        return f"{self.namespace}/{self.ray_cluster}/{self.group}"

    @property
    def cluster_key(self) -> str:
        return f"{self.namespace}/{self.ray_cluster}"


class RayClusterScaleExpectation:
    """Port of ``rayClusterScaleExpectationImpl``: records keyed by Pod, indexed by group."""

    def __init__(self, client: _PodReader, *, clock: Callable[[], float] = _loop_time) -> None:
        self.client = client
        self._clock = clock
        # Keyed by namespace/pod (client-go's Indexer keeps one item per key), with its two
        # indexes (group, cluster) as insertion-ordered dicts of keys.
        self._items: dict[str, _RayPod] = {}
        self._by_group: dict[str, dict[str, None]] = {}
        self._by_cluster: dict[str, dict[str, None]] = {}

    def _drop(self, key: str) -> None:
        item = self._items.pop(key, None)
        if item is None:
            return
        for index, index_key in ((self._by_group, item.group_key),
                                 (self._by_cluster, item.cluster_key)):
            keys = index.get(index_key)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del index[index_key]

    def expect_scale_pod(self, namespace: str, ray_cluster_name: str, group: str, pod_name: str,
                         action: str) -> None:
        """Port of `ExpectScalePod` (scale_expectations.go): record (or replace) one Pod."""
        item = _RayPod(pod_name, namespace, ray_cluster_name, group, action, self._clock())
        self._drop(item.key)
        self._items[item.key] = item
        self._by_group.setdefault(item.group_key, {})[item.key] = None
        self._by_cluster.setdefault(item.cluster_key, {})[item.key] = None

    async def _is_pod_scaled(self, rp: _RayPod) -> bool:
        """Port of `isPodScaled` (scale_expectations.go)."""
        try:
            await self.client.get("Pod", rp.name, rp.namespace)
            found = True
        except ApiError as err:
            if err.code != 404:
                return False
            found = False
        if rp.action == CREATE:
            return found or rp.record_timestamp + EXPECTATIONS_TIMEOUT < self._clock()
        return not found

    async def is_satisfied(self, namespace: str, ray_cluster_name: str, group: str) -> bool:
        """Port of `IsSatisfied` (scale_expectations.go): every record of the group is seen."""
        group_key = f"{namespace}/{ray_cluster_name}/{group}"
        for key in list(self._by_group.get(group_key) or {}):
            item = self._items.get(key)
            if item is None:
                continue
            if not await self._is_pod_scaled(item):
                return False
            if self._items.get(key) is item:
                self._drop(key)
        return True

    def delete(self, ray_cluster_name: str, namespace: str) -> None:
        """Port of `Delete` (scale_expectations.go): forget every record of the cluster."""
        cluster_key = f"{namespace}/{ray_cluster_name}"
        for key in list(self._by_cluster.get(cluster_key) or {}):
            self._drop(key)

    def __len__(self) -> int:
        return len(self._items)
