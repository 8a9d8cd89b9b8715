"""The operator process (main.go) and the Helm chart: flags and their defaults, the config file
that overrides flags except ``--feature-gates``, the lock namespace rule, the chart's quirks, and
`install_kuberay` with leader election and failover."""

from __future__ import annotations

import pytest
import yaml
from test_raycluster_support import NS, raycluster, worker_pods

from emu.kuberay import helm
from emu.kuberay.operator import (
    CACHE_SELECTORS,
    Configuration,
    FlagError,
    OperatorFlags,
    install_kuberay,
    load_configuration,
    operator_config,
    parse_flags,
)
from emu.kuberay.utils.features import FeatureGates
from emu.runtime import start_operator


def _no_file(path: str) -> str:
    raise FileNotFoundError(path)


def test_flags_default_to_kuberay_defaults():
    flags = parse_flags([])
    assert flags == OperatorFlags()
    assert (flags.enable_leader_election, flags.reconcile_concurrency, flags.qps, flags.burst,
            flags.health_probe_bind_address, flags.metrics_addr) == (True, 1, 100.0, 200,
                                                                      ":8082", ":8080")


def test_flags_parse_go_style_forms():
    flags = parse_flags(["--enable-leader-election=false", "-reconcile-concurrency", "4",
                         "--watch-namespace", "a,b", "--feature-gates=RayCronJob=true"])
    assert flags.enable_leader_election is False
    assert flags.reconcile_concurrency == 4
    assert flags.watch_namespace == "a,b"
    assert flags.feature_gates == "RayCronJob=true"


@pytest.mark.parametrize("args,message", [
    (["--no-such-flag"], "flag provided but not defined: -no-such-flag"),
    (["--reconcile-concurrency=x"], 'invalid value "x" for flag -reconcile-concurrency: parse '
                                    "error"),
    (["--enable-leader-election=maybe"], 'invalid boolean value "maybe" for '
                                         "-enable-leader-election: parse error"),
    (["--watch-namespace"], "flag needs an argument: -watch-namespace"),
])
def test_bad_flags_are_refused_with_gos_message(args, message):
    with pytest.raises(FlagError) as err:
        parse_flags(args)
    assert str(err.value) == message


def test_config_file_overrides_flags_but_not_feature_gates():
    text = yaml.safe_dump({"apiVersion": "config.ray.io/v1alpha1", "kind": "Configuration",
                           "reconcileConcurrency": 3, "watchNamespace": "team-a"})
    flags = parse_flags(["--config", "/etc/kuberay/config.yaml", "--reconcile-concurrency=9",
                         "--enable-leader-election=false",
                         "--feature-gates=GCSFaultToleranceEmbeddedStorage=true"])
    config, gates = load_configuration(flags, {}, lambda path: text)
    assert config.reconcile_concurrency == 3
    assert config.watch_namespace == "team-a"
    assert config.enable_leader_election is True  # absent in the file: defaulted, flag ignored
    assert gates.enabled("GCSFaultToleranceEmbeddedStorage") is True


def test_config_file_of_another_kind_is_refused():
    flags = parse_flags(["--config", "/c.yaml"])
    with pytest.raises(FlagError) as err:
        load_configuration(flags, {}, lambda path: "apiVersion: v1\nkind: ConfigMap\n")
    assert str(err.value) == ('failed to decode config file: no kind "ConfigMap" is registered '
                              'for version "v1"')


def test_unknown_feature_gate_is_refused():
    with pytest.raises(FlagError) as err:
        load_configuration(parse_flags(["--feature-gates=Nope=true"]), {}, _no_file)
    assert str(err.value) == ("Unable to set flag gates for known features: unrecognized "
                              "feature gate: Nope")


def test_flags_path_copies_delete_rayjob_env_into_the_configuration():
    config, _ = load_configuration(parse_flags([]),
                                   {"DELETE_RAYJOB_CR_AFTER_JOB_FINISHES": "true"}, _no_file)
    assert config.delete_ray_job_after_job_finishes is True


def test_operator_config_uses_kuberays_lock_watch_namespaces_and_cache_selectors():
    op = operator_config(Configuration(watch_namespace="a,b", reconcile_concurrency=5),
                         FeatureGates(), pod_namespace="ray-system")
    assert (op.leader_election_id, op.leader_election_namespace) == ("ray-operator-leader",
                                                                     "ray-system")
    assert op.watch_namespaces == ("a", "b")
    assert op.reconcile_concurrency == 5
    assert op.cache_selectors == dict(CACHE_SELECTORS)
    assert CACHE_SELECTORS["Pod"] == "ray.io/node-type in (head,worker,redis-cleanup)"


async def test_leader_election_without_a_namespace_exits_1_as_outside_a_pod(sim):
    """No --leader-election-namespace and no service-account file: the manager fails to build."""
    proc = start_operator(sim, "op", operator_config(Configuration(), FeatureGates()))
    assert await proc.wait_exited() == 1
    [event] = [e for e in sim.trace if e.event == "operator_exit"]
    assert event.fields["error"] == ("ValueError: unable to find leader election namespace: not "
                                     "running in-cluster, please specify "
                                     "LeaderElectionNamespace")


async def test_watch_namespace_scopes_every_informer(sim):
    start_operator(sim, "op", operator_config(
        Configuration(enable_leader_election=False, watch_namespace="team-a"), FeatureGates()))
    await sim.client().create({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "team-a"}})
    theirs = raycluster("theirs")
    ours = raycluster("ours")
    ours["metadata"]["namespace"] = "team-a"
    await sim.apply(theirs)
    await sim.apply(ours)
    await sim.sleep(5)
    assert await worker_pods(sim, "theirs") == []
    assert len(list(await sim.client().list("Pod", "team-a"))) == 4


# -- Helm chart --------------------------------------------------------------------------------


def _deployment(manifests):
    return next(m for m in manifests if m["kind"] == "Deployment")


def test_helm_replicas_zero_becomes_one():
    assert _deployment(helm.render({"replicas": 0}))["spec"]["replicas"] == 1
    assert _deployment(helm.render({"replicas": 3}))["spec"]["replicas"] == 3


def test_helm_default_args_and_recreate_strategy():
    dep = _deployment(helm.render())
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "quay.io/kuberay/operator:nightly"
    assert container["args"] == [
        "--log-stdout-encoder", "json", "--log-file-encoder", "json",
        "--enable-leader-election=true", "--enable-metrics=true", "--reconcile-concurrency=1",
        "--qps=100", "--burst=200",
        "--feature-gates=RayClusterStatusConditions=true,RayJobDeletionPolicy=true,"
        "RayMultiHostIndexing=true,RayServiceIncrementalUpgrade=true,RayCronJob=false,"
        "RayClusterMTLS=false,RayClusterNetworkPolicy=false,RayClusterHistoryServer=false"]
    assert not any(a.startswith("--leader-election-namespace") for a in container["args"])


def test_helm_single_namespace_install_watches_the_release_namespace():
    args = _deployment(helm.render({"singleNamespaceInstall": True},
                                   namespace="ray"))["spec"]["template"]["spec"][
        "containers"][0]["args"]
    assert args[:2] == ["--watch-namespace", "ray"]


def test_helm_configuration_enabled_mounts_a_config_map_and_passes_config():
    manifests = helm.render({"configuration": {"enabled": True}, "reconcileConcurrency": 4,
                             "watchNamespace": ["a", "b"]})
    cm = next(m for m in manifests if m["kind"] == "ConfigMap")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert cfg["reconcileConcurrency"] == 4
    assert cfg["watchNamespace"] == "a,b"
    assert cfg["enableLeaderElection"] is True
    container = _deployment(manifests)["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["--config", "/etc/kuberay/config.yaml"]
    assert container["args"][2].startswith("--feature-gates=")
    assert container["volumeMounts"][0]["mountPath"] == "/etc/kuberay"


def test_helm_refuses_a_bad_reconcile_concurrency():
    with pytest.raises(helm.HelmError) as err:
        helm.render({"reconcileConcurrency": 0})
    assert str(err.value) == 'values.reconcileConcurrency must be a positive integer, got "0"'


# -- install_kuberay ---------------------------------------------------------------------------


async def test_install_kuberay_elects_one_leader_that_reconciles(sim):
    kuberay = await install_kuberay(sim, replicas=2, direct=True)
    leader = await kuberay.wait_for_leader()
    assert len(kuberay.replicas()) == 2
    lease = kuberay.lease()
    assert lease["spec"]["holderIdentity"].startswith(leader.host + "_")
    await sim.apply(raycluster())
    await sim.sleep(5)
    assert len(await worker_pods(sim)) == 3
    assert leader.name.startswith("kuberay-operator-")  # the Deployment's name, numbered
    assert kuberay.reconciler() is not None


async def test_install_kuberay_failover_after_leader_crash_waits_out_the_lease(sim):
    kuberay = await install_kuberay(sim, replicas=2, direct=True)
    leader = await kuberay.wait_for_leader()
    sim.faults.crash(leader)
    crashed_at = sim.now
    successor = await kuberay.wait_for_leader(timeout=60)
    assert successor is not leader
    assert sim.now - crashed_at >= 13  # the standby waits for the Lease to expire
    await sim.apply(raycluster())
    await sim.sleep(5)
    assert len(await worker_pods(sim)) == 3


async def test_install_kuberay_registers_the_operator_image_program(sim):
    await install_kuberay(sim, direct=True)
    from emu.kernel.programs import idle_program

    assert sim.programs.lookup("quay.io/kuberay/operator:v1.4.0") is not idle_program


async def test_install_kuberay_with_feature_gates_and_configuration(sim):
    kuberay = await install_kuberay(sim, direct=True, leader_election=False,
                                    configuration={"defaultPodLabels": {"team": "ml"}},
                                    feature_gates={"GCSFaultToleranceEmbeddedStorage": True})
    container = _deployment(kuberay.manifests)["spec"]["template"]["spec"]["containers"][0]
    assert "GCSFaultToleranceEmbeddedStorage=true" in container["args"][-1]
    await sim.apply(raycluster())
    await sim.sleep(5)
    assert all(p["metadata"]["labels"]["team"] == "ml" for p in await worker_pods(sim))
    assert kuberay.leader() is kuberay.replicas()[0]
    assert kuberay.namespace == NS
