"""The contract's traceback normaliser depends on nothing of the machine: not the checkout's
folder names, not the Python version, not where Ray is installed."""

from __future__ import annotations

import pytest
from sequences import normalise_trace

TRACE = (
    'Traceback (most recent call last):\n'
    '  File "{root}/ray/dashboard/modules/job/job_head.py", line 419, in submit_job\n'
    '    resp = await job_agent_client.submit_job_internal(submit_request)\n'
    '           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n'
    '  File "{root}/aiohttp/client.py", line 12, in _request\n'
)
WANTED = (
    'Traceback (most recent call last):\n'
    '  File "ray/dashboard/modules/job/job_head.py", in submit_job\n'
    '    resp = await job_agent_client.submit_job_internal(submit_request)\n'
    '  File "aiohttp/client.py", in _request\n'
)


@pytest.mark.parametrize("root", [
    "/work/wt-realray/.venv/lib/python3.11/site-packages",
    # A checkout under a folder named ray (the old normaliser cut at its first /ray/).
    "/home/me/ray/kuberay-emu/.venv/lib/python3.13/site-packages",
    "/usr/lib/python3/dist-packages",
    "/opt/ray/python/ray/../site-packages",
])
def test_install_paths_are_cut(root: str) -> None:
    assert normalise_trace(TRACE.format(root=root)) == WANTED


def test_a_source_checkout_of_ray_is_cut_before_its_package() -> None:
    text = '  File "/src/ray/python/ray/dashboard/modules/job/job_head.py", line 1, in f\n'
    assert normalise_trace(text) == '  File "ray/dashboard/modules/job/job_head.py", in f\n'


def test_paths_already_relative_are_kept() -> None:
    text = '  File "ray/dashboard/modules/job/job_manager.py", in submit_job\n'
    assert normalise_trace(text) == text
