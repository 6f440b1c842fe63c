"""MirrorMaker 2's own example configurations (Kafka's config/connect-mirror-maker.properties and
the geo-replication examples of its docs/ops.html, in tests/data/mm2/) and the ones the
benchmarks run MM2 with (benchmarks/harness/mm2.py): each imports to a deployment that
treedist's loader loads and the real `treedist topology show` accepts, and lists exactly
the settings that have no equivalent.

A fragment of the docs (a file saying "on top of X.properties") is imported appended to X,
as the docs present it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.harness import mm2, wan
from benchmarks.harness.contenders import SCENARIOS
from treedist.cli import app
from treedist.config import load_deployment
from treedist.mm2import import Mm2ImportError, import_mm2

DATA = Path(__file__).resolve().parents[2] / "data" / "mm2"
GEO = "us-west->us.east.topics"  # ops-02's flow key with a typo (us.east): names no flow, MM2 ignores it too
INTERNAL_RF = {f"{t}.replication.factor" for t in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
                                                  "offset.storage", "status.storage", "config.storage")}

# file -> the settings listed as having no equivalent
EXPECTED_UNMAPPED = {
    "connect-mirror-maker.properties": INTERNAL_RF,
    "ops-01-basic-settings.properties": set(),
    "ops-02-global-settings.properties": {GEO},
    "ops-03-connect-defaults.properties": {GEO, "tasks.max"},
    "ops-04-cluster-custom-settings.properties": {GEO, "us-west.offset.storage.topic"},
    "ops-05-client-settings.properties": {GEO, "us-west.admin.bootstrap.servers", "us-west.consumer.isolation.level",
                                          "us-east.admin.bootstrap.servers", "us-east.producer.buffer.memory",
                                          "us-east.producer.compression.type"},
    "ops-06-exactly-once-source-support.properties": {GEO},
    "ops-07-exactly-once-internal-rest.properties": {GEO, "dedicated.mode.enable.internal.rest", "listeners"},
    "ops-08-exactly-once-read-committed.properties": {GEO, "us-west.consumer.isolation.level"},
    "ops-10-enabling-a-flow.properties": set(),
    "ops-11-flow-settings.properties": {GEO, "us-west->us-east.emit.heartbeats"},
    "ops-12-securing-flows.properties": {GEO} | {f"us-east.ssl.{k}" for k in (
        "truststore.location", "truststore.password", "keystore.location", "keystore.password", "key.password")},
    "ops-13-custom-separator.properties": {GEO, "us-west->us-east.replication.policy.separator"},
    "ops-14-two-processes.properties": INTERNAL_RF,
    "ops-15-active-passive.properties": set(),
    "ops-16-active-active.properties": set(),
    "ops-17-multi-cluster.properties": set(),
}
# A part of an example that is not one on its own: refused, naming what is missing.
REFUSED = {"ops-09-creating-clusters.properties": "no flow is enabled"}


def _text(path: Path) -> str:
    text = path.read_text()
    base = re.search(r"on top of (\S+\.properties)", text)
    return (_text(DATA / base.group(1)) + "\n" if base else "") + text


def test_every_example_file_is_covered():
    assert sorted(p.name for p in DATA.glob("*.properties")) == sorted({**EXPECTED_UNMAPPED, **REFUSED})


def _check(tmp_path: Path, text: str, name: str, dc: dict[str, str] | None = None):
    """Import through the real CLI app, load with treedist's loader, show the topology."""
    source, out = tmp_path / name, tmp_path / f"{name}.yaml"
    source.write_text(text)
    args = ["import", "mm2", "-i", str(source), "-o", str(out)]
    for cluster, centre in (dc or {}).items():
        args += ["--dc", f"{cluster}={centre}"]
    runner = CliRunner()
    done = runner.invoke(app, args)
    assert done.exit_code == 0, (done.output, done.exception)
    imported = import_mm2(text, dc, source=name)
    env = {n: "a-value" for n in imported.report.secrets.names}
    for n in env:
        assert n in done.output
    with pytest.MonkeyPatch.context() as mp:
        for n, v in env.items():
            mp.setenv(n, v)
        deployment = load_deployment(out)
    assert sorted(deployment.clusters) == sorted(imported.clusters)
    shown = runner.invoke(app, ["topology", "show", "-c", str(out)], env=env)
    assert shown.exit_code == 0, (shown.output, shown.exception)
    for cluster in imported.clusters:
        assert cluster in shown.output
    listed = {u.setting for u in imported.report.unmapped}
    for setting in listed:
        assert f"  - {setting} = " in done.output  # the one message
    return imported, listed


@pytest.mark.parametrize("name", sorted(EXPECTED_UNMAPPED))
def test_an_example_imports_to_a_deployment_topology_show_accepts(tmp_path, name):
    imported, listed = _check(tmp_path, _text(DATA / name), name)
    assert listed == EXPECTED_UNMAPPED[name]


def test_the_examples_mappings():
    """What the docs' examples say, as treedist says it."""
    one_way = import_mm2(_text(DATA / "ops-15-active-passive.properties"))
    assert one_way.passive == ["secondary"] and one_way.spec["topics"] == {"regex": ["foo.*"]}
    assert import_mm2(_text(DATA / "ops-06-exactly-once-source-support.properties")).spec["distributor"] == {
        "delivery": "exactly_once"}
    flows = import_mm2(_text(DATA / "ops-11-flow-settings.properties"))
    assert flows.spec["topics"]["regex"] == ["foo.*"] and flows.spec["offsets"]["groups"]["include"] == ["bar.*"]
    mesh = import_mm2(_text(DATA / "ops-17-multi-cluster.properties"))
    assert mesh.dc == {c: c.split("-")[0] for c in mesh.clusters}
    for side in mesh.spec["tree"]["children"]:
        leaves = re.findall(r"'(\w+-\d)'", str(side))
        assert len({leaf.split("-")[0] for leaf in leaves}) == len(leaves) // 2  # whole data centres per side


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_part_of_an_example_is_refused_naming_what_is_missing(name):
    with pytest.raises(Mm2ImportError, match=REFUSED[name]):
        import_mm2(_text(DATA / name))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_benchmarks_mm2_configurations_import(tmp_path, scenario):
    sc = SCENARIOS[scenario]
    boot = {c: f"127.0.0.1:{19092 + i}" for i, c in enumerate(sc.clusters)}
    if scenario == "wan":
        props = wan.mm2_properties(boot, sc.mm2_flows, "bench-topic", sc.mm2_policy, tasks=4)
        dc = {c: d for d, members in wan.DCS.items() for c in members}
    else:
        props = mm2.properties(boot, list(sc.mm2_flows), "bench-topic", sc.mm2_policy, tasks=4)
        dc = None
    imported, listed = _check(tmp_path, mm2.properties_text(props), f"{scenario}.properties", dc)
    assert imported.passive == list(sc.passive)  # the one-way link is passive, as the benchmark runs treedist
    assert imported.spec["topics"]["regex"] == ["bench-topic"]  # re.escape's `\-` is `-` to Java, and here
    roles = {k for k in props if re.match(r"c\d+\.(producer|consumer)\.", k)}
    expected = roles | (INTERNAL_RF - {"offset-syncs.topic.replication.factor"}) | {
        "tasks.max", "emit.heartbeats.enabled", "emit.offset-syncs.enabled", "refresh.groups.enabled"}
    if scenario == "wan":
        expected -= {k for k in roles if k.endswith("buffer.bytes")}  # both roles agree: socket.*.buffer.bytes
        assert imported.spec["clusters"]["c1"]["client"] == {"socket.send.buffer.bytes": str(4 << 20),
                                                             "socket.receive.buffer.bytes": str(4 << 20)}
    if sc.mm2_policy != mm2.IDENTITY:
        expected.add("replication.policy.class")
    assert listed == expected
    assert imported.spec["topics"]["sync"] == {"enabled": False,
                                               "replication_factor": {c: 1 for c in sc.clusters}}
    assert imported.spec["distributor"] == {"topic_refresh_seconds": "2s"}


def test_the_benchmarks_exactly_once_configuration():
    props = mm2.properties({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, [("c1", "c2")], "t", mm2.IDENTITY, tasks=2,
                           exactly_once=True)
    imported = import_mm2(mm2.properties_text(props))
    assert imported.spec["distributor"]["delivery"] == "exactly_once"
    listed = {u.setting for u in imported.report.unmapped}
    assert {"dedicated.mode.enable.internal.rest", "listeners", "c1.consumer.isolation.level"} <= listed
    assert not {"c1->c2.exactly.once.support", "c2.exactly.once.source.support"} & listed  # mapped: delivery
