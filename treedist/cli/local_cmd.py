"""`treedist local up|down|status`: local Kafka-protocol clusters on loopback ports."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from treedist.cli.common import JsonOption, console, print_json
from treedist.local import LocalClusterError, LocalClusters
from treedist.local.deployment import write_local_deployment

local_app = typer.Typer(help="Launch and stop local Kafka-protocol clusters (noida-db).", no_args_is_help=True)
StateDirOption = typer.Option(Path(".treedist/local"), "--state-dir", help="Data dirs, logs and the PID/port state file.")


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")


@local_app.command("up")
def up(
    clusters: int = typer.Option(4, "--clusters", "-n", min=1, max=26, help="How many clusters (c1..cN)."),
    state_dir: Path = StateDirOption,
    write_config: Path = typer.Option(None, "--write-config", help="Also write a deployment YAML for these clusters (balanced tree)."),
    as_json: bool = JsonOption,
) -> None:
    """Start N brokers on free loopback ports (re-uses ones already running) and wait until each answers."""
    started = LocalClusters.start([f"c{i}" for i in range(1, clusters + 1)], state_dir)
    if write_config:
        write_local_deployment(write_config, started.bootstrap)
    _show(started, as_json)


@local_app.command("status")
def status(state_dir: Path = StateDirOption, as_json: bool = JsonOption) -> None:
    """Show the local brokers recorded in the state dir and whether each runs."""
    _show(_loaded(state_dir), as_json)


@local_app.command("down")
def down(state_dir: Path = StateDirOption) -> None:
    """Stop the local brokers by PID (data stays in the state dir)."""
    clusters = _loaded(state_dir)
    clusters.stop()
    console.print(f"stopped {len(clusters.brokers)} local clusters; data kept in {state_dir}")


def _loaded(state_dir: Path) -> LocalClusters:
    clusters = LocalClusters.load(state_dir)
    if clusters is None:
        raise LocalClusterError(f"no local clusters recorded in {state_dir} (run `treedist local up`)")
    return clusters


def _show(clusters: LocalClusters, as_json: bool) -> None:
    rows = clusters.status()
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"local clusters ({clusters.base_dir})")
    for col in ("cluster", "bootstrap", "pid", "running", "data dir"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], r["bootstrap"], str(r["pid"]), "yes" if r["running"] else "[red]no[/]", r["data_dir"])
    console.print(table)
