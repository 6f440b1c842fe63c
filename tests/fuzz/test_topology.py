"""Fuzz targets of the topology's parsers: the copy-flag header, commit metadata and topic name
formats. Their inputs come from any producer, any consumer group's commit, and the deployment.

Invariants, one per target (each test's name says which):
- origin header: any bytes decode to an Origin that re-encodes to itself, or raise
  MalformedOrigin (a TopologyError) naming the value;
- copy flags: any header bytes parse to flags in [0, 2**63) or raise MalformedFlags (a
  TopologyError) naming the value; encode/parse round-trips every flag value, and a parsed
  value re-encodes to its canonical form;
- commit metadata: any metadata (any object) is classified, never raises; a treedist commit's
  metadata re-encodes to itself; format/parse round-trips every CommitMetadata;
- name formats: any topic_format and vars build a TopicFormat or raise NamingError; a built
  format's logical/physical are inverse on every name, never raise for a name that does not
  fit, and translating a subject never raises.
"""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import budget, ran
from treedist.topology import Naming, NamingError, TopicFormat, TopologyError
from treedist.topology.flags import MAX_LEVEL, MalformedFlags, encode_flags, parse_flags
from treedist.topology.naming import is_valid_topic
from treedist.topology.offsets import METADATA_VERSION, CommitMetadata, MetadataKind, parse_commit_metadata
from treedist.topology.origin import MalformedOrigin, Origin

# -- copy flags -----------------------------------------------------------------------------

flag_bytes = st.one_of(
    st.binary(max_size=64),
    st.integers(-(2**70), 2**70).map(lambda n: str(n).encode()),
    st.lists(st.sampled_from([b"0", b"7", b"9", b" ", b"\t", b"\n", b"+", b"-", b"_", b"\xff", b"\xd9\xa3",
                              b"9223372036854775807", b"9223372036854775808", b"00000000000000000000"]),
             max_size=8).map(b"".join),
    st.text(max_size=24).map(lambda s: s.encode("utf-8", "surrogatepass")),
)


@given(flag_bytes)
@budget(3000)
def test_any_copy_flag_header_is_flags_below_2_63_or_a_malformed_flags_naming_it(value):
    try:
        flags = parse_flags(value)
    except MalformedFlags as err:
        ran("flags.parse", "rejected")
        assert isinstance(err, TopologyError), "MalformedFlags must derive from the package's root error"
        assert repr(value[:32]) in str(err)
        return
    ran("flags.parse", "parsed")
    assert isinstance(flags, int) and 0 <= flags < 1 << MAX_LEVEL
    assert parse_flags(encode_flags(flags)) == flags  # the canonical form parses back the same


@given(st.integers(0, (1 << MAX_LEVEL) - 1))
@budget(1000)
def test_copy_flags_round_trip_through_the_header(flags):
    ran("flags.round_trip", "ok")
    encoded = encode_flags(flags)
    assert encoded.isascii() and parse_flags(encoded) == flags


_ORIGIN_PARTS = [b"c1", b"t.x", b"7", b"-1", b"+3", b"1_0", b" 5", b"\xff", b"", b"99999999999999999999999", b"a/b", b"\xd9\xa3"]
origin_bytes = st.one_of(
    st.binary(max_size=64),
    st.lists(st.sampled_from(_ORIGIN_PARTS), min_size=3, max_size=5).map(b"/".join),
    st.lists(st.sampled_from([b"c1", b"/", b"t.x", b"7", b"-1", b"+3", b"1_0", b" ", b"\xff", b"", b"99999999999999999999999"]),
             max_size=10).map(b"".join),
)


@given(origin_bytes)
@budget(2000)
def test_any_origin_header_decodes_and_re_encodes_to_the_same_origin_or_is_malformed_origin(value):
    try:
        origin = Origin.decode(value)
    except MalformedOrigin as err:
        ran("origin.decode", "rejected")
        assert isinstance(err, TopologyError) and repr(value[:80]) in str(err)
        return
    ran("origin.decode", "decoded")
    assert Origin.decode(origin.encode()) == origin


# -- commit metadata ------------------------------------------------------------------------

CLUSTER_CHARS = string.ascii_letters + string.digits + "._-"
cluster_names = st.text(alphabet=CLUSTER_CHARS, min_size=1, max_size=12).filter(lambda c: c[0].isalnum())
naturals = st.integers(0, (1 << 62) - 1)
metadata_objects = st.builds(
    CommitMetadata,
    flags=st.integers(0, (1 << MAX_LEVEL) - 1),
    origin_ts_ms=naturals,
    frontier=st.one_of(st.none(), st.dictionaries(cluster_names, naturals, max_size=4).map(lambda d: tuple(sorted(d.items())))),
    made_ms=st.one_of(st.none(), naturals),
)
_PIECES = [METADATA_VERSION, "treedist", "treedist2", ";", "=", ",", ":", "flags", "ts", "at", "made", "0", "5",
           "99999999999999999999", "4611686018427387904", "-1", "c1", "c.2", "-x", "", " ", "\u0663", "\x00"]
metadata_texts = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(_PIECES), max_size=16).map("".join),
    metadata_objects.map(lambda m: m.encode()),
    st.tuples(metadata_objects.map(lambda m: m.encode()), st.integers(0, 80), st.text(max_size=6))
    .map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:]),  # a valid text with a splice
)


@given(st.one_of(metadata_texts, st.none(), st.integers(), st.binary(max_size=20)))
@budget(3000)
def test_any_commit_metadata_is_classified_never_raises_and_treedist_ones_re_encode_to_themselves(text):
    parsed = parse_commit_metadata(text)
    ran("offsets.parse_commit_metadata", parsed.kind.value)
    assert parsed.kind in MetadataKind
    if parsed.kind is MetadataKind.TREEDIST:
        assert parsed.metadata is not None and 0 <= parsed.flags < 1 << MAX_LEVEL
        again = parse_commit_metadata(parsed.metadata.encode())
        assert again.kind is MetadataKind.TREEDIST and again.metadata == parsed.metadata
    else:
        assert parsed.metadata is None and parsed.flags == 0
    if parsed.kind is MetadataKind.MALFORMED:
        assert parsed.reason and len(parsed.reason) < 200  # a bounded reason, never the whole text


@given(metadata_objects)
@budget(1000)
def test_commit_metadata_format_parse_round_trips(meta):
    ran("offsets.metadata_round_trip", "ok")
    parsed = parse_commit_metadata(meta.encode())
    assert parsed.kind is MetadataKind.TREEDIST and parsed.metadata == meta


# -- name formats ---------------------------------------------------------------------------

_FORMAT_PIECES = ["{topic}", "{tenant}", "{env}", "{", "}", "{}", "{{topic}}", "{1x}", "-", ".", "_", "a", "prod",
                  " ", "/", "é", "{topic", "topic}", "x" * 120]
format_texts = st.one_of(st.text(max_size=30), st.lists(st.sampled_from(_FORMAT_PIECES), max_size=8).map("".join))
var_keys = st.one_of(st.sampled_from(["tenant", "env", "topic", "x", ""]), st.text(max_size=6))
var_values = st.one_of(st.text(max_size=10), st.text(alphabet=CLUSTER_CHARS, min_size=1, max_size=150),
                       st.integers(), st.none(), st.booleans())
names = st.one_of(st.text(max_size=30), st.text(alphabet=CLUSTER_CHARS, max_size=260),
                  st.none(), st.integers(), st.sampled_from([".", "..", "-value", "x-key", "-key-value"]))




@st.composite
def near_valid_formats(draw) -> tuple[str, dict]:
    """Mostly well-formed: placeholders from a small set with separators between them, vars
    for most of them; the fuzz comes from the pieces (long, empty, bad characters)."""
    placeholders = draw(st.lists(st.sampled_from(["tenant", "env", "region"]), max_size=3))
    placeholders.insert(draw(st.integers(0, len(placeholders))), "topic")

    def sep() -> str:  # one in 16 is bad (empty, not a topic character, too long)
        if draw(st.integers(0, 15)) == 0:
            return draw(st.sampled_from(["", " ", "/", "{", "}", "{topic}", "x" * 130]))
        return draw(st.text(alphabet=CLUSTER_CHARS, min_size=1, max_size=3))

    text = (sep() if draw(st.booleans()) else "") + "".join("{" + p + "}" + sep() for p in placeholders)
    good_value = st.text(alphabet=CLUSTER_CHARS, min_size=1, max_size=8)
    vars = {p: draw(st.one_of(good_value, good_value, good_value, var_values))
            for p in placeholders if p != "topic" and draw(st.integers(0, 9)) > 0}
    if draw(st.integers(0, 4)) == 0:
        vars.update(draw(st.dictionaries(var_keys, var_values, max_size=1)))
    return text, vars


@given(st.one_of(near_valid_formats(),
                 st.tuples(st.one_of(format_texts, st.none(), st.integers()), st.dictionaries(var_keys, var_values, max_size=3))),
       st.lists(names, max_size=4))
@budget(2000)
def test_any_topic_format_builds_or_raises_naming_error_and_maps_names_both_ways(spec, probes):
    text, vars = spec
    try:
        fmt = TopicFormat.parse(text, vars)
    except NamingError as err:
        ran("naming.topic_format", "rejected")
        assert str(err).split(":", 1)[0].startswith(("topic_format", "vars"))
        return
    ran("naming.topic_format", "built")
    naming = Naming.of({"a": fmt, "b": TopicFormat()})
    for name in probes + [f"{fmt.prefix}{p}{fmt.suffix}" for p in probes if isinstance(p, str)]:
        physical = fmt.physical_or_none(name)
        if physical is not None:
            assert is_valid_topic(physical) and fmt.logical(physical) == name
        logical = fmt.logical(name)  # never raises, whatever the name
        if logical is not None:
            assert fmt.physical(logical) == name
        naming.translate("a", name, "b")
        naming.translate_subject("b", name, "a")
        if isinstance(name, str):
            naming.translate_subject("a", f"{name}-value", "b")
