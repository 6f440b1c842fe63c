"""The files beside a checkpoint on an S3-compatible store (moto's server), through
treedist.spark.checkpoint_fs, as the processes without a JVM use them: copy-ahead intents,
the readers behind status and lag, the interrupted-write repair and the legacy reader."""

from __future__ import annotations

import uuid
from pathlib import Path

from treedist.records.legacy import last_committed_end
from treedist.spark.checkpoint_repair import remove_interrupted_writes
from treedist.spark.checkpoint_fs import join
from treedist.kafka.read_positions import TopicPartitionKey

from tests.integration.spark.side_files import check_intents_round_trip

LEGACY = Path(__file__).resolve().parents[2] / "data" / "legacy_checkpoint" / "checkpoints"


def _upload(store, local: Path, root: str) -> None:
    for path in local.rglob("*"):
        if path.is_file() and not path.name.endswith(".crc"):  # Hadoop's binary checksums: not read
            store.write_text(join(root, *path.relative_to(local).parts), path.read_text(), "t")


def test_files_round_trip_through_the_bucket(s3_store):
    store, root = s3_store.store(), s3_store.location("fs")
    assert store.read_text(join(root, "absent")) is None
    assert store.files(join(root, "none")) == {}
    assert not store.is_dir(root)
    store.write_text(join(root, "a", "x"), "one", "t")
    store.write_text(join(root, "a", "x"), "two", "t")  # replaced whole
    store.write_text(join(root, "a", "sub", "y"), "three", "t")
    assert store.read_text(join(root, "a", "x")) == "two"
    assert list(store.files(join(root, "a"))) == ["x"]  # files only, not the sub-directory
    assert store.is_dir(join(root, "a")) and store.is_dir(join(root, "a", "sub"))
    store.delete(join(root, "a", "x"))
    store.delete(join(root, "a", "x"))  # already gone: fine
    assert store.files(join(root, "a")) == {}


def test_copy_ahead_intents_in_the_bucket(s3_store):
    check_intents_round_trip(s3_store.store(), join(s3_store.location("ck"), "messages", "c1"))


def test_legacy_reader_and_repair_read_checkpoints_in_the_bucket(s3_store):
    store, root = s3_store.store(), s3_store.location("legacy")
    _upload(store, LEGACY, root)
    assert last_committed_end(join(root, "c1-L1"), store).positions == {
        TopicPartitionKey("legacy-orders", p): 50 for p in range(3)}
    assert last_committed_end(join(root, "c9-L1"), store) is None
    interrupted = join(root, "c1-L1", "offsets", f".2.{uuid.uuid4()}.tmp")
    store.write_text(interrupted, "x", "t")
    assert remove_interrupted_writes(join(root, "c1-L1"), store) == [interrupted]
    assert store.read_text(interrupted) is None and store.read_text(join(root, "c1-L1", "offsets", "1")) is not None
