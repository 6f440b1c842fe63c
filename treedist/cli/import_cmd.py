"""`treedist import mm2`: a MirrorMaker 2 configuration as a treedist deployment (CLI process).

Reads the .properties file, writes the deployment YAML, prints what the operator must do: the
environment variables that hold the credentials (their names, never the values) and the one
message of every MM2 setting without an equivalent. The mapping is treedist.mm2import's.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import typer


import_app = typer.Typer(help="Import another tool's configuration as a deployment.", no_args_is_help=True)
EXIT_BAD_INPUT = 2


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")


def _dc_labels(values: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for value in values:
        cluster, eq, dc = value.partition("=")
        if not eq or not cluster.strip() or not dc.strip():
            raise typer.BadParameter(f"{value!r}: expected CLUSTER=DC", param_hint="--dc")
        labels[cluster.strip()] = dc.strip()
    return labels


@import_app.command("mm2")
def mm2(
    input_: Path = typer.Option(..., "--input", "-i", help="MirrorMaker 2's properties file (mm2.properties)."),
    output: Path = typer.Option(..., "--output", "-o", help="The deployment YAML to write."),
    dc: list[str] = typer.Option([], "--dc", help="CLUSTER=DC, repeatable: clusters of one data centre are kept "
                                                  "under one subtree (default: read from the cluster names)."),
    force: bool = typer.Option(False, "--force", help="Overwrite OUTPUT if it exists."),
) -> None:
    """Write a deployment for MM2's clusters, flows, topics, groups and client settings.

    \b
    1. read INPUT (Java's .properties format) and map it (treedist.mm2import);
    2. refuse an existing OUTPUT unless --force;
    3. write OUTPUT through a temporary file in its directory, renamed into place;
    4. print the credentials' environment variables and every setting without an equivalent.

    Example: treedist import mm2 -i mm2.properties -o deploy.yaml --dc dc1-a=dc1 --dc dc1-b=dc1"""
    from treedist.mm2import import Mm2ImportError, import_mm2

    labels = _dc_labels(dc)
    try:
        raw = input_.read_bytes()
    except OSError as err:
        raise Mm2ImportError(f"{input_}: cannot read: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # what java.util.Properties.load(InputStream) reads
    try:
        imported = import_mm2(text, labels, source=input_.name)
    except Mm2ImportError as err:
        raise Mm2ImportError(f"{input_}: {err}") from None
    if not (output.parent if str(output.parent) else Path(".")).is_dir():
        raise Mm2ImportError(f"{output}: its directory does not exist")
    if output.exists() and not force:
        typer.secho(f"error: {output} exists; --force overwrites it", fg=typer.colors.RED, err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    _write(output, imported.yaml())
    passive = f", passive: {', '.join(imported.passive)}" if imported.passive else ""
    typer.echo(f"wrote {output}: {len(imported.clusters)} clusters ({', '.join(imported.clusters)}), "
               f"{len(imported.flows)} MM2 flows{passive}")
    names = imported.report.secrets.names
    if names:
        typer.echo("set these environment variables before loading it (the credentials are not in the file):")
        for name, what in names.items():
            typer.echo(f"  {name}  ({what})")
    typer.echo(imported.report.message())
    typer.echo(f"check it: treedist topology show -c {output}")


def _write(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
