"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from treedist.config import Deployment, load_deployment

console = Console()
err_console = Console(stderr=True)

ConfigOption = typer.Option(..., "--config", "-c", help="Deployment YAML file.", exists=False)
JsonOption = typer.Option(False, "--json", help="Print JSON instead of tables.")


def load(config: Path) -> Deployment:
    return load_deployment(config)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
