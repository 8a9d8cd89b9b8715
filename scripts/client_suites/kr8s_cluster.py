"""A pytest plugin for kr8s's suite: its ``k8s_cluster`` fixture for the cluster ``KUBECONFIG``
names, in place of the root ``conftest.py`` that creates a kind cluster with ``pytest-kind``
(``client-suites.py`` runs the suite with ``--confcutdir kr8s`` so that one is not loaded).

The object has what kr8s's tests use of ``pytest_kind.KindCluster``: ``kubeconfig_path``,
``kubectl_path`` and ``kubectl(*args)`` returning kubectl's output (raising when it fails).
The two calls every test makes (its ``ns`` fixture's ``create namespace NAME`` and ``delete
namespace NAME --wait=false``) are sent as the equivalent HTTP requests instead: starting
kubectl twice a test cost more CPU than the tests themselves on a loaded machine."""

from __future__ import annotations

import base64
import gc
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


class ExistingCluster:
    def __init__(self, kubeconfig: Path, kubectl: str) -> None:
        self.kubeconfig_path = kubeconfig
        self.kubectl_path = Path(kubectl)

    def _request(self, method: str, path: str, body: dict[str, object] | None = None) -> None:
        import yaml

        config = yaml.safe_load(self.kubeconfig_path.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        headers = {"Content-Type": "application/json", "User-Agent": "kubectl/v1.33.0"}
        if user.get("token"):
            headers["Authorization"] = f"Bearer {user['token']}"
        context = None
        if cluster.get("certificate-authority-data"):
            context = ssl.create_default_context(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        if context is not None and user.get("client-certificate-data"):
            # ssl loads a certificate and key from files only
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "client.crt"), Path(tmp, "client.key")
                cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
                key.write_bytes(base64.b64decode(user["client-key-data"]))
                context.load_cert_chain(str(cert), str(key))
        req = urllib.request.Request(cluster["server"] + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            resp.read()

    def kubectl(self, *args: str) -> str:
        if len(args) == 3 and args[:2] == ("create", "namespace"):
            self._request("POST", "/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args[2]}})
            return f"namespace/{args[2]} created\n"
        if args[:2] == ("delete", "namespace") and args[3:] == ("--wait=false",):
            self._request("DELETE", f"/api/v1/namespaces/{args[2]}")
            return f'namespace "{args[2]}" deleted\n'
        return subprocess.check_output(
            [str(self.kubectl_path), *args], text=True, timeout=60,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig_path)})


@pytest.fixture(scope="session", autouse=True)
def k8s_cluster() -> Iterator[ExistingCluster]:
    path = os.environ.get("KUBECONFIG", "")
    if not path or not Path(path).is_file():
        raise pytest.UsageError(f"KUBECONFIG must name a kubeconfig file (it is {path!r})")
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise pytest.UsageError("kr8s's suite needs kubectl on PATH")
    yield ExistingCluster(Path(path), kubectl)


@pytest.fixture
def ensure_gc() -> Iterator[None]:
    gc.collect()
    yield
    gc.collect()
