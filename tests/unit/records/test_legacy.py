"""Reading the per-(cluster, level) checkpoints the pre-read-once version wrote
(tests/data/legacy_checkpoint, captured from commit a5af537)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from treedist.records.errors import PipelineError
from treedist.records.legacy import last_committed_end
from treedist.kafka.read_positions import TopicPartitionKey

DATA = Path(__file__).resolve().parents[2] / "data" / "legacy_checkpoint" / "checkpoints"


def test_the_end_of_the_last_committed_batch_not_the_last_planned_one():
    # c1-L1: batch 0 (to 50) committed, batch 1 (to 100) planned only.
    assert last_committed_end(DATA / "c1-L1").positions == {TopicPartitionKey("legacy-orders", p): 50 for p in range(3)}
    assert last_committed_end(DATA / "c2-L1").positions == {TopicPartitionKey("legacy-orders", p): 150 for p in range(3)}


def test_no_checkpoint_or_nothing_committed_means_none(tmp_path):
    assert last_committed_end(tmp_path / "absent") is None
    shutil.copytree(DATA / "c1-L1", tmp_path / "x")
    (tmp_path / "x" / "commits" / "0").unlink()
    assert last_committed_end(tmp_path / "x") is None


def test_a_committed_batch_without_its_offsets_is_an_error_naming_the_file(tmp_path):
    shutil.copytree(DATA / "c1-L1", tmp_path / "x")
    (tmp_path / "x" / "offsets" / "0").unlink()
    with pytest.raises(PipelineError, match="batch 0 is committed but .*offsets/0 cannot be read"):
        last_committed_end(tmp_path / "x")
