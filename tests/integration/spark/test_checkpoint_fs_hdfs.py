"""The files beside a checkpoint on HDFS (a MiniDFSCluster), through
treedist.spark.checkpoint_fs over WebHDFS, as the processes without a JVM use them: written
whole and replaced atomically (a temporary renamed over the file), rewritten in place, read,
listed with their modification times, deleted; copy-ahead intents; a namenode that does not
answer is a CheckpointStoreError naming the location."""

from __future__ import annotations

import time

import pytest

from treedist.local.launcher import free_port
from treedist.spark.checkpoint_fs import CheckpointStoreError, Store, join, store_options

from tests.fixtures.hdfs import hdfs  # noqa: F401  (the fixture)
from tests.integration.spark.side_files import check_intents_round_trip


def test_files_round_trip_through_hdfs(hdfs):
    store, root = hdfs.store(), hdfs.location("fs")
    assert store.read_text(join(root, "absent")) is None
    assert store.files(join(root, "none")) == {}
    assert not store.is_dir(root)
    before = time.time()
    store.write_text(join(root, "a", "x"), "one", "t")
    store.write_text(join(root, "a", "x"), "two", "t")  # renamed over the first
    store.write_text(join(root, "a", "sub", "y"), "three", "t")
    assert store.read_text(join(root, "a", "x")) == "two"
    listed = store.files(join(root, "a"))
    assert list(listed) == ["x"]  # files only: no sub-directory, no temporary left behind
    assert listed["x"] >= before - 5  # the namenode's clock, the same host's
    assert store.is_dir(join(root, "a")) and store.is_dir(join(root, "a", "sub"))
    assert not store.is_dir(join(root, "a", "x"))
    store.overwrite(join(root, "a", "x"), b"a longer content")
    store.overwrite(join(root, "a", "x"), b"short")  # in place: nothing of the longer one left
    assert store.read_text(join(root, "a", "x")) == "short"
    store.delete(join(root, "a", "x"))
    store.delete(join(root, "a", "x"))  # already gone: fine
    assert store.files(join(root, "a")) == {}
    store.make_dir(join(root, "b", "c"))
    assert store.is_dir(join(root, "b", "c"))


def test_copy_ahead_intents_on_hdfs(hdfs):
    check_intents_round_trip(hdfs.store(), join(hdfs.location("ck"), "messages", "c1"))


def test_a_namenode_that_does_not_answer_names_the_location(hdfs):
    # WebHDFS's address on a port where nothing listens: the bounded retries end in an error
    # naming the path.
    location = f"hdfs://127.0.0.1:{hdfs.rpc_port}/nowhere/x"
    store = Store(store_options({"spark.hadoop.dfs.namenode.http-address": f"127.0.0.1:{free_port()}"}))
    with pytest.raises(CheckpointStoreError, match="nowhere/x.*did not answer"):
        store.read_text(location)
    assert not store.is_dir(location)  # False, as for a missing directory
