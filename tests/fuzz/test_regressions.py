"""What the fuzz targets found, each as a plain test with the minimal input."""

from __future__ import annotations

import json
import os

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.errors import TreedistError
from treedist.topology import TopologyError
from treedist.topology.flags import MalformedFlags, parse_flags
from treedist.topology.origin import MalformedOrigin, Origin


def test_an_empty_copy_flag_header_is_a_topology_error():
    # found by test_any_copy_flag_header_...: MalformedFlags was a bare ValueError, outside
    # the package's root error (so the CLI's exit 2 and callers catching TreedistError missed it)
    with pytest.raises(MalformedFlags) as caught:
        parse_flags(b"")
    assert isinstance(caught.value, TopologyError) and isinstance(caught.value, TreedistError)
    assert isinstance(caught.value, ValueError)  # what older callers catch


def test_an_empty_origin_header_is_a_topology_error():
    # the same for the origin header, found alongside
    with pytest.raises(MalformedOrigin) as caught:
        Origin.decode(b"")
    assert isinstance(caught.value, TopologyError) and isinstance(caught.value, ValueError)


@pytest.mark.timeout(30, method="thread")
def test_a_file_reference_to_a_fifo_is_a_config_error_not_a_hang(tmp_path):
    # found by test_a_mutated_deployment_...: `${file:<a FIFO nobody writes to>}` blocked the
    # loader forever in open(); now only a regular file is read
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    raw = {"clusters": {"a": {"bootstrap_servers": "${file:" + str(fifo) + "}"}}, "topics": {"names": ["t"]},
           "tree": {"level": 1, "children": ["a"]}}
    with pytest.raises(ConfigError, match="not a regular file"):
        parse_deployment(raw, source="d.yaml")


def test_a_key_with_a_line_break_gives_a_one_line_config_error():
    # found by test_a_mutated_deployment_...: {'clusters': {'\n': None}} printed a two-line
    # error (the CLI's contract is one line, exit 2); ConfigError now escapes line breaks
    with pytest.raises(ConfigError) as caught:
        parse_deployment({"clusters": {"\n": None}}, source="d.yaml")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("d.yaml: clusters.\\n")


def test_invalid_yaml_is_a_one_line_config_error_with_line_and_column(tmp_path):
    # found by test_any_file_bytes_...: PyYAML's message spans lines (with excerpts)
    from treedist.config import load_deployment

    path = tmp_path / "d.yaml"
    path.write_text("clusters:\n  a: b\n c: [\n")
    with pytest.raises(ConfigError) as caught:
        load_deployment(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: not valid YAML: ") and "line 3, column 2" in message


# -- registry -------------------------------------------------------------------------------


def test_a_deeply_nested_schemas_record_is_a_malformed_record_not_a_recursion_error():
    # found by the issue 34 audit (not by the fuzzer: hypothesis does not build 100,000
    # levels): json.loads raised RecursionError, which stopped the store's reader for good
    from treedist.registry.errors import MalformedRecord
    from treedist.registry.records import decode

    key = b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    value = b'{"subject":"s","version":1,"id":1,"schema":"\\"int\\"","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(MalformedRecord, match="value is nested too deeply to decode$"):
        decode(key, value)
    with pytest.raises(MalformedRecord, match="key is nested too deeply to decode$"):
        decode(b"[" * 100_000 + b"]" * 100_000, value)


@pytest.mark.parametrize("levels", [65, 500, 20_000])
def test_a_schemas_record_whose_schema_nests_past_the_http_limit_is_a_malformed_record(levels):
    # found by the issue 34 audit (by review): the HTTP API refuses such a schema (422), but
    # through `_schemas` (any producer, or a copy of a Confluent registry's topic) the store
    # took it: from ~450 levels every registration and lookup under its subject raised
    # RecursionError in the Avro parser (a 422 for any schema), and GET /schemas/ids/N served
    # it to the clients' deserializers (fastavro: RecursionError from ~1,000 levels)
    from treedist.registry.errors import MalformedRecord
    from treedist.registry.guard import MAX_DEPTH
    from treedist.registry.records import decode

    schema = '{"type":"array","items":' * levels + '"int"' + "}" * levels
    key = b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    value = json.dumps({"subject": "s", "version": 1, "id": 1, "schema": schema}).encode()
    with pytest.raises(MalformedRecord, match=f"schema nests deeper than {MAX_DEPTH} levels"):
        decode(key, value)


def test_a_schemas_value_that_decodes_but_cannot_be_encoded_again_is_a_malformed_record():
    # found alongside (by review): json.loads and json.dumps each take a stack frame per level;
    # a `metadata` nested just under json.loads' limit (~990 levels at the top of a stack)
    # decoded, and the distributor's json.dumps of the value's fields (`raw`), a few frames
    # deeper in the same Spark batch, raised RecursionError: the batch failed at every replay
    # and the distributor stopped after its restarts. A producer to the primary's `_schemas`
    # writing values of 970 to 990 levels hits that window
    from treedist.registry.errors import MalformedRecord
    from treedist.registry.guard import MAX_DEPTH
    from treedist.registry.records import decode

    key = b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    value = b'{"subject":"s","version":1,"id":1,"schema":"\\"int\\"","metadata":' + b"[" * 900 + b"]" * 900 + b"}"
    with pytest.raises(MalformedRecord, match=f"value nests deeper than {MAX_DEPTH} levels"):
        decode(key, value)


def test_a_schema_type_that_is_not_a_string_is_422_not_a_type_error():
    # found by test_any_request_body_...: {"schema": ..., "schemaType": [0]} reached the
    # lru_cache of avro.parse (unhashable list): a TypeError, a 500 over HTTP
    from treedist.registry import errors
    from treedist.registry.server import _schema_of

    with pytest.raises(errors.InvalidSchema, match="schemaType"):
        _schema_of({"schema": '"int"', "schemaType": [0]})


def test_references_that_are_not_a_list_of_objects_are_422_not_a_type_error():
    # found alongside: {"references": 1} made tuple(1) raise TypeError (a 500)
    from treedist.registry import errors
    from treedist.registry.server import _references_of

    for bad in (1, "x", [1], {"a": 1}):
        with pytest.raises(errors.InvalidSchema, match="references"):
            _references_of({"schema": '"int"', "references": bad})
    assert _references_of({"references": None}) == () and _references_of({"references": [{"name": "x"}]}) == ({"name": "x"},)


def test_a_long_schema_type_is_not_quoted_whole():
    from treedist.registry import errors
    from treedist.registry.avro import parse

    with pytest.raises(errors.InvalidSchema) as caught:
        parse('"int"', "X" * 5000)
    assert len(caught.value.message) < 300


@pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType")
def test_the_canonical_form_of_a_logical_primitive_is_idempotent():
    # found by test_any_schema_text_...: avro's canonical form of {"type":"int","logicalType":"date"}
    # was {"type":"int"}, whose canonical form is "int"
    from treedist.registry.avro import parse

    parsed = parse('{"type": "int", "logicalType": "date"}', "AVRO", True)
    assert parsed.text == parsed.canonical == '"int"'
    assert parse(parsed.text, "AVRO", True).text == parsed.text


def test_an_error_type_schema_is_incompatible_not_a_500():
    # found by test_any_schema_text_...: avro's compatibility checker raised
    # AvroRuntimeException("Unknown schema type: error") out of a registration
    from treedist.registry.avro import incompatibilities, parse

    error_type = parse('{"type": "error", "name": "Order", "fields": []}')
    problems = incompatibilities("BACKWARD", error_type, [parse('{"type": "record", "name": "Order", "fields": []}')])
    assert problems and "cannot be checked" in problems[0]
