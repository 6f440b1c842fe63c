"""Which checkpoint files count as a log write that a crash interrupted (and nothing else)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from treedist.spark.checkpoint_repair import is_interrupted_write, remove_interrupted_writes

UUID = "242d0ab2-f32d-4d9b-97a6-fadf0392e528"


@pytest.mark.parametrize("name", [f".0.{UUID}.tmp", f"..0.{UUID}.tmp.crc", f".17.{UUID}.tmp", f"..123.{UUID}.tmp.crc"])
def test_temp_files_of_a_log_entry_are_interrupted_writes(name):
    assert is_interrupted_write(name)


@pytest.mark.parametrize(
    "name",
    ["0", "17", ".0.crc", ".17.crc", "metadata", f"0.{UUID}.tmp", f".x.{UUID}.tmp", f".0.{UUID}.tmpx", ".0.not-a-uuid.tmp", f"...0.{UUID}.tmp"],
)
def test_log_entries_and_their_checksums_are_kept(name):
    assert not is_interrupted_write(name)


def test_remove_touches_only_the_temp_files_of_the_two_logs(tmp_path):
    for log_dir in ("offsets", "commits", "sources"):
        (tmp_path / log_dir).mkdir()
        for name in ("0", ".0.crc", f".1.{uuid.uuid4()}.tmp", f"..1.{uuid.uuid4()}.tmp.crc"):
            (tmp_path / log_dir / name).write_text("x")

    removed = [Path(p) for p in remove_interrupted_writes(tmp_path)]

    assert sorted(p.parent.name for p in removed) == ["commits", "commits", "offsets", "offsets"]
    assert all(not p.exists() for p in removed)
    for log_dir in ("offsets", "commits"):
        assert sorted(p.name for p in (tmp_path / log_dir).iterdir()) == [".0.crc", "0"]
    assert len(list((tmp_path / "sources").iterdir())) == 4  # not a log Spark checks for emptiness


def test_a_checkpoint_that_does_not_exist_yet_needs_no_repair(tmp_path):
    assert remove_interrupted_writes(tmp_path / "new") == []
