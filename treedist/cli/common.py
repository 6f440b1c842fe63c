"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import typer
from rich.console import Console

from treedist.config import Deployment, load_deployment

console = Console()
err_console = Console(stderr=True)


def fit_consoles() -> None:
    """Take the output width from COLUMNS as it is now (CLI, at each command's start). rich reads
    COLUMNS once, when a console is made, so a process that runs several commands (a test's
    CliRunner) printed every table at the width of the environment it was imported in."""
    columns = os.environ.get("COLUMNS", "")
    for each in (console, err_console):
        each.width = int(columns) if columns.isdigit() else None  # type: ignore[assignment]  # None: ask at each print


ConfigOption = typer.Option(..., "--config", "-c", help="Deployment YAML file.", exists=False)
JsonOption = typer.Option(False, "--json", help="Print JSON instead of tables.")


def dry_run_option(does: str) -> Any:
    """The `--dry-run` flag of a sync command (`topics sync`, `acls sync`): plan one pass, print
    what it would `does`, change nothing."""
    return typer.Option(False, "--dry-run", help=f"Only print what a pass would {does}.")


def load(config: Path) -> Deployment:
    return load_deployment(config)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def print_skipped(unreachable: Iterable[str]) -> None:
    """A sync pass's clusters it could not reach (`topics sync`, `acls sync`), on stderr."""
    for why in unreachable:
        err_console.print(f"[yellow]skipped:[/] {why}")


def exit_if_failed(errors: Iterable[object]) -> None:
    """A sync pass's failed actions on stderr, one a line; exit 2 when there is any."""
    errors = list(errors)
    for error in errors:
        err_console.print(f"[red]failed:[/] {error}")
    if errors:
        raise typer.Exit(2)
