"""Placeholder: this command group is being built."""

import typer


def register(app: typer.Typer) -> None:
    pass
