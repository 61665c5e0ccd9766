"""The ``focus_go.cli`` package's seams: the signal handling a run installs works for any
signal it is given, not only Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal

from focus_go.cli.progress import Totals
from focus_go.cli.run import cancel_on_signals


def test_cancel_on_signals_cancels_the_work_once_then_steps_aside():
    async def main() -> Totals:
        totals = Totals()
        work = asyncio.ensure_future(asyncio.sleep(30))
        with cancel_on_signals(work, totals, signals=(signal.SIGUSR1,)):
            os.kill(os.getpid(), signal.SIGUSR1)
            try:
                await work
            except asyncio.CancelledError:
                pass
            assert work.cancelled()
            assert asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1) is False  # removed after the first
        return totals

    previous = signal.getsignal(signal.SIGUSR1)
    assert asyncio.run(main()).interrupted
    assert signal.getsignal(signal.SIGUSR1) == previous

