"""The create-only review resources kubectl's ``auth`` commands post: ``kubectl auth can-i``
(``SelfSubjectAccessReview``), ``kubectl auth can-i --list`` (``SelfSubjectRulesReview``) and
``kubectl auth whoami`` (``SelfSubjectReview``); and ``TokenReview``, which the gateway sends on
to the API server (`emu.apiserver.tokens`) and which is listed here for discovery and routing.

They are not stored kinds (kube answers them from its authorizer and authenticator and keeps
nothing), so the gateway answers them here, from the world's RBAC (`emu.apiserver.rbac`): the
caller is who `RBAC.identify` says its network identity is (an HTTP client is a member of
``system:masters`` unless a test assigned it another identity), and the decision is the one the
API server would make for that request. With RBAC off (a world without ``--kuberay``), everything
is allowed, as it then is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError, BadRequest
from ..apiserver.rbac import SYSTEM_MASTERS, Attributes, UserInfo

if TYPE_CHECKING:
    from ..simulation import Simulation

Obj = dict[str, Any]

#: (group, version, plural) → kind, for discovery and routing.
REVIEWS: dict[tuple[str, str, str], str] = {
    ("authorization.k8s.io", "v1", "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    ("authorization.k8s.io", "v1", "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
    ("authentication.k8s.io", "v1", "selfsubjectreviews"): "SelfSubjectReview",
    # answered by the API server (`emu.apiserver.tokens`), not here
    ("authentication.k8s.io", "v1", "tokenreviews"): "TokenReview",
}

_ALL_RULES: list[Obj] = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
_ALL_PATHS: list[Obj] = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]


def at_path(path: str) -> tuple[str, str, str] | None:
    """The review served at ``path`` (``/apis/authorization.k8s.io/v1/selfsubjectaccessreviews``),
    or None."""
    parts = [p for p in path.split("/") if p]
    if len(parts) != 4 or parts[0] != "apis":
        return None
    key = (parts[1], parts[2], parts[3])
    return key if key in REVIEWS else None


def _check_body(body: Any, key: tuple[str, str, str]) -> Obj:
    kind = REVIEWS[key]
    if not isinstance(body, dict):
        raise BadRequest(f"the body of a {kind} must be a JSON object")
    wanted = f"{key[0]}/{key[1]}"
    if body.get("kind") not in (None, kind) or body.get("apiVersion") not in (None, wanted):
        raise BadRequest(f"the body is a {body.get('apiVersion')} {body.get('kind')}; this path "
                         f"takes a {wanted} {kind}")
    return body


def answer(sim: Simulation, caller: str, key: tuple[str, str, str], body: Any) -> Obj:
    """The review with its ``status`` filled in, as kube answers the POST (201)."""
    body = _check_body(body, key)
    kind = REVIEWS[key]
    user = sim.rbac.identify(caller)
    out: Obj = {"kind": kind, "apiVersion": f"{key[0]}/{key[1]}",
                "metadata": {"creationTimestamp": None}}
    if kind == "SelfSubjectReview":
        out["status"] = {"userInfo": {"username": user.name, "groups": list(user.groups)}}
        return out
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    out["spec"] = spec
    if kind == "SelfSubjectRulesReview":
        namespace = spec.get("namespace")
        if not namespace:
            raise ApiError.from_status({
                "code": 400, "reason": "BadRequest",
                "message": "no namespace on request"})
        out["status"] = _rules(sim, user, str(namespace))
        return out
    out["status"] = _access(sim, user, spec)
    return out


def _access(sim: Simulation, user: UserInfo, spec: Obj) -> Obj:
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(res) == bool(non):
        raise ApiError.from_status({
            "code": 422, "reason": "Invalid",
            "message": 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                       "spec.resourceAttributes: Invalid value: \"null\": exactly one of "
                       "nonResourceAttributes or resourceAttributes must be specified"})
    if isinstance(res, dict) and res:
        attrs = Attributes(user, str(res.get("verb", "")), str(res.get("namespace", "")),
                           str(res.get("group", "")), str(res.get("resource", "")),
                           str(res.get("subresource", "")), str(res.get("name", "")))
    else:
        path_attrs: Obj = non if isinstance(non, dict) else {}
        attrs = Attributes(user, str(path_attrs.get("verb", "")), resource_request=False,
                           path=str(path_attrs.get("path", "")))
    if not sim.rbac.enabled:
        return {"allowed": True, "reason": "RBAC is not enforced in this world"}
    allowed, reason = sim.rbac.authorize(attrs)
    status: Obj = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return status


def _rules(sim: Simulation, user: UserInfo, namespace: str) -> Obj:
    if not sim.rbac.enabled or user.system or SYSTEM_MASTERS in user.groups:
        return {"resourceRules": _ALL_RULES, "nonResourceRules": _ALL_PATHS,
                "incomplete": False}
    rules, errors = sim.rbac.rules_for(user, namespace)
    resource_rules, path_rules = [], []
    for rule in rules:
        if rule.get("nonResourceURLs"):
            path_rules.append({"verbs": rule.get("verbs") or [],
                               "nonResourceURLs": rule["nonResourceURLs"]})
        else:
            entry = {k: rule[k] for k in ("verbs", "apiGroups", "resources", "resourceNames")
                     if rule.get(k)}
            resource_rules.append(entry)
    status: Obj = {"resourceRules": resource_rules, "nonResourceRules": path_rules,
                   "incomplete": bool(errors)}
    if errors:
        status["evaluationError"] = "; ".join(errors)
    return status


def resources(group: str, version: str) -> list[Obj]:
    """The review resources of ``group/version`` as an ``APIResourceList`` lists them."""
    return [{"name": plural, "singularName": "", "namespaced": False, "kind": kind,
             "verbs": ["create"]}
            for (g, v, plural), kind in REVIEWS.items() if (g, v) == (group, version)]


def aggregated_resources(group: str, version: str) -> list[Obj]:
    """The same, as aggregated discovery lists them."""
    return [{"resource": plural, "responseKind": {"group": g, "version": v, "kind": kind},
             "scope": "Cluster", "singularResource": "", "verbs": ["create"]}
            for (g, v, plural), kind in REVIEWS.items() if (g, v) == (group, version)]


def groups() -> dict[str, list[str]]:
    """Group → versions of the reviews."""
    out: dict[str, list[str]] = {}
    for g, v, _ in REVIEWS:
        versions = out.setdefault(g, [])
        if v not in versions:
            versions.append(v)
    return out
