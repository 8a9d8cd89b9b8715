"""Strict faults: every fault value is checked when built and when performed, and a planned
fault that never took effect fails the run (`UnperformedFaults`) unless it is optional."""

from __future__ import annotations

import math
from typing import Any

import pytest

import emu
from emu.faults import (
    AfterRequest,
    Crash,
    FailRequests,
    FaultPlan,
    Heal,
    InformerLag,
    KillGcs,
    Latency,
    LoseResponses,
    Outage,
    Partition,
    Pause,
    Restore,
    Resume,
    UnperformedFaults,
)
from emu.kube.faults import DeletePod, FailNode, KillContainer

pytest_plugins = ["pytester"]


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}


async def idle(sim: emu.Simulation) -> None:
    await sim.sleep(100)


async def forever(process: Any) -> None:
    await emu.Simulation.sleep(None, 10**6)  # type: ignore[arg-type]


# -- when built ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda v: Outage(duration=v), lambda v: Pause(process="p", duration=v),
    lambda v: Partition(a="a", b="b", duration=v), lambda v: Latency(seconds=v),
    lambda v: FailRequests(duration=v), lambda v: LoseResponses(duration=v),
    lambda v: Crash(at=v, process="p"), lambda v: InformerLag(seconds=v),
    lambda v: DeletePod(name="p", grace_period_seconds=v),
])
@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_negative_nan_or_infinite_times_are_value_errors(make: Any, value: float) -> None:
    with pytest.raises(ValueError, match="finite, non-negative number of seconds"):
        make(value)


def test_other_impossible_values_are_value_errors() -> None:
    with pytest.raises(ValueError, match="count must be at least 1"):
        FailRequests(count=0)
    with pytest.raises(ValueError, match="mode must be 'refuse' or 'blackhole'"):
        Outage(mode="down")
    with pytest.raises(ValueError, match="signal must be 'KILL' or 'TERM'"):
        KillGcs(pod="head", signal="HUP")


# -- when performed from a test: raised at once ------------------------------------------------


async def test_an_unknown_process_lists_the_known_ones(sim: emu.Simulation) -> None:
    with pytest.raises(ValueError, match=r"no process named 'operator-0' \(known: kube-apiserver"):
        sim.faults.crash("operator-0")
    assert sim.faults.performed() == [] and sim.faults.unperformed() == []


async def test_misspelled_matchers_list_what_is_known(sim: emu.Simulation) -> None:
    with pytest.raises(ValueError, match=r"verb='craete' is not an API verb \(known: get, list"):
        sim.faults.fail_requests(verb="craete")
    with pytest.raises(ValueError, match=r"kind='Configmap' is not served \(known: .*ConfigMap"):
        sim.faults.fail_requests(kind="Configmap")
    with pytest.raises(ValueError, match="use 'ConfigMap'"):
        sim.faults.lose_responses(kind="configmaps")
    with pytest.raises(ValueError, match=r"dst='apiservr' names no endpoint \(known: apiserver"):
        sim.faults.fail_requests(dst="apiservr")
    with pytest.raises(ValueError, match="endpoint='dashboard' names no endpoint"):
        sim.faults.outage("dashboard")
    with pytest.raises(ValueError, match="kind='Gizmo' is not served"):
        sim.faults.do(InformerLag(process="ctl", kind="Gizmo"))


async def test_a_kind_registered_by_a_crd_is_known(sim: emu.Simulation) -> None:
    sim.register_kind("Greeting", group="example.com")
    sim.faults.fail_requests(kind="Greeting", count=1)
    with pytest.raises(emu.ApiError):
        await sim.client().create({"apiVersion": "example.com/v1", "kind": "Greeting",
                                   "metadata": {"name": "g", "namespace": "default"}})
    assert [type(f).__name__ for f in sim.faults.performed()] == ["FailRequests"]


async def test_a_node_that_does_not_exist_is_an_error(sim: emu.Simulation) -> None:
    from emu.kube.cluster import install

    install(sim)
    with pytest.raises(ValueError, match=r"no Node named 'node-9' \(known: node-1, node-2"):
        sim.faults.do(FailNode(node="node-9"))


# -- planned faults: what never took effect fails the run --------------------------------------


def test_a_planned_crash_of_an_unknown_process_fails_the_run_with_a_replay_line() -> None:
    with pytest.raises(UnperformedFaults) as err:
        emu.run(idle, seed=3, faults=[Crash(at=12.0, process="operator-0")])
    text = str(err.value)
    assert "1 planned fault never took effect" in text
    assert "Crash(at=12.0, process='operator-0'): ValueError: no process named 'operator-0'" in text
    assert "optional=True" in text
    assert any(n.startswith("replay: emu.run(") and "seed=3" in n for n in err.value.__notes__)
    assert [f for f, _why in err.value.items] == [Crash(at=12.0, process="operator-0")]


def test_a_crash_of_a_process_that_is_not_running_is_not_performed() -> None:
    async def main(sim: emu.Simulation) -> None:
        proc = sim.start_process("worker", lambda p: _exit_soon(p))
        await sim.sleep(5)
        assert not proc.alive
        await sim.sleep(20)

    with pytest.raises(UnperformedFaults, match=r"process 'worker' was not running at t=10s"):
        emu.run(main, faults=[Crash(at=10.0, process="worker")])


async def _exit_soon(process: Any) -> int:
    return 0


def test_a_request_matcher_that_matched_nothing_is_reported() -> None:
    plan = [FailRequests(at=1.0, verb="delete", kind="ConfigMap", count=1),
            LoseResponses(at=1.0, verb="create", kind="Secret")]

    async def main(sim: emu.Simulation) -> None:
        await sim.sleep(2)
        await sim.client().create(cm("a"))  # neither a delete nor a Secret

    with pytest.raises(UnperformedFaults) as err:
        emu.run(main, faults=plan)
    assert [f for f, _ in err.value.items] == plan
    assert "no request matched it (verb='delete', kind='ConfigMap', dst='apiserver')" \
        in str(err.value)


def test_a_planned_fault_after_the_end_of_the_run_is_reported() -> None:
    with pytest.raises(UnperformedFaults, match=r"its time \(t=500s\) never came: the run ended "
                                                r"at t=100s"):
        emu.run(idle, faults=[Outage(at=500.0, duration=1.0)])


def test_optional_faults_may_not_happen_and_are_still_listed() -> None:
    seen: dict[str, Any] = {}

    async def main(sim: emu.Simulation) -> None:
        await sim.sleep(3)
        seen["performed"] = sim.faults.performed()
        seen["unperformed"] = sim.faults.unperformed()

    plan = [Crash(at=1.0, process="kube-apiserver", optional=True),
            Crash(at=2.0, process="kube-apiserver", optional=True),
            FailRequests(at=1.0, verb="create", optional=True)]
    emu.run(main, faults=plan)
    assert seen["performed"] == [plan[0]]                      # only what happened
    assert [f for f, _ in seen["unperformed"]] == [plan[1], plan[2]]
    assert "was not running at t=2s (crashed" in seen["unperformed"][0][1]


def test_a_kind_that_a_crd_serves_later_is_checked_at_the_end() -> None:
    async def main(sim: emu.Simulation) -> None:
        await sim.sleep(2)
        sim.register_kind("Greeting", group="example.com")
        try:
            await sim.client().create({"apiVersion": "example.com/v1", "kind": "Greeting",
                                       "metadata": {"name": "g", "namespace": "default"}})
        except emu.ApiError:
            pass

    emu.run(main, faults=[FailRequests(at=1.0, kind="Greeting", count=1)])
    with pytest.raises(UnperformedFaults, match="kind='Greting' is not served"):
        emu.run(main, faults=[FailRequests(at=1.0, kind="Greting", count=1)])


def test_after_request_checks_the_fault_it_performs() -> None:
    async def main(sim: emu.Simulation) -> None:
        await sim.sleep(1)
        await sim.client().create(cm("a"))
        await sim.sleep(1)

    with pytest.raises(UnperformedFaults, match="no process named 'operator-0'"):
        emu.run(main, faults=[AfterRequest(then=Crash(process="operator-0"), verb="create")])


def test_heal_resume_and_restore_that_undo_nothing_are_reported() -> None:
    plan = [Heal(at=1.0), Resume(at=1.0, process="kube-apiserver"), Restore(at=1.0)]
    with pytest.raises(UnperformedFaults) as err:
        emu.run(idle, faults=plan)
    reasons = [why for _f, why in err.value.items]
    assert reasons == ["there was no partition to heal at t=1s",
                       "process 'kube-apiserver' was not paused at t=1s (running)",
                       "endpoint 'apiserver' had no outage to end at t=1s"]


def test_kubernetes_faults_that_found_nothing_are_reported() -> None:
    async def main(sim: emu.Simulation) -> None:
        from emu.kube.cluster import install

        install(sim)
        await sim.sleep(5)

    plan = [DeletePod(at=1.0, name="ghost"), KillContainer(at=1.0, pod="ghost")]
    with pytest.raises(UnperformedFaults) as err:
        emu.run(main, faults=plan)
    reasons = [why for _f, why in err.value.items]
    assert reasons[0].startswith("Pod default/ghost: ")
    assert reasons[1] == "no running container in Pod default/ghost at t=1s"


def test_a_pod_deletion_during_an_outage_is_reported_not_lost_in_a_task() -> None:
    # found by the explorer (docs/findings.md E3): the delete raised ConnectionRefused in a
    # background task ("Task exception was never retrieved") and the plan still printed it
    async def main(sim: emu.Simulation) -> None:
        from emu.kube.cluster import install

        install(sim)
        await sim.apply({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "default"},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        await sim.sleep(30)
        assert sim.api.get("Pod", "p", "default")  # still there: the delete never arrived

    plan = [Outage(at=1.0, endpoint="apiserver", duration=10.0), DeletePod(at=2.0, name="p")]
    with pytest.raises(UnperformedFaults) as err:
        emu.run(main, faults=plan)
    [(fault, why)] = err.value.items
    assert fault == DeletePod(at=2.0, name="p")
    assert why.startswith("Pod default/p was not deleted at t=2s: the API server could not be "
                          "reached (")


def test_an_error_in_main_carries_the_performed_faults_only() -> None:
    async def main(sim: emu.Simulation) -> None:
        await sim.sleep(5)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError) as err:
        emu.run(main, faults=[Outage(at=1.0, duration=1.0), Crash(at=2.0, process="nobody")])
    performed, missed = err.value.__notes__[1:]
    assert performed.startswith("faults performed during the run: [Outage(at=1.0, ")
    assert "nobody" not in performed
    assert missed.startswith("faults that never took effect: Crash(at=2.0, process='nobody') "
                             "(ValueError: no process named 'nobody' (known: kube-apiserver). ")
    assert missed.endswith("emu.faults.DeletePod(name=...).)")


def test_the_readme_example_names_a_process_a_standard_setup_creates() -> None:
    async def main(sim: emu.Simulation) -> None:
        await sim.install_kuberay()  # the operator runs as process "kuberay-operator-0"
        await sim.sleep(30)

    emu.run(main, seed=7, faults=[emu.Crash(at=12.0, process="kuberay-operator-0")])
    with pytest.raises(UnperformedFaults, match="no process named 'operator-0'"):
        emu.run(main, seed=7, faults=[emu.Crash(at=12.0, process="operator-0")])


def test_plans_with_optional_faults_round_trip() -> None:
    plan = FaultPlan([Crash(at=1.0, process="a", optional=True), Crash(at=2.0, process="b")])
    assert repr(plan) == "[Crash(at=1.0, process='a', optional=True), Crash(at=2.0, process='b')]"
    assert FaultPlan.from_json(plan.to_json()) == plan
    assert '"optional"' not in FaultPlan([Crash(process="b")]).to_json()


def test_the_pytest_plugin_fails_a_test_whose_fault_never_happened(pytester: Any) -> None:
    pytester.makepyfile(test_demo="""
        import emu

        async def test_missed(sim):
            sim.faults.do(emu.FailRequests(verb="delete", kind="ConfigMap"))
            await sim.sleep(1)

        async def test_optional(sim):
            sim.faults.do(emu.FailRequests(verb="delete", kind="ConfigMap", optional=True))
            await sim.sleep(1)
    """)
    result = pytester.runpytest("-p", "no:asyncio")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*UnperformedFaults: 1 planned fault never took effect*",
                                 "*no request matched it (verb='delete', kind='ConfigMap'*"])


def test_fail_job_is_performed_only_when_such_a_job_was_submitted_after_it() -> None:
    from emu.faults import FailJob
    from emu.ray.config import SubmissionRecord

    def main_submitting(entrypoint: str) -> Any:
        async def main(sim: emu.Simulation) -> None:
            await sim.sleep(2)
            # what a dashboard records when it accepts a job
            sim.ray_config.records.submissions.append(
                SubmissionRecord(sim.now, "head", "rayjob-1", entrypoint, 200))

        return main

    emu.run(main_submitting("python train.py"), faults=[FailJob(at=1.0,
                                                               entrypoint="python train.py")])
    with pytest.raises(UnperformedFaults, match=r"no job with entrypoint 'python trian.py' was "
                                                r"submitted after t=1s \(entrypoints submitted: "
                                                r"python train.py\)"):
        emu.run(main_submitting("python train.py"),
                faults=[FailJob(at=1.0, entrypoint="python trian.py")])


async def test_a_client_identity_may_be_named_before_its_first_call(sim: emu.Simulation) -> None:
    sim.faults.fail_requests(caller="my-test", verb="create", count=1)
    sim.faults.partition("other-client", "apiserver", duration=5)
    with pytest.raises(emu.ApiError):
        await sim.client("my-test").create(cm("a"))
    with pytest.raises(emu.Timeout):
        await sim.client("other-client").get("ConfigMap", "a", "default")
    assert [type(f).__name__ for f in sim.faults.performed()] == ["FailRequests", "Partition"]


def test_a_partition_naming_nobody_is_reported() -> None:
    with pytest.raises(UnperformedFaults, match=r"b='apiserevr' names no process, host, endpoint"):
        emu.run(idle, faults=[Partition(at=1.0, a="kube-apiserver", b="apiserevr")])


async def test_a_matcher_for_every_endpoint_may_name_an_rpc_verb(sim: emu.Simulation) -> None:
    sim.faults.do(FailRequests(dst=None, verb="HealthCheck", optional=True))  # a GCS RPC
    with pytest.raises(ValueError, match="is not an API verb"):
        sim.faults.do(FailRequests(dst="apiserver", verb="HealthCheck"))


# -- process names under cluster=True -------------------------------------------------------------


def test_the_readme_crash_example_crashes_the_operator_pod_with_cluster_true():
    crashed: list[str] = []

    async def main(sim: emu.Simulation) -> None:
        await sim.install_kuberay()
        await sim.sleep(20)
        crashed.extend(ev.process for ev in sim.trace.select("process_crashed"))

    emu.run(main, seed=7, cluster=True,
            faults=[emu.Crash(at=12.0, process="kuberay-operator-0")])
    assert len(crashed) == 1
    ns, pod, container = crashed[0].split("/")
    assert (ns, container) == ("default", "kuberay-operator")
    assert pod.startswith("kuberay-operator-")


def test_replica_n_names_the_n_th_pod_oldest_first_and_past_the_last_is_unknown():
    async def main(sim: emu.Simulation) -> None:
        await sim.install_kuberay(replicas=2, leader_election=True)
        await sim.sleep(10)
        pods = sorted((p["metadata"]["creationTimestamp"], p["metadata"]["name"])
                      for p in sim.api.list("Pod", "default")["items"]
                      if p["metadata"]["name"].startswith("kuberay-operator-"))
        assert len(pods) == 2
        sim.faults.crash("kuberay-operator-1")
        crashed = [ev.process for ev in sim.trace.select("process_crashed")]
        assert crashed == [f"default/{pods[1][1]}/kuberay-operator"]
        with pytest.raises(ValueError, match="no process named 'kuberay-operator-2'") as err:
            sim.faults.crash("kuberay-operator-2")
        assert "emu.CrashLeader()" in str(err.value)
        assert "emu.faults.KillContainer(pod=" in str(err.value)

    emu.run(main, seed=3, cluster=True)


def test_an_unknown_process_name_suggests_crash_leader_and_kill_container():
    async def main(sim: emu.Simulation) -> None:
        with pytest.raises(ValueError) as err:
            sim.faults.crash("operator-0")
        text = str(err.value)
        assert "NAMESPACE/POD/CONTAINER" in text
        assert "emu.CrashLeader()" in text and "emu.faults.DeletePod(name=...)" in text

    emu.run(main, seed=1)
