"""`--help` reads well (issue 32): help text is reflowed, so no paragraph breaks mid-sentence,
and every command ends with an example. Runs the real command tree in
process (typer's CliRunner), at a terminal wide enough that any line break left in the
output would come from the help text itself."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

from treedist.cli import _reflow, app

WIDE = {"COLUMNS": "2000", "TERMINAL_WIDTH": "2000", "NO_COLOR": "1"}


def _commands() -> list[tuple[list[str], object]]:
    """(path, command) of every command and group (typer's own click: a group has `commands`)."""
    found: list[tuple[list[str], object]] = []

    def walk(command, path: list[str]) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, path + [name])

    walk(typer.main.get_command(app), [])
    return found


def _help(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def test_reflow_joins_a_paragraph_and_keeps_lists_and_marked_blocks():
    text = "First line of a\n    sentence.\n\n    Second para\n    goes on.\n\n    \b\n    kept\n    as is\n\n    - a\n    - b"
    assert _reflow(text).split("\n\n") == ["First line of a sentence.", "Second para goes on.", "\b\nkept\nas is", "- a\n- b"]


@pytest.mark.parametrize("path,command", _commands(), ids=[" ".join(p) or "treedist" for p, _ in _commands()])
def test_every_help_paragraph_is_one_line(path, command):
    output = _help(path)
    for paragraph in (command.help or "").split("\n\n"):
        if paragraph.startswith("\b") or not paragraph.strip():
            continue
        assert "\n" not in paragraph, f"treedist {' '.join(path)}: help paragraph not reflowed: {paragraph!r}"
        # the paragraph is one output line (rich may add padding, never a break)
        assert any(paragraph.strip() in line for line in output.splitlines()), (
            f"treedist {' '.join(path)} --help breaks {paragraph[:60]!r}...")


def test_the_main_help_lists_each_command_on_one_line():
    output = _help([])
    for name, command in typer.main.get_command(app).commands.items():
        first = (command.help or "").split("\n\n")[0]
        assert any(line.strip().startswith("│ " + name) and first in line for line in output.splitlines()), name


LEAVES = [p for p, command in _commands() if not hasattr(command, "commands")]


def test_the_commands_operators_use_most_are_among_those_checked():
    assert {"run", "local up", "verify", "status", "config schema"} <= {" ".join(p) for p in LEAVES}


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(p) for p in LEAVES])
def test_every_command_ends_with_an_example(path):
    output = _help(path)
    description = output.split("╭")[0].rstrip().splitlines()
    assert description[-1].strip().startswith(f"Example: treedist {' '.join(path)} "), description[-1]


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(p) for p in LEAVES])
def test_every_example_parses_as_the_command_it_documents(path):
    """The example's options exist and have valid values: parsed by the command itself, not run."""
    import shlex

    command = dict(_commands_by_path())[" ".join(path)]
    example = next(p for p in command.help.split("\n\n") if p.startswith("Example: "))
    words = shlex.split(example.removeprefix("Example: ").split(" > ")[0])
    assert words[: len(path) + 1] == ["treedist", *path]
    command.make_context(" ".join(words[: len(path) + 1]), words[len(path) + 1:])


def _commands_by_path():
    return [(" ".join(p), c) for p, c in _commands()]
