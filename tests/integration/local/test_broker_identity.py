"""A state file's PID is stopped only while it is still the broker we started (real brokers of
both engines: `is_ours` reads a Kafka node's command line differently from noida-db's)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from treedist.local import LocalClusters
from treedist.local.launcher import ENGINES, is_ours, pid_alive


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


def test_only_our_broker_counts_as_ours_and_a_stranger_is_never_signalled(tmp_path, engine):
    clusters = LocalClusters.start(["a"], tmp_path / "k", engine=engine)
    broker = clusters.brokers["a"]
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        assert is_ours(broker)
        # The state file now points at a process that is not our broker (PID reused after a crash).
        reused = dataclasses.replace(broker, pid=stranger.pid)
        other_dir = dataclasses.replace(broker, data_dir=str(tmp_path / "elsewhere"))
        assert not is_ours(reused) and not is_ours(other_dir)
        LocalClusters(tmp_path / "k", {"a": reused}).stop(grace=0.5)
        assert pid_alive(stranger.pid), "a process that is not our broker was signalled"
        assert LocalClusters(tmp_path / "k", {"a": reused}).status()[0]["running"] is False
    finally:
        clusters.stop()
        stranger.kill()
        stranger.wait()
    assert not pid_alive(broker.pid)
    assert not is_ours(broker)


def test_a_second_start_reuses_only_a_broker_that_is_ours(tmp_path, engine):
    first = LocalClusters.start(["a"], tmp_path / "k", engine=engine)
    try:
        again = LocalClusters.start(["a"], tmp_path / "k")
        assert again.brokers["a"].pid == first.brokers["a"].pid and again.brokers["a"].engine == engine
    finally:
        first.stop()
    restarted = LocalClusters.start(["a"], tmp_path / "k")
    try:
        # restarted on the engine its data was written by, whatever the default engine is
        assert restarted.brokers["a"].pid != first.brokers["a"].pid and is_ours(restarted.brokers["a"])
        assert restarted.brokers["a"].engine == engine
    finally:
        restarted.stop()
