"""MM2 settings -> a treedist deployment (treedist.mm2import.mapping): clients, credentials,
topics, groups, MM2's own settings, passive clusters and the one report."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.config import parse_deployment
from treedist.mm2import import Mm2ImportError, import_mm2

BASE = "clusters = a, b\na.bootstrap.servers = ka:9092\nb.bootstrap.servers = kb1:9092, kb2:9092\n"
BOTH_WAYS = "a->b.enabled = true\nb->a.enabled = true\n"
SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{pw}";'
PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="{pw}";'


def _import(text: str, **kw):
    return import_mm2(BASE + BOTH_WAYS + text, **kw)


def _unmapped(imported) -> dict[str, str]:
    return {u.setting: u.todo for u in imported.report.unmapped}


def _env(imported) -> dict[str, str]:
    return {name: "x" for name in imported.report.secrets.names}


def test_clusters_and_bootstrap_servers():
    imported = _import("")
    assert imported.spec["clusters"] == {"a": {"bootstrap_servers": "ka:9092"},
                                         "b": {"bootstrap_servers": "kb1:9092,kb2:9092"}}
    assert imported.spec["tree"] == {"level": 1, "children": ["a", "b"]}
    assert imported.passive == [] and imported.report.unmapped == []


def test_sasl_jaas_for_scram_and_plain_become_username_and_a_password_reference():
    imported = _import("security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n"
                       f"a.sasl.jaas.config = {SCRAM.format(pw='pw-of-a')}\n"
                       "b.sasl.mechanism = PLAIN\n"
                       f"b.sasl.jaas.config = {PLAIN.format(pw='pw-of-b')}\n")
    a, b = imported.spec["clusters"]["a"]["client"], imported.spec["clusters"]["b"]["client"]
    assert a == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                 "sasl.password": "${env:TREEDIST_A_SASL_PASSWORD}"}
    assert b["sasl.mechanism"] == "PLAIN" and b["sasl.username"] == "bob"
    assert b["sasl.password"] == "${env:TREEDIST_B_SASL_PASSWORD}"
    assert imported.report.secrets.names == {"TREEDIST_A_SASL_PASSWORD": "clusters.a.client.sasl.password",
                                             "TREEDIST_B_SASL_PASSWORD": "clusters.b.client.sasl.password"}
    text = imported.yaml() + imported.report.message()
    assert "pw-of-a" not in text and "pw-of-b" not in text


def test_the_references_resolve_from_the_environment_when_loaded(monkeypatch):
    imported = _import(f"a.security.protocol = SASL_PLAINTEXT\na.sasl.mechanism = PLAIN\n"
                       f"a.sasl.jaas.config = {PLAIN.format(pw='the-secret')}\n")
    monkeypatch.setenv("TREEDIST_A_SASL_PASSWORD", "the-secret")
    deployment = parse_deployment(imported.spec)
    assert deployment.cluster("a").client_config()["sasl.password"] == "the-secret"


@pytest.mark.parametrize("truststore, expected", [
    ("ssl.truststore.type = PEM\nssl.truststore.location = /etc/ca-bundle", {"ssl.ca.location": "/etc/ca-bundle"}),
    ("ssl.truststore.location = /etc/kafka/ca.crt", {"ssl.ca.location": "/etc/kafka/ca.crt"}),
    ("ssl.truststore.location = /etc/kafka/ca.pem\nssl.truststore.password = tpw", {"ssl.ca.location": "/etc/kafka/ca.pem"}),
])
def test_a_pem_truststore_becomes_the_ca_location(truststore, expected):
    imported = _import(f"security.protocol = SSL\n{truststore}\n")
    assert imported.spec["clusters"]["a"]["client"] == {"security.protocol": "SSL", **expected}
    assert "tpw" not in imported.yaml() + imported.report.message()


def test_a_jks_truststore_and_keystore_are_listed_with_how_to_convert_them_and_their_passwords_masked():
    imported = _import("a.security.protocol = SSL\na.ssl.truststore.location = /s/trust.jks\n"
                       "a.ssl.truststore.password = trust-pw\na.ssl.keystore.location = /s/key.jks\n"
                       "a.ssl.keystore.password = store-pw\na.ssl.key.password = key-pw\n")
    assert imported.spec["clusters"]["a"]["client"] == {"security.protocol": "SSL"}
    unmapped = _unmapped(imported)
    assert "keytool -exportcert -rfc" in unmapped["a.ssl.truststore.location"]
    assert "-deststoretype PKCS12" in unmapped["a.ssl.keystore.location"]
    assert {"a.ssl.truststore.password", "a.ssl.keystore.password", "a.ssl.key.password"} <= set(unmapped)
    message = imported.report.message()
    assert "a.ssl.key.password = ***" in message
    assert not re.search("trust-pw|store-pw|key-pw", message + imported.yaml())


def test_pem_and_pkcs12_keystores():
    pem = _import("a.ssl.keystore.type = PEM\na.ssl.keystore.location = /s/client.pem\na.ssl.key.password = kpw\n"
                  "b.ssl.keystore.location = /s/client.p12\nb.ssl.keystore.password = spw\n")
    assert pem.spec["clusters"]["a"]["client"] == {
        "ssl.key.location": "/s/client.pem", "ssl.certificate.location": "/s/client.pem",
        "ssl.key.password": "${env:TREEDIST_A_SSL_KEY_PASSWORD}"}
    assert pem.spec["clusters"]["b"]["client"] == {
        "ssl.keystore.location": "/s/client.p12", "ssl.keystore.password": "${env:TREEDIST_B_SSL_KEYSTORE_PASSWORD}"}
    assert not re.search("kpw|spw", pem.yaml() + pem.report.message())


def test_role_prefixed_settings_map_when_every_role_agrees_and_tuning_is_listed():
    jaas = PLAIN.format(pw="role-pw")
    imported = _import(f"a.consumer.sasl.jaas.config = {jaas}\na.producer.sasl.jaas.config = {jaas}\n"
                       "a.consumer.security.protocol = SASL_SSL\na.producer.security.protocol = SSL\n"
                       "a.producer.linger.ms = 50\nb.consumer.receive.buffer.bytes = 4194304\n"
                       "b.producer.receive.buffer.bytes = 4194304\n")
    a = imported.spec["clusters"]["a"]["client"]
    assert a["sasl.username"] == "bob" and a["sasl.password"] == "${env:TREEDIST_A_SASL_PASSWORD}"
    assert a["security.protocol"] == "SASL_SSL"  # the consumer's; the producer's differs and is listed
    assert imported.spec["clusters"]["b"]["client"] == {"socket.receive.buffer.bytes": "4194304"}
    unmapped = _unmapped(imported)
    assert "differs from a.consumer.security.protocol" in unmapped["a.producer.security.protocol"]
    assert "tuning" in unmapped["a.producer.linger.ms"]


def test_topics_and_excludes_keep_the_regex_syntax_and_flows_agreeing_give_one_selection():
    imported = _import("topics = orders, payments\\\\..*\ntopics.exclude = .*\\\\.test\n")
    assert imported.spec["topics"] == {"regex": ["orders", "payments\\..*"], "exclude": [".*\\.test"]}
    deployment = parse_deployment(imported.spec, resolve=False)
    assert deployment.topics.matches("payments.eu") and not deployment.topics.matches("paymentsXeu")
    assert not deployment.topics.matches("a.test")


def test_topics_that_differ_per_flow_are_united_and_said_so():
    imported = _import("a->b.topics = orders\nb->a.topics = payments\ntopics.blacklist = x.*\n")
    assert imported.spec["topics"] == {"regex": ["orders", "payments"], "exclude": ["x.*"]}
    assert any("topics differ between flows" in n for n in imported.report.notes)


def test_unset_topics_take_mm2s_defaults_which_are_treedists():
    imported = _import("")
    assert imported.spec["topics"] == {"regex": [".*"]}
    deployment = parse_deployment(imported.spec, resolve=False)
    for internal in ("__consumer_offsets", "mm2-offset-syncs.b.internal", "heartbeats.replica"):
        assert not deployment.topics.matches(internal)


def test_groups_go_to_the_offsets_selection_with_mm2s_default_excludes():
    imported = _import("groups = app-.*\nsync.group.offsets.interval.seconds = 30\n")
    assert imported.spec["offsets"] == {"groups": {"include": ["app-.*"],
                                                   "exclude": ["console-consumer-.*", "connect-.*", "__.*"]},
                                        "poll_interval": "30s"}
    both_off = _import("sync.group.offsets.enabled = false\nemit.checkpoints.enabled = false\ngroups.exclude = x\n")
    assert both_off.spec["offsets"] == {"groups": {"include": [".*"], "exclude": ["x"]}, "enabled": False}


def test_mm2_settings_with_a_meaning_in_treedist_are_mapped():
    imported = _import("sync.topic.configs.enabled = false\nsync.topic.configs.interval.seconds = 60\n"
                       "config.properties.exclude = retention.bytes\nreplication.factor = 3\n"
                       "sync.topic.acls.enabled = true\nsync.topic.acls.interval.seconds = 120\n"
                       "refresh.topics.interval.seconds = 30\n"
                       "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n")
    spec = imported.spec
    assert spec["topics"]["sync"] == {"enabled": False, "interval": "60s", "exclude_configs": ["retention.bytes"],
                                      "replication_factor": {"a": 3, "b": 3}}
    assert spec["acls"] == {"sync": True, "interval": "120s"}
    assert spec["distributor"] == {"topic_refresh_seconds": "30s"}
    assert imported.report.unmapped == []


def test_every_setting_without_an_equivalent_is_listed_once_in_one_message():
    imported = _import("tasks.max = 4\nreplication.policy.class = org.apache.kafka.connect.mirror.DefaultReplicationPolicy\n"
                       "a->b.emit.heartbeats.enabled = false\nsomething.unknown = 1\nA.bootstrap.servers = x:1\n"
                       "c->a.topics = t\n")
    unmapped = _unmapped(imported)
    assert set(unmapped) == {"tasks.max", "replication.policy.class", "a->b.emit.heartbeats.enabled",
                             "something.unknown", "A.bootstrap.servers", "c->a.topics"}
    assert "topic_format" in unmapped["replication.policy.class"] and "Spark" in unmapped["tasks.max"]
    assert "case-sensitive" in unmapped["A.bootstrap.servers"]
    message = imported.report.message()
    assert message.startswith("6 MM2 setting(s) without an equivalent")
    assert all(f"  - {u.setting} = " in message for u in imported.report.unmapped)


def test_settings_of_a_flow_that_is_not_enabled_are_listed():
    imported = import_mm2(BASE + "a->b.enabled = true\nb->a.enabled = false\nb->a.topics = x\n")
    assert "not enabled" in _unmapped(imported)["b->a.topics"]
    assert imported.passive == ["b"] and imported.spec["clusters"]["b"]["passive"] is True


def test_a_receive_only_cluster_is_passive_only_where_it_would_not_relay():
    text = ("clusters = c1, c2, c3, c4\n" + "".join(f"c{i}.bootstrap.servers = k{i}:9092\n" for i in range(1, 5))
            + "c1->c2.enabled = true\nc1->c3.enabled = true\nc1->c4.enabled = true\nc3->c1.enabled = true\n")
    imported = import_mm2(text)
    # c2 and c4 only receive; c2 beside c1 is passive; c4 beside active c3 too, c1's top-level copies going to c3
    assert sorted(imported.passive) == ["c2", "c4"]
    deployment = parse_deployment(imported.spec, resolve=False)
    assert deployment.passive_clusters() == {"c2", "c4"}
    fan = import_mm2("clusters = w, x, y, z\n" + "".join(f"{c}.bootstrap.servers = {c}:1\n" for c in "wxyz")
                     + "w->x.enabled = true\nw->y.enabled = true\nw->z.enabled = true\n")
    # x, y and z only receive, but y and z form w's whole sibling subtree: one of them must relay
    assert fan.passive == ["x", "z"] and any("y only receives in MM2" in n for n in fan.report.notes)
    assert parse_deployment(fan.spec, resolve=False).passive_clusters() == {"x", "z"}
    # b's top-level copies would go to passive d, c's to passive a (leaves of larger subtrees): each goes to the
    # active leaf there instead
    over = import_mm2("clusters = a, b, c, d\n" + "".join(f"{c}.bootstrap.servers = {c}:1\n" for c in "abcd")
                      + "b->a.enabled = true\nb->c.enabled = true\nb->d.enabled = true\nc->b.enabled = true\n")
    assert over.passive == ["a", "d"] and over.spec["targets"] == [{"cluster": "b", "level": 2, "target": "c"},
                                                             {"cluster": "c", "level": 2, "target": "b"}]
    assert parse_deployment(over.spec, resolve=False).passive_clusters() == {"a", "d"}


def test_dc_labels_keep_clusters_together_and_become_labels():
    text = ("clusters = p, q, r, s\n" + "".join(f"{c}.bootstrap.servers = {c}:1\n" for c in "pqrs")
            + "".join(f"{x}->{y}.enabled = true\n" for x in "pqrs" for y in "pqrs" if x != y))
    imported = import_mm2(text, {"p": "eu", "r": "eu", "q": "us", "s": "us"})
    children = [set(c["children"]) for c in imported.spec["tree"]["children"]]
    assert sorted(map(sorted, children)) == [["p", "r"], ["q", "s"]]
    assert imported.spec["clusters"]["p"]["labels"] == {"dc": "eu"}
    with pytest.raises(Mm2ImportError, match="--dc x=eu: 'x' is not a cluster"):
        import_mm2(text, {"x": "eu"})


@pytest.mark.parametrize("text, error", [
    ("a.bootstrap.servers = k:1\n", "no flow is enabled"),
    ("clusters = a, b\na->b.enabled = true\na.bootstrap.servers = k:1\n", "b.bootstrap.servers: cluster 'b' has no"),
    ("topics = x\n", "nothing names a cluster"),
    (BASE + "a->b.enabled = true\ntopics = (?<name>x)\n", "topics: regex '(?<name>x)' is not one treedist"),
    ("clusters = a b, c\n", "alias 'a b' is not a treedist cluster name"),
])
def test_what_cannot_be_imported_is_one_error_naming_the_setting(text, error):
    with pytest.raises(Mm2ImportError, match=re.escape(error)):
        import_mm2(text)


def test_a_trailing_comment_is_dropped_with_a_note_but_never_from_a_credential():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p #1";'
    imported = _import(f"topics = orders   # the orders\na.sasl.jaas.config = {jaas}\n")
    assert imported.spec["topics"]["regex"] == ["orders"]
    assert any("line 6: topics: the text from `#` on was taken as a comment" in n for n in imported.report.notes)
    assert imported.spec["clusters"]["a"]["client"]["sasl.username"] == "u"  # the JAAS value parsed whole


KEYS = ["clusters", "a.bootstrap.servers", "b.bootstrap.servers", "c.bootstrap.servers", "a->b.enabled", "b->a.enabled",
        "b->c.enabled", "a->c.topics", "topics", "topics.exclude", "groups", "a.sasl.jaas.config", "b.consumer.linger.ms",
        "a.ssl.keystore.location", "ssl.truststore.type", "replication.factor", "sync.topic.acls.enabled", "A.x",
        "refresh.topics.interval.seconds", "c.producer.sasl.mechanism", "x->y.enabled", "tasks.max"]
VALUES = ["a, b", "a, b, c", "true", "false", "k:1", ".*", "x.*, [", "3", "-1", "abc", "", "/k.p12", "PEM",
          PLAIN.format(pw="p"), "Other required a=b;", "a b"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=12))
def test_any_configuration_imports_to_a_valid_deployment_or_is_one_import_error(pairs):
    """Whatever the settings, the import gives a deployment the model accepts, or an
    Mm2ImportError; nothing else escapes."""
    text = "".join(f"{k} = {v}\n" for k, v in pairs)
    try:
        imported = import_mm2(text)
    except Mm2ImportError:
        return
    parse_deployment(imported.spec, resolve=False)
    assert "\n" not in "".join(u.setting for u in imported.report.unmapped)
