"""ValidatingAdmissionPolicy and its Binding: CEL validations on the write path.

Ports staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating: a policy acts
through each binding that names it; a request is checked when it matches the policy's
``matchConstraints`` (``resourceRules``, ``excludeResourceRules``, ``namespaceSelector``,
``objectSelector``) and the binding's ``matchResources``, and every ``matchCondition`` holds.
Each ``validations[]`` expression is evaluated with ``object``, ``oldObject``, ``request``,
``params``, ``namespaceObject`` and ``variables`` (the policy's ``variables``, in order); a
false one is a failure with its ``messageExpression``'s value, its ``message``, or
``failed expression: <expression>``, and an expression that errors is a failure under
``failurePolicy: Fail`` (ignored under ``Ignore``). The binding's ``validationActions`` say
what a failure does: ``Deny`` refuses the request with kube's text (``<resource> "<name>" is
forbidden: ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request:
<message>``, reason ``Invalid`` and code 422 unless the validation gives another reason),
``Warn`` and ``Audit`` record it in `Policies.warnings` and `Policies.audit`. A DELETE is
checked with ``object`` null and the stored object as ``oldObject``.

CEL is cel-python's (`celpy`), with kube's string extensions that it lacks (``lowerAscii``,
``upperAscii``, ``trim``, ``replace``, ``split``, ``indexOf``, ``lastIndexOf``, ``join``)
added. Policies run only when a binding exists: the write path asks one dictionary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from .errors import ApiError
from .selectors import selector_from_dict
from .webhooks import _rule_matches

if TYPE_CHECKING:
    from .kinds import KindInfo
    from .server import APIServer

Obj = dict[str, Any]
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413,
          "Invalid": 422}


def _string_functions() -> dict[str, Callable[..., Any]]:
    """Kube's CEL string library (``ext.Strings``) where cel-python has no equivalent."""
    import celpy.celtypes as ct

    def split(s: Any, sep: Any, n: Any = None) -> Any:
        parts = str(s).split(str(sep)) if n is None or int(n) < 0 else \
            str(s).split(str(sep), max(int(n) - 1, 0))
        return ct.ListType([ct.StringType(p) for p in parts])

    return {
        "lowerAscii": lambda s: ct.StringType(str(s).lower()),
        "upperAscii": lambda s: ct.StringType(str(s).upper()),
        "trim": lambda s: ct.StringType(str(s).strip()),
        "replace": lambda s, a, b, n=None: ct.StringType(
            str(s).replace(str(a), str(b), -1 if n is None else int(n))),
        "split": split,
        "indexOf": lambda s, sub: ct.IntType(str(s).find(str(sub))),
        "lastIndexOf": lambda s, sub: ct.IntType(str(s).rfind(str(sub))),
        "join": lambda items, sep="": ct.StringType(str(sep).join(str(i) for i in items)),
    }


class CelError(Exception):
    """An expression that did not compile or failed when evaluated."""


class Policies:
    """The ValidatingAdmissionPolicy plugin of one `APIServer` (`active` with a binding)."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.policies = api.store.table(api.kinds.resolve("ValidatingAdmissionPolicy"))
        self.bindings = api.store.table(api.kinds.resolve("ValidatingAdmissionPolicyBinding"))
        self._programs: dict[str, Any] = {}
        #: Warn actions: kube's warning text, in order
        self.warnings: list[str] = []
        #: Audit actions: (policy, binding, message), in order
        self.audit: list[tuple[str, str, str]] = []

    def _program(self, expression: str) -> Any:
        program = self._programs.get(expression)
        if program is None:
            import celpy

            env = celpy.Environment()
            try:
                program = env.program(env.compile(expression), functions=_string_functions())
            except Exception as err:  # a compile error: kube refuses the policy; here, a failure
                program = CelError(f"compilation failed: {err}")
            self._programs[expression] = program
        if isinstance(program, CelError):
            raise program
        return program

    def evaluate(self, expression: str, activation: Obj) -> Any:
        """The value of ``expression`` (a Python value); CelError when it fails."""
        import celpy

        program = self._program(expression)
        try:
            result = program.evaluate(activation)
        except Exception as err:
            raise CelError(str(err.args[0] if err.args else err)) from None
        if isinstance(result, Exception):
            raise CelError(str(result.args[0] if result.args else result))
        return result if not isinstance(result, celpy.celtypes.BoolType) else bool(result)

    # -- matching --------------------------------------------------------------------------------

    def _match_resources(self, match: Obj | None, op: str, info: KindInfo, obj: Obj | None,
                         old: Obj | None, ns: str, name: str) -> bool:
        """``matchConstraints`` / ``matchResources``: nothing given matches everything."""
        if not match:
            return True

        def rule_hit(rule: Obj) -> bool:
            names = rule.get("resourceNames")
            if names and name not in names:
                return False
            return _rule_matches(rule, op, info, "", match.get("matchPolicy") == "Exact")

        rules = match.get("resourceRules")
        if rules is not None and not any(rule_hit(r) for r in rules):
            return False
        if any(rule_hit(r) for r in match.get("excludeResourceRules") or ()):
            return False
        ns_sel = match.get("namespaceSelector")
        if ns_sel and info.namespaced:
            entry = self.api._ns_table.objs.get(("", ns))
            labels = dict(entry.labels) if entry is not None else {}
            if not selector_from_dict(ns_sel).matches(labels):
                return False
        obj_sel = match.get("objectSelector")
        if obj_sel:
            sel = selector_from_dict(obj_sel)
            if not any(sel.matches((o.get("metadata") or {}).get("labels") or {})
                       for o in (obj, old) if o is not None):
                return False
        return True

    # -- validating ------------------------------------------------------------------------------

    def validate(self, op: str, info: KindInfo, obj: Obj | None, old: Obj | None, ns: str,
                 name: str, caller: str) -> None:
        """Run every bound policy that matches; raise the first Deny failure."""
        import celpy

        for key in sorted(self.bindings.objs):
            binding = orjson.loads(self.bindings.objs[key].data)
            bspec = binding.get("spec") or {}
            entry = self.policies.objs.get(("", bspec.get("policyName", "")))
            if entry is None:
                continue
            policy = orjson.loads(entry.data)
            spec = policy.get("spec") or {}
            if not self._match_resources(spec.get("matchConstraints"), op, info, obj, old, ns,
                                         name):
                continue
            if not self._match_resources(bspec.get("matchResources"), op, info, obj, old, ns,
                                         name):
                continue
            activation = self._activation(op, info, obj, old, ns, name, caller, spec, bspec)
            failures = self._failures(spec, activation, celpy)
            if not failures:
                continue
            pname, bname = policy["metadata"]["name"], binding["metadata"]["name"]
            actions = bspec.get("validationActions") or ()
            for message, reason in failures:
                text = (f"ValidatingAdmissionPolicy '{pname}' with binding '{bname}' denied "
                        f"request: {message}")
                if "Warn" in actions:
                    warning = (f"Validation failed for ValidatingAdmissionPolicy '{pname}' "
                               f"with binding '{bname}': {message}")
                    self.warnings.append(warning)
                    self.api.warn(warning)
                if "Audit" in actions:
                    self.audit.append((pname, bname, message))
                if "Deny" in actions:
                    resource = f"{info.plural}.{info.group}" if info.group else info.plural
                    reason = reason or "Invalid"
                    err = ApiError(f'{resource} "{name}" is forbidden: {text}',
                                   details={"name": name, "group": info.group,
                                            "kind": info.plural,
                                            "causes": [{"message": text}]})
                    err.reason = reason
                    err.code = _CODES.get(reason, 400)
                    raise err

    def _activation(self, op: str, info: KindInfo, obj: Obj | None, old: Obj | None, ns: str,
                    name: str, caller: str, spec: Obj, bspec: Obj) -> Obj:
        import celpy

        gvk = {"group": info.group, "version": info.version, "kind": info.kind}
        request = {"operation": op, "name": name, "namespace": ns if info.namespaced else "",
                   "kind": gvk, "resource": {"group": info.group, "version": info.version,
                                             "resource": info.plural},
                   "userInfo": {"username": caller or "system:admin"}}
        ns_obj = None
        if info.namespaced:
            entry = self.api._ns_table.objs.get(("", ns))
            ns_obj = orjson.loads(entry.data) if entry is not None else None
        activation: Obj = {
            "object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
            "request": celpy.json_to_cel(request), "namespaceObject": celpy.json_to_cel(ns_obj),
            "params": celpy.json_to_cel(self._params(spec, bspec, ns))}
        variables: Obj = {}
        for var in spec.get("variables") or ():
            activation["variables"] = celpy.json_to_cel(variables)
            try:
                value = self.evaluate(str(var.get("expression", "")), activation)
            except CelError:
                continue  # kube evaluates lazily: an unused failing variable fails nothing
            variables[str(var.get("name", ""))] = value
        activation["variables"] = celpy.celtypes.MapType(
            {celpy.celtypes.StringType(k): v for k, v in variables.items()})
        return activation

    def _params(self, spec: Obj, bspec: Obj, ns: str) -> Obj | None:
        """The binding's ``paramRef`` by name (``paramKind`` of the policy); None without."""
        kind = spec.get("paramKind") or {}
        ref = bspec.get("paramRef") or {}
        if not kind or not ref.get("name"):
            return None
        try:
            pinfo = self.api.kinds.resolve(kind.get("kind", ""), kind.get("apiVersion"))
        except ApiError:
            return None
        table = self.api.store.table(pinfo)
        pns = (ref.get("namespace") or ns) if pinfo.namespaced else ""
        entry = table.objs.get((pns, ref["name"]))
        return orjson.loads(entry.data) if entry is not None else None

    def _failures(self, spec: Obj, activation: Obj, celpy: Any) -> list[tuple[str, str]]:
        """(message, reason) of each validation that fails (none when a matchCondition does
        not hold)."""
        fail_closed = spec.get("failurePolicy", "Fail") != "Ignore"
        for cond in spec.get("matchConditions") or ():
            expr = str(cond.get("expression", ""))
            try:
                if self.evaluate(expr, activation) is not True:
                    return []
            except CelError as err:
                if not fail_closed:
                    return []
                return [(f"failed to evaluate matchCondition '{cond.get('name', '')}': {err}",
                         "")]
        out: list[tuple[str, str]] = []
        for val in spec.get("validations") or ():
            expr = str(val.get("expression", ""))
            try:
                ok = self.evaluate(expr, activation)
            except CelError as err:
                if fail_closed:
                    out.append((f"expression '{expr}' resulted in error: {err}",
                                str(val.get("reason") or "")))
                continue
            if ok is True:
                continue
            message = str(val.get("message") or "") or f"failed expression: {expr.strip()}"
            if val.get("messageExpression"):
                try:
                    computed = self.evaluate(str(val["messageExpression"]), activation)
                    if isinstance(computed, str) and computed.strip() and "\n" not in computed:
                        message = computed
                except CelError:
                    pass
            out.append((message, str(val.get("reason") or "")))
        return out
