"""How the store folds the `_schemas` records its reader hands it (KafkaStore._apply, the
reader thread's step for one record; no broker: the store is not started)."""

from __future__ import annotations

import logging

from treedist.registry import rules
from treedist.registry.guard import MAX_DEPTH
from treedist.registry.records import Record, SchemaKey, SchemaValue, encode
from treedist.registry.store import KafkaStore

from tests.unit.registry.schemas import V1
from tests.unit.registry.test_records import SCHEMA_KEY, nested_arrays, schema_value


def test_a_schema_past_the_depth_limit_is_skipped_and_logged_and_the_reader_goes_on(caplog):
    # Before: the store applied it; every registration and lookup under "s" then raised
    # RecursionError in the Avro parser (the API's 422 "nests too deeply" for any schema),
    # and GET /schemas/ids/1 served it to clients' deserializers.
    store = KafkaStore("c1", {})
    with caplog.at_level(logging.ERROR, logger="treedist.registry.store"):
        store._apply(0, SCHEMA_KEY, schema_value(nested_arrays(1_000), schema_id=9))
    store._apply(1, *encode(Record(SchemaKey("t", 1), SchemaValue("t", 1, 2, V1))))

    assert store.state.schemas.keys() == {2} and store.state.subject_names() == ["t"]
    assert store.health()["position"] == 2 and store.health()["reader"] == "running"
    why = f"schema nests deeper than {MAX_DEPTH} levels (the registry's limit)"
    assert list(store.malformed.last) == [f"offset 0: _schemas record with key {SCHEMA_KEY!r}: {why}"]
    assert [r.getMessage() for r in caplog.records] == [
        f"cluster 'c1' topic '_schemas': offset 0 not applied: _schemas record with key {SCHEMA_KEY!r}: {why}"]
    # "s" takes registrations (nothing deep is left to parse), and ID 9 is never handed out
    # for another schema (a Confluent registry may have given it to the deep one's producers)
    assert store.read(lambda state: rules.register(state, "s", '"string"')).answer == {"id": 10, "version": 1}


def test_a_flood_of_malformed_records_keeps_the_last_100_and_the_count_and_logs_once_per_100(caplog):
    # Before: every one was kept (a list that grew with the flood) and every one logged.
    store = KafkaStore("c1", {})
    with caplog.at_level(logging.ERROR, logger="treedist.registry.store"):
        for offset in range(1_050):
            store._apply(offset, b'{"keytype":"SCHEMA"', b"{}")  # a key that is not JSON
    store._apply(1_050, *encode(Record(SchemaKey("t", 1), SchemaValue("t", 1, 2, V1))))

    health = store.health()
    assert health["malformed_total"] == 1_050 and health["position"] == 1_051
    assert [m.split(":")[0] for m in health["malformed_records"]] == [f"offset {o}" for o in range(1_040, 1_050)]
    assert len(store.malformed.last) == 100 and store.malformed.last[0].startswith("offset 950:")
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 100 + 9  # each of the first 100, then the 200th, 300th, ... 1,000th
    assert "offset 999 not applied" in logged[-1] and "1000 malformed records in all" in logged[-1]
    assert store.state.subject_names() == ["t"]  # the reader went on
