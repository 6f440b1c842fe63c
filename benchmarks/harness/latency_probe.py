"""Latency as users see it: a consumer on each target receives the copies; latency = time of
receipt - the record's CreateTime (every contender keeps the original timestamp). Its own
process, so that its CPU (and its GIL) is not the benchmark's sampler's or producer's.

Run: python -m benchmarks.harness.latency_probe '<json: targets [{name, bootstrap, topic,
partitions, origin (optional: only copies whose `origin_header` value starts with it, e.g. `c1/`:
treedist's copies of one cluster's records among the others' in the same topic), origin_header,
timestamp_header (optional: the source record's CreateTime, decimal ms, is in this header of the
copy, not the copy's own CreateTime: spark_rtm's, whose sink cannot set a record's timestamp)}],
read_committed (optional: exactly-once runs read as their users must)>'. It prints `ready` once its consumers are assigned (at the end of each
partition), then reads one JSON line on stdin, {from_ms, until_ms, expected}: the CreateTime
range of the measured records and how many were produced in it; it keeps receiving until
every target got them all or 20 s (`wait_s`) passed, then prints one JSON line of percentiles per
target; with `window_s` also per window of CreateTime (benchmarks/first_seconds.py).
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from benchmarks.harness.kafka import percentiles

# Latency settings, not throughput: a fetch returns as soon as one record is there.
SETTINGS = {"enable.auto.commit": False, "enable.partition.eof": False, "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1, "receive.message.max.bytes": 1_000_000_000}


class Receiver(threading.Thread):
    def __init__(self, target: dict, read_committed: bool = False) -> None:
        super().__init__(name=f"probe-{target['name']}", daemon=True)
        self.target = target
        isolation = "read_committed" if read_committed else "read_uncommitted"
        self.consumer = Consumer({"bootstrap.servers": target["bootstrap"], "group.id": f"probe-{target['name']}",
                                  **SETTINGS, "isolation.level": isolation})
        self.consumer.assign([TopicPartition(target["topic"], p, OFFSET_END) for p in range(target["partitions"])])
        self.samples: list[tuple[int, float]] = []  # (CreateTime ms, latency ms)
        self.halt = threading.Event()
        origin = target.get("origin")
        self.origin = (target.get("origin_header", "treedist-origin"), origin.encode()) if origin else None
        self.stamp = target.get("timestamp_header")

    def wanted(self, msg) -> bool:
        if self.origin is None:
            return True
        name, prefix = self.origin
        return any(k == name and v is not None and v.startswith(prefix) for k, v in msg.headers() or ())

    def created(self, msg) -> int:
        """The source record's CreateTime (ms): the copy's own, or the timestamp header's value."""
        if self.stamp is None:
            return msg.timestamp()[1]
        for k, v in reversed(msg.headers() or ()):
            if k == self.stamp and v:
                return int(v)
        return msg.timestamp()[1]  # a copy without it: its own CreateTime (never expected)

    def run(self) -> None:
        consume, samples, stamp, created = self.consumer.consume, self.samples, self.stamp, self.created
        while not self.halt.is_set():
            batch = consume(10_000, 0.05)
            now_ms = time.time() * 1000
            for msg in batch:
                if msg.error() is None and self.wanted(msg):
                    ts = msg.timestamp()[1] if stamp is None else created(msg)
                    samples.append((ts, now_ms - ts))
        self.consumer.close()

    def in_window(self, lo: int, hi: int) -> list[float]:
        return [lat for ts, lat in list(self.samples) if lo <= ts < hi]


def main(targets: list[dict], read_committed: bool = False) -> dict:
    gc.disable()  # millions of small tuples, no cycles: the collector would only add pauses
    receivers = [Receiver(t, read_committed) for t in targets]
    for r in receivers:
        r.start()
    time.sleep(1.0)  # the consumers resolve their end offsets before anything is measured
    print("ready", flush=True)
    phase = json.loads(sys.stdin.readline())
    lo, hi, expected = phase["from_ms"], phase["until_ms"], phase["expected"]
    deadline = time.monotonic() + phase.get("wait_s", 20)
    while time.monotonic() < deadline and any(len(r.in_window(lo, hi)) < expected for r in receivers):
        time.sleep(0.5)
    for r in receivers:
        r.halt.set()
        r.join(10)
    out = {r.target["name"]: {**percentiles(r.in_window(lo, hi)), "expected": expected} for r in receivers}
    if phase.get("window_s"):  # benchmarks/first_seconds.py: per window of CreateTime from `from_ms`
        for r in receivers:
            mine = [(ts, lat) for ts, lat in list(r.samples) if lo <= ts < hi]
            out[r.target["name"]].update(first_receipt_ms=min((ts + lat for ts, lat in mine), default=None),
                                         windows=windows(mine, lo, hi, phase["window_s"]))
    return out


def windows(samples: list[tuple[int, float]], origin_ms: int, until_ms: int, window_s: float) -> list[dict]:
    """Percentiles of the latencies of the records created in each window
    [origin + k*window_s, origin + (k+1)*window_s) before `until_ms`."""
    width = window_s * 1000
    grouped: list[list[float]] = [[] for _ in range(max(1, int((until_ms - origin_ms + width - 1) // width)))]
    for ts, lat in samples:
        if origin_ms <= ts < until_ms:
            grouped[min(len(grouped) - 1, int((ts - origin_ms) // width))].append(lat)
    return [{"from_s": round(k * window_s, 1), **percentiles(g)} for k, g in enumerate(grouped)]


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    print(json.dumps(main(spec["targets"], spec.get("read_committed", False))), flush=True)
