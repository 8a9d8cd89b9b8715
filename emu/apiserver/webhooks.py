"""Admission webhooks: Validating/MutatingWebhookConfigurations called on the write path.

Ports staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook: which webhooks a request
matches (``rules`` with operations, groups, versions, resources and scope; ``namespaceSelector``
on the Namespace's labels; ``objectSelector`` on the object's or the old object's labels), the
``admission.k8s.io/v1`` AdmissionReview sent and read back (``response.uid`` must be the
request's, ``allowed``, ``status``, a ``JSONPatch`` applied with the ``jsonpatch`` library),
``failurePolicy`` when a call fails (``Fail``: kube's ``Internal error occurred: failed calling
webhook …``; ``Ignore``: the request goes on) and kube's denial text (``ToStatusErr``:
``admission webhook "NAME" denied the request: …``, a code under 400 sent as 400).

A webhook is reached through its ``clientConfig``:

- ``url``: POSTed to over HTTP(S) from this process (blocking for at most ``timeoutSeconds``;
  virtual time does not move meanwhile), as kube-apiserver would;
- ``service``: a Python function registered with `Webhooks.register` under the Service's
  namespace, name and path, called in place with the AdmissionReview (a dict) and answering an
  AdmissionReview or just its ``response``. There is no Service routing: an unregistered
  Service fails as an unreachable one does, with kube's text.

The `emu.faults.WebhookDown` fault takes a webhook (by its name in the configuration) down:
calls to it are refused, or time out, until `emu.faults.WebhookUp`.

Webhooks are called on CREATE, UPDATE and DELETE of a resource (not on subresources or
CONNECT), never for the webhook configurations themselves, and only when a configuration
exists: the write path asks one dictionary for that (docs/deviations.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jsonpatch
import orjson

from .errors import ApiError, InternalError
from .selectors import selector_from_dict

if TYPE_CHECKING:
    from .kinds import KindInfo
    from .server import APIServer

Obj = dict[str, Any]
#: An in-process webhook: the AdmissionReview in, an AdmissionReview (or its response) out.
Handler = Callable[[Obj], Obj]
_CONFIG_KINDS = frozenset(("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"))
DOWN_MODES = ("refuse", "timeout")


class WebhookCallError(Exception):
    """A webhook could not be called or answered nonsense (what ``failurePolicy`` is about)."""


def _rule_matches(rule: Obj, op: str, info: KindInfo, subresource: str, match_version: bool
                  ) -> bool:
    """``RuleMatcher.Matches``: operation, group, version, resource (``*``, ``*/*``,
    ``pods/*``, ``*/status``) and scope."""
    ops = rule.get("operations") or ()
    if "*" not in ops and op not in ops:
        return False
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and info.group not in groups:
        return False
    versions = rule.get("apiVersions") or ()
    if match_version and "*" not in versions and info.version not in versions:
        return False
    want = f"{info.plural}/{subresource}" if subresource else info.plural
    ok = False
    for res in rule.get("resources") or ():
        main, _, sub = res.partition("/")
        if res in (want, "*/*"):
            ok = True
        elif not sub:
            ok = main == "*" and not subresource
        else:
            ok = bool(subresource) and main in ("*", info.plural) and sub in ("*", subresource)
        if ok:
            break
    if not ok:
        return False
    scope = rule.get("scope", "*")
    if scope == "Cluster":
        return not info.namespaced
    if scope == "Namespaced":
        return info.namespaced
    return True


class Webhooks:
    """The webhook admission plugins of one `APIServer` (`active` when a configuration
    exists)."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.validating = api.store.table(api.kinds.resolve("ValidatingWebhookConfiguration"))
        self.mutating = api.store.table(api.kinds.resolve("MutatingWebhookConfiguration"))
        self.handlers: dict[tuple[str, str, str], Handler] = {}
        #: webhook name -> how it is down (`DOWN_MODES`), set by `emu.faults.WebhookDown`
        self.down: dict[str, str] = {}
        #: every call made, in order: (webhook name, operation, kind, namespace, name, outcome)
        self.calls: list[tuple[str, str, str, str, str, str]] = []

    def register(self, namespace: str, service: str, handler: Handler, path: str = "") -> None:
        """Serve the webhooks whose ``clientConfig.service`` is ``namespace``/``service`` (and
        ``path``, when they give one) with ``handler``."""
        if not callable(handler):
            raise TypeError(f"a webhook handler is a function of the AdmissionReview, not "
                            f"{handler!r}")
        if not namespace or not service:
            raise ValueError(f"a webhook Service is a namespace and a name, not "
                             f"{namespace!r}/{service!r}")
        self.handlers[(namespace, service, path)] = handler

    def unregister(self, namespace: str, service: str, path: str = "") -> None:
        if self.handlers.pop((namespace, service, path), None) is None:
            raise KeyError(f"no webhook handler registered for {namespace}/{service}{path}")

    def names(self) -> list[str]:
        """Every webhook name of the stored configurations."""
        out: list[str] = []
        for table in (self.mutating, self.validating):
            for key in sorted(table.objs):
                cfg = orjson.loads(table.objs[key].data)
                out += [h.get("name", "") for h in cfg.get("webhooks") or ()]
        return out

    @property
    def active(self) -> bool:
        return bool(self.validating.objs or self.mutating.objs)

    # -- matching --------------------------------------------------------------------------------

    def _hooks(self, mutating: bool, op: str, info: KindInfo, obj: Obj | None, old: Obj | None,
               ns: str) -> list[Obj]:
        if info.kind in _CONFIG_KINDS and info.group == "admissionregistration.k8s.io":
            return []
        table = self.mutating if mutating else self.validating
        out = []
        for key in sorted(table.objs):  # configurations in name order, as kube sorts them
            cfg = orjson.loads(table.objs[key].data)
            for hook in cfg.get("webhooks") or ():
                if self._matches(hook, op, info, obj, old, ns):
                    out.append(hook)
        return out

    def _matches(self, hook: Obj, op: str, info: KindInfo, obj: Obj | None, old: Obj | None,
                 ns: str) -> bool:
        exact = hook.get("matchPolicy") == "Exact"
        if not any(_rule_matches(r, op, info, "", exact) for r in hook.get("rules") or ()):
            return False
        ns_sel = hook.get("namespaceSelector")
        if ns_sel:
            if info.kind == "Namespace" and info.group == "":
                labels = ((obj or old or {}).get("metadata") or {}).get("labels") or {}
            elif not info.namespaced:
                labels = None  # cluster-scoped objects are not selected by namespace
            else:
                entry = self.api._ns_table.objs.get(("", ns))
                labels = dict(entry.labels) if entry is not None else {}
            if labels is not None and not selector_from_dict(ns_sel).matches(labels):
                return False
        obj_sel = hook.get("objectSelector")
        if obj_sel:
            sel = selector_from_dict(obj_sel)
            if not any(sel.matches((o.get("metadata") or {}).get("labels") or {})
                       for o in (obj, old) if o is not None):
                return False
        return True

    # -- calling ---------------------------------------------------------------------------------

    def admit(self, mutating: bool, op: str, info: KindInfo, obj: Any, old: Obj | None, ns: str,
              name: str, dry_run: bool, caller: str) -> Any:
        """Call the matching webhooks in order; returns the object as the mutating ones left
        it (``obj`` itself when none patched it; None for a DELETE, which has no object).
        Raises the denial or the failure."""
        for hook in self._hooks(mutating, op, info, obj, old, ns):
            obj = self._call(hook, mutating, op, info, obj, old, ns, name, dry_run, caller)
        return obj

    def _review(self, op: str, info: KindInfo, obj: Obj | None, old: Obj | None, ns: str,
                name: str, dry_run: bool, caller: str) -> Obj:
        gvk = {"group": info.group, "version": info.version, "kind": info.kind}
        gvr = {"group": info.group, "version": info.version, "resource": info.plural}
        options = {"apiVersion": "meta.k8s.io/v1",
                   "kind": {"CREATE": "CreateOptions", "DELETE": "DeleteOptions"}.get(
                       op, "UpdateOptions")}
        request: Obj = {"uid": self.api._rng.uid(), "kind": gvk, "resource": gvr,
                        "requestKind": gvk, "requestResource": gvr, "name": name,
                        "operation": op, "userInfo": {"username": caller or "system:admin"},
                        "object": obj, "oldObject": old, "dryRun": dry_run, "options": options}
        if info.namespaced:
            request["namespace"] = ns
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": request}

    def _target(self, hook: Obj) -> str:
        """The URL kube-apiserver would POST to (what its error messages show)."""
        client = hook.get("clientConfig") or {}
        timeout = f"?timeout={hook.get('timeoutSeconds', 10)}s"
        if client.get("url"):
            return str(client["url"]) + timeout
        svc = client.get("service") or {}
        return (f"https://{svc.get('name')}.{svc.get('namespace')}.svc:{svc.get('port', 443)}"
                f"{svc.get('path') or ''}{timeout}")

    def _send(self, hook: Obj, review: Obj) -> Any:
        hname = hook.get("name", "")
        target = self._target(hook)
        down = self.down.get(hname)
        if down == "timeout":
            raise WebhookCallError(f'Post "{target}": context deadline exceeded')
        if down is not None:
            raise WebhookCallError(f'Post "{target}": dial tcp: connect: connection refused')
        client = hook.get("clientConfig") or {}
        if client.get("url"):
            # Imported here, not at the top: urllib.request pulls in http.client, and a script run
            # from a folder with its own http.py (benchmarks/) would shadow it while emu imports.
            import urllib.error
            import urllib.request

            data = json.dumps(review).encode()
            req = urllib.request.Request(str(client["url"]), data=data, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Accept": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=hook.get("timeoutSeconds", 10)) as r:
                    return json.loads(r.read() or b"null")
            except TimeoutError:
                raise WebhookCallError(f'Post "{target}": context deadline exceeded') from None
            except urllib.error.HTTPError as err:
                raise WebhookCallError(f"an error on the server ({err.code}) has prevented "
                                       f"the request from succeeding") from None
            except (urllib.error.URLError, OSError, ValueError) as err:
                why = getattr(err, "reason", err)
                raise WebhookCallError(f'Post "{target}": {why}') from None
        svc = client.get("service") or {}
        ns, sname, path = svc.get("namespace", ""), svc.get("name", ""), svc.get("path") or ""
        handler = self.handlers.get((ns, sname, path)) or self.handlers.get((ns, sname, ""))
        if handler is None:
            raise WebhookCallError(f'Post "{target}": service "{sname}" not found')
        try:
            return handler(json.loads(json.dumps(review)))  # the handler gets its own copy
        except ApiError:
            raise
        except Exception as err:  # a crashing handler is a failed call, as a 500 would be
            raise WebhookCallError(f'Post "{target}": the webhook handler raised '
                                   f"{type(err).__name__}: {err}") from None

    def _call(self, hook: Obj, mutating: bool, op: str, info: KindInfo, obj: Any,
              old: Obj | None, ns: str, name: str, dry_run: bool, caller: str) -> Any:
        hname = str(hook.get("name", ""))
        review = self._review(op, info, obj, old, ns, name, dry_run, caller)
        try:
            answer = self._send(hook, review)
            response = self._response(answer, review["request"]["uid"])
        except WebhookCallError as err:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                self.calls.append((hname, op, info.kind, ns, name, f"ignored: {err}"))
                return obj
            self.calls.append((hname, op, info.kind, ns, name, f"failed: {err}"))
            why = f'failed calling webhook "{hname}": failed to call webhook: {err}'
            failure = InternalError(f"Internal error occurred: {why}")
            failure.details = {"causes": [{"message": why}]}
            raise failure from None
        for warning in response.get("warnings") or ():
            self.api.warn(str(warning))  # sent on as Warning headers (kube's dispatchers)
        if not response.get("allowed"):
            self.calls.append((hname, op, info.kind, ns, name, "denied"))
            raise to_status_err(hname, response.get("status"))
        self.calls.append((hname, op, info.kind, ns, name, "allowed"))
        patch = response.get("patch")
        if not mutating or not patch or obj is None:
            return obj
        if response.get("patchType") != "JSONPatch":
            raise InternalError(f'Internal error occurred: admission webhook "{hname}" '
                                f'returned a patch of type {response.get("patchType")!r}, '
                                f"only JSONPatch is supported")
        try:
            ops = json.loads(_b64decode(patch))
            patched: Obj = jsonpatch.apply_patch(obj, ops)
        except (ValueError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            raise InternalError(f"Internal error occurred: JSON Patch: {e}") from None
        return patched

    @staticmethod
    def _response(answer: Any, uid: str) -> Obj:
        """``VerifyAdmissionResponse`` (v1): an AdmissionReview whose response has the
        request's uid. An in-process handler may answer the bare response, uid left out."""
        if isinstance(answer, dict) and "allowed" in answer and "response" not in answer:
            return {"uid": uid, **answer}
        if not isinstance(answer, dict) or not isinstance(answer.get("response"), dict):
            raise WebhookCallError("received invalid webhook response: expected an "
                                   "AdmissionReview with a response")
        if answer.get("apiVersion") != "admission.k8s.io/v1" or \
                answer.get("kind") != "AdmissionReview":
            raise WebhookCallError(
                f'expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got '
                f'{answer.get("apiVersion")}, Kind={answer.get("kind")}')
        response: Obj = answer["response"]
        if response.get("uid") != uid:
            raise WebhookCallError(f"expected response.uid={uid!r}, got "
                                   f"{response.get('uid', '')!r}")
        return response


def _b64decode(text: Any) -> bytes:
    import base64

    return base64.b64decode(text)


def to_status_err(webhook: str, status: Any) -> ApiError:
    """``webhookerrors.ToStatusErr``: a denial as the client sees it."""
    status = status if isinstance(status, dict) else {}
    denied = f'admission webhook "{webhook}" denied the request'
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    if code < 400:
        code = 400
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    err = ApiError(message, details=status.get("details") or None)
    err.code = code
    err.reason = str(status.get("reason") or "")
    return err
