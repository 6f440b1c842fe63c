"""The client factory's pure parts: role settings merged once, an admin's settings."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from treedist.kafka import clients
from treedist.kafka.clients import (CONSUMER_DEFAULTS, CONSUMER_FIXED, PRODUCER_DEFAULTS, PRODUCER_FIXED,
                                    SettingConflict, admin_settings, merge, no_loss_producer_settings,
                                    replay_consumer_settings)
from treedist.spark.errors import SparkOptionError
from treedist.spark.options import consumer_settings

keys = st.sampled_from(["linger.ms", "fetch.wait.max.ms", "security.protocol", "client.id", "batch.size"])
user = st.dictionaries(keys, st.text("abc123", min_size=1, max_size=4), max_size=5)


@given(user)
def test_the_user_settings_win_over_the_defaults_and_the_fixed_ones_over_both(settings):
    merged = replay_consumer_settings({"bootstrap.servers": "h:1", **settings})
    assert merged["bootstrap.servers"] == "h:1"
    for key, value in settings.items():
        assert merged[key] == value
    for key, value in CONSUMER_FIXED.items():
        assert merged[key] == value
    for key, value in CONSUMER_DEFAULTS.items():
        assert merged[key] == settings.get(key, value)


@given(user)
def test_merging_twice_gives_the_same_settings(settings):
    once = no_loss_producer_settings(settings)
    assert no_loss_producer_settings(once) == once
    assert {k: once[k] for k in PRODUCER_FIXED} == PRODUCER_FIXED


def test_a_setting_against_the_role_names_the_key_and_an_alias_counts():
    with pytest.raises(SettingConflict, match="'enable.auto.commit'='true'"):
        replay_consumer_settings({"enable.auto.commit": "true"})
    with pytest.raises(SettingConflict, match="'request.required.acks'='1'"):
        no_loss_producer_settings({"request.required.acks": "1"})
    assert no_loss_producer_settings({"request.required.acks": "-1"})["acks"] == "all"
    # an alias replaces the default of the name it stands for
    merged = merge({"message.timeout.ms": "5000"}, PRODUCER_DEFAULTS, PRODUCER_FIXED)
    assert merged["message.timeout.ms"] == "5000" and "delivery.timeout.ms" not in merged


def test_the_spark_options_keep_their_own_error_naming_the_option():
    with pytest.raises(SparkOptionError, match="option 'kafka.enable.auto.commit'='true' conflicts"):
        consumer_settings({"bootstrap.servers": "h:1", "enable.auto.commit": "true"})


@given(st.dictionaries(st.sampled_from(sorted(clients.CONSUMER_ONLY | clients.PRODUCER_ONLY | clients.PYTHON_ONLY)
                                       + ["bootstrap.servers", "security.protocol", "linger.ms"]),
                       st.just("x"), max_size=8))
def test_an_admin_keeps_only_what_an_admin_takes(settings):
    kept = admin_settings(settings)
    assert set(kept) == set(settings) - clients.CONSUMER_ONLY - clients.PRODUCER_ONLY - clients.PYTHON_ONLY
    assert all(kept[k] == settings[k] for k in kept)


def test_a_producer_takes_the_python_only_setting_as_a_string():
    producer = clients.producer({"bootstrap.servers": "127.0.0.1:1", "delivery.report.only.error": "true"})
    assert producer.flush(0) == 0


@given(user, st.one_of(st.none(), st.sampled_from(["1", "1024", 4096])))
def test_a_lingering_consumer_batches_its_fetches_unless_the_cluster_set_fetch_min_bytes(settings, min_bytes):
    # LINGERING_BATCHES: a lingering task's consumer waits for 64 KiB or 50 ms per fetch; a
    # cluster whose `client` settings chose fetch.min.bytes keeps every setting of its own,
    # one that chose fetch.wait.max.ms keeps that.
    base = replay_consumer_settings({**settings, **({} if min_bytes is None else {"fetch.min.bytes": min_bytes})})
    lingering = clients.lingering_consumer_settings(base)
    if min_bytes is None:
        own_wait = "fetch.wait.max.ms" in settings and settings["fetch.wait.max.ms"] != "100"
        assert lingering == {**base, **clients.LINGERING_CONSUMER,
                             **({"fetch.wait.max.ms": settings["fetch.wait.max.ms"]} if own_wait else {})}
    else:
        assert lingering == base
    assert {k: lingering[k] for k in CONSUMER_FIXED} == CONSUMER_FIXED
    assert clients.lingering_consumer_settings(lingering) == lingering
