"""Results files and run facts: one JSON document per run in benchmarks/results/, a watchdog."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
import _thread
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"


def machine() -> dict:
    def version(module: str) -> str | None:
        try:
            return __import__(module).__version__
        except Exception:  # a missing module is reported as None, not a failed benchmark
            return None

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "python": platform.python_version(),
        "java": java[0] if java else None,
        "pyspark": version("pyspark"),
        "confluent_kafka": version("confluent_kafka"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=RESULTS.parent).stdout.strip() or None,
        "cpu_reference_ms": cpu_reference_ms(),
    }


def cpu_reference_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop, best of 3: how fast this machine's cores
    are, so that runs on different days can be compared (machines of one kind differ: the
    single link's loop needed 3.4 µs of CPU per record on 2026-11-24 and 8.9 on 2026-11-25)."""
    best = float("inf")
    for _ in range(3):
        started, total = time.process_time(), 0
        for i in range(1_000_000):
            total += i * i % 7
        best = min(best, time.process_time() - started)
    return round(best * 1000, 1)


def save(scenario: str, document: dict, keep: bool = True) -> Path | None:
    document = {"scenario": scenario, "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **document}
    text = json.dumps(document, indent=2)
    print(text)
    if not keep:
        return None
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{scenario}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}.json"
    path.write_text(text + "\n")
    print(f"saved {path}", file=sys.stderr)
    return path


def median_and_range(values: list) -> dict:
    """Median, min, max and every value of one measure over repeated rounds (None: no value)."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"median": None, "min": None, "max": None, "all": values}
    mid = len(known) // 2
    median = known[mid] if len(known) % 2 else round((known[mid - 1] + known[mid]) / 2, 3)
    return {"median": median, "min": known[0], "max": known[-1], "all": values}


def over_rounds(rounds: list[dict], key: str) -> tuple[dict, dict, dict]:
    """Of repeated rounds, each with a `ratios` dict: the ratios' medians, their spread
    (`median_and_range` per ratio) and the round whose `key` ratio is the median."""
    spread = {m: median_and_range([r["ratios"][m] for r in rounds]) for m in rounds[0]["ratios"]}
    middle = sorted(rounds, key=lambda r: r["ratios"][key] or 0)[len(rounds) // 2]
    return {m: v["median"] for m, v in spread.items()}, spread, middle


def watchdog(seconds: float) -> None:
    """After `seconds`, interrupt the main thread (KeyboardInterrupt: the scenario's `finally`
    blocks stop treedist and the brokers by PID); if it is still running 120 s later, exit."""

    def fire() -> None:
        print(f"watchdog: benchmark still running after {seconds:.0f}s; stopping it", file=sys.stderr)
        _thread.interrupt_main()
        last = threading.Timer(120, lambda: os._exit(3))
        last.daemon = True
        last.start()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
