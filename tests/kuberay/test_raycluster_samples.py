"""Manifests shaped like KubeRay's published samples (ray-operator/config/samples: the plain
cluster, external Redis, embedded GCS FT), written for these tests, applied as YAML through
``sim.apply`` and reconciled to a ready cluster by the operator running as its Deployment."""

from __future__ import annotations

import pytest
from test_raycluster_support import condition, head_pods

from emu.kube import cluster as kube_cluster
from emu.kuberay.operator import install_kuberay
from emu.ray.images import register_ray_programs

PLAIN = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: sample-plain
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            limits: {cpu: "2", memory: "4Gi"}
            requests: {cpu: "2", memory: "4Gi"}
          ports:
          - {containerPort: 6379, name: gcs-server}
          - {containerPort: 8265, name: dashboard}
          - {containerPort: 10001, name: client}
  workerGroupSpecs:
  - replicas: 2
    minReplicas: 1
    maxReplicas: 3
    groupName: workers
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            limits: {cpu: "1", memory: "2Gi"}
            requests: {cpu: "1", memory: "2Gi"}
"""

EXTERNAL_REDIS = """
apiVersion: v1
kind: Secret
metadata:
  name: sample-redis-secret
type: Opaque
data:
  password: czNjcjN0LXBhc3M=
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: sample-scripts
data:
  hello.py: |
    print("hello")
---
apiVersion: v1
kind: Service
metadata:
  name: redis
  labels: {app: redis}
spec:
  type: ClusterIP
  ports:
  - {name: redis, port: 6379}
  selector: {app: redis}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: redis
  labels: {app: redis}
spec:
  replicas: 1
  selector:
    matchLabels: {app: redis}
  template:
    metadata:
      labels: {app: redis}
    spec:
      containers:
      - name: redis
        image: redis:7.4.0
        command: ["sh", "-c", "redis-server --requirepass s3cr3t-pass"]
        ports:
        - containerPort: 6379
---
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: sample-redis
spec:
  rayVersion: "2.46.0"
  gcsFaultToleranceOptions:
    redisAddress: "redis:6379"
    redisPassword:
      valueFrom:
        secretKeyRef: {name: sample-redis-secret, key: password}
  headGroupSpec:
    rayStartParams:
      num-cpus: "0"
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            limits: {cpu: "1", memory: "4Gi"}
            requests: {cpu: "1", memory: "2Gi"}
          ports:
          - {containerPort: 6379, name: redis}
          - {containerPort: 8265, name: dashboard}
          - {containerPort: 10001, name: client}
          volumeMounts:
          - {mountPath: /tmp/ray, name: ray-logs}
          - {mountPath: /home/ray/samples, name: scripts}
        volumes:
        - name: ray-logs
          emptyDir: {}
        - name: scripts
          configMap:
            name: sample-scripts
            defaultMode: 0777
            items:
            - {key: hello.py, path: hello.py}
  workerGroupSpecs:
  - replicas: 1
    minReplicas: 1
    maxReplicas: 4
    groupName: small
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          volumeMounts:
          - {mountPath: /tmp/ray, name: ray-logs}
          resources:
            limits: {cpu: "1", memory: "1Gi"}
            requests: {cpu: "1", memory: "1Gi"}
        volumes:
        - name: ray-logs
          emptyDir: {}
"""

EMBEDDED = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: sample-embedded
spec:
  rayVersion: "2.46.0"
  gcsFaultToleranceOptions:
    backend: rocksdb
    storage:
      size: 2Gi
  headGroupSpec:
    rayStartParams:
      num-cpus: "0"
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            limits: {cpu: "1", memory: "2Gi"}
            requests: {cpu: "1", memory: "2Gi"}
  workerGroupSpecs:
  - replicas: 1
    minReplicas: 1
    maxReplicas: 2
    groupName: small
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
"""


def _ready(obj) -> bool:
    return obj.get("status", {}).get("state") == "ready" and (
        condition(obj, "HeadPodReady") or {}).get("status") == "True"


@pytest.mark.parametrize("name,manifest,gates", [
    ("sample-plain", PLAIN, None),
    ("sample-redis", EXTERNAL_REDIS, None),
    ("sample-embedded", EMBEDDED, {"GCSFaultToleranceEmbeddedStorage": True}),
])
async def test_sample_shaped_manifest_reaches_ready(sim, name, manifest, gates):
    kube = kube_cluster.install(sim, nodes=3)
    register_ray_programs(sim.programs)
    await kube.wait_ready()
    kuberay = await install_kuberay(sim, feature_gates=gates)
    await kuberay.wait_for_leader(timeout=120)
    await sim.apply(manifest, namespace="default")
    rc = await sim.wait_for("RayCluster", name, _ready, timeout=600)
    assert rc["status"]["readyWorkerReplicas"] == rc["status"]["desiredWorkerReplicas"]
    head = (await head_pods(sim, name))[0]
    env = {e["name"] for e in head["spec"]["containers"][0].get("env") or []}
    if name == "sample-redis":
        assert {"RAY_REDIS_ADDRESS", "REDIS_PASSWORD", "RAY_external_storage_namespace"} <= env
    if name == "sample-embedded":
        pvc = await sim.client().get("PersistentVolumeClaim", "sample-embedded-gcs-pvc",
                                     "default")
        assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi"
