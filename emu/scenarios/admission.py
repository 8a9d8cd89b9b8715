"""Recovery from admission failures: a ResourceQuota that refuses a RayCluster's workers, and
an admission webhook with ``failurePolicy: Fail`` that is down.

Platform teams run both: a namespace's quota is too small for what a team asks (or someone
else used it up), or the policy webhook every Pod goes through is unreachable. KubeRay keeps
retrying the refused creates (its reconcile fails and is requeued with backoff), so the cluster
comes up once the quota is raised or the webhook is back — the scenarios check that it does,
and how long after.
"""

from __future__ import annotations

from typing import Any

from ..faults import WebhookDown, WebhookUp
from ..simulation import Simulation
from . import Report, scenario
from ._common import (
    NS,
    Narrator,
    cluster_ready,
    kube,
    names,
    ray_pods,
    raycluster,
    start,
    workers_ready,
)

WEBHOOK = "pods.policy.example.com"


def _events(sim: Simulation, reason: str) -> list[dict[str, Any]]:
    return [e for e in sim.api.list("Event", NS)["items"] if e.get("reason") == reason]


@scenario("quota-workers-refused",
          "a ResourceQuota too small for the workers: the head runs, every worker create is "
          "refused with 403 'exceeded quota'; the quota is raised and KubeRay brings the "
          "workers up", cluster=kube())
async def quota_workers_refused(sim: Simulation, report: Report) -> None:
    """KubeRay runs; the namespace gets a ResourceQuota whose ``pods`` leaves room for the
    RayCluster's head and none of its two workers. The RayCluster is created; after 60 s the
    quota is raised by two Pods. Expectations:

    - the quota's ``status.used`` counts the namespace's Pods;
    - the head is created and the workers are not: KubeRay's creates get kube's 403
      ``exceeded quota: ray-quota, requested: pods=1, used: pods=N, limited: pods=N``, which
      KubeRay records as a ``FailedToCreateWorkerPod`` Event;
    - nothing but the head runs while the quota is full;
    - once the quota is raised the cluster has two ready workers, and the quota is full again.
    """
    Narrator(sim)
    await start(sim)
    existing = len(sim.api.list("Pod", NS)["items"])
    limit = existing + 1
    await sim.apply({"apiVersion": "v1", "kind": "ResourceQuota",
                     "metadata": {"name": "ray-quota", "namespace": NS},
                     "spec": {"hard": {"pods": str(limit)}}})
    quota = sim.api.get("ResourceQuota", "ray-quota", NS)
    report.expect("the quota's status counts the namespace's Pods",
                  quota.get("status", {}).get("used") == {"pods": str(existing)},
                  f"status {quota.get('status')}")
    created_at = sim.now
    await sim.apply(raycluster(workers=2))
    await sim.wait_for("RayCluster", "raycluster",
                       lambda rc: (rc.get("status") or {}).get("head", {}).get("podName"),
                       timeout=120)
    await sim.sleep(60)
    refused = _events(sim, "FailedToCreateWorkerPod")
    workers_while_full = names(ray_pods(sim, "raycluster", "worker"))
    heads = names(ray_pods(sim, "raycluster", "head"))
    want = (f"exceeded quota: ray-quota, requested: pods=1, used: pods={limit}, limited: "
            f"pods={limit}")
    report.expect("the head is created, the workers are refused with kube's 403",
                  len(heads) == 1 and not workers_while_full and bool(refused)
                  and all(want in e.get("message", "") for e in refused),
                  f"heads {heads}, workers {workers_while_full}, "
                  f"{len(refused)} FailedToCreateWorkerPod events: "
                  f"{refused[0].get('message', '') if refused else 'none'}")
    quota = sim.api.get("ResourceQuota", "ray-quota", NS)
    quota["spec"]["hard"]["pods"] = str(limit + 2)
    raised_at = sim.now
    await sim.apply(quota)
    rc = await sim.wait_for("RayCluster", "raycluster", workers_ready(2), timeout=300)
    recovered_at = sim.now
    used = sim.api.get("ResourceQuota", "ray-quota", NS)["status"]["used"]
    report.fact("refusals_while_full", len(refused))
    report.fact("created_at", round(created_at, 3))
    report.fact("quota_raised_at", round(raised_at, 3))
    report.fact("workers_ready_after_raise_s", round(recovered_at - raised_at, 3))
    report.expect("once the quota is raised, two workers are ready and the quota is full",
                  workers_ready(2)(rc) and used == {"pods": str(limit + 2)},
                  f"ready workers {(rc.get('status') or {}).get('readyWorkerReplicas')}, "
                  f"used {used}")


@scenario("webhook-down",
          "a Pod admission webhook with failurePolicy Fail goes down: KubeRay's Pod creates fail "
          "with kube's 500 'failed calling webhook'; the webhook comes back and the cluster "
          "comes up", cluster=kube())
async def webhook_down(sim: Simulation, report: Report) -> None:
    """A ValidatingWebhookConfiguration sends every Pod create in the namespace to a policy
    service (an in-process handler that allows everything), ``failurePolicy: Fail``. The
    webhook is taken down (`WebhookDown`), the RayCluster is created, and the webhook comes
    back 60 s later (`WebhookUp`). Expectations:

    - while it is down, no Ray Pod is created: KubeRay's creates get kube's "Internal error
      occurred: failed calling webhook" and it records FailedToCreate Events;
    - once it is back, the cluster is ready with its worker, every Pod having been reviewed.
    """
    Narrator(sim)
    await start(sim)
    reviewed: list[str] = []

    def policy(review: dict[str, Any]) -> dict[str, Any]:
        reviewed.append(review["request"]["name"])
        return {"allowed": True}

    sim.api.webhooks.register("policy", "pod-policy", policy, "/validate")
    await sim.apply({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "pod-policy"},
        "webhooks": [{"name": WEBHOOK, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "failurePolicy": "Fail", "timeoutSeconds": 5,
                      "clientConfig": {"service": {"namespace": "policy", "name": "pod-policy",
                                                   "path": "/validate"}},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                 "apiVersions": ["v1"], "resources": ["pods"]}]}]})
    sim.faults.do(WebhookDown(webhook=WEBHOOK))
    down_at = sim.now
    await sim.apply(raycluster(workers=1))
    await sim.sleep(60)
    while_down = names(ray_pods(sim, "raycluster", "head") + ray_pods(sim, "raycluster",
                                                                      "worker"))
    failed = [e for e in sim.api.list("Event", NS)["items"]
              if str(e.get("reason", "")).startswith("FailedToCreate")]
    want = f'Internal error occurred: failed calling webhook "{WEBHOOK}": failed to call webhook'
    report.expect("while the webhook is down no Ray Pod is created: kube's 500 each time",
                  not while_down and bool(failed)
                  and all(want in e.get("message", "") for e in failed),
                  f"pods {while_down}, {len(failed)} FailedToCreate events: "
                  f"{failed[0].get('message', '') if failed else 'none'}")
    sim.faults.do(WebhookUp(webhook=WEBHOOK))
    up_at = sim.now
    rc = await sim.wait_for("RayCluster", "raycluster", workers_ready(1), timeout=300)
    report.fact("down_for_s", round(up_at - down_at, 3))
    report.fact("failed_creates_while_down", len(failed))
    report.fact("ready_after_webhook_up_s", round(sim.now - up_at, 3))
    pods = names(ray_pods(sim, "raycluster", "head") + ray_pods(sim, "raycluster", "worker"))
    report.expect("once the webhook is back the cluster is ready, every Pod reviewed",
                  cluster_ready(rc) and workers_ready(1)(rc)
                  and all(p in reviewed for p in pods),
                  f"pods {pods}, reviewed {reviewed}")
