"""The files beside a checkpoint on HDFS (a MiniDFSCluster), through
treedist.spark.checkpoint_fs over WebHDFS, as the processes without a JVM use them: written
whole and replaced atomically (a temporary renamed over the file), rewritten in place, read,
listed with their modification times, deleted; copy-ahead intents; a namenode that does not
answer is a CheckpointStoreError naming the location."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time

import pytest

from treedist.local.launcher import free_port
from treedist.spark.checkpoint_fs import CheckpointStoreError, Store, join, store_options

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


class _Answers(http.server.BaseHTTPRequestHandler):
    """An HTTP server that is not WebHDFS, or a namenode in safe mode: each GET takes the next
    (status, body) of the server's `script`, the last one repeated."""

    def do_GET(self):  # noqa: N802 - http.server's name
        script = self.server.script
        status, body = script.pop(0) if len(script) > 1 else script[0]
        self.server.seen += 1
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serving(script: list[tuple[int, bytes]]):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    server.script, server.seen = list(script), 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _store_at(server) -> Store:
    return Store(store_options({"spark.hadoop.dfs.namenode.http-address": f"127.0.0.1:{server.server_port}"}))


def test_a_404_that_is_not_webhdfs_names_the_location_instead_of_reading_as_missing():
    # a wrong port or WebHDFS turned off: a plain 404 page, no RemoteException
    with _serving([(404, b"<html>Not Found</html>")]) as server:
        with pytest.raises(CheckpointStoreError, match="somewhere/x.*not an answer of WebHDFS"):
            _store_at(server).read_text("hdfs://127.0.0.1:8020/somewhere/x")


def test_a_namenode_in_safe_mode_is_asked_again_and_a_missing_file_is_still_none():
    safe_mode = json.dumps({"RemoteException": {"exception": "SafeModeException", "message": "safe mode is ON"}})
    missing = json.dumps({"RemoteException": {"exception": "FileNotFoundException", "message": "no /x"}})
    with _serving([(403, safe_mode.encode()), (404, missing.encode())]) as server:
        assert _store_at(server).read_text("hdfs://127.0.0.1:8020/x") is None
        assert server.seen == 2  # the 403 naming safe mode was retried

