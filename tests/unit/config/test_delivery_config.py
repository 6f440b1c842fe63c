"""distributor.delivery (issue 35) in the deployment file: the key and its two values are a
contract (`at_least_once | exactly_once`), the default is at_least_once (why: benchmarks/
RESULTS.md, "Which default"), and any other value is refused naming the file and the field."""

from __future__ import annotations

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.local.deployment import local_deployment
from treedist.records.transactions import AT_LEAST_ONCE, EXACTLY_ONCE

BOOTSTRAP = {"c1": "localhost:1", "c2": "localhost:2"}


def _parse(**distributor):
    return parse_deployment(local_deployment(BOOTSTRAP, topics=["orders"], distributor=distributor), "deploy.yaml")


def test_the_default_is_at_least_once():
    assert _parse().distributor.delivery == AT_LEAST_ONCE == "at_least_once"


def test_exactly_once_is_spelled_as_the_issue_spells_it():
    assert _parse(delivery="exactly_once").distributor.delivery == EXACTLY_ONCE == "exactly_once"
    assert _parse(delivery="at_least_once").distributor.delivery == "at_least_once"


@pytest.mark.parametrize("value", ["exactly-once", "EXACTLY_ONCE", "at_most_once", ""])
def test_another_value_is_refused_naming_the_file_field_and_the_values(value):
    with pytest.raises(ConfigError) as info:
        _parse(delivery=value)
    message = str(info.value)
    assert message.startswith("deploy.yaml: distributor.delivery: "), message
    assert "'at_least_once'" in message and "'exactly_once'" in message, message
