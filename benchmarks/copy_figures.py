"""CPU per copy of the copy loop (`treedist.records.copier`) with the per-partition figures
(`treedist.records.timings`: latency and age histograms, records and bytes), against the copy
loop of another revision (`--baseline REV`, default 598a193~: the commit before the figures).

One process, no broker: 2 levels (a source of the 4-cluster tree: both copy a record that has
no copy-flag header), real confluent-kafka Messages (8 partitions, 100-byte values, no
headers), produced to real Producers whose bootstrap answers nothing, so produce() only queues
(purged between rounds). Runs of `--run` records of one partition, as `read_windows` hands
them over: 20,000 (a backlog: one consume's records) and 20 (a low rate: lingering tasks);
for the figures, the task's confirm step (the histograms' buckets counted once per task) is in
the time. CPU time (process_time) per copy over `--rounds` rounds, ABAB, with Python's cycle
collector off (as in a task, `lean_gc`): the minimum (the round least disturbed by other
processes: on a loaded machine the spread is 2x) and the median.
Run: .venv/bin/python -m benchmarks.copy_figures [--baseline REV] [--records 40000] [--rounds 41]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Message, Producer

from treedist.records import copier as current
from treedist.records.positions import LevelRange, PartitionWindow
from treedist.topology.flags import MalformedFlagsPolicy

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 8
FH, OH = "treedist-copy-flags", "treedist-origin"


def load_baseline(rev: str):
    """The copier module of `rev`, loaded beside the current one."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:treedist/records/copier.py"], check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "copier_baseline.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("treedist.records.copier_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def runs_of(records: int, run: int) -> list[tuple[PartitionWindow, int, list]]:
    now = int(time.time() * 1000)
    out, per_partition = [], records // PARTITIONS
    for p in range(PARTITIONS):
        msgs = [Message(topic="bench", partition=p, offset=o, key=b"k%d" % o, value=b"v" * 100, headers=None,
                        timestamp=(1, now - 50 + o % 50)) for o in range(per_partition)]
        for lo in range(0, per_partition, run):
            chunk = msgs[lo:lo + run]
            hi = lo + len(chunk)
            out.append((PartitionWindow("bench", p, lo, hi, (LevelRange(1, lo, hi), LevelRange(3, lo, hi))), p, chunk))
    return out


def one_round(module, producers: list[Producer], runs: list, figures: bool) -> float:
    levels = [module.LevelCopy(level, mask, bit, pr.produce, lambda *row: None, None, None, f"t{level}")
              for (level, mask, bit), pr in zip(((1, 1, 1), (3, 7, 4)), producers)]
    copier = module.RecordCopier("c1", levels, FH, OH, MalformedFlagsPolicy.COPY, 1_000_000)
    copies = 0
    began = time.process_time()
    for window, partition, chunk in runs:
        copier.copy(window, "bench", partition, chunk)
    if figures:
        copier.confirm()
    spent = time.process_time() - began
    copies = copier.stats.copied
    for pr in producers:
        pr.purge()
        pr.flush(0)
    return spent / copies * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="598a193~")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    baseline = load_baseline(args.baseline)
    producers = [Producer({"bootstrap.servers": "127.0.0.1:9", "queue.buffering.max.messages": 2_000_000,
                           "queue.buffering.max.kbytes": 2_000_000, "linger.ms": 1000, "log_level": 0})
                 for _ in range(2)]
    gc.disable()
    for run in (20_000, 20):
        runs = runs_of(args.records, run)
        base, new = [], []
        for _ in range(args.rounds):
            base.append(one_round(baseline, producers, runs, figures=False))
            new.append(one_round(current, producers, runs, figures=True))
        for what, pick in (("min", min), ("median", statistics.median)):
            b, n = pick(base), pick(new)
            print(f"runs of {run:>6} records, {what:>6}: {b:.3f} µs per copy at {args.baseline}, {n:.3f} with the "
                  f"figures ({(n - b) / b * 100:+.1f}%)")


if __name__ == "__main__":
    main()
