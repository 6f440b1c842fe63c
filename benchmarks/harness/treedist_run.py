"""treedist as the benchmarks run it: `treedist run -c FILE` (or, with units, only those
units: benchmarks.harness.one_unit) as a subprocess in its own process group, stopped with
SIGINT (as Ctrl-C), escalated after a timeout, by PID only."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.harness import procs
from treedist.local.deployment import local_deployment

REPO = Path(__file__).resolve().parents[2]


def write_deployment(path: Path, bootstrap: dict[str, str], tree: object, topics: list[str], checkpoints: Path,
                     master: str = "local[2,4]", distributor: dict | None = None, passive: tuple[str, ...] = ()) -> Path:
    """Write a deployment for `treedist run -c`; `passive` clusters only receive (`clusters.<name>.passive`)."""
    spec = local_deployment(bootstrap, topics=topics, tree=tree, checkpoint_location=str(checkpoints),
                            spark={"master": master}, **({"distributor": distributor} if distributor else {}))
    for name in passive:
        spec["clusters"][name]["passive"] = True
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


class TreedistRun:
    """One `treedist run -c` (or one_unit) process; `pid` is the root of the tree to measure."""

    def __init__(self, config: Path, log_file: Path, units: list[str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.log_file = log_file
        self.started = time.monotonic()
        if units:
            command = [sys.executable, "-m", "benchmarks.harness.one_unit", "-c", str(config)]
            command += [arg for unit in units for arg in ("--unit", unit)]
        else:
            cli = Path(sys.executable).parent / "treedist"
            command = [str(cli)] if cli.exists() else [sys.executable, "-c", "from treedist.cli import main; main()"]
            command += ["run", "-c", str(config), *args]
        with open(log_file, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check(self) -> None:
        if not self.alive():
            tail = self.log_file.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"treedist run exited with {self.proc.returncode}:\n{tail}")

    def stop(self, timeout: float = 90.0) -> int | None:
        return procs.stop_group(self.proc, timeout)
