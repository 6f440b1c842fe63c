"""A benchmark's workbench: a temp dir, fresh local brokers, a CPU/memory meter, and the
processes it started, all stopped by PID when the `with` block ends (also on error)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness.kafka import create_topic, start_clusters
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.treedist_run import TreedistRun

REPO = Path(__file__).resolve().parents[2]


class Workbench:
    def __init__(self, keep_dir: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="treedist-bench-"))
        self.keep_dir = keep_dir
        self.clusters = []
        self.runs: list[TreedistRun] = []
        self.procs: list[subprocess.Popen] = []
        self.meter = TreeMeter(roots={}).start()

    def __enter__(self) -> "Workbench":
        return self

    def brokers(self, names: list[str], topics: dict[str, int], tag: str) -> dict[str, str]:
        """Fresh brokers `names` (their CPU metered as `broker:<tag>:<name>`) with `topics`."""
        clusters = start_clusters(names, self.dir / f"brokers-{tag}")
        self.clusters.append(clusters)
        for name, broker in clusters.brokers.items():
            self.meter.add(f"broker:{tag}:{name}", broker.pid)
            for topic, partitions in topics.items():
                create_topic(clusters.bootstrap[name], topic, partitions)
        return dict(clusters.bootstrap)

    def stop_brokers(self) -> None:
        while self.clusters:
            self.clusters.pop().stop()

    def loop(self, name: str, mode: str, args: dict) -> subprocess.Popen:
        """Start a hand-written baseline process (benchmarks.harness.loops), metered as `name`."""
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.harness.loops", mode, json.dumps(args)],
                                cwd=REPO, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        self.meter.add(name, proc.pid)
        return proc

    @staticmethod
    def result(proc: subprocess.Popen, timeout: float) -> dict:
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"baseline process exited with {proc.returncode}")
        return json.loads(out.strip().splitlines()[-1])

    def treedist(self, name: str, config: Path, units: list[str] | None = None) -> TreedistRun:
        """`treedist run -c config`; with `units`, only those units (benchmarks.harness.one_unit)."""
        run = TreedistRun(config, self.dir / f"{name}.log", units)
        self.runs.append(run)
        self.meter.add(name, run.pid)
        return run

    def __exit__(self, *exc) -> None:
        try:
            for run in self.runs:
                run.stop()
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            self.meter.stop()
        finally:
            self.stop_brokers()
            if not self.keep_dir:
                shutil.rmtree(self.dir, ignore_errors=True)
