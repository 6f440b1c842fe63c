"""Fuzz targets of the MirrorMaker 2 importer (treedist.mm2import): `parse_properties` on
arbitrary text and `import_mm2` on configurations built from MM2's own keys and awkward values.

Invariant of every target: the result is parsed settings (an Imported whose deployment the
model accepts), or an Mm2ImportError (a TreedistError: the CLI prints one line and exits 2)
on one line; nothing else escapes, and a credential given in the input (under a credential
key) appears neither in the error, nor in the written YAML, nor in the report.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import budget, ran
from treedist.config import parse_deployment
from treedist.config.secrets import is_secret_key
from treedist.mm2import import Mm2ImportError, import_mm2, parse_properties

SECRET = "fuzz-secret-Zq7"
ALIASES = ["a", "b", "dc1-a", "dc1-b", "A", "x.y"]
SUBS = ["bootstrap.servers", "sasl.jaas.config", "security.protocol", "ssl.truststore.location", "ssl.truststore.type",
        "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "consumer.sasl.jaas.config",
        "producer.linger.ms", "admin.bootstrap.servers", "consumer.ssl.key.password", "exactly.once.source.support",
        "replication.factor", "unknown.thing"]
GLOBAL = ["clusters", "topics", "topics.exclude", "topics.blacklist", "groups", "groups.exclude", "tasks.max",
          "replication.factor", "sync.topic.acls.enabled", "sync.group.offsets.enabled", "emit.checkpoints.enabled",
          "refresh.topics.interval.seconds", "config.properties.exclude", "replication.policy.class",
          "exactly.once.support", "security.protocol", "sasl.jaas.config", "enabled"]
VALUES = st.sampled_from([
    "true", "false", "a, b", "dc1-a, dc1-b, a", "k:1, k:2", ".*", "(", "x.*  # comment", "", "-1", "3", "0", "abc",
    "PEM", "/s/x.pem", "/s/x.p12", "/s/x.jks", SECRET,
    f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";',
    f'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret="{SECRET}";',
    "Broken required", "\u00e9\\u00e9",
]) | st.text(max_size=12)
KEYS = (st.sampled_from(GLOBAL)
        | st.tuples(st.sampled_from(ALIASES), st.sampled_from(SUBS)).map(".".join)
        | st.tuples(st.sampled_from(ALIASES), st.sampled_from(ALIASES), st.sampled_from(["enabled", "topics", "groups",
                                                                                          "emit.heartbeats.enabled"]))
        .map(lambda t: f"{t[0]}->{t[1]}.{t[2]}"))


@budget(1000)
@given(st.text(max_size=300))
def test_parse_properties_on_arbitrary_text(text):
    try:
        parse_properties(text)
    except Mm2ImportError as err:
        ran("parse_properties", "rejected")
        assert str(err).startswith("line ") and "\n" not in str(err)
        return
    ran("parse_properties", "parsed")


BASE = "clusters = a, b\na.bootstrap.servers = k:1\nb.bootstrap.servers = k:2\na->b.enabled = true\n"


@budget(500)
@given(st.booleans(), st.lists(st.tuples(KEYS, VALUES), max_size=20))
def test_import_mm2_on_configurations_near_real_ones(base, pairs):
    text = (BASE if base else "") + "".join(f"{k} = {v}\n" for k, v in pairs)
    # the invariant on credentials holds where the secret stands under credential keys only
    only_as_credential = all(is_secret_key(k) or SECRET not in v for k, v in pairs)
    try:
        imported = import_mm2(text)
    except Mm2ImportError as err:
        ran("import_mm2", "rejected")
        assert "\n" not in str(err)
        assert SECRET not in str(err) or not only_as_credential
        return
    ran("import_mm2", "imported")
    parse_deployment(imported.spec, resolve=False)
    if only_as_credential:
        assert SECRET not in imported.yaml() and SECRET not in imported.report.message()
