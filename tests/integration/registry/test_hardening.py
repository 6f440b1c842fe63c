"""The registry's HTTP edge against bad input, over real HTTP (httpx) on a real registry
backed by the shared local brokers.

Invariants: a body over 1 MiB is 413 (declared or streamed); a POST/PUT body of a media type
that is not JSON is 415, every type Confluent's clients send is accepted; a Host outside
the allow-list is 421 on every path; a document nested past 64 levels is 422 (42201), never
a 500, and such a schema written to the `_schemas` topic is not applied; no error quotes the
request body back; a registry whose deployment names no primary refuses writes (42205) and
says READONLY."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.unit.registry.schemas import V1
from treedist.config import parse_deployment
from treedist.registry.guard import MAX_BODY_BYTES, MAX_DEPTH, nesting_depth
from treedist.registry.serve import RegistryServer, role_of, store_for

MARKER = "zq-body-marker-5e1"
JSON_TYPE = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture
def registry(start_registry, schemas_topic):
    return start_registry("c1", schemas_topic, hosts=("registry.internal",))


def _register(url: str, body: bytes | str, headers: dict | None = None, **kw) -> httpx.Response:
    return httpx.post(f"{url}/subjects/orders-value/versions", content=body, headers=headers or JSON_TYPE, timeout=30, **kw)


def _nested_records(levels: int) -> dict:
    schema: dict = {"type": "record", "name": "R0", "fields": [{"name": "x", "type": "string"}]}
    for i in range(1, levels):
        schema = {"type": "record", "name": f"R{i}", "fields": [{"name": f"f{i}", "type": schema}]}
    return schema


def test_a_body_over_one_mib_is_413_declared_or_streamed(registry):
    big = json.dumps({"schema": V1, "doc": MARKER + "x" * MAX_BODY_BYTES}).encode()
    declared = _register(registry.url, big)
    assert declared.status_code == 413 and MARKER not in declared.text

    def chunks():  # no Content-Length: chunked transfer, counted as it arrives
        for i in range(0, len(big), 65536):
            yield big[i:i + 65536]

    streamed = _register(registry.url, chunks())
    assert streamed.status_code == 413 and MARKER not in streamed.text
    assert _register(registry.url, json.dumps({"schema": V1})).status_code == 200  # still serving


def test_media_types_a_non_json_one_is_415_confluents_are_accepted(registry):
    body = json.dumps({"schema": V1})
    for bad in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        answer = _register(registry.url, body, {"Content-Type": bad})
        assert answer.status_code == 415 and answer.json()["error_code"] == 415, (bad, answer.text)
    put = httpx.put(f"{registry.url}/config", content='{"compatibility": "NONE"}', headers={"Content-Type": "text/plain"})
    assert put.status_code == 415
    for ok in ("application/json", "application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
               "application/octet-stream", "application/json; charset=utf-8"):
        answer = _register(registry.url, body, {"Content-Type": ok})
        assert answer.status_code == 200 and answer.json()["id"] == 1, (ok, answer.text)


def test_a_host_outside_the_allow_list_is_421_on_every_path(registry):
    port = registry.port
    for path in ("/subjects", "/no/such/path", "/mode"):
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.nip.io", "[::2]"):
            answer = httpx.get(f"{registry.url}{path}", headers={"Host": host})
            assert answer.status_code == 421, (path, host, answer.status_code)
    refused = _register(registry.url, json.dumps({"schema": V1}), {**JSON_TYPE, "Host": "evil.example"})
    assert refused.status_code == 421
    assert httpx.get(f"{registry.url}/subjects").json() == []  # nothing was registered by it
    for host in (f"localhost:{port}", "LOCALHOST", f"[::1]:{port}", "127.0.0.1", "registry.internal:443"):
        assert httpx.get(f"{registry.url}/subjects", headers={"Host": host}).status_code == 200, host


def test_nesting_past_the_limit_is_422_never_500(registry):
    deep_schema = "[" * 1000 + '"string"' + "]" * 1000
    for body in (json.dumps({"schema": deep_schema}),                          # the schema text
                 json.dumps({"schema": V1, "x": json.loads("[" * 200 + "]" * 200)}),  # the body itself
                 '{"schema": ' + "[" * 5000,                                    # deep and broken
                 json.dumps({"schema": json.dumps(_nested_records(40))})):      # a real, too-deep schema
        answer = _register(registry.url, body)
        assert answer.status_code == 422 and answer.json()["error_code"] == 42201, answer.text
    for path in ("/compatibility/subjects/orders-value/versions", "/subjects/orders-value"):
        answer = httpx.post(f"{registry.url}{path}", content=json.dumps({"schema": deep_schema}), headers=JSON_TYPE)
        assert answer.status_code == 422, (path, answer.text)
    levels = max(n for n in range(1, 40) if nesting_depth(json.dumps(_nested_records(n))) <= MAX_DEPTH)
    deepest_allowed = _register(registry.url, json.dumps({"schema": json.dumps(_nested_records(levels))}))
    assert deepest_allowed.status_code == 200, deepest_allowed.text


def test_no_error_quotes_the_body(registry):
    cases = [
        (_register, "not json " + MARKER, 400),
        (_register, json.dumps({"schema": "not json " + MARKER}), 422),
        (_register, json.dumps({"schema": json.dumps({"type": "record", "name": "A", "doc": MARKER, "fields": 3})}), 422),
        (_register, json.dumps([MARKER]), 422),
    ]
    for call, body, status in cases:
        answer = call(registry.url, body)
        assert answer.status_code == status and MARKER not in answer.text, (body, answer.text)
    level = httpx.put(f"{registry.url}/config", content=json.dumps({"compatibility": "x" * 500 + MARKER}), headers=JSON_TYPE)
    assert level.status_code == 422 and MARKER not in level.text and len(level.text) < 400


def test_a_registry_whose_deployment_names_no_primary_is_read_only(local_kafka, schemas_topic):
    deployment = parse_deployment({
        "clusters": {c: {"bootstrap_servers": local_kafka.bootstrap[c]} for c in ("c1", "c2")},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["t"]},
    })
    with RegistryServer(store_for(deployment, "c1", topic=schemas_topic), role_of(deployment, "c1")) as server:
        answer = _register(server.url, json.dumps({"schema": V1}))
        assert answer.status_code == 422 and answer.json()["error_code"] == 42205
        assert "schemas.primary" in answer.json()["message"]
        assert httpx.get(f"{server.url}/mode").json() == {"mode": "READONLY"}
        assert httpx.put(f"{server.url}/config", content='{"compatibility": "NONE"}', headers=JSON_TYPE).status_code == 422


def test_a_schema_past_the_limit_written_to_the_topic_is_skipped_and_its_subject_still_works(
        registry, local_kafka, schemas_topic):
    """Any producer may write `_schemas`: a SCHEMA record 1,000 levels deep there is not
    applied (listed in /health), the subject it names takes a registration, and its ID is
    not handed out again. Before, it was applied: registering under the subject was 422
    ("nests too deeply", the Avro parser's RecursionError on the stored schema) and
    GET /schemas/ids/7 served it."""
    from confluent_kafka import Producer

    deep = '{"type":"array","items":' * 1000 + '"int"' + "}" * 1000
    producer = Producer({"bootstrap.servers": local_kafka.bootstrap["c1"]})
    producer.produce(schemas_topic, partition=0,
                     key=b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
                     value=json.dumps({"subject": "orders-value", "version": 1, "id": 7, "schema": deep, "deleted": False}))
    assert producer.flush(30) == 0

    answer = _register(registry.url, json.dumps({"schema": V1}))  # read back after the record above
    assert answer.status_code == 200 and answer.json()["id"] == 8, answer.text
    assert httpx.get(f"{registry.url}/schemas/ids/7").status_code == 404
    [malformed] = httpx.get(f"{registry.url}/health").json()["malformed_records"]
    assert malformed.endswith(f"schema nests deeper than {MAX_DEPTH} levels (the registry's limit)")


def test_a_flood_of_malformed_records_is_counted_and_keeps_a_bounded_list(registry, local_kafka, schemas_topic):
    """1,000 records no registry can apply, written to the real topic by another producer:
    /health counts all of them and lists the last 10; the process keeps the last 100 only
    (before, every one stayed in memory for the life of the process)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": local_kafka.bootstrap["c1"], "linger.ms": 20})
    for i in range(1_000):
        producer.produce(schemas_topic, partition=0, key=b'{"keytype":"SCHEMA","subject":', value=f"{i}".encode())
    assert producer.flush(60) == 0

    answer = _register(registry.url, json.dumps({"schema": V1}))  # read back after the 1,000 above
    assert answer.status_code == 200, answer.text
    health = httpx.get(f"{registry.url}/health", timeout=30).json()
    assert health["malformed_total"] == 1_000
    # the last 10 (offset 0 is the store's own NOOP record)
    assert [m.split(":")[0] for m in health["malformed_records"]] == [f"offset {o}" for o in range(991, 1_001)]
    assert httpx.get(f"{registry.url}/subjects", timeout=30).json() == ["orders-value"]  # the reader went on
