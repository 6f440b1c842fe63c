"""The registry edge's pure checks (treedist.registry.guard).

Named invariants (property tests):
- DEPTH: `nesting_depth` of any JSON text equals the nesting of the value it encodes
  (brackets inside strings, escaped quotes included, do not count), and needs no recursion:
  a 100,000-deep document is measured without RecursionError.
- HOST: a Host header names its host whatever its port; loopback in all three spellings is
  allowed by default, nothing else is unless configured.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from treedist.registry.guard import allowed_hosts, host_name, json_media_type, nesting_depth

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\x', max_size=4), inner, max_size=3),
    max_leaves=20,
)


def depth_of(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


@given(json_values)
def test_depth_is_the_nesting_of_the_encoded_value(value):
    assert nesting_depth(json.dumps(value), limit=10_000) == depth_of(value)


def test_depth_of_a_huge_document_needs_no_recursion():
    text = "[" * 100_000 + "]" * 100_000
    assert nesting_depth(text, limit=200_000) == 100_000
    assert nesting_depth(text) == 65  # stops counting just past the limit


@given(name=st.sampled_from(["127.0.0.1", "localhost", "LOCALHOST", "[::1]"]), port=st.none() | st.integers(1, 65535))
def test_loopback_is_allowed_on_any_port(name, port):
    header = name if port is None else f"{name}:{port}"
    assert host_name(header) in allowed_hosts()


@given(port=st.none() | st.integers(1, 65535))
def test_other_names_only_when_configured(port):
    suffix = "" if port is None else f":{port}"
    for header in ("evil.example", "127.0.0.1.evil.example", "localhost.evil", "[::2]", "0.0.0.0"):
        assert host_name(header + suffix) not in allowed_hosts()
    assert host_name("registry.internal" + suffix) in allowed_hosts(["Registry.Internal:8081"])


def test_media_types():
    for ok in (None, "", "application/json", "application/vnd.schemaregistry.v1+json; charset=utf-8",
               "application/vnd.schemaregistry+json", "Application/Octet-Stream"):
        assert json_media_type(ok), ok
    for bad in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"):
        assert not json_media_type(bad), bad
