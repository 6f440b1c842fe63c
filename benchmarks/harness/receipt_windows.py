"""Receipt latency per time window (the probe of benchmarks/first_seconds.py): the receivers of
latency_probe (a consumer per target, latency = receipt - CreateTime), in their own process;
the samples are grouped by the record's CreateTime into windows from a given origin.

Run: python -m benchmarks.harness.receipt_windows '<json: targets [{name, bootstrap, topic,
partitions}]>'. Prints `ready` once its consumers are assigned, then reads one JSON line on
stdin, {origin_ms, window_s, until_ms, expected}; it keeps receiving until every target got
`expected` records created in [origin_ms, until_ms) or 30 s passed, then prints one JSON line:
per target, the percentiles of each window ([origin + k*window_s, origin + (k+1)*window_s)).
"""

from __future__ import annotations

import gc
import json
import sys
import time

from benchmarks.harness.kafka import percentiles
from benchmarks.harness.latency_probe import Receiver


def windows(samples: list[tuple[int, float]], origin_ms: int, until_ms: int, window_s: float) -> list[dict]:
    """Percentiles of the latencies of the records created in each window from `origin_ms`."""
    width = window_s * 1000
    count = max(1, int((until_ms - origin_ms + width - 1) // width))
    grouped: list[list[float]] = [[] for _ in range(count)]
    for ts, lat in samples:
        if origin_ms <= ts < until_ms:
            grouped[min(count - 1, int((ts - origin_ms) // width))].append(lat)
    return [{"from_s": round(k * window_s, 1), **percentiles(g)} for k, g in enumerate(grouped)]


def main(targets: list[dict]) -> dict:
    gc.disable()  # many small tuples, no cycles: the collector would only add pauses
    receivers = [Receiver(t) for t in targets]
    for r in receivers:
        r.start()
    time.sleep(1.0)  # the consumers resolve their end offsets before anything is measured
    print("ready", flush=True)
    phase = json.loads(sys.stdin.readline())
    lo, hi, expected = phase["origin_ms"], phase["until_ms"], phase["expected"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(len(r.in_window(lo, hi)) < expected for r in receivers):
        time.sleep(0.5)
    for r in receivers:
        r.halt.set()
        r.join(10)
    return {r.target["name"]: {"received": len(r.in_window(lo, hi)), "expected": expected,
                               "first_receipt_ms": min((ts + lat for ts, lat in r.samples if lo <= ts < hi), default=None),
                               "all": percentiles(r.in_window(lo, hi)),
                               "windows": windows(list(r.samples), lo, hi, phase["window_s"])} for r in receivers}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1])["targets"])), flush=True)
