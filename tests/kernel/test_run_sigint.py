"""``emu.run`` and Ctrl-C: a plain KeyboardInterrupt, and Python's handler back afterwards."""

from __future__ import annotations

import os
import signal

import pytest

import emu


def test_ctrl_c_during_a_run_raises_keyboard_interrupt_and_the_handler_is_restored():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    seen = []

    async def main(sim):
        seen.append(signal.getsignal(signal.SIGINT))
        await sim.sleep(1)
        os.kill(os.getpid(), signal.SIGINT)
        await sim.sleep(1)
        seen.append("not interrupted")

    with pytest.raises(KeyboardInterrupt):
        emu.run(main, seed=1)
    # not asyncio.Runner's handler (a partial cancelling the main task, whose removal check
    # cost ~2 ms a run): one that raises at once, like Python's own
    assert seen[0] is not signal.default_int_handler and callable(seen[0])
    assert not hasattr(seen[0], "func")
    assert "not interrupted" not in seen
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_the_user_installed_is_left_alone():
    calls = []

    def mine(signum, frame):
        calls.append(signum)

    old = signal.signal(signal.SIGINT, mine)
    try:
        async def main(sim):
            assert signal.getsignal(signal.SIGINT) is mine
            os.kill(os.getpid(), signal.SIGINT)
            await sim.sleep(1)

        emu.run(main, seed=1)
        assert calls == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, old)
