"""RBAC as kube-apiserver's authorizer decides it: rule matching, bindings and subjects, the 403
messages word for word, who each caller is, and that enforcement is opt-in per world."""

from __future__ import annotations

import pytest

from emu.apiserver.errors import Forbidden, Invalid
from emu.apiserver.rbac import (
    Attributes,
    UserInfo,
    applies_to,
    forbidden_message,
    rule_allows,
)

SA = UserInfo.service_account("default", "kuberay-operator")
RBAC_V1 = "rbac.authorization.k8s.io/v1"


def attrs(verb="get", resource="pods", *, group="", sub="", name="", ns="default", user=SA):
    return Attributes(user, verb, ns, group, resource, sub, name)


# -- rule matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rule,request_attrs,allowed", [
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, attrs(), True),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}, attrs(), False),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}, attrs("delete"), True),
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
     attrs("create", "leases", group="coordination.k8s.io"), True),
    ({"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"]}, attrs(), False),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["update"]},
     attrs("update", sub="status"), False),
    ({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
     attrs("update", sub="status"), True),
    ({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
     attrs("update"), False),
    ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["update"]},
     attrs("update", sub="status"), True),
    ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["update"]},
     attrs("update", sub="scale"), False),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
     attrs(name="a"), True),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
     attrs(name="b"), False),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["create"], "resourceNames": ["a"]},
     attrs("create"), False),  # a create has no name: resourceNames never allow it
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["deletecollection"]},
     attrs("deletecollection"), True),
])
def test_rule_allows_as_kubes_evaluation_helpers(rule, request_attrs, allowed):
    assert rule_allows(request_attrs, rule) is allowed


@pytest.mark.parametrize("urls,path,allowed", [
    (["/healthz"], "/healthz", True),
    (["/healthz"], "/healthz/ready", False),
    (["/healthz/*"], "/healthz/ready", True),
    (["*"], "/version", True),
    (["/apis"], "/api", False),
])
def test_non_resource_urls(urls, path, allowed):
    a = Attributes(SA, "get", resource_request=False, path=path)
    assert rule_allows(a, {"nonResourceURLs": urls, "verbs": ["get"]}) is allowed


def test_subjects_users_groups_and_service_accounts():
    alice = UserInfo("alice", ("devs", "system:authenticated"))
    assert applies_to(alice, {"kind": "User", "name": "alice"}, "")
    assert not applies_to(alice, {"kind": "User", "name": "bob"}, "")
    assert applies_to(alice, {"kind": "Group", "name": "devs"}, "")
    assert applies_to(SA, {"kind": "ServiceAccount", "name": "kuberay-operator",
                           "namespace": "default"}, "")
    # a subject without a namespace takes the RoleBinding's, and none in a ClusterRoleBinding
    assert applies_to(SA, {"kind": "ServiceAccount", "name": "kuberay-operator"}, "default")
    assert not applies_to(SA, {"kind": "ServiceAccount", "name": "kuberay-operator"}, "")
    assert not applies_to(SA, {"kind": "ServiceAccount", "name": "kuberay-operator"}, "other")
    for group in ("system:serviceaccounts", "system:serviceaccounts:default",
                  "system:authenticated"):
        assert applies_to(SA, {"kind": "Group", "name": group}, "")
    assert not applies_to(SA, {"kind": "Group", "name": "system:serviceaccounts:other"}, "")


# -- messages --------------------------------------------------------------------------------------


def test_forbidden_messages_are_kubes():
    user = 'User "system:serviceaccount:default:kuberay-operator"'
    assert forbidden_message(attrs("create")) == (
        f'pods is forbidden: {user} cannot create resource "pods" in API group "" in the '
        'namespace "default"')
    assert forbidden_message(attrs("get", name="x")) == (
        f'pods "x" is forbidden: {user} cannot get resource "pods" in API group "" in the '
        'namespace "default"')
    assert forbidden_message(attrs("update", sub="status", name="x")) == (
        f'pods "x" is forbidden: {user} cannot update resource "pods/status" in API group "" in '
        'the namespace "default"')
    assert forbidden_message(attrs("list", "nodes", ns="")) == (
        f'nodes is forbidden: {user} cannot list resource "nodes" in API group "" at the '
        'cluster scope')
    assert forbidden_message(attrs("get", "leases", group="coordination.k8s.io",
                                   name="ray-operator-leader")) == (
        f'leases.coordination.k8s.io "ray-operator-leader" is forbidden: {user} cannot get '
        'resource "leases" in API group "coordination.k8s.io" in the namespace "default"')
    a = Attributes(SA, "get", resource_request=False, path="/metrics")
    assert forbidden_message(a) == f'forbidden: {user} cannot get path "/metrics"'


# -- the authorizer in a world ---------------------------------------------------------------------


def role(name, rules, ns="default", kind="Role"):
    meta = {"name": name, "namespace": ns} if kind == "Role" else {"name": name}
    return {"apiVersion": RBAC_V1, "kind": kind, "metadata": meta, "rules": rules}


def binding(name, role_kind, role_name, subjects, ns="default", kind="RoleBinding"):
    meta = {"name": name, "namespace": ns} if kind == "RoleBinding" else {"name": name}
    return {"apiVersion": RBAC_V1, "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role_name},
            "subjects": subjects}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
READ_PODS = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


@pytest.mark.emu(rbac=True)
async def test_a_service_account_may_do_what_its_bindings_allow(sim):
    await sim.apply([role("pod-reader", READ_PODS),
                     binding("read", "Role", "pod-reader",
                             [{"kind": "ServiceAccount", "name": "reader"}]), POD])
    c = sim.client("reader", as_service_account="default/reader")
    assert (await c.get("Pod", "p", "default"))["metadata"]["name"] == "p"
    assert [p["metadata"]["name"] for p in await c.list("Pod", "default")] == ["p"]
    with pytest.raises(Forbidden) as err:
        await c.delete("Pod", "p", "default")
    assert err.value.code == 403 and err.value.message == (
        'pods "p" is forbidden: User "system:serviceaccount:default:reader" cannot delete '
        'resource "pods" in API group "" in the namespace "default"')
    assert err.value.details == {"group": "", "kind": "pods", "name": "p"}
    with pytest.raises(Forbidden, match='cannot list resource "pods" in API group "" at the '
                                        'cluster scope'):
        await c.list("Pod")  # all namespaces: a Role in one namespace is not enough
    with pytest.raises(Forbidden, match='cannot update resource "pods/status"'):
        await c.update_status(await c.get("Pod", "p", "default"))
    assert await sim.get("Pod", "p") is not None  # refused requests changed nothing
    [first, *_] = [e for e in sim.trace if e.event == "forbidden"]
    assert (first.process, first.fields) == ("kube-apiserver", {
        "caller": "reader", "user": "system:serviceaccount:default:reader", "verb": "delete",
        "resource": "pods", "group": "", "ns": "default", "name": "p"})
    assert len(sim.rbac.denials) == 3


@pytest.mark.emu(rbac=True)
async def test_a_refused_watch_is_403_before_any_event(sim):
    c = sim.client("nobody", user="jane")
    with pytest.raises(Forbidden, match='User "jane" cannot watch resource "pods"'):
        stream = await c.watch("Pod", "default")
        await stream.__anext__()


@pytest.mark.emu(rbac=True)
async def test_cluster_roles_bound_cluster_wide_or_in_one_namespace(sim):
    api = sim.client()
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await sim.apply([role("pod-reader", READ_PODS, kind="ClusterRole"),
                     binding("in-team", "ClusterRole", "pod-reader",
                             [{"kind": "User", "name": "ann"}], ns="team"),
                     binding("everywhere", "ClusterRole", "pod-reader",
                             [{"kind": "Group", "name": "auditors"}],
                             kind="ClusterRoleBinding")])
    ann = sim.client("ann", user="ann")
    await ann.list("Pod", "team")
    with pytest.raises(Forbidden):
        await ann.list("Pod", "default")
    auditor = sim.client("bob", user="bob", groups=["auditors"])
    await auditor.list("Pod")
    await auditor.list("Pod", "default")
    # the decision follows the policy as it changes
    await api.delete("ClusterRoleBinding", "everywhere")
    with pytest.raises(Forbidden):
        await auditor.list("Pod", "default")


@pytest.mark.emu(rbac=True)
async def test_a_remembered_decision_is_dropped_when_any_rbac_object_changes(sim):
    await sim.apply(POD)
    ann = sim.client("ann", user="ann")
    for _ in range(2):  # the second refusal is the remembered decision
        with pytest.raises(Forbidden):
            await ann.get("Pod", "p", "default")
    await sim.apply([role("reader", [{"apiGroups": [""], "resources": ["pods"],
                                      "verbs": ["list"]}]),
                     binding("read", "Role", "reader", [{"kind": "User", "name": "ann"}])])
    with pytest.raises(Forbidden):
        await ann.get("Pod", "p", "default")  # the role allows list, not get
    await sim.apply(role("reader", READ_PODS))  # a Role's rules change: decided again
    assert (await ann.get("Pod", "p", "default"))["metadata"]["name"] == "p"
    await sim.client().delete("Role", "reader", "default")
    with pytest.raises(Forbidden, match='RBAC: role.rbac.authorization.k8s.io "reader" not'):
        await ann.get("Pod", "p", "default")


@pytest.mark.emu(rbac=True)
async def test_resource_names_allow_a_list_or_watch_of_that_name_only(sim):
    await sim.apply([role("one-pod", [{"apiGroups": [""], "resources": ["pods"],
                                        "verbs": ["list", "watch"], "resourceNames": ["p"]}]),
                     binding("one", "Role", "one-pod", [{"kind": "User", "name": "ann"}]), POD])
    ann = sim.client("ann", user="ann")
    assert len(await ann.list("Pod", "default", field_selector="metadata.name=p")) == 1
    with pytest.raises(Forbidden, match='pods is forbidden: User "ann" cannot list'):
        await ann.list("Pod", "default")
    with pytest.raises(Forbidden, match='pods "q" is forbidden: User "ann" cannot watch'):
        stream = await ann.watch("Pod", "default", field_selector="metadata.name=q")
        await stream.__anext__()


@pytest.mark.emu(rbac=True)
async def test_a_binding_to_a_missing_role_says_so(sim):
    await sim.apply(binding("dangling", "Role", "nope", [{"kind": "User", "name": "eve"}]))
    with pytest.raises(Forbidden) as err:
        await sim.client("eve", user="eve").get("Pod", "p", "default")
    assert err.value.message.endswith(
        'in the namespace "default": RBAC: role.rbac.authorization.k8s.io "nope" not found')


@pytest.mark.emu(rbac=True)
async def test_processes_act_as_their_pods_service_account(sim):
    await sim.apply([role("pod-reader", READ_PODS),
                     binding("read", "Role", "pod-reader",
                             [{"kind": "ServiceAccount", "name": "robot"}]),
                     {**POD, "spec": {**POD["spec"], "serviceAccountName": "robot"}}])
    assert sim.rbac.identify("default/p/c") == UserInfo(
        "system:serviceaccount:default:robot",
        ("system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"))
    assert sim.rbac.identify("default/p/c/raylet").name == "system:serviceaccount:default:robot"
    assert sim.rbac.identify("default/other/c").name == "system:serviceaccount:default:default"
    assert sim.rbac.identify("kubelet-node-1").name == "system:node:node-1"
    assert sim.rbac.identify("kube-scheduler").name == "system:kube-scheduler"
    assert sim.rbac.identify("job-controller").name == \
        "system:serviceaccount:kube-system:job-controller"
    assert "system:masters" in sim.rbac.identify("my-test").groups  # a test's own client
    robot = sim.rbac.identify("default/p/c")
    assert sim.rbac.can(robot, "list", "pods", namespace="default")
    assert not sim.rbac.can(robot, "create", "pods", namespace="default")


@pytest.mark.emu(rbac=True)
async def test_test_clients_are_cluster_admin_unless_they_say_otherwise(sim):
    await sim.client("admin").create(POD)
    assert await sim.get("ClusterRoleBinding", "cluster-admin", None) is not None
    with pytest.raises(Forbidden):
        await sim.client("x", user="someone").get("Pod", "p", "default")
    with pytest.raises(ValueError, match="already acts as"):
        sim.client("x", user="someone-else")
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        sim.client("y", as_service_account="robot")


async def test_rbac_is_off_unless_the_world_turns_it_on(sim):
    assert not sim.rbac.enabled and sim.api.authorizer is None
    await sim.client("x", user="nobody").create(POD)  # no RBAC: anyone may do anything
    sim.rbac.enable()
    with pytest.raises(Forbidden):
        await sim.client("x").delete("Pod", "p", "default")
    sim.rbac.disable()
    await sim.client("x").delete("Pod", "p", "default")


async def test_rbac_objects_are_validated(sim):
    c = sim.client()
    with pytest.raises(Invalid, match="roleRef.kind"):
        await c.create(binding("b", "Role", "r", [], kind="ClusterRoleBinding"))
    with pytest.raises(Invalid, match="verbs"):
        await c.create(role("r", [{"apiGroups": [""], "resources": ["pods"]}]))
    await c.create(binding("b", "Role", "r", [{"kind": "User", "name": "u"}]))
    obj = await c.get("RoleBinding", "b", "default")
    obj["roleRef"]["name"] = "other"
    with pytest.raises(Invalid, match="cannot change roleRef"):
        await c.update(obj)
