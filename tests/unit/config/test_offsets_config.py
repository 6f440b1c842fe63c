"""The `offsets:` section: defaults, durations, group selection, errors naming the field."""

from __future__ import annotations

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.config.offsets import GroupSelection, parse_duration_s
from treedist.local.deployment import local_deployment

BOOT = {"c1": "127.0.0.1:1", "c2": "127.0.0.1:2", "c3": "127.0.0.1:3", "c4": "127.0.0.1:4"}


def test_defaults_are_the_issues():
    offsets = parse_deployment(local_deployment(BOOT)).offsets
    assert (offsets.enabled, offsets.mode, offsets.margin, offsets.poll_interval) == (True, "timestamp", 60.0, 5.0)
    assert (offsets.groups.include, offsets.groups.exclude) == ((".*",), ())


def test_the_issues_yaml_loads():
    spec = local_deployment(BOOT, offsets={"enabled": True, "mode": "exact", "margin": "90s", "poll_interval": "500ms",
                                           "groups": {"include": ["orders-.*"], "exclude": ["orders-test"]}})
    offsets = parse_deployment(spec).offsets
    assert (offsets.mode, offsets.margin_ms, offsets.poll_interval) == ("exact", 90_000, 0.5)
    assert offsets.groups.selects("orders-app") and not offsets.groups.selects("orders-test")


@pytest.mark.parametrize("text, seconds", [("60s", 60.0), ("100ms", 0.1), ("2m", 120.0), ("1h", 3600.0), ("5", 5.0), (3, 3.0), ("1.5s", 1.5)])
def test_durations(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("field, value, message", [
    ("margin", "soon", "offsets.margin"),
    ("poll_interval", "0s", "offsets.poll_interval"),
    ("mode", "fuzzy", "offsets.mode"),
    ("groups", {"include": ["("]}, "offsets.groups.include"),
    ("margins", "1s", "offsets.margins"),
])
def test_errors_name_the_field(field, value, message):
    with pytest.raises(ConfigError, match=rf"<deployment>: {message}"):
        parse_deployment(local_deployment(BOOT, offsets={field: value}))


def test_treedists_own_groups_are_never_selected():
    assert not GroupSelection(include=(".*",)).selects("treedist-offsets-1234")
    assert not GroupSelection(include=("treedist-.*",)).selects("treedist-spark-source")
    assert GroupSelection().selects("billing")
