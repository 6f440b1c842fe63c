"""Fuzz targets of the schema registry (treedist.registry), called directly: `_schemas` records,
Avro schema parsing and normalising, request bodies and the rules behind each endpoint, and
the HTTP edge's pure checks. (The same bodies through the real HTTP server:
tests/fuzz/test_registry_http.py.)

Invariants:
- a `_schemas` record decodes to a Record or raises MalformedRecord (a RegistryError); a
  decoded record encodes and decodes back to the same record;
- any schema text parses to a ParsedSchema or raises InvalidSchema (422); normalising is
  idempotent (the stored text parses to itself, and so does the canonical form); an error
  never quotes a long schema back (at most `errors.short` of a reason);
- any request body, given to what the endpoint calls (`_schema_of`, register, lookup,
  compatibility, config, mode, versions), answers or raises a RegistryError, whose status is
  below 500;
- the edge's checks (nesting depth, Host, media type) take any text and never raise.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import budget, ran
from tests.unit.registry.schemas import V1, V2_OPTIONAL
from treedist.registry import errors, rules
from treedist.registry.avro import incompatibilities, parse
from treedist.registry.guard import MAX_DEPTH, host_name, json_media_type, nesting_depth
from treedist.registry.records import decode, encode
from treedist.registry.server import _references_of, _schema_of
from treedist.registry.state import RegistryState

# avro warns for every logical type it ignores (the fuzzer makes many)
pytestmark = pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType")

MARKER = "zqMARKERzq"  # put into schemas, keys and subjects, to find it quoted back

# -- JSON and Avro-shaped documents ---------------------------------------------------------

AVRO_TYPES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum", "array",
              "map", "fixed", "error", "Order", "ns.Order", "", "unknown"]
AVRO_KEYS = ["type", "name", "namespace", "fields", "symbols", "items", "values", "size", "default", "doc", "aliases",
             "order", "logicalType", "precision", "scale", "connect.name", MARKER]
names = st.one_of(st.sampled_from(["Order", "R", "a", "ns.R", "1bad", "", "a-b", "é", "f", "g"]),
                  st.text(alphabet=string.ascii_letters + "._-", max_size=6))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.floats(allow_nan=False, allow_infinity=False),
                         st.text(max_size=8), names, st.sampled_from(AVRO_TYPES))


def avro_like() -> st.SearchStrategy[object]:
    return st.recursive(
        st.one_of(st.sampled_from(AVRO_TYPES), json_scalars),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),  # a union, or junk
            st.fixed_dictionaries({"type": st.sampled_from(["record", "error"]), "name": names},
                                  optional={"fields": st.lists(st.fixed_dictionaries({"name": names, "type": inner},
                                                                                      optional={"default": inner}), max_size=4),
                                            "namespace": names, "doc": st.just(MARKER)}),
            st.fixed_dictionaries({"type": st.just("enum"), "name": names},
                                  optional={"symbols": st.lists(names, max_size=4), "default": names}),
            st.fixed_dictionaries({"type": st.sampled_from(["array", "map"])}, optional={"items": inner, "values": inner}),
            st.fixed_dictionaries({"type": st.just("fixed"), "name": names}, optional={"size": json_scalars}),
            st.fixed_dictionaries({"type": st.sampled_from(["int", "long", "bytes", "string", "fixed"])},
                                  optional={"logicalType": st.sampled_from(["date", "decimal", "uuid", "timestamp-millis", "x"]),
                                            "precision": json_scalars, "scale": json_scalars}),
            st.dictionaries(st.sampled_from(AVRO_KEYS), inner, max_size=4),
        ),
        max_leaves=12,
    )


def _dumps(value: object) -> str:
    return json.dumps(value, allow_nan=False)


schema_texts = st.one_of(
    avro_like().map(_dumps),
    st.text(max_size=60).map(lambda t: t + MARKER),
    st.integers(1, 3 * MAX_DEPTH).map(lambda n: '{"type":"array","items":' * n + '"int"' + "}" * n),
    st.integers(1, 3 * MAX_DEPTH).map(lambda n: "[" * n + '"int"' + "]" * n),
    st.tuples(avro_like().map(_dumps), st.integers(0, 40), st.sampled_from(["", "{", "}", "[", '"', ",", "\\", MARKER]))
    .map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:]),  # a near-valid text, broken once
)


def _no_echo(err: errors.RegistryError, *documents: object) -> None:
    """Below 500, and a bounded message: it may quote a short field (`errors.short`), never a
    whole long document of the request."""
    assert err.status < 500, (err.status, err.message)
    assert len(err.message) <= 600, err.message
    for document in documents:
        if isinstance(document, str) and len(document) > 130:
            assert document not in err.message, err.message


# -- `_schemas` records ---------------------------------------------------------------------

_KEYTYPES = ["SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "CONTEXT", "NOOP", "OTHER", None, 1]
schema_records = st.tuples(  # well-formed SCHEMA records, with a field or two fuzzed
    st.fixed_dictionaries({"keytype": st.just("SCHEMA"), "subject": names, "version": st.integers(-1, 2**31), "magic": st.just(1)}),
    st.fixed_dictionaries({"subject": names, "version": st.integers(-1, 2**31), "id": st.integers(-1, 2**31),
                           "schema": st.one_of(st.just(V1), schema_texts), "deleted": st.booleans()},
                          optional={"schemaType": st.sampled_from(["AVRO", "JSON"]), "references": st.lists(st.just({"name": "x"}), max_size=1),
                                    "metadata": json_scalars, "ruleSet": json_scalars}),
    st.sets(st.sampled_from(["subject", "version", "id", "schema", "deleted"]), max_size=1), json_scalars,
).map(lambda t: (_dumps(t[0]).encode(), _dumps({**t[1], **{k: t[3] for k in t[2]}}).encode()))
record_keys = st.one_of(
    st.binary(max_size=40),
    st.fixed_dictionaries({"keytype": st.sampled_from(_KEYTYPES)},
                          optional={"subject": st.one_of(st.none(), names, st.integers()), "version": json_scalars,
                                    "magic": st.integers(0, 2), "tenant": json_scalars, "context": json_scalars})
    .map(lambda d: _dumps(d).encode()),
)
record_values = st.one_of(
    st.none(), st.binary(max_size=40),
    st.fixed_dictionaries({}, optional={"subject": st.one_of(names, st.integers()), "version": json_scalars,
                                        "id": json_scalars, "schema": st.one_of(st.just(V1), json_scalars),
                                        "schemaType": json_scalars, "references": st.one_of(st.lists(json_scalars, max_size=2), json_scalars),
                                        "deleted": json_scalars, "compatibilityLevel": json_scalars, "mode": json_scalars,
                                        "metadata": json_scalars})
    .map(lambda d: _dumps(d).encode()),
)


@given(st.one_of(st.tuples(record_keys, record_values), schema_records))
@budget(2000)
def test_any_schemas_record_decodes_and_round_trips_or_is_a_malformed_record(raw):
    key, value = raw
    try:
        record = decode(key, value)
    except errors.MalformedRecord as err:
        ran("registry.records.decode", "malformed")
        assert isinstance(err, errors.RegistryError)
        return
    ran("registry.records.decode", type(record.key).__name__)
    again = decode(*encode(record))
    assert again == record
    RegistryState().apply(record)  # a decoded record folds into a state without raising


# -- Avro schemas ---------------------------------------------------------------------------


@given(schema_texts, st.booleans())
@budget(2500)
def test_any_schema_text_parses_idempotently_or_is_invalid_schema_without_echo(text, normalize):
    try:
        parsed = parse(text, "AVRO", normalize)
    except errors.InvalidSchema as err:
        ran("registry.avro.parse", "invalid")
        _no_echo(err, text)
        return
    ran("registry.avro.parse", "parsed")
    assert parse(parsed.text, "AVRO", normalize).text == parsed.text  # normalising is idempotent
    assert parse(parsed.canonical, "AVRO").canonical == parsed.canonical
    incompatibilities("FULL_TRANSITIVE", parsed, [parse(V1)])  # and compatibility takes it


# -- request bodies through the endpoints' rules --------------------------------------------

bodies = st.one_of(
    st.dictionaries(st.sampled_from(["schema", "schemaType", "references", "compatibility", "compatibilityLevel",
                                     "mode", "normalize", MARKER]),
                    st.one_of(schema_texts, json_scalars, st.lists(json_scalars, max_size=2),
                              st.dictionaries(st.text(max_size=4), json_scalars, max_size=2)), max_size=4),
    st.fixed_dictionaries({"schema": schema_texts}, optional={"schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "", "avro"])}),
)
versions = st.one_of(st.sampled_from(["latest", "-1", "1", "2", "0", "-2", "2147483648", "1e3", " 1", "", MARKER]),
                     st.integers(-3, 3).map(str), st.text(max_size=5))


def _state() -> RegistryState:
    state = RegistryState()
    for subject, text in (("orders-value", V1), ("orders-value", V2_OPTIONAL)):
        for record in rules.register(state, subject, text).records:
            state.apply(record)
    return state


@given(bodies, versions, st.sampled_from(["orders-value", "new-value", MARKER, ""]), st.booleans(), st.booleans())
@budget(2000)
def test_any_request_body_is_answered_or_a_registry_error_below_500_without_echo(body, version, subject, normalize, primary):
    state = _state()
    refused = None if primary else "read-only"
    outcomes = []
    for name, call in (
        ("register", lambda: rules.register(state, subject, *_schema_of(body), _references_of(body), normalize, refused)),
        ("lookup", lambda: rules.lookup(state, subject, *_schema_of(body), normalize)),
        ("compatibility", lambda: incompatibilities(rules.compatibility(state, subject), parse(*_schema_of(body)),
                                                    [parse(state.schemas[rules.get_version(state, subject, version).id].text)])),
        ("config", lambda: rules.set_config(state, subject, body.get("compatibility", body.get("compatibilityLevel")), refused)),
        ("mode", lambda: rules.set_mode(state, subject, body.get("mode"), refused)),
        ("version", lambda: rules.get_version(state, subject, version)),
        ("delete_version", lambda: rules.delete_version(state, subject, version, normalize, refused)),
    ):
        try:
            call()
            outcomes.append(name)
        except errors.RegistryError as err:
            _no_echo(err, body.get("schema"))
    ran("registry.rules.bodies", "answered" if outcomes else "all_refused")


# -- the edge's pure checks -----------------------------------------------------------------


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200), st.text(alphabet='[]{}"\\ ', max_size=400)),
       st.one_of(st.none(), st.text(max_size=40)), st.text(max_size=40))
@budget(2000)
def test_the_edge_checks_take_any_text(document, content_type, host):
    ran("registry.guard", "ok")
    assert nesting_depth(document) >= 0
    assert isinstance(json_media_type(content_type), bool)
    assert isinstance(host_name(host), str)
