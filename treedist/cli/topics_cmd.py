"""`treedist topics diff|sync`: topic metadata across the clusters (treedist.topics).

diff exits 0 when every cluster agrees, 1 on drift, 2 on errors (e.g. an unreachable
cluster: a diff without it would not be a diff). sync runs one pass (with --dry-run, only
plans it) and prints what it changed or would change; a pass that could not do everything
exits 2 naming each failed action.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.table import Table

from treedist.cli.common import (
    ConfigOption, JsonOption, console, dry_run_option, exit_if_failed, load, print_json, print_skipped,
)

topics_app = typer.Typer(help="Topic metadata across the clusters: diff and sync.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")


@topics_app.command("diff")
def diff_command(config: Path = ConfigOption, as_json: bool = JsonOption) -> None:
    """Per logical topic and cluster: missing topics, partition counts, config drift; exit 1 on drift.

    Example: treedist topics diff -c deploy.yaml"""
    from treedist.topics import TopicSyncError
    from treedist.topics.drift import drift_report
    from treedist.topics.sync import TopicSync, sync_rules

    deployment = load(config)
    sync = TopicSync(deployment)
    observed, unreachable = sync.observe()
    if unreachable:
        raise TopicSyncError("; ".join(unreachable.values()))
    report = drift_report(observed, sync_rules(deployment))
    drift = [t for t in report if t.drifts]
    if as_json:
        print_json({"drift": bool(drift), "topics": [t.as_dict() for t in report]})
    else:
        _print_diff(report, deployment.naming(), list(deployment.clusters))
    if drift:
        raise typer.Exit(1)


def _print_diff(report, naming, clusters: list[str]) -> None:
    if not report:
        console.print("no distributed topic on any cluster")
        return
    table = Table(box=box.SIMPLE_HEAVY)
    table.add_column("topic")
    for cluster in clusters:
        table.add_column(cluster)
    table.add_column("drift")
    for t in report:
        cells = []
        for cluster in clusters:
            if cluster in t.missing:
                cells.append("[red]missing[/]")
            else:
                name = naming.physical(cluster, t.topic)
                parts = f"{t.partitions[cluster]}p" if t.partitions else ""
                cells.append(" ".join(x for x in (name if name != t.topic else "", parts) if x) or "ok")
        table.add_row(t.topic, *cells, "[red]yes[/]" if t.drifts else "no")
    console.print(table)
    for t in report:
        for title, keys in (("config drift", t.configs), ("excluded keys (never copied)", t.excluded)):
            for key, values in keys.items():
                shown = ", ".join(f"{c}={v if v is not None else '-'}" for c, v in values.items())
                console.print(f"{t.topic}: {title}: {key}: {shown}")
    drifting = sum(t.drifts for t in report)
    console.print(f"[red]{drifting} of {len(report)} topic(s) drift[/]" if drifting else f"[green]{len(report)} topic(s) agree[/]")


@topics_app.command("sync")
def sync_command(config: Path = ConfigOption, dry_run: bool = dry_run_option("change")) -> None:
    """One topic sync pass: create missing topics, add partitions, copy configs; print what it did.

    Example: treedist topics sync -c deploy.yaml --dry-run"""
    from treedist.topics.reconcile import describe, describe_conflict
    from treedist.topics.sync import TopicSync

    deployment = load(config)
    result = TopicSync(deployment).run_once(dry_run=dry_run, raise_errors=False)
    print_skipped(result.unreachable.values())
    for conflict in result.plan.conflicts:
        console.print(f"conflict: {describe_conflict(conflict)}")
    actions = result.plan.actions if dry_run else result.applied
    verb = "would " if dry_run else ""
    for action in actions:
        console.print(f"{verb}{describe(action)}")
    console.print(f"{len(actions)} change(s){' planned (dry run)' if dry_run else ''}")
    exit_if_failed(result.errors)
