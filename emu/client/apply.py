"""``kubectl apply`` for the emulated cluster: a dict, a list of dicts, or (multi-document) YAML.

Each object is created when it does not exist; otherwise the change since the last apply is sent as
a JSON merge patch computed kubectl's way, from three versions: the last-applied configuration
(kept in the ``kubectl.kubernetes.io/last-applied-configuration`` annotation), the new manifest and
the live object. Fields the manifest dropped since the last apply are removed; fields others set
(status, defaults, a controller's labels) are left alone.

A document with only ``metadata.generateName`` is created, as ``kubectl create -f`` would (the
samples that use it say to). Every document is checked before anything is sent, so a malformed
manifest changes nothing; an
object the API server refuses does not stop the others (`apply_each` reports each object's outcome).
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import yaml

from ..apiserver.errors import ApiError, BadRequest, is_not_found
from ..apiserver.validation import strict_error
from .client import Client

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class _KeyTracking(yaml.SafeLoader):
    """PyYAML's safe loader, noting each mapping key given twice (PyYAML keeps the last value
    silently; kube-apiserver's strict YAML decoding refuses the document)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[tuple[int, Any]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: list[Any] = []
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                self.repeated.append((key_node.start_mark.line, key))
            else:
                seen.append(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> list[tuple[Any, list[str]]]:
    """The documents of ``text``, each with its repeated keys in kube's words (``line 10: key
    "paused" already set in map``, the line counted from the document's first line)."""
    loader = _KeyTracking(text)
    out: list[tuple[Any, list[str]]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node said there is one
            loader.repeated = []
            data = loader.construct_document(node)
            first = node.start_mark.line
            out.append((data, [f'line {line - first + 1}: key "{key}" already set in map'
                               for line, key in loader.repeated]))
    finally:
        loader.dispose()
    return out


def parse_manifests(manifest: str | dict[str, Any] | list[dict[str, Any]], *,
                    strict: bool = False) -> list[dict[str, Any]]:
    """The objects in a manifest, checked for shape; raises `BadRequest` naming what is wrong.
    ``strict`` (``fieldValidation=Strict``) refuses a YAML document that gives a key twice, with
    kube-apiserver's strict decoding error; otherwise the last value counts, as in kube."""
    repeated: list[list[str]] = []
    if isinstance(manifest, str):
        try:
            loaded = [(d, r) for d, r in load_yaml(manifest) if d is not None]
        except yaml.YAMLError as err:
            raise BadRequest(f"error parsing YAML manifest: {err}") from None
        docs = [d for d, _ in loaded]
        repeated = [r for _, r in loaded]
    elif isinstance(manifest, dict):
        docs = [manifest]
    elif isinstance(manifest, list):
        docs = list(manifest)
    else:
        raise BadRequest("a manifest is YAML text, a mapping or a list of mappings, not "
                         f"{type(manifest).__name__}")
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        where = f"document {i + 1}"
        if strict and i < len(repeated) and repeated[i]:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            version = doc.get("apiVersion") if isinstance(doc, dict) else None
            problem = "yaml: unmarshal errors:\n  " + "\n  ".join(repeated[i])
            if isinstance(kind, str) and isinstance(version, str):
                raise strict_error(kind, version, [problem])
            raise BadRequest(f"{where}: strict decoding error: {problem}")
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend(parse_manifests(doc["items"]))
            continue
        if not isinstance(doc, dict):
            raise BadRequest(f"{where}: expected a mapping, got {type(doc).__name__}")
        for field in ("apiVersion", "kind"):
            if not isinstance(doc.get(field), str) or not doc[field]:
                raise BadRequest(f"{where}: '{field}' is missing or not a string")
        meta = doc.get("metadata")
        if not isinstance(meta, dict):
            raise BadRequest(f"{where} ({doc['kind']}): 'metadata' is missing or not a mapping")
        if (not isinstance(meta.get("name"), str) or not meta["name"]) and not (
                isinstance(meta.get("generateName"), str) and meta["generateName"]):
            raise BadRequest(f"{where} ({doc['kind']}): metadata.name is required for apply")
        out.append(doc)
    return out


def three_way_merge_patch(original: Any, modified: Any, current: Any) -> Any:
    """The merge patch that turns ``current`` into ``modified``, deleting only what ``original``
    (the last applied configuration) had and ``modified`` no longer has."""
    if not isinstance(modified, dict) or not isinstance(current, dict):
        return modified
    original = original if isinstance(original, dict) else {}
    patch: dict[str, Any] = {}
    for key in original:
        if key not in modified and key in current:
            patch[key] = None
    for key, value in modified.items():
        cur = current.get(key)
        if isinstance(value, dict) and isinstance(cur, dict):
            sub = three_way_merge_patch(original.get(key), value, cur)
            if sub:
                patch[key] = sub
        elif value != cur or key not in current:
            patch[key] = value
    return patch


@attrs.frozen
class ApplyOutcome:
    """What ``kubectl apply`` did with one object: ``outcome`` is ``created``, ``configured``,
    ``unchanged`` or the error's message; ``object`` the result (None on error)."""

    kind: str
    name: str
    namespace: str | None
    outcome: str
    object: dict[str, Any] | None = attrs.field(default=None, repr=False, eq=False)
    error: ApiError | None = attrs.field(default=None, repr=False, eq=False)

    @property
    def ok(self) -> bool:
        return self.error is None


async def _apply_one(client: Client, doc: dict[str, Any], namespace: str | None) -> ApplyOutcome:
    doc = orjson.loads(orjson.dumps(doc))
    meta = doc.setdefault("metadata", {})
    if namespace is not None and not meta.get("namespace"):
        meta["namespace"] = namespace
    applied = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS).decode()
    annotations = meta.setdefault("annotations", {}) or {}
    meta["annotations"] = annotations
    annotations[LAST_APPLIED] = applied
    # The request's namespace, as kubectl's context gives it; cluster-scoped kinds ignore it.
    kind, name, ns = doc["kind"], meta.get("name"), meta.get("namespace") or namespace or "default"
    if not name:  # generateName only: what `kubectl create -f` does (the samples say to use it)
        try:
            created = await client.create(doc, namespace=ns)
        except ApiError as err:
            return ApplyOutcome(kind, meta["generateName"], ns, str(err), None, err)
        return ApplyOutcome(kind, created["metadata"]["name"],
                            created["metadata"].get("namespace"), "created", created)
    try:
        try:
            live = await client.get(kind, name, ns, api_version=doc["apiVersion"])
        except ApiError as err:
            if not is_not_found(err):
                raise
            created = await client.create(doc, namespace=ns)
            return ApplyOutcome(kind, name, created["metadata"].get("namespace"), "created",
                                created)
        last = (live.get("metadata", {}).get("annotations") or {}).get(LAST_APPLIED)
        original = orjson.loads(last) if last else {}
        patch = three_way_merge_patch(original, doc, live)
        if not patch:
            return ApplyOutcome(kind, name, live["metadata"].get("namespace"), "unchanged", live)
        result = await client.patch(kind, name, patch, ns, patch_type="merge",
                                    api_version=doc["apiVersion"])
        return ApplyOutcome(kind, name, result["metadata"].get("namespace"), "configured",
                            result)
    except ApiError as err:
        return ApplyOutcome(kind, name, ns, str(err), None, err)


async def apply_each(client: Client, manifest: str | dict[str, Any] | list[dict[str, Any]], *,
                     namespace: str | None = None) -> list[ApplyOutcome]:
    """``kubectl apply -f``: every object in ``manifest`` in order, going on past one the API
    server refuses; each object's `ApplyOutcome`. A malformed manifest (`BadRequest`) is refused
    before anything is sent, as kubectl's client-side parse does."""
    docs = parse_manifests(manifest, strict=client.field_validation == "Strict")
    return [await _apply_one(client, doc, namespace) for doc in docs]


async def apply(client: Client, manifest: str | dict[str, Any] | list[dict[str, Any]], *,
                namespace: str | None = None) -> list[dict[str, Any]]:
    """Create or update every object in ``manifest``; the resulting objects, in order.

    Every object is tried (as `apply_each`); when any was refused, the first refusal is raised
    after the rest were applied, with a note per object saying what happened to it."""
    outcomes = await apply_each(client, manifest, namespace=namespace)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        err = failed[0].error
        assert err is not None
        if len(outcomes) > 1:
            for o in outcomes:
                err.add_note(f"{o.kind}/{o.name}: {o.outcome}")
        raise err
    return [o.object for o in outcomes if o.object is not None]
