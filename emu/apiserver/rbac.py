"""RBAC: kube-apiserver's role-based authorizer, evaluated for every caller's identity.

Port of kubernetes ``plugin/pkg/auth/authorizer/rbac`` (``rbac.go``, ``rule.go`` helpers in
``pkg/apis/rbac/v1/evaluation_helpers.go``) and of the Forbidden message the API server writes
(``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go``):

- a request is allowed when some rule reached through a binding that applies to the caller allows
  it: every ClusterRoleBinding, then (for a namespaced request) every RoleBinding of the request's
  namespace, whose ``roleRef`` names a ClusterRole or a Role of that namespace;
- a rule matches on ``verbs`` (``*``), ``apiGroups`` (``*``), ``resources`` (``*``, ``pods/status``,
  ``*/status``), ``resourceNames`` (never for create or a collection) and, for paths,
  ``nonResourceURLs`` (``*`` and ``/prefix/*``);
- subjects are Users, Groups and ServiceAccounts (``system:serviceaccount:NS:NAME``, a subject
  without a namespace takes the RoleBinding's); a ServiceAccount is in the groups
  ``system:serviceaccounts``, ``system:serviceaccounts:NS`` and ``system:authenticated``;
- a denied request is a 403 whose message is the real one, e.g. ``pods is forbidden: User
  "system:serviceaccount:default:kuberay-operator" cannot create resource "pods" in API group ""
  in the namespace "default"``, with ``RBAC: role.rbac.authorization.k8s.io "x" not found`` after
  it when a binding names a role that does not exist.

Who calls (`RBAC.identify`): a process running in a Pod (``NS/POD/CONTAINER``, or a process that
container started, ``NS/POD/CONTAINER/NAME``) acts as the Pod's
ServiceAccount (``spec.serviceAccountName``, ``default`` when unset); the built-in components act
as their real identities (``system:kube-scheduler``, ``system:node:NODE``, the controller-manager's
per-controller ServiceAccounts in ``kube-system``) and are allowed everything, a documented
shortcut for the bootstrap policy and the Node authorizer; a caller assigned an identity
(`RBAC.assign`, ``sim.client(..., user=...)``) is that identity; anything else (a test's own
clients and processes) is a member of ``system:masters``, which the real server lets do anything.

Enforcement is opt-in per world (`RBAC.enable`); when off the API server calls nothing here. The
RBAC kinds are always served. Decisions are cached per (user, groups, namespace) and dropped
whenever an RBAC object is written, so the check costs a few comparisons per request.

A little over 500 lines because the authorizer, its rule matching, the exact 403 text and the
validation of the four RBAC kinds are one port of one Kubernetes package, read together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from .errors import ApiError, Forbidden, StatusCause
from .request import ApiRequest

if TYPE_CHECKING:
    from ..kernel.network import CallInfo
    from .server import APIServer
    from .store import Change

Obj = dict[str, Any]

GROUP = "rbac.authorization.k8s.io"
#: The group the real server lets do anything (``authorizerfactory.NewPrivilegedGroups``).
SYSTEM_MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"
SA_GROUP = "system:serviceaccounts"
#: kube verbs (``RequestInfo.Verb``) for the client's verbs.
KUBE_VERBS = {"get": "get", "list": "list", "watch": "watch", "create": "create",
              "update": "update", "update_status": "update", "patch": "patch",
              "delete": "delete", "delete_collection": "deletecollection"}
_COLLECTION_VERBS = ("list", "watch", "delete_collection")
_RBAC_KINDS = frozenset({(GROUP, "Role"), (GROUP, "ClusterRole"), (GROUP, "RoleBinding"),
                         (GROUP, "ClusterRoleBinding")})

#: Built-in components (the emulated processes' names) and the identities they act as. The
#: controller-manager runs with ``--use-service-account-credentials``, so each controller is its
#: own ServiceAccount in kube-system.
SYSTEM_COMPONENTS: Mapping[str, str] = {
    "kube-scheduler": "system:kube-scheduler",
    "kube-proxy": "system:kube-proxy",
    "node-lifecycle-controller": "system:serviceaccount:kube-system:node-controller",
    "pod-gc": "system:serviceaccount:kube-system:pod-garbage-collector",
    "garbage-collector": "system:serviceaccount:kube-system:generic-garbage-collector",
    "job-controller": "system:serviceaccount:kube-system:job-controller",
    "deployment-controller": "system:serviceaccount:kube-system:deployment-controller",
    "replicaset-controller": "system:serviceaccount:kube-system:replicaset-controller",
    "endpointslice-controller": "system:serviceaccount:kube-system:endpointslice-controller",
    "endpoint-controller": "system:serviceaccount:kube-system:endpoint-controller",
    "persistentvolume-controller": "system:serviceaccount:kube-system:persistent-volume-binder",
    "daemonset-controller": "system:serviceaccount:kube-system:daemon-set-controller",
    "serviceaccount-controller": "system:serviceaccount:kube-system:service-account-controller",
    "root-ca-cert-publisher": "system:serviceaccount:kube-system:root-ca-cert-publisher",
    "csrsigning-controller": "system:serviceaccount:kube-system:certificate-controller",
    "kube-apiserver": "system:apiserver",
    "kube-apiserver-endpoints": "system:apiserver",
}


@attrs.frozen
class UserInfo:
    """Who a request is from: ``name`` and ``groups``. ``system`` marks a built-in component,
    which is allowed everything (the emulation's stand-in for the bootstrap policy)."""

    name: str
    groups: tuple[str, ...] = ()
    system: bool = False

    @classmethod
    def service_account(cls, namespace: str, name: str) -> UserInfo:
        """The identity a ServiceAccount token authenticates as."""
        if not namespace or not name:
            raise ValueError(f"a ServiceAccount needs a namespace and a name, got "
                             f"{namespace!r}/{name!r}")
        return cls(f"{SA_PREFIX}{namespace}:{name}",
                   (SA_GROUP, f"{SA_GROUP}:{namespace}", AUTHENTICATED))


@attrs.frozen
class Attributes:
    """``authorizer.AttributesRecord``: what is being asked, by whom."""

    user: UserInfo
    verb: str
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    resource_request: bool = True
    path: str = ""


# -- rule matching (evaluation_helpers.go) ---------------------------------------------------------


def verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    verbs = rule.get("verbs") or ()
    return "*" in verbs or verb in verbs


def api_group_matches(rule: Mapping[str, Any], group: str) -> bool:
    groups = rule.get("apiGroups") or ()
    return "*" in groups or group in groups


def resource_matches(rule: Mapping[str, Any], combined: str, subresource: str) -> bool:
    """``ResourceMatches``: ``*``, the exact ``resource[/subresource]``, or ``*/subresource``."""
    for res in rule.get("resources") or ():
        if res == "*" or res == combined:
            return True
        if subresource and len(res) == len(subresource) + 2 and res.startswith("*/") \
                and res.endswith(subresource):
            return True
    return False


def resource_name_matches(rule: Mapping[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def non_resource_url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(attrs_: Attributes, rule: Mapping[str, Any]) -> bool:
    """``RuleAllows``: does one PolicyRule allow the request."""
    if attrs_.resource_request:
        combined = attrs_.resource
        if attrs_.subresource:
            combined = f"{combined}/{attrs_.subresource}"
        return (verb_matches(rule, attrs_.verb) and api_group_matches(rule, attrs_.api_group)
                and resource_matches(rule, combined, attrs_.subresource)
                and resource_name_matches(rule, attrs_.name))
    return verb_matches(rule, attrs_.verb) and non_resource_url_matches(rule, attrs_.path)


def applies_to(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    """``appliesToUser``: ``namespace`` is the RoleBinding's ("" for a ClusterRoleBinding)."""
    kind = subject.get("kind")
    name = subject.get("name") or ""
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_ns = subject.get("namespace") or namespace
        if not sa_ns:
            return False
        return user.name == f"{SA_PREFIX}{sa_ns}:{name}"
    return False


def forbidden_message(a: Attributes, reason: str = "") -> str:
    """The message of the 403 (``responsewriters.Forbidden`` + ``errors.NewForbidden``)."""
    if not a.resource_request:
        msg = f'User "{a.user.name}" cannot {a.verb} path "{a.path}"'
        return f"forbidden: {msg}" + (f": {reason}" if reason else "")
    resource = a.resource + (f"/{a.subresource}" if a.subresource else "")
    if a.namespace:
        msg = (f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group '
               f'"{a.api_group}" in the namespace "{a.namespace}"')
    else:
        msg = (f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group '
               f'"{a.api_group}" at the cluster scope')
    if reason:
        msg = f"{msg}: {reason}"
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    if a.name:
        return f'{qualified} "{a.name}" is forbidden: {msg}'
    return f"{qualified} is forbidden: {msg}"


def forbidden(a: Attributes, reason: str = "") -> Forbidden:
    """The 403 error, with the Status details the real server sends."""
    err = Forbidden(forbidden_message(a, reason))
    err.details = {"group": a.api_group, "kind": a.resource}
    if a.name:
        err.details["name"] = a.name
    return err


# -- validation of the RBAC kinds (pkg/apis/rbac/validation) ---------------------------------------


def validate_role(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """Each rule names verbs, and resources with apiGroups or nonResourceURLs (not both in a
    Role)."""
    causes: list[StatusCause] = []
    rules = obj.get("rules")
    if rules is None:
        return causes
    if not isinstance(rules, list):
        return [StatusCause("FieldValueInvalid", "must be a list", "rules")]
    namespaced = obj.get("kind") == "Role"
    for i, rule in enumerate(rules):
        path = f"rules[{i}]"
        if not isinstance(rule, dict):
            causes.append(StatusCause("FieldValueInvalid", "must be an object", path))
            continue
        if not rule.get("verbs"):
            causes.append(StatusCause("FieldValueRequired", "verbs must contain at least one "
                                      "value", f"{path}.verbs"))
        urls = rule.get("nonResourceURLs")
        if urls:
            if namespaced:
                causes.append(StatusCause("FieldValueInvalid", "namespaced rules cannot apply "
                                          "to non-resource URLs", f"{path}.nonResourceURLs"))
            if rule.get("apiGroups") or rule.get("resources"):
                causes.append(StatusCause("FieldValueInvalid", "rules cannot apply to both "
                                          "regular resources and non-resource URLs",
                                          f"{path}.nonResourceURLs"))
            continue
        if not rule.get("resources"):
            causes.append(StatusCause("FieldValueRequired", "resource rules must supply at "
                                      "least one resource", f"{path}.resources"))
        if not rule.get("apiGroups"):
            causes.append(StatusCause("FieldValueRequired", "resource rules must supply at "
                                      "least one api group", f"{path}.apiGroups"))
    return causes


def validate_binding(obj: Obj, old: Obj | None) -> list[StatusCause]:
    """``roleRef`` is required, names a Role (RoleBinding only) or ClusterRole of this API
    group, and cannot change; subjects are User, Group or ServiceAccount."""
    causes: list[StatusCause] = []
    ref = obj.get("roleRef")
    allowed = ("Role", "ClusterRole") if obj.get("kind") == "RoleBinding" else ("ClusterRole",)
    if not isinstance(ref, dict):
        causes.append(StatusCause("FieldValueRequired", "Required value", "roleRef"))
    else:
        if ref.get("apiGroup") != GROUP:
            causes.append(StatusCause("FieldValueNotSupported", f'Unsupported value: '
                                      f'"{ref.get("apiGroup", "")}": supported values: "{GROUP}"',
                                      "roleRef.apiGroup"))
        if ref.get("kind") not in allowed:
            supported = ", ".join(f'"{k}"' for k in allowed)
            causes.append(StatusCause("FieldValueNotSupported", f'Unsupported value: '
                                      f'"{ref.get("kind", "")}": supported values: {supported}',
                                      "roleRef.kind"))
        if not ref.get("name"):
            causes.append(StatusCause("FieldValueRequired", "Required value", "roleRef.name"))
        if old is not None and old.get("roleRef") != ref:
            causes.append(StatusCause("FieldValueInvalid", "cannot change roleRef", "roleRef"))
    for i, subject in enumerate(obj.get("subjects") or []):
        path = f"subjects[{i}]"
        if not isinstance(subject, dict):
            causes.append(StatusCause("FieldValueInvalid", "must be an object", path))
            continue
        if subject.get("kind") not in ("User", "Group", "ServiceAccount"):
            causes.append(StatusCause("FieldValueNotSupported", f'Unsupported value: '
                                      f'"{subject.get("kind", "")}": supported values: '
                                      '"ServiceAccount", "User", "Group"', f"{path}.kind"))
        if not subject.get("name"):
            causes.append(StatusCause("FieldValueRequired", "Required value", f"{path}.name"))
        if subject.get("kind") == "ServiceAccount" and obj.get("kind") == "ClusterRoleBinding" \
                and not subject.get("namespace"):
            causes.append(StatusCause("FieldValueRequired", "Required value",
                                      f"{path}.namespace"))
    return causes


# -- the authorizer --------------------------------------------------------------------------------


CLUSTER_ADMIN_ROLE: Obj = {
    "apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
    "metadata": {"name": "cluster-admin",
                 "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
              {"nonResourceURLs": ["*"], "verbs": ["*"]}],
}
CLUSTER_ADMIN_BINDING: Obj = {
    "apiVersion": f"{GROUP}/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "cluster-admin",
                 "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
    "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
    "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": SYSTEM_MASTERS}],
}


class RBAC:
    """One world's RBAC (``sim.rbac``): who each caller is, and (when enabled) the check on
    every request.

    `enable` / `disable` switch enforcement (``server.authorizer`` is `check` while on, None
    while off); `assign` makes a caller act as a `UserInfo`; `identify` says who a caller is;
    `can` / `can_path` answer ``kubectl auth can-i``; ``denials`` lists every refused request
    as (caller, message). Roles and bindings are ordinary objects: create them with
    ``sim.apply``.
    """

    def __init__(self, server: APIServer, *,
                 trace: Callable[..., None] | None = None) -> None:
        self.server = server
        #: Told about each refused request (``forbidden``), so the trace shows why.
        self._trace = trace
        self.enabled = False
        #: Identities assigned to callers (process names or test clients' identities).
        self.identities: dict[str, UserInfo] = {}
        #: The last ServiceAccount seen per container process, for a Pod already removed.
        self._pod_users: dict[str, UserInfo] = {}
        #: (user, groups, namespace) -> (rules, errors), dropped when RBAC objects change.
        self._rules: dict[tuple[str, tuple[str, ...], str], tuple[list[Obj], list[str]]] = {}
        self._decoded: dict[tuple[str, str, str], tuple[int, Obj]] = {}
        #: Attributes -> (allowed, reason): a controller asks the same few questions over and
        #: over, and walking every rule cost ~5% of a reconcile. Dropped with ``_rules``.
        self._decisions: dict[Attributes, tuple[bool, str]] = {}
        #: The same by request (caller's user, verb, kind, namespace, name, subresource, name
        #: selector) -> (attributes, allowed, reason), or None when the server does not know the
        #: kind; also dropped when a kind is registered.
        self._requests: dict[tuple[Any, ...], tuple[Attributes, bool, str] | None] = {}
        self._requests_generation = -1
        #: Every refused request: (caller, the 403's message), in order.
        self.denials: list[tuple[str, str]] = []
        server.store.listen_kinds(_RBAC_KINDS, self._on_change)

    # -- switching -------------------------------------------------------------------------------

    def enable(self) -> None:
        """Enforce RBAC from now on; creates the ``cluster-admin`` ClusterRole and its binding to
        ``system:masters`` when missing (as the bootstrap policy does)."""
        if self.enabled:
            return
        self.enabled = True
        for obj in (CLUSTER_ADMIN_ROLE, CLUSTER_ADMIN_BINDING):
            info = self.server.kinds.resolve(obj["kind"], obj["apiVersion"])
            if ("", obj["metadata"]["name"]) not in self.server.store.table(info).objs:
                self.server.create(orjson.loads(orjson.dumps(obj)), caller="apiserver")
        self.server.authorizer = self.check

    def disable(self) -> None:
        """Stop enforcing (every caller may do everything again)."""
        self.enabled = False
        self.server.authorizer = None

    # -- identities ------------------------------------------------------------------------------

    #: `UserInfo.service_account`, for callers that may not import this module (emu/kuberay/).
    service_account_user = staticmethod(UserInfo.service_account)

    def assign(self, caller: str, user: UserInfo) -> None:
        """Make ``caller`` (a process name or a test client's identity) act as ``user``."""
        known = self.identities.get(caller)
        if known is not None and known != user:
            raise ValueError(f"caller {caller!r} already acts as {known.name!r} "
                             f"(groups {list(known.groups)}); use another client identity")
        self.identities[caller] = user

    def identify(self, caller: str) -> UserInfo:
        """The identity a request from ``caller`` (`CallInfo.src`) carries."""
        user = self.identities.get(caller)
        if user is not None:
            return user
        system = SYSTEM_COMPONENTS.get(caller)
        if system is not None:
            return UserInfo(system, (AUTHENTICATED,), system=True)
        if caller.startswith("kubelet-"):
            return UserInfo(f"system:node:{caller.removeprefix('kubelet-')}",
                            ("system:nodes", AUTHENTICATED), system=True)
        parts = caller.split("/")
        if len(parts) >= 3 and all(parts):  # NS/POD/CONTAINER[/child process]
            return self._pod_user(caller, parts[0], parts[1])
        return UserInfo(caller, (SYSTEM_MASTERS, AUTHENTICATED))

    def _pod_user(self, caller: str, namespace: str, pod: str) -> UserInfo:
        info = self.server.kinds.resolve("Pod")
        entry = self.server.store.table(info).objs.get((namespace, pod))
        if entry is None:
            return self._pod_users.get(caller) or UserInfo.service_account(namespace, "default")
        sa = (entry.fields or {}).get("spec.serviceAccountName") or "default"
        user = self._pod_users.get(caller)
        if user is None or user.name != f"{SA_PREFIX}{namespace}:{sa}":
            user = self._pod_users[caller] = UserInfo.service_account(namespace, sa)
        return user

    # -- decisions -------------------------------------------------------------------------------

    def _on_change(self, change: Change) -> None:
        """A write to an RBAC kind (`Store.listen_kinds` calls for no other)."""
        self._rules.clear()
        self._decisions.clear()
        self._requests.clear()
        if change.type == "DELETED":
            self._decoded.pop((change.table.gk[1], change.entry.ns, change.entry.name), None)

    def _objects(self, kind: str, namespace: str | None) -> list[tuple[str, Obj]]:
        info = self.server.kinds.resolve(kind, f"{GROUP}/v1")
        table = self.server.store.table(info)
        if namespace is None:
            entries = [e for _k, e in sorted(table.objs.items())]
        else:
            entries = [e for _n, e in sorted((table.by_ns.get(namespace) or {}).items())]
        out = []
        for e in entries:
            key = (kind, e.ns, e.name)
            cached = self._decoded.get(key)
            if cached is None or cached[0] != e.rev:
                cached = self._decoded[key] = (e.rev, orjson.loads(e.data))
            out.append((e.ns, cached[1]))
        return out

    def _role_rules(self, kind: str, name: str, namespace: str) -> list[Obj] | None:
        info = self.server.kinds.resolve(kind, f"{GROUP}/v1")
        entry = self.server.store.table(info).objs.get((namespace, name))
        if entry is None:
            return None
        key = (kind, entry.ns, entry.name)
        cached = self._decoded.get(key)
        if cached is None or cached[0] != entry.rev:
            cached = self._decoded[key] = (entry.rev, orjson.loads(entry.data))
        rules = cached[1].get("rules") or []
        return [r for r in rules if isinstance(r, dict)]

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Obj], list[str]]:
        """``VisitRulesFor``: every rule that applies to ``user`` in ``namespace`` ("" for the
        cluster scope), and the errors met (a binding naming a missing role)."""
        key = (user.name, user.groups, namespace)
        found = self._rules.get(key)
        if found is not None:
            return found
        rules: list[Obj] = []
        errors: list[str] = []
        bindings = [("", b) for _ns, b in self._objects("ClusterRoleBinding", None)]
        if namespace:
            bindings += self._objects("RoleBinding", namespace)
        for ns, binding in bindings:
            if not any(isinstance(s, dict) and applies_to(user, s, ns)
                       for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            kind = "ClusterRole" if ref.get("kind") == "ClusterRole" or not ns else "Role"
            got = self._role_rules(kind, str(ref.get("name", "")), "" if kind == "ClusterRole"
                                   else ns)
            if got is None:
                errors.append(f'{kind.lower()}.{GROUP} "{ref.get("name", "")}" not found')
                continue
            rules.extend(got)
        found = self._rules[key] = (rules, errors)
        return found

    def authorize(self, a: Attributes) -> tuple[bool, str]:
        """(allowed, reason): ``reason`` is ``RBAC: ...`` when rules could not be read."""
        if a.user.system or SYSTEM_MASTERS in a.user.groups:
            return True, ""
        decision = self._decisions.get(a)
        if decision is not None:
            return decision
        rules, errors = self.rules_for(a.user, a.namespace)
        for rule in rules:
            if rule_allows(a, rule):
                decision = (True, "")
                break
        else:
            decision = (False, f"RBAC: {_aggregate(errors)}" if errors else "")
        if len(self._decisions) >= _MAX_DECISIONS:
            self._decisions.clear()
        self._decisions[a] = decision
        return decision

    def attributes(self, req: ApiRequest, user: UserInfo) -> Attributes | None:
        """The request's attributes, or None for a kind the server does not know (the server
        then answers 404 itself)."""
        if req.kind == "TokenReview" and req.verb == "create":  # served, not stored
            return Attributes(user, "create", "", "authentication.k8s.io", "tokenreviews")
        try:
            info = self.server.kinds.resolve(req.kind, req.api_version)
        except ApiError:  # an unknown kind: the server reports it
            return None
        verb = KUBE_VERBS.get(req.verb)
        if verb is None:
            return None
        if not info.namespaced:
            namespace = ""
        elif req.verb in _COLLECTION_VERBS:
            namespace = req.namespace or ""
        else:
            namespace = req.namespace or "default"
        subresource = ""
        if req.verb == "update_status":
            subresource = "status"
        elif req.verb in ("patch", "create"):
            subresource = str(req.options.get("subresource") or "")
        # a create on a subresource (pods/eviction, serviceaccounts/token) names its object
        name = "" if req.verb in ("list", "delete_collection") or (
            req.verb == "create" and not subresource) else (req.name or "")
        if req.verb in ("list", "watch") and not name:
            name = _exact_name(req.options.get("field_selector"))
        return Attributes(user, verb, namespace, info.group, info.plural, subresource, name)

    def check(self, req: ApiRequest, info: CallInfo) -> None:
        """The API server's hook: raise `Forbidden` (403, kube's message) when the caller may
        not make ``req``."""
        user = self.identify(info.src)
        if user.system or SYSTEM_MASTERS in user.groups:
            return
        options = req.options
        key = (user.name, user.groups, req.verb, req.kind, req.api_version, req.namespace,
               req.name, options.get("subresource"), options.get("field_selector"))
        generation = self.server.kinds.generation
        if generation != self._requests_generation:  # a kind came or went: resolve again
            self._requests.clear()
            self._requests_generation = generation
        known = self._requests.get(key, _UNSEEN)
        if known is _UNSEEN:
            a = self.attributes(req, user)
            known = None if a is None else (a, *self.authorize(a))
            if len(self._requests) >= _MAX_DECISIONS:
                self._requests.clear()
            self._requests[key] = known
        if known is None:
            return
        a, allowed, reason = known
        if not allowed:
            err = forbidden(a, reason)
            self.denials.append((info.src, err.message))
            if self._trace is not None:
                self._trace("forbidden", caller=info.src, user=user.name, verb=a.verb,
                            resource=a.resource + (f"/{a.subresource}" if a.subresource else ""),
                            group=a.api_group, ns=a.namespace, name=a.name)
            raise err

    def can(self, user: UserInfo, verb: str, resource: str, *, namespace: str = "",
            group: str = "", subresource: str = "", name: str = "") -> bool:
        """``kubectl auth can-i`` for ``user``."""
        return self.authorize(Attributes(user, verb, namespace, group, resource, subresource,
                                         name))[0]

    def can_path(self, user: UserInfo, verb: str, path: str) -> bool:
        """``kubectl auth can-i get /healthz``: a non-resource request."""
        return self.authorize(Attributes(user, verb, resource_request=False, path=path))[0]


#: Decisions remembered before the cache starts over (names make the attributes many).
_MAX_DECISIONS = 65_536
_UNSEEN: Any = object()


def _exact_name(field_selector: Any) -> str:
    """``RequestInfo``: a list or watch whose field selector requires ``metadata.name=X`` is a
    request for X (so ``resourceNames`` can allow it)."""
    if not isinstance(field_selector, str):
        return ""
    for term in field_selector.split(","):
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and key.strip() == "metadata.name" and not key.endswith("!"):
            return value.strip()
    return ""


def _aggregate(errors: Iterable[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one error as is, several as ``[a, b]``."""
    items = list(dict.fromkeys(errors))
    return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
