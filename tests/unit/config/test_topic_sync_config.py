"""`topics.sync` and the duration parser: defaults, spellings, and errors naming the field."""

from __future__ import annotations

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.config.durations import parse_duration
from treedist.local.deployment import local_deployment
from treedist.topics.reconcile import MM2_EXCLUDED_CONFIGS


def _deployment(sync: dict | None = None):
    spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["orders"])
    if sync is not None:
        spec["topics"]["sync"] = sync
    return parse_deployment(spec, source="deploy.yaml")


@pytest.mark.parametrize(
    "text, seconds",
    [(10, 10.0), (2.5, 2.5), ("10s", 10.0), ("10 seconds", 10.0), ("1 second", 1.0), ("500 ms", 0.5),
     ("250 milliseconds", 0.25), ("2m", 120.0), ("1.5 h", 5400.0), ("7", 7.0), (" 3 Sec ", 3.0)],
)
def test_durations_in_every_spelling(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "ten seconds", "5 parsecs", "0s", -1, 0, True, None, "1e309"])
def test_bad_durations_say_why(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_defaults_sync_on_every_10_s_first_cluster_authority_mm2_excludes():
    deployment = _deployment()
    sync = deployment.topics.sync
    assert (sync.enabled, sync.interval, sync.delete, sync.replication_factor) == (True, 10.0, False, {})
    assert deployment.sync_authority() == "c1"
    assert sync.excluded_configs() == frozenset(MM2_EXCLUDED_CONFIGS)


def test_every_key_spelled_out():
    deployment = _deployment({"enabled": False, "interval": "2 seconds", "delete": True, "authority": "c2",
                              "exclude_configs": ["retention.bytes"], "replication_factor": {"c2": 3}})
    sync = deployment.topics.sync
    assert (sync.enabled, sync.interval, sync.delete, sync.replication_factor) == (False, 2.0, True, {"c2": 3})
    assert deployment.sync_authority() == "c2"
    assert sync.excluded_configs() == frozenset(MM2_EXCLUDED_CONFIGS) | {"retention.bytes"}


@pytest.mark.parametrize(
    "sync, message",
    [
        ({"authority": "c9"}, "deploy.yaml: topics.sync.authority: unknown cluster 'c9'; known: ['c1', 'c2']"),
        ({"interval": "soon"}, "deploy.yaml: topics.sync.interval: 'soon' is not a duration"),
        ({"replication_factor": {"c7": 2}}, "deploy.yaml: topics.sync.replication_factor: unknown cluster 'c7'"),
        ({"replication_factor": {"c1": 0}}, "deploy.yaml: topics.sync.replication_factor.c1:"),
        ({"intervall": 5}, "deploy.yaml: topics.sync.intervall: Extra inputs are not permitted"),
    ],
)
def test_errors_name_the_file_and_the_field(sync, message):
    with pytest.raises(ConfigError) as err:
        _deployment(sync)
    assert message in str(err.value)
