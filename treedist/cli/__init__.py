"""The `treedist` command line (typer). Each command group lives in its own module that
exposes `register(app)`; this module only wires them and maps errors to exit codes:
0 done and clean; 1 drift, loss or a breach (set by the commands); 2 bad input (a
`TreedistError`: config, unreachable cluster, ...); 3 an unexpected error, one line unless
`--debug` (anywhere on the command line) asks for its traceback; 130 after Ctrl-C."""

from __future__ import annotations

import inspect
import logging
import re
import sys

import typer

from treedist import __version__
from treedist.cli.common import fit_consoles
from treedist.errors import TreedistError
from treedist.memory import limit_malloc_arenas

app = typer.Typer(
    name="treedist",
    help="Keep many Kafka clusters in sync: copy-flag distribution over a tree of clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
)


def _print_version(value: bool) -> None:
    """`--version` (CLI): print the one version (treedist.__version__, which the package's
    metadata also reads) and stop before any command runs."""
    if value:
        typer.echo(f"treedist {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print treedist's version and exit.")) -> None:
    fit_consoles()


def _register_all() -> None:
    from treedist.cli import (
        acls_cmd, audit_cmd, config_cmd, import_cmd, local_cmd, offsets_cmd, pack_env_cmd, plan_cmd, registry_cmd, run_cmd,
        schemas_cmd, status_cmd, topics_cmd, topology_cmd, verify_cmd, worker_cmd,
    )

    for module in (topology_cmd, local_cmd, run_cmd, worker_cmd, config_cmd, status_cmd, verify_cmd, plan_cmd,
                   audit_cmd, topics_cmd, offsets_cmd, registry_cmd, schemas_cmd, acls_cmd, pack_env_cmd, import_cmd):
        module.register(app)


_register_all()


def _reflow(text: str) -> str:
    """A docstring as help text: each paragraph on one line, so the terminal wraps it (typer
    keeps a docstring's line breaks, and `--help` broke lines mid-sentence). A paragraph that
    starts with click's `\\b` line, or whose lines are a list or indented, keeps its lines."""
    paragraphs = []
    for paragraph in re.split(r"\n[ \t]*\n", inspect.cleandoc(text)):
        paragraph = paragraph.strip("\n")
        if not paragraph.strip():
            continue
        lines = paragraph.splitlines()
        if paragraph.startswith("\b") or any(line.startswith((" ", "- ", "* ")) for line in lines):
            paragraphs.append(paragraph)
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


def _reflow_help(typer_app: typer.Typer) -> None:
    """Every command's help (its docstring unless given) reflowed, in every group."""
    for command in typer_app.registered_commands:
        text = command.help if command.help is not None else inspect.getdoc(command.callback)
        if text:
            command.help = _reflow(text)
    for group in typer_app.registered_groups:
        _reflow_help(group.typer_instance)


_reflow_help(app)


EXIT_BAD_INPUT = 2
EXIT_UNEXPECTED = 3
DEBUG_FLAG = "--debug"


def main() -> None:
    """Run the command; a treedist error is one line on stderr and exit 2 (with its
    traceback in the log too when the command runs with --log-level debug); any other
    exception is one line and exit 3, its traceback printed only with --debug."""
    limit_malloc_arenas()  # before any thread of this process starts (treedist.memory)
    debug = DEBUG_FLAG in sys.argv[1:]
    if debug:
        sys.argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a != DEBUG_FLAG]
    try:
        app()
    except TreedistError as err:
        if debug or logging.getLogger().isEnabledFor(logging.DEBUG):
            logging.getLogger("treedist").debug("the error's traceback", exc_info=err)
        typer.secho(f"error: {err}", fg=typer.colors.RED, err=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as err:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if debug:
            import traceback

            traceback.print_exc()
        typer.secho(f"error: unexpected {type(err).__name__}: {err} (rerun with {DEBUG_FLAG} for the traceback)",
                    fg=typer.colors.RED, err=True)
        sys.exit(EXIT_UNEXPECTED)
