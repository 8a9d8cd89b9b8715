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


def test_a_driver_log_is_compared_without_its_timestamp_and_output_order() -> None:
    from sequences import log_shape

    one = ("2026-12-07 10:36:59,375\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
           "hi\nRunning entrypoint for job s1: echo hi\n")
    other = ("2026-01-01 00:00:00,500\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
             "Running entrypoint for job s1: echo hi\nhi\n")
    assert log_shape(one) == log_shape(other) == {
        "first": "<time>\tINFO job_manager.py:581 -- Runtime env is setting up.",
        "others": ["Running entrypoint for job s1: echo hi", "hi"], "ends_with_newline": True}
    assert log_shape(other.rstrip("\n"))["ends_with_newline"] is False


def test_both_sigterm_death_texts_of_real_ray_read_the_same_and_others_are_kept() -> None:
    from sequences import SIGTERM_REASON, node_reason

    assert node_reason("received SIGTERM") == SIGTERM_REASON
    assert node_reason("Node received SIGTERM; draining before shutdown.") == SIGTERM_REASON
    why = "health check failed due to missing too many heartbeats"
    assert node_reason(why) == why


@pytest.mark.parametrize(("seconds", "bucket"), [(0.0, "<20s"), (19.99, "<20s"), (30.0, "20-45s"),
                                                 (61.0, "45-100s"), (100.0, ">=100s")])
def test_durations_are_compared_in_buckets(seconds: float, bucket: str) -> None:
    from sequences import took

    assert took(seconds) == bucket


def test_the_filterable_column_set_is_compared_in_one_order() -> None:
    from actor_sequences import sort_column_set

    real = ("The given filter column x is not supported. Supported filter columns: {'state', "
            "'name', 'actor_id'}")
    assert sort_column_set(real) == ("The given filter column x is not supported. Supported "
                                     "filter columns: {'actor_id', 'name', 'state'}")
    assert sort_column_set("no set here") == "no set here"
