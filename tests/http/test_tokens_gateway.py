"""Tokens over the HTTP gateway in-process: discovery lists ``serviceaccounts/token`` and
``tokenreviews``; ``emu serve --token``'s token reviews as kind's admin user; and a token the
world issued is a credential of its own, acting as its ServiceAccount under RBAC."""

from __future__ import annotations

import httpx

from emu.http.discovery import AGGREGATED
from emu.http.transport import BASE_URL, httpx_transport

SA = "/api/v1/namespaces/default/serviceaccounts"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def client(sim, token: str | None = None, bearer: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    return httpx.AsyncClient(base_url=BASE_URL, transport=httpx_transport(sim, token=token),
                             headers=headers)


async def test_discovery_lists_the_token_subresource_and_tokenreviews(sim):
    async with client(sim) as c:
        core = {r["name"]: r for r in (await c.get("/api/v1")).json()["resources"]}
        assert core["serviceaccounts/token"] == {
            "name": "serviceaccounts/token", "singularName": "", "namespaced": True,
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
            "verbs": ["create"]}
        authn = {r["name"] for r in (await c.get("/apis/authentication.k8s.io/v1")).json()[
            "resources"]}
        assert "tokenreviews" in authn
        agg = (await c.get("/api", headers={"Accept": AGGREGATED})).json()
        sa = next(r for g in agg["items"] for v in g["versions"] for r in v["resources"]
                  if r["resource"] == "serviceaccounts")
        assert {"subresource": "token", "responseKind": {
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
            "verbs": ["create"]} in sa["subresources"]


async def test_a_token_request_and_review_over_json(sim):
    async with client(sim) as c:
        await c.post(SA, json={"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "bot"}})
        r = await c.post(f"{SA}/bot/token", json={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": ["a"]}})
        assert r.status_code == 201, r.text
        token = r.json()["status"]["token"]
        assert (await c.get(f"{SA}/bot/token")).status_code == 405
        review = await c.post(REVIEWS, json={"apiVersion": "authentication.k8s.io/v1",
                                             "kind": "TokenReview",
                                             "spec": {"token": token, "audiences": ["a"]}})
        assert review.status_code == 201
        assert review.json()["status"]["user"]["username"] == "system:serviceaccount:default:bot"
        missing = await c.post("/api/v1/namespaces/default/serviceaccounts/nope/token", json={})
        assert missing.status_code == 404
        assert missing.json()["message"] == 'serviceaccounts "nope" not found'


async def test_the_serve_token_reviews_as_the_admin_user(sim):
    async with client(sim, token="s3cret", bearer="s3cret") as c:
        review = await c.post(REVIEWS, json={"spec": {"token": "s3cret"}})
        assert review.json()["status"] == {
            "authenticated": True, "audiences": ["https://kubernetes.default.svc.cluster.local"],
            "user": {"username": "kubernetes-admin",
                     "groups": ["system:masters", "system:authenticated"]}}


async def test_an_issued_token_is_a_credential_acting_as_its_serviceaccount(sim):
    sim.rbac.enable()
    async with client(sim, token="s3cret", bearer="s3cret") as admin:
        await admin.post(SA, json={"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "bot"}})
        token = (await admin.post(f"{SA}/bot/token", json={
            "spec": {"expirationSeconds": 600}})).json()["status"]["token"]
        async with client(sim, token="s3cret", bearer=token) as bot:
            denied = await bot.get("/api/v1/namespaces/default/pods")
            assert denied.status_code == 403
            assert denied.json()["message"] == (
                'pods is forbidden: User "system:serviceaccount:default:bot" cannot list '
                'resource "pods" in API group "" in the namespace "default"')
            await admin.post("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                             json={"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                   "metadata": {"name": "read"},
                                   "rules": [{"apiGroups": [""], "resources": ["pods"],
                                              "verbs": ["list"]}]})
            await admin.post(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                json={"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "read"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "read"},
                      "subjects": [{"kind": "ServiceAccount", "name": "bot"}]})
            assert (await bot.get("/api/v1/namespaces/default/pods")).status_code == 200
            await sim.sleep(661)  # expired (600 s and kube's minute of leeway)
            assert (await bot.get("/api/v1/namespaces/default/pods")).status_code == 401
        async with client(sim, token="s3cret", bearer="forged.token.here") as forged:
            assert (await forged.get("/api/v1/namespaces/default/pods")).status_code == 401


async def test_issuer_discovery_serves_the_keys_that_verify_the_worlds_tokens(sim):
    import base64

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    def raw(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    async with client(sim) as c:
        config = (await c.get("/.well-known/openid-configuration")).json()
        assert config["issuer"] == "https://kubernetes.default.svc.cluster.local"
        assert config["jwks_uri"] == f"{BASE_URL}/openid/v1/jwks"
        assert config["id_token_signing_alg_values_supported"] == ["ES256"]
        r = await c.get("/openid/v1/jwks")
        assert r.headers["content-type"] == "application/jwk-set+json"
        [jwk] = r.json()["keys"]
        await c.post(SA, json={"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "bot"}})
        token = (await c.post(f"{SA}/bot/token", json={})).json()["status"]["token"]
    head, body, sig = token.split(".")
    assert raw(head) == b'{"alg":"ES256","kid":"' + jwk["kid"].encode() + b'"}'
    assert (jwk["kty"], jwk["crv"]) == ("EC", "P-256")
    key = ec.EllipticCurvePublicNumbers(int.from_bytes(raw(jwk["x"]), "big"),
                                        int.from_bytes(raw(jwk["y"]), "big"),
                                        ec.SECP256R1()).public_key()
    rs = raw(sig)
    key.verify(encode_dss_signature(int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big")),
               f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
