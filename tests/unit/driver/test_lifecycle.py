"""Stop on SIGTERM and SIGINT alike, a second signal forces (treedist.driver.lifecycle),
with real signals sent to a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from treedist.driver.lifecycle import StopRequested, StopSignals


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_the_first_signal_raises_stop_requested_and_sets_the_exit_code(signum, code):
    before = signal.getsignal(signum)
    with StopSignals() as signals:
        with pytest.raises(StopRequested) as stop:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises in the main thread before this ends
        assert stop.value.signum == signum
        assert signals.exit_code(clean=True) == code
        assert signals.exit_code(clean=False) == (130 if signum == signal.SIGINT else 1)
    assert signal.getsignal(signum) is before  # restored on leaving


FORCE = """
import os, signal, sys, time
from treedist.driver.lifecycle import StopRequested, StopSignals
with StopSignals() as signals:
    signals.on_force(lambda: open(sys.argv[1], "w").write("forced"))
    try:
        print("ready", flush=True)
        time.sleep(30)
    except StopRequested:
        print("stopping", flush=True)
        time.sleep(30)  # a slow clean stop: the second signal must not wait for it
print("not forced", flush=True)
"""


def test_a_second_signal_forces_the_exit_at_once_after_the_force_callbacks(tmp_path):
    marker = tmp_path / "forced"
    proc = subprocess.Popen([sys.executable, "-c", FORCE, str(marker)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "stopping"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 128 + signal.SIGINT
    finally:
        if proc.poll() is None:
            proc.kill()
    assert marker.read_text() == "forced"
