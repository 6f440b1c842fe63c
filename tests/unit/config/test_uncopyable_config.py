"""distributor.on_uncopyable, dead_letter_topic and max_record_bytes in the deployment file."""

from __future__ import annotations

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.local.deployment import local_deployment

BOOTSTRAP = {"c1": "localhost:1", "c2": "localhost:2"}


def _parse(**distributor):
    return parse_deployment(local_deployment(BOOTSTRAP, topics=["orders"], distributor=distributor), "<test>")


def test_defaults_fail_on_an_uncopyable_record_with_the_target_topics_limit():
    dist = _parse().distributor
    assert (dist.on_uncopyable, dist.dead_letter_topic, dist.max_record_bytes) == ("fail", "treedist-dead-letter", None)


def test_an_unknown_policy_is_named():
    with pytest.raises(ConfigError, match="distributor.on_uncopyable"):
        _parse(on_uncopyable="drop")


def test_a_dead_letter_topic_that_topics_select_is_refused_naming_it():
    with pytest.raises(ConfigError, match="distributor.dead_letter_topic: 'orders' is selected by `topics` on cluster"):
        _parse(on_uncopyable="dead_letter", dead_letter_topic="orders")
    assert _parse(on_uncopyable="skip", dead_letter_topic="orders").distributor.on_uncopyable == "skip"
