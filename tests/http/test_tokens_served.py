"""Tokens and certificates over HTTP with the real clients: ``kubectl create token`` (the
``serviceaccounts/token`` subresource, found through discovery), a TokenReview of it with the
``kubernetes`` client, and ``kubectl certificate approve`` (the ``approval`` subresource)."""

from __future__ import annotations

import base64
import json

import pytest
from serving import Served, require, start_serve

pytestmark = [pytest.mark.external, pytest.mark.usefixtures("kubectl_found")]


def claims(token: str) -> dict:
    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def test_kubectl_create_token_and_a_tokenreview_with_the_kubernetes_client(served: Served):
    try:
        from kubernetes import client, config
    except ImportError:
        require(False, "the kubernetes package")
        raise
    served.kubectl("create", "namespace", "tok")
    served.kubectl("create", "serviceaccount", "bot", "-n", "tok")
    token = served.kubectl("create", "token", "bot", "-n", "tok", "--duration", "20m",
                           "--audience", "vault").stdout.strip()
    got = claims(token)
    assert got["sub"] == "system:serviceaccount:tok:bot" and got["aud"] == ["vault"]
    assert got["exp"] - got["iat"] == 1200
    served.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tok"},
        "spec": {"serviceAccountName": "bot",
                 "containers": [{"name": "c", "image": "busybox"}]}}))
    pod_uid = json.loads(served.kubectl("get", "pod", "p", "-n", "tok", "-o", "json").stdout)[
        "metadata"]["uid"]
    bound = served.kubectl("create", "token", "bot", "-n", "tok", "--bound-object-kind", "Pod",
                           "--bound-object-name", "p").stdout.strip()
    assert claims(bound)["kubernetes.io"]["pod"] == {"name": "p", "uid": pod_uid}
    short = served.kubectl("create", "token", "bot", "-n", "tok", "--duration", "1m",
                           check=False)
    assert short.returncode != 0
    assert "may not specify a duration less than 10 minutes" in short.stderr
    missing = served.kubectl("create", "token", "ghost", "-n", "tok", check=False)
    assert 'serviceaccounts "ghost" not found' in missing.stderr

    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        auth = client.AuthenticationV1Api(api)
        review = auth.create_token_review(client.V1TokenReview(
            spec=client.V1TokenReviewSpec(token=token, audiences=["vault"])))
        assert review.status.authenticated is True
        assert review.status.user.username == "system:serviceaccount:tok:bot"
        assert review.status.user.groups == ["system:serviceaccounts",
                                             "system:serviceaccounts:tok",
                                             "system:authenticated"]
        assert review.status.audiences == ["vault"]
        wrong = auth.create_token_review(client.V1TokenReview(
            spec=client.V1TokenReviewSpec(token=token)))
        assert not wrong.status.authenticated
        assert "is invalid for the target audiences" in wrong.status.error
        served.kubectl("delete", "serviceaccount", "bot", "-n", "tok")
        gone = auth.create_token_review(client.V1TokenReview(
            spec=client.V1TokenReviewSpec(token=token, audiences=["vault"])))
        assert not gone.status.authenticated
        assert gone.status.error == 'serviceaccounts "bot" not found'
    finally:
        api.close()


def test_kubectl_certificate_approve(served: Served):
    csr = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
           "metadata": {"name": "alice"},
           "spec": {"request": base64.b64encode(b"-----BEGIN CERTIFICATE REQUEST-----\n"
                                                b"-----END CERTIFICATE REQUEST-----\n"
                                                ).decode(),
                    "signerName": "kubernetes.io/kube-apiserver-client",
                    "usages": ["client auth"]}}
    served.kubectl("apply", "-f", "-", stdin=json.dumps(csr))
    out = served.kubectl("certificate", "approve", "alice").stdout
    assert "certificatesigningrequest.certificates.k8s.io/alice approved" in out
    got = json.loads(served.kubectl("get", "csr", "alice", "-o", "json").stdout)
    conditions = got["status"]["conditions"]
    # (the csrsigning controller then marks this request Failed: it holds no real CSR)
    first = conditions[0]
    assert (first["type"], first["status"], first["reason"]) == (
        "Approved", "True", "KubectlApprove")
    listed = served.kubectl("get", "csr", "alice").stdout
    assert "Approved" in listed


def test_an_issued_token_is_a_kubectl_credential_under_serve_token(tmp_path):
    srv = start_serve(tmp_path, "--token", "t0ken", "--speed", "10")
    try:
        srv.kubectl("create", "serviceaccount", "bot")
        token = srv.kubectl("create", "token", "bot").stdout.strip()
        who = srv.kubectl("--token", token, "auth", "whoami", "-o", "json").stdout
        assert json.loads(who)["status"]["userInfo"]["username"] == \
            "system:serviceaccount:default:bot"
        bad = srv.kubectl("--token", token[:-4] + "AAAA", "get", "namespaces", check=False)
        assert bad.returncode != 0 and "You must be logged in to the server" in bad.stderr
    finally:
        assert srv.stop() == 0
