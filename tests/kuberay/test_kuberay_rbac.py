"""KubeRay under RBAC: the chart's rules decide what the operator may do, as on a real cluster.

`install_kuberay` turns RBAC on in the world and installs the chart's RBAC (the real
``role.consistentRules`` ClusterRole and the leader-election Role). A chart whose RBAC lacks the
Lease rule never elects a leader (each attempt is logged with the 403); one whose Jobs rule lacks
``create`` leaves a RayJob without its submitter Job until its deadline fails it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_raycluster_support import raycluster, worker_pods

from emu.apiserver.rbac import UserInfo
from emu.kube.config import KubeConfig
from emu.kuberay import helm
from emu.kuberay.operator import install_kuberay

LEASE_403 = ('leases.coordination.k8s.io "{name}" is forbidden: User '
             '"system:serviceaccount:default:kuberay-operator" cannot get resource "leases" in '
             'API group "coordination.k8s.io" in the namespace "default"')


def chart_rbac(drop: Any) -> list[dict[str, Any]]:
    """The chart's RBAC manifests with every rule for which ``drop(rule)`` is true removed, or
    changed in place by ``drop`` returning a new rule."""
    values = helm.merge_values(helm.DEFAULT_VALUES, {})
    out = []
    for m in helm.rbac_manifests(values, name="kuberay-operator", sa_name="kuberay-operator",
                                 namespace="default", labels={}):
        m = copy.deepcopy(m)
        if "rules" in m:
            rules = []
            for rule in m["rules"]:
                got = drop(rule)
                if got is True:
                    continue
                rules.append(got if isinstance(got, dict) else rule)
            m["rules"] = rules
        out.append(m)
    return out


def test_the_chart_renders_kuberays_cluster_role_and_leader_election_role():
    manifests = helm.render({})
    kinds = [(m["kind"], m["metadata"]["name"]) for m in manifests]
    for expected in [("ServiceAccount", "kuberay-operator"),
                     ("Role", "kuberay-operator-leader-election"),
                     ("RoleBinding", "kuberay-operator-leader-election"),
                     ("ClusterRole", "kuberay-operator"),
                     ("ClusterRoleBinding", "kuberay-operator")]:
        assert expected in kinds
    cr = next(m for m in manifests if m["kind"] == "ClusterRole")
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["create", "get", "list", "update"]} in cr["rules"]
    assert {"apiGroups": ["batch"], "resources": ["jobs"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]} in cr["rules"]
    assert cr["rules"][:-1] == helm.OPERATOR_RULES and cr["rules"][-1] == helm.EMULATED_EVENT_RULE
    assert helm.render({}, emulated_event_rule=False)[3]["rules"] == helm.OPERATOR_RULES
    crb = next(m for m in manifests if m["kind"] == "ClusterRoleBinding")
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "kuberay-operator",
                                "namespace": "default"}]
    le = next(m for m in manifests if m["kind"] == "Role")
    assert le["rules"] == helm.LEADER_ELECTION_RULES


def test_single_namespace_install_renders_a_role_per_watched_namespace():
    manifests = helm.render({"singleNamespaceInstall": True, "watchNamespace": ["a", "b"]})
    roles = [(m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"])
             for m in manifests if m["kind"] in ("Role", "RoleBinding", "ClusterRole")]
    assert roles == [("Role", "default", "kuberay-operator-leader-election"),
                     ("RoleBinding", "default", "kuberay-operator-leader-election"),
                     ("Role", "a", "kuberay-operator"), ("RoleBinding", "a", "kuberay-operator"),
                     ("Role", "b", "kuberay-operator"), ("RoleBinding", "b", "kuberay-operator")]
    assert not [m for m in helm.render({"rbacEnable": False})
                if m["kind"] in ("Role", "ClusterRole")]
    volcano = helm.render({"batchScheduler": {"name": "volcano"}})
    cr = next(m for m in volcano if m["kind"] == "ClusterRole")
    assert helm.VOLCANO_RULES[0] in cr["rules"]


async def test_with_the_charts_rbac_the_operator_leads_and_reconciles(sim):
    kuberay = await install_kuberay(sim, replicas=2, direct=True)
    assert sim.rbac.enabled
    await kuberay.wait_for_leader()
    await sim.apply(raycluster())
    await sim.sleep(5)
    assert len(await worker_pods(sim)) == 3
    assert sim.rbac.denials == []
    leader = kuberay.leader()
    assert sim.rbac.identify(leader.name).name == "system:serviceaccount:default:kuberay-operator"


async def test_a_single_namespace_install_works_from_roles_alone(sim):
    """``singleNamespaceInstall``: no ClusterRole, a Role per watched namespace; the operator
    watches only its namespace and needs nothing cluster-wide."""
    kuberay = await install_kuberay(sim, direct=True, singleNamespaceInstall=True)
    assert sim.api.list("ClusterRoleBinding")["items"][0]["metadata"]["name"] == "cluster-admin"
    await kuberay.wait_for_leader()
    await sim.apply(raycluster())
    await sim.sleep(5)
    assert len(await worker_pods(sim)) == 3
    assert sim.rbac.denials == []


async def test_an_autoscaling_cluster_gets_its_autoscalers_role_and_binding(sim):
    """``reconcileAutoscalerRole`` / ``RoleBinding``: the head's ServiceAccount may then do what
    Ray's autoscaler does (patch Pods and the RayCluster), and nothing else."""
    kuberay = await install_kuberay(sim, direct=True)
    await kuberay.wait_for_leader()
    rc = raycluster()
    rc["spec"]["enableInTreeAutoscaling"] = True
    await sim.apply(rc)
    await sim.sleep(5)
    name = rc["metadata"]["name"]
    role = await sim.get("Role", name)
    binding = await sim.get("RoleBinding", name)
    assert role is not None and binding is not None
    assert role["metadata"]["ownerReferences"][0]["name"] == name
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                    "namespace": "default"}]
    head_sa = UserInfo.service_account("default", name)
    assert sim.rbac.can(head_sa, "patch", "pods", namespace="default")
    assert sim.rbac.can(head_sa, "patch", "rayclusters", group="ray.io", namespace="default")
    assert not sim.rbac.can(head_sa, "delete", "pods", namespace="default")
    assert not sim.rbac.can(head_sa, "patch", "pods", namespace="other")
    assert sim.rbac.denials == []


@pytest.mark.emu(rbac=False)
async def test_a_world_built_with_rbac_off_stays_off(sim):
    await install_kuberay(sim, direct=True)
    assert not sim.rbac.enabled and sim.api.authorizer is None


async def test_a_chart_without_the_lease_rule_never_elects_a_leader(sim):
    await sim.apply(chart_rbac(lambda rule: "leases" in rule["resources"]))
    kuberay = await install_kuberay(sim, replicas=2, direct=True, rbacEnable=False)
    await sim.sleep(60)
    assert kuberay.leader() is None
    assert all(not m.is_leader for m in kuberay.managers() if m is not None)
    lease_name = "ray-operator-leader"
    failures = [e for e in sim.trace if e.event == "lease_get_failed"]
    assert len(failures) >= 2 * 10  # every (jittered) retry period, by both replicas
    assert {e.fields["error"] for e in failures} == {LEASE_403.format(name=lease_name)}
    await sim.apply(raycluster())
    await sim.sleep(5)
    assert await worker_pods(sim) == []  # nobody leads, nobody reconciles


@pytest.mark.emu(cluster=KubeConfig(nodes=2, node_cpu="8", node_memory="32Gi",
                                    image_pull_delay=0.5, container_start_delay=0.25))
async def test_a_chart_without_the_jobs_create_rule_fails_the_rayjob_at_its_deadline(sim):
    def no_job_create(rule: dict[str, Any]) -> Any:
        if "jobs" in rule["resources"]:
            return {**rule, "verbs": [v for v in rule["verbs"] if v != "create"]}
        return None

    await sim.apply(chart_rbac(no_job_create))
    kuberay = await install_kuberay(sim, rbacEnable=False)
    await kuberay.wait_for_leader(timeout=120)
    job = rayjob_manifest()
    await sim.apply(job)
    rj = await sim.wait_for("RayJob", "rbac-job", lambda o: (o.get("status") or {}).get(
        "jobDeploymentStatus") == "Failed", timeout=600)
    assert rj["status"]["reason"] == "DeadlineExceeded"
    assert sim.api.list("Job", "default")["items"] == []
    denied = [m for _c, m in sim.rbac.denials if "jobs" in m]
    assert denied and denied[0] == (
        'jobs.batch is forbidden: User "system:serviceaccount:default:kuberay-operator" '
        'cannot create resource "jobs" in API group "batch" in the namespace "default"')
    errors = [e for e in sim.trace if e.event == "reconcile_finished"
              and e.fields.get("controller") == "rayjob" and e.fields.get("error")]
    assert any("jobs.batch is forbidden" in str(e.fields["error"]) for e in errors)


def rayjob_manifest() -> dict[str, Any]:
    from emu.scenarios._common import rayjob

    job = rayjob("rbac-job", seconds=5)
    job["spec"]["activeDeadlineSeconds"] = 120
    return job


async def test_a_chart_without_any_jobs_rule_stops_the_operator_at_cache_sync(sim):
    """Without list/watch on Jobs the RayJob controller's Job informer never syncs: after the
    cache sync timeout the manager fails and the operator exits 1 (a crash loop in a Pod)."""
    await sim.apply(chart_rbac(lambda rule: "jobs" in rule["resources"]))
    kuberay = await install_kuberay(sim, direct=True, rbacEnable=False)
    await sim.sleep(150)
    assert kuberay.replicas() == []
    [exit_event] = [e for e in sim.trace if e.event == "operator_exit"]
    assert exit_event.fields["code"] == 1
    assert "timed out waiting for cache to be synced" in exit_event.fields["error"]
    listed = ('jobs.batch is forbidden: User "system:serviceaccount:default:kuberay-operator" '
              'cannot list resource "jobs" in API group "batch" at the cluster scope')
    assert listed in [m for _c, m in sim.rbac.denials]


def _kuberay_scenarios() -> list[str]:
    from emu.scenarios import all_scenarios

    return [s.name for s in all_scenarios() if s.name != "apiserver-churn"]  # no KubeRay there


@pytest.mark.parametrize("name", _kuberay_scenarios())
def test_every_kuberay_scenario_meets_its_claims_under_the_charts_rbac(name):
    from emu.scenarios import run_scenario

    result = run_scenario(name, seed=1)
    assert result.sim.rbac.enabled
    assert result.sim.rbac.denials == []  # the chart allows everything the operator does
    assert result.ok, [e for e in result.expectations if not e.ok]
