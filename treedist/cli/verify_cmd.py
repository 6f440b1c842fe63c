"""`treedist verify`: is every original on every cluster exactly once, in order, unchanged?

Exit codes: 0 when nothing was lost (duplicates, which at-least-once delivery allows after a
crash, are reported but pass unless --strict), 1 on missing or unexpected records, order
violations or mismatched copies (and on duplicates with --strict), 2 on errors (unreachable
cluster, missing topic, a partition that cannot be read to its watermark).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.table import Table

from treedist.cli.common import ConfigOption, JsonOption, console, err_console, load, print_json

if TYPE_CHECKING:
    from treedist.verify import VerifyReport

DEFAULT_IDLE_TIMEOUT = 30.0  # treedist.verify.reader.DEFAULT_IDLE_TIMEOUT, without importing it for --help

COUNTS = ("missing", "duplicated", "unexpected", "order_violations", "mismatched")


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)


def verify_command(
    config: Path = ConfigOption,
    topic: str = typer.Option(..., "--topic", "-t", help="Topic to verify on every cluster."),
    cluster: list[str] = typer.Option(None, "--cluster", help="Only these clusters (repeatable); default: all."),
    idle_timeout: float = typer.Option(
        DEFAULT_IDLE_TIMEOUT, "--timeout", min=0.1,
        help="Seconds a cluster's read may make no progress before it fails."),
    strict: bool = typer.Option(False, "--strict", help="Fail on duplicates too (default: reported, allowed after a crash)."),
    as_json: bool = JsonOption,
) -> None:
    """Read TOPIC on every cluster; per cluster: missing, duplicated, unexpected, out of order, mismatched.

    Exit 1 on loss (missing, unexpected, out of order, mismatched); duplicates only with --strict.

    Example: treedist verify -c deploy.yaml -t orders --strict"""
    from treedist.verify import verify_topic

    deployment = load(config)
    unknown = [name for name in cluster or () if name not in deployment.clusters]
    if unknown:
        raise typer.BadParameter(f"unknown clusters {unknown}; known: {sorted(deployment.clusters)}", param_hint="--cluster")
    if not deployment.topics.matches(topic):
        err_console.print(f"[yellow]warning:[/] topic {topic!r} is not selected for distribution by {config}")
    with _progress_bars() as on_progress:
        report = verify_topic(deployment, topic, clusters=cluster or None, idle_timeout=idle_timeout,
                              progress=on_progress)
    if as_json:
        print_json(report.as_dict())
    else:
        print_report(report)
    if not (report.ok if strict else report.lossless):
        raise typer.Exit(1)


def print_report(report: "VerifyReport") -> None:
    """The verification as a person reads it: table, examples of each fault, verdict."""
    console.print(report_table(report))
    _print_examples(report)
    if report.ok:
        verdict = "[green]every cluster holds every record exactly once, in order[/]"
    elif report.lossless:
        duplicates = sum(c.duplicated for c in report.clusters)
        verdict = (f"[yellow]nothing lost; {duplicates} duplicates[/] (allowed after a crash by the at-least-once "
                   "contract; --strict fails on them)")
    else:
        verdict = "[red]verification FAILED: records lost, foreign, out of order or changed[/]"
    console.print(verdict)


def report_table(report: "VerifyReport") -> Table:
    """Per cluster: records, expected and the five counts (non-zero counts in red)."""
    table = Table(title=f"verify {report.topic!r}", box=box.SIMPLE_HEAD, padding=0, show_edge=False)
    for col in ("cluster", "records", "expected", "missing", "duplicated", "unexpected", "order\nviolations", "mismatched"):
        table.add_column(col, justify="left" if col == "cluster" else "right")
    for c in report.clusters:
        counts = [getattr(c, name) for name in COUNTS]
        table.add_row(
            c.cluster, str(c.records), str(c.expected),
            *(f"[red]{n}[/]" if n else "0" for n in counts),
        )
    return table


def _print_examples(report: "VerifyReport") -> None:
    from treedist.verify import identity

    for c in report.clusters:
        if c.ok and not c.malformed_origin:
            continue
        lines = [f"missing {identity(o)}" for o in c.missing_examples]
        lines += [f"duplicated {identity(o)}" for o in c.duplicated_examples]
        lines += [f"unexpected {identity(o)}" for o in c.unexpected_examples]
        lines += [f"malformed origin header at partition {p} offset {o}" for p, o in c.malformed_origin_examples]
        lines += [
            f"out of order {identity(v.origin)} in partition {v.partition} (after origin offset {v.after})"
            for v in c.order_violation_examples
        ]
        lines += [f"mismatched {identity(o)}" for o in c.mismatched_examples]
        console.print(f"[bold]{c.cluster}[/] examples:")
        for line in lines:
            console.print(f"  {line}", highlight=False)


@contextmanager
def _progress_bars():
    """Per-cluster progress bars on stderr while the clusters are read (only on a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bars = Progress(TextColumn("reading {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=err_console, transient=True, disable=not err_console.is_terminal)
    tasks: dict[str, object] = {}

    def on_progress(cluster: str, done: int, total: int) -> None:
        if cluster not in tasks:
            tasks[cluster] = bars.add_task(cluster, total=total)
        bars.update(tasks[cluster], completed=done, total=total)

    with bars:
        yield on_progress
