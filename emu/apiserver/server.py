"""The API server: kube-apiserver's verbs and semantics over the MVCC store.

Every verb exists twice: as a plain synchronous method (``get``, ``list``, ``create``, ``update``,
``update_status``, ``patch``, ``delete``, ``delete_collection``, ``watch``) for speed and direct
use, and behind the network handlers `APIServer.handle` and `APIServer.open_watch`, which take an
`ApiRequest` and map it onto those methods. A rejected request raises an `ApiError` and changes
nothing: every check runs before the single `Store.commit` of a write.

This module is longer than 500 lines because the write paths (create, update, delete with
finalizers, graceful deletion and propagation, namespace termination) share private helpers and
invariants (one revision per commit, nothing half-done) that are clearer kept together, and the
read paths (pagination with kube's continue tokens, reads at a revision, watch-lists) share the
list option rules with them.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import gc
import re
from collections.abc import Callable
from typing import Any

import orjson

from ..kernel.clock import parse_time, rfc3339
from ..kernel.network import CallInfo
from ..kernel.rng import SimRandom
from . import builtin_fields
from . import validation as v
from .errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    MethodNotAllowed,
    NotFound,
    RequestEntityTooLarge,
    ServerTimeout,
    StatusCause,
    UnsupportedMediaType,
    status_details,
)
from .kinds import KindInfo, KindRegistry, builtin_info, builtin_registry, crd_kind_info
from .patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from .request import ApiRequest
from .selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
    selector_from_dict,
)
from .serviceaccount import admit as service_account_admit
from .store import Entry, Store, Table
from .storedkinds import admit_default_storage_class
from .watch import BOOKMARK_INTERVAL, WatchHub, WatchStream

Obj = dict[str, Any]

#: etcd's default request limit, which bounds one object.
MAX_OBJECT_BYTES = 1536 * 1024
#: kube-apiserver's ``MaxRequestBodyBytes``: the largest request body it reads.
MAX_REQUEST_BYTES = 3 * 1024 * 1024
_BODY_VERBS = frozenset(("create", "update", "update_status", "patch"))
#: The Kubernetes version the API server reports by default (``GET /version``'s ``gitVersion``);
#: `APIServer.version` sets it per world (`emu.kube.config.KubeConfig.kubernetes_version`).
KUBERNETES_VERSION = "v1.33.0"
#: Namespaces that exist from the start, as in a fresh cluster.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: The taints DefaultTolerationSeconds tolerates for a while (``node.kubernetes.io/...``).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def default_toleration_seconds_admit(spec: Obj, seconds: int) -> None:
    """Port of the DefaultTolerationSeconds admission plugin's ``Admit``
    (plugin/pkg/admission/defaulttolerationseconds): a Pod that tolerates neither the
    not-ready nor the unreachable NoExecute taint (a toleration with that key or no key, and
    effect NoExecute or none) gets one for ``seconds``."""
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    added = list(tolerations)
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not any(isinstance(t, dict) and t.get("key", "") in ("", key)
                   and t.get("effect", "") in ("", "NoExecute") for t in tolerations):
            added.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                          "tolerationSeconds": seconds})
    if len(added) != len(tolerations):
        spec["tolerations"] = added
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
_NOT_SPEC = frozenset(("apiVersion", "kind", "metadata", "status"))
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                "generation")
_MISSING: Any = object()
_loads = orjson.loads
_dumps = orjson.dumps
#: The alphabet of base64.RawURLEncoding (continue tokens).
_URL_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


#: The kinds whose writes change a PodDisruptionBudget's status.
_PDB_KINDS = frozenset(("Pod", "PodDisruptionBudget"))

#: The fields of a ``write`` trace event, in the order `APIServer._record` gives their values.
_WRITE_FIELDS = ("verb", "kind", "ns", "name", "rv", "caller")


def _bump_generation(meta: Obj) -> None:
    """``markAsDeleting`` / ``BeforeDelete``: marking an object as deleting bumps its generation
    (when it has one), so controllers filtering on generation changes notice the deletion."""
    gen = meta.get("generation")
    if isinstance(gen, int) and gen > 0:
        meta["generation"] = gen + 1


def _spec_changed(new: Obj, old: Obj) -> bool:
    """Anything outside metadata and status differs (what bumps ``generation``)."""
    for key, value in new.items():
        if key not in _NOT_SPEC and old.get(key) != value:
            return True
    return any(key not in _NOT_SPEC and key not in new for key in old)


def _schema_unknown(info: KindInfo, obj: Obj, mode: str, explicit: bool = True,
                    old: Obj | None = None, warn: bool = False) -> list[str]:
    """For ``fieldValidation=Strict``, the fields of ``obj`` the kind's structural schema does
    not declare (nothing to look for in the other modes, which prune them silently). For a
    built-in kind, the fields kube's own schema does not declare at any depth
    (`builtin_fields`): named under Strict, dropped from ``obj`` (below its top-level fields,
    which `validation.prune_unknown` drops) under Warn and Ignore. Only when the writer chose
    the mode (``explicit``): a write without one is the world's own (a controller's typed
    write in kube, which cannot carry an unknown field), and is not walked. ``old``: the stored
    object an update replaces (what the body repeats of it is not walked again). ``warn``:
    under Warn, name them all the same (for the request's warnings), and prune them."""
    named = mode == "Strict" or warn
    if info.unknown_fields is not None:
        return info.unknown_fields(obj) if named else []
    if info.custom or not explicit:
        return []
    node = builtin_fields.kind_node(info.group, info.version, info.kind)
    if node is None:
        return []
    found = builtin_fields.unknown_fields(node, obj, old) if named else []
    if mode != "Strict":
        builtin_fields.prune_nested(node, obj)
    return found


def _meta_differs(meta: Obj, old_meta: Obj) -> bool:
    return any((meta.get(f) or None) != (old_meta.get(f) or None)
               for f in ("labels", "annotations", "finalizers", "ownerReferences"))


def _decode_all(entries: builtins.list[Entry]) -> builtins.list[Obj]:
    """Decode many stored objects. The cyclic GC is paused meanwhile: decoding thousands of
    nested dicts would otherwise trigger collections that rescan the growing result (this
    halves the time of a 10k-object list); nothing here can create a cycle."""
    if len(entries) < 256 or not gc.isenabled():
        return [_loads(e.data) for e in entries]
    gc.disable()
    try:
        return [_loads(e.data) for e in entries]
    finally:
        gc.enable()


def _status_success(info: KindInfo, name: str, uid: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": status_details({"name": name, "group": info.group, "kind": info.plural,
                                       "uid": uid})}


def _encode_continue(rev: int, key: tuple[str, str], info: KindInfo, ns: str | None) -> str:
    """``storage.EncodeContinue``: base64url JSON of the revision and the key after which the
    next page starts (relative to the list's prefix, as etcd's keys are)."""
    rel = f"{key[0]}/{key[1]}" if info.namespaced and ns is None else key[1]
    data = _dumps({"v": "meta.k8s.io/v1", "rv": rev, "start": rel + "\x00"})
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _gc_finalizers(info: KindInfo, finalizers: list[str], policy: str | None) -> list[str]:
    """``deletionFinalizersForGarbageCollection``: the object's finalizers after a delete with
    ``policy``: both GC finalizers removed, then ``orphan`` and/or ``foregroundDeletion`` added
    back as the policy, the finalizers already present, or the kind's default policy say (a
    batch/v1 Job orphans its Pods by default, for compatibility). Unchanged as a set: the list
    as it was."""
    if policy is not None:
        orphan = policy == "Orphan"
        foreground = policy == "Foreground"
    else:
        orphan = foreground = False
        for f in finalizers:
            if f == ORPHAN:
                orphan = True
                break
            if f == FOREGROUND:
                foreground = True
                break
        else:
            orphan = info.kind == "Job" and info.group == "batch"
    new = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if orphan:
        new.append(ORPHAN)
    if foreground:
        new.append(FOREGROUND)
    return finalizers if set(new) == set(finalizers) else new


def _go_strings(items: list[str]) -> str:
    return "[]string{" + ", ".join(f'"{i}"' for i in items) + "}"


class APIServer:
    """An in-process kube-apiserver with its etcd.

    ``clock`` returns virtual seconds (timestamps are ``EPOCH`` plus that); ``rng`` gives uids and
    generated names; ``history_window`` is how many changes watches can resume from;
    ``trace(event, **fields)`` is told about every committed write; ``record(event, keys,
    values)``, when given, is told instead, with the fields' names and values as two tuples (one
    call and one dict less on every write: `emu.kernel.trace.Trace.record_row`).
    """

    #: Called with each network request before it is served; raises to refuse it (RBAC).
    authorizer: Callable[[ApiRequest, CallInfo], None] | None = None

    def __init__(self, *, clock: Callable[[], float], rng: SimRandom,
                 history_window: int = 10_000, trace: Callable[..., None] | None = None,
                 bookmark_interval: float = BOOKMARK_INTERVAL,
                 record: Callable[[str, tuple[str, ...], tuple[Any, ...]], None] | None = None
                 ) -> None:
        self._clock = clock
        self._now_t: float | None = None
        self._now_text = ""
        self._rng = rng
        self._trace = trace
        self._rec = record
        self.bookmark_interval = bookmark_interval
        #: What ``GET /version`` reports (`version_info`); clients that gate on the server's
        #: version (KubeRay's SidecarSubmitterRestart) read it.
        self.version = KUBERNETES_VERSION
        self.kinds: KindRegistry = builtin_registry()
        self._resolved: dict[tuple[Any, Any], tuple[KindInfo, Table]] = {}
        self._resolved_gen = -1
        self.store = Store(history_window)
        self.watches = WatchHub(self.store)
        self._ip_seq = 0
        #: ClusterIPs Services asked for by name (`claim_cluster_ip`): the allocator skips them.
        self._claimed_ips: dict[str, None] = {}
        self._node_port_seq = 0
        #: The DefaultTolerationSeconds admission plugin's ``tolerationSeconds`` (None: the
        #: plugin is off, as in a minimal world; a standard cluster sets 300).
        self.default_toleration_seconds: int | None = None
        #: The ServiceAccount admission plugin (`emu.apiserver.serviceaccount`): on in a
        #: standard cluster, which has the ServiceAccounts it needs.
        self.service_account_admission = False
        self._ns_info = self.kinds.resolve("Namespace")
        #: The Namespaces' table (the store keeps one Table per kind for good).
        self._ns_table = self.store.table(self._ns_info)
        from .admission import Admission

        #: LimitRanger and ResourceQuota (`emu.apiserver.admission`); they act only in
        #: namespaces holding a LimitRange or a ResourceQuota.
        self.admission = Admission(self)
        self._limit_ns = self.admission.limits.by_ns
        self._quota_ns = self.admission.quotas.by_ns
        from .webhooks import Webhooks

        #: Validating/MutatingWebhookConfigurations (`emu.apiserver.webhooks`): called only
        #: when one is stored (their tables' ``objs``).
        self.webhooks = Webhooks(self)
        self._hooks_m = self.webhooks.mutating.objs
        self._hooks_v = self.webhooks.validating.objs
        from .policies import Policies

        #: ValidatingAdmissionPolicies (`emu.apiserver.policies`): run only when a binding is
        #: stored.
        self.policies = Policies(self)
        self._vap_bindings = self.policies.bindings.objs
        from .disruption import Disruption

        #: The eviction subresource and PodDisruptionBudget status (`emu.apiserver.disruption`).
        self.disruption = Disruption(self)
        self._pdb_ns = self.disruption.pdbs.by_ns
        from .priority import Priority

        #: The Priority plugin (`emu.apiserver.priority`): for Pods, when a PriorityClass
        #: exists or the Pod names one.
        self.priority = Priority(self)
        self._priority_classes = self.priority.classes.objs
        #: StorageClasses, for the DefaultStorageClass admission of claims (read only when
        #: one exists).
        self._storage_classes = self.store.table(self.kinds.resolve(
            "StorageClass", "storage.k8s.io/v1")).objs
        from .tokens import Tokens

        #: Bound ServiceAccount tokens: the TokenRequest subresource and TokenReview
        #: (`emu.apiserver.tokens`); the signing key is made on first use.
        self.tokens = Tokens(self, rng)
        #: Where the request being served collects kube's warnings (``unknown field "x"``
        #: under ``fieldValidation=Warn``): the ``warnings`` option's list, while `serve`
        #: runs a request that carries one (an HTTP client's, sent on as ``Warning``
        #: headers), else None (nothing collected, nothing computed).
        self._warnings: builtins.list[str] | None = None
        for ns in INITIAL_NAMESPACES:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                        caller="apiserver")

    # -- small helpers -------------------------------------------------------------------------

    def warn(self, text: str) -> None:
        """A warning for the request being served (kube's ``warning.AddWarning``): an HTTP
        client gets it as a ``Warning`` header; a request without a ``warnings`` option (an
        in-process client's) drops it."""
        if self._warnings is not None:
            self._warnings.append(text)

    def version_info(self) -> dict[str, str]:
        """``GET /version`` (apimachinery's ``version.Info``) for `version`."""
        m = re.match(r"v?(\d+)\.(\d+)", self.version)
        major, minor = (m.group(1), m.group(2)) if m else ("", "")
        return {"major": major, "minor": minor, "gitVersion": self.version,
                "gitCommit": "kuberay-emu", "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
                "platform": "linux/amd64"}

    @property
    def resource_version(self) -> int:
        """The current global revision."""
        return self.store.rev

    def next_cluster_ip(self) -> str:
        while True:
            self._ip_seq += 1
            n = self._ip_seq
            if n % 256 not in (0, 255):
                ip = f"10.96.{(n // 256) % 256}.{n % 256}"
                if ip not in self._claimed_ips:
                    return ip

    def claim_cluster_ip(self, ip: str) -> None:
        """A Service asked for ``ip``: never hand it out again."""
        self._claimed_ips[ip] = None

    def next_node_port(self) -> int:
        port = 30000 + self._node_port_seq % 2768
        self._node_port_seq += 1
        return port

    def _now(self) -> str:
        # Virtual time stands still between loop steps, so many writes share one timestamp:
        # format it once per distinct second (the text has whole seconds; strftime is most of
        # a small create, and a wall-clock-paced clock never stands still).
        t = int(self._clock())
        if t != self._now_t:
            self._now_t, self._now_text = t, rfc3339(t)
        return self._now_text

    def _resolve(self, kind: Any, api_version: str | None) -> tuple[KindInfo, Table]:
        try:
            if self._resolved_gen == self.kinds.generation:
                return self._resolved[(kind, api_version)]
            self._resolved.clear()
            self._resolved_gen = self.kinds.generation
        except (KeyError, TypeError):
            pass
        if not isinstance(kind, str) or not kind:
            raise BadRequest(f"a kind is required, got {kind!r}")
        info = self.kinds.resolve(kind, api_version)
        found = self._resolved[(kind, api_version)] = (info, self.store.table(info))
        return found

    def _kind_of(self, obj: Any) -> tuple[KindInfo, Table]:
        if not isinstance(obj, dict):
            raise BadRequest("the body of the request must be a JSON object, not "
                             f"{type(obj).__name__}")
        kind = obj.get("kind")
        if not kind:
            raise BadRequest(f"Object 'Kind' is missing in '{_dumps(obj, default=str).decode()}'")
        return self._resolve(kind, obj.get("apiVersion"))

    @staticmethod
    def _scope(info: KindInfo, namespace: str | None) -> str:
        if not info.namespaced:
            return ""
        return namespace or "default"

    def _lookup(self, info: KindInfo, table: Table, ns: str, name: Any) -> Entry:
        if not isinstance(name, str) or not name:
            raise BadRequest("resource name may not be empty")
        entry = table.objs.get((ns, name))
        if entry is None:
            raise NotFound(info.plural, name, info.group)
        return entry

    def _record(self, verb: str, info: KindInfo, entry: Entry, caller: str) -> None:
        rec = self._rec
        if rec is not None:
            rec("write", _WRITE_FIELDS, (verb, info.kind, entry.ns, entry.name, entry.rev, caller))
        elif self._trace is not None:
            self._trace("write", verb=verb, kind=info.kind, ns=entry.ns, name=entry.name,
                        rv=entry.rev, caller=caller)

    def _entry(self, info: KindInfo, ns: str, name: str, obj: Obj, rev: int) -> Entry:
        """Serialize ``obj`` (metadata.resourceVersion already set) into a new Entry."""
        data = _dumps(obj)
        if len(data) > MAX_OBJECT_BYTES:
            raise RequestEntityTooLarge(
                f'{info.resource} "{name}" is too large: {len(data)} bytes serialized, the limit '
                f"is {MAX_OBJECT_BYTES} (1.5 MiB)")
        meta = obj["metadata"]
        labels = dict(meta["labels"]) if meta.get("labels") else {}
        refs = meta.get("ownerReferences")
        owners = tuple(r["uid"] for r in refs if r.get("uid")) if refs else ()
        extract = info.extract_fields
        fields = extract(obj) if extract is not None else None
        fin = meta.get("finalizers")
        return Entry(ns, name, data, rev, meta.get("uid", ""), labels, owners, fields,
                     tuple(fin) if fin else (), "deletionTimestamp" in meta)

    def _check_meta_causes(self, info: KindInfo, meta: Obj, old_meta: Obj | None
                           ) -> list[StatusCause]:
        causes: list[StatusCause] = []
        labels = meta.get("labels")
        if labels and (old_meta is None or labels != old_meta.get("labels")):
            causes.extend(v.validate_labels(labels))
        ann = meta.get("annotations")
        if ann and (old_meta is None or ann != old_meta.get("annotations")):
            causes.extend(v.validate_annotations(ann))
        refs = meta.get("ownerReferences")
        if refs and (old_meta is None or refs != old_meta.get("ownerReferences")):
            controllers = []
            for ref in refs:
                for fname, what in (("apiVersion", "version"), ("kind", "kind"),
                                    ("name", "name"), ("uid", "uid")):
                    if not ref.get(fname):
                        causes.append(v.invalid(f"metadata.ownerReferences.{fname}",
                                                ref.get(fname, ""), f"{what} must not be empty"))
                if ref.get("apiVersion") == "v1" and ref.get("kind") == "Event":
                    causes.append(v.invalid("metadata.ownerReferences", ref,
                                            "/v1, Kind=Event is disallowed from being an owner"))
                if ref.get("controller"):
                    controllers.append(f"{ref.get('kind')}/{ref.get('name')}")
            if len(controllers) > 1:
                causes.append(v.invalid("metadata.ownerReferences", refs,
                                        "Only one reference can have Controller set to true. "
                                        f"Found \"true\" in references for {controllers[0]} and "
                                        f"{controllers[1]}"))
        fin = meta.get("finalizers")
        if fin and (old_meta is None or fin != old_meta.get("finalizers")):
            causes.extend(v.validate_finalizers(fin, builtin=not info.custom))
        return causes

    def evict(self, name: str, namespace: str = "default", *, body: Obj | None = None,
              caller: str = "", dry_run: bool = False) -> Obj:
        """``POST pods/<name>/eviction``: delete the Pod as its PodDisruptionBudget allows
        (`emu.apiserver.disruption.Disruption.evict`); a 429 when it does not."""
        return self.disruption.evict(name, namespace, body, caller, dry_run)

    def create_token(self, name: str, namespace: str = "default", body: Obj | None = None, *,
                     dry_run: bool = False) -> Obj:
        """``POST serviceaccounts/<name>/token`` (``kubectl create token``): a TokenRequest
        answered with a JWT signed by the world's key (`emu.apiserver.tokens`)."""
        return self.tokens.request(name, namespace, body, dry_run=dry_run)

    def review_token(self, body: Obj) -> Obj:
        """``POST tokenreviews``: the TokenReview with its ``status`` (authenticated, user,
        audiences, or kube's error) for ``spec.token``."""
        return self.tokens.review(body)

    def _admit_delete(self, info: KindInfo, entry: Entry, obj: Obj, caller: str,
                      dry_run: bool) -> None:
        """DELETE admission: the policies and the webhooks see the stored object as
        ``oldObject`` (and no ``object``); they may refuse, not change it."""
        if self._vap_bindings and info.group != "admissionregistration.k8s.io":
            self.policies.validate("DELETE", info, None, obj, entry.ns, entry.name, caller)
        for mutating in (True, False):
            if self._hooks_m if mutating else self._hooks_v:
                self.webhooks.admit(mutating, "DELETE", info, None, obj, entry.ns, entry.name,
                                    dry_run, caller)

    def _quota_changed(self, info: KindInfo, ns: str, caller: str) -> None:
        """After a committed write in a namespace with a ResourceQuota: the quotas' status
        follows the usage the write changed (`Admission.sync_quotas`)."""
        if self.admission.tracked(info, ns):
            self.admission.sync_quotas(ns, caller)

    def _check_namespace(self, info: KindInfo, ns: str, name: str) -> None:
        entry = self._ns_table.objs.get(("", ns))
        if entry is None:
            raise NotFound("namespaces", ns)
        if entry.deleting:
            raise Forbidden(f'{info.resource} "{name}" is forbidden: unable to create new content '
                            f"in namespace {ns} because it is being terminated")

    # -- reads ---------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None, *,
            resource_version: Any = None, api_version: str | None = None) -> Obj:
        """The object, as a fresh dict; 404 NotFound when it doesn't exist. A
        ``resource_version`` means "not older than" (kube's watch cache serves a get at a version
        that way): the current object, or 504 when the version is newer than the current one."""
        return _loads(self._get(kind, name, namespace, resource_version, api_version).data)

    def _get(self, kind: str, name: str, namespace: str | None, resource_version: Any,
             api_version: str | None) -> Entry:
        """`get`'s stored entry (its bytes are the answer, for a caller that sends them on)."""
        info, table = self._resolve(kind, api_version)
        if resource_version not in (None, ""):
            rev = self._parse_rv(resource_version)
            if rev is not None and rev > self.store.rev:
                raise ServerTimeout(f"Too large resource version: {rev}, current: "
                                    f"{self.store.rev}")
        entry = table.objs.get(("" if not info.namespaced else namespace or "default", name))
        if entry is None:
            if not name:
                raise BadRequest("resource name may not be empty")
            raise NotFound(info.plural, name, info.group)
        return entry

    def _selectors(self, info: KindInfo, label_selector: Any, field_selector: Any
                   ) -> tuple[LabelSelector | None, FieldSelector | None]:
        if isinstance(label_selector, dict):
            labels: LabelSelector | None = selector_from_dict(label_selector)
        elif isinstance(label_selector, LabelSelector):
            labels = label_selector
        else:
            labels = parse_label_selector(label_selector) if label_selector else None
        if isinstance(field_selector, dict):
            field_selector = ",".join(f"{k}={val}" for k, val in field_selector.items())
        fields = parse_field_selector(field_selector, info.selectable) if field_selector else None
        return labels, fields

    def _parse_rv(self, resource_version: Any) -> int | None:
        if resource_version in (None, ""):
            return None
        try:
            rev = int(resource_version)
        except (TypeError, ValueError):
            raise BadRequest(f'invalid resource version "{resource_version}"') from None
        if rev < 0:
            raise BadRequest(f'invalid resource version "{resource_version}"')
        return rev

    def list(self, kind: str, namespace: str | None = None, *, label_selector: Any = None,
             field_selector: Any = None, resource_version: Any = None,
             resource_version_match: str | None = None, limit: int | None = None,
             continue_: str | None = None, api_version: str | None = None,
             encoded: bool = False) -> Obj:
        """A List object (``PodList`` ...) with items in namespace/name order (``encoded``:
        each item as its stored JSON bytes, for an HTTP server to send on).

        As kube-apiserver: no ``resource_version`` (or ``"0"``, or a version with
        ``resource_version_match="NotOlderThan"``) reads the current state, and a version newer
        than the current one is 504; ``resource_version_match="Exact"`` reads the state at that
        version (410 once compacted). ``limit`` > 0 returns at most that many items, with
        ``metadata.continue`` when more match (and ``remainingItemCount`` when no selector is
        set); pass the token back as ``continue_`` to read the next page at the first page's
        revision, 410 once that revision is compacted. ``namespace`` None lists every
        namespace."""
        info, table = self._resolve(kind, api_version)
        labels, fields = self._selectors(info, label_selector, field_selector)
        rev = self._parse_rv(resource_version)
        lim = self._parse_limit(limit)
        causes = self._list_option_causes(resource_version, resource_version_match, continue_,
                                          watch=False, send_initial_events=None,
                                          allow_bookmarks=False)
        if causes:
            raise Invalid("ListOptions", "", causes, "meta.k8s.io")
        ns = (namespace or None) if info.namespaced else None
        after: tuple[str, str] | None = None
        if continue_:
            if resource_version not in (None, "", "0"):
                raise BadRequest("specifying resource version is not allowed when using continue")
            read_rev, after = self._decode_continue(continue_, info, ns)
            if read_rev < 0:  # an inconsistent continuation: the latest state
                read_rev = self.store.rev
        elif rev is not None and resource_version_match == "Exact":
            if rev > self.store.rev:
                raise ServerTimeout(f"Too large resource version: {rev}, current: "
                                    f"{self.store.rev}")
            read_rev = rev
        else:
            if rev is not None and rev > self.store.rev:
                raise ServerTimeout(f"Too large resource version: {rev}, current: "
                                    f"{self.store.rev}")
            read_rev = self.store.rev
        objs = self.store.snapshot(table, read_rev)
        if objs is None:
            if continue_:
                raise self._expired_continue(info, ns, after)
            raise Gone("The resourceVersion for the provided list is too old.")
        entries, more, remaining = table.page(objs, ns, labels, fields, after, lim)
        meta: Obj = {"resourceVersion": str(read_rev)}
        if more:
            last = entries[-1]
            meta["continue"] = _encode_continue(read_rev, (last.ns, last.name), info, ns)
            if (labels is None or labels.empty) and (fields is None or fields.empty):
                meta["remainingItemCount"] = remaining
        return {"apiVersion": info.api_version, "kind": info.list_kind, "metadata": meta,
                "items": [e.data for e in entries] if encoded else _decode_all(entries)}

    @staticmethod
    def _parse_limit(limit: Any) -> int:
        if limit is None or limit == "":
            return 0
        if isinstance(limit, bool):
            raise BadRequest(f"limit must be an integer, not {limit!r}")
        try:
            return int(limit)
        except (TypeError, ValueError):
            raise BadRequest(f'strconv.ParseInt: parsing "{limit}": invalid syntax') from None

    @staticmethod
    def _list_option_causes(resource_version: Any, match: Any, continue_: Any, *, watch: bool,
                            send_initial_events: Any, allow_bookmarks: bool
                            ) -> builtins.list[StatusCause]:
        """``ValidateListOptions`` (k8s.io/apimachinery internalversion/validation)."""
        causes: builtins.list[StatusCause] = []
        rv = "" if resource_version is None else str(resource_version)
        match = match or ""
        if match and not watch and not rv:
            causes.append(v.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                      "forbidden unless resourceVersion is provided"))
        if match and continue_:
            causes.append(v.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                      "forbidden when continue is provided"))
        if match and match not in ("Exact", "NotOlderThan"):
            causes.append(v.not_supported("resourceVersionMatch", match,
                                          ("Exact", "NotOlderThan", "")))
        if match == "Exact" and rv == "0":
            causes.append(v.forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is '
                                      'forbidden for resourceVersion "0"'))
        if send_initial_events is not None:
            if not watch:
                causes.append(v.forbidden("sendInitialEvents", "sendInitialEvents is forbidden "
                                          "for list"))
            else:
                if match != "NotOlderThan":
                    causes.append(v.forbidden("resourceVersionMatch", "sendInitialEvents "
                                              "requires setting resourceVersionMatch to "
                                              "NotOlderThan"))
                if not allow_bookmarks:
                    causes.append(v.forbidden("allowWatchBookmarks", "sendInitialEvents "
                                              "requires setting allowWatchBookmarks to true"))
        elif watch and match:
            causes.append(v.forbidden("resourceVersionMatch", "resourceVersionMatch is "
                                      "forbidden for watch unless sendInitialEvents is provided"))
        return causes

    @staticmethod
    def _decode_continue(token: Any, info: KindInfo, ns: str | None
                         ) -> tuple[int, tuple[str, str]]:
        """``storage.DecodeContinue``: the revision of the first page and the last key read."""
        def invalid(why: str) -> BadRequest:
            return BadRequest(f"invalid continue token: continue key is not valid: {why}")

        if not isinstance(token, str):
            raise invalid("the token is not a string")
        # base64.RawURLEncoding, as kube issues them: Go's CorruptInputError names the offset
        bad = next((i for i, c in enumerate(token) if c not in _URL_BASE64), None)
        if bad is None and len(token) % 4 == 1:
            bad = len(token) - 1
        if bad is not None:
            raise invalid(f"illegal base64 data at input byte {bad}")
        try:
            data = _loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (ValueError, binascii.Error):
            raise invalid("invalid character looking for beginning of value") from None
        if not isinstance(data, dict):
            raise invalid(f"json: cannot unmarshal {v.go_kind(data)} into Go value of type "
                          "storage.continueToken")
        if data.get("v") != "meta.k8s.io/v1":
            raise BadRequest("invalid continue token: continue key is not valid: server does not "
                             "recognize this encoded version")
        rv = data.get("rv")
        start = data.get("start")
        if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
            raise BadRequest("invalid continue token: continue key is not valid: incorrect "
                             "encoded start resourceVersion (version meta.k8s.io/v1)")
        if not isinstance(start, str) or not start:
            raise BadRequest("invalid continue token: continue key is not valid: encoded start "
                             "key empty")
        key = start[:-1] if start.endswith("\x00") else start
        if info.namespaced and ns is None:
            obj_ns, sep, name = key.partition("/")
            if not sep:
                raise BadRequest("invalid continue token: continue key is not valid: the start "
                                 f"key {key!r} names no namespace")
        else:
            obj_ns, name = (ns or ""), key
        if ".." in key.split("/"):
            raise BadRequest("invalid continue token: continue key is not valid: path traversal "
                             "attempt detected")
        return rv, (obj_ns, name)

    def _expired_continue(self, info: KindInfo, ns: str | None,
                          after: tuple[str, str] | None) -> Gone:
        """410 for a continuation whose revision is compacted, carrying (as kube does) a token
        that continues from the same key at the latest revision, inconsistently."""
        err = Gone("The provided continue parameter is too old to display a consistent list "
                   "result. You can start a new list without the continue parameter, or use the "
                   "continue token in this response to retrieve the remainder of the results. "
                   "Continuing with the provided token results in an inconsistent list - objects "
                   "that were created, modified, or deleted between the time the first chunk was "
                   "returned and now may show up in the list.")
        if after is not None:
            err.continue_token = _encode_continue(-1, after, info, ns)
        return err

    def dependents(self, uid: str) -> builtins.list[Obj]:
        """Objects whose ownerReferences name ``uid`` (for the garbage collector)."""
        return [_loads(e.data) for e in self.store.dependents(uid)]

    def watch(self, kind: str, namespace: str | None = None, *, label_selector: Any = None,
              field_selector: Any = None, resource_version: Any = None,
              allow_bookmarks: bool = False, timeout_seconds: float | None = None,
              resource_version_match: str | None = None, send_initial_events: bool | None = None,
              api_version: str | None = None) -> WatchStream:
        """Open a watch (see `WatchHub.open`); the same as `open_watch` without the network.

        ``send_initial_events=True`` (a watch-list; needs ``resource_version_match=
        "NotOlderThan"`` and ``allow_bookmarks``) sends the current objects, then a bookmark
        annotated ``k8s.io/initial-events-end``, then the changes; a ``resource_version`` newer
        than the current one is then 504, as kube's watch cache answers after waiting."""
        info, table = self._resolve(kind, api_version)
        labels, fields = self._selectors(info, label_selector, field_selector)
        rev = self._parse_rv(resource_version)
        causes = self._list_option_causes(resource_version, resource_version_match, None,
                                          watch=True, send_initial_events=send_initial_events,
                                          allow_bookmarks=allow_bookmarks)
        if causes:
            raise Invalid("ListOptions", "", causes, "meta.k8s.io")
        if send_initial_events and rev is not None and rev > self.store.rev:
            raise ServerTimeout(f"Too large resource version: {rev}, current: {self.store.rev}")
        if timeout_seconds is not None and (isinstance(timeout_seconds, bool) or not isinstance(
                timeout_seconds, int | float) or not timeout_seconds >= 0):
            raise BadRequest(f"timeoutSeconds must be a non-negative number, not "
                             f"{timeout_seconds!r}")
        ns = namespace if info.namespaced else None
        return self.watches.open(table, ns or None, labels, fields, rev,
                                 bookmarks=allow_bookmarks,
                                 bookmark_interval=self.bookmark_interval,
                                 timeout=timeout_seconds or None,
                                 send_initial_events=send_initial_events)

    # -- create ----------------------------------------------------------------------------------

    def create(self, obj: Obj, *, caller: str = "", dry_run: bool = False,
               namespace: str | None = None, field_validation: str | None = None) -> Obj:
        """Create ``obj``; returns the stored object (uid, timestamps, defaults filled in).
        Unknown fields are dropped, or refused with ``field_validation="Strict"``."""
        out: Obj = self._create(obj, caller, dry_run, namespace, field_validation, False)
        return out

    def _create(self, obj: Obj, caller: str, dry_run: bool, namespace: str | None,
                field_validation: str | None, encoded: bool,
                resolved: tuple[KindInfo, Table] | None = None) -> Any:
        """`create`; ``encoded``: the answer is the stored bytes (not for a dry run);
        ``resolved``: ``obj``'s kind and table, when the caller has them (`_body`)."""
        mode = "Warn" if field_validation is None else v.check_field_validation(field_validation)
        info, table = self._kind_of(obj) if resolved is None else resolved
        meta = obj.get("metadata")
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise v.decode_error(info.kind, info.api_version,
                                 "json: cannot unmarshal into Go struct field .metadata of type "
                                 "v1.ObjectMeta")
        v.check_metadata_types(info.kind, info.api_version, meta)
        if info.int_fields:
            v.check_int_fields(info.kind, info.api_version, obj, info.int_fields)
        v.check_shapes(info.group, info.kind, info.api_version, obj)
        if meta.get("resourceVersion"):
            raise InternalError("resourceVersion should not be set on objects to be created")
        new = dict(obj)
        meta = dict(meta)
        new["metadata"] = meta
        new["apiVersion"] = info.api_version
        new["kind"] = info.kind
        warnings = self._warnings if mode == "Warn" else None
        v.prune_unknown(info.group, info.kind, new, meta, mode, info.api_version,
                        _schema_unknown(info, new, mode, field_validation is not None,
                                        warn=warnings is not None), warnings)
        data_validator = v.DATA_KINDS.get((info.group, info.kind))
        if data_validator is not None:
            v.check_data_types(info.kind, info.api_version, new)
        ns = self._scope(info, meta.get("namespace") or namespace)
        if info.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        name: str = meta.get("name") or ""
        shown = name or str(meta.get("generateName") or "")  # the name admission errors name
        if not name:
            gen = meta.get("generateName")
            if not gen:
                raise Invalid(info.kind, "", [v.required(
                    "metadata.name", "name or generateName is required")], info.group)
            base = gen[:58]
            for _ in range(16):
                name = base + self._rng.name_suffix(5)
                if (ns, name) not in table.objs:
                    break
            meta["name"] = name
        if info.namespaced:
            self._check_namespace(info, ns, name)
        if "deletionTimestamp" in meta or "deletionGracePeriodSeconds" in meta:
            meta.pop("deletionTimestamp", None)
            meta.pop("deletionGracePeriodSeconds", None)
        meta["uid"] = self._rng.uid()
        meta["creationTimestamp"] = self._now()
        if info.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if info.has_status and info.reset_status_on_create:
            new.pop("status", None)
        if info.prepare_create is not None:
            info.prepare_create(new, self)
        if info.defaulter is not None:
            info.defaulter(new, None)
        limited = ns in self._limit_ns and info.kind == "Pod" and info.group == ""
        if limited:  # mutating admission: LimitRanger's defaults
            self.admission.limit_ranger_admit(new, ns)
        if self.service_account_admission and info.kind == "Pod" and info.group == "":
            service_account_admit(self, new, ns, shown)
        if info.kind == "Pod" and info.group == "" and (self._priority_classes or (
                new.get("spec") or {}).get("priorityClassName")):
            self.priority.admit(info, new, name)
        if info.kind == "PersistentVolumeClaim" and info.group == "" and self._storage_classes:
            admit_default_storage_class(new, self._storage_classes)
        if self.default_toleration_seconds is not None and info.kind == "Pod" and \
                info.group == "" and isinstance(new.get("spec"), dict):
            default_toleration_seconds_admit(new["spec"], self.default_toleration_seconds)
        if self._hooks_m:
            new = self.webhooks.admit(True, "CREATE", info, new, None, ns, name, dry_run, caller)
            meta = new["metadata"]
        causes = v.NAME_CHECKS[info.name_format]("metadata.name", name)
        causes.extend(self._check_meta_causes(info, meta, None))
        if info.validator is not None:
            causes.extend(info.validator(new, None))
        if data_validator is not None:
            causes.extend(data_validator(new, None))
        if causes:
            raise Invalid(info.kind, name, causes, info.group)
        quota = ns in self._quota_ns
        if limited:  # validating admission: LimitRanger, then ResourceQuota
            self.admission.limit_ranger_validate(info, new, ns, name)
        if self._vap_bindings and info.group != "admissionregistration.k8s.io":
            self.policies.validate("CREATE", info, new, None, ns, name, caller)
        if self._hooks_v:
            self.webhooks.admit(False, "CREATE", info, new, None, ns, name, dry_run, caller)
        if quota:
            self.admission.quota_check(info, new, ns, name)
        if (ns, name) in table.objs:
            raise AlreadyExists(info.plural, name, info.group)
        rev = self.store.rev + 1
        meta["resourceVersion"] = str(rev)
        entry = self._entry(info, ns, name, new, rev)
        if dry_run:  # a dry-run object was never stored, so it has no resourceVersion
            out = _loads(entry.data)
            del out["metadata"]["resourceVersion"]
            return out
        self.store.commit(table, "ADDED", entry, None)
        self._record("create", info, entry, caller)
        if quota or (info.kind == "ResourceQuota" and info.group == ""):
            self._quota_changed(info, ns, caller)
        if ns in self._pdb_ns and info.kind in _PDB_KINDS:
            self.disruption.sync(ns)
        if info.kind == "CustomResourceDefinition" and info.group == "apiextensions.k8s.io":
            self.kinds.register(crd_kind_info(new))  # served at once (Established)
        return entry.data if encoded else _loads(entry.data)

    # -- update ----------------------------------------------------------------------------------

    def update(self, obj: Obj, *, caller: str = "", dry_run: bool = False,
               namespace: str | None = None, field_validation: str | None = None,
               field_manager: str | None = None) -> Obj:
        """Replace the object (status is ignored for kinds with a status subresource)."""
        return self._update(obj, caller, False, dry_run, namespace, field_validation,
                            field_manager=field_manager)

    def update_status(self, obj: Obj, *, caller: str = "", dry_run: bool = False,
                      namespace: str | None = None, field_validation: str | None = None,
                      field_manager: str | None = None) -> Obj:
        """Replace only ``status`` (the ``/status`` subresource)."""
        return self._update(obj, caller, True, dry_run, namespace, field_validation,
                            field_manager=field_manager)

    def _update(self, obj: Obj, caller: str, status_only: bool, dry_run: bool,
                namespace: str | None, field_validation: str | None = None,
                encoded: bool = False, resolved: tuple[KindInfo, Table] | None = None,
                field_manager: str | None = None) -> Any:
        """`update` and `update_status`; ``encoded``: the answer is the stored bytes when the
        object stays stored (not for a dry run), ``resolved`` as `_create`'s. On an object
        with ``managedFields`` (one that was applied), the write is recorded as an ``Update``
        entry of ``field_manager`` (else the caller), as kube's field manager does."""
        mode = "Warn" if field_validation is None else v.check_field_validation(field_validation)
        info, table = self._kind_of(obj) if resolved is None else resolved
        if status_only and not info.has_status:
            raise ApiError.from_status({"reason": "NotFound", "code": 404,
                                        "message": "the server could not find the requested "
                                                   "resource"})
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise BadRequest("metadata.name is required for an update")
        ns = self._scope(info, meta.get("namespace") or namespace)
        name: str = meta.get("name") or ""
        entry = self._lookup(info, table, ns, name)
        rv = meta.get("resourceVersion")
        if rv:
            if rv != entry.rv:
                raise Conflict(info.plural, name, info.group)
        elif not info.allow_unconditional_update:
            raise Invalid(info.kind, name, [StatusCause(
                "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion")], info.group)
        uid = meta.get("uid")
        if uid and uid != entry.uid:  # the uid precondition holds for /status too
            raise Conflict(info.plural, name, info.group,
                           why=f"Precondition failed: UID in precondition: {uid}, UID in "
                               f"object meta: {entry.uid}")
        old: Obj = _loads(entry.data)
        old_meta: Obj = old["metadata"]
        spec_changed: bool | None = None
        if status_only:
            new = dict(old)
            nmeta: Obj = dict(old_meta)
            new["metadata"] = nmeta
            if "status" in obj:
                sent_status = {"status": obj["status"]}
                warnings = self._warnings if mode == "Warn" else None
                unknown = _schema_unknown(info, sent_status, mode, field_validation is not None,
                                          old, warnings is not None)
                if unknown:
                    problems = [f'unknown field "{p}"' for p in unknown]
                    if warnings is None:
                        raise v.strict_error(info.kind, info.api_version, problems)
                    warnings.extend(problems)
                new["status"] = sent_status["status"]
            else:
                new.pop("status", None)
            sent_fields = meta.get("managedFields")
            if sent_fields is not None and sent_fields != old_meta.get("managedFields"):
                nmeta["managedFields"] = sent_fields  # a status apply's entry, as kube keeps
            kept = v.STATUS_KEEPS_META.get((info.group, info.kind))
            if kept is not None and _meta_differs(meta, old_meta):
                # Older built-in kinds' status strategies copy only the spec back, so metadata
                # sent to /status is written too, less what the kind resets (a Pod's
                # ownerReferences, a Deployment's labels); custom resources keep only status.
                v.check_metadata_types(info.kind, info.api_version, meta, old_meta)
                sent = dict(meta)
                v.prune_unknown(info.group, info.kind, {}, sent, "Ignore")
                for fname in v.STATUS_META_FIELDS:
                    if fname in kept:
                        continue
                    if fname in sent:
                        nmeta[fname] = sent[fname]
                    else:
                        nmeta.pop(fname, None)
                causes = self._check_meta_causes(info, nmeta, old_meta)
                if entry.deleting:
                    added = [f for f in nmeta.get("finalizers") or ()
                             if f not in entry.finalizers]
                    if added:
                        causes.append(v.forbidden(
                            "metadata.finalizers", "no new finalizers can be added if the "
                            f"object is being deleted, found new finalizers {_go_strings(added)}"))
                if causes:
                    raise Invalid(info.kind, name, causes, info.group)
            if info.defaulter is not None:
                info.defaulter(new, old)
        else:
            meta_changed = (meta.get("labels") != old_meta.get("labels")
                            or meta.get("annotations") != old_meta.get("annotations")
                            or meta.get("finalizers") != old_meta.get("finalizers")
                            or meta.get("ownerReferences") != old_meta.get("ownerReferences"))
            if meta_changed:
                v.check_metadata_types(info.kind, info.api_version, meta, old_meta)
            if info.int_fields:
                v.check_int_fields(info.kind, info.api_version, obj, info.int_fields)
            v.check_shapes(info.group, info.kind, info.api_version, obj, old)
            new = dict(obj)
            nmeta = dict(meta)
            new["metadata"] = nmeta
            new["apiVersion"] = info.api_version
            new["kind"] = info.kind
            warnings = self._warnings if mode == "Warn" else None
            v.prune_unknown(info.group, info.kind, new, nmeta, mode, info.api_version,
                            _schema_unknown(info, new, mode, field_validation is not None, old,
                                            warnings is not None), warnings)
            data_validator = v.DATA_KINDS.get((info.group, info.kind))
            if data_validator is not None:
                v.check_data_types(info.kind, info.api_version, new, old)
            for fname in _SERVER_META:
                if fname in old_meta:
                    nmeta[fname] = old_meta[fname]
                else:
                    nmeta.pop(fname, None)
            if info.namespaced:
                nmeta["namespace"] = ns
            else:
                nmeta.pop("namespace", None)
            if info.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if info.defaulter is not None:
                info.defaulter(new, old)
            if self._hooks_m:
                new = self.webhooks.admit(True, "UPDATE", info, new, old, ns, name, dry_run,
                                          caller)
                nmeta = new["metadata"]
            causes = self._check_meta_causes(info, nmeta, old_meta) if meta_changed else []
            if info.validator is not None:
                causes.extend(info.validator(new, old))
            if data_validator is not None:
                causes.extend(data_validator(new, old))
            if entry.deleting:
                added = [f for f in nmeta.get("finalizers") or () if f not in entry.finalizers]
                if added:
                    causes.append(v.forbidden(
                        "metadata.finalizers", "no new finalizers can be added if the object is "
                        f"being deleted, found new finalizers {_go_strings(added)}"))
            if causes:
                raise Invalid(info.kind, name, causes, info.group)
            if self._vap_bindings and info.group != "admissionregistration.k8s.io":
                self.policies.validate("UPDATE", info, new, old, ns, name, caller)
            if self._hooks_v:
                self.webhooks.admit(False, "UPDATE", info, new, old, ns, name, dry_run, caller)
            if info.has_generation:
                spec_changed = _spec_changed(new, old)
                if spec_changed:
                    nmeta["generation"] = old_meta.get("generation", 0) + 1
        owners = old_meta.get("managedFields")
        if owners and nmeta.get("managedFields") == owners:  # not on the hot path: applied only
            from .ssa import track_update

            tracked = track_update(info, old, new, field_manager or caller or "unknown",
                                   "status" if status_only else None, self._now())
            if tracked is not None:
                if tracked:
                    nmeta["managedFields"] = tracked
                else:
                    nmeta.pop("managedFields", None)
        nmeta["resourceVersion"] = entry.rv
        # kube skips writes that change nothing: no new revision, no event.
        if spec_changed is None:
            same = new == old
        else:
            same = (not spec_changed and nmeta == old_meta
                    and new.get("status", _MISSING) == old.get("status", _MISSING))
        if same:
            return entry.data if encoded else old
        if entry.deleting and not nmeta.get("finalizers") and (
                not info.graceful_delete or not nmeta.get("deletionGracePeriodSeconds")):
            # The update empties the finalizers of an object being deleted: kube does not
            # store it but deletes the stored object, so the answer and the DELETED event
            # carry what was stored (``deleteWithoutFinalizers``), not the update's content.
            stored: Obj = _loads(entry.data)
            if dry_run:
                return stored
            return self._remove(info, table, entry, stored, caller, "update")
        if dry_run:  # what would be written, at the revision it has now (nothing is committed)
            return _loads(self._entry(info, ns, name, new, entry.rev).data)
        rev = self.store.rev + 1
        nmeta["resourceVersion"] = str(rev)
        fresh = self._entry(info, ns, name, new, rev)
        self.store.commit(table, "MODIFIED", fresh, entry)
        self._record("update_status" if status_only else "update", info, fresh, caller)
        if ns in self._quota_ns:
            self._quota_changed(info, ns, caller)
        if ns in self._pdb_ns and info.kind in _PDB_KINDS:
            self.disruption.sync(ns)
        return fresh.data if encoded else _loads(fresh.data)

    # -- patch -----------------------------------------------------------------------------------

    def patch(self, kind: str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: str = "merge", subresource: str | None = None, caller: str = "",
              api_version: str | None = None, dry_run: bool = False,
              field_validation: str | None = None,
              field_manager: str | None = None, force: bool = False) -> Obj:
        """Apply a ``merge``, ``json`` or ``strategic`` patch to the stored object, then write it
        through the update path (``subresource="status"``: only status changes). ``apply`` is
        server-side apply (`emu.apiserver.ssa`, with ``field_manager`` and ``force``)."""
        out: Obj = self._patch(kind, name, patch, namespace, patch_type, subresource, caller,
                               api_version, dry_run, field_validation, field_manager, force,
                               False)
        return out

    def _patch(self, kind: str, name: str, patch: Any, namespace: str | None, patch_type: str,
               subresource: str | None, caller: str, api_version: str | None, dry_run: bool,
               field_validation: str | None, field_manager: str | None, force: bool,
               encoded: bool) -> Any:
        """`patch`; ``encoded`` as `_update`'s (server-side apply answers decoded)."""
        info, table = self._resolve(kind, api_version)
        ns = self._scope(info, namespace)
        if patch_type == "apply":
            from .ssa import server_side_apply

            return server_side_apply(self, info, ns, name, patch, field_manager=field_manager,
                                     force=force, subresource=subresource, caller=caller,
                                     dry_run=dry_run, field_validation=field_validation)
        entry = self._lookup(info, table, ns, name)
        if subresource not in (None, "", "status"):
            raise ApiError.from_status({"reason": "NotFound", "code": 404,
                                        "message": "the server could not find the requested "
                                                   "resource"})
        current: Obj = _loads(entry.data)
        if patch_type == "merge":
            patched = apply_merge_patch(current, patch)
        elif patch_type == "json":
            patched = apply_json_patch(current, patch)
        elif patch_type == "strategic":
            if info.merge_keys is None:
                raise UnsupportedMediaType(
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml")
            patched = apply_strategic_merge_patch(current, patch, info.merge_keys)
        else:
            raise UnsupportedMediaType(
                f'unsupported patch type "{patch_type}": use one of "merge", "json", '
                '"strategic"')
        meta = patched.get("metadata")
        if not isinstance(meta, dict):
            raise BadRequest("the patch removed the object's metadata")
        if meta.get("name") != name:
            raise BadRequest(f"the name of the object ({meta.get('name')}) does not match the "
                             f"name on the URL ({name})")
        if info.namespaced and meta.get("namespace") != ns:
            raise BadRequest("the namespace of the provided object does not match the namespace "
                             "sent on the request")
        patched["apiVersion"] = info.api_version
        patched["kind"] = info.kind
        if not meta.get("resourceVersion"):
            meta["resourceVersion"] = entry.rv  # a patch is applied to the version it read
        return self._update(patched, caller, subresource == "status", dry_run, ns,
                            field_validation, encoded, field_manager=field_manager)

    # -- delete ----------------------------------------------------------------------------------

    def delete(self, kind: str, name: str, namespace: str | None = None, *,
               propagation_policy: str | None = None, preconditions: Obj | None = None,
               grace_period_seconds: int | None = None, caller: str = "",
               api_version: str | None = None, dry_run: bool = False) -> Obj:
        """Delete, honouring finalizers, graceful Pod deletion and propagation policy. Returns the
        object when it stays (deletionTimestamp set) and, once removed, the object for Pods or a
        ``Status`` of ``Success`` for other kinds."""
        info, table = self._resolve(kind, api_version)
        ns = self._scope(info, namespace)
        entry = self._lookup(info, table, ns, name)
        return self._delete(info, table, entry, propagation_policy, preconditions,
                            grace_period_seconds, caller, dry_run)

    def _delete(self, info: KindInfo, table: Table, entry: Entry, policy: str | None,
                preconditions: Obj | None, grace: int | None, caller: str,
                dry_run: bool) -> Obj:
        name = entry.name
        if policy is not None and policy not in PROPAGATION_POLICIES:
            raise Invalid("DeleteOptions", "", [v.not_supported(
                "propagationPolicy", policy, PROPAGATION_POLICIES)], "meta.k8s.io")
        if grace is not None and (not isinstance(grace, int) or grace < 0):
            raise Invalid("DeleteOptions", "", [v.invalid(
                "gracePeriodSeconds", grace, "must be greater than or equal to 0")],
                "meta.k8s.io")
        if preconditions:
            want_uid = preconditions.get("uid")
            if want_uid and want_uid != entry.uid:
                raise Conflict(info.plural, name, info.group,
                               why=f"Precondition failed: UID in precondition: {want_uid}, UID "
                                   f"in object meta: {entry.uid}")
            want_rv = preconditions.get("resourceVersion")
            if want_rv and str(want_rv) != entry.rv:
                raise Conflict(info.plural, name, info.group,
                               why="Precondition failed: ResourceVersion in precondition: "
                                   f"{want_rv}, ResourceVersion in object meta: {entry.rv}")
        obj: Obj = _loads(entry.data)
        if self._hooks_m or self._hooks_v or (
                self._vap_bindings and info.group != "admissionregistration.k8s.io"):
            self._admit_delete(info, entry, obj, caller, dry_run)
        meta: Obj = obj["metadata"]
        before = list(meta.get("finalizers") or ())
        is_ns = info.kind == "Namespace" and not info.group
        now = self._clock()
        if entry.deleting:
            pending = meta.get("deletionGracePeriodSeconds") or 0
            if info.graceful_delete and pending:
                # ``BeforeDelete`` on an object already being deleted gracefully: only an
                # explicit shorter grace period changes anything (the deadline moves earlier by
                # the difference, generation stays); otherwise nothing changes, not even the
                # finalizers a propagation policy would add.
                if grace is None or grace >= pending:
                    return obj
                deadline = parse_time(meta["deletionTimestamp"]) - pending + grace
                meta["deletionTimestamp"] = rfc3339(deadline)
                meta["deletionGracePeriodSeconds"] = grace
            finalizers = _gc_finalizers(info, before, policy)
            if not (info.graceful_delete and pending) and finalizers == before:
                return obj  # already being deleted: nothing to do
        else:
            finalizers = _gc_finalizers(info, before, policy)
            if info.graceful_delete:
                spec = obj.get("spec") or {}
                phase = (obj.get("status") or {}).get("phase")
                if grace is None:
                    grace = spec.get("terminationGracePeriodSeconds", 30)
                if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
                    grace = 0
            else:
                grace = 0
            assert grace is not None
            if not finalizers and grace == 0 and not is_ns:
                if dry_run:
                    return obj if info.return_deleted_object else _status_success(
                        info, name, entry.uid)
                return self._remove(info, table, entry, obj, caller, "delete")
            meta["deletionTimestamp"] = rfc3339(now + grace)
            meta["deletionGracePeriodSeconds"] = grace
            _bump_generation(meta)
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        if not finalizers and not meta.get("deletionGracePeriodSeconds") and not is_ns:
            if dry_run:
                return obj
            return self._remove(info, table, entry, obj, caller, "delete")
        if is_ns:
            obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
        if dry_run:  # what would be written, at the revision it has now (nothing is committed)
            self._entry(info, entry.ns, name, obj, entry.rev)
            return obj
        rev = self.store.rev + 1
        meta["resourceVersion"] = str(rev)
        fresh = self._entry(info, entry.ns, name, obj, rev)
        self.store.commit(table, "MODIFIED", fresh, entry)
        self._record("delete", info, fresh, caller)
        if entry.ns in self._quota_ns:
            self._quota_changed(info, entry.ns, caller)
        if entry.ns in self._pdb_ns and info.kind in _PDB_KINDS:
            self.disruption.sync(entry.ns)
        if is_ns:
            self._terminate_namespace(name, caller)
            still = table.objs.get(("", name))
            if still is None:
                return _status_success(info, name, entry.uid)
            return _loads(still.data)
        return _loads(fresh.data)

    def _remove(self, info: KindInfo, table: Table, entry: Entry, obj: Obj, caller: str,
                verb: str) -> Obj:
        """Remove the object for good: one DELETED change carrying its last state."""
        rev = self.store.rev + 1
        obj["metadata"]["resourceVersion"] = str(rev)
        data = _dumps(obj)
        gone = Entry(entry.ns, entry.name, data, rev, entry.uid, entry.labels, entry.owners,
                     entry.fields, entry.finalizers, True)
        self.store.commit(table, "DELETED", gone, entry)
        self._record(verb, info, gone, caller)
        if entry.ns in self._quota_ns:
            self._quota_changed(info, entry.ns, caller)
        if entry.ns in self._pdb_ns and info.kind in _PDB_KINDS:
            self.disruption.sync(entry.ns)
        if info.namespaced:
            self._maybe_finish_namespace(entry.ns, caller)
        if info.kind == "CustomResourceDefinition" and info.group == "apiextensions.k8s.io":
            self._crd_removed(obj, caller)
        if info.return_deleted_object or verb == "update":
            return _loads(data)
        return _status_success(info, entry.name, entry.uid)

    def _crd_removed(self, crd: Obj, caller: str) -> None:
        """A CustomResourceDefinition is gone: its custom resources are deleted and its kind is
        no longer served (discovery stops listing it, requests get 404), as kube's
        ``customresourcecleanup`` finalizer and CRD handler do. A KubeRay kind, which the
        emulator serves without its CRD too, goes back to its built-in registration."""
        spec = crd.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
        served = self.kinds.get(group, kind)
        if served is None:
            return
        builtin = builtin_info(group, kind)
        if builtin is not None:
            self.kinds.register(builtin)
            return
        table = self.store.tables.get((group, kind))
        if table is not None:
            for entry in sorted(table.objs.values(), key=lambda e: (e.ns, e.name)):
                self._remove(served, table, entry, _loads(entry.data), caller, "delete")
        self.kinds.unregister(group, kind)

    # -- namespaces ----------------------------------------------------------------------------

    def _terminate_namespace(self, ns: str, caller: str) -> None:
        """The namespace controller's job, done in place: delete everything in a terminating
        namespace (its finalizers still apply), and the namespace once it is empty."""
        for table in list(self.store.tables.values()):
            if not table.info.namespaced:
                continue
            for entry in list((table.by_ns.get(ns) or {}).values()):
                if not entry.deleting:  # the namespace deleter's DeleteCollection: Background
                    self._delete(table.info, table, entry, "Background", None, None, caller,
                                 False)
        self._maybe_finish_namespace(ns, caller)

    def _maybe_finish_namespace(self, ns: str, caller: str) -> None:
        ns_table = self.store.table(self._ns_info)
        entry = ns_table.objs.get(("", ns))
        if entry is None or not entry.deleting:
            return
        if any(t.count(ns) for t in self.store.tables.values() if t.info.namespaced):
            return
        obj: Obj = _loads(entry.data)
        if obj["metadata"].get("finalizers"):
            return
        self._remove(self._ns_info, ns_table, entry, obj, caller, "delete")

    def delete_collection(self, kind: str, namespace: str | None = None, *,
                          label_selector: Any = None, field_selector: Any = None,
                          propagation_policy: str | None = None,
                          grace_period_seconds: int | None = None, caller: str = "",
                          api_version: str | None = None, dry_run: bool = False) -> Obj:
        """Delete every matching object; returns a List of what each delete returned."""
        info, table = self._resolve(kind, api_version)
        labels, fields = self._selectors(info, label_selector, field_selector)
        ns = namespace if info.namespaced else None
        items = []
        for entry in table.select(ns or None, labels, fields):
            current = table.objs.get((entry.ns, entry.name))
            if current is None:
                continue
            items.append(self._delete(info, table, current, propagation_policy, None,
                                      grace_period_seconds, caller, dry_run))
        return {"apiVersion": info.api_version, "kind": info.list_kind,
                "metadata": {"resourceVersion": str(self.store.rev)}, "items": items}

    # -- the network handlers ------------------------------------------------------------------

    def _body(self, req: ApiRequest) -> tuple[Obj, tuple[KindInfo, Table] | None]:
        """The body of a create or update, checked against the request (kind, apiVersion,
        namespace, name), with its kind and table (what `_kind_of` would find for it; None
        when the body names only one of kind and apiVersion)."""
        body = req.body
        if not isinstance(body, dict):
            raise BadRequest(f"the body of a {req.verb} request must be a JSON object, not "
                             f"{type(body).__name__}")
        resolved = self._resolve(req.kind, req.api_version)
        want = resolved[0]
        kind = body.get("kind")
        api_version = body.get("apiVersion")
        found: tuple[KindInfo, Table] | None = resolved
        if kind is None or api_version is None:
            body = dict(body)
            body.setdefault("kind", want.kind)
            body.setdefault("apiVersion", want.api_version)
            if kind is not None or api_version is not None:
                found = None  # half given: the verb resolves what the body now names
        elif kind != req.kind or api_version != req.api_version:  # else: what was resolved
            try:
                got: KindInfo | None = self._resolve(kind, api_version)[0]
            except ApiError:
                got = None
            if got is not want:
                if got is not None and got.kind == want.kind:
                    raise BadRequest(f"the API version in the data ({api_version}) does not "
                                     f"match the expected API version ({want.api_version})")
                raise BadRequest(f"the kind in the data ({kind}) does not match the kind of the "
                                 f"request ({want.kind})")
        meta = body.get("metadata")
        if isinstance(meta, dict) and want.namespaced and req.namespace:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != req.namespace:
                raise BadRequest("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
        if isinstance(meta, dict) and req.name and meta.get("name") and \
                meta["name"] != req.name and req.verb != "create":
            raise BadRequest(f"the name of the object ({meta['name']}) does not match the name "
                             f"on the URL ({req.name})")
        return body, found

    async def handle(self, payload: ApiRequest, info: CallInfo) -> Any:
        """Serve one request from the network (every verb but watch). The parameter names match
        the network's ``Handler`` protocol."""
        return self.answer(payload, info)

    def answer(self, payload: ApiRequest, info: CallInfo) -> Any:
        """`handle` as a plain function (nothing in it waits): the network's ``sync_handler``
        for the API server."""
        if not isinstance(payload, ApiRequest):
            raise BadRequest(f"expected an ApiRequest, got {type(payload).__name__}")
        if self.authorizer is not None:  # RBAC (emu.apiserver.rbac), when the world enforces it
            self.authorizer(payload, info)
        return self.serve(payload, caller=info.src)

    def serve(self, req: ApiRequest, caller: str = "") -> Any:
        """`handle` without the network: dispatch an `ApiRequest` to the verb methods (`_serve`).
        A ``warnings`` option (a list) collects the request's warnings, as kube-apiserver's
        ``Warning`` headers carry them: under ``fieldValidation=Warn``, each unknown field the
        write dropped, ``unknown field "spec.foo"``."""
        sink = req.options.get("warnings")
        if sink is None:
            return self._serve(req, caller)
        self._warnings = sink
        try:
            return self._serve(req, caller)
        finally:
            self._warnings = None

    def _serve(self, req: ApiRequest, caller: str) -> Any:
        """`serve`, the dispatch itself. A body
        over kube-apiserver's 3 MiB request limit is 413 before anything else: its size is the
        ``body_size`` option when the request says how many bytes its body came in (the HTTP
        gateway, for a JSON body: kube-apiserver limits those bytes), else its JSON encoding's.

        The ``encoded`` option (get, create, update, update_status, patch) asks for the stored
        bytes of the object as the answer instead of the decoded object, for a caller that
        sends them on (the HTTP gateway); some answers are decoded all the same (a dry run, an
        update that deletes, server-side apply), so such a caller takes both."""
        verb = req.verb
        o = req.options
        if req.body is not None and verb in _BODY_VERBS:
            size = o.get("body_size")
            if size is None:
                try:
                    size = len(_dumps(req.body))
                except (TypeError, orjson.JSONEncodeError) as e:
                    raise BadRequest("the body of the request cannot be encoded as JSON: "
                                     f"{e}") from None
            if size > MAX_REQUEST_BYTES:
                raise RequestEntityTooLarge(f"Request entity too large: limit is "
                                            f"{MAX_REQUEST_BYTES}")
        if verb == "get":
            entry = self._get(req.kind, req.name or "", req.namespace,
                              o.get("resource_version"), req.api_version)
            return entry.data if o.get("encoded") else _loads(entry.data)
        if verb == "list":
            return self.list(req.kind, req.namespace, label_selector=o.get("label_selector"),
                             field_selector=o.get("field_selector"),
                             resource_version=o.get("resource_version"),
                             resource_version_match=o.get("resource_version_match"),
                             limit=o.get("limit"), continue_=o.get("continue"),
                             api_version=req.api_version, encoded=bool(o.get("encoded")))
        if verb == "create" and o.get("subresource") == "eviction":
            info, _ = self._resolve(req.kind, req.api_version)
            if info.kind != "Pod" or info.group:
                raise NotFound(f"{info.plural}/eviction", req.name or "", info.group)
            return self.disruption.evict(req.name or "", self._scope(info, req.namespace),
                                         req.body, caller, bool(o.get("dry_run")))
        if verb == "create" and o.get("subresource") == "token":
            info, _ = self._resolve(req.kind, req.api_version)
            if info.kind != "ServiceAccount" or info.group:
                raise NotFound(f"{info.plural}/token", req.name or "", info.group)
            return self.tokens.request(req.name or "", self._scope(info, req.namespace),
                                       req.body, dry_run=bool(o.get("dry_run")))
        if verb == "create" and req.kind == "TokenReview":
            return self.tokens.review(req.body)
        if verb == "create":
            body, resolved = self._body(req)
            return self._create(body, caller, bool(o.get("dry_run")), req.namespace,
                                o.get("field_validation"), bool(o.get("encoded")), resolved)
        if verb in ("update", "update_status"):
            body, resolved = self._body(req)
            return self._update(body, caller, verb == "update_status", bool(o.get("dry_run")),
                                req.namespace, o.get("field_validation"), bool(o.get("encoded")),
                                resolved, o.get("field_manager"))
        if verb == "patch":
            return self._patch(req.kind, req.name or "", req.body, req.namespace,
                               o.get("patch_type", "merge"), o.get("subresource"), caller,
                               req.api_version, bool(o.get("dry_run")),
                               o.get("field_validation"), o.get("field_manager"),
                               bool(o.get("force")), bool(o.get("encoded")))
        if verb == "delete":
            return self.delete(req.kind, req.name or "", req.namespace,
                               propagation_policy=o.get("propagation_policy"),
                               preconditions=o.get("preconditions"),
                               grace_period_seconds=o.get("grace_period_seconds"), caller=caller,
                               api_version=req.api_version, dry_run=bool(o.get("dry_run")))
        if verb == "delete_collection":
            return self.delete_collection(
                req.kind, req.namespace, label_selector=o.get("label_selector"),
                field_selector=o.get("field_selector"),
                propagation_policy=o.get("propagation_policy"),
                grace_period_seconds=o.get("grace_period_seconds"), caller=caller,
                api_version=req.api_version, dry_run=bool(o.get("dry_run")))
        if verb == "version":
            return self.version_info()
        if verb == "watch":
            raise MethodNotAllowed("watch is a stream: open it with open_watch")
        raise MethodNotAllowed(f'verb "{verb}" is not supported')

    async def open_watch(self, payload: ApiRequest, info: CallInfo) -> WatchStream:
        """Serve a watch stream from the network."""
        if not isinstance(payload, ApiRequest):
            raise BadRequest(f"expected an ApiRequest, got {type(payload).__name__}")
        if self.authorizer is not None:  # RBAC (emu.apiserver.rbac), when the world enforces it
            self.authorizer(payload, info)
        req = payload
        o = req.options
        field_selector = o.get("field_selector")
        if req.name:
            by_name = f"metadata.name={req.name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        return self.watch(req.kind, req.namespace, label_selector=o.get("label_selector"),
                          field_selector=field_selector,
                          resource_version=o.get("resource_version"),
                          allow_bookmarks=bool(o.get("allow_bookmarks")),
                          timeout_seconds=o.get("timeout_seconds"),
                          resource_version_match=o.get("resource_version_match"),
                          send_initial_events=o.get("send_initial_events"),
                          api_version=req.api_version)
