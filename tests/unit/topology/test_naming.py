"""Property tests of the naming protocol (treedist.topology.naming) over random formats.

Each test name states the invariant it checks. The oracle for rendering is Python's own
str.format, independent of the prefix/suffix parsing under test.
"""

from __future__ import annotations

import pickle
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from treedist.topology import Naming, NamingError, TopicFormat, TopologyError, is_valid_topic
from treedist.topology.naming import MAX_TOPIC_LENGTH, parse_template

CORE = settings(max_examples=200, deadline=None)
PROPS = settings(deadline=None)

TOPIC_CHARS = string.ascii_letters + string.digits + "._-"
# Characters a broker would reject, to build names that must never fit (nor crash anything).
BAD_CHARS = " /{}:+*@#\u00e9\n"

topic_text = st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=40)
logical_topics = topic_text.filter(lambda t: t not in (".", ".."))
var_values = st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=12)
var_names = st.sampled_from(["tenant", "instance", "environment", "env", "region", "dc", "team", "v_1"])
separators = st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=3)


@st.composite
def formats(draw) -> tuple[str, dict[str, str]]:
    """A valid (topic_format, vars): distinct vars and {topic} in random order, a non-empty
    separator between neighbours, optional literal text at either end."""
    names = draw(st.lists(var_names, unique=True, max_size=4))
    placeholders = list(names)
    placeholders.insert(draw(st.integers(0, len(names))), "topic")
    parts = [draw(st.one_of(st.just(""), separators))]
    for i, name in enumerate(placeholders):
        parts.append("{" + name + "}")
        parts.append(draw(separators) if i < len(placeholders) - 1 else draw(st.one_of(st.just(""), separators)))
    return "".join(parts), {n: draw(var_values) for n in names}


@st.composite
def namings(draw, min_clusters: int = 2, max_clusters: int = 5) -> tuple[Naming, dict[str, tuple[str, dict]]]:
    count = draw(st.integers(min_clusters, max_clusters))
    specs = {f"c{i}": draw(st.one_of(st.just(("{topic}", {})), formats())) for i in range(count)}
    return Naming.parse(specs), specs


def render(text: str, vars: dict[str, str], topic: str) -> str:
    """The oracle: Python's str.format."""
    return text.format(topic=topic, **vars)


# --- one cluster's format ------------------------------------------------------------------


@CORE
@given(formats(), logical_topics)
def test_logical_of_physical_is_the_logical_name_for_every_valid_logical_topic(fmt, topic):
    """logical(physical(t)) == t, and physical(t) is what str.format renders."""
    text, vars = fmt
    tf = TopicFormat.parse(text, vars)
    assume(len(topic) <= tf.max_logical_length)
    physical = tf.physical(topic)
    assert physical == render(text, vars, topic)
    assert is_valid_topic(physical)
    assert tf.logical(physical) == topic


@CORE
@given(formats(), st.data())
def test_physical_of_logical_is_the_physical_name_for_every_name_that_fits(fmt, data):
    """physical(logical(p)) == p for every physical p that fits (p drawn near the format too)."""
    text, vars = fmt
    tf = TopicFormat.parse(text, vars)
    near = tf.prefix + data.draw(st.text(alphabet=TOPIC_CHARS, max_size=20)) + tf.suffix
    for p in (near, data.draw(topic_text), tf.prefix + tf.suffix, tf.prefix + tf.prefix + "x" + tf.suffix):
        logical = tf.logical(p)
        if logical is not None:
            assert tf.physical(logical) == p
            assert tf.fits(p)


@CORE
@given(formats(), st.text(alphabet=TOPIC_CHARS + BAD_CHARS, max_size=300))
def test_a_name_that_does_not_fit_yields_none_and_never_raises(fmt, name):
    """Any string at all: logical() returns None, or a valid logical name that maps back to it.
    It fits iff it is a valid topic name with the exact prefix and suffix and a non-empty valid
    topic name between them."""
    text, vars = fmt
    tf = TopicFormat.parse(text, vars)
    for candidate in (name, tf.prefix + name, name + tf.suffix, tf.prefix + name + tf.suffix):
        middle = candidate[len(tf.prefix) : len(candidate) - len(tf.suffix)]
        expected = (
            is_valid_topic(candidate)
            and len(candidate) > len(tf.prefix) + len(tf.suffix)
            and candidate.startswith(tf.prefix)
            and candidate.endswith(tf.suffix)
            and is_valid_topic(middle)
        )
        assert tf.fits(candidate) is expected
    logical = tf.logical(name)
    if logical is None:
        assert not tf.fits(name)
    else:
        assert is_valid_topic(name) and is_valid_topic(logical)
        assert name.startswith(tf.prefix) and name.endswith(tf.suffix)
        assert tf.physical(logical) == name


@PROPS
@given(formats(), st.one_of(st.none(), st.integers(), st.binary(), st.just(""), st.just("."), st.just("..")))
def test_non_names_do_not_fit_and_never_raise(fmt, name):
    tf = TopicFormat.parse(*fmt)
    assert tf.logical(name) is None


@PROPS
@given(formats(), logical_topics)
def test_physical_rejects_a_logical_name_with_no_legal_physical_name(fmt, topic):
    tf = TopicFormat.parse(*fmt)
    too_long = topic * (MAX_TOPIC_LENGTH // len(topic) + 1)
    with pytest.raises(NamingError, match="no legal physical name"):
        tf.physical(too_long)
    assert tf.physical_or_none(too_long) is None
    for bad in ("", ".", "..", "a b", "x/y"):
        assert tf.physical_or_none(bad) is None


def test_the_default_format_is_the_identity():
    tf = TopicFormat()
    assert tf.is_identity and tf == TopicFormat.parse("{topic}", {})
    assert tf.physical("orders") == "orders" and tf.logical("__consumer_offsets") == "__consumer_offsets"
    assert tf.logical("a" * 249) == "a" * 249 and tf.logical("a" * 250) is None


# --- the deployment's names ----------------------------------------------------------------


ISSUE_EXAMPLE = {
    "a": ("{tenant}-{instance}-{environment}-{topic}", {"tenant": "acme", "instance": "prod", "environment": "eu"}),
    "b": ("{tenant}-{environment}-{topic}", {"tenant": "acme", "environment": "eu"}),
    "plain": ("{topic}", {}),
}


def test_the_issue_example_acme_prod_eu_orders_is_acme_eu_orders_and_back():
    naming = Naming.parse(ISSUE_EXAMPLE)
    assert naming.logical("a", "acme-prod-eu-orders") == "orders"
    assert naming.translate("a", "acme-prod-eu-orders", "b") == "acme-eu-orders"
    assert naming.translate("b", "acme-eu-orders", "a") == "acme-prod-eu-orders"
    assert naming.translate("a", "acme-prod-eu-orders", "plain") == "orders"
    assert naming.physical("b", "orders") == "acme-eu-orders"
    # not ours: another tenant, another instance, a bare name
    for name in ("other-prod-eu-orders", "acme-test-eu-orders", "orders", "acme-prod-eu-"):
        assert naming.logical("a", name) is None
        assert naming.translate("a", name, "b") is None
    assert naming.translate_subject("a", "acme-prod-eu-orders-value", "b") == "acme-eu-orders-value"
    assert naming.translate_subject("b", "acme-eu-orders-key", "a") == "acme-prod-eu-orders-key"


@CORE
@given(namings(), st.data())
def test_translate_round_trips_between_any_two_clusters(case, data):
    """translate(b, translate(a, p, b), a) == p whenever p fits a and its name fits b; and
    translate is logical-then-physical."""
    naming, _specs = case
    a, b = data.draw(st.sampled_from(naming.clusters)), data.draw(st.sampled_from(naming.clusters))
    topic = data.draw(logical_topics)
    assume(len(topic) <= naming.format(a).max_logical_length)
    p = naming.physical(a, topic)
    there = naming.translate(a, p, b)
    if len(topic) <= naming.format(b).max_logical_length:
        assert there == naming.physical(b, topic)
        assert naming.logical(b, there) == topic
        assert naming.translate(b, there, a) == p
    else:
        assert there is None  # no legal name on b: not translated, not raised
    assert naming.translate(a, p, a) == p


@CORE
@given(namings(), st.data())
def test_translate_of_a_name_that_does_not_fit_is_none_and_never_raises(case, data):
    naming, _specs = case
    a, b = data.draw(st.sampled_from(naming.clusters)), data.draw(st.sampled_from(naming.clusters))
    name = data.draw(st.text(alphabet=TOPIC_CHARS + BAD_CHARS, max_size=300))
    result = naming.translate(a, name, b)
    if naming.logical(a, name) is None:
        assert result is None
    else:
        assert result is None or naming.translate(b, result, a) == name


@CORE
@given(namings(), st.data())
def test_topic_subjects_translate_through_the_logical_topic_and_others_pass_unchanged(case, data):
    naming, _specs = case
    a, b = data.draw(st.sampled_from(naming.clusters)), data.draw(st.sampled_from(naming.clusters))
    topic = data.draw(logical_topics)
    assume(len(topic) <= min(naming.format(c).max_logical_length for c in (a, b)))
    suffix = data.draw(st.sampled_from(["-key", "-value"]))
    subject = naming.physical(a, topic) + suffix
    moved = naming.translate_subject(a, subject, b)
    assert moved == naming.physical(b, topic) + suffix
    assert naming.translate_subject(b, moved, a) == subject
    other = data.draw(st.text(max_size=40).filter(lambda s: not s.endswith(("-key", "-value"))))
    assert naming.translate_subject(a, other, b) == other
    unfit = data.draw(st.text(alphabet=TOPIC_CHARS + BAD_CHARS, max_size=60)) + suffix
    if naming.logical(a, unfit[: -len(suffix)]) is None:
        assert naming.translate_subject(a, unfit, b) == unfit


@PROPS
@given(namings(min_clusters=1))
def test_naming_formats_and_errors_survive_pickling(case):
    """Executors receive them: pickling keeps equality and behaviour."""
    naming, _specs = case
    again = pickle.loads(pickle.dumps(naming))
    assert again == naming and again.clusters == naming.clusters
    for c in naming.clusters:
        assert again.format(c) == naming.format(c)
        assert again.physical(c, "t") == naming.physical(c, "t")
    err = NamingError("vars.tenant", "bad", "c2")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and (back.field, back.reason, back.cluster) == ("vars.tenant", "bad", "c2")


def test_an_unknown_cluster_is_a_naming_error():
    naming = Naming.parse(ISSUE_EXAMPLE)
    with pytest.raises(NamingError, match="clusters.zz"):
        naming.translate("a", "acme-prod-eu-orders", "zz")


# --- rejected formats ----------------------------------------------------------------------


REJECTED = [
    ("{topic}-{topic}", {}, "topic_format", "exactly once"),
    ("{tenant}-orders", {"tenant": "acme"}, "topic_format", "exactly once"),
    ("", {}, "topic_format", "exactly once"),
    ("{tenant}{topic}", {"tenant": "acme"}, "topic_format", "adjacent"),
    ("{topic}{tenant}", {"tenant": "acme"}, "topic_format", "adjacent"),
    ("{tenant}{env}-{topic}", {"tenant": "acme", "env": "eu"}, "topic_format", "adjacent"),
    ("{topic", {}, "topic_format", "braces"),
    ("topic}", {}, "topic_format", "braces"),
    ("{{topic}}", {}, "topic_format", "braces"),
    ("{ten{ant}-{topic}", {}, "topic_format", "braces"),
    ("{}-{topic}", {}, "topic_format", "not a name"),
    ("{topic!r}", {}, "topic_format", "not a name"),
    ("{topic:>9}", {}, "topic_format", "not a name"),
    ("acme {topic}", {}, "topic_format", "not allowed in topic names"),
    ("acme/{topic}", {}, "topic_format", "not allowed in topic names"),
    ("{tenant}-{topic}", {}, "vars", "no value for placeholder(s) {tenant}"),
    ("{tenant}-{env}-{topic}", {"env": "eu"}, "vars", "{tenant}"),
    ("{topic}", {"tenant": "acme"}, "vars.tenant", "unknown var 'tenant'"),
    ("{tenant}-{topic}", {"tenant": "acme", "topic": "x"}, "vars.topic", "logical topic name"),
    ("{tenant}-{topic}", {"tenant": ""}, "vars.tenant", "non-empty"),
    ("{tenant}-{topic}", {"tenant": "ac me"}, "vars.tenant", "[A-Za-z0-9._-]"),
    ("{tenant}-{topic}", {"tenant": "a/b"}, "vars.tenant", "[A-Za-z0-9._-]"),
    ("{tenant}-{topic}", {"tenant": "x" * 248}, "topic_format", "at most 249"),
]


@pytest.mark.parametrize("text, vars, field, reason", REJECTED, ids=[f"{i}:{r[0]}" for i, r in enumerate(REJECTED)])
def test_every_rejected_format_names_the_cluster_and_the_field(text, vars, field, reason):
    with pytest.raises(NamingError) as info:
        Naming.parse({"ok": ("{topic}", {}), "c2": (text, vars)})
    err = info.value
    assert isinstance(err, TopologyError)
    assert (err.cluster, err.field) == ("c2", field)
    assert str(err).startswith(f"clusters.c2.{field}: ")
    assert reason in str(err)


@PROPS
@given(formats(), st.data())
def test_any_format_with_two_adjacent_placeholders_is_rejected(fmt, data):
    text, vars = fmt
    name = data.draw(var_names.filter(lambda n: n not in vars))
    at = data.draw(st.sampled_from([i for i, c in enumerate(text) if c == "{"] + [len(text)]))
    # directly before a placeholder, or directly after the last one if it ends the format
    if at == len(text) and not text.endswith("}"):
        at = text.index("{")
    bad = text[:at] + "{" + name + "}" + text[at:]
    with pytest.raises(NamingError, match="adjacent"):
        TopicFormat.parse(bad, {**vars, name: "x"})


@PROPS
@given(formats(), st.integers(min_value=2, max_value=4))
def test_any_format_without_exactly_one_topic_is_rejected(fmt, copies):
    text, vars = fmt
    without = text.replace("{topic}", "x")
    with pytest.raises(NamingError, match="exactly once"):
        TopicFormat.parse(without, vars)
    more = "-".join([text] + ["{topic}"] * (copies - 1))
    with pytest.raises(NamingError, match="exactly once"):
        parse_template(more)
