"""A held query's first latestOffset (`source._wait_while_held`): it waits only while the
application's hold file exists, and never longer than HOLD_MAX_S."""

from __future__ import annotations

import threading
import time

from treedist.records import distributor_source as source


def test_a_missing_hold_file_does_not_hold(tmp_path):
    source._wait_while_held(str(tmp_path / "never-created"))


def test_the_wait_ends_when_the_file_goes(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "HOLD_MAX_S", 60.0)
    hold = tmp_path / "hold"
    hold.touch()
    remover = threading.Timer(0.2, hold.unlink)
    remover.start()
    started = time.monotonic()
    source._wait_while_held(str(hold))
    remover.join()
    assert time.monotonic() - started < 60.0  # ended by the removal, not by the bound


def test_a_hold_file_left_behind_holds_at_most_hold_max_s(tmp_path, monkeypatch):
    # An application that died between creating and removing it must not stall its queries.
    monkeypatch.setattr(source, "HOLD_MAX_S", 0.2)
    hold = tmp_path / "hold"
    hold.touch()
    source._wait_while_held(str(hold))
    assert hold.exists()
