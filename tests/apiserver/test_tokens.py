"""Bound ServiceAccount tokens (`emu.apiserver.tokens`): TokenRequest answered with a JWT signed
by the world's key, and TokenReview judging it on the virtual clock, with kube's texts."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from emu.apiserver.errors import ApiError
from emu.apiserver.request import ApiRequest
from emu.apiserver.server import APIServer
from emu.apiserver.tokens import ISSUER, signing_key
from emu.kernel.clock import EPOCH
from emu.kernel.network import CallInfo
from emu.kernel.rng import SimRandom

Obj = dict[str, Any]


class World:
    def __init__(self, seed: int = 1) -> None:
        self.t = 0.0
        self.api = APIServer(clock=lambda: self.t, rng=SimRandom(seed))
        self.sa = self.api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "bot", "namespace": "default"}})

    def token(self, **spec: Any) -> str:
        return str(self.api.create_token("bot", "default", {"spec": spec})["status"]["token"])

    def review(self, token: str, audiences: list[str] | None = None) -> Obj:
        spec: Obj = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        return dict(self.api.review_token({"apiVersion": "authentication.k8s.io/v1",
                                           "kind": "TokenReview", "spec": spec})["status"])


@pytest.fixture
def world() -> World:
    return World()


def claims(token: str) -> Obj:
    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


def test_a_token_carries_kubes_claims_on_the_virtual_clock(world: World):
    world.t = 42.0
    out = world.api.create_token("bot", "default")
    assert out["kind"] == "TokenRequest" and out["apiVersion"] == "authentication.k8s.io/v1"
    assert out["spec"] == {"audiences": [ISSUER], "expirationSeconds": 3600}
    assert out["status"]["expirationTimestamp"] == "2026-01-01T01:00:42Z"
    got = claims(out["status"]["token"])
    now = int(EPOCH.timestamp()) + 42
    assert (got["iss"], got["sub"], got["aud"]) == (
        ISSUER, "system:serviceaccount:default:bot", [ISSUER])
    assert (got["iat"], got["nbf"], got["exp"]) == (now, now, now + 3600)
    assert got["kubernetes.io"] == {"namespace": "default", "serviceaccount": {
        "name": "bot", "uid": world.sa["metadata"]["uid"]}}
    assert got["jti"]


def test_the_signature_is_es256_by_the_worlds_key_and_the_same_seed_signs_the_same_bytes():
    a, b, other = World(7), World(7), World(8)
    token = a.token(audiences=["vault"])
    assert token == b.token(audiences=["vault"])
    assert token != other.token(audiences=["vault"])
    head, body, sig = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=="))
    key = signing_key(7)
    assert header == {"alg": "ES256", "kid": key.kid}
    public = serialization.load_pem_public_key(key.public_pem())
    assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1"
    raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    assert len(raw) == 64  # JWS: R and S, 32 bytes each
    public.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"),
                                       int.from_bytes(raw[32:], "big")),
                  f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))


def test_issuing_a_token_draws_nothing_from_the_worlds_random_stream():
    plain, issuing = World(3), World(3)
    issuing.token()
    made = [w.api.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"generateName": "c-", "namespace": "default"}})
            for w in (plain, issuing)]
    assert made[0]["metadata"]["name"] == made[1]["metadata"]["name"]
    assert made[0]["metadata"]["uid"] == made[1]["metadata"]["uid"]


def test_review_authenticates_the_serviceaccount_with_kubes_groups(world: World):
    token = world.token()
    status = world.review(token)
    assert status["authenticated"] is True
    assert status["audiences"] == [ISSUER]
    user = status["user"]
    assert user["username"] == "system:serviceaccount:default:bot"
    assert user["uid"] == world.sa["metadata"]["uid"]
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default",
                              "system:authenticated"]
    assert user["extra"] == {"authentication.kubernetes.io/credential-id": [
        f"JTI={claims(token)['jti']}"]}


def test_expiration_is_judged_on_the_virtual_clock_with_kubes_leeway(world: World):
    token = world.token(expirationSeconds=600)
    world.t = 600 + 60
    assert world.review(token)["authenticated"] is True  # within jwt.DefaultLeeway
    world.t = 600 + 61
    assert world.review(token) == {"user": {}, "error": "service account token has expired"}


def test_audiences_must_match(world: World):
    token = world.token(audiences=["vault", "nats"])
    assert world.review(token, ["nats"]) == {
        "authenticated": True, "audiences": ["nats"], "user": world.review(token, ["nats"])[
            "user"]}
    assert world.review(token) == {"user": {}, "error": (
        'token audiences ["vault" "nats"] is invalid for the target audiences '
        f'["{ISSUER}"]')}


def test_a_forged_or_foreign_token_does_not_authenticate(world: World):
    token = world.token()
    head, _body, sig = token.split(".")
    forged_claims = {**claims(token), "sub": "system:serviceaccount:kube-system:admin"}
    forged_body = base64.urlsafe_b64encode(json.dumps(forged_claims).encode()).rstrip(b"=")
    forged = f"{head}.{forged_body.decode()}.{sig}"
    assert world.review(forged) == {"user": {}, "error": (
        "go-jose/go-jose: error in cryptographic primitive")}
    # another world's key: another kid
    assert world.review(World(99).token()) == {"user": {}, "error":
                                               "invalid signature, no keys found"}
    assert world.review("not-a-jwt") == {"user": {}}


def test_a_deleted_or_recreated_serviceaccount_invalidates_its_tokens(world: World):
    token = world.token()
    world.api.delete("ServiceAccount", "bot", "default")
    assert world.review(token) == {"user": {}, "error": 'serviceaccounts "bot" not found'}
    again = world.api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                              "metadata": {"name": "bot", "namespace": "default"}})
    assert world.review(token) == {"user": {}, "error": (
        f"service account UID ({again['metadata']['uid']}) does not match claim "
        f"({world.sa['metadata']['uid']})")}


def pod(world: World, name: str, sa: str = "bot") -> Obj:
    return world.api.create({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": name, "namespace": "default"},
                             "spec": {"serviceAccountName": sa, "nodeName": "",
                                      "containers": [{"name": "c", "image": "busybox"}]}})


def test_a_token_bound_to_a_pod_dies_with_the_pod(world: World):
    p = pod(world, "p")
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": p["metadata"]["uid"]}
    token = world.token(boundObjectRef=ref)
    assert claims(token)["kubernetes.io"]["pod"] == {"name": "p", "uid": p["metadata"]["uid"]}
    status = world.review(token)
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["p"]
    world.api.delete("Pod", "p", "default", grace_period_seconds=0)
    assert world.api.list("Pod", "default")["items"] == []
    assert world.review(token) == {"user": {},
                                   "error": "service account token has been invalidated"}


def test_binding_refusals_are_kubes(world: World):
    pod(world, "other", sa="default")
    cases: list[tuple[Obj, int, str]] = [
        ({"kind": "Pod", "apiVersion": "v1", "name": "other"}, 400,
         'cannot bind token for serviceaccount "bot" to pod running with different '
         "serviceaccount name."),
        ({"kind": "Pod", "apiVersion": "v1", "name": "missing"}, 404, 'pods "missing" not found'),
        ({"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}, 400,
         "cannot bind token to object of type /v1, Kind=ConfigMap"),
    ]
    p = pod(world, "mine")
    cases.append(({"kind": "Pod", "apiVersion": "v1", "name": "mine", "uid": "nope"}, 409,
                  'Operation cannot be fulfilled on Pod "mine": the UID in the bound object '
                  "reference (nope) does not match the UID in record. The object might have "
                  "been deleted and then recreated"))
    assert p["metadata"]["uid"] != "nope"
    for ref, code, message in cases:
        with pytest.raises(ApiError) as err:
            world.token(boundObjectRef=ref)
        assert (err.value.code, err.value.message) == (code, message)


@pytest.mark.parametrize(("seconds", "detail"), [
    (599, "may not specify a duration less than 10 minutes"),
    ((1 << 32) + 1, "may not specify a duration larger than 2^32 seconds")])
def test_a_bad_expiration_is_422_before_the_serviceaccount_is_looked_up(world: World,
                                                                        seconds: int,
                                                                        detail: str):
    with pytest.raises(ApiError) as err:
        world.api.create_token("missing", "default", {"spec": {"expirationSeconds": seconds}})
    assert err.value.code == 422
    assert err.value.message == (f'TokenRequest.authentication.k8s.io "" is invalid: '
                                 f"spec.expirationSeconds: Invalid value: {seconds}: {detail}")


def test_a_missing_serviceaccount_is_kubes_404(world: World):
    with pytest.raises(ApiError) as err:
        world.api.create_token("ghost", "default")
    assert (err.value.code, err.value.message) == (404, 'serviceaccounts "ghost" not found')


def test_an_empty_review_is_refused(world: World):
    with pytest.raises(ApiError) as err:
        world.api.review_token({"spec": {}})
    assert (err.value.code, err.value.message) == (
        400, "token is required for TokenReview in authentication")


def test_over_the_network_token_creation_is_rbac_checked_as_create_serviceaccounts_token(
        world: World):
    from emu.apiserver.rbac import RBAC, UserInfo

    rbac = RBAC(world.api)
    rbac.enable()
    rbac.assign("alice", UserInfo("alice", ("system:authenticated",)))
    req = ApiRequest("create", "ServiceAccount", "v1", "default", "bot", {},
                     {"subresource": "token"})
    info = CallInfo("alice", "", "apiserver")
    with pytest.raises(ApiError) as err:
        world.api.answer(req, info)
    assert err.value.code == 403
    assert 'cannot create resource "serviceaccounts/token" in API group "" in the ' \
           'namespace "default"' in err.value.message
    world.api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                      "metadata": {"name": "tok", "namespace": "default"},
                      "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                                 "verbs": ["create"], "resourceNames": ["bot"]}]})
    world.api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "tok", "namespace": "default"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "tok"},
                      "subjects": [{"kind": "User", "name": "alice"}]})
    assert world.api.answer(req, info)["status"]["token"]


def test_a_token_bound_to_a_node_or_secret_follows_that_object(world: World):
    node = world.api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    token = world.token(boundObjectRef={"kind": "Node", "apiVersion": "v1", "name": "n1"})
    assert claims(token)["kubernetes.io"]["node"] == {"name": "n1",
                                                      "uid": node["metadata"]["uid"]}
    extra = world.review(token)["user"]["extra"]
    assert extra["authentication.kubernetes.io/node-name"] == ["n1"]
    world.api.delete("Node", "n1")
    again = world.api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert world.review(token) == {"user": {}, "error": (
        f"node UID ({again['metadata']['uid']}) does not match service account node ref claim "
        f"({node['metadata']['uid']})")}
    world.api.create({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "s", "namespace": "default"}})
    bound = world.token(boundObjectRef={"kind": "Secret", "apiVersion": "v1", "name": "s"})
    assert world.review(bound)["authenticated"] is True
    world.api.delete("Secret", "s", "default")
    assert world.review(bound) == {"user": {},
                                   "error": "service account token has been invalidated"}


def test_a_pod_bound_token_carries_the_pods_node_and_is_refused_for_a_recreated_pod(
        world: World):
    node = world.api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
    first = world.api.create({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": "q", "namespace": "default"},
                              "spec": {"serviceAccountName": "bot", "nodeName": "n2",
                                       "containers": [{"name": "c", "image": "busybox"}]}})
    token = world.token(boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "q"})
    assert claims(token)["kubernetes.io"]["node"] == {"name": "n2",
                                                      "uid": node["metadata"]["uid"]}
    world.api.delete("Pod", "q", "default", grace_period_seconds=0)
    second = pod(world, "q")
    assert world.review(token) == {"user": {}, "error": (
        f"pod UID ({second['metadata']['uid']}) does not match service account pod ref claim "
        f"({first['metadata']['uid']})")}
