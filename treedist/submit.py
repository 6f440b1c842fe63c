"""The application `spark-submit` runs (driver): `treedist run -c F` or `treedist worker -c F`
in the process spark-submit launched, on the SparkContext made in spark-submit's JVM with its
master and settings (treedist.spark.submitted). spark-submit takes a file, not a module, so
`scripts/treedist-submit.py` calls `main`:

    spark-submit --master spark://host:7077 scripts/treedist-submit.py -c deploy.yaml
    spark-submit --master spark://host:7077 scripts/treedist-submit.py worker -c deploy.yaml --name w1

Without `run` or `worker` first, the deployment decides: `worker` when it has a `control`
section, `run` otherwise. Every other argument is the command's own (`--metrics-port`,
`--ui-port`, `--status-port`, ...). The embedded demo (`run` without `-c`) starts local
clusters and worker processes of its own and is refused here. Exit codes are the CLI's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

import typer
import yaml

COMMANDS = ("run", "worker")
USAGE = "usage: spark-submit [options] scripts/treedist-submit.py [run|worker] -c DEPLOYMENT.yaml [options]"


def config_path(args: Sequence[str]) -> str | None:
    """The value of -c/--config in `args` (pure)."""
    for i, arg in enumerate(args):
        if arg in ("-c", "--config") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def command_line(args: Sequence[str], has_control: Callable[[str], bool]) -> list[str]:
    """The treedist command line for the entry point's `args` (pure but for `has_control`,
    which reads the deployment file); `typer.BadParameter` when there is no -c."""
    args = list(args)
    command = args.pop(0) if args and args[0] in COMMANDS else None
    path = config_path(args)
    if path is None and "--help" in args:
        return [command or "run", *args]
    if path is None:
        raise typer.BadParameter(f"-c DEPLOYMENT is required under spark-submit (the embedded demo starts "
                                 f"clusters and workers of its own); {USAGE}")
    return [command or ("worker" if has_control(path) else "run"), *args]


def _has_control(path: str) -> bool:
    """Whether the deployment file has a `control` section (a file that cannot be read is
    left to the command, which names it)."""
    try:
        spec = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(spec, dict) and spec.get("control") is not None


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command; one line and exit 2 for a bad command line, as the CLI does."""
    from treedist.cli import EXIT_BAD_INPUT, main as cli_main

    try:
        line = command_line(sys.argv[1:] if argv is None else argv, _has_control)
    except typer.BadParameter as err:
        typer.secho(f"error: {err}", fg=typer.colors.RED, err=True)
        sys.exit(EXIT_BAD_INPUT)
    sys.argv = ["treedist", *line]
    cli_main()


if __name__ == "__main__":
    main()
