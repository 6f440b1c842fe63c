"""`treedist audit`: message-safety settings of every cluster, against the thesis's guidelines (7.2).

Reads each cluster's topics (internal ones included), their effective configs and the
brokers' configs (`treedist.sizing.inventory`, AdminClient); `treedist.sizing.audit` judges
them; this module parses options and prints. Exit code 1
when anything breaches, 2 on errors (unreachable cluster, bad config).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from treedist.cli.common import ConfigOption, JsonOption, console, load, print_json
from treedist.config import Deployment
from treedist.sizing import (
    Breach,
    audit_cluster,
    check_producer_config,
)
from treedist.sizing.errors import AuditError, require_count
from treedist.sizing.inventory import read_cluster



def register(app: typer.Typer) -> None:
    app.command("audit")(audit)


def audit(
    config: Path = ConfigOption,
    cluster: Optional[list[str]] = typer.Option(None, "--cluster", help="Audit only this cluster (repeat for several; default: all)."),
    failures: int = typer.Option(1, "--failures", "-N", help="N: broker failures to tolerate at once."),
    topic: Optional[list[str]] = typer.Option(None, "--topic", help="Audit only topics fully matching this regex (repeat; default: every topic, internal ones included)."),
    as_json: bool = JsonOption,
) -> None:
    """Report every breach of the message-safety guidelines for N tolerated broker failures.

    Topics (internal ones like __consumer_offsets included): min.insync.replicas >= N+1,
    replication factor >= N+1 and >= 2N+1 (writes stay available), and never below
    min.insync.replicas; unclean.leader.election.enable=false on topics and brokers; broker
    defaults for new topics when the broker reports them. treedist's own producers:
    acks=all and enable.idempotence=true. Exits 1 when anything breaches.

    Example: treedist audit -c deploy.yaml -N 1"""
    require_count("failures", failures, minimum=0)
    deployment = load(config)
    names = cluster or list(deployment.clusters)
    for name in names:
        if name not in deployment.clusters:
            raise AuditError(f"unknown cluster {name!r}; known: {sorted(deployment.clusters)}")
    patterns = [_regex(p) for p in topic or ()]
    select = (lambda t: any(p.fullmatch(t) for p in patterns)) if patterns else None
    breaches: list[Breach] = []
    summary: dict[str, dict] = {}
    for name in names:
        snapshot = read_cluster(name, deployment, select)
        producer_conf, source = producer_config(deployment, name)
        found = audit_cluster(snapshot, failures)
        found += [dataclasses.replace(b, cluster=name) for b in check_producer_config(producer_conf)]
        breaches.extend(found)
        summary[name] = {
            "brokers": len(snapshot.brokers),
            "topics": len(snapshot.topics),
            "internal_topics": sum(1 for t in snapshot.topics if t.internal),
            "producer_config_source": source,
            "breaches": len(found),
        }
    if as_json:
        print_json({"failures": failures, "ok": not breaches, "clusters": summary, "breaches": [b.as_dict() for b in breaches]})
    else:
        _print(failures, summary, breaches)
    if breaches:
        raise typer.Exit(1)


def _print(failures: int, summary: dict[str, dict], breaches: list[Breach]) -> None:
    clusters = Table(title=f"message-safety audit for N={failures} broker failure(s)")
    for col in ("cluster", "brokers", "topics (internal)", "producer config from", "breaches"):
        clusters.add_column(col)
    for name, s in summary.items():
        clusters.add_row(
            name, str(s["brokers"]), f"{s['topics']} ({s['internal_topics']})", s["producer_config_source"],
            str(s["breaches"]), style="red" if s["breaches"] else "green",
        )
    console.print(clusters)
    if not breaches:
        console.print(f"[green]no breaches: safe for {failures} broker failure(s)[/]")
        return
    table = Table(title=f"{len(breaches)} breach(es)")
    for col in ("cluster", "resource", "setting", "actual", "required", "why"):
        table.add_column(col)
    for b in breaches:
        table.add_row(b.cluster, b.resource, b.setting, b.actual, b.required, b.message)
    console.print(table)


# -- options ---------------------------------------------------------


def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise AuditError(f"--topic {pattern!r} is not a valid regex: {err}") from None


# -- treedist's own producer ---------------------------------------------------------------


def producer_config(deployment: Deployment, cluster: str) -> tuple[dict, str]:
    """The librdkafka settings treedist's distributors produce to `cluster` with, and their source.

    The distributors build their producers from `treedist.records.plan.producer_settings`;
    the audit asks the same function. If it refuses the settings (a client setting
    contradicting acks=all or enable.idempotence=true), the audit judges what the deployment
    asked for over those defaults. If the pipeline cannot be imported, the deployment's
    `client` settings over acks=all and enable.idempotence=true; the source column says which.
    """
    required = {"acks": "all", "enable.idempotence": "true"}
    try:
        from treedist.kafka.clients import SettingConflict
        from treedist.records.plan import producer_settings
    except ImportError as err:
        conf = {**required, **deployment.clusters[cluster].client_config()}
        return conf, f"deployment client + acks=all, enable.idempotence=true (sink not importable: {err.name})"
    client = deployment.clusters[cluster].client_config()
    try:
        return producer_settings(client, deployment.distributor.delivery_timeout_ms), SINK_SOURCE
    except SettingConflict as err:
        return {**required, **{k: str(v) for k, v in client.items()}}, f"deployment client, refused by the sink: {err}"


SINK_SOURCE = "treedist sink (SinkOptions)"
