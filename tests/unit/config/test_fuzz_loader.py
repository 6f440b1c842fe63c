"""Fuzzing the deployment loader: any file content and any structure under the known keys
ends in a Deployment or a ConfigError naming the file; nothing else escapes, nothing hangs."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treedist.config import ConfigError, load_deployment, parse_deployment

KEYS = ["clusters", "tree", "topics", "targets", "distributor", "spark", "level", "children", "names", "regex",
        "exclude", "bootstrap_servers", "client", "topic_format", "vars", "c1", "c2", "failover", "after",
        "overrides", "cluster", "target", "restarts", "max_failures", "checkpoint_location", "copy_flags_header"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 70), st.floats(allow_nan=True),
                    st.text(alphabet=string.printable, max_size=12), st.sampled_from(["c1", "c2", "{topic}", "10s", ".*", "["]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)), max_leaves=25)
FUZZ = settings(max_examples=400, deadline=1000, suppress_health_check=[HealthCheck.too_slow])


@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=8))
@FUZZ
def test_any_structure_is_a_deployment_or_a_config_error_naming_the_source(raw):
    try:
        parse_deployment(raw, source="fuzz.yaml")
    except ConfigError as err:
        assert str(err).startswith("fuzz.yaml: ")


@given(st.text(alphabet=string.printable + "ä{}[]:&*!|>-", max_size=300))
@FUZZ
def test_any_file_content_is_a_deployment_or_a_config_error_naming_the_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "deploy.yaml"
    path.write_text(text)
    try:
        load_deployment(path)
    except ConfigError as err:
        assert str(err).startswith(f"{path}: ")


def test_an_unknown_key_with_a_line_breaking_character_is_named_on_one_line():
    # found by the fuzz run: str.splitlines breaks at \x1e, so the key's raw spelling split
    # `treedist topology show`'s one-line error in two
    import pytest

    for key in ("\x1e", "a\nb", "x\u2028y"):
        with pytest.raises(ConfigError) as err:
            parse_deployment({key: None}, "deploy.yaml")
        message = str(err.value)
        assert len(message.splitlines()) == 1 and message.startswith("deploy.yaml: "), message
        assert key.encode("unicode_escape").decode("ascii") in message


def test_an_unset_secret_under_a_line_breaking_key_is_named_on_one_line(monkeypatch):
    # found by tests/fuzz/test_config.py (2026-12-07): the secrets' message named the cluster
    # '\x1e' raw, and `treedist topology show` printed its one-line error as two
    import pytest

    monkeypatch.delenv("TREEDIST_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_deployment({"clusters": {"\x1e": "${env:TREEDIST_TEST_UNSET}"}}, "deploy.yaml")
    message = str(err.value)
    assert len(message.splitlines()) == 1 and message.startswith("deploy.yaml: clusters.\\x1e: "), message


@given(st.text(max_size=40))
def test_a_config_error_is_one_line_whatever_it_quotes(text):
    assert len(str(ConfigError(f"deploy.yaml: {text}")).splitlines()) == 1
