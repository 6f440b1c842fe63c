"""`treedist schemas diff`: per subject and cluster, versions and IDs side by side.

Exit codes: 0 when every cluster's registry matches the primary's, 1 on a difference, 2 on
errors (no schemas section, a cluster without a registry URL, a registry that does not answer).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from treedist.cli.common import ConfigOption, JsonOption, console, load, print_json
from treedist.config import ConfigError

schemas_app = typer.Typer(help="Schema registries across the deployment's clusters.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(schemas_app, name="schemas")


@schemas_app.command("diff")
def diff(config: Path = ConfigOption, as_json: bool = JsonOption) -> None:
    """Every cluster's registry side by side with the primary's; exit 1 on a difference.

    Example: treedist schemas diff -c deploy.yaml"""
    from treedist.registry.diff import compare, fetch_view

    deployment = load(config)
    schemas = deployment.schemas
    if schemas is None:
        raise ConfigError(f"{config}: schemas: no schemas section, so no registries to compare")
    missing = [c for c in deployment.clusters if c not in schemas.registries]
    if missing:
        raise ConfigError(f"{config}: schemas.registries: no registry URL for clusters {missing}")
    views = {c: fetch_view(c, schemas.registries[c]) for c in deployment.clusters}
    rows = compare(views, schemas.primary, deployment.subject_naming())
    differs = any(r.differs for r in rows)
    if as_json:
        print_json({"primary": schemas.primary, "differs": differs, "subjects": [r.as_dict() for r in rows]})
    else:
        table = Table(title=f"schemas: primary {schemas.primary}; cells are version:ID")
        table.add_column("subject (primary's name)")
        for c in views:
            table.add_column(c)
        table.add_column("")
        for r in rows:
            cells = [" ".join(f"{v}:{i}" for v, i in r.per_cluster[c]["versions"]) or "-" for c in views]
            table.add_row(r.subject, *cells, "[red]differs[/]" if r.differs else "same")
        console.print(table)
        for r in rows:
            for why in r.why:
                console.print(f"[red]{r.subject}[/]: {why}")
    raise typer.Exit(1 if differs else 0)
