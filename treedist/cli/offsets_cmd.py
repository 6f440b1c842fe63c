"""`treedist offsets show`: a consumer group's committed offsets on every cluster, side by side."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from treedist.cli.common import ConfigOption, JsonOption, console, load, print_json

offsets_app = typer.Typer(help="Consumer-group offset distribution.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(offsets_app, name="offsets")


@offsets_app.command("show")
def show(
    config: Path = ConfigOption,
    group: str = typer.Option(..., "--group", help="Consumer group to show."),
    as_json: bool = JsonOption,
) -> None:
    """Per partition and cluster: committed offset, lag (end - committed), how it was made, age of the last translation.

    Example: treedist offsets show -c deploy.yaml --group billing"""
    from treedist.offsets.status import group_status

    status = group_status(load(config), group)
    if as_json:
        print_json(status.as_dict())
        return
    table = Table(title=f"group {group} (offsets.mode: {status.mode})")
    for col in ("topic", "partition", "cluster", "committed", "end", "lag", "made by", "flags", "translated"):
        table.add_column(col)
    for r in status.rows:
        age = "" if r.translated_age_s is None else f"{r.translated_age_s:.1f} s ago"
        table.add_row(r.topic, str(r.partition), r.cluster, str(r.committed), _text(r.end), _text(r.lag), r.how,
                      format(r.flags, "04b"), age)
    console.print(table)
    for cluster in status.skipped_active:
        console.print(f"[yellow]{cluster}: {status.members[cluster]} active members; treedist skips the group there[/]")
    for cluster, error in status.errors.items():
        console.print(f"[red]{cluster}: not read: {error}[/]")
    if not status.rows:
        console.print(f"no committed offsets of group {group!r} on selected topics")


def _text(value: object) -> str:
    return "" if value is None else str(value)
