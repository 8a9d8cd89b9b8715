"""What checking a built-in kind's nested fields (`emu.apiserver.builtin_fields`) costs an
in-process write: 3000 ConfigMaps and 1500 Pods created then updated through `APIServer`, with
the check on and off in the same run (off: the server sees no schema for the kind, as before the
check existed), under ``fieldValidation=Strict`` (a test client's writes) and without a mode (a
controller's). Prints process-time figures and the on/off ratio; asserts nothing.

    PYTHONPATH=. .venv/bin/python benchmarks/strict_fields.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import time
import types
from collections.abc import Callable
from typing import Any

from _rows import output, row

import emu.apiserver.server as server_module
from emu.apiserver import builtin_fields
from emu.apiserver.server import APIServer
from emu.kernel.rng import SimRandom

_OFF = types.SimpleNamespace(kind_node=lambda group, version, kind: None,
                             unknown_fields=builtin_fields.unknown_fields,
                             prune_nested=builtin_fields.prune_nested)


def configmap(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:05d}", "namespace": "default",
                         "labels": {"shard": f"s{i % 20}"}},
            "data": {"key": f"value-{i}", "other": "x" * 32}}


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"pod-{i:05d}", "namespace": "default", "labels": {"app": "bench"}},
        "spec": {"containers": [{
            "name": "ray-head", "image": "rayproject/ray:2.9.0",
            "ports": [{"containerPort": 6379, "name": "gcs"},
                      {"containerPort": 8265, "name": "dashboard"}],
            "env": [{"name": f"ENV_{k}", "value": f"value-{k}"} for k in range(8)],
            "resources": {"limits": {"cpu": "1", "memory": "2Gi"},
                          "requests": {"cpu": "1", "memory": "2Gi"}},
            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
        }], "tolerations": [{"key": "k", "operator": "Exists"}]},
    }


def change_cm(obj: dict[str, Any]) -> None:
    obj["data"]["key"] += "-2"


def change_pod(obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"]["rev"] = "2"


def once(make: Callable[[int], dict[str, Any]], change: Callable[[dict[str, Any]], None],
         count: int, mode: str | None) -> float:
    api = APIServer(clock=lambda: 0.0, rng=SimRandom(7))
    start = time.process_time()
    for i in range(count):
        made = api.create(make(i), field_validation=mode)
        change(made)
        api.update(made, field_validation=mode)
    return time.process_time() - start


def measure(repeat: int) -> list[tuple[str, float, float]]:
    builtin_fields.kind_node("", "v1", "Pod")  # compiled once per process, outside the timing
    builtin_fields.kind_node("", "v1", "ConfigMap")
    out = []
    for label, make, change, count in (("ConfigMap", configmap, change_cm, 3000),
                                       ("Pod", pod, change_pod, 1500)):
        for mode in ("Strict", None):
            on: list[float] = []
            off: list[float] = []
            for _ in range(repeat):  # interleaved, so load on the machine hits both alike
                server_module.builtin_fields = _OFF  # type: ignore[assignment]
                off.append(once(make, change, count, mode))
                server_module.builtin_fields = builtin_fields
                on.append(once(make, change, count, mode))
            out.append((f"{count} {label} create+update ({mode or 'no mode'})",
                        statistics.median(off), statistics.median(on)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with output(args.json, rows):
        print(f"{'writes':<44} {'check off':>10} {'check on':>10} {'ratio':>7}")
        for name, off, on in measure(args.repeat):
            print(f"{name:<44} {off:>9.3f}s {on:>9.3f}s {on / off:>6.3f}x")
            rows.append(row("strict_fields", name, on, "s", baseline=off,
                            target="no measurable slowdown"))


if __name__ == "__main__":
    main()
