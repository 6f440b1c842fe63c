"""`treedist offsets show` against real local brokers: side by side, lag, how each commit was
made, age of the translation, active groups shown as skipped."""

from __future__ import annotations

import json
import time

import yaml
from confluent_kafka import Consumer
from typer.testing import CliRunner

from treedist.cli import app
from treedist.config import parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.local.deployment import local_deployment
from treedist.offsets import offset_jobs

from tests.e2e.offsets_workload import consume_and_commit, group_name, produce

CLUSTERS = ["c1", "c2", "c3", "c4"]
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def test_offsets_show_lists_every_cluster_with_lag_how_and_the_active_cluster_as_skipped(local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    base = int(time.time() * 1000) - 600_000
    for name in CLUSTERS:
        ensure_topics(name, admin_client({"bootstrap.servers": bootstrap[name]}), {unique_topic: 1})
        produce(bootstrap[name], unique_topic, [f"r{i}" for i in range(20)], partition=0, base_ts_ms=base)
    spec = local_deployment(bootstrap, topics=[unique_topic], offsets={"margin": "0s", "poll_interval": "1s"})
    config = tmp_path / "d.yaml"
    config.write_text(yaml.safe_dump(spec))
    group = group_name()
    member = Consumer({"bootstrap.servers": bootstrap["c4"], "group.id": group, "auto.offset.reset": "earliest"})
    jobs = offset_jobs(parse_deployment(spec))
    try:
        member.subscribe([unique_topic])
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        consume_and_commit(bootstrap["c1"], group, unique_topic, 12)
        for _ in range(2):
            for job in jobs:
                job.run_once()
        result = CliRunner().invoke(app, ["offsets", "show", "-c", str(config), "--group", group, "--json"], env=ENV)
        assert result.exit_code == 0, result.output
        shown = json.loads(result.output)
        rows = {r["cluster"]: r for r in shown["partitions"]}
        assert {c: (r["committed"], r["lag"], r["how"]) for c, r in rows.items()} == {
            "c1": (12, 8, "consumer"), "c2": (11, 9, "timestamp"), "c3": (11, 9, "timestamp")}
        assert rows["c2"]["translated_age_s"] is not None and rows["c1"]["translated_age_s"] is None
        assert shown["skipped_active"] == ["c4"] and shown["mode"] == "timestamp"

        table = CliRunner().invoke(app, ["offsets", "show", "-c", str(config), "--group", group], env=ENV)
        assert table.exit_code == 0, table.output
        assert "c4: 1 active members; treedist skips the group there" in table.output
        assert "timestamp" in table.output and "consumer" in table.output
    finally:
        member.close()
        for job in jobs:
            job.close()
