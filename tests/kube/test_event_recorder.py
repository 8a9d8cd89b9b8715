"""The built-ins' EventRecorder: aggregation, and names two recorders pick at one instant."""

from __future__ import annotations

from emu.kube.events import EventRecorder


async def test_two_recorders_at_one_instant_both_write_their_event(sim):
    pod = await sim.client().create({"apiVersion": "v1", "kind": "Pod",
                                     "metadata": {"name": "p", "namespace": "default"},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}})
    proc = sim.start_process("recorders", lambda p: p.sleep(3600))
    first = EventRecorder(sim.client("a"), proc, "default-scheduler")
    second = EventRecorder(sim.client("b"), proc, "kubelet", "node-1")
    first.event(pod, "Normal", "Scheduled", "assigned")
    second.event(pod, "Normal", "Pulling", "pulling")
    await sim.sleep(1)
    second.event(pod, "Normal", "Pulling", "pulling")  # a repeat: the same Event, count 2
    await sim.sleep(1)
    events = {e["reason"]: e for e in await sim.client().list("Event", "default")}
    assert sorted(events) == ["Pulling", "Scheduled"]
    assert events["Pulling"]["count"] == 2 and events["Scheduled"]["count"] == 1
    assert events["Pulling"]["metadata"]["name"] != events["Scheduled"]["metadata"]["name"]
