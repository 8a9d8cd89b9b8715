"""The actors part of the contract: job drivers that make a detached and a non-detached actor, a
later job that finds the detached one by name and kills another, the state API's answers
(``GET /api/v0/actors``, plain, ``detail``, filters, ``limit``, bad options), and the detached
actor after a head restart on Redis — run on the real Ray and on the fake, through HTTP only.

The entrypoints are Python scripts for the real side; the fake side runs `FAKE_PROGRAMS`, the same
steps written against `emu.ray.entrypoints.JobContext`, registered under the same text. Rows are
normalised (ids, pids and addresses become what they are *of*: ``<job a>``, ``<node>``, ...) and
only the actors of the ``actors`` namespace are compared row by row (the job supervisors' death
texts race in real Ray between two wordings of the same exit).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urlencode

from sequences import MEASURED, Side, fail, follow, ok, submit

from emu.ray import ActorUnavailableError

NAMESPACE = "actors"
_HEADER = "import ray\nray.init(namespace='actors')\n@ray.remote\nclass Keeper:\n" \
          "    def ping(self):\n        return 'pong'\n"
#: Job a: a detached named actor that restarts for ever, and a non-detached one.
MAKE = ('python -c "\n' + _HEADER
        + "d = Keeper.options(name='keeper', lifetime='detached', max_restarts=-1).remote()\n"
          "o = Keeper.options(name='owned').remote()\n"
          "print(ray.get(d.ping.remote()), ray.get(o.ping.remote()))\n\"")
#: Job b: finds the detached actor by name, then makes a detached one and kills it.
USE = ('python -c "\n' + _HEADER
       + "k = ray.get_actor('keeper')\nprint('found', ray.get(k.ping.remote()))\n"
         "v = Keeper.options(name='victim', lifetime='detached').remote()\n"
         "ray.get(v.ping.remote())\nray.kill(v)\n\"")
#: Job d: a detached actor with one restart whose worker dies twice (``os._exit``): it is dead
#: of its last failure once its restart is spent. Each call waits out a restart in progress
#: (``ActorUnavailableError``, up to 60 s): on a loaded machine real Ray refused the second
#: crash that way, so the worker died once and the actor ended ALIVE.
CRASH = ('python -c "\nimport os, time\n' + _HEADER
         + "    def crash(self):\n        os._exit(1)\n"
           "def call(what, i, method):\n"
           "    for _ in range(600):\n"
           "        try:\n            return print(what, i, ray.get(method.remote()))\n"
           "        except ray.exceptions.ActorUnavailableError:\n            time.sleep(0.1)\n"
           "        except Exception as e:\n            return print(what, i, type(e).__name__)\n"
           "    print(what, i, 'still unavailable')\n"
           "f = Keeper.options(name='fragile', lifetime='detached', max_restarts=1).remote()\n"
           "ray.get(f.ping.remote())\n"
           "for i in range(2):\n"
           "    call('crash', i, f.crash)\n"
           "    call('ping', i, f.ping)\n\"")
#: Job c, after the head restart: the detached actor is still there by name.
FIND = ('python -c "\n' + _HEADER
        + "k = ray.get_actor('keeper')\nprint('found', ray.get(k.ping.remote()))\n\"")


class Keeper:
    def __init__(self) -> None:
        self.rt: Any = None

    def _attach_runtime(self, rt: Any) -> None:
        self.rt = rt

    def ping(self) -> str:
        return "pong"

    async def crash(self) -> None:
        """``os._exit(1)``: the worker process ends under the call, which never returns."""
        self.rt.process.exit(1, "os._exit(1)")
        await asyncio.Event().wait()


async def _make(job: Any) -> None:
    ray = job.init(namespace=NAMESPACE)
    kept = await ray.create_actor(Keeper, name="keeper", detached=True, max_restarts=-1)
    owned = await ray.create_actor(Keeper, name="owned")
    job.print(await kept.call("ping"), await owned.call("ping"))


async def _find(job: Any) -> None:
    ray = job.init(namespace=NAMESPACE)
    keeper = await ray.get_actor("keeper")
    job.print("found", await keeper.call("ping"))


async def _use(job: Any) -> None:
    await _find(job)
    ray = job.init(namespace=NAMESPACE)
    victim = await ray.create_actor(Keeper, name="victim", detached=True)
    await victim.call("ping")
    await ray.kill(victim)


async def _crash(job: Any) -> None:
    ray = job.init(namespace=NAMESPACE)
    fragile = await ray.create_actor(Keeper, name="fragile", detached=True, max_restarts=1)
    await fragile.call("ping")
    async def call(what: str, i: int, method: str) -> None:
        for _ in range(600):
            try:
                job.print(what, i, await fragile.call(method))
                return
            except ActorUnavailableError:  # a restart in progress: wait it out, as the real does
                await asyncio.sleep(0.1)
            except Exception as err:  # what the real script catches
                job.print(what, i, type(err).__name__)
                return
        job.print(what, i, "still unavailable")

    for i in range(2):
        await call("crash", i, "crash")
        await call("ping", i, "ping")


FAKE_PROGRAMS = {MAKE: _make, USE: _use, FIND: _find, CRASH: _crash}

#: Filters and options sent as they are; each answer is compared whole once normalised.
QUERIES = {
    "alive_limit_1": [("filter_keys", "state"), ("filter_predicates", "="),
                      ("filter_values", "alive"), ("limit", "1")],
    "name_not_keeper": [("filter_keys", "name"), ("filter_predicates", "!="),
                        ("filter_values", "KEEPER")],
    "namespace_and_class": [("filter_keys", "ray_namespace"), ("filter_predicates", "="),
                            ("filter_values", NAMESPACE), ("filter_keys", "class_name"),
                            ("filter_predicates", "="), ("filter_values", "keeper")],
    "limit_2": [("limit", "2")],
    "bad_column": [("filter_keys", "is_detached"), ("filter_predicates", "="),
                   ("filter_values", "true")],
    "bad_state": [("filter_keys", "state"), ("filter_predicates", "="),
                  ("filter_values", "bogus")],
    "bad_limit": [("limit", "abc")],
    "limit_too_big": [("limit", "100000")],
    "bad_detail": [("detail", "maybe")],
}
#: What real Ray wraps around a refused predicate (pydantic's validation error) differs from
#: version to version of pydantic; the sentence inside it is Ray's and compared.
_PREDICATE = re.compile(r"Unsupported filter predicate .*? Available predicates: =, !=\.")
_HEX = re.compile(r"\b[0-9a-f]{16,}\b")
_IP = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")


class Names:
    """What each id, pid and address seen is *of*, for replacing them in answers."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def add(self, value: Any, what: str) -> None:
        if value not in (None, "", 0):
            self.known.setdefault(str(value), what)

    def text(self, value: str) -> str:
        if value in self.known:
            return self.known[value]
        value = _HEX.sub(lambda m: self.known.get(m.group(0), "<hex>"), value)
        return _IP.sub("<ip>", value)

    def value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            return self.known.get(str(value), "<int>")
        if isinstance(value, str):
            return self.text(value)
        return value


def _url(query: list[tuple[str, str]]) -> str:
    return "/api/v0/actors?" + urlencode(query)


async def _listing(side: Side, query: list[tuple[str, str]]) -> tuple[int, Any]:
    status, text = await side.http("GET", _url(query) if query else "/api/v0/actors")
    try:
        import orjson

        return status, orjson.loads(text)
    except ValueError as err:
        raise fail(side, f"GET {_url(query)} answered {status} with no JSON: {text[:2000]}") \
            from err


def _rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = body["data"]["result"]["result"]
    return rows


def _learn(names: Names, rows: list[dict[str, Any]], jobs: dict[str, str]) -> None:
    for job_id, label in jobs.items():
        names.add(job_id, f"<job {label}>")
        names.add(job_id + "ff" * 24, f"<driver of job {label}>")
    for row in rows:
        label = row.get("name") or "?"
        names.add(row["actor_id"], f"<actor {label}>")
        names.add(row.get("pid"), f"<pid of {label}>")
        names.add(row.get("node_id"), "<node>")
        names.add(row.get("job_id"), "<job of a supervisor>")


def _shape(body: Any, names: Names) -> Any:
    """An answer's envelope and counts as they are, its rows normalised (sorted by name)."""
    if not isinstance(body, dict) or "data" not in body:
        return names.value(body)
    out = {"result": body.get("result"), "msg": names.text(str(body.get("msg")))}
    result = body["data"].get("result")
    if isinstance(result, dict):
        counts = {k: v for k, v in result.items() if k != "result"}
        rows = sorted(result["result"], key=lambda r: str(r.get("name")))
        out["data"] = {"counts": counts, "columns": [list(r) for r in rows],
                       "rows": [names.value(r) for r in rows]}
    else:
        out["data"] = body["data"]
    return out


_COLUMNS = re.compile(r"(Supported filter columns: )\{([^}]*)\}")


def sort_column_set(msg: str) -> str:
    """Real Ray prints the filterable columns as a Python set, in an order that changes with
    the process's string hashing: sorted here (the fake prints them sorted)."""
    def ordered(found: re.Match[str]) -> str:
        items = sorted(item.strip() for item in found.group(2).split(",") if item.strip())
        return found.group(1) + "{" + ", ".join(items) + "}"

    return _COLUMNS.sub(ordered, msg)


def _predicate_message(msg: str) -> str:
    found = _PREDICATE.search(msg)
    return found.group(0) if found else msg


async def _wait_state(side: Side, name: str, wanted: str, timeout: float = 180.0,
                      not_on: str | None = None) -> dict[str, Any]:
    """Poll the detailed list until the actor called ``name`` is ``wanted`` (and, with
    ``not_on``, on another node than that one); its row."""
    start = side.clock()
    seen = None
    while True:
        status, body = await _listing(side, [("detail", "true"), ("filter_keys", "name"),
                                             ("filter_predicates", "="),
                                             ("filter_values", name)])
        if status == 200 and _rows(body):
            seen = _rows(body)[0]
            if seen["state"] == wanted and (not_on is None or seen["node_id"] != not_on):
                return seen
        if side.clock() - start >= timeout:
            raise fail(side, f"actor {name} not {wanted} after {timeout:g}s: last answer "
                             f"{status} {seen or body}")
        await side.sleep(1.0)


async def _run(side: Side, sid: str, entrypoint: str) -> dict[str, Any]:
    await submit(side, {"entrypoint": entrypoint, "submission_id": sid})
    _seen, _messages, done = await follow(side, sid)
    if done["status"] != "SUCCEEDED":
        logs = (await ok(side, "GET", f"/api/jobs/{sid}/logs"))["logs"]
        raise fail(side, f"job {sid} ended {done['status']}: {done['message']}\n{logs[-3000:]}")
    return done


async def actors_api(side: Side) -> dict[str, Any]:
    """The whole actors sequence (module docstring); observations by name."""
    out: dict[str, Any] = {}
    names = Names()
    jobs: dict[str, str] = {}
    done = await _run(side, "act-a", MAKE)
    jobs[done["job_id"]] = "a"
    # The driver has exited; its actor dies once the GCS hears of it. The job's supervisor
    # actor exits a moment after it wrote the job's status.
    await _wait_state(side, "owned", "DEAD", timeout=60.0)
    await _wait_state(side, "_ray_internal_job_actor_act-a", "DEAD", timeout=60.0)
    status, plain = await _listing(side, [])
    status_d, detail = await _listing(side, [("detail", "true")])
    _learn(names, _rows(detail), jobs)
    out["list_after_a"] = (status, _shape(plain, names))
    ours = {"data": {"result": {**detail["data"]["result"], "result": [
        r for r in _rows(detail) if r["ray_namespace"] == NAMESPACE]}},
        "result": detail["result"], "msg": detail["msg"]}
    out["detail_after_a"] = (status_d, _shape(ours, names))
    logs = (await ok(side, "GET", "/api/jobs/act-a/logs"))["logs"]
    out["a_printed"] = "pong pong\n" in logs

    done = await _run(side, "act-b", USE)
    jobs[done["job_id"]] = "b"
    await _wait_state(side, "_ray_internal_job_actor_act-b", "DEAD", timeout=60.0)
    logs = (await ok(side, "GET", "/api/jobs/act-b/logs"))["logs"]
    out["b_found_keeper"] = "found pong\n" in logs
    status, detail = await _listing(side, [("detail", "1")])
    _learn(names, _rows(detail), jobs)
    out["victim"] = names.value([r for r in _rows(detail) if r["name"] == "victim"])
    out["states_after_b"] = sorted((r["name"], r["state"], r["is_detached"])
                                   for r in _rows(detail))
    for what, query in QUERIES.items():
        status, body = await _listing(side, query)
        if isinstance(body, dict) and isinstance(body.get("msg"), str):
            body["msg"] = sort_column_set(_predicate_message(body["msg"]))
        shape = _shape(body, names)
        if what == "limit_2" and isinstance(shape.get("data"), dict) and "rows" in shape["data"]:
            # which two rows come first depends on the random actor ids: only how many
            shape["data"] = {"counts": shape["data"]["counts"],
                             "rows": len(shape["data"]["rows"])}
        out[f"query:{what}"] = (status, shape)
    status, body = await _listing(side, [("filter_keys", "name"), ("filter_predicates", "~"),
                                         ("filter_values", "x")])
    out["query:bad_predicate"] = (status, body.get("result"),
                                  _predicate_message(str(body.get("msg"))), body.get("data"))

    done = await _run(side, "act-d", CRASH)
    logs = (await ok(side, "GET", "/api/jobs/act-d/logs"))["logs"]
    # the exception types a caller sees depend on when the GCS hears of each death (real Ray
    # said ActorUnavailableError, then ActorDiedError twice): kept for a look, not compared
    out[f"{MEASURED}d_printed"] = [line for line in logs.split("\n")
                                   if line.startswith(("crash ", "ping "))]
    out["d_second_ping_failed"] = any(line.startswith("ping 1 ") and line != "ping 1 pong"
                                      for line in logs.split("\n"))
    status, detail = await _listing(side, [("detail", "true"), ("filter_keys", "name"),
                                           ("filter_predicates", "="),
                                           ("filter_values", "fragile")])
    _learn(names, _rows(detail), jobs | {done["job_id"]: "d"})
    out["fragile"] = (status, _shape(detail, names))

    before = await _wait_state(side, "keeper", "ALIVE")
    await side.restart_head()
    # (a GCS that went down before it heard of the drain reloads the actor ALIVE on the old
    # node until that node is declared dead: what is awaited is the actor on the new head)
    after = await _wait_state(side, "keeper", "ALIVE", not_on=before["node_id"])
    out["keeper_after_restart"] = {
        "new_pid": after["pid"] != before["pid"],
        **{k: after[k] for k in ("state", "num_restarts", "num_restarts_due_to_node_preemption",
                                 "death_cause", "is_detached", "name", "class_name")}}
    done = await _run(side, "act-c", FIND)
    logs = (await ok(side, "GET", "/api/jobs/act-c/logs"))["logs"]
    out["c_found_keeper"] = "found pong\n" in logs
    status, detail = await _listing(side, [("detail", "true")])
    out["states_after_restart"] = sorted(
        (r["name"], r["state"]) for r in _rows(detail) if r["ray_namespace"] == NAMESPACE)
    return out
