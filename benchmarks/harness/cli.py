"""The options every scenario shares, and what every run starts with."""

from __future__ import annotations

import argparse
import signal
import sys

from benchmarks.harness.results import machine, watchdog


def parser(doc: str, max_seconds: float) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--master", default="local[2,4]", help="Spark master of treedist's deployment")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    p.add_argument("--no-save", action="store_true", help="print the JSON only, no results file")
    p.add_argument("--max-seconds", type=float, default=max_seconds, help="watchdog: stop the run after this long")
    return p


def begin(args: argparse.Namespace, **quick: object) -> dict:
    """Apply --quick's smaller settings, arm the watchdog, make SIGTERM unwind (so the
    workbench stops the brokers and treedist it started); the run's starting facts."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.quick:
        for name, value in quick.items():
            setattr(args, name, value)
    watchdog(args.max_seconds)
    return {"machine_at_start": machine(), "config": vars(args)}
