"""The deployment YAML: a valid file loads; every invalid one fails naming the file and field."""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from treedist.config import ConfigError, Deployment, load_deployment, parse_deployment
from treedist.topology import Inner, MalformedFlagsPolicy, build_topology, to_spec

from tests.unit.conftest import FIVE_CLUSTER_SPEC, FOUR_CLUSTER_SPEC, FOUR_CLUSTER_YAML
from tests.unit.topology.strategies import leaf_names, overrides_for, trees


def _base() -> dict:
    return yaml.safe_load(FOUR_CLUSTER_YAML)


def _dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_deployment(path)
    return str(info.value)


def _assert_names(message: str, path: Path, *fragments: str) -> None:
    assert str(path) in message, f"the error does not name the file: {message}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from: {message}"


# --- a valid file ---------------------------------------------------------------------------


def test_a_valid_four_cluster_file_loads(four_cluster_file):
    dep = load_deployment(four_cluster_file)
    assert isinstance(dep, Deployment)
    assert list(dep.clusters) == ["c1", "c2", "c3", "c4"]
    assert dep.clusters["c3"].bootstrap_servers == "127.0.0.1:19094"
    assert dep.topics.names == ("demo",)
    assert dep.topics.matches("demo") and not dep.topics.matches("other")
    assert to_spec(dep.tree_node()) == FOUR_CLUSTER_SPEC
    assert dep.topology().distributors == build_topology(dep.tree_node()).distributors
    # defaults
    assert dep.copy_flags_header == "treedist-copy-flags"
    assert dep.distributor.malformed_flags is MalformedFlagsPolicy.COPY
    assert dep.targets == ()
    assert dep.cluster("c2") is dep.clusters["c2"]
    assert dep.clusters["c1"].client_config() == {"bootstrap.servers": "127.0.0.1:19092"}


def test_a_valid_five_cluster_file_loads(five_cluster_file):
    dep = load_deployment(five_cluster_file)
    assert to_spec(dep.tree_node()) == FIVE_CLUSTER_SPEC
    assert len(dep.topology().all_distributors()) == 12


def test_a_full_file_with_every_section_loads(write_yaml):
    data = _base()
    data.update(
        {
            "topics": {"names": ["orders"], "regex": ["events-.*"], "exclude": ["events-internal"]},
            "copy_flags_header": "X-Copy-Flags",
            "origin_header": "X-Origin",
            "checkpoint_location": "/var/lib/treedist/cp",
            "spark": {"master": "local[4]", "app_name": "dist", "conf": {"spark.sql.shuffle.partitions": "4"}},
            "distributor": {"max_records_per_trigger": 1000, "malformed_flags": "skip"},
            "targets": [{"cluster": "c1", "level": 3, "target": "c4"}, {"cluster": "c4", "level": 3, "target": "c2"}],
        }
    )
    dep = load_deployment(write_yaml(_dump(data)))
    assert dep.topics.matches("orders") and dep.topics.matches("events-a") and not dep.topics.matches("events-internal")
    assert dep.copy_flags_header == "X-Copy-Flags"
    assert dep.distributor.malformed_flags is MalformedFlagsPolicy.SKIP
    assert str(dep.checkpoint_location) == "/var/lib/treedist/cp"
    topo = dep.topology()
    assert {d.level: d.target for d in topo.distributors["c1"]} == {1: "c2", 3: "c4"}
    assert {d.level: d.target for d in topo.distributors["c4"]} == {1: "c3", 3: "c2"}


# --- the tree -------------------------------------------------------------------------------


def test_unknown_cluster_in_the_tree(write_yaml):
    data = _base()
    data["tree"]["children"][1]["children"][1] = "c9"
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "tree.children[1].children[1]", "unknown cluster", "c9")


def test_duplicate_cluster_in_the_tree(write_yaml):
    data = _base()
    data["tree"]["children"][1]["children"][1] = "c1"
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "tree.children[1].children[1]", "duplicate cluster", "c1")


def test_duplicate_cluster_in_the_clusters_mapping(write_yaml):
    """The same cluster defined twice under `clusters` (a duplicate YAML key) must not silently
    keep only the last definition."""
    text = FOUR_CLUSTER_YAML.replace(
        '  c4: {bootstrap_servers: "127.0.0.1:19095"}\n',
        '  c4: {bootstrap_servers: "127.0.0.1:19095"}\n  c1: {bootstrap_servers: "10.0.0.1:9092"}\n',
    )
    path = write_yaml(text)
    _assert_names(_error(path), path, "clusters", "c1", "duplicate")


def test_yaml_anchors_aliases_and_merge_keys_are_allowed(write_yaml):
    """Sharing client settings between clusters with YAML anchors is not a duplicate."""
    text = FOUR_CLUSTER_YAML.replace(
        '  c1: {bootstrap_servers: "127.0.0.1:19092"}\n',
        '  c1: {bootstrap_servers: "127.0.0.1:19092", client: &sasl {security.protocol: SASL_SSL, sasl.password: pw}}\n',
    ).replace(
        '  c2: {bootstrap_servers: "127.0.0.1:19093"}\n',
        '  c2: {bootstrap_servers: "127.0.0.1:19093", client: *sasl}\n',
    ).replace(
        '  c3: {bootstrap_servers: "127.0.0.1:19094"}\n',
        '  c3: {bootstrap_servers: "127.0.0.1:19094", client: {<<: *sasl, sasl.password: other, linger.ms: 5}}\n',
    )
    dep = load_deployment(write_yaml(text))
    assert dep.clusters["c2"].client_config()["sasl.password"] == "pw"
    assert dep.clusters["c3"].client_config()["sasl.password"] == "other"
    assert dep.clusters["c3"].client_config()["security.protocol"] == "SASL_SSL"
    assert dep.clusters["c3"].client_config()["linger.ms"] == 5


@pytest.mark.parametrize(
    "extra",
    ["spark:\n  conf: &x {a: *x}\n", "targets: &t [*t]\n"],
    ids=["mapping", "sequence"],
)
def test_a_self_referencing_yaml_alias_is_a_config_error(write_yaml, extra):
    """A recursive alias is legal YAML; it must give a ConfigError naming the file, not a crash."""
    path = write_yaml(FOUR_CLUSTER_YAML + extra)
    _assert_names(_error(path), path)


def test_a_cluster_defined_but_not_in_the_tree(write_yaml):
    data = _base()
    data["clusters"]["c5"] = {"bootstrap_servers": "127.0.0.1:1"}
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "clusters", "c5", "not leaves of the tree")


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda t: t["children"].append("c9"), "tree.children"),
        (lambda t: t.__setitem__("children", [t["children"][0]]), "tree.children"),
        (lambda t: t.__setitem__("children", []), "tree.children"),
        (lambda t: t["children"][0].__setitem__("children", ["c1"]), "tree.children[0].children"),
        (lambda t: t["children"][1]["children"].append("c5"), "tree.children[1].children"),
    ],
    ids=["root-three", "root-one", "root-none", "nested-one", "nested-three"],
)
def test_not_exactly_two_children(write_yaml, mutate, field):
    data = _base()
    mutate(data["tree"])
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, field, "exactly two children")


@pytest.mark.parametrize(
    "child, level, field",
    [
        (0, 3, "tree.children[0].level"),  # equal to the parent
        (1, 5, "tree.children[1].level"),  # above the parent
    ],
)
def test_levels_not_strictly_increasing_toward_the_root(write_yaml, child, level, field):
    data = _base()
    data["tree"]["children"][child]["level"] = level
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, field, "strictly increase")


def test_levels_not_strictly_increasing_deep_in_the_tree(write_yaml):
    data = yaml.safe_load(FOUR_CLUSTER_YAML)
    data["clusters"]["c5"] = {"bootstrap_servers": "127.0.0.1:1"}
    data["tree"] = copy.deepcopy(FIVE_CLUSTER_SPEC)
    data["tree"]["children"][0]["children"][1]["level"] = 2  # level 2 under level 2
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "tree.children[0].children[1].level", "strictly increase")


@pytest.mark.parametrize(
    "where, level, field",
    [
        ("root", 0, "tree.level"),
        ("root", 64, "tree.level"),
        ("child", 0, "tree.children[1].level"),
        ("child", 64, "tree.children[1].level"),
        ("child", -1, "tree.children[1].level"),
    ],
)
def test_level_outside_1_to_63(write_yaml, where, level, field):
    data = _base()
    node = data["tree"] if where == "root" else data["tree"]["children"][1]
    node["level"] = level
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, field)


def test_levels_1_and_63_are_accepted(write_yaml):
    data = _base()
    data["tree"]["level"] = 63
    dep = load_deployment(write_yaml(_dump(data)))
    assert dep.topology().max_level() == 63


# --- target overrides -----------------------------------------------------------------------


@pytest.mark.parametrize("target", ["c2", "c1", "c9"], ids=["own-subtree", "itself", "unknown"])
def test_override_target_outside_the_sibling_subtree(write_yaml, target):
    data = _base()
    data["targets"] = [{"cluster": "c1", "level": 3, "target": target}]
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "targets", "c1", repr(target), "sibling subtree")


@pytest.mark.parametrize(
    "override",
    [
        {"cluster": "c1", "level": 2, "target": "c2"},
        {"cluster": "c9", "level": 1, "target": "c2"},
    ],
    ids=["no-such-level", "no-such-cluster"],
)
def test_override_for_a_non_existent_distributor(write_yaml, override):
    data = _base()
    data["targets"] = [override]
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "targets", override["cluster"], "no such distributor")


def test_override_level_outside_1_to_63(write_yaml):
    data = _base()
    data["targets"] = [{"cluster": "c1", "level": 64, "target": "c3"}]
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "targets[0].level")


def test_override_with_a_wrongly_typed_cluster_names_the_cluster_field(write_yaml):
    """The location targets[0].cluster must be reported in full (not cut to targets[0])."""
    data = _base()
    data["targets"] = [{"cluster": ["c1"], "level": 3, "target": "c3"}]
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "targets[0].cluster")


# --- topics -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topics, field",
    [
        ({"regex": ["("]}, "topics.regex"),
        ({"regex": ["ok", "[a-"]}, "topics.regex"),
        ({"names": ["demo"], "exclude": ["*x"]}, "topics.exclude"),
    ],
)
def test_bad_regex(write_yaml, topics, field):
    data = _base()
    data["topics"] = topics
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, field, "bad regex")


@pytest.mark.parametrize("topics", [{}, {"names": [], "regex": []}, {"exclude": [".*"]}])
def test_no_topics_selected(write_yaml, topics):
    data = _base()
    data["topics"] = topics
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "topics", "at least one topic")


def test_missing_topics_section(write_yaml):
    data = _base()
    del data["topics"]
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "topics", "required")


# --- unknown keys and wrong shapes ----------------------------------------------------------


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.__setitem__("bogus", 1), "bogus"),
        (lambda d: d.__setitem__("target", []), "target"),
        (lambda d: d["clusters"]["c1"].__setitem__("bootstrap", "x"), "clusters.c1.bootstrap"),
        (lambda d: d["topics"].__setitem__("name", ["x"]), "topics.name"),
        (lambda d: d["tree"].__setitem__("lvl", 3), "tree.lvl"),
        (lambda d: d.__setitem__("spark", {"mastr": "local"}), "spark.mastr"),
    ],
    ids=["top-level", "top-level-typo", "cluster", "topics", "tree", "spark"],
)
def test_unknown_key(write_yaml, mutate, field):
    data = _base()
    mutate(data)
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, field, "Extra inputs are not permitted")


def test_an_error_inside_a_cluster_named_like_a_union_tag_names_that_cluster(write_yaml):
    """Clusters named "node" or "cluster" are valid names; an error in their settings must still
    say clusters.node...., not drop the name from the location."""
    data = _base()
    data["clusters"]["node"] = data["clusters"].pop("c4")
    data["tree"]["children"][1]["children"][1] = "node"
    data["clusters"]["node"]["bootstrap_servers"] = ""
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "clusters.node.bootstrap_servers")


def test_bad_malformed_flags_policy(write_yaml):
    data = _base()
    data["distributor"] = {"malformed_flags": "drop"}
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "distributor.malformed_flags")


def test_bootstrap_servers_inside_client_is_rejected(write_yaml):
    data = _base()
    data["clusters"]["c2"]["client"] = {"bootstrap.servers": "elsewhere:9092"}
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "clusters.c2.client", "bootstrap_servers")


def test_a_bad_cluster_name(write_yaml):
    data = _base()
    data["clusters"]["bad name"] = data["clusters"].pop("c4")
    data["tree"]["children"][1]["children"][1] = "bad name"
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "clusters", "bad name")


@pytest.mark.parametrize("text", ["- just\n- a list\n", "42\n", ""], ids=["list", "scalar", "empty"])
def test_the_top_level_must_be_a_mapping(write_yaml, text):
    path = write_yaml(text)
    _assert_names(_error(path), path, "top level must be a mapping")


def test_invalid_yaml_names_the_file(write_yaml):
    path = write_yaml("clusters: {c1: [\n")
    _assert_names(_error(path), path, "not valid YAML")


def test_a_missing_file_is_named(tmp_path):
    path = tmp_path / "nope.yaml"
    _assert_names(_error(path), path, "cannot read")


# --- client settings and secrets ------------------------------------------------------------


SECURE_CLUSTER = {
    "bootstrap_servers": "broker:9093",
    "client": {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "distributor",
        "sasl.password": "hunter2-s3cret",
        "ssl.key.password": "keypass-987",
        "sasl.oauthbearer.client.secret": "oauth-xyz-555",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "enable.idempotence": True,
        "socket.keepalive.enable": False,
        "queue.buffering.max.kbytes.ratio": 0.5,
    },
}
SECRETS = ("hunter2-s3cret", "keypass-987", "oauth-xyz-555")


@pytest.fixture
def secure(write_yaml) -> Deployment:
    data = _base()
    data["clusters"]["c1"] = copy.deepcopy(SECURE_CLUSTER)
    return load_deployment(write_yaml(_dump(data)))


def test_secrets_are_stored_as_secretstr(secure):
    client = secure.clusters["c1"].client
    for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"):
        assert isinstance(client[key], SecretStr), key
    assert client["sasl.username"] == "distributor"
    assert isinstance(client["sasl.username"], str)


def test_secrets_are_not_shown_in_repr_str_or_dumps(secure):
    shown = [
        repr(secure),
        str(secure),
        repr(secure.clusters["c1"]),
        repr(secure.clusters["c1"].client),
        str(secure.model_dump()),
        secure.model_dump_json(),
    ]
    for text in shown:
        for secret in SECRETS:
            assert secret not in text


def test_client_config_reveals_secrets_and_keeps_other_values_as_is(secure):
    conf = secure.clusters["c1"].client_config()
    assert conf["bootstrap.servers"] == "broker:9093"
    assert conf["sasl.password"] == "hunter2-s3cret"
    assert conf["ssl.key.password"] == "keypass-987"
    assert conf["sasl.oauthbearer.client.secret"] == "oauth-xyz-555"
    assert conf["security.protocol"] == "SASL_SSL"
    # non-string values are kept with their YAML types (bool is not turned into int or str)
    assert conf["linger.ms"] == 5 and type(conf["linger.ms"]) is int
    assert conf["batch.num.messages"] == 10000 and type(conf["batch.num.messages"]) is int
    assert conf["enable.idempotence"] is True
    assert conf["socket.keepalive.enable"] is False
    assert conf["queue.buffering.max.kbytes.ratio"] == 0.5 and type(conf["queue.buffering.max.kbytes.ratio"]) is float
    assert all(not isinstance(v, SecretStr) for v in conf.values())


def test_client_config_overrides_win(secure):
    conf = secure.clusters["c1"].client_config(**{"linger.ms": 50, "group.id": "g"})
    assert conf["linger.ms"] == 50 and conf["group.id"] == "g"


def test_a_numeric_password_is_still_a_secret(write_yaml):
    data = _base()
    data["clusters"]["c1"]["client"] = {"sasl.password": 424242}
    dep = load_deployment(write_yaml(_dump(data)))
    assert isinstance(dep.clusters["c1"].client["sasl.password"], SecretStr)
    assert "424242" not in repr(dep)
    assert dep.clusters["c1"].client_config()["sasl.password"] == "424242"


def test_a_validation_error_does_not_print_secrets(write_yaml):
    data = _base()
    data["clusters"]["c1"] = copy.deepcopy(SECURE_CLUSTER)
    data["tree"]["level"] = 64
    path = write_yaml(_dump(data))
    message = _error(path)
    _assert_names(message, path, "tree.level")
    for secret in SECRETS:
        assert secret not in message


# --- properties ---------------------------------------------------------------------------


def _deployment_data(tree, overrides) -> dict:
    return {
        "clusters": {c: {"bootstrap_servers": f"127.0.0.1:{20000 + i}"} for i, c in enumerate(leaf_names(tree))},
        "topics": {"names": ["demo"]},
        "tree": to_spec(tree),
        "targets": [{"cluster": c, "level": lv, "target": t} for (c, lv), t in overrides.items()],
    }


def _inner_paths(spec, where="tree", parent_level=None):
    """(field path, spec dict, parent level) for every inner node of a tree spec."""
    if isinstance(spec, str):
        return []
    out = [(where, spec, parent_level)]
    for i, child in enumerate(spec["children"]):
        out += _inner_paths(child, f"{where}.children[{i}]", spec["level"])
    return out


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_any_valid_generated_tree_round_trips_through_a_yaml_file(tmp_path_factory, data):
    """Random trees and overrides written as YAML load and give the same topology as the core."""
    tree = data.draw(trees(max_leaves=10))
    overrides = data.draw(overrides_for(tree))
    path = tmp_path_factory.mktemp("rt") / "deployment.yaml"
    path.write_text(_dump(_deployment_data(tree, overrides)))
    dep = load_deployment(path)
    assert dep.tree_node() == tree
    assert dep.topology().distributors == build_topology(tree, overrides).distributors


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_level_not_below_its_parent_is_rejected_naming_that_node(data):
    tree = data.draw(trees(min_leaves=3, max_leaves=10).filter(lambda t: isinstance(t, Inner)))
    raw = _deployment_data(tree, {})
    candidates = [(w, s, p) for w, s, p in _inner_paths(raw["tree"]) if p is not None]
    where, spec, parent_level = data.draw(st.sampled_from(candidates))
    spec["level"] = data.draw(st.integers(min_value=parent_level, max_value=63))
    with pytest.raises(ConfigError) as info:
        parse_deployment(raw, source="gen.yaml")
    message = str(info.value)
    assert message.startswith("gen.yaml: ")
    assert f"{where}.level" in message and "strictly increase" in message


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_level_outside_1_to_63_is_rejected_naming_that_node(data):
    tree = data.draw(trees(max_leaves=10))
    raw = _deployment_data(tree, {})
    where, spec, _parent = data.draw(st.sampled_from(_inner_paths(raw["tree"])))
    spec["level"] = data.draw(st.one_of(st.integers(max_value=0), st.integers(min_value=64)))
    with pytest.raises(ConfigError) as info:
        parse_deployment(raw, source="gen.yaml")
    assert f"{where}.level" in str(info.value)


def test_two_overrides_for_the_same_distributor_are_rejected(write_yaml):
    data = _base()
    data["targets"] = [
        {"cluster": "c1", "level": 3, "target": "c3"},
        {"cluster": "c1", "level": 3, "target": "c4"},
    ]
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "targets", "second override", "c1")


def test_a_boolean_level_is_rejected(write_yaml):
    data = _base()
    data["tree"]["children"][0]["level"] = True
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "tree.children[0].level")


def test_a_null_client_setting_names_the_setting(write_yaml):
    data = _base()
    data["clusters"]["c2"]["client"] = {"sasl.username": None}
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "clusters.c2.client", "sasl.username")


# --- topic selection: one rule ------------------------------------------------------------


def _selection(**topics):
    data = _base()
    data["topics"] = topics
    return parse_deployment(data, source="sel.yaml")


def test_names_and_regex_together_select_both():
    """README's own example: exact names and regexes in one selection."""
    dep = _selection(names=["orders"], regex=[r"payments\..*"])
    assert dep.topics.matches("orders") and dep.topics.matches("payments.eu")
    assert not dep.topics.matches("payments") and not dep.topics.matches("orders2")
    assert not dep.topics.matches("xpayments.eu")  # regexes match in full


def test_an_explicitly_named_topic_is_selected_even_when_an_exclude_matches_it():
    dep = _selection(names=["__audit", "events-internal"], regex=["events-.*"], exclude=["events-internal", "__.*"])
    assert dep.topics.matches("__audit") and dep.topics.matches("events-internal")
    assert dep.topics.matches("events-a") and not dep.topics.matches("__other")


def test_the_default_excludes_keep_internal_topics_out_of_regex_selections():
    """MirrorMaker 2's default excludes (its DefaultTopicFilter), plus the registry's `_schemas`
    and names starting with a dot."""
    dep = _selection(regex=[".*"])
    for internal in ("__consumer_offsets", "__transaction_state", "_schemas", ".internal", "__amazon_msk_canary",
                     "mm2-offset-syncs.b.internal", "a.checkpoints.internal", "app-store-internal", "orders.replica"):
        assert not dep.topics.matches(internal), internal
    for normal in ("orders", "_private", "a.b", "a__b", "internal", "orders-internals", "replica", "orders-replica"):
        assert dep.topics.matches(normal), normal


TOPICS = st.text(alphabet="ab._-", min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(TOPICS.filter(lambda t: t not in (".", "..")), max_size=3),
    st.lists(st.sampled_from(["a.*", "b+", r".*\..*", "_.*", "a_b", ".*"]), max_size=3),
    st.lists(st.sampled_from(["__.*", "_schemas", r"\..*", "a.*", ".*b"]), max_size=3),
    TOPICS,
)
def test_a_topic_is_selected_iff_named_or_regex_matched_and_not_excluded(names, regex, exclude, topic):
    """The one selection rule, against an oracle written from its statement."""
    assume(names or regex)
    dep = _selection(names=names, regex=regex, exclude=exclude)
    named = topic in names
    regexed = any(re.fullmatch(p, topic) for p in regex)
    excluded = any(re.fullmatch(p, topic) for p in exclude)
    assert dep.topics.matches(topic) is (named or (regexed and not excluded))
    if named:
        assert dep.topics.matches(topic)
    if excluded and not named:
        assert not dep.topics.matches(topic)


@pytest.mark.parametrize("name", ["a b", "", ".", "..", "x/y", "t" * 250])
def test_a_named_topic_that_is_not_a_valid_topic_name_is_rejected(write_yaml, name):
    data = _base()
    data["topics"] = {"names": ["ok", name]}
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "topics.names", "[1]", "not a valid topic name")


# --- per-cluster topic formats ------------------------------------------------------------


ACME = {
    "c1": {"topic_format": "{tenant}-{instance}-{environment}-{topic}",
           "vars": {"tenant": "acme", "instance": "prod", "environment": "eu"}},
    "c3": {"topic_format": "{tenant}-{environment}-{topic}", "vars": {"tenant": "acme", "environment": "eu"}},
}


def _acme(**topics) -> dict:
    data = _base()
    for cluster, fields in ACME.items():
        data["clusters"][cluster].update(copy.deepcopy(fields))
    data["topics"] = topics or {"names": ["orders"], "regex": [r"payments\..*"]}
    return data


def test_the_issue_example_loads_and_translates_both_ways(write_yaml):
    """acme-prod-eu-orders on c1 is acme-eu-orders on c3 (and orders on c2, c4), and back."""
    dep = load_deployment(write_yaml(_dump(_acme())))
    assert dep.clusters["c1"].topic_format == "{tenant}-{instance}-{environment}-{topic}"
    assert dep.clusters["c2"].topic_format == "{topic}" and dep.clusters["c2"].vars == {}
    naming = dep.naming()
    assert naming.translate("c1", "acme-prod-eu-orders", "c3") == "acme-eu-orders"
    assert naming.translate("c3", "acme-eu-orders", "c1") == "acme-prod-eu-orders"
    assert naming.translate("c1", "acme-prod-eu-orders", "c2") == "orders"
    assert naming.physical("c4", "orders") == "orders"
    assert dep.naming() is naming  # parsed once per distinct configuration
    assert pickle.loads(pickle.dumps(naming)) == naming


def test_selects_is_the_logical_name_of_a_fitting_selected_physical_topic(write_yaml):
    dep = load_deployment(write_yaml(_dump(_acme())))
    assert dep.selects("c1", "acme-prod-eu-orders") == "orders"
    assert dep.selects("c1", "acme-prod-eu-payments.eu") == "payments.eu"
    assert dep.selects("c3", "acme-eu-orders") == "orders"
    assert dep.selects("c2", "orders") == "orders"
    # fits but not selected
    assert dep.selects("c1", "acme-prod-eu-shipments") is None
    assert dep.selects("c1", "acme-prod-eu-__consumer_offsets") is None
    # does not fit: not selected, reported as a misfit unless it is excluded (internal)
    for name in ("orders", "acme-eu-orders", "other-prod-eu-orders", "acme-prod-eu-", "bad name"):
        assert dep.selects("c1", name) is None
        assert dep.misfit("c1", name)
    assert not dep.misfit("c1", "__consumer_offsets") and not dep.misfit("c1", "_schemas")
    assert not dep.misfit("c1", "acme-prod-eu-shipments")  # fits; simply not selected
    with pytest.raises(ConfigError, match="unknown cluster 'c9'"):
        dep.selects("c9", "orders")


@settings(max_examples=100, deadline=None)
@given(TOPICS)
def test_with_the_default_format_selects_is_the_selection_rule(topic):
    dep = _selection(names=["a"], regex=["a.*", "b+"])
    for cluster in dep.clusters:
        assert dep.selects(cluster, topic) == (topic if dep.topics.matches(topic) else None)


@pytest.mark.parametrize(
    "fields, field, reason",
    [
        ({"topic_format": "{topic}-{topic}"}, "clusters.c2.topic_format", "exactly once"),
        ({"topic_format": "orders"}, "clusters.c2.topic_format", "exactly once"),
        ({"topic_format": "{tenant}{environment}-{topic}", "vars": {"tenant": "a", "environment": "b"}},
         "clusters.c2.topic_format", "adjacent"),
        ({"topic_format": "{tenant}{topic}", "vars": {"tenant": "a"}}, "clusters.c2.topic_format", "adjacent"),
        ({"topic_format": "{tenant-{topic}"}, "clusters.c2.topic_format", "braces"),
        ({"topic_format": "acme:{topic}"}, "clusters.c2.topic_format", "not allowed in topic names"),
        ({"topic_format": 7}, "clusters.c2.topic_format", "valid string"),
        ({"topic_format": "{tenant}-{topic}"}, "clusters.c2.vars", "no value for placeholder(s) {tenant}"),
        ({"vars": {"tenant": "acme"}}, "clusters.c2.vars", "unknown var 'tenant'"),
        ({"topic_format": "{tenant}-{topic}", "vars": {"tenant": "acme", "team": "x"}},
         "clusters.c2.vars", "unknown var 'team'"),
        ({"topic_format": "{tenant}-{topic}", "vars": {"tenant": ""}}, "clusters.c2.vars.tenant", "non-empty"),
        ({"topic_format": "{tenant}-{topic}", "vars": {"tenant": "ac me"}}, "clusters.c2.vars.tenant", "[A-Za-z0-9._-]"),
        ({"topic_format": "{tenant}-{topic}", "vars": {"tenant": 42}}, "clusters.c2.vars.tenant", "valid string"),
        ({"topic_format": "{tenant}-{topic}", "vars": {"tenant": "x" * 248}}, "clusters.c2.vars", "at most 249"),
    ],
    ids=["topic-twice", "no-topic", "adjacent-vars", "var-then-topic", "braces", "bad-literal", "not-a-string",
         "missing-var", "unused-var", "extra-var", "empty-value", "bad-value", "number-value", "too-long"],
)
def test_a_bad_topic_format_is_rejected_at_load_naming_the_cluster_and_field(write_yaml, fields, field, reason):
    data = _base()
    data["clusters"]["c2"].update(fields)
    path = write_yaml(_dump(data))
    message = _error(path)
    _assert_names(message, path, f"{field}: ", reason)


def test_a_named_topic_with_no_legal_name_on_some_cluster_is_rejected(write_yaml):
    data = _acme(names=["t" * 240])
    path = write_yaml(_dump(data))
    _assert_names(_error(path), path, "topics.names[0]", "cluster 'c1'", "no legal topic name")


def test_the_readme_example_deployment_loads_and_its_formats_translate():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = readme.split("## A deployment file", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    dep = parse_deployment(yaml.safe_load(block), source="README.md")
    assert dep.selects("dc2-a", "acme-prod-eu-orders") == "orders"
    assert dep.selects("dc1-a", "payments.eu") == "payments.eu"
    assert dep.naming().translate("dc2-a", "acme-prod-eu-orders", "dc2-b") == "acme-eu-orders"
    assert dep.naming().translate("dc2-b", "acme-eu-orders", "dc1-b") == "orders"


def test_the_removed_source_sink_mode_is_refused_naming_the_field_and_why():
    spec = {
        "clusters": {"c1": {"bootstrap_servers": "a:1"}, "c2": {"bootstrap_servers": "b:1"}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["orders"]},
    }
    assert parse_deployment({**spec, "distributor": {"mode": "fused"}}).distributor.mode == "fused"
    with pytest.raises(ConfigError, match=r"distributor\.mode.*'source-sink' was removed.*read each record once"):
        parse_deployment({**spec, "distributor": {"mode": "source-sink"}}, source="deploy.yaml")
