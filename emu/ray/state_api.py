"""The dashboard's state API for actors: ``GET /api/v0/actors``, as Ray 2.x answers it.

Ports the behaviour of ``python/ray/dashboard/modules/state/state_head.py`` (``list_actors``),
``dashboard/state_api_utils.py`` (``options_from_req``, ``do_filter``, ``handle_list_api``),
``dashboard/state_aggregator.py`` (``StateAPIManager.list_actors``) and the ``ActorState`` schema
of ``python/ray/util/state/common.py``, over the fake GCS's actor records:

- the body is ``rest_response``'s ``{"result": bool, "msg": str, "data": {"result": ...}}``; a
  list answer's ``data.result`` is ``ListApiResponse``: ``total`` (every actor the GCS knows),
  ``num_after_truncation`` (what the GCS returned plus what its own filters dropped),
  ``num_filtered`` (after every filter), ``result`` (sorted by actor id, cut at ``limit``,
  default 100), ``partial_failure_warning`` ``""`` and ``warnings`` null;
- ``detail`` (``true``/``1``/``false``/``0``) adds the detail columns; without it a row has
  ``actor_id, class_name, state, job_id, name, node_id, pid, ray_namespace``;
- filters are ``filter_keys``/``filter_predicates``/``filter_values`` triples, ``=`` or ``!=``,
  strings compared case-insensitively, on the filterable columns only; ``state=`` must be an
  actor state (checked as the GCS-side filter is built);
- bad input answers 400 with ``result`` false, Ray's message in ``msg`` and ``data.result`` null.

Rows: ids in hex, ``num_restarts`` and its two companions as strings (protobuf's JSON for uint64),
``death_cause`` only for a DEAD actor, as ``{"actor_died_error_context": {...}}`` (or
``creation_task_failure_context`` / ``actor_unschedulable_context``) with Ray's message.
"""

from __future__ import annotations

from typing import Any

#: ``ActorState`` columns in schema order: (name, detail only, filterable).
ACTOR_COLUMNS: tuple[tuple[str, bool, bool], ...] = (
    ("actor_id", False, True), ("class_name", False, True), ("state", False, True),
    ("job_id", False, True), ("name", False, True), ("node_id", False, True),
    ("pid", False, True), ("ray_namespace", False, True),
    ("serialized_runtime_env", True, False), ("required_resources", True, False),
    ("death_cause", True, False), ("is_detached", True, False),
    ("placement_group_id", True, True), ("repr_name", True, True),
    ("num_restarts", True, False), ("num_restarts_due_to_lineage_reconstruction", True, False),
    ("num_restarts_due_to_node_preemption", True, False), ("call_site", True, False),
    ("label_selector", True, False), ("fallback_strategy", True, False),
)
FILTERABLE = frozenset(name for name, _detail, filterable in ACTOR_COLUMNS if filterable)
#: ``ActorTableData.ActorState`` names.
ACTOR_STATES = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD")
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
#: ``state_aggregator.GCS_QUERY_FAILURE_WARNING``: the 500's message when the GCS can't answer.
GCS_QUERY_FAILURE = (
    "Failed to query data from GCS. It is due to (1) GCS is unexpectedly failed. (2) GCS is "
    "overloaded. (3) There's an unexpected network issue. Please check the gcs_server.out log "
    "to find the root cause.")


class BadRequest(ValueError):
    """The request's options were refused (400); the text is Ray's."""


def rest_body(ok: bool, msg: str, result: Any) -> dict[str, Any]:
    """``rest_response`` with ``convert_google_style=False``, as ``do_reply`` sends it."""
    return {"result": ok, "msg": msg, "data": {"result": result}}


def _to_bool(text: str) -> bool:
    """``convert_string_to_type(val, bool)``."""
    if text in ("False", "false", "0"):
        return False
    if text in ("True", "true", "1"):
        return True
    raise BadRequest(f"Failed to convert a value {text} of type <class 'str'> to <class 'bool'>")


def _to_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"invalid literal for int() with base 10: {text!r}") from None


def death_cause(actor: dict[str, Any]) -> dict[str, Any] | None:
    """The ``ActorDeathCause`` of a DEAD actor as the state API renders it, else None."""
    if actor.get("state") != "DEAD":
        return None
    context = dict(actor.get("death_context") or {})
    kind = context.pop("kind", "actor_died_error_context")
    message = actor.get("death_cause") or ""
    if kind == "creation_task_failure_context":
        return {kind: {"formatted_exception_string": message}}
    if kind != "actor_died_error_context":
        return {kind: {"error_message": message}}
    out: dict[str, Any] = {
        "error_message": message, "owner_id": actor.get("owner_id") or "",
        "owner_ip_address": actor.get("owner_ip") or "",
        "node_ip_address": actor.get("node_ip") or "", "pid": int(actor.get("pid") or 0),
        "name": actor.get("name") or "", "ray_namespace": actor.get("ray_namespace") or "",
        "class_name": actor.get("class_name") or "", "actor_id": actor["actor_id"],
        "reason": context.get("reason", "WORKER_DIED"),
        "never_started": bool(context.get("never_started", False)),
    }
    if context.get("node_death_info"):
        out["node_death_info"] = dict(context["node_death_info"])
    return {kind: out}


def actor_state(actor: dict[str, Any]) -> dict[str, Any]:
    """Every ``ActorState`` column of one GCS actor record."""
    required = actor.get("required_resources")
    return {
        "actor_id": actor["actor_id"], "class_name": actor.get("class_name") or "",
        "state": actor["state"], "job_id": actor.get("job_id") or "",
        "name": actor.get("name") or "",
        "node_id": actor.get("last_node_id") or actor.get("node_id") or None,
        "pid": int(actor.get("pid") or 0), "ray_namespace": actor.get("ray_namespace") or "",
        "serialized_runtime_env": "{}",
        "required_resources": dict(required) if isinstance(required, dict) else {},
        "death_cause": death_cause(actor), "is_detached": bool(actor.get("detached")),
        "placement_group_id": None, "repr_name": actor.get("repr_name") or "",
        "num_restarts": str(int(actor.get("num_restarts") or 0)),
        "num_restarts_due_to_lineage_reconstruction": "0",
        "num_restarts_due_to_node_preemption": str(int(actor.get("num_preempted") or 0)),
        "call_site": None, "label_selector": dict(actor.get("label_selector") or {}),
        "fallback_strategy": None,
    }


def _matches(row: dict[str, Any], column: str, predicate: str, value: str) -> bool:
    """``do_filter``'s comparison of one row with one filter."""
    if column not in row:
        return False
    have = row[column]
    if isinstance(have, str):
        same = have.lower() == value.lower()
    elif isinstance(have, bool):
        same = have == _to_bool(value)
    elif isinstance(have, int):
        same = have == _to_int(value)
    else:
        same = have == value
    return same if predicate == "=" else not same


def list_actors(actors: list[dict[str, Any]], query: dict[str, list[str]]
                ) -> tuple[int, dict[str, Any]]:
    """``GET /api/v0/actors`` over the GCS's actor records: the status and the body."""
    try:
        return 200, rest_body(True, "", _list(actors, query))
    except BadRequest as err:
        return 400, rest_body(False, str(err), None)


def _list(actors: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
    def last(name: str) -> str | None:
        values = query.get(name)
        return values[-1] if values else None

    limit_text = last("limit")
    limit = DEFAULT_LIMIT if limit_text is None else _to_int(limit_text)
    if limit > MAX_LIMIT:
        raise BadRequest(
            f"Given limit {limit} exceeds the supported limit {MAX_LIMIT}. Use a lower limit, "
            "or set the `RAY_MAX_LIMIT_FROM_API_SERVER` environment variable to a larger value.")
    detail_text = last("detail")
    detail = False if detail_text is None else _to_bool(detail_text)
    keys = query.get("filter_keys", [])
    predicates = query.get("filter_predicates", [])
    values = query.get("filter_values", [])
    if len(keys) != len(values):
        raise BadRequest(f"filter_keys and filter_values differ in number: {len(keys)} keys, "
                         f"{len(values)} values")
    filters = list(zip(keys, predicates, values, strict=False))
    for _key, predicate, _value in filters:
        if predicate not in ("=", "!="):
            raise BadRequest(f"Unsupported filter predicate {predicate} is given. Available "
                             "predicates: =, !=.")
    for key, predicate, value in filters:
        if key == "state" and predicate == "=" and value.upper() not in ACTOR_STATES:
            raise BadRequest(f"Invalid actor state for filtering: {value.upper()}")
    rows = [actor_state(a) for a in actors]
    total = len(rows)
    kept = []
    for row in rows:
        match = True
        for key, predicate, value in filters:
            column = key.lower()
            if column not in FILTERABLE:
                raise BadRequest(
                    f"The given filter column {column} is not supported. Enter filters with "
                    "\u2013-filter key=value or \u2013-filter key!=value Supported filter "
                    "columns: {" + ", ".join(repr(c) for c in sorted(FILTERABLE)) + "}")
            if not _matches(row, column, predicate, value):
                match = False
                break
        if match:
            kept.append(row)
    columns = [name for name, only_detail, _f in ACTOR_COLUMNS if detail or not only_detail]
    kept.sort(key=lambda row: row["actor_id"])
    return {
        "total": total, "num_after_truncation": total, "num_filtered": len(kept),
        "result": [{c: row[c] for c in columns} for row in kept[:limit]],
        "partial_failure_warning": "", "warnings": None,
    }
