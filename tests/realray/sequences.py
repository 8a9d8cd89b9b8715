"""One sequence of client operations, run against the real Ray and against the fake, and what a
client observed, normalised so the two can be compared field by field.

A `Side` is the real head or the fake one: HTTP to the dashboard, sleeps (real or virtual), a head
restart on the same Redis, internal KV through a GCS client, and the Redis keys of its namespace.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Protocol

import orjson

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
#: KV fields both GCSes must write (the rest of the real GCS's KV is usage stats and dashboard
#: bookkeeping the fake does not model).
KV_FIELDS = ("@namespace_cluster:ray_cluster_id", "@namespace_job:_ray_internal_job_info_s1",
             "@namespace_job:_ray_internal_job_info_s2", "@namespace_session:session_name",
             "gcs_pid", "@namespace_myns:k1")


#: Ray's answer to a submit when the dashboard has no job agent yet; its text asks to retry.
NO_AGENT = "No available agent to submit job, please try again later."
#: How long `head_restart` polls a lost head's job with GET alone (real Ray kept it RUNNING for
#: at least 73 s; the fake's optional self-start would show at 60 s).
GET_ONLY_S = 65.0


#: The death reason of a head stopped with SIGTERM while a job runs: ``ray start`` drains the
#: node with a 30 s deadline (``Node._drain_node_before_shutdown``), the busy node never finishes,
#: and at the deadline the raylet gets SIGTERM; its handler (raylet ``main.cc``) keeps the drain's
#: text only if the drain's wall-clock deadline, computed a moment after the poll's, has already
#: passed, else it writes its own. Which text wins is a race in Ray; both mean the same.
SIGTERM_REASONS = ("Node received SIGTERM; draining before shutdown.", "received SIGTERM")
SIGTERM_REASON = "<SIGTERM: drain or raylet text>"


def node_reason(reason: str) -> str:
    return SIGTERM_REASON if reason in SIGTERM_REASONS else reason


#: Observations whose name starts so are measurements kept for a look, not compared.
MEASURED = "measured:"


class Side(Protocol):
    name: str

    async def http(self, method: str, path: str, body: Any = None) -> tuple[int, str]: ...
    async def sleep(self, seconds: float) -> None: ...
    def clock(self) -> float: ...
    def where(self) -> str: ...
    async def restart_head(self) -> None: ...
    async def kv_put(self, namespace: str, key: str, value: bytes) -> None: ...
    async def kv_get(self, namespace: str, key: str) -> bytes | None: ...
    def redis_keys(self) -> dict[str, tuple[str, list[bytes]]]: ...
    async def nodes(self) -> list[tuple[str, bool, str]]: ...
    async def kill(self, how: str) -> None: ...
    async def head_exit(self) -> int | None: ...
    async def start_again(self) -> None: ...


class SideFailed(AssertionError):
    """A step's answer was not what the sequence needs to go on; says which side, which request,
    the answer, and where that side's logs are."""


def fail(side: Side, what: str) -> SideFailed:
    return SideFailed(f"{side.name} side: {what} ({side.where()})")


#: Python source paths as a traceback prints them: everything up to an installation's
#: ``site-packages/`` / ``dist-packages/``, or a source checkout's ``python/`` before ``ray/``,
#: is the machine's and is cut (so is nothing of the package's own path).
_INSTALL_PREFIX = re.compile(r'File "(?:[^"]*/)?(?:(?:site|dist)-packages/|python/(?=ray/))')


def normalise_trace(text: str) -> str:
    """A Python traceback without install paths, line numbers and caret lines."""
    text = _INSTALL_PREFIX.sub('File "', text)
    text = re.sub(r", line \d+,", ",", text)
    return "\n".join(line for line in text.split("\n")
                     if not (line.strip() and set(line.strip()) <= set("^~")))


async def ok(side: Side, method: str, path: str, body: Any = None) -> Any:
    """A request that must answer 200 with JSON; its body."""
    status, text = await side.http(method, path, body)
    if status != 200:
        raise fail(side, f"{method} {path} answered {status}: {text[:3000]}")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise fail(side, f"{method} {path} answered 200 with no JSON ({err}): {text[:3000]}") \
            from err


async def submit(side: Side, body: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
    """POST /api/jobs/ until it is answered other than Ray's "try again later" (``NO_AGENT``);
    it must be 200 with the asked submission id. The answer, as `call` records it."""
    start = side.clock()
    while True:
        status, text = await side.http("POST", "/api/jobs/", body)
        if status == 500 and text.strip() == NO_AGENT and side.clock() - start < timeout:
            await side.sleep(1.0)
            continue
        answer = call(status, text)
        wanted = body.get("submission_id")
        if status != 200 or not isinstance(answer["body"], dict) \
                or (wanted and answer["body"].get("submission_id") != wanted):
            raise fail(side, f"submit of {body!r} answered {status}: {text[:3000]}")
        return answer


async def job(side: Side, sid: str) -> dict[str, Any]:
    details: dict[str, Any] = await ok(side, "GET", f"/api/jobs/{sid}")
    return details


async def follow(side: Side, sid: str, until: tuple[str, ...] = TERMINAL,
                 timeout: float = 180.0, every: float = 0.2
                 ) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """Poll until the job's status is one of ``until`` (failing after ``timeout`` seconds of the
    side's clock): the statuses seen (consecutive repeats dropped), each status's message, the
    last details."""
    seen: list[str] = []
    messages: dict[str, str] = {}
    start = side.clock()
    while True:
        details = await job(side, sid)
        if not seen or seen[-1] != details["status"]:
            seen.append(details["status"])
        messages[details["status"]] = details["message"]
        if details["status"] in until:
            return seen, messages, details
        if side.clock() - start >= timeout:
            raise fail(side, f"job {sid} not {'/'.join(until)} after {timeout:g}s: "
                             f"statuses {seen}, last {details!r}")
        await side.sleep(every)


async def stop_until_settled(side: Side, sid: str, timeout: float = 60.0, every: float = 0.2
                             ) -> dict[str, Any]:
    """Repeat a stop of a terminal job until it answers ``stopped: false`` (failing after the
    timeout); the last answer."""
    start = side.clock()
    while True:
        answer = call(*await side.http("POST", f"/api/jobs/{sid}/stop"))
        if answer["body"] != {"stopped": True}:
            return answer
        if side.clock() - start >= timeout:
            raise fail(side, f"stop of the stopped job {sid} still answers stopped: true "
                             f"after {timeout:g}s")
        await side.sleep(every)


def call(status: int, text: str) -> dict[str, Any]:
    try:
        body: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        body = normalise_trace(text)
    return {"status": status, "body": body}


#: An entrypoint that connects to Ray (``ray.init``): a driver with a Ray job id.
DRIVER = "python -c \"import ray; ray.init(); print('connected')\""
#: Submit bodies ``JobSubmitRequest`` rejects (400 with a TypeError).
INVALID_BODIES = {
    "metadata_not_a_dict": {"entrypoint": "echo hi", "submission_id": "bad1",
                            "metadata": "team-a"},
    "metadata_value_not_a_string": {"entrypoint": "echo hi", "submission_id": "bad2",
                                    "metadata": {"n": 1}},
    "runtime_env_not_a_dict": {"entrypoint": "echo hi", "submission_id": "bad3",
                               "runtime_env": ["pip"]},
}


_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t")


def log_shape(logs: str) -> dict[str, Any]:
    """A driver log: its first line without its timestamp (the job manager's runtime-env line),
    the other lines sorted (the entrypoint's output and the supervisor's "Running entrypoint"
    line reach the file in either order), whether it ends with a newline."""
    lines = logs.split("\n")
    first = _STAMP.sub("<time>\t", lines[0])
    return {"first": first, "others": sorted(line for line in lines[1:] if line),
            "ends_with_newline": logs.endswith("\n")}


def last_line(status: int, text: str) -> tuple[int, str]:
    """An error answer as status and the last line of its body (a traceback's exception)."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    return status, lines[-1] if lines else ""


def driver_shape(details: dict[str, Any]) -> dict[str, Any]:
    """A driver job's ids and driver info, without the machine's address and pid."""
    info = details.get("driver_info")
    shape: Any = None
    if isinstance(info, dict):
        shape = {"keys": sorted(info), "id_is_job_id": info.get("id") == details["job_id"],
                 "ip_is_text": isinstance(info.get("node_ip_address"), str),
                 "pid_is_digits": str(info.get("pid") or "").isdigit()}
    return {"status": details["status"], "job_id": details["job_id"], "driver_info": shape}


async def run_driver(side: Side, sid: str) -> dict[str, Any]:
    """Submit `DRIVER` as ``sid`` and follow it to its end; what a client sees of its driver."""
    await submit(side, {"entrypoint": DRIVER, "submission_id": sid})
    _seen, _messages, done = await follow(side, sid)
    return driver_shape(done)


async def jobs_api(side: Side) -> dict[str, Any]:
    """Submit, duplicate id, transitions, stop, list, logs, delete, unknown ids."""
    out: dict[str, Any] = {}
    out["submit"] = await submit(side, {"entrypoint": "echo hi; sleep 3; echo bye",
                                        "submission_id": "s1"})
    out["duplicate"] = call(*await side.http(
        "POST", "/api/jobs/", {"entrypoint": "echo hi", "submission_id": "s1"}))
    seen, messages, done = await follow(side, "s1")
    out["s1_statuses"] = seen
    out["s1_messages"] = messages
    out["s1_details"] = {k: done[k] for k in ("type", "job_id", "submission_id", "driver_info",
                                              "status", "entrypoint", "message", "error_type",
                                              "metadata", "runtime_env", "driver_exit_code")}
    out["s1_details_keys"] = sorted(done)
    out["s1_end_after_start"] = done["end_time"] > done["start_time"]
    logs = (await ok(side, "GET", "/api/jobs/s1/logs"))["logs"]
    out["s1_logs"] = log_shape(logs)
    for what, method, path in (("get_unknown", "GET", "/api/jobs/nope"),
                               ("logs_unknown", "GET", "/api/jobs/nope/logs"),
                               ("stop_unknown", "POST", "/api/jobs/nope/stop"),
                               ("delete_unknown", "DELETE", "/api/jobs/nope")):
        out[what] = call(*await side.http(method, path))
    for what, body in INVALID_BODIES.items():
        out[what] = last_line(*await side.http("POST", "/api/jobs/", body))
    out["invalid_not_created"] = (await side.http("GET", "/api/jobs/bad1"))[0]
    out["driver_d1"] = await run_driver(side, "d1")
    submitted = side.clock()
    out["submit_s2"] = await submit(side, {"entrypoint": "sleep 600", "submission_id": "s2"})
    await follow(side, "s2", ("RUNNING", *TERMINAL), every=0.1)
    pending_s = side.clock() - submitted
    status, text = await side.http("DELETE", "/api/jobs/s2")
    out["delete_running"] = {"status": status, "mentions_non_terminal":
                             "non-terminal state RUNNING" in text}
    stopping = side.clock()
    out["stop"] = call(*await side.http("POST", "/api/jobs/s2/stop"))
    seen, messages, done = await follow(side, "s2", every=0.1)
    stop_s = side.clock() - stopping
    # Durations, kept for a look (`MEASURED`: not compared, a loaded machine stretches them).
    out[f"{MEASURED}pending_s"] = round(pending_s, 2)
    out[f"{MEASURED}stop_s"] = round(stop_s, 2)
    # Real Ray: 0.5-2 s seen on two loaded cores (the fake: RayConfig.job_stop_seconds, 1.5 s).
    out["stop_took"] = "<3s" if stop_s < 3.0 else ">=3s"
    out["s2_after_stop"] = (seen[-1], messages[seen[-1]], done["error_type"])
    # Real Ray answers ``stopped: true`` while the job's supervisor actor is still alive, which it
    # may be for a moment after the status reads STOPPED (JobManager.stop_job); what a client can
    # rely on is that a repeated stop settles at ``stopped: false`` once the supervisor is gone.
    out["stop_again"] = await stop_until_settled(side, "s2")
    out["stop_succeeded"] = call(*await side.http("POST", "/api/jobs/s1/stop"))
    out["list"] = sorted((j.get("submission_id") or "", j["status"], j["type"])
                         for j in await ok(side, "GET", "/api/jobs/"))
    out["version_keys"] = sorted(await ok(side, "GET", "/api/version"))
    out["healthz"] = await side.http("GET", "/api/gcs_healthz")
    return out


def redis_layout(side: Side, kv_fields: tuple[str, ...] = KV_FIELDS) -> dict[str, Any]:
    """Key names (namespace elided) and types; which of ``kv_fields`` the KV hash holds; the
    length of the entry keys (binary ids) of each other hash."""
    keys = side.redis_keys()
    out: dict[str, Any] = {"keys": sorted((k, t) for k, (t, _f) in keys.items())}
    kv = {f.decode("utf-8", "replace") for f in keys.get("KV", ("", []))[1]}
    out["kv_fields"] = sorted(f for f in kv_fields if f in kv)
    out["id_lengths"] = {k: sorted({len(f) for f in fields}) for k, (t, fields) in keys.items()
                         if t == "hash" and k != "KV"}
    return out


async def head_restart(side: Side) -> dict[str, Any]:
    """A running job, a KV entry, then the head restarts on the same Redis; what survives and how
    the job's status evolves when only GET polls it, then after a logs request."""
    out: dict[str, Any] = {}
    await side.kv_put("myns", "k1", b"v1")
    session = (await ok(side, "GET", "/api/version"))["session_name"]
    cluster = await side.kv_get("cluster", "ray_cluster_id")
    if not cluster:
        raise fail(side, "no cluster id in the internal KV")
    await submit(side, {"entrypoint": "sleep 600", "submission_id": "long"})
    seen, _m, _d = await follow(side, "long", ("RUNNING", *TERMINAL))
    out["before"] = seen[-1]
    await side.restart_head()
    out["kv_after"] = await side.kv_get("myns", "k1")
    out["cluster_id_kept"] = await side.kv_get("cluster", "ray_cluster_id") == cluster
    out["session_kept"] = (await ok(side, "GET", "/api/version"))["session_name"] == session
    out["nodes_after_restart"] = [(state, head, node_reason(why))
                                  for state, head, why in await side.nodes()]
    # GET polling alone for longer than a minute: the job manager must not start by itself.
    polled = []
    start = side.clock()
    while side.clock() - start < GET_ONLY_S:
        polled.append((await job(side, "long"))["status"])
        await side.sleep(2.0)
    out["polled_only_get"] = sorted(set(polled))
    status, _text = await side.http("GET", "/api/jobs/long/logs")
    out["logs_after_restart"] = status
    seen, _m, done = await follow(side, "long", every=0.5)
    out["after_logs"] = (done["status"], done["message"], done["error_type"])
    out["delete_failed"] = call(*await side.http("DELETE", "/api/jobs/long"))
    out["get_deleted"] = call(*await side.http("GET", "/api/jobs/long"))
    # Job ids go on from the counter kept in Redis.
    out["driver_after_restart"] = await run_driver(side, "d2")
    # Stop and delete of a job running on the new head.
    await submit(side, {"entrypoint": "sleep 600", "submission_id": "s3"})
    await follow(side, "s3", ("RUNNING", *TERMINAL))
    out["stop_running"] = call(*await side.http("POST", "/api/jobs/s3/stop"))
    seen, messages, done = await follow(side, "s3")
    out["s3_after_stop"] = (seen[-1], messages[seen[-1]], done["error_type"])
    out["delete_stopped"] = call(*await side.http("DELETE", "/api/jobs/s3"))
    out["list_after_restart"] = sorted(
        (j.get("submission_id") or "", j["status"], j["type"], j.get("job_id") or "")
        for j in await ok(side, "GET", "/api/jobs/"))
    return out


#: The ways `head_loss` loses the head: the GCS process alone with SIGKILL (``ray start --block``
#: sees an unexpected exit and kills the rest at once) or SIGTERM (an expected exit: the head
#: lives on without a GCS until its raylet gives up after its 60 s reconnect window), or every
#: process of the head with SIGKILL (a crash).
LOSSES = ("gcs-KILL", "gcs-TERM", "head-KILL")
#: How long `head_loss` waits for ``ray start`` to exit after the loss.
EXIT_TIMEOUT_S = {"gcs-KILL": 30.0, "gcs-TERM": 150.0, "head-KILL": 30.0}
#: How long the new GCS may take to declare the lost head node dead (health checks: 5 s initial
#: delay, then 5 failures 3 s apart, each up to 10 s).
NODE_DEATH_TIMEOUT_S = 120.0


def took(seconds: float) -> str:
    """A duration as a coarse bucket, wide enough for a loaded machine's real side: "at once"
    is anything under 20 s (a real ``ray start`` took 5-20 s to exit after its GCS's SIGKILL at
    a load of 15), which still tells it from waiting out Ray's 60 s reconnect window."""
    for bound, name in ((20, "<20s"), (45, "20-45s"), (100, "45-100s")):
        if seconds < bound:
            return name
    return ">=100s"


async def timed(side: Side, method: str, path: str) -> dict[str, Any]:
    """A request's answer (as `call` records it) and how long it took (`took`)."""
    start = side.clock()
    answer = call(*await side.http(method, path))
    return {**answer, "took": took(side.clock() - start)}


async def settled_nodes(side: Side) -> list[tuple[str, bool, str]]:
    """The node table once a single node is ALIVE (the lost ones declared dead)."""
    start = side.clock()
    while True:
        nodes = await side.nodes()
        if sum(1 for state, _head, _why in nodes if state == "ALIVE") == 1:
            return nodes
        if side.clock() - start >= NODE_DEATH_TIMEOUT_S:
            raise fail(side, f"lost nodes not declared dead after {NODE_DEATH_TIMEOUT_S:g}s: "
                             f"{nodes}")
        await side.sleep(1.0)


async def head_loss(side: Side, how: str) -> dict[str, Any]:
    """A job runs, the head is lost (`LOSSES`), ``ray start`` exits, a new head starts on the
    same Redis: how ``ray start`` ended and how long it took, what the dashboard answered while
    the GCS was down (SIGTERM), the node table, the lost job under GET then after a logs request,
    and the next driver's job id."""
    if how not in LOSSES:
        raise ValueError(f"how must be one of {LOSSES}, not {how!r}")
    out: dict[str, Any] = {}
    sid = f"lost-{how.lower()}"
    before = await side.nodes()
    await submit(side, {"entrypoint": "sleep 600", "submission_id": sid})
    seen, _m, _d = await follow(side, sid, ("RUNNING", *TERMINAL))
    out["before"] = seen[-1]
    start = side.clock()
    await side.kill(how)
    if how == "gcs-TERM":
        out["healthz_without_gcs"] = await timed(side, "GET", "/api/gcs_healthz")
        out["list_without_gcs"] = await timed(side, "GET", "/api/jobs/")
    code: int | None = None
    while side.clock() - start < EXIT_TIMEOUT_S[how]:
        code = await side.head_exit()
        if code is not None:
            break
        await side.sleep(0.5)
    else:
        raise fail(side, f"ray start still running {EXIT_TIMEOUT_S[how]:g}s after {how}")
    out["ray_start_exit"] = {"code": "killed" if how == "head-KILL" else code,
                             "took": took(side.clock() - start)}
    await side.start_again()
    out["first_get"] = (await job(side, sid))["status"]
    nodes = sorted((state, head, node_reason(why))
                   for state, head, why in await settled_nodes(side))
    before = [(state, head, node_reason(why)) for state, head, why in before]
    out["nodes"] = nodes
    out["nodes_changed"] = sorted((Counter(nodes) - Counter(before)).elements())
    out["logs"] = (await side.http("GET", f"/api/jobs/{sid}/logs"))[0]
    _seen, _m, done = await follow(side, sid, every=0.5)
    out["after_logs"] = (done["status"], done["message"], done["error_type"])
    out["next_driver"] = await run_driver(side, f"after-{how.lower()}")
    return out
