"""Fuzzing the registry through its real HTTP server (uvicorn, httpx) on the shared local
brokers, with a small, fixed number of requests: the same bodies as tests/fuzz/test_registry.py
plus methods, paths, media types, Host headers and raw bytes.

Invariant: every request is answered (no hang: httpx's timeout and the fuzz hang guard) with a
status below 500 and, for an error, Confluent's JSON body `{"error_code", "message"}`; the
answer never quotes a long schema of the request back; the registry keeps serving (a known
schema registers after the run).
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import budget, ran
from tests.fuzz.test_registry import MARKER, bodies, names, schema_texts, versions
from tests.unit.registry.schemas import V1
from treedist.registry.guard import MAX_DEPTH
from treedist.registry.serve import RegistryServer
from treedist.registry.server import Role
from treedist.registry.store import KafkaStore

pytestmark = pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType")

REQUESTS = 200  # the whole HTTP budget: each input is one request (writes wait for Kafka's read-back)


@pytest.fixture(scope="module")
def registry(local_kafka):
    store = KafkaStore("c1", {"bootstrap.servers": local_kafka.bootstrap["c1"]}, f"_schemas-fuzz-{uuid.uuid4().hex[:8]}")
    server = RegistryServer(store, Role("c1", "c1"), hosts=("registry.internal",)).start()
    try:
        yield server
    finally:
        server.stop()


subjects = st.one_of(st.just("orders-value"), names, st.sampled_from(["orders-value", MARKER, "a/b", "..", "%2F", " ", "é"]))
# (method, path) pairs the API routes, writes first (they carry the bodies), plus any pair
ROUTES = [("POST", "/subjects/{s}/versions")] * 4 + [("POST", "/subjects/{s}")] * 2 + [
    ("POST", "/compatibility/subjects/{s}/versions/{v}"), ("POST", "/compatibility/subjects/{s}/versions"),
    ("PUT", "/config"), ("PUT", "/config/{s}"), ("PUT", "/mode/{s}"), ("GET", "/subjects/{s}/versions/{v}"),
    ("GET", "/subjects/{s}/versions/{v}/schema"), ("GET", "/schemas/ids/{v}"), ("GET", "/subjects"),
    ("DELETE", "/subjects/{s}/versions/{v}"), ("DELETE", "/subjects/{s}"), ("DELETE", "/config/{s}"),
]
routes = st.one_of(
    st.sampled_from(ROUTES), st.sampled_from(ROUTES), st.sampled_from(ROUTES),
    st.tuples(st.sampled_from(["POST", "PUT", "GET", "DELETE", "PATCH"]),
              st.sampled_from(["/", "/health", "/nowhere", "/mode", "/schemas/types"] + [path for _, path in ROUTES])),
)
requests_to = st.tuples(routes, subjects, versions).map(
    lambda t: (t[0][0], t[0][1].format(s=quote(t[1], safe=""), v=quote(t[2], safe=""))))
queries = st.dictionaries(st.sampled_from(["normalize", "permanent", "deleted", "verbose", "defaultToGlobal", "subjectPrefix"]),
                          st.sampled_from(["true", "false", "", MARKER]), max_size=2)
content_types = st.sampled_from([None, "application/vnd.schemaregistry.v1+json", "application/json", "application/vnd.schemaregistry.v1+json", "application/json; charset=utf-8",
                                 "application/octet-stream", "text/plain", "application/x-www-form-urlencoded", "", ";;", "\x7f"])
hosts = st.one_of(st.none(), st.none(), st.none(),  # mostly a Host it serves, to reach the handlers
                  st.sampled_from(["registry.internal", "evil.example", "localhost:1", "[::1]", ""]))
raw_bodies = st.one_of(
    bodies.map(lambda b: json.dumps(b).encode()),
    st.binary(max_size=200),
    st.integers(MAX_DEPTH - 2, 3 * MAX_DEPTH).map(lambda n: ("[" * n + "]" * n).encode()),
    schema_texts.map(lambda t: json.dumps({"schema": t}).encode()),
)


@given(requests_to, queries, content_types, hosts, raw_bodies)
@budget(REQUESTS, deadline=None)  # a write waits for its read-back from Kafka: no per-input deadline here
def test_any_request_is_answered_below_500_with_a_json_error_and_no_echo(registry, request_to, query, content_type, host, body):
    method, path = request_to
    headers = {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if host is not None:
        headers["Host"] = host
    send = body if method in ("POST", "PUT") else None
    answer = httpx.request(method, registry.url + path, params=query, headers=headers, content=send, timeout=30)
    ran("registry.http", str(answer.status_code))
    assert answer.status_code < 500, (answer.status_code, answer.text[:300])
    if answer.status_code >= 400:
        error = answer.json()
        assert isinstance(error.get("error_code"), int) and isinstance(error.get("message"), str), answer.text[:300]
        assert len(error["message"]) <= 600, error["message"][:300]
        if len(body) > 130:
            assert body.decode("utf-8", "replace") not in answer.text


def test_the_registry_still_serves_after_the_fuzz(registry):
    # runs after the fuzz target (file order): nothing it sent broke the server (the global
    # mode and config it may have set are dropped first)
    for path in ("/mode", "/config"):
        assert httpx.delete(registry.url + path, timeout=30).status_code == 200
    answer = httpx.post(f"{registry.url}/subjects/fuzz-after-value/versions", content=json.dumps({"schema": V1}),
                        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}, timeout=30)
    assert answer.status_code == 200 and isinstance(answer.json()["id"], int)
