"""`treedist run`: every distributor of a deployment in one Spark application.

With no -c it is the embedded demo: four local clusters in the reference tree, a demo topic,
a steady stream of keyed events to random clusters, live progress, and a verification.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table

from treedist.cli.common import console, load
from treedist.config import Deployment, parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.kafka.offsets import OffsetReader
from treedist.local import LocalClusters
from treedist.local.demo import DemoWorkload
from treedist.local.deployment import write_local_deployment

DEMO_TOPIC = "demo"


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    config: Path = typer.Option(None, "--config", "-c", help="Deployment YAML; without it, the embedded 4-cluster demo."),
    duration: float = typer.Option(None, "--duration", help="Stop after this many seconds (default: run until Ctrl-C)."),
    rate: float = typer.Option(2000.0, "--rate", help="Demo only: events per second produced to random clusters."),
    partitions: int = typer.Option(6, "--partitions", help="Demo only: partitions of the demo topic."),
    state_dir: Path = typer.Option(Path(".treedist/demo"), "--state-dir", help="Demo only: clusters, checkpoints and config (wiped at start)."),
    keep_clusters: bool = typer.Option(False, "--keep-clusters", help="Demo only: leave the local clusters running afterwards."),
    drain_timeout: float = typer.Option(180.0, "--drain-timeout", help="Demo only: seconds to wait for distributors to catch up before verifying."),
) -> None:
    """Run all distributors (one streaming query per source cluster, reading each record once
    for all of its levels) until Ctrl-C or --duration."""
    if config is not None:
        _run_deployment(load(config), duration)
        return
    clean = _run_demo(duration, rate, partitions, state_dir, keep_clusters, drain_timeout)
    raise typer.Exit(0 if clean else 1)


def _session(deployment: Deployment):
    from treedist.spark.session import build_session

    return build_session(deployment.spark.master, deployment.spark.app_name, deployment.spark.conf)


def _run_deployment(deployment: Deployment, duration: float | None) -> None:
    from treedist.pipeline.app import DistributionApp

    spark = _session(deployment)
    app = DistributionApp(deployment, spark)
    app.start()
    try:
        with Live(console=console, refresh_per_second=2) as live:
            try:
                for _ in _ticks(duration):
                    app.check()
                    live.update(_distributor_table(app.progress()))
            except KeyboardInterrupt:
                console.print("Ctrl-C: stopping the distributors (offsets are safe in the checkpoints) ...")
    finally:
        app.stop()
        spark.stop()


def _run_demo(duration, rate, partitions, state_dir: Path, keep_clusters: bool, drain_timeout: float) -> bool:
    from treedist.pipeline.app import DistributionApp
    from treedist.verify import verify_topic
    from treedist.cli.verify_cmd import print_report

    previous = LocalClusters.load(state_dir)
    if previous:
        previous.stop()
    shutil.rmtree(state_dir, ignore_errors=True)
    console.print(f"starting 4 local clusters in {state_dir} ...")
    clusters = LocalClusters.start(["c1", "c2", "c3", "c4"], state_dir / "clusters")
    try:
        spec = write_local_deployment(
            state_dir / "deployment.yaml",
            clusters.bootstrap,
            topics=[DEMO_TOPIC],
            checkpoint_location=str(state_dir / "checkpoints"),
        )
        deployment = parse_deployment(spec, source=str(state_dir / "deployment.yaml"))
        for name, cluster in deployment.clusters.items():
            ensure_topics(name, admin_client(cluster.client_config()), {DEMO_TOPIC: partitions})
        distributors = len(deployment.topology().all_distributors())
        console.print(
            f"deployment written to {state_dir / 'deployment.yaml'}; starting Spark, one query per cluster "
            f"({len(deployment.clusters)} queries, {distributors} distributors) ..."
        )
        spark = _session(deployment)
        app = DistributionApp(deployment, spark)
        app.start()
        clients = {name: c.client_config() for name, c in deployment.clusters.items()}
        counters = {name: OffsetReader(conf, cluster=name, timeout_s=5.0) for name, conf in clients.items()}
        workload = DemoWorkload(clients, DEMO_TOPIC, rate)
        workload.start()
        try:
            with Live(console=console, refresh_per_second=2) as live:
                try:
                    for _ in _ticks(duration):
                        app.check()
                        live.update(_demo_view(app, workload, _received(counters)))
                except KeyboardInterrupt:
                    pass
                workload.stop()
                console.print(f"stopped producing after {workload.total} events; waiting for the distributors to catch up ...")
                deadline = time.monotonic() + drain_timeout
                while time.monotonic() < deadline:
                    app.check()
                    received = _received(counters)
                    live.update(_demo_view(app, workload, received))
                    if all(r >= workload.total for r in received.values()) and app.idle():
                        break
                    time.sleep(1)
        finally:
            app.stop()
            spark.stop()
        report = verify_topic(deployment, DEMO_TOPIC)
        console.print(f"\nverification of '{DEMO_TOPIC}' after {workload.total} events:")
        print_report(report)
        return report.ok
    finally:
        if keep_clusters:
            console.print(f"local clusters left running; stop them with: treedist local down --state-dir {state_dir / 'clusters'}")
        else:
            clusters.stop()


def _ticks(duration: float | None):
    started = time.monotonic()
    while duration is None or time.monotonic() - started < duration:
        yield
        time.sleep(1)


def _received(counters) -> dict[str, int]:
    """Records of the demo topic on each cluster (originals and copies), from watermarks."""
    return {name: reader.record_count(DEMO_TOPIC) for name, reader in counters.items()}


def _demo_view(app, workload: DemoWorkload, received: dict[str, int]) -> Group:
    expected = workload.total
    table = Table(title=f"demo topic '{DEMO_TOPIC}': every event must reach every cluster once")
    for col in ("cluster", "produced here", "received", "expected", "behind"):
        table.add_column(col, justify="right")
    for name, count in received.items():
        behind = expected - count
        table.add_row(name, str(workload.delivered[name]), str(count), str(expected), str(behind), style="red" if behind < 0 else None)
    return Group(table, _distributor_table(app.progress()))


def _distributor_table(rows: list[dict]) -> Table:
    table = Table(title="distributors")
    for col in ("distributor", "target", "active", "batch", "read/s", "read", "copied", "malformed", "restarts"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r["distributor"], r["target"], "yes" if r["active"] else "[red]no[/]", str(r["batch"]),
            str(r["records_per_second"]), str(r["records_in"]), str(r["copied"]), str(r["malformed"]), str(r["restarts"]),
        )
    return table
