"""The `treedist` command line (typer). Each command group lives in its own module that
exposes `register(app)`; this module only wires them and maps treedist errors to exit 2."""

from __future__ import annotations

import logging
import sys

import typer

from treedist.errors import TreedistError

app = typer.Typer(
    name="treedist",
    help="Keep many Kafka clusters in sync: copy-flag distribution over a tree of clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register_all() -> None:
    from treedist.cli import (
        audit_cmd, config_cmd, local_cmd, offsets_cmd, plan_cmd, registry_cmd, run_cmd, schemas_cmd, status_cmd,
        topics_cmd, topology_cmd, verify_cmd, worker_cmd,
    )

    for module in (topology_cmd, local_cmd, run_cmd, worker_cmd, config_cmd, status_cmd, verify_cmd, plan_cmd,
                   audit_cmd, topics_cmd, offsets_cmd, registry_cmd, schemas_cmd):
        module.register(app)


_register_all()


def main() -> None:
    """Run the command; a treedist error is one line on stderr and exit 2 (with its
    traceback in the log too when the command runs with --log-level debug)."""
    try:
        app()
    except TreedistError as err:
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            logging.getLogger("treedist").debug("the error's traceback", exc_info=err)
        typer.secho(f"error: {err}", fg=typer.colors.RED, err=True)
        sys.exit(2)
