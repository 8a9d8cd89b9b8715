"""Bound ServiceAccount tokens: the TokenRequest subresource and TokenReview.

Ports what kube-apiserver does with its ServiceAccount signing key:
- ``TokenREST.Create`` (pkg/registry/core/serviceaccount/storage/token.go) with
  ``ValidateTokenRequest`` and ``SetDefaults_TokenRequestSpec``: ``POST
  serviceaccounts/NAME/token`` answers a TokenRequest whose ``status.token`` is a JWT
  (``kubectl create token``);
- ``Claims`` (pkg/serviceaccount/claims.go): ``iss``, ``sub``
  ``system:serviceaccount:NS:NAME``, ``aud``, ``iat``/``nbf``/``exp`` on the virtual clock,
  ``jti``, and the ``kubernetes.io`` claim (namespace, the ServiceAccount's name and uid, the
  bound Pod or Secret);
- ``jwtTokenAuthenticator.AuthenticateToken`` (pkg/serviceaccount/jwt.go) and
  ``validator.Validate`` (claims.go): a TokenReview is authenticated when the token carries this
  world's issuer and signature, has not expired on the virtual clock, names one of the wanted
  audiences, and its ServiceAccount (and bound Pod or Secret) still exist with the uids it names.

The signing key is ECDSA P-256 and the tokens ES256 (kube-apiserver accepts an ECDSA
``--service-account-key-file``; kubeadm's default is RSA, see docs/deviations.md). The key is
derived from the world's seed (`signing_key`), not from the operating system's randomness, and
signatures use RFC 6979's deterministic nonces: the same seed issues the same token bytes, so a
token written into an object leaves a run's digest unchanged, and anyone who knows the seed can
forge one — this is an emulator's key, never a secret. An RSA key would have to be generated
from the seed by hand (the cryptography package draws RSA primes only from the OS).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import TYPE_CHECKING, Any

import orjson

from ..kernel.clock import EPOCH, rfc3339
from ..kernel.rng import SimRandom
from .errors import ApiError, BadRequest, Conflict, Invalid, NotFound
from .validation import invalid

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey

    from .rbac import UserInfo
    from .server import APIServer

Obj = dict[str, Any]

#: kube-apiserver's ``--service-account-issuer`` on a kind cluster; also its API audience.
ISSUER = "https://kubernetes.default.svc.cluster.local"
#: The audiences a TokenRequest without ``spec.audiences`` gets (``--api-audiences``, which
#: defaults to the issuer).
API_AUDIENCES: tuple[str, ...] = (ISSUER,)
#: ``SetDefaults_TokenRequestSpec``: an hour.
DEFAULT_EXPIRATION = 3600
#: ``ValidateTokenRequest``: at least ten minutes, at most 2^32 seconds.
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
#: ``WarnOnlyBoundTokenExpirationSeconds``: what the ServiceAccount admission's projected token
#: asks for, and ``ExpirationExtensionSeconds``: what a Pod-bound token asking for it gets.
WARN_ONLY_SECONDS = 3607
EXTENDED_SECONDS = 365 * 24 * 3600
GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
#: The user a TokenReview of ``emu serve --token``'s token authenticates as (kind's admin).
STATIC_USER = "kubernetes-admin"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SigningKey:
    """An ECDSA P-256 key that signs and verifies ES256 JWTs (RFC 6979 deterministic signatures,
    so the same claims give the same token bytes); ``kid`` as kube derives it
    (``keyIDFromPublicKey``: SHA-256 of the DER public key, unpadded base64url)."""

    def __init__(self, key: EllipticCurvePrivateKey) -> None:
        from cryptography.hazmat.primitives import serialization

        self.key = key
        self.public = key.public_key()
        der = self.public.public_bytes(serialization.Encoding.DER,
                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        self.kid = _b64(hashlib.sha256(der).digest())

    def public_pem(self) -> bytes:
        """The public key as PEM (``sa.pub``), for a verifier outside the world."""
        from cryptography.hazmat.primitives import serialization

        return self.public.public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)

    def jwk(self) -> Obj:
        """The public key as a JSON Web Key, as ``/openid/v1/jwks`` lists it."""
        numbers = self.public.public_numbers()
        return {"use": "sig", "kty": "EC", "crv": "P-256", "kid": self.kid, "alg": "ES256",
                "x": _b64(numbers.x.to_bytes(32, "big")), "y": _b64(numbers.y.to_bytes(32, "big"))}

    def sign(self, claims: Obj) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        head = _b64(orjson.dumps({"alg": "ES256", "kid": self.kid}))
        body = _b64(orjson.dumps(claims))
        signed = f"{head}.{body}".encode()
        r, s = decode_dss_signature(self.key.sign(
            signed, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)))
        # JWS (RFC 7518 3.4): the signature is R and S as 32 big-endian bytes each, not DER.
        return f"{head}.{body}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def verify(self, token: str) -> bool:
        """Whether ``token``'s signature is this key's."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

        head, body, sig = token.split(".")
        raw = _unb64(sig)
        if len(raw) != 64:
            return False
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        try:
            self.public.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return False
        return True


@functools.lru_cache(maxsize=8)
def signing_key(seed: int) -> SigningKey:
    """The ServiceAccount signing key of worlds with ``seed``: a P-256 private scalar derived
    from the seed by SHA-256 (no operating-system randomness, microseconds of CPU)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    # P-256's group order; a scalar in [1, n-1].
    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    digest = hashlib.sha256(f"{seed}:serviceaccount-signing-key".encode()).digest()
    return SigningKey(ec.derive_private_key(int.from_bytes(digest, "big") % (order - 1) + 1,
                                            ec.SECP256R1()))


class TokenError(Exception):
    """Why a token does not authenticate: kube's text (a TokenReview's ``status.error``)."""


class Tokens:
    """The token machinery of one `APIServer` (``api.tokens``)."""

    def __init__(self, api: APIServer, rng: SimRandom) -> None:
        self.api = api
        self._seed = rng.seed_value
        #: The ``jti`` of each token: a stream of its own, so issuing tokens draws nothing from
        #: the world's (uids and names stay what they would have been).
        self._ids = rng.fork("serviceaccount-token-ids")
        self._key: SigningKey | None = None
        #: Tokens that are not JWTs (``emu serve --token``) and the user each one is.
        self.static: dict[str, UserInfo] = {}

    @property
    def key(self) -> SigningKey:
        """The world's signing key (made on first use)."""
        if self._key is None:
            self._key = signing_key(self._seed)
        return self._key

    def openid_configuration(self, server_url: str) -> Obj:
        """``/.well-known/openid-configuration`` (``ServiceAccountIssuerDiscovery``): the
        issuer and where its keys are, for verifiers outside the world."""
        base = server_url.rstrip("/") or ISSUER
        return {"issuer": ISSUER, "jwks_uri": f"{base}/openid/v1/jwks",
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["ES256"]}

    def jwks(self) -> Obj:
        """``/openid/v1/jwks``: the key set that verifies the world's tokens."""
        return {"keys": [self.key.jwk()]}

    def _unix(self) -> int:
        return int(EPOCH.timestamp() + self.api._clock())

    # -- TokenRequest --------------------------------------------------------------------------

    def request(self, name: str, namespace: str, body: Any, *, dry_run: bool = False) -> Obj:
        """``TokenREST.Create``: the TokenRequest ``body`` answered with a token for the
        ServiceAccount ``namespace/name`` (201)."""
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise BadRequest("the body of a token request must be an authentication.k8s.io/v1 "
                             "TokenRequest object")
        if body.get("kind") not in (None, "TokenRequest") or \
                body.get("apiVersion") not in (None, API_VERSION):
            raise BadRequest(f"the body is a {body.get('apiVersion')} {body.get('kind')}; "
                             f"serviceaccounts/token takes a {API_VERSION} TokenRequest")
        spec = body.get("spec")
        spec = dict(spec) if isinstance(spec, dict) else {}
        seconds = spec.get("expirationSeconds")
        if seconds is None:
            seconds = DEFAULT_EXPIRATION
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise BadRequest(f"spec.expirationSeconds must be an integer, got {seconds!r}")
        causes = []
        if seconds < MIN_EXPIRATION:
            causes.append(invalid("spec.expirationSeconds", seconds,
                                  "may not specify a duration less than 10 minutes"))
        if seconds > MAX_EXPIRATION:
            causes.append(invalid("spec.expirationSeconds", seconds,
                                  "may not specify a duration larger than 2^32 seconds"))
        if causes:
            raise Invalid("TokenRequest", "", causes, GROUP)
        audiences = spec.get("audiences") or list(API_AUDIENCES)
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise BadRequest("spec.audiences must be a list of strings")
        sa = self.api.get("ServiceAccount", name, namespace)
        bound: tuple[str, Obj] | None = None
        ref = spec.get("boundObjectRef")
        if ref is not None:
            bound = self._bound(name, namespace, ref)
        now = self._unix()
        sa_meta = sa["metadata"]
        private: Obj = {"namespace": namespace,
                        "serviceaccount": {"name": name, "uid": sa_meta["uid"]}}
        if bound is not None:
            kind, obj = bound
            private[kind] = {"name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
            node = (obj.get("spec") or {}).get("nodeName") if kind == "pod" else None
            if node:  # ServiceAccountTokenPodNodeInfo: the bound Pod's Node
                try:
                    node_obj = self.api.get("Node", node)
                    private["node"] = {"name": node, "uid": node_obj["metadata"]["uid"]}
                except ApiError:
                    pass
        lifetime = seconds
        if bound is not None and bound[0] == "pod" and seconds == WARN_ONLY_SECONDS:
            # --service-account-extend-token-expiration (on by default): the kubelet's
            # projected token lives a year, warning after the hour it asked for
            private["warnafter"] = now + seconds
            lifetime = EXTENDED_SECONDS
        claims: Obj = {"aud": audiences, "exp": now + lifetime, "iat": now, "iss": ISSUER,
                       "jti": self._ids.uid(), "kubernetes.io": private, "nbf": now,
                       "sub": f"system:serviceaccount:{namespace}:{name}"}
        token = "" if dry_run else self.key.sign(claims)
        # the name and namespace are the ServiceAccount's, whatever the body's metadata says
        out_meta: Obj = {"name": name, "namespace": namespace,
                         "creationTimestamp": self.api._now()}
        out_spec: Obj = {"audiences": audiences, "expirationSeconds": seconds}
        if ref is not None:
            out_spec["boundObjectRef"] = ref
        return {"kind": "TokenRequest", "apiVersion": API_VERSION, "metadata": out_meta,
                "spec": out_spec,
                "status": {"token": token, "expirationTimestamp": rfc3339(
                    self.api._clock() + lifetime)}}

    def _bound(self, name: str, namespace: str, ref: Any) -> tuple[str, Obj]:
        """The object a token is bound to (``boundObjectRef``): a Pod running as the
        ServiceAccount, a Secret or a Node; its uid must be the one given."""
        if not isinstance(ref, dict):
            raise BadRequest("spec.boundObjectRef must be an object")
        kind, version = str(ref.get("kind") or ""), str(ref.get("apiVersion") or "")
        group = version.rpartition("/")[0] if "/" in version else ""
        obj_name = str(ref.get("name") or "")
        if group == "" and kind == "Pod":
            obj = self.api.get("Pod", obj_name, namespace)
            if (obj.get("spec") or {}).get("serviceAccountName", "default") != name:
                raise BadRequest(f'cannot bind token for serviceaccount "{name}" to pod '
                                 "running with different serviceaccount name.")
            found = "pod"
        elif group == "" and kind == "Secret":
            obj = self.api.get("Secret", obj_name, namespace)
            found = "secret"
        elif group == "" and kind == "Node":  # ServiceAccountTokenNodeBinding (GA in 1.33)
            obj = self.api.get("Node", obj_name)
            found = "node"
        else:
            shown = f"{group}/{version.rpartition('/')[2]}, Kind={kind}" if group else \
                f"/{version}, Kind={kind}"
            raise BadRequest(f"cannot bind token to object of type {shown}")
        uid = ref.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            raise Conflict(kind, obj_name, "", f"the UID in the bound object reference ({uid}) "
                           "does not match the UID in record. The object might have been "
                           "deleted and then recreated")
        return found, obj

    # -- TokenReview ---------------------------------------------------------------------------

    def authenticate(self, token: str, audiences: list[str] | None = None
                     ) -> tuple[Obj, list[str]] | None:
        """``AuthenticateToken``: the user a token is (``userInfo``) and the audiences it is
        good for, None when the token is none of this world's (another issuer, not a JWT);
        raises `TokenError` with kube's text when it is one of this world's and invalid."""
        user = self.static.get(token)
        if user is not None:  # audience-agnostic: good for the API server's audiences only
            common = [a for a in audiences or API_AUDIENCES if a in API_AUDIENCES]
            if not common:
                return None
            return {"username": user.name, "groups": list(user.groups)}, common
        parts = token.strip().split(".")
        if len(parts) != 3 or token.strip().startswith("{"):
            return None
        try:
            claims = orjson.loads(_unb64(parts[1]))
            header = orjson.loads(_unb64(parts[0]))
        except (ValueError, orjson.JSONDecodeError):
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        kid = header.get("kid") if isinstance(header, dict) else None
        if kid and kid != self.key.kid:
            raise TokenError("invalid signature, no keys found")
        if not self.key.verify(token.strip()):
            raise TokenError("go-jose/go-jose: error in cryptographic primitive")
        token_auds = claims.get("aud")
        if isinstance(token_auds, str):
            token_auds = [token_auds]
        token_auds = [a for a in token_auds or [] if isinstance(a, str)] or list(API_AUDIENCES)
        wanted = list(audiences) if audiences else list(API_AUDIENCES)
        common = [a for a in token_auds if a in wanted]
        if not common:
            raise TokenError(f"token audiences {_go_quoted(token_auds)} is invalid for the "
                             f"target audiences {_go_quoted(wanted)}")
        return self._validate(claims), common

    def _validate(self, claims: Obj) -> Obj:
        """``validator.Validate``: time, then the ServiceAccount and the bound objects."""
        now = self._unix()
        leeway = 60  # jwt.DefaultLeeway
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, int) and now > exp + leeway:
            raise TokenError("service account token has expired")
        if isinstance(nbf, int) and now < nbf - leeway:
            raise TokenError("service account token is not valid yet")
        iat = claims.get("iat")
        if isinstance(iat, int) and now < iat - leeway:
            raise TokenError("service account token is issued in the future")
        private = claims.get("kubernetes.io") or {}
        namespace = str(private.get("namespace") or "")
        saref = private.get("serviceaccount") or {}
        sa = self._live("ServiceAccount", str(saref.get("name") or ""), namespace)
        if sa is None:
            raise TokenError(f'serviceaccounts "{saref.get("name")}" not found')
        if sa["metadata"]["uid"] != saref.get("uid"):
            raise TokenError(f"service account UID ({sa['metadata']['uid']}) does not match "
                             f"claim ({saref.get('uid')})")
        if self._deleted(sa):
            raise TokenError(f"service account {namespace}/{saref.get('name')} has been deleted")
        extra: Obj = {}
        podref = private.get("pod")
        noderef = private.get("node")
        bound = [(kind, ref, ns) for kind, ref, ns in (
            ("Secret", private.get("secret"), namespace), ("Pod", podref, namespace),
            ("Node", noderef if not isinstance(podref, dict) else None, None))
            if isinstance(ref, dict)]
        for kind, ref, ns in bound:
            obj = self._live(kind, str(ref.get("name") or ""), ns)
            if obj is None:
                raise TokenError("service account token has been invalidated")
            if obj["metadata"]["uid"] != ref.get("uid"):
                raise TokenError(f"{kind.lower()} UID ({obj['metadata']['uid']}) does not match "
                                 f"service account {kind.lower()} ref claim ({ref.get('uid')})")
            if self._deleted(obj):
                raise TokenError("service account token has been invalidated")
        if isinstance(podref, dict):
            extra["authentication.kubernetes.io/pod-name"] = [podref.get("name")]
            extra["authentication.kubernetes.io/pod-uid"] = [podref.get("uid")]
        if isinstance(noderef, dict) and noderef.get("name"):
            extra["authentication.kubernetes.io/node-name"] = [noderef.get("name")]
            if noderef.get("uid"):
                extra["authentication.kubernetes.io/node-uid"] = [noderef.get("uid")]
        if claims.get("jti"):
            extra["authentication.kubernetes.io/credential-id"] = [f"JTI={claims['jti']}"]
        user: Obj = {"username": f"system:serviceaccount:{namespace}:{saref.get('name')}",
                     "uid": saref.get("uid"),
                     "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                "system:authenticated"]}
        if extra:
            user["extra"] = dict(sorted(extra.items()))
        return user

    def _live(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        try:
            return self.api.get(kind, name, namespace)
        except NotFound:
            return None

    def _deleted(self, obj: Obj) -> bool:
        """Deleted more than the leeway ago (``invalidIfDeletedBefore``)."""
        when = (obj.get("metadata") or {}).get("deletionTimestamp")
        if not when:
            return False
        from ..kernel.clock import parse_time

        return parse_time(when) < self.api._clock() - 60

    def review(self, body: Any) -> Obj:
        """``POST tokenreviews``: the TokenReview ``body`` with its ``status`` (201)."""
        if not isinstance(body, dict):
            raise BadRequest("the body of a TokenReview must be a JSON object")
        if body.get("kind") not in (None, "TokenReview") or \
                body.get("apiVersion") not in (None, API_VERSION):
            raise BadRequest(f"the body is a {body.get('apiVersion')} {body.get('kind')}; this "
                             f"path takes a {API_VERSION} TokenReview")
        spec = body.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise BadRequest("token is required for TokenReview in authentication")
        wanted = spec.get("audiences")
        if wanted is not None and (not isinstance(wanted, list) or
                                   not all(isinstance(a, str) for a in wanted)):
            raise BadRequest("spec.audiences must be a list of strings")
        status: Obj = {"user": {}}
        try:
            found = self.authenticate(token, wanted or None)
        except TokenError as err:
            status["error"] = str(err)
        else:
            if found is not None:
                status = {"authenticated": True, "user": found[0], "audiences": found[1]}
        return {"kind": "TokenReview", "apiVersion": API_VERSION,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


def _go_quoted(items: list[str]) -> str:
    """A Go ``%q`` of a string slice: ``["a" "b"]``."""
    return "[" + " ".join(orjson.dumps(i).decode() for i in items) + "]"
