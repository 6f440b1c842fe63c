"""`treedist config set` paths and values (treedist.control.live.set_values), pure."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from treedist.config import ConfigError, parse_deployment
from treedist.control.errors import ControlError
from treedist.control.live import set_values

SPEC = {
    "clusters": {"c1": {"bootstrap_servers": "a:1", "client": {"sasl.mechanism": "PLAIN"}},
                 "c2": {"bootstrap_servers": "b:1"}, "c3": {"bootstrap_servers": "c:1"}, "c4": {"bootstrap_servers": "d:1"}},
    "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}]},
    "topics": {"names": ["orders"]},
    "targets": [],
}


def test_a_target_switch_on_a_list_of_overrides_becomes_the_mapping_form_and_validates():
    spec = set_values(SPEC, ["targets.overrides=[{cluster: c1, level: 3, target: c4}]"])
    assert spec["targets"] == {"overrides": [{"cluster": "c1", "level": 3, "target": "c4"}]}
    deployment = parse_deployment(spec)
    assert {d.name: d.target for d in deployment.topology().all_distributors()}["c1-L3"] == "c4"
    assert SPEC["targets"] == []  # the input is not changed


def test_scalars_nested_keys_dotted_keys_list_items_and_removal():
    spec = set_values(SPEC, [
        "distributor.trigger_interval=500 milliseconds",
        "clusters.c1.client.sasl.mechanism=SCRAM-SHA-512",
        "topics.names[1]=payments",
        "topics.names[0]=invoices",
        "clusters.c2.client=",
    ])
    assert spec["distributor"] == {"trigger_interval": "500 milliseconds"}
    assert spec["clusters"]["c1"]["client"] == {"sasl.mechanism": "SCRAM-SHA-512"}  # one key with dots, not a path
    assert spec["topics"]["names"] == ["invoices", "payments"]
    assert "client" not in spec["clusters"]["c2"]


def test_an_invalid_change_is_refused_by_the_loader_naming_the_field():
    spec = set_values(SPEC, ["targets.overrides=[{cluster: c1, level: 3, target: c2}]"])  # c2 is not in c1's sibling subtree
    with pytest.raises(ConfigError) as err:
        parse_deployment(spec, source="etcd:/treedist/config")
    assert str(err.value).startswith("etcd:/treedist/config: targets")


@pytest.mark.parametrize("change, says", [
    ("distributor", "expected PATH=VALUE"),
    ("=3", "expected PATH=VALUE"),
    ("topics.names[5]=x", "topics.names[5]: names[5] does not exist"),
    ("topics.names.x=1", "is inside a list"),
    ("distributor.trigger_interval=[unclosed", "the value is not YAML"),
])
def test_malformed_changes_name_what_is_wrong(change, says):
    with pytest.raises(ControlError) as err:
        set_values(SPEC, [change])
    assert says in str(err.value)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.integers() | st.text(st.characters(categories=("L", "N", "P", "Zs")), max_size=5), max_size=4))
def test_invariant_setting_then_reading_gives_the_value_and_leaves_the_rest(values):
    spec = set_values(SPEC, [f"extra.{k}={json.dumps(v, ensure_ascii=False)}" for k, v in values.items()])  # JSON is YAML
    assert spec["extra"] == values if values else "extra" not in spec
    assert {k: v for k, v in spec.items() if k != "extra"} == SPEC


CONTROLLED = {**SPEC, "control": {"etcd": ["http://127.0.0.1:2379"]},
              "spark": {"conf": {"spark.sql.shuffle.partitions": "4", "spark.driver.extraJavaOptions": "-javaagent:/tmp/x.jar"}}}


def test_etcd_cannot_lift_the_spark_allow_list_only_the_local_files_flag_can():
    from treedist.control.keys import Keys
    from treedist.control.live import parse

    stored = json.loads(json.dumps(CONTROLLED))
    stored["control"]["allow_unsafe_spark_conf"] = True  # written into etcd by whoever can write it
    with pytest.raises(ConfigError) as err:
        parse(stored, Keys("/treedist"))  # a worker whose own file does not allow it
    assert "etcd:/treedist/config" in str(err.value) and "'spark.driver.extraJavaOptions'" in str(err.value)
    assert "control.allow_unsafe_spark_conf" in str(err.value)
    allowed = parse(stored, Keys("/treedist"), allow_unsafe_spark_conf=True)  # the worker's own file allows it
    assert allowed.spark.conf["spark.driver.extraJavaOptions"] == "-javaagent:/tmp/x.jar"


def test_etcd_cannot_make_a_worker_resolve_a_reference_its_own_file_neither_uses_nor_allows(monkeypatch, tmp_path):
    """Invariant: a live config resolves on a worker only the references of the worker's own
    file and of its `control.allowed_references` patterns (secrets.local_rule); any other is
    refused naming the field and the reference, never read."""
    from treedist.config.secrets import local_rule
    from treedist.control.keys import Keys
    from treedist.control.live import parse

    monkeypatch.setenv("TD_KAFKA_PW", "kafka-pw")
    monkeypatch.setenv("TD_OTHER", "other-secret")
    local = json.loads(json.dumps(CONTROLLED))
    local.pop("spark")
    local["clusters"]["c1"]["client"]["sasl.password"] = "${env:TD_KAFKA_PW}"
    assert parse(local, Keys("/treedist"), allowed=local_rule(local)).clusters["c1"].client  # its own: resolved
    planted = json.loads(json.dumps(local))
    planted["clusters"]["c1"]["client"]["sasl.password"] = "${env:TD_OTHER}"
    with pytest.raises(ConfigError) as err:
        parse(planted, Keys("/treedist"), allowed=local_rule(local))
    message = str(err.value)
    assert "clusters.c1.client.sasl.password" in message and "${env:TD_OTHER}" in message, message
    assert "control.allowed_references" in message and "other-secret" not in message, message
    secret_file = tmp_path / "kafka.pw"
    secret_file.write_text("from-a-file\n")
    planted["clusters"]["c1"]["client"]["sasl.password"] = "${file:%s}" % secret_file
    rule = local_rule(local, ["${env:TD_O*}", "${file:%s/*}" % tmp_path])
    assert parse(planted, Keys("/treedist"), allowed=rule).clusters["c1"].client  # matched by a pattern
    planted["clusters"]["c1"]["client"]["sasl.password"] = "${file:/etc/hostname}"
    with pytest.raises(ConfigError, match=r"\$\{file:/etc/hostname\}"):
        parse(planted, Keys("/treedist"), allowed=rule)
