"""A kopf operator (a real framework nobody here wrote) against ``emu serve``: it reconciles a
custom resource, crashes (SIGKILL), misses a create while down, and catches up on restart
without handling the first object again."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from serving import Served, env, require

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]

NS = "kopf-test"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "greetings.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Greeting", "plural": "greetings", "singular": "greeting"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {
                                  "type": "object",
                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def greeting(name: str) -> str:
    return json.dumps({"apiVersion": "example.com/v1", "kind": "Greeting",
                       "metadata": {"name": name, "namespace": NS}, "spec": {"text": name}})


def start_operator(served: Served, log: Path) -> subprocess.Popen[bytes]:
    operator = Path(__file__).parent / "kopf_operator.py"
    return subprocess.Popen(
        [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", NS,
         str(operator)], env={**env(), "KUBECONFIG": str(served.kubeconfig)},
        stdout=log.open("ab"), stderr=subprocess.STDOUT)


def handled(served: Served, name: str) -> dict:
    served.kubectl("wait", "-n", NS, f"greeting/{name}",
                   "--for=jsonpath={.status.greet.message}=hello " + name, "--timeout=60s")
    obj = json.loads(served.kubectl("get", "-n", NS, "greeting", name, "-o", "json").stdout)
    return obj["status"]["greet"]


def test_kopf_operator_survives_a_crash(served: Served, tmp_path: Path):
    require(shutil.which("kopf") is not None or _importable("kopf"), "kopf")
    served.kubectl("apply", "-f", "-", stdin=json.dumps(CRD))
    served.kubectl("apply", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
    log = tmp_path / "kopf.log"
    first = start_operator(served, log)
    second = None
    try:
        served.kubectl("apply", "-f", "-", stdin=greeting("one"))
        one = handled(served, "one")
        assert one["pid"] == first.pid
        first.send_signal(signal.SIGKILL)  # a crash: no cleanup
        first.wait(timeout=10)
        served.kubectl("apply", "-f", "-", stdin=greeting("two"))  # while nobody reconciles
        second = start_operator(served, log)
        two = handled(served, "two")
        assert two["pid"] == second.pid
        assert handled(served, "one")["pid"] == first.pid  # not handled twice
    except BaseException:
        print(log.read_text())
        raise
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True
