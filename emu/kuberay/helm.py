"""The kuberay-operator Helm chart, rendered to manifests (dicts) from its values.

Port of ``helm-chart/kuberay-operator`` (``values.yaml``, ``templates/deployment.yaml``,
``templates/configmap.yaml``, ``templates/serviceaccount.yaml``, ``templates/leader_election_role.yaml``,
``role.yaml``, ``rolebinding.yaml``, ``multiple_namespaces_role(binding).yaml``, ``_helpers.tpl``),
limited to what decides how the operator runs (SPEC §1.6) and what it may do (its RBAC rules,
which the API server enforces when the world has RBAC on, `emu.apiserver.rbac`):

- ``replicas: {{ .Values.replicas | default 1 }}`` — 0 is falsy, so it becomes 1 (**quirk**);
- ``strategy: Recreate``;
- the flag path (``configuration.enabled: false``): ``--watch-namespace``, log encoders,
  ``--enable-leader-election=``, ``--enable-metrics=``, ``--reconcile-concurrency=``, ``--qps=``,
  ``--burst=``, each only when its key exists; never ``--leader-election-namespace``;
- the config path (``configuration.enabled: true``): a ConfigMap ``<fullname>-config`` holding
  ``config.yaml``, mounted at ``/etc/kuberay``, and ``--config /etc/kuberay/config.yaml``;
- in both paths ``--feature-gates=Name=bool,...`` from the ``featureGates`` list;
- ``env`` on the container; the image ``<repository>:<tag>``; probes on ``/metrics``.

`render` takes values like ``helm install --set``: they are merged over `DEFAULT_VALUES` (maps
merge, everything else replaces).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import yaml

Obj = dict[str, Any]

#: ``values.yaml`` (the keys that reach the manifests rendered here).
DEFAULT_VALUES: Obj = {
    "nameOverride": "kuberay-operator",
    "fullnameOverride": "kuberay-operator",
    "componentOverride": "kuberay-operator",
    "replicas": 1,
    "image": {"repository": "quay.io/kuberay/operator", "tag": "nightly",
              "pullPolicy": "IfNotPresent"},
    "labels": {},
    "annotations": {},
    "serviceAccount": {"create": True, "name": "kuberay-operator"},
    "logging": {"stdoutEncoder": "json", "fileEncoder": "json", "baseDir": "", "fileName": "",
                "sizeLimit": ""},
    "batchScheduler": {"enabled": False, "name": ""},
    "configuration": {"enabled": False, "defaultContainerEnvs": [], "defaultPodAnnotations": {},
                      "defaultPodLabels": {}, "headSidecarContainers": [],
                      "workerSidecarContainers": []},
    "featureGates": [
        {"name": "RayClusterStatusConditions", "enabled": True},
        {"name": "RayJobDeletionPolicy", "enabled": True},
        {"name": "RayMultiHostIndexing", "enabled": True},
        {"name": "RayServiceIncrementalUpgrade", "enabled": True},
        {"name": "RayCronJob", "enabled": False},
        {"name": "RayClusterMTLS", "enabled": False},
        {"name": "RayClusterNetworkPolicy", "enabled": False},
        {"name": "RayClusterHistoryServer", "enabled": False},
    ],
    "metrics": {"enabled": True},
    "operatorCommand": "/manager",
    "leaderElectionEnabled": True,
    "reconcileConcurrency": 1,
    "kubeClient": {"qps": 100.0, "burst": 200},
    "rbacEnable": True,
    "crNamespacedRbacEnable": True,
    "singleNamespaceInstall": False,
    "env": None,
    "resources": {"limits": {"cpu": "100m", "memory": "512Mi"}},
    "livenessProbe": {"initialDelaySeconds": 10, "periodSeconds": 5, "failureThreshold": 5},
    "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 5, "failureThreshold": 5},
}

#: ``role.consistentRules`` (_helpers.tpl): the operator's ClusterRole (or, with
#: ``singleNamespaceInstall`` and ``crNamespacedRbacEnable``, a Role per watched namespace).
OPERATOR_RULES: list[Obj] = [
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "pods/status", "services"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
               "watch"]},
    {"apiGroups": [""], "resources": ["pods/proxy", "services/status"],
     "verbs": ["get", "patch", "update"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["secrets"],
     "verbs": ["create", "delete", "get", "list", "update", "watch"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"],
     "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["services/proxy"],
     "verbs": ["create", "get", "patch", "update"]},
    {"apiGroups": ["batch"], "resources": ["jobs"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": ["cert-manager.io"], "resources": ["certificates"],
     "verbs": ["create", "get", "list", "update", "watch"]},
    {"apiGroups": ["cert-manager.io"], "resources": ["certificates/status"], "verbs": ["get"]},
    {"apiGroups": ["cert-manager.io"], "resources": ["issuers"],
     "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["create", "get", "list", "update"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["extensions", "networking.k8s.io"], "resources": ["ingresses"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["gateways", "httproutes"],
     "verbs": ["create", "delete", "get", "list", "update", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingressclasses"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["create", "delete", "get", "list", "update", "watch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters", "raycronjobs", "rayjobs", "rayservices"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters/finalizers", "raycronjobs/finalizers",
                                            "rayjobs/finalizers", "rayservices/finalizers"],
     "verbs": ["update"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters/status", "raycronjobs/status",
                                            "rayjobs/status", "rayservices/status"],
     "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"],
     "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
     "verbs": ["create", "delete", "get", "list", "update", "watch"]},
    {"apiGroups": ["route.openshift.io"], "resources": ["routes"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
]
#: With a ``KubernetesWAS`` feature gate on.
WAS_RULES: list[Obj] = [
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups", "workloads"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]
#: With ``batchScheduler.enabled`` or ``batchScheduler.name: volcano``.
VOLCANO_RULES: list[Obj] = [
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"],
     "verbs": ["create", "delete", "get", "list", "update", "watch"]}]
#: With ``batchScheduler.enabled`` or ``batchScheduler.name: scheduler-plugins``.
SCHEDULER_PLUGINS_RULES: list[Obj] = [
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"],
     "verbs": ["create", "get", "list", "watch"]}]
#: Not in the chart: the emulated event recorder writes core/v1 Events where KubeRay's writes
#: events.k8s.io/v1 ones (which the chart allows), so the rendered rules allow the same verbs
#: on core Events (docs/deviations.md). ``render(..., emulated_event_rule=False)`` leaves it out.
EMULATED_EVENT_RULE: Obj = {"apiGroups": [""], "resources": ["events"],
                            "verbs": ["create", "patch"]}
#: ``templates/leader_election_role.yaml``.
LEADER_ELECTION_RULES: list[Obj] = [
    {"apiGroups": [""], "resources": ["configmaps"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["create", "get", "list", "update"]},
]

#: Where the config path mounts the ConfigMap, and the file the operator reads.
CONFIG_MOUNT_PATH = "/etc/kuberay"
CONFIG_FILE = f"{CONFIG_MOUNT_PATH}/config.yaml"
CHART_NAME = "kuberay-operator"
CHART_VERSION = "1.1.0"


class HelmError(ValueError):
    """A value the chart's ``validateConfig`` refuses (the ``fail`` message)."""


def merge_values(base: Mapping[str, Any], override: Mapping[str, Any]) -> Obj:
    """Helm's value coalescing: maps merge key by key, anything else replaces."""
    out: Obj = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _trunc(name: str) -> str:
    return name[:63].rstrip("-")


def fullname(values: Mapping[str, Any], release_name: str) -> str:
    """``kuberay-operator.fullname`` (_helpers.tpl)."""
    if values.get("fullnameOverride"):
        return _trunc(str(values["fullnameOverride"]))
    name = str(values.get("nameOverride") or CHART_NAME)
    return _trunc(release_name if name in release_name else f"{release_name}-{name}")


def _go_value(value: Any) -> str:
    """``printf "%v"`` of a YAML scalar (``100.0`` prints as ``100``, booleans lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def validate_config(values: Mapping[str, Any]) -> None:
    """``kuberay-operator.validateConfig`` (_helpers.tpl)."""
    if "reconcileConcurrency" in values:
        rc = _go_value(values["reconcileConcurrency"])
        if not re.fullmatch(r"[1-9][0-9]*", rc):
            raise HelmError(f'values.reconcileConcurrency must be a positive integer, got "{rc}"')
    client = values.get("kubeClient")
    if isinstance(client, Mapping):
        if "qps" in client:
            qps = _go_value(client["qps"])
            if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", qps):
                raise HelmError(f'values.kubeClient.qps must be a valid float number, got "{qps}"')
        if "burst" in client:
            burst = _go_value(client["burst"])
            if not re.fullmatch(r"[0-9]+", burst):
                raise HelmError(
                    f'values.kubeClient.burst must be a non-negative integer, got "{burst}"')


def feature_gates_arg(values: Mapping[str, Any]) -> str | None:
    """``kuberay.featureGates``: ``--feature-gates=A=true,B=false`` (None for an empty list)."""
    gates = values.get("featureGates") or []
    if not gates:
        return None
    items = ",".join(f"{g['name']}={_go_value(bool(g.get('enabled')))}" for g in gates)
    return f"--feature-gates={items}"


def _watch_namespace(values: Mapping[str, Any], namespace: str) -> str:
    watch = values.get("watchNamespace")
    if values.get("singleNamespaceInstall") and not watch:
        return namespace
    if watch:
        return ",".join(watch) if isinstance(watch, list | tuple) else str(watch)
    return ""


def operator_args(values: Mapping[str, Any], namespace: str) -> list[str]:
    """The container ``args`` of ``templates/deployment.yaml``."""
    args: list[str] = []
    if (values.get("configuration") or {}).get("enabled"):
        args += ["--config", CONFIG_FILE]
    else:
        validate_config(values)
        batch = values.get("batchScheduler") or {}
        if batch.get("enabled"):
            args.append("--enable-batch-scheduler")
        if batch.get("name"):
            args.append(f"--batch-scheduler={batch['name']}")
        watch = _watch_namespace(values, namespace)
        if watch:
            args += ["--watch-namespace", watch]
        logging = values.get("logging") or {}
        if logging.get("baseDir") and logging.get("fileName"):
            args += ["--log-file-path", f"{logging['baseDir']}/{logging['fileName']}"]
        if logging.get("stdoutEncoder"):
            args += ["--log-stdout-encoder", str(logging["stdoutEncoder"])]
        if logging.get("fileEncoder"):
            args += ["--log-file-encoder", str(logging["fileEncoder"])]
        if "useKubernetesProxy" in values:
            args.append(f"--use-kubernetes-proxy={_go_value(values['useKubernetesProxy'])}")
        if "leaderElectionEnabled" in values:
            args.append(f"--enable-leader-election={_go_value(values['leaderElectionEnabled'])}")
        if isinstance(values.get("metrics"), Mapping) and "enabled" in values["metrics"]:
            args.append(f"--enable-metrics={_go_value(values['metrics']['enabled'])}")
        if "reconcileConcurrency" in values:
            args.append(f"--reconcile-concurrency={_go_value(values['reconcileConcurrency'])}")
        client = values.get("kubeClient")
        if isinstance(client, Mapping):
            if "qps" in client:
                args.append(f"--qps={_go_value(client['qps'])}")
            if "burst" in client:
                args.append(f"--burst={_go_value(client['burst'])}")
    gates = feature_gates_arg(values)
    if gates is not None:
        args.append(gates)
    return args


def config_yaml(values: Mapping[str, Any], namespace: str) -> str:
    """``config.yaml`` of ``templates/configmap.yaml``."""
    validate_config(values)
    cfg: Obj = {"apiVersion": "config.ray.io/v1alpha1", "kind": "Configuration"}
    if "leaderElectionEnabled" in values:
        cfg["enableLeaderElection"] = bool(values["leaderElectionEnabled"])
    if isinstance(values.get("metrics"), Mapping) and "enabled" in values["metrics"]:
        cfg["enableMetrics"] = bool(values["metrics"]["enabled"])
    if "reconcileConcurrency" in values:
        cfg["reconcileConcurrency"] = values["reconcileConcurrency"]
    if "useKubernetesProxy" in values:
        cfg["useKubernetesProxy"] = bool(values["useKubernetesProxy"])
    client = values.get("kubeClient")
    if isinstance(client, Mapping):
        if "qps" in client:
            cfg["qps"] = client["qps"]
        if "burst" in client:
            cfg["burst"] = client["burst"]
    watch = _watch_namespace(values, namespace)
    if watch:
        cfg["watchNamespace"] = watch
    logging = values.get("logging") or {}
    if logging.get("baseDir") and logging.get("fileName"):
        cfg["logFile"] = f"{logging['baseDir']}/{logging['fileName']}"
    if logging.get("stdoutEncoder"):
        cfg["logStdoutEncoder"] = logging["stdoutEncoder"]
    if logging.get("fileEncoder"):
        cfg["logFileEncoder"] = logging["fileEncoder"]
    batch = values.get("batchScheduler") or {}
    if batch.get("enabled"):
        cfg["enableBatchScheduler"] = True
    if batch.get("name"):
        cfg["batchScheduler"] = batch["name"]
    conf = values.get("configuration") or {}
    for key in ("headSidecarContainers", "workerSidecarContainers", "defaultContainerEnvs",
                "defaultPodAnnotations", "defaultPodLabels"):
        if conf.get(key):
            cfg[key] = copy.deepcopy(conf[key])
    return str(yaml.safe_dump(cfg, sort_keys=False))


def _labels(values: Mapping[str, Any], release_name: str) -> dict[str, str]:
    """``kuberay-operator.labels``."""
    labels = {"app.kubernetes.io/name": _trunc(str(values.get("nameOverride") or CHART_NAME)),
              "helm.sh/chart": _trunc(f"{CHART_NAME}-{CHART_VERSION}"),
              "app.kubernetes.io/instance": release_name,
              "app.kubernetes.io/managed-by": "Helm"}
    labels.update({str(k): str(v) for k, v in (values.get("labels") or {}).items()})
    return labels


def _env_list(env: Any) -> list[Obj] | None:
    if not env:
        return None
    if isinstance(env, Mapping):
        return [{"name": str(k), "value": str(v)} for k, v in env.items()]
    return [dict(e) for e in env]


def operator_rules(values: Mapping[str, Any], *, emulated_event_rule: bool = True) -> list[Obj]:
    """``role.consistentRules`` for these values (plus `EMULATED_EVENT_RULE`)."""
    rules = copy.deepcopy(OPERATOR_RULES)
    if any(g.get("name") == "KubernetesWAS" and g.get("enabled")
           for g in values.get("featureGates") or []):
        rules += copy.deepcopy(WAS_RULES)
    batch = values.get("batchScheduler") or {}
    if batch.get("enabled") or batch.get("name") == "volcano":
        rules += copy.deepcopy(VOLCANO_RULES)
    if batch.get("enabled") or batch.get("name") == "scheduler-plugins":
        rules += copy.deepcopy(SCHEDULER_PLUGINS_RULES)
    if emulated_event_rule:
        rules.append(copy.deepcopy(EMULATED_EVENT_RULE))
    return rules


def rbac_manifests(values: Mapping[str, Any], *, name: str, sa_name: str, namespace: str,
                   labels: Mapping[str, str], emulated_event_rule: bool = True) -> list[Obj]:
    """The chart's RBAC with ``rbacEnable``: ``leader_election_role(_binding).yaml``, then
    ``role.yaml`` + ``rolebinding.yaml`` (a ClusterRole and its ClusterRoleBinding), or with
    ``singleNamespaceInstall`` and ``crNamespacedRbacEnable``
    ``multiple_namespaces_role(binding).yaml`` (a Role and RoleBinding per watched namespace)."""
    group = "rbac.authorization.k8s.io"
    api_version = f"{group}/v1"
    subjects = [{"kind": "ServiceAccount", "name": sa_name, "namespace": namespace}]
    le_name = f"{name}-leader-election"
    out: list[Obj] = [
        {"apiVersion": api_version, "kind": "Role",
         "metadata": {"name": le_name, "namespace": namespace, "labels": dict(labels)},
         "rules": copy.deepcopy(LEADER_ELECTION_RULES)},
        {"apiVersion": api_version, "kind": "RoleBinding",
         "metadata": {"name": le_name, "namespace": namespace, "labels": dict(labels)},
         "roleRef": {"apiGroup": group, "kind": "Role", "name": le_name},
         "subjects": copy.deepcopy(subjects)},
    ]
    rules = operator_rules(values, emulated_event_rule=emulated_event_rule)
    if not values.get("singleNamespaceInstall"):
        out.append({"apiVersion": api_version, "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": dict(labels)}, "rules": rules})
        out.append({"apiVersion": api_version, "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": dict(labels)},
                    "subjects": copy.deepcopy(subjects),
                    "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": name}})
    elif values.get("crNamespacedRbacEnable", True):
        watch = values.get("watchNamespace") or [namespace]
        for ns in ([watch] if isinstance(watch, str) else list(watch)):
            out.append({"apiVersion": api_version, "kind": "Role",
                        "metadata": {"name": name, "namespace": ns, "labels": dict(labels)},
                        "rules": copy.deepcopy(rules)})
            out.append({"apiVersion": api_version, "kind": "RoleBinding",
                        "metadata": {"name": name, "namespace": ns, "labels": dict(labels)},
                        "roleRef": {"apiGroup": group, "kind": "Role", "name": name},
                        "subjects": copy.deepcopy(subjects)})
    return out


def render(values: Mapping[str, Any] | None = None, *, release_name: str = CHART_NAME,
           namespace: str = "default", emulated_event_rule: bool = True) -> list[Obj]:
    """The chart's manifests for ``values`` merged over `DEFAULT_VALUES`: ServiceAccount, the
    RBAC of `rbac_manifests` (with ``rbacEnable``), ConfigMap (with ``configuration.enabled``),
    Deployment."""
    v = merge_values(DEFAULT_VALUES, values or {})
    name = fullname(v, release_name)
    labels = _labels(v, release_name)
    short_name = _trunc(str(v.get("nameOverride") or CHART_NAME))
    component = _trunc(str(v.get("componentOverride") or CHART_NAME))
    sa = v.get("serviceAccount") or {}
    sa_name = (sa.get("name") or name) if sa.get("create") else (sa.get("name") or "default")
    out: list[Obj] = []
    if sa.get("create"):
        out.append({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": sa_name, "namespace": namespace,
                                 "labels": dict(labels)}})
    if v.get("rbacEnable"):
        out += rbac_manifests(v, name=name, sa_name=sa_name, namespace=namespace,
                              labels=labels, emulated_event_rule=emulated_event_rule)
    config_enabled = bool((v.get("configuration") or {}).get("enabled"))
    if config_enabled:
        out.append({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"{name}-config", "namespace": namespace,
                                 "labels": dict(labels)},
                    "data": {"config.yaml": config_yaml(v, namespace)}})
    image = v.get("image") or {}
    container: Obj = {
        "name": CHART_NAME,
        "image": f"{image.get('repository')}:{image.get('tag')}",
        "command": [str(v.get("operatorCommand") or "/manager")],
        "args": operator_args(v, namespace),
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/metrics", "port": "http"},
                          **dict(v.get("livenessProbe") or {})},
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": "http"},
                           **dict(v.get("readinessProbe") or {})},
    }
    if image.get("pullPolicy"):
        container["imagePullPolicy"] = image["pullPolicy"]
    env = _env_list(v.get("env"))
    if env:
        container["env"] = env
    if v.get("resources"):
        container["resources"] = copy.deepcopy(v["resources"])
    pod_spec: Obj = {"serviceAccountName": sa_name, "containers": [container]}
    if config_enabled:
        pod_spec["volumes"] = [{"name": "operator-config",
                                "configMap": {"name": f"{name}-config"}}]
        container["volumeMounts"] = [{"name": "operator-config", "mountPath": CONFIG_MOUNT_PATH,
                                      "readOnly": True}]
    template_labels = {"app.kubernetes.io/name": short_name,
                       "app.kubernetes.io/instance": release_name,
                       "app.kubernetes.io/component": component}
    template_labels.update({str(k): str(val) for k, val in (v.get("labels") or {}).items()})
    template_meta: Obj = {"labels": template_labels}
    if v.get("annotations"):
        template_meta["annotations"] = dict(v["annotations"])
    out.append({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": v.get("replicas") or 1,  # `| default 1`: 0 is falsy (quirk)
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": short_name,
                                         "app.kubernetes.io/instance": release_name}},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    })
    return out
