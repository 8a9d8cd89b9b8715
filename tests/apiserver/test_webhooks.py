"""Admission webhooks (`emu.apiserver.webhooks`): matching, AdmissionReview in and out, JSONPatch,
kube's denial and failure texts, failurePolicy, a real HTTP webhook, and `WebhookDown`."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

import emu
from emu.apiserver.errors import ApiError
from emu.apiserver.request import ApiRequest
from emu.apiserver.server import APIServer
from emu.faults import UnperformedFaults, WebhookDown, WebhookUp
from emu.kernel.rng import SimRandom

Obj = dict[str, Any]


@pytest.fixture
def api() -> APIServer:
    return APIServer(clock=lambda: 0.0, rng=SimRandom(1))


def config(kind: str, cfg_name: str = "hooks", **hook: Any) -> Obj:
    base: Obj = {"name": "check.example.com", "sideEffects": "None",
                 "admissionReviewVersions": ["v1"],
                 "clientConfig": {"service": {"namespace": "hooks", "name": "svc",
                                              "path": "/check"}},
                 "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                            "apiVersions": ["v1"], "resources": ["configmaps"]}]}
    base.update(hook)
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": cfg_name}, "webhooks": [base]}


def cm(name: str, ns: str = "default", **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": "v"}}


def refused(api: APIServer, body: Obj) -> ApiError:
    with pytest.raises(ApiError) as err:
        api.create(body)
    return err.value


def test_a_validating_webhook_allows_and_denies_with_kubes_text(api: APIServer) -> None:
    seen: list[Obj] = []

    def check(review: Obj) -> Obj:
        seen.append(review)
        req = review["request"]
        allowed = req["object"]["data"].get("k") != "bad"
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": req["uid"], "allowed": allowed,
                             "status": {"message": "k must not be bad", "code": 403}}}

    api.webhooks.register("hooks", "svc", check, "/check")
    api.create(config("ValidatingWebhookConfiguration"))
    api.create(cm("fine"))
    req = seen[0]["request"]
    assert (seen[0]["apiVersion"], seen[0]["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert (req["operation"], req["name"], req["namespace"], req["kind"], req["resource"]) == (
        "CREATE", "fine", "default", {"group": "", "version": "v1", "kind": "ConfigMap"},
        {"group": "", "version": "v1", "resource": "configmaps"})
    assert req["object"]["data"] == {"k": "v"} and req["oldObject"] is None
    bad = cm("bad")
    bad["data"] = {"k": "bad"}
    err = refused(api, bad)
    assert (err.code, err.message) == (
        403, 'admission webhook "check.example.com" denied the request: k must not be bad')
    assert api.list("ConfigMap", "default")["items"][0]["metadata"]["name"] == "fine"
    # an update is reviewed with the old object
    fine = api.get("ConfigMap", "fine", "default")
    fine["data"] = {"k": "bad"}
    with pytest.raises(ApiError, match="denied the request"):
        api.update(fine)
    assert seen[-1]["request"]["operation"] == "UPDATE"
    assert seen[-1]["request"]["oldObject"]["data"] == {"k": "v"}
    # other kinds are not reviewed
    n = len(seen)
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
                                                                  "namespace": "default"}})
    assert len(seen) == n


def test_a_denial_without_a_message_or_a_low_code(api: APIServer) -> None:
    api.webhooks.register("hooks", "svc", lambda review: {"allowed": False})
    api.create(config("ValidatingWebhookConfiguration"))
    err = refused(api, cm("a"))
    assert (err.code, err.message) == (
        400, 'admission webhook "check.example.com" denied the request without explanation')
    assert "reason" not in err.status


def test_a_mutating_webhook_patches_with_json_patch(api: APIServer) -> None:
    def mutate(review: Obj) -> Obj:
        ops = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"},
               {"op": "replace", "path": "/data/k", "value": "patched"}]
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": True,
                             "patchType": "JSONPatch",
                             "patch": base64.b64encode(json.dumps(ops).encode()).decode()}}

    api.webhooks.register("hooks", "svc", mutate)
    api.create(config("MutatingWebhookConfiguration"))
    body = cm("a", app="x")
    out = api.create(body)
    assert out["metadata"]["labels"] == {"app": "x", "mutated": "yes"}
    assert out["data"] == {"k": "patched"}
    assert body["data"] == {"k": "v"}  # the caller's object is left alone


def test_a_webhooks_warnings_reach_a_request_that_collects_them(api: APIServer) -> None:
    api.webhooks.register("hooks", "svc", lambda review: {
        "allowed": True, "warnings": ["k is deprecated", "use data.key"]})
    api.create(config("ValidatingWebhookConfiguration"))
    sink: list[str] = []
    api.serve(ApiRequest("create", "ConfigMap", "v1", "default", None, cm("w"),
                         {"warnings": sink}))
    assert sink == ["k is deprecated", "use data.key"]
    api.create(cm("quiet"))  # an in-process write collects none, and fails on none


def test_selectors_choose_what_is_reviewed(api: APIServer) -> None:
    calls: list[str] = []

    def check(review: Obj) -> Obj:
        calls.append(review["request"]["name"])
        return {"allowed": True}

    api.webhooks.register("hooks", "svc", check)
    api.create({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "watched", "labels": {"team": "a"}}})
    api.create(config("ValidatingWebhookConfiguration",
                      namespaceSelector={"matchLabels": {"team": "a"}},
                      objectSelector={"matchExpressions": [
                          {"key": "skip", "operator": "DoesNotExist"}]}))
    api.create(cm("in-default"))
    api.create(cm("watched", "watched"))
    api.create(cm("skipped", "watched", skip="1"))
    assert calls == ["watched"]


def test_failure_policy_when_the_webhook_cannot_be_reached(api: APIServer) -> None:
    api.create(config("ValidatingWebhookConfiguration"))  # nothing serves hooks/svc
    err = refused(api, cm("a"))
    why = ('failed calling webhook "check.example.com": failed to call webhook: Post '
           '"https://svc.hooks.svc:443/check?timeout=10s": service "svc" not found')
    assert (err.code, err.reason, err.message) == (500, "InternalError",
                                                   f"Internal error occurred: {why}")
    assert err.status["details"] == {"causes": [{"message": why}]}
    ignore = config("ValidatingWebhookConfiguration", "hooks2", name="lenient.example.com",
                    failurePolicy="Ignore")
    api.delete("ValidatingWebhookConfiguration", "hooks")
    api.create(ignore)
    api.create(cm("a"))
    assert api.webhooks.calls[-1][-1].startswith("ignored: Post")


def test_a_wrong_uid_or_a_crashing_handler_is_a_failed_call(api: APIServer) -> None:
    answers: list[Any] = [
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
         "response": {"uid": "nope", "allowed": True}}]

    def hook(review: Obj) -> Obj:
        if answers:
            return answers.pop()  # type: ignore[no-any-return]
        raise RuntimeError("boom")

    api.webhooks.register("hooks", "svc", hook)
    api.create(config("ValidatingWebhookConfiguration"))
    assert "expected response.uid=" in refused(api, cm("a")).message
    assert "the webhook handler raised RuntimeError: boom" in refused(api, cm("a")).message
    with pytest.raises(TypeError, match="a webhook handler is a function"):
        api.webhooks.register("hooks", "svc", "not callable")  # type: ignore[arg-type]


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        allowed = review["request"]["name"] != "nope"
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": allowed,
                                        "status": {"message": "over HTTP"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_url_webhook_is_called_over_http(api: APIServer) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/validate"
        api.create(config("ValidatingWebhookConfiguration", clientConfig={"url": url}))
        api.create(cm("yes"))
        err = refused(api, cm("nope"))
        assert err.message == ('admission webhook "check.example.com" denied the request: '
                               'over HTTP')
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    err = refused(api, cm("later"))  # the server is gone
    assert err.code == 500
    assert err.message.startswith(
        'Internal error occurred: failed calling webhook "check.example.com": failed to call '
        f'webhook: Post "{url}?timeout=10s": ')


def test_webhook_down_and_up() -> None:
    outcomes: list[str] = []

    async def main(sim: emu.Simulation) -> None:
        sim.api.webhooks.register("hooks", "svc", lambda review: {"allowed": True})
        sim.api.create(config("ValidatingWebhookConfiguration"))
        await sim.sleep(10)
        with pytest.raises(ApiError) as err:
            sim.api.create(cm("a"))
        outcomes.append(err.value.message)
        await sim.sleep(10)
        sim.api.create(cm("a"))
        sim.faults.webhook_down("check.example.com", mode="timeout", duration=5)
        with pytest.raises(ApiError) as err:
            sim.api.create(cm("b"))
        outcomes.append(err.value.message)
        await sim.sleep(6)
        sim.api.create(cm("b"))

    emu.run(main, faults=[WebhookDown(at=5.0, webhook="check.example.com"),
                          WebhookUp(at=15.0, webhook="check.example.com")])
    target = 'Post "https://svc.hooks.svc:443/check?timeout=10s"'
    assert outcomes == [
        'Internal error occurred: failed calling webhook "check.example.com": failed to call '
        f'webhook: {target}: dial tcp: connect: connection refused',
        'Internal error occurred: failed calling webhook "check.example.com": failed to call '
        f'webhook: {target}: context deadline exceeded']


def test_webhook_down_names_a_known_webhook() -> None:
    async def main(sim: emu.Simulation) -> None:
        await sim.sleep(10)

    with pytest.raises(UnperformedFaults, match="no webhook named 'x.example.com'"):
        emu.run(main, faults=[WebhookDown(at=1.0, webhook="x.example.com")])
    with pytest.raises(ValueError, match="mode is one of refuse, timeout"):
        WebhookDown(webhook="x.example.com", mode="slow")


def test_a_delete_is_reviewed_with_the_old_object(api: APIServer) -> None:
    seen: list[Obj] = []

    def protect(review: Obj) -> Obj:
        seen.append(review["request"])
        old = review["request"]["oldObject"]
        keep = (old["metadata"].get("labels") or {}).get("protected") == "yes"
        return {"allowed": not keep, "status": {"message": "protected", "code": 403}}

    api.webhooks.register("hooks", "svc", protect)
    api.create(config("ValidatingWebhookConfiguration",
                      rules=[{"operations": ["DELETE"], "apiGroups": [""],
                              "apiVersions": ["v1"], "resources": ["configmaps"]}]))
    api.create(cm("keep", protected="yes"))
    api.create(cm("drop"))
    assert seen == []  # creates are not in the rule
    with pytest.raises(ApiError) as err:
        api.delete("ConfigMap", "keep", "default")
    assert (err.value.code, err.value.message) == (
        403, 'admission webhook "check.example.com" denied the request: protected')
    api.delete("ConfigMap", "drop", "default")
    assert [(r["operation"], r["name"], r["object"], r["options"]["kind"]) for r in seen] == [
        ("DELETE", "keep", None, "DeleteOptions"), ("DELETE", "drop", None, "DeleteOptions")]
    assert api.get("ConfigMap", "keep", "default")["metadata"]["name"] == "keep"
