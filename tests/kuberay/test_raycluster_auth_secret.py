"""``reconcileAuthSecret``: the Secret is created for token auth and for authOptions without a
mode (Go returns early only for no authOptions or mode Disabled)."""

from __future__ import annotations

import pytest
from test_raycluster_support import NS, raycluster, reconciler

from emu.apiserver.errors import ApiError


@pytest.mark.parametrize(("auth", "created"), [
    ({"mode": "token"}, True), ({}, False), ({"mode": "disabled"}, False),
    ({"secretName": "mine", "mode": "token"}, False), ({"secretName": None}, True)])
async def test_auth_secret_created_unless_disabled_or_user_given(sim, auth, created):
    rc = raycluster(authOptions=auth) if auth else raycluster()
    rc = await sim.client().create(rc)
    await reconciler(sim).reconcile_auth_secret(rc)
    try:
        secret = await sim.client().get("Secret", rc["metadata"]["name"], NS)
    except ApiError as err:
        assert err.code == 404
        secret = None
    assert (secret is not None) == created
