"""`treedist pack-env`: the Python environment executors need, as one archive for
`spark.archives` (treedist.spark.pack_env)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from treedist.cli.common import console


def register(app: typer.Typer) -> None:
    app.command("pack-env")(pack_env)


def pack_env(
    output: Path = typer.Option(..., "--output", "-o", help="The archive to write (.tar.gz)."),
    venv: Path = typer.Option(None, "--venv", help="The venv to pack (default: the one running treedist)."),
    exclude: list[str] = typer.Option([], "--exclude", help="GLOB of archive paths to leave out, repeatable "
                                                            "(PySpark's jars and __pycache__ always are)."),
) -> None:
    """Pack a venv for executors on hosts without it: site-packages (editable installs copied
    in), without PySpark's jars; the base interpreter is not shipped and must exist at the same
    path on every executor host. Ship it with spark.archives FILE#environment and start the
    driver with PYSPARK_PYTHON=./environment/bin/python (docs/operations.md).

    Example: treedist pack-env -o treedist-env.tar.gz --exclude '*/site-packages/playwright/*'"""
    from treedist.spark.pack_env import ALIAS, pack_environment

    result = pack_environment(venv or Path(sys.prefix), output, tuple(exclude))
    console.print(f"{result.archive}: {result.bytes / 2**20:.0f} MiB, {result.files} files"
                  + (f"; editable packages copied in: {', '.join(result.editable)}" if result.editable else ""))
    console.print(f"every executor host needs the interpreter {result.interpreter}/python3 at that path")
    console.print(f"spark.conf: {{spark.archives: {result.archive.absolute()}#{ALIAS}}}; "
                  f"driver environment: PYSPARK_PYTHON=./{ALIAS}/bin/python")
