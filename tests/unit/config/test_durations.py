"""One duration type for every duration key of a deployment file.

Invariant "same forms everywhere": any spelling accepted by one duration key is accepted by
every other, with the same number of seconds (`trigger_interval` and `offsets.margin` used to
have parsers of their own: "100ms" passed load and failed when the queries started, "10
seconds" was refused as a margin)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.config import ConfigError, parse_deployment
from treedist.config.durations import parse_duration, spark_interval

BASE = {
    "clusters": {"a": {"bootstrap_servers": "127.0.0.1:1"}, "b": {"bootstrap_servers": "127.0.0.1:2"}},
    "tree": {"level": 1, "children": ["a", "b"]},
    "topics": {"names": ["t"]},
}
UNITS = {"ms": 0.001, "milliseconds": 0.001, "s": 1.0, "seconds": 1.0, "sec": 1.0, "m": 60.0, "minutes": 60.0}


def _with(trigger, margin, poll, sync):
    return parse_deployment({**BASE, "distributor": {"trigger_interval": trigger},
                             "offsets": {"margin": margin, "poll_interval": poll},
                             "topics": {"names": ["t"], "sync": {"interval": sync}}})


@given(number=st.integers(min_value=1, max_value=5000), unit=st.sampled_from(sorted(UNITS)), space=st.sampled_from(["", " "]))
def test_same_forms_everywhere(number, unit, space):
    text = f"{number}{space}{unit}"
    seconds = number * UNITS[unit]
    d = _with(text, text, text, text)
    assert d.distributor.trigger_interval == pytest.approx(seconds)
    assert d.offsets.margin == pytest.approx(seconds)
    assert d.offsets.poll_interval == pytest.approx(seconds)
    assert d.topics.sync.interval == pytest.approx(seconds)
    assert parse_duration(text) == pytest.approx(seconds)


def test_the_forms_the_issue_named():
    d = _with("100ms", "10 seconds", "1s", "10s")
    assert (d.distributor.trigger_interval, d.offsets.margin) == (pytest.approx(0.1), 10.0)
    assert spark_interval(d.distributor.trigger_interval) == "100 milliseconds"


def test_zero_only_where_it_means_something():
    d = _with(0, 0, "1s", "10s")  # run batches back to back; no margin
    assert (d.distributor.trigger_interval, d.offsets.margin) == (0.0, 0.0)
    with pytest.raises(ConfigError, match="offsets.poll_interval"):
        _with("1s", "1s", 0, "10s")


@pytest.mark.parametrize("bad", ["fast", "-1s", "10 parsecs", True, "nan s"])
def test_a_bad_trigger_interval_fails_at_load_naming_the_field(bad):
    with pytest.raises(ConfigError, match="distributor.trigger_interval"):
        _with(bad, "1s", "1s", "10s")


@given(number=st.integers(min_value=1, max_value=5000), unit=st.sampled_from(sorted(UNITS)))
def test_the_restart_budget_and_the_topic_refresh_take_the_same_forms(number, unit):
    text, seconds = f"{number}{unit}", number * UNITS[unit]
    d = parse_deployment({**BASE, "distributor": {
        "topic_refresh_seconds": text, "restarts": {"window": text, "backoff": text, "max_backoff": text}}})
    restarts = d.distributor.restarts
    assert (restarts.window, restarts.backoff, restarts.max_backoff) == (pytest.approx(seconds),) * 3
    assert d.distributor.topic_refresh_seconds == pytest.approx(seconds)


@pytest.mark.parametrize("field", ["window", "backoff", "max_backoff"])
def test_a_bad_restart_duration_fails_at_load_naming_the_field(field):
    with pytest.raises(ConfigError, match=f"distributor.restarts.{field}"):
        parse_deployment({**BASE, "distributor": {"restarts": {field: "soon"}}})
