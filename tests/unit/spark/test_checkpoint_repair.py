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


def _entry(directory: Path, batch: int, source_offset: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{source_offset}')
    (directory / f".{batch}.crc").write_text("crc")


def test_the_uncommitted_batch_is_found_with_its_start_and_removed_with_its_checksum(tmp_path):
    from treedist.spark.checkpoint_repair import remove_offset_entry, uncommitted_batch

    for batch in (0, 1, 2):
        _entry(tmp_path / "offsets", batch, f'{{"levels": {{"1": {{"t": {{"0": {batch * 10}}}}}}}}}')
    for batch in (0, 1):
        _entry(tmp_path / "commits", batch, "{}")
    batch, start, end = uncommitted_batch(tmp_path)
    assert (batch, start["levels"]["1"]["t"]["0"], end["levels"]["1"]["t"]["0"]) == (2, 10, 20)
    remove_offset_entry(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert uncommitted_batch(tmp_path) is None  # every batch in the log was committed


def test_an_uncommitted_first_batch_has_no_start_in_the_log(tmp_path):
    from treedist.spark.checkpoint_repair import uncommitted_batch

    assert uncommitted_batch(tmp_path) is None  # a new checkpoint
    _entry(tmp_path / "offsets", 0, '{"levels": {}}')
    assert uncommitted_batch(tmp_path) == (0, None, {"levels": {}})
