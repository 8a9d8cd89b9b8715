"""The tutorial's "Finalizers and deletion" example (docs/tutorial.md quotes it verbatim), and the
rules listed under it, through a network client."""

from __future__ import annotations

import emu


async def test_a_finalizer_holds_the_object_until_the_controller_removes_it(
        sim: emu.Simulation) -> None:
    c = sim.client("my-test")
    await c.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "guarded", "namespace": "default",
                                 "finalizers": ["example.com/cleanup"]}})
    deleting = await c.delete("ConfigMap", "guarded", "default")
    assert "deletionTimestamp" in deleting["metadata"]      # still there, being deleted
    deleting["metadata"]["finalizers"] = []                 # the cleanup is done
    await c.update(deleting)                                # the last finalizer goes: deleted
    try:
        await c.get("ConfigMap", "guarded", "default")
        raise AssertionError("expected NotFound")
    except emu.NotFound:
        pass


async def test_a_scheduled_pod_waits_its_grace_period_unless_a_shorter_one_is_given(
        sim: emu.Simulation) -> None:
    c = sim.client("my-test")
    await c.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"nodeName": "nowhere",
                             "containers": [{"name": "c", "image": "busybox"}]}})
    first = await c.delete("Pod", "p", "default")
    assert first["metadata"]["deletionGracePeriodSeconds"] == 30
    assert await c.delete("Pod", "p", "default") == first     # nothing changes
    await c.delete("Pod", "p", "default", grace_period_seconds=0)
    try:
        await c.get("Pod", "p", "default")
        raise AssertionError("expected NotFound")
    except emu.NotFound:
        pass
