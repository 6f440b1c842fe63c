"""Checks of the files beside a checkpoint on a remote store, shared by the tests of each
store (test_checkpoint_fs_s3.py, test_checkpoint_fs_hdfs.py)."""

from __future__ import annotations

from treedist.records.ahead import Intents
from treedist.spark.checkpoint_fs import Store
from treedist.kafka.read_positions import TopicPartitionKey


def check_intents_round_trip(store: Store, checkpoint: str) -> None:
    """Copy-ahead intents under `checkpoint` (a fresh location): made visible, written,
    overwritten by a retried task, read back per partition."""
    intents = Intents.of(checkpoint, store)
    assert not intents.visible()
    intents.make_dir()
    assert intents.visible()
    tp, other = TopicPartitionKey("orders", 0), TopicPartitionKey("orders", 1)
    intents.write("batch-1", [(tp, 10, 25), (other, 7, 7)])
    intents.write("batch-1", [(tp, 10, 30)])  # a retried task overwrites
    assert intents.read("batch-1", [tp, other, TopicPartitionKey("never", 0)]) == {tp: (10, 30), other: (7, 7)}
    assert intents.read("batch-2", [tp, other]) == {}
