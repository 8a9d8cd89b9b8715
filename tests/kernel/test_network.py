from __future__ import annotations

import asyncio

import pytest

from emu.kernel.network import (
    ConnectionRefused,
    ConnectionReset,
    Match,
    Timeout,
)
from emu.kernel.world import World


class Boom(Exception):
    pass


async def _world_with_echo():
    world = World()
    applied = []

    async def handler(payload, info):
        applied.append((world.now, info.src, payload))
        return payload

    world.network.register("apiserver", handler)

    async def idle(proc):
        await asyncio.Event().wait()

    client = world.start_process("operator-0", idle)
    return world, client, applied


def test_a_partition_makes_calls_time_out_and_heal_restores_them(run):
    async def main():
        world, client, applied = await _world_with_echo()
        world.network.partition("operator-0", "apiserver")
        with pytest.raises(Timeout, match=r"^get apiserver: i/o timeout after 5s$"):
            await world.network.call(client, "apiserver", 1, verb="get", timeout=5)
        assert world.now == 5.0 and applied == []
        world.network.heal("apiserver", "operator-0")
        assert await world.network.call(client, "apiserver", 2) == 2

    run(main)


def test_an_outage_refuses_at_once_and_a_blackhole_outage_times_out(run):
    async def main():
        world, client, _ = await _world_with_echo()
        world.network.outage("apiserver")
        with pytest.raises(ConnectionRefused, match="^dial apiserver: connection refused$"):
            await world.network.call(client, "apiserver", 1)
        assert world.now == 0.0
        world.network.outage("apiserver", mode="blackhole")
        with pytest.raises(Timeout):
            await world.network.call(client, "apiserver", 1)
        assert world.now == 30.0  # the default timeout
        world.network.restore("apiserver")
        assert await world.network.call(client, "apiserver", 3) == 3

    run(main)


def test_latency_delays_both_directions_of_matching_calls_only(run):
    async def main():
        world, client, applied = await _world_with_echo()
        world.network.set_latency(0.25, Match(caller="operator-0"))
        await world.network.call(client, "apiserver", "slow")
        await world.network.call(None, "apiserver", "fast")
        return applied, world.now

    applied, now = run(main)
    assert applied == [(0.25, "operator-0", "slow"), (0.5, "test", "fast")]
    assert now == 0.5


def test_fail_requests_fails_only_matching_calls_for_the_given_count(run):
    async def main():
        world, client, applied = await _world_with_echo()
        world.network.fail_requests(Match(verb="update", kind="Lease"), lambda info: Boom(info.name),
                                    count=2)
        outcomes = []
        for verb in ("update", "get", "update", "update"):
            try:
                await world.network.call(client, "apiserver", verb, verb=verb, kind="Lease",
                                         name="lock")
                outcomes.append("ok")
            except Boom as err:
                outcomes.append(f"boom:{err}")
        return outcomes, [p for _, _, p in applied]

    outcomes, applied = run(main)
    assert outcomes == ["boom:lock", "ok", "boom:lock", "ok"]
    assert applied == ["get", "update"]


def test_fail_requests_with_a_duration_expires(run):
    async def main():
        world, client, _ = await _world_with_echo()
        world.network.fail_requests(Match(), lambda info: Boom(), duration=10)
        with pytest.raises(Boom):
            await world.network.call(client, "apiserver", 1)
        await asyncio.sleep(10)
        return await world.network.call(client, "apiserver", 2)

    assert run(main) == 2


def test_a_lost_response_is_applied_but_the_caller_times_out(run):
    async def main():
        world, client, applied = await _world_with_echo()
        world.network.lose_responses(Match(verb="create"), count=1)
        with pytest.raises(Timeout, match=r"the request was applied; its response was lost\)$"):
            await world.network.call(client, "apiserver", "job", verb="create", timeout=10)
        second = await world.network.call(client, "apiserver", "job-again", verb="create")
        events = world.trace.select(event="response_lost")
        return applied, second, world.now, events

    applied, second, now, events = run(main)
    assert [p for _, _, p in applied] == ["job", "job-again"]
    assert second == "job-again"
    assert now == 10.0
    assert len(events) == 1 and events[0].process == "operator-0"


class _Queue:
    def __init__(self):
        self.q: asyncio.Queue = asyncio.Queue()
        self.closed = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.closed:
            raise StopAsyncIteration
        item = await self.q.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def close(self):
        self.closed = True
        self.q.put_nowait(None)


def test_a_partition_breaks_an_open_stream_with_connection_reset(run):
    async def main():
        world = World()
        inner = _Queue()

        async def open_stream(payload, info):
            return inner

        world.network.register("apiserver", stream_handler=open_stream)

        async def idle(proc):
            await asyncio.Event().wait()

        client = world.start_process("operator-0", idle)
        stream = await world.network.stream(client, "apiserver", "watch pods")
        inner.q.put_nowait("event-1")
        first = await stream.__anext__()
        world.call_later(5, lambda: world.network.partition("operator-0", "apiserver"))
        with pytest.raises(ConnectionReset, match=r"^apiserver: connection reset \(partition\)$"):
            await stream.__anext__()
        return first, world.now, inner.closed

    assert run(main) == ("event-1", 5.0, True)


def test_outage_mode_must_be_refuse_or_blackhole(run):
    async def main():
        world = World()
        with pytest.raises(ValueError, match="^outage mode must be 'refuse' or 'blackhole', "
                                             "not 'down'$"):
            world.network.outage("apiserver", mode="down")

    run(main)


def test_a_partition_between_hosts_cuts_every_process_on_them_both_ways(run):
    async def main():
        world = World()

        async def handler(payload, info):
            return "ok"

        async def server(proc):
            world.network.register("10.244.1.5:6379", handler, process=proc)
            await asyncio.Event().wait()

        async def idle(proc):
            await asyncio.Event().wait()

        world.start_process("default/head/gcs_server", server, host="node-1")
        client = world.start_process("default/worker/raylet", idle, host="node-2")
        await asyncio.sleep(0)
        world.network.partition("node-2", "node-1")
        with pytest.raises(Timeout):
            await world.network.call(client, "10.244.1.5:6379", "ping", timeout=1)
        world.network.heal("node-1", "node-2")
        return await world.network.call(client, "10.244.1.5:6379", "ping")

    assert run(main) == "ok"


def test_network_errors_are_the_oserrors_socket_code_expects():
    from emu.kernel.network import NetworkError

    assert issubclass(NetworkError, OSError)
    assert issubclass(ConnectionRefused, ConnectionRefusedError)
    assert issubclass(Timeout, TimeoutError)
    assert issubclass(ConnectionReset, ConnectionResetError)
    err = Timeout("get apiserver: i/o timeout after 5s", src="operator-0", dst="apiserver")
    assert (str(err), err.src, err.dst) == ("get apiserver: i/o timeout after 5s", "operator-0",
                                            "apiserver")


def test_each_call_leaves_a_span_naming_caller_request_duration_and_outcome(run):
    from emu.kernel.trace import Span, Trace

    async def main():
        world, client, _ = await _world_with_echo()
        trace = Trace(lambda: world.now)
        world.network.spans = trace.spans
        world.network.set_latency(0.5, Match(verb="get"))
        await world.network.call(client, "apiserver", 1, verb="get", kind="Pod", name="p")
        world.network.outage("apiserver")
        with pytest.raises(ConnectionRefused):
            await world.network.call(None, "apiserver", 2, caller="kubectl")
        return trace.spans

    assert run(main) == [
        Span("operator-0", "get Pod p", 0.0, 1.0, {"dst": "apiserver", "outcome": "ok"}),
        Span("kubectl", "call apiserver", 1.0, 1.0,
             {"dst": "apiserver", "outcome": "ConnectionRefused"}),
    ]


def test_a_sync_handler_answers_fault_free_calls_and_the_async_one_answers_faulty_ones(run):
    async def main():
        world = World()
        served = []

        def answer(payload, info):
            served.append(("sync", payload))
            if payload == "bad":
                raise Boom("refused")
            return payload * 2

        async def handler(payload, info):
            served.append(("async", payload))
            return answer(payload, info)

        world.network.register("api", handler, sync_handler=answer)

        async def idle(proc):
            await asyncio.Event().wait()

        client = world.start_process("operator-0", idle)
        assert await world.network.call(client, "api", 2) == 4
        with pytest.raises(Boom, match="^refused$"):
            await world.network.call(client, "api", "bad")
        world.network.set_latency(1.0)  # a fault: the network awaits the handler itself
        assert await world.network.call(client, "api", 3) == 6
        assert world.now == 2.0
        assert served == [("sync", 2), ("sync", "bad"), ("async", 3), ("sync", 3)]
        world.network.set_latency(0)
        world.processes.get("operator-0").crash("test")
        world.network.register("api2", handler, sync_handler=answer, process=client)
        with pytest.raises(ConnectionRefused):  # the endpoint's process is gone
            await world.network.call(None, "api2", 1)

    run(main)
