"""The head-loss scenarios with the fixed head Pod name ``<cluster>-head``.

KubeRay up to v1.4 always names the head Pod ``<cluster>-head``, and later releases do with
``ENABLE_DETERMINISTIC_HEAD_POD_NAME=true``: the replacement of a lost head then has the lost
one's name. The scenarios must still tell the replacement from the lost head (slow its start by
90 s, count its creation), or their expectations measure something else: against KubeRay v1.4.0
the workers met the promptly started new GCS after 31 s and the rows read as a reconnect window
of 31 s instead of 60 s.
"""

from __future__ import annotations

from typing import Any

import pytest

from emu import scenarios
from emu.kuberay.operator import install_kuberay


async def _fixed_head_name_installer(sim: Any, **kwargs: Any) -> Any:
    return await install_kuberay(sim, env={"ENABLE_DETERMINISTIC_HEAD_POD_NAME": "true"},
                                 **kwargs)


@pytest.mark.parametrize("name", ["head-loss-memory", "head-loss-redis"])
def test_a_replacement_head_with_the_lost_heads_name_is_still_the_new_head(name):
    result = scenarios.run_scenario(name, seed=1, kuberay_installer=_fixed_head_name_installer)
    heads = result.sim.api.list("Pod", "default",
                                label_selector="ray.io/cluster=raycluster,"
                                               "ray.io/node-type=head")["items"]
    assert [p["metadata"]["name"] for p in heads] == ["raycluster-head"]
    failed = [(e.claim, e.detail) for e in result.expectations if not e.ok]
    assert result.ok, failed
    # the replacement's creation is counted, and its start was held back past Ray's 60 s window
    assert result.facts["new_head_created_after"] is not None
    if name == "head-loss-memory":
        assert all(60 <= t <= 61.5 for t, _, _ in result.facts["worker_raylet_exits"])
    else:
        assert all(60 < after < 600 for _, after in result.facts["worker_reconnects"])


def test_head_restart_disabled_counts_a_recreated_head_with_the_fixed_name():
    """The port honours ``ray.io/disable-provisioned-head-restart``, so no head comes back
    whatever its name would be; the scenario's count of head creations must see one with the
    fixed name too, which a name test for ``-head-`` did not."""
    from emu.scenarios.head_loss import _head_creates, _is_head_pod_name

    assert _is_head_pod_name("raycluster", "raycluster-head")
    assert _is_head_pod_name("raycluster", "raycluster-head-x7k2p")
    assert not _is_head_pod_name("raycluster", "raycluster-workers-worker-abcde")
    assert not _is_head_pod_name("raycluster", "other-head")
    result = scenarios.run_scenario("head-restart-disabled", seed=1,
                                    kuberay_installer=_fixed_head_name_installer)
    assert result.ok, [(e.claim, e.detail) for e in result.expectations if not e.ok]
    creates = _head_creates(result.sim, "raycluster", 0.0)
    assert len(creates) == 1  # the first head only, named raycluster-head
