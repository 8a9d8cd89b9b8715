"""CRD structural schemas, enforced as kube-apiserver enforces them on custom resources.

Why: a custom resource with ``replicas: "two"`` must be refused with kube-apiserver's 422, not
stored for the operator to crash on; and applying the real KubeRay CRDs must keep their schema
defaults. `StructuralSchema` compiles a CRD version's ``openAPIV3Schema`` once and gives a kind
its defaulter and validator (`KindInfo.defaulter` / ``validator``), in kube-apiserver's order:

1. **pruning** (``structuralpruning``): null values of fields that are not ``nullable`` are
   dropped, then fields the schema does not declare (below ``x-kubernetes-preserve-unknown-fields``
   everything is kept; ``additionalProperties`` keeps map entries); ``apiVersion``, ``kind`` and
   ``metadata`` at the root are never pruned;
2. **defaulting** (``structuraldefaulting``): each missing property with a ``default`` gets a copy
   of it, in every object present, in arrays and maps too;
3. **validation**: the schema through the `jsonschema` library (types, ``required``, ``enum``,
   ``minimum``/``maximum``, ``pattern``, lengths and item counts, ``x-kubernetes-int-or-string``,
   ``format: int32/int64`` ranges), each error turned into kube-apiserver's cause and message
   (``spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
   "string"``, ``spec.headGroupSpec: Required value``, ``Unsupported value``); then the
   ``x-kubernetes-validations`` CEL rules through `celpy` (cel-python), ``oldSelf`` transition
   rules only on update when the old value exists, as kube-apiserver runs them. The schema is
   checked node by node, each subtree's errors remembered by its JSON, so an update re-walks only
   the nodes above what it changed (a node with combinators, ``anyOf`` ..., is one jsonschema
   call); the causes and their order are one whole walk's (tests/apiserver/test_schema.py).

A status-only write skips validation, as the status subresource's strategy validates only status
fields (none of the CRDs here constrain status).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import jsonschema
import orjson

from .errors import StatusCause
from .validation import go_value, invalid, not_supported, required

Obj = dict[str, Any]

_ROOT_KEEP = ("apiVersion", "kind", "metadata")
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _go_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _to_json_schema(node: Any) -> Any:
    """An OpenAPI v3 structural schema as JSON Schema (draft 7): ``nullable`` → ``null`` allowed,
    ``x-kubernetes-int-or-string`` → integer or string; vendor keys and ``default`` dropped."""
    if not isinstance(node, dict):
        return node
    out: Obj = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("default", "nullable", "description",
                                                      "example", "externalDocs", "format"):
            continue
        if key == "properties":
            out[key] = {k: _to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _to_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_to_json_schema(v) for v in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


#: How many bodies a schema remembers the causes of before it starts over.
_CHECKED_MAX = 4096


class StructuralSchema:
    """One CRD version's ``openAPIV3Schema``, compiled: `prune_and_default` and `validate`."""

    def __init__(self, openapi: Obj) -> None:
        if not isinstance(openapi, dict):
            raise ValueError("an openAPIV3Schema is a mapping")
        # a private copy: compiled schemas are cached by content, and the per-node caches are
        # keyed by the nodes' identities, so a caller changing its dict later must not reach them
        openapi = copy.deepcopy(openapi)
        self.openapi = openapi
        js = _to_json_schema(openapi)
        jsonschema.Draft7Validator.check_schema(js)
        self._validator = jsonschema.Draft7Validator(js)
        self._js = js
        self._nodes: dict[int, _Node] = {}
        self._rules_below: dict[int, bool] = {}
        self._cel: dict[str, Any] = {}
        #: Schema causes by the body's canonical bytes: a controller writes the same spec again
        #: and again (jsonschema's walk is ~0.3 ms for a RayCluster; the key ~5 µs). Bounded, and
        #: the causes are frozen values, so a hit hands out the same answer a miss would.
        self._checked: dict[bytes, tuple[StatusCause, ...]] = {}

    # -- pruning and defaulting --------------------------------------------------------------------

    def prune_and_default(self, obj: Obj) -> Obj:
        """``obj`` pruned and defaulted (a new object; ``obj`` is not changed)."""
        out = self._walk(obj, self.openapi, root=True)
        assert isinstance(out, dict)
        return out

    def _walk(self, value: Any, schema: Any, *, root: bool = False) -> Any:
        if not isinstance(schema, dict):
            return value
        if isinstance(value, dict):
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or \
                extra is True or (props is None and extra is None)
            out: Obj = {}
            for key, item in value.items():
                if root and key in _ROOT_KEEP:
                    out[key] = item
                    continue
                sub = (props or {}).get(key)
                if sub is None and isinstance(extra, dict):
                    sub = extra
                if sub is None and not keep_unknown:
                    continue  # pruned: the schema does not declare it
                if item is None and not (sub or {}).get("nullable"):
                    continue  # a null of a non-nullable field is pruned before defaulting
                out[key] = self._walk(item, sub) if sub is not None else item
            for key, sub in (props or {}).items():
                if key not in out and isinstance(sub, dict) and "default" in sub:
                    out[key] = self._walk(copy.deepcopy(sub["default"]), sub)
            return out
        if isinstance(value, list):
            items = schema.get("items")
            return [self._walk(v, items) for v in value if v is not None or
                    (isinstance(items, dict) and items.get("nullable"))]
        return value

    def unknown_fields(self, obj: Obj) -> list[str]:
        """The fields of ``obj`` pruning would drop because the schema does not declare them,
        as kube-apiserver names them for ``fieldValidation`` (``spec.ports[0].unknownNested``),
        sorted as it sorts them. Follows `_walk`: below ``x-kubernetes-preserve-unknown-fields``
        nothing is unknown, ``additionalProperties`` declares every map key, a null is pruned
        without being unknown."""
        out: list[str] = []
        self._unknown(obj, self.openapi, [], out, root=True)
        return sorted(out)

    def _unknown(self, value: Any, schema: Any, parts: list[Any], out: list[str], *,
                 root: bool = False) -> None:
        if not isinstance(schema, dict):
            return
        if isinstance(value, dict):
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or \
                extra is True or (props is None and extra is None)
            for key, item in value.items():
                if root and key in _ROOT_KEEP:
                    continue
                sub = (props or {}).get(key)
                if sub is None and isinstance(extra, dict):
                    sub = extra
                if sub is None:
                    if not keep_unknown:
                        out.append(_path([*parts, key]))
                    continue
                if item is not None:
                    self._unknown(item, sub, [*parts, key], out)
        elif isinstance(value, list):
            items = schema.get("items")
            for i, item in enumerate(value):
                if item is not None:
                    self._unknown(item, items, [*parts, i], out)

    # -- validation --------------------------------------------------------------------------------

    def validate(self, obj: Obj, old: Obj | None = None) -> list[StatusCause]:
        """kube-apiserver's causes for ``obj`` (``old`` for transition rules), schema errors first
        in document order, then CEL rules."""
        body = {k: v for k, v in obj.items() if k != "metadata"}
        try:
            key: bytes | None = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):  # e.g. an integer past 64 bits: not cached
            key = None
        found = self._checked.get(key) if key is not None else None
        if found is None:
            if key is None:
                found = self._whole_causes(body)
            else:
                found = self._split_causes(body)
                if len(self._checked) >= _CHECKED_MAX:
                    self._checked.clear()
                self._checked[key] = found
        causes = list(found)
        causes.extend(self._cel_rules(obj, old, self.openapi, []))
        return causes

    def _whole_causes(self, body: Obj) -> tuple[StatusCause, ...]:
        """The schema's causes for ``body`` in one jsonschema walk of all of it."""
        errors = sorted(self._validator.iter_errors(body),
                        key=lambda e: (_path(list(e.absolute_path)), e.validator))
        return tuple(cause for err in errors for cause in self._cause(err))

    def _split_causes(self, body: Obj) -> tuple[StatusCause, ...]:
        """`_whole_causes`, node by node, each subtree's errors remembered by its JSON (an
        update of ``spec.workerGroupSpecs[0].replicas`` walks only the nodes above it). The
        body is validated as the JSON it is stored as (a decoded copy: nothing the caller
        keeps is held, and the bytes are an exact key)."""
        wire = orjson.loads(orjson.dumps(body))
        root = self._nodes.get(id(self._js))
        if root is None:
            root = self._nodes[id(self._js)] = _Node(self._js)
        # the root's answer is remembered by `validate` (``_checked``), not here again
        errors = sorted(root.errors(self, wire), key=lambda e: (_path(e[0]), e[1]))
        return tuple(cause for err in errors for cause in _cause_of(*err))

    def _errors(self, value: Any, schema: Any) -> tuple[_Err, ...]:
        node = self._nodes.get(id(schema))
        if node is None:
            node = self._nodes[id(schema)] = _Node(schema)
        cls = value.__class__
        key: Any = orjson.dumps(value) if cls is dict or cls is list else (cls, value)
        found = node.memo.get(key)
        if found is None:
            found = node.errors(self, value)
            if len(node.memo) >= _NODE_MEMO_MAX:
                node.memo.clear()
            node.memo[key] = found
        return found

    @staticmethod
    def _cause(err: jsonschema.ValidationError) -> list[StatusCause]:
        return _cause_of(tuple(err.absolute_path), err.validator, err.validator_value,
                         err.instance, err.message)

    def _cel_rules(self, value: Any, old: Any, schema: Any, parts: list[Any]
                   ) -> list[StatusCause]:
        """Formats with ranges and ``x-kubernetes-validations``, walking value and schema (not
        below a schema node that holds neither: most of a Pod template)."""
        if not isinstance(schema, dict) or value is None or not self._has_rules(schema):
            return []
        out: list[StatusCause] = []
        fmt = schema.get("format")
        if fmt in _INT_RANGES and isinstance(value, int) and not isinstance(value, bool):
            low, high = _INT_RANGES[fmt]
            if not low <= value <= high:
                path = _path(parts)
                out.append(invalid(path, value, f"{path} in body must be of type {fmt}: "
                                                f"{go_value(value)}"))
        for rule in schema.get("x-kubernetes-validations") or []:
            text = str(rule.get("rule", ""))
            if "oldSelf" in text and old is None:
                continue  # a transition rule runs only when an old value exists
            ok = self._eval(text, value, old)
            if ok is False:
                path = _path(parts)
                message = rule.get("message") or f"failed rule: {text}"
                out.append(invalid(path, _go_type(value) if isinstance(value, (dict, list))
                                   else value, message))
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key, item in value.items():
                sub = props.get(key, extra if isinstance(extra, dict) else None)
                if sub is not None:
                    prev = old.get(key) if isinstance(old, dict) else None
                    out.extend(self._cel_rules(item, prev, sub, [*parts, key]))
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                # list items are correlated with old ones only for map lists; keep it simple:
                # by index when the old list is as long
                prev = old[i] if isinstance(old, list) and i < len(old) else None
                out.extend(self._cel_rules(item, prev, schema["items"], [*parts, i]))
        return out

    def _has_rules(self, schema: Obj) -> bool:
        """Whether ``schema`` or a schema below it has a ranged format or a CEL rule (by node,
        remembered: the nodes belong to this schema's ``openapi``)."""
        found = self._rules_below.get(id(schema))
        if found is None:
            found = schema.get("format") in _INT_RANGES or \
                bool(schema.get("x-kubernetes-validations"))
            subs = list((schema.get("properties") or {}).values())
            subs += [schema.get("additionalProperties"), schema.get("items")]
            for sub in subs:
                if found:
                    break
                found = isinstance(sub, dict) and self._has_rules(sub)
            self._rules_below[id(schema)] = found
        return found

    def _eval(self, rule: str, value: Any, old: Any) -> bool | None:
        """The rule's result; None when cel-python cannot compile or run it (kube-apiserver would
        have refused such a CRD; here the rule is skipped rather than failing every write)."""
        import celpy

        program = self._cel.get(rule)
        if program is None:
            try:
                env = celpy.Environment()
                program = env.program(env.compile(rule))
            except Exception:  # any compile error: the rule is skipped
                self._cel[rule] = False
                return None
            self._cel[rule] = program
        if program is False:
            return None
        activation = {"self": celpy.json_to_cel(value)}
        if old is not None:
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            result = program.evaluate(activation)
        except Exception:  # a runtime error is a failed rule in kube
            return False
        return bool(result) if not isinstance(result, Exception) else False

    # -- KindInfo hooks -------------------------------------------------------------------------

    def defaulter(self, obj: Obj, old: Obj | None) -> None:
        """A `KindInfo.defaulter`: prune and default in place (spec and any other top-level
        field; on a status-only write the untouched spec is left as stored)."""
        new = self.prune_and_default(obj)
        obj.clear()
        obj.update(new)

    def validator(self, obj: Obj, old: Obj | None) -> list[StatusCause]:
        """A `KindInfo.validator`. An update that leaves everything but metadata and status as
        it was is not re-validated (kube-apiserver's validation ratcheting: an unchanged value
        is not refused again), which also keeps finalizer and label writes cheap."""
        if old is not None and all(obj.get(k) == old.get(k) for k in sorted(set(obj) | set(old))
                                   if k not in ("metadata", "status")):
            return []
        return self.validate(obj, old)



#: One jsonschema error, relative to the node it was found under: (path parts, keyword, the
#: keyword's value in the schema, the instance, jsonschema's message).
_Err = tuple[tuple[Any, ...], Any, Any, Any, str]
#: Keywords whose errors depend on more than the node's own value and its children one by one:
#: a node holding any of them is validated whole (by jsonschema), its answer still remembered.
_WHOLE_KEYWORDS = frozenset(("patternProperties", "dependencies", "propertyNames", "contains",
                             "additionalItems", "if", "then", "else", "allOf", "anyOf", "oneOf",
                             "not", "$ref", "definitions"))
#: How many subtrees a schema node remembers the errors of before it starts over.
_NODE_MEMO_MAX = 256


class _Node:
    """One node of a compiled schema for `StructuralSchema._errors`: its own keywords (type,
    required, enum, bounds ...) checked by jsonschema on the node alone, ``properties``,
    ``additionalProperties`` and ``items`` applied child by child, as jsonschema applies them
    (only to an object, only to an array)."""

    __slots__ = ("extra", "items", "local", "memo", "props", "whole")

    def __init__(self, schema: Any) -> None:
        self.memo: dict[Any, tuple[_Err, ...]] = {}
        self.whole: jsonschema.Draft7Validator | None = None
        self.local: jsonschema.Draft7Validator | None = None
        self.props: dict[str, Any] = {}
        self.extra: Any = None
        self.items: Any = None
        props = schema.get("properties", {}) if isinstance(schema, dict) else None
        extra = schema.get("additionalProperties") if isinstance(schema, dict) else None
        items = schema.get("items") if isinstance(schema, dict) else None
        if not isinstance(schema, dict) or schema.keys() & _WHOLE_KEYWORDS or \
                not isinstance(props, dict) or \
                not all(isinstance(sub, dict) for sub in props.values()) or \
                not (extra is None or isinstance(extra, bool | dict)) or \
                not (items is None or isinstance(items, dict)):
            self.whole = jsonschema.Draft7Validator(schema)
            return
        self.props = props
        self.extra = extra if isinstance(extra, dict) else None
        self.items = items
        local = {k: v for k, v in schema.items()
                 if k not in ("properties", "additionalProperties", "items")}
        if extra is False:  # which keys are additional depends on the declared ones
            local["additionalProperties"] = False
            local["properties"] = {k: True for k in props}
        if local:
            self.local = jsonschema.Draft7Validator(local)

    def errors(self, schema: StructuralSchema, value: Any) -> tuple[_Err, ...]:
        if self.whole is not None:
            return tuple((tuple(e.absolute_path), e.validator, e.validator_value, e.instance,
                          e.message) for e in self.whole.iter_errors(value))
        out: list[_Err] = []
        if self.local is not None:
            out.extend((tuple(e.absolute_path), e.validator, e.validator_value, e.instance,
                        e.message) for e in self.local.iter_errors(value))
        if value.__class__ is dict:
            props = self.props
            extra = self.extra
            for key, item in value.items():
                sub = props.get(key, extra)
                if sub is not None:
                    for parts, *rest in schema._errors(item, sub):
                        out.append(((key, *parts), *rest))
        elif value.__class__ is list and self.items is not None:
            for i, item in enumerate(value):
                for parts, *rest in schema._errors(item, self.items):
                    out.append(((i, *parts), *rest))
        return tuple(out)


def _cause_of(parts_: tuple[Any, ...], kind: Any, limit: Any, value: Any, message: str
              ) -> list[StatusCause]:
    """kube-apiserver's cause(s) for one jsonschema error."""
    parts = list(parts_)
    path = _path(parts)
    if kind == "required":
        assert isinstance(value, dict)
        return [required(_path([*parts, name])) for name in limit if name not in value]
    if kind == "type":
        want = ",".join(limit) if isinstance(limit, list) else str(limit)
        got = _go_type(value)
        return [invalid(path, got, f"{path} in body must be of type {want}: \"{got}\"")]
    if kind == "enum":
        return [not_supported(path, value, tuple(str(x) for x in limit))]
    if kind == "minimum":
        return [invalid(path, value, f"{path} in body should be greater than or equal to "
                                     f"{limit}")]
    if kind == "maximum":
        return [invalid(path, value, f"{path} in body should be less than or equal to "
                                     f"{limit}")]
    if kind == "pattern":
        return [invalid(path, value, f"{path} in body should match '{limit}'")]
    if kind == "maxLength":
        return [StatusCause("FieldValueTooLong",
                            f"Too long: may not be more than {limit} bytes", path)]
    if kind == "minLength":
        return [invalid(path, value, f"{path} in body should be at least {limit} chars "
                                     "long")]
    if kind == "maxItems":
        return [StatusCause("FieldValueTooMany",
                            f"Too many: {len(value)}: must have at most {limit} items", path)]
    if kind == "minItems":
        return [invalid(path, value, f"{path} in body should have at least {limit} items")]
    return [invalid(path, value, message)]


_SCHEMAS: dict[str, StructuralSchema] = {}


def compile_schema(openapi: Obj) -> StructuralSchema:
    """A compiled schema (cached by content: the same CRD applied twice compiles once)."""
    import orjson

    key = orjson.dumps(openapi, option=orjson.OPT_SORT_KEYS).decode()
    schema = _SCHEMAS.get(key)
    if schema is None:
        schema = _SCHEMAS[key] = StructuralSchema(openapi)
    return schema


def version_schema(crd: Obj, version: str) -> Obj | None:
    """The ``openAPIV3Schema`` of one version of a CRD (or its top-level validation)."""
    spec = crd.get("spec") or {}
    for ver in spec.get("versions") or []:
        if ver.get("name") == version:
            found = (ver.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(found, dict):
                return found
    top = (spec.get("validation") or {}).get("openAPIV3Schema")
    return top if isinstance(top, dict) else None


