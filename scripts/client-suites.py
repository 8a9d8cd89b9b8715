"""Run the Kubernetes clients' own test suites against ``emu serve`` and print, per suite, how
many tests passed, failed, were skipped and were deselected (they need a node, a package that
is not a dependency here, or fail against kube-apiserver too: ``scripts/client_suites/
deselected.py`` lists each with the reason).

For each client (``kubernetes``, ``kr8s``, ``kopf``, ``lightkube``) at the version
``constraints.txt`` pins, it fetches the released source distribution through the package
index (``pip download --no-binary NAME --no-deps``) into a cache outside the repository
(``$KUBERAY_EMU_CACHE/client-suites``, default ``~/.cache/kuberay-emu``), unpacks it, starts
one ``emu serve --standard-cluster`` for the suite, and runs the suite's tests that talk to a
cluster with pytest in the unpacked tree, with ``KUBECONFIG`` naming the server's kubeconfig.
The installed client is the one the suite imports from its tree, so the installed version
must equal the pin (checked).

    python scripts/client-suites.py                  # every suite
    python scripts/client-suites.py kr8s -k pod      # one suite, extra pytest arguments
    python scripts/client-suites.py --json out.json  # also write the outcomes

Exit status: 0 when every selected test passed, 1 when one failed or was skipped, 2 on bad
arguments or when a suite could not be run at all.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
#: Real processes are waited on in real time.
_clock = time.monotonic  # noqa: TID251 - real processes are waited on in real time


@dataclass(frozen=True)
class Suite:
    """One client's suite: the tests that talk to a cluster, the pytest options it needs, and
    the ``emu serve`` options its tests assume."""

    package: str
    paths: tuple[str, ...]
    #: What ``--ci`` runs instead of ``paths`` (a selection cheap enough for every CI run).
    ci: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()
    serve_args: tuple[str, ...] = ()
    #: Why the suite has no tests to run, when its distribution ships none.
    no_tests: str = ""
    setup: str = ""
    env: dict[str, str] = field(default_factory=dict)


#: kr8s's CI selection: its object tests of the verbs most clients use (create, get, list with
#: selectors, watch, patch, wait, scale, logs, the Service proxy): 18 tests.
KR8S_CI = ("kr8s/tests/test_objects.py", "-k", " or ".join((
    "test_pod_create_and_delete", "test_pod_wait_ready", "test_wait_replicas", "test_pod_get",
    "test_label_selector", "test_field_selector", "test_pod_watch", "test_patch_pod",
    "test_deployment_scale", "test_pod_logs", "test_service_proxy")))

SUITES: dict[str, Suite] = {
    # The distribution ships the dynamic client's integration tests (sync and asyncio) but not
    # the kubernetes/e2e_test package they import its configuration helper from, nor the e2e
    # tests of the typed API: e2e_base stands in for the helper.
    "kubernetes": Suite(
        "kubernetes",
        ("kubernetes/dynamic/test_client.py", "kubernetes/dynamic/test_discovery.py",
         "kubernetes/aio/dynamic/client_test.py", "kubernetes/aio/dynamic/discovery_test.py"),
        setup="e2e_base",
        ci=("kubernetes/dynamic/test_client.py", "kubernetes/dynamic/test_discovery.py",
            "kubernetes/aio/dynamic/client_test.py", "kubernetes/aio/dynamic/discovery_test.py")),
    # kr8s's root conftest.py creates a kind cluster (pytest-kind); --confcutdir leaves it out
    # and kr8s_cluster provides its k8s_cluster fixture for KUBECONFIG's cluster.
    "kr8s": Suite(
        "kr8s",
        ("kr8s/tests/test_api.py", "kr8s/tests/test_auth.py", "kr8s/tests/test_objects.py"),
        pytest_args=("--confcutdir", "kr8s", "-p", "client_suites.kr8s_cluster"),
        # as kind's: HTTPS, and a kubeconfig with the admin's client certificate (its auth
        # tests take that certificate apart; its in-cluster tests read the CA and connect
        # with a ServiceAccount token)
        serve_args=("--tls",),
        ci=KR8S_CI),
    # kopf's end-to-end tests: every example operator run against the cluster (kubectl applies
    # its CRD and objects), and the examples' own tests.
    # (its settings turn warnings into errors; pytest-timeout and looptime, which its ini
    # options are for, are not installed: their unknown-option warnings are ignored)
    "kopf": Suite("kopf", ("tests/e2e", "examples"),
                  pytest_args=("--only-e2e", "-W", "ignore::pytest.PytestConfigWarning"),
                  ci=("tests/e2e/test_examples.py::test_all_examples_are_runnable[01-minimal]",)),
    "lightkube": Suite("lightkube", (), no_tests=(
        "its source distribution ships no tests: the e2e tests (e2e-tests/ in the repository) "
        "are in no distribution on the package index")),
}


def cache_dir() -> Path:
    base = os.environ.get("KUBERAY_EMU_CACHE") or os.path.expanduser("~/.cache/kuberay-emu")
    return Path(base) / "client-suites"


def pinned(package: str) -> str:
    """The version constraints.txt pins ``package`` at."""
    text = (ROOT / "constraints.txt").read_text()
    found = re.search(rf"^{re.escape(package)}==(\S+)\s*$", text, re.MULTILINE | re.IGNORECASE)
    if found is None:
        raise SystemExit(f"client-suites: constraints.txt pins no version of {package}")
    return found.group(1)


def fetch(package: str, version: str) -> Path:
    """The unpacked source distribution of ``package==version`` (downloaded and unpacked once,
    then reused from the cache)."""
    cache = cache_dir()
    tree = cache / f"{package}-{version}"
    if (tree / ".unpacked").is_file():
        return tree
    downloads = cache / "sdists"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = next(iter(sorted(downloads.glob(f"{package}-{version}.tar.gz"))), None)
    if archive is None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", package,
             "--dest", str(downloads), f"{package}=={version}"],
            capture_output=True, text=True, timeout=600)
        archive = downloads / f"{package}-{version}.tar.gz"
        if done.returncode != 0 or not archive.is_file():
            raise SystemExit(f"client-suites: pip download {package}=={version} failed "
                             f"({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    if tree.exists():
        shutil.rmtree(tree)
    with tempfile.TemporaryDirectory(dir=cache) as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
        (inner,) = Path(tmp).iterdir()
        inner.rename(tree)
    (tree / ".unpacked").write_text(f"{package}=={version}\n")
    return tree


def prepare(suite: Suite, tree: Path) -> None:
    if suite.setup == "e2e_base":
        text = (HERE / "client_suites" / "e2e_base.py").read_text()
        for pkg in (tree / "kubernetes" / "e2e_test", tree / "kubernetes" / "aio" / "e2e_test"):
            pkg.mkdir(exist_ok=True)
            (pkg / "__init__.py").write_text("")
            (pkg / "base.py").write_text(text)


@dataclass
class Server:
    proc: subprocess.Popen[str]
    kubeconfig: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def serve(work: Path, args: tuple[str, ...], timeout: float = 120) -> Server:
    """Start ``emu serve`` and wait for its ready line; its stderr goes to ``serve.log``."""
    kubeconfig = work / "kubeconfig"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    log = (work / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "emu", "serve", "--standard-cluster", "--kubeconfig",
         str(kubeconfig), *args], stdout=subprocess.PIPE, stderr=log, text=True, env=env,
        cwd=str(ROOT))
    assert proc.stdout is not None
    deadline = _clock() + timeout
    while _clock() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if "ready at" in line:
                return Server(proc, kubeconfig)
            if not line:
                break
        elif proc.poll() is not None:
            break
    proc.kill()
    proc.wait(timeout=10)
    raise SystemExit(f"client-suites: emu serve did not become ready; see {work / 'serve.log'}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(name: str, extra: list[str], work: Path, ci: bool = False) -> dict[str, object]:
    suite = SUITES[name]
    version = pinned(suite.package)
    row: dict[str, object] = {"suite": name, "version": version}
    if suite.no_tests:
        tree = fetch(suite.package, version)
        shipped = sorted(str(p.relative_to(tree)) for p in tree.rglob("test*.py"))
        if shipped:
            raise SystemExit(f"client-suites: {name} {version} now ships tests ({shipped[:5]}): "
                             "select the ones that talk to a cluster in SUITES")
        row["no_tests"] = suite.no_tests
        return row
    installed = importlib.metadata.version(suite.package)
    if installed != version:
        raise SystemExit(f"client-suites: {suite.package} {installed} is installed but "
                         f"constraints.txt pins {version}: install the pinned version")
    tree = fetch(suite.package, version)
    prepare(suite, tree)
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results.json"
    results.unlink(missing_ok=True)
    wall0, cpu0 = _clock(), _children_cpu()
    server = serve(work, suite.serve_args)
    try:
        env = dict(os.environ)
        env.update(suite.env)
        env["KUBECONFIG"] = str(server.kubeconfig)
        env["PYTHONPATH"] = str(HERE)
        env["CLIENT_SUITES_NAME"] = name
        env["CLIENT_SUITES_RESULTS"] = str(results)
        env["CLIENT_SUITES_FULL"] = "0" if ci or extra else "1"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:emu",
               "-p", "client_suites.plugin", "-o", "addopts=", "--rootdir", str(tree),
               "-q", "-rfEs", "--durations=25", *suite.pytest_args,
               *(suite.ci if ci else suite.paths), *extra]
        with (work / "pytest.log").open("w") as log:
            done = subprocess.run(cmd, cwd=str(tree), env=env, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=1800)
    finally:
        server.stop()
    row["wall_s"] = round(_clock() - wall0, 1)
    row["cpu_s"] = round(_children_cpu() - cpu0, 1)
    row["log"] = str(work / "pytest.log")
    if not results.is_file():
        raise SystemExit(f"client-suites: {name}'s pytest wrote no results (exit "
                         f"{done.returncode}); see {work / 'pytest.log'}")
    data = json.loads(results.read_text())
    outcomes: dict[str, str] = data["outcomes"]
    row["passed"] = sorted(k for k, v in outcomes.items() if v == "passed")
    row["failed"] = sorted(k for k, v in outcomes.items() if v == "failed")
    row["skipped"] = sorted(k for k, v in outcomes.items() if v == "skipped")
    row["deselected"] = sorted(data["deselected"])
    row["messages"] = data["messages"]
    if done.returncode not in (0, 1) or not outcomes:
        raise SystemExit(f"client-suites: {name}'s pytest exited {done.returncode} with "
                         f"{len(outcomes)} results; see {work / 'pytest.log'}")
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suites", nargs="*", metavar="SUITE",
                   help=f"which suites (default: all): {', '.join(SUITES)}")
    p.add_argument("--json", default="", help="write every suite's outcomes to this file")
    p.add_argument("--work", default="", help="where logs go (default: a temporary directory)")
    p.add_argument("-k", default="", help="pytest's -k, for every selected suite")
    p.add_argument("--ci", action="store_true",
                   help="run each suite's CI selection (a few minutes in all), not all of it")
    args = p.parse_args()
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        p.error(f"unknown suite(s) {unknown}; choose from {', '.join(SUITES)}")
    extra = ["-k", args.k] if args.k else []
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="client-suites-"))
    rows = []
    bad = False
    for name in args.suites or list(SUITES):
        row = run_suite(name, extra, work / name, ci=args.ci)
        rows.append(row)
        head = f"{name} {row['version']}:"
        if "no_tests" in row:
            print(f"{head} not run: {row['no_tests']}", flush=True)
            continue
        failed, skipped = row["failed"], row["skipped"]
        assert isinstance(failed, list) and isinstance(skipped, list)
        print(f"{head} {len(row['passed'])} passed, {len(failed)} failed, {len(skipped)} "  # type: ignore[arg-type]
              f"skipped, {len(row['deselected'])} deselected (listed, with reasons) "  # type: ignore[arg-type]
              f"in {row['wall_s']} s wall, {row['cpu_s']} s CPU; log {row['log']}", flush=True)
        for nodeid in failed:
            print(f"  FAILED  {nodeid}")
        for nodeid in skipped:
            print(f"  SKIPPED {nodeid}")
        bad = bad or bool(failed) or bool(skipped)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
