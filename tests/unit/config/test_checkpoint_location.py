"""checkpoint_location: a path (resolved as before) or a file://, hdfs://, s3a:// URI; any other
scheme is a config error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.local.deployment import local_deployment
from treedist.records.plan import plan_cluster

BOOT = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}


def _plan(location: str, conf: dict | None = None):
    spec = local_deployment(BOOT, topics=["t"], checkpoint_location=location, spark={"conf": conf or {}})
    return plan_cluster(parse_deployment(spec), "a")


def test_a_plain_path_stays_a_local_path_resolved_against_the_working_directory():
    plan = _plan("rel/ck")
    assert plan.checkpoint == str(Path("rel/ck").resolve() / "messages" / "a")
    assert plan.legacy_checkpoints == {1: str(Path("rel/ck").resolve() / "a-L1")}


def test_a_file_uri_is_the_same_local_path():
    assert _plan("file:///var/lib/td/ck/").checkpoint == "/var/lib/td/ck/messages/a"


@pytest.mark.parametrize("location", ["s3a://bucket/td/ck", "hdfs://nn:8020/td/ck"])
def test_remote_uris_are_kept_as_uris(location):
    plan = _plan(location + "/", {"spark.hadoop.fs.s3a.endpoint": "http://s3:9000", "spark.executor.cores": "1"})
    assert plan.checkpoint == location + "/messages/a"
    options = dict(plan.store.options)
    if location.startswith("hdfs:"):  # the driver's WebHDFS user travels with an hdfs:// plan
        assert options.pop("hadoop.user.name")
    assert options == {"fs.s3a.endpoint": "http://s3:9000"}


@pytest.mark.parametrize("location, message", [
    ("s3://bucket/x", "scheme 's3' is not supported"),
    ("gs://bucket/x", "scheme 'gs' is not supported"),
    ("s3a:///x", "names no bucket"),
    ("file://relative/x", "not an absolute file:// URI"),
])
def test_other_schemes_are_a_config_error_naming_the_field(location, message):
    with pytest.raises(ConfigError, match=f"checkpoint_location.*{message}"):
        parse_deployment(local_deployment(BOOT, topics=["t"], checkpoint_location=location))
