"""The tests of each client's own suite that ``client-suites.py`` does not run, with the reason:
each needs something a control plane alone does not have (a node running containers, a
WebSocket stream, a package that is not a dependency here).

Keys are pytest node ids relative to the unpacked source distribution."""

from __future__ import annotations

DESELECTED: dict[str, dict[str, str]] = {
    "kubernetes": {
        **dict.fromkeys((
            "kubernetes/dynamic/test_client.py::TestDynamicClient::test_cluster_custom_resources",
            "kubernetes/dynamic/test_client.py::TestDynamicClient::"
            "test_namespaced_custom_resources",
            "kubernetes/dynamic/test_client.py::TestDynamicClient::"
            "test_async_namespaced_custom_resources"),
            "the suite's fault: it creates its CRD as apiextensions.k8s.io/v1beta1, which "
            "Kubernetes removed in 1.22 (kube-apiserver 1.33 answers 404 as well)"),
        "kubernetes/dynamic/test_discovery.py::TestDiscoverer::"
        "test_cache_decoder_resource_and_subresource":
            "the suite's fault: it compares two separately decoded Resource objects with == "
            "and Resource defines no __eq__ (identity), so it fails against any server",
        "kubernetes/aio/dynamic/client_test.py::TestDynamicClient::test_server_side_apply_api":
            "the suite's fault: it applies a Deployment body at the Pods endpoint, which "
            "kube-apiserver refuses with 400 (the field manager's version check: invalid "
            "object type), as the emulator does",
    },
    "kr8s": {
        **dict.fromkeys((f"kr8s/tests/test_objects.py::{name}" for name in (
            "test_pod_port_forward_context_manager", "test_pod_port_forward_context_manager_sync",
            "test_pod_port_forward_context_manager_manual", "test_pod_port_forward_start_stop",
            "test_service_port_forward_context_manager", "test_service_port_forward_start_stop",
            "test_multiple_bind_addresses_port_forward")),
            "needs a node: port-forwards to a real nginx container (the port-forward "
            "subresource is not emulated)"),
        **dict.fromkeys((f"kr8s/tests/test_objects.py::{name}" for name in (
            "test_pod_exec", "test_pod_exec_timeout", "test_pod_exec_error",
            "test_pod_exec_to_file", "test_pod_exec_stdin", "test_pod_exec_not_ready",
            "test_service_exec")),
            "needs a node: runs commands in a container (the exec subresource is not emulated)"),
        "kr8s/tests/test_objects.py::test_node_taint":
            "the suite's assumption of a one-node kind cluster: it removes the first Node's "
            "taints reading each taint's value, and the standard cluster's first Node is the "
            "control plane with kube's `node-role.kubernetes.io/control-plane:NoSchedule`, "
            "which has no value (a multi-node kind cluster fails the same way)",
        "kr8s/tests/test_objects.py::test_cast_to_from_kubernetes":
            "the suite's fault with kubernetes 37: it reaches "
            "`kubernetes.client.models.v1_pod`, which kubernetes 37's lazily loaded models "
            "no longer expose as an attribute (AttributeError before any request)",
        "kr8s/tests/test_objects.py::test_cast_to_from_kubernetes_asyncio":
            "needs kubernetes-asyncio, not a dependency here (the suite skips it)",
        "kr8s/tests/test_objects.py::test_cast_to_from_pykube_ng":
            "needs pykube-ng, not a dependency here (the suite skips it)",
        "kr8s/tests/test_objects.py::test_adoption":
            "needs a node: its nginx Pod fixture runs `dd` in the container with exec and "
            "waits for an HTTP readiness probe against nginx",
    },
    "kopf": {
        **dict.fromkeys((
            "tests/e2e/test_examples.py::test_all_examples_are_runnable[02-children]",
            "tests/e2e/test_examples.py::test_all_examples_are_runnable[13-hooks]",
            "tests/e2e/test_examples.py::test_all_examples_are_runnable[99-all-at-once]",
            "examples/10-builtins/test_example_10.py::test_pods_reacted"),
            "needs pykube-ng (an extra of kopf's development setup), not a dependency here: "
            "the example imports it"),
        "tests/e2e/test_examples.py::test_all_examples_are_runnable[17-admission]":
            "needs certvalidator (an extra of kopf's development setup), not a dependency "
            "here: the example's webhook server guesses the cluster type with it",
    },
}
