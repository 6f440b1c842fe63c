#!/usr/bin/env python
"""Distributor throughput benchmark (issue 2, item 10), on local noida-db brokers.

One run measures, on the same N preloaded records (keys, one header, V-byte values, spread
over P partitions of topic `bench` on cluster `src`):

  (a) loop      a hand-written single-process confluent-kafka consume -> produce loop
                copying src/bench -> dsta/bench (same partition, keys, headers, timestamps;
                idempotent producer, acks=all);
  (b) treedist  the treedist distributor src -> dstb (a 2-cluster deployment, tree
                {level: 1, children: [src, dstb]}) copying src/bench, run as a PySpark
                Structured Streaming query in `--mode` (distributor.mode: fused or
                source-sink); throughput measured where the records land;
  (c) produce   produce-only capacity: one process producing N records of the same shape
                into a fresh broker (dstc), same producer settings as (a);

plus a stage profile (CPU per record of each Python step of the distributor, run outside
Spark, to show where the time goes); then, with the distributor's query still running
(warm), a latency phase: records produced on
src/bench-lat at a fixed rate with CreateTime = now; a consumer on dstb/bench-lat records
arrival time - record timestamp (the distributor keeps timestamps); p50/p99 in ms.

Every case writes into its own fresh broker, so no destination already holds the records and
no broker carries another case's data. A JSON document goes to stdout and to
benchmarks/results/distributor_throughput-<date>.json; progress goes to stderr. Every wait has
a timeout and a watchdog ends the run after --max-seconds; brokers, the Spark JVM and its
Python workers are stopped by PID at the end, also on error.

Run:  .venv/bin/python benchmarks/distributor_throughput.py [--records 400000] ...
See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

REPO = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("treedist") is None:  # not installed: use this checkout
    sys.path.insert(0, str(REPO))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402

from treedist.kafka import admin_client, ensure_topics  # noqa: E402
from treedist.local import LocalClusters, stop_pid  # noqa: E402

TOPIC = "bench"
LATENCY_TOPIC = "bench-lat"
CLUSTERS = ["src", "dsta", "dstb", "dstc"]  # dsta: loop target, dstb: treedist target, dstc: produce-only
TOPIC_CONFIG = {"retention.ms": "-1"}
MB = 1_000_000

# One producer configuration for (a), (c) and the preload: the no-loss settings the treedist
# sink fixes (idempotence, acks=all) plus the batching defaults the sink uses, so (a)/(b)/(c)
# differ in the pipeline, not in producer tuning.
PRODUCER_CONF = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1024 * 1024,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,
    "delivery.timeout.ms": 120_000,
    "delivery.report.only.error": True,
}
# The loop's consumer: the fetch sizes measured to matter on noida-db (and the source's defaults).
CONSUMER_CONF = {
    "group.id": "bench-loop",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "fetch.max.bytes": 50 * 1024 * 1024,
    "max.partition.fetch.bytes": 10 * 1024 * 1024,
    "queued.max.messages.kbytes": 256 * 1024,
    "fetch.wait.max.ms": 100,
    "isolation.level": "read_committed",
}

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


class BenchError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# machine and CPU accounting (from /proc; no psutil on this machine)

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine_info() -> dict:
    mem_kb = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    cpu_model = next((l.split(":", 1)[1].strip() for l in _read("/proc/cpuinfo").splitlines() if l.startswith("model name")), "")

    def version(module: str) -> str | None:
        try:
            mod = __import__(module)
            return getattr(mod, "__version__", None)
        except Exception:
            return None

    java = None
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        java = (out.stderr or out.stdout).strip().splitlines()[0]
    except Exception as err:  # java missing: report, do not fail
        java = f"unavailable: {err}"
    import confluent_kafka

    try:
        from importlib.metadata import version as dist_version

        noida = dist_version("noida-db")
    except Exception:
        noida = None
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "java": java,
        "pyspark": version("pyspark"),
        "pyarrow": version("pyarrow"),
        "confluent_kafka": getattr(confluent_kafka, "__version__", None) or str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
        "noida_db": noida,
        "loadavg_at_start": [float(x) for x in _read("/proc/loadavg").split()[:3]],
    }


def code_info() -> dict:
    """The code measured: git HEAD and the uncommitted changes under treedist/ and to this
    script (files and a digest), since the working tree may change between runs."""
    import hashlib

    def git(*argv: str) -> str:
        try:
            return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, timeout=20).stdout
        except Exception:
            return ""

    diff = git("diff", "HEAD", "--", "treedist", "benchmarks/distributor_throughput.py")
    untracked = git("ls-files", "--others", "--exclude-standard", "--", "treedist").split()
    digest = hashlib.sha1(diff.encode())
    for name in sorted(untracked):
        digest.update(name.encode() + (REPO / name).read_bytes())
    return {
        "git_head": git("rev-parse", "--short", "HEAD").strip() or None,
        "changed_files": git("diff", "HEAD", "--name-only", "--", "treedist").split() + untracked,
        "changes_sha1": digest.hexdigest()[:12],
    }


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, own cpu s, reaped children cpu s) of a live process, None if gone."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return None
    fields = raw[raw.rfind(")") + 2:].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime) / CLK_TCK, (cutime + cstime) / CLK_TCK


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st:
                kids.setdefault(st[0], []).append(int(name))
    return kids


def descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def broker_pids(clusters: LocalClusters) -> dict[str, int]:
    """cluster -> PID of the process doing the broker's work: the noida-db binary when the
    launcher's PID is the Python wrapper that runs it as a child, else the launcher's PID."""
    out = {}
    for name, broker in clusters.brokers.items():
        kids = descendants(broker.pid)
        out[name] = kids[0] if kids else broker.pid
    return out


def _cmd_label(pid: int) -> str:
    argv = _read(f"/proc/{pid}/cmdline").split("\0")
    for token in argv:
        if token.startswith("pyspark.") or token.startswith("pyspark/"):
            return "python:" + token
    if "-m" in argv:
        i = argv.index("-m")
        if i + 1 < len(argv):
            return "python:" + argv[i + 1]
    return "python:" + os.path.basename(argv[0]) if argv and argv[0] else "python:?"


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot."""
    parts = [int(x) for x in _read("/proc/stat").splitlines()[0].split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    total = sum(parts[:8])
    return (total - idle) / CLK_TCK, total / CLK_TCK


@dataclass
class CpuProbe:
    """CPU seconds used during a phase by: this process, each broker, the Spark JVM, the Spark
    Python processes (grouped by module), and the whole machine (the rest is 'other')."""

    brokers: dict[str, int]
    jvm_pid: int | None = None
    start: dict = field(default_factory=dict)

    def snapshot(self) -> dict:
        snap: dict[str, float] = {}
        me = _stat(os.getpid())
        snap["bench_process"] = me[1] if me else 0.0
        for name, pid in self.brokers.items():
            st = _stat(pid)
            snap[f"broker:{name}"] = st[1] if st else 0.0
        if self.jvm_pid:
            st = _stat(self.jvm_pid)
            snap["spark:jvm"] = st[1] if st else 0.0
            snap["spark:exited_python"] = st[2] if st else 0.0  # reaped workers' CPU
            for pid in descendants(self.jvm_pid):
                st = _stat(pid)
                if st:
                    key = "spark:" + _cmd_label(pid)
                    snap[key] = snap.get(key, 0.0) + st[1] + st[2]
        busy, total = _machine_busy()
        snap["_machine_busy"], snap["_machine_total"] = busy, total
        return snap

    def begin(self) -> None:
        self.start = self.snapshot()

    def end(self) -> dict:
        return self.diff(self.start, self.snapshot())

    @staticmethod
    def diff(start: dict, stop: dict) -> dict:
        used = {k: round(stop.get(k, 0.0) - start.get(k, 0.0), 2) for k in stop if not k.startswith("_")}
        used = {k: v for k, v in used.items() if v > 0.005}
        busy = stop["_machine_busy"] - start["_machine_busy"]
        ncpu = os.cpu_count() or 1
        wall = (stop["_machine_total"] - start["_machine_total"]) / ncpu
        ours = sum(used.values())
        return {
            "cpu_seconds": dict(sorted(used.items(), key=lambda kv: -kv[1])),
            "machine_busy_cpu_seconds": round(busy, 2),
            "machine_capacity_cpu_seconds": round(wall * ncpu, 2),
            "other_processes_cpu_seconds": round(max(0.0, busy - ours), 2),
            "machine_busy_fraction": round(busy / (wall * ncpu), 2) if wall > 0 else None,
        }


# --------------------------------------------------------------------------------------------
# records and Kafka helpers


@dataclass
class Records:
    keys: list[bytes]
    values: list[bytes]
    headers: list[list[tuple[str, bytes]]]
    timestamps: list[int]
    partitions: list[int]
    payload_bytes: int

    def __len__(self) -> int:
        return len(self.keys)


def make_records(n: int, partitions: int, value_bytes: int) -> Records:
    """Keys `key-NNNNN` (10k distinct), one header `bench-seq`, values of exactly value_bytes,
    round-robin partitions, increasing CreateTime timestamps (1000 per ms)."""
    pad = (os.urandom(max(value_bytes, 1)).hex().encode() * 2)[:value_bytes]
    base_ms = int(time.time() * 1000) - n // 1000 - 1000
    keys = [b"key-%05d" % (i % 10_000) for i in range(n)]
    values = [(b"%012d|" % i + pad)[:value_bytes] for i in range(n)]
    headers = [[("bench-seq", b"%d" % i)] for i in range(n)]
    timestamps = [base_ms + i // 1000 for i in range(n)]
    parts = [i % partitions for i in range(n)]
    payload = sum(len(k) + len(v) + len(h[0][0]) + len(h[0][1]) for k, v, h in zip(keys, values, headers))
    return Records(keys, values, headers, timestamps, parts, payload)


def _raise_on_error(errors: list[str]) -> Callable:
    def on_delivery(err, _msg) -> None:
        if err is not None and len(errors) < 20:
            errors.append(str(err))

    return on_delivery


def produce_all(bootstrap: str, topic: str, records: Records, timeout: float, conf: dict | None = None) -> float:
    """Produce every record (pre-generated) and flush; return seconds from the first produce
    to flush done. Raises if any record was not acknowledged."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, **(conf or PRODUCER_CONF), "on_delivery": _raise_on_error(errors)})
    produce, poll = producer.produce, producer.poll
    keys, values, headers, stamps, parts = records.keys, records.values, records.headers, records.timestamps, records.partitions
    deadline = time.monotonic() + timeout
    start = time.perf_counter()
    for i in range(len(records)):
        while True:
            try:
                produce(topic, values[i], keys[i], partition=parts[i], timestamp=stamps[i], headers=headers[i])
                break
            except BufferError:
                poll(0.01)
                if time.monotonic() > deadline:
                    raise BenchError(f"produce to {bootstrap}/{topic}: local queue full past the timeout")
        if i & 1023 == 0:
            poll(0)
            if errors:
                raise BenchError(f"produce to {bootstrap}/{topic}: {errors[:3]}")
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    seconds = time.perf_counter() - start
    if left or errors:
        raise BenchError(f"produce to {bootstrap}/{topic}: {left} undelivered, errors {errors[:3]}")
    return seconds


def partition_ids(consumer: Consumer, topic: str, timeout: float = 10.0) -> list[int]:
    md = consumer.list_topics(topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise BenchError(f"topic {topic!r} not found: {t.error if t else 'missing'}")
    return sorted(t.partitions)


class Watermarks:
    """High-watermark counting on one cluster (a Consumer that never subscribes)."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "enable.auto.commit": False})
        self.parts = partition_ids(self.consumer, topic)

    def count(self, timeout: float = 5.0) -> int:
        total = 0
        for p in self.parts:
            low, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=timeout, cached=False)
            total += high - low
        return total

    def close(self) -> None:
        self.consumer.close()


def count_records(bootstrap: str, topic: str) -> int:
    w = Watermarks(bootstrap, topic)
    try:
        return w.count()
    finally:
        w.close()


def rate_block(records: int, payload_bytes: int, seconds: float) -> dict:
    seconds = max(seconds, 1e-9)
    return {
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(payload_bytes / seconds / MB, 2),
    }


# --------------------------------------------------------------------------------------------
# (a) the hand-written loop


def run_loop(src: str, dst: str, records: Records, timeout: float) -> dict:
    """Single-process consume -> produce: assign all partitions from the beginning, consume in
    batches, produce each record to the same partition with key, headers and timestamp, flush."""
    n = len(records)
    errors: list[str] = []
    consumer = Consumer({"bootstrap.servers": src, **CONSUMER_CONF})
    producer = Producer({"bootstrap.servers": dst, **PRODUCER_CONF, "on_delivery": _raise_on_error(errors)})
    try:
        parts = partition_ids(consumer, TOPIC)
        deadline = time.monotonic() + timeout
        start = time.perf_counter()
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in parts])
        produce, poll, consume = producer.produce, producer.poll, consumer.consume
        copied = 0
        while copied < n:
            if time.monotonic() > deadline:
                raise BenchError(f"loop: copied {copied}/{n} records within {timeout}s")
            batch = consume(num_messages=10_000, timeout=1.0)
            for msg in batch:
                if msg.error() is not None:
                    raise BenchError(f"loop: consume error {msg.error()}")
                ts = msg.timestamp()[1]
                while True:
                    try:
                        produce(TOPIC, msg.value(), msg.key(), partition=msg.partition(), timestamp=ts, headers=msg.headers())
                        break
                    except BufferError:
                        poll(0.01)
            copied += len(batch)
            poll(0)
            if errors:
                raise BenchError(f"loop: delivery errors {errors[:3]}")
        left = producer.flush(max(1.0, deadline - time.monotonic()))
        seconds = time.perf_counter() - start
        if left or errors:
            raise BenchError(f"loop: {left} undelivered at flush, errors {errors[:3]}")
    finally:
        consumer.close()
    landed = count_records(dst, TOPIC)
    if landed != n:
        raise BenchError(f"loop: dsta holds {landed} records, expected {n}")
    return {**rate_block(n, records.payload_bytes, seconds), "verified_on_target": landed}


# --------------------------------------------------------------------------------------------
# per-stage CPU cost of the distributor's Python code, outside Spark


def run_stage_profile(src: str, dst: str, n_max: int, partitions: int) -> dict:
    """CPU microseconds per record of each step the distributor's executors run, measured in
    this process on records of src/bench (no Spark): the source's consume and Arrow
    conversion, the copy step, an Arrow IPC round trip (one JVM crossing, Python side only),
    the sink's produce into dst/bench-prof; and the loop's per-record produce for comparison.
    CPU time (process-wide, librdkafka threads included), so a busy machine matters less."""
    from treedist.pipeline.copy_step import CopyStep
    from treedist.spark.fetch import CONSUME_BATCH, messages_to_batch
    from treedist.spark.options import SinkOptions, SourceOptions
    from treedist.spark.produce import BatchProducer
    import pyarrow as pa

    cpu = time.process_time
    costs: dict[str, float] = {}
    errors: dict[str, str] = {}
    conf = dict(SourceOptions.parse({"kafka.bootstrap.servers": src, "subscribe": TOPIC}).kafka)
    consumer = Consumer(conf)
    messages: dict[int, list] = {}
    got = 0
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 120
        t = cpu()
        while got < n_max and time.monotonic() < deadline:
            for m in consumer.consume(min(CONSUME_BATCH, n_max - got), 1.0):
                if m.error() is None:
                    messages.setdefault(m.partition(), []).append(m)
                    got += 1
        costs["source_consume"] = cpu() - t
    finally:
        consumer.close()
    if not got:
        raise BenchError("stage profile: nothing consumed")
    t = cpu()
    batches = [messages_to_batch(ms[i:i + CONSUME_BATCH], TOPIC, p) for p, ms in messages.items() for i in range(0, len(ms), CONSUME_BATCH)]
    costs["source_to_arrow"] = cpu() - t
    step = CopyStep(cluster="src", mask=1, bit=1)
    t = cpu()
    copies = [step.apply(b)[0] for b in batches]
    costs["copy_step"] = cpu() - t
    t = cpu()
    for b in copies:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, b.schema) as writer:
            writer.write_batch(b)
        pa.ipc.open_stream(sink.getvalue()).read_all()
    costs["arrow_ipc_roundtrip"] = cpu() - t
    try:
        producer = BatchProducer(SinkOptions.parse({"kafka.bootstrap.servers": dst, "topic": "bench-prof"}))
        t = cpu()
        for b in copies:
            producer.produce_batch(b)
        producer.finish()
        costs["sink_produce_and_flush"] = cpu() - t
    except Exception as err:
        errors["sink_produce_and_flush"] = f"{type(err).__name__}: {err}"
    producer = Producer({"bootstrap.servers": dst, **PRODUCER_CONF})
    t = cpu()
    for ms in messages.values():
        for m in ms:
            while True:
                try:
                    producer.produce("bench-prof-loop", m.value(), m.key(), partition=m.partition(), timestamp=m.timestamp()[1], headers=m.headers())
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    costs["loop_produce_and_flush"] = cpu() - t
    per = {k: round(v / got * 1e6, 2) for k, v in costs.items()}
    distributor_keys = ["source_consume", "source_to_arrow", "copy_step", "sink_produce_and_flush"]
    out = {
        "records": got,
        "cpu_us_per_record": per,
        "distributor_python_us_per_record": round(sum(per.get(k, 0.0) for k in distributor_keys), 2),
        "loop_us_per_record": round(per["source_consume"] + per["loop_produce_and_flush"], 2),
        "note": "the distributor sum excludes Spark: JVM work and the Arrow transfers between the JVM and the "
        "Python workers of every task (source-sink mode: the source's read and the sink's write; fused mode: "
        "read only, no JVM transfer of the records)",
    }
    if errors:
        out["errors"] = errors
    return out


# --------------------------------------------------------------------------------------------
# (b) the treedist distributor


def spark_layer_status() -> str | None:
    """None when the Spark source/sink look present, else why (b) cannot run yet."""
    spark_dir = REPO / "treedist" / "spark"
    if not (spark_dir / "source.py").exists():
        return "treedist/spark/source.py does not exist yet"
    init = (spark_dir / "__init__.py").read_text()
    if "def register" not in init:
        return "treedist/spark/__init__.py has no register function"
    try:
        import treedist.spark.datasource  # noqa: F401  (what register() imports)
    except Exception as err:
        return f"importing treedist.spark.datasource failed: {type(err).__name__}: {err}"
    return None


class LandingMonitor(threading.Thread):
    """Samples the record count of a topic on the target every `interval` s: (t, count)."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.05):
        super().__init__(name="landing-monitor", daemon=True)
        self.watermarks = Watermarks(bootstrap, topic)
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.error: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                self.samples.append((time.monotonic(), self.watermarks.count()))
                self._halt.wait(self.interval)
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"

    @property
    def last(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
        self.watermarks.close()


@dataclass
class SparkHandle:
    spark: object | None = None
    jvm_pid: int | None = None
    queries: list = field(default_factory=list)
    app: object | None = None

    def stop(self) -> None:
        if self.app is not None:
            try:
                self.app.stop()
            except Exception as err:
                log(f"stopping the distribution app: {err}")
        for q in self.queries:
            try:
                if q.isActive:
                    q.stop()
            except Exception as err:
                log(f"stopping query: {str(err).splitlines()[0] if str(err) else err!r}")
        spark_pids = descendants(self.jvm_pid) if self.jvm_pid else []
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception as err:
                log(f"spark.stop(): {err}")
            try:
                from pyspark import SparkContext

                if SparkContext._gateway is not None:
                    SparkContext._gateway.shutdown()
                    SparkContext._gateway = None
                    SparkContext._jvm = None
            except Exception as err:
                log(f"gateway shutdown: {err}")
        if self.jvm_pid:
            stop_pid(self.jvm_pid, grace=15)
        for pid in spark_pids:  # Python workers the JVM started; normally gone with it
            if _stat(pid) is not None:
                try:
                    stop_pid(pid, grace=5)
                except ProcessLookupError:
                    pass


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def _offsets(value) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def batch_records(progress: dict) -> int:
    """Records a micro-batch read: sum of (end - start) offsets over its source's partitions
    (a partition missing from the start, as in batch 0, starts at 0: the topics are fresh).
    In the fused mode `numInputRows` counts summary rows (one per task), not records."""
    total = 0
    for source in progress.get("sources") or []:
        start, end = _offsets(source.get("startOffset")), _offsets(source.get("endOffset"))
        for topic, parts in end.items():
            for part, offset in (parts or {}).items():
                total += int(offset) - int((start.get(topic) or {}).get(part, 0))
    return total


def progress_rows(query) -> list[dict]:
    rows = []
    for p in query.recentProgress:
        d = json.loads(p.json) if hasattr(p, "json") and not isinstance(p, dict) else dict(p)
        if not d.get("numInputRows"):
            continue
        rows.append(
            {
                "batch": d.get("batchId"),
                "records": batch_records(d),
                "rows": d.get("numInputRows"),
                "processed_rows_per_s": round(d.get("processedRowsPerSecond") or 0.0, 1),
                "duration_ms": d.get("durationMs"),
            }
        )
    return rows


def start_treedist(args, clusters: LocalClusters, tmp: Path, handle: SparkHandle, probe: CpuProbe) -> dict:
    """Build the session and start the distributor query (or the whole app); return timings."""
    from treedist.config import parse_deployment
    from treedist.local.deployment import local_deployment

    bootstrap = {"src": clusters.bootstrap["src"], "dstb": clusters.bootstrap["dstb"]}
    spec = local_deployment(
        bootstrap,
        topics=[TOPIC, LATENCY_TOPIC],
        tree={"level": 1, "children": ["src", "dstb"]},
        checkpoint_location=str(tmp / "checkpoints"),
        distributor={
            "max_records_per_trigger": args.max_records_per_trigger,
            "trigger_interval": args.trigger_interval,
            **({"mode": args.mode} if args.mode else {}),
        },
        spark={"master": args.master, "app_name": "treedist-bench", "conf": spark_conf(args)},
    )
    deployment = parse_deployment(spec, source="<benchmark>")
    log(f"(b) distributor.mode = {deployment.distributor.mode}")

    from treedist.spark.session import build_session

    t = time.monotonic()
    spark = build_session(deployment.spark.master, deployment.spark.app_name, deployment.spark.conf)
    handle.spark = spark
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    handle.jvm_pid = proc.pid if proc is not None else None
    probe.jvm_pid = handle.jvm_pid
    session_s = time.monotonic() - t
    log(f"(b) Spark session ({deployment.spark.master}) up in {session_s:.1f}s, JVM pid {handle.jvm_pid}")

    t = time.monotonic()
    if args.both_directions:
        from treedist.pipeline.app import DistributionApp

        app = DistributionApp(deployment, spark)
        handle.app = app
        app.start()
        handle.queries = [run.query for run in app.running.values()]
        forward = next(run.query for run in app.running.values() if run.distributor.cluster == "src")
    else:
        from treedist.pipeline.message import DistributorCounters, start_distributor
        from treedist.pipeline.preflight import preflight

        preflight(deployment)
        dist = next(d for d in deployment.topology().all_distributors() if d.cluster == "src")
        forward = start_distributor(spark, deployment, dist, DistributorCounters.create(spark))
        handle.queries = [forward]
    return {"session_s": session_s, "query_start_mono": t, "forward": forward, "distributors": [q.name for q in handle.queries],
            "mode": deployment.distributor.mode}


def spark_conf(args) -> dict[str, str]:
    conf = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise BenchError(f"--spark-conf wants KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def check_queries(handle: SparkHandle) -> None:
    for q in handle.queries:
        if not q.isActive:
            err = q.exception()
            raise BenchError(f"distributor query {q.name} stopped: {err if err is not None else 'no error reported'}")


def run_treedist(args, clusters: LocalClusters, records: Records, started: dict, handle: SparkHandle, probe: CpuProbe) -> dict:
    """Wait until dstb holds all N records, sampling the landing count; derive the rates."""
    n = len(records)
    monitor = LandingMonitor(clusters.bootstrap["dstb"], TOPIC, interval=args.sample_interval)
    monitor.start()
    deadline = time.monotonic() + args.case_timeout
    last_log = 0.0
    cpu_at_first: dict | None = None
    try:
        while monitor.last < n:
            if cpu_at_first is None and monitor.last > 0:
                cpu_at_first = probe.snapshot()
            if monitor.error:
                raise BenchError(f"landing monitor: {monitor.error}")
            check_queries(handle)
            if time.monotonic() > deadline:
                raise BenchError(f"treedist: {monitor.last}/{n} records on dstb after {args.case_timeout}s")
            if time.monotonic() - last_log > 10:
                last_log = time.monotonic()
                log(f"(b) {monitor.last}/{n} records on dstb")
            time.sleep(0.05)
    finally:
        monitor.stop()
    cpu_at_done = probe.snapshot()
    samples = monitor.samples
    t0 = started["query_start_mono"]
    first = next((s for s in samples if s[1] > 0), None)
    done = next((s for s in samples if s[1] >= n), None)
    if first is None or done is None:
        raise BenchError("treedist: landing samples incomplete")
    before_first = max((s for s in samples if s[0] < first[0]), default=(t0, 0), key=lambda s: s[0])
    steady_records = n - first[1]
    steady_s = done[0] - first[0]
    steady = rate_block(steady_records, int(records.payload_bytes * steady_records / n), steady_s) if steady_s > 0 else None
    wall_s = done[0] - t0
    landed = count_records(clusters.bootstrap["dstb"], TOPIC)
    # a compact landing timeline: (seconds after query start, count) whenever the count moved
    timeline, prev = [], -1
    for t, c in samples:
        if c != prev:
            timeline.append([round(t - t0, 2), c])
            prev = c
    # Records land before their batch commits: wait (bounded) for the progress of every batch.
    settle = time.monotonic() + 60
    while sum(b["records"] for b in progress_rows(started["forward"])) < n and time.monotonic() < settle:
        check_queries(handle)
        time.sleep(0.2)
    steady_cpu = CpuProbe.diff(cpu_at_first, cpu_at_done) if cpu_at_first else None
    if steady_cpu and steady_records:
        steady_cpu["our_cpu_us_per_record"] = round(sum(steady_cpu["cpu_seconds"].values()) / steady_records * 1e6, 1)
    batches = progress_rows(started["forward"])
    warm = [b for b in batches[1:] if b.get("duration_ms")]
    warm_rows = sum(b["records"] for b in warm)
    warm_ms = sum(b["duration_ms"].get("triggerExecution", 0) for b in warm)
    return {
        "status": "ok",
        "distributors_running": started["distributors"],
        "mode": started["mode"],
        "steady": steady,
        "steady_cpu": steady_cpu,
        "warm_batches": {"batches": len(warm), "records": warm_rows, "seconds": round(warm_ms / 1000, 2),
                         "records_per_s": round(warm_rows / (warm_ms / 1000), 1) if warm_ms else None,
                         "note": "micro-batches after the first (warm Python workers): records read (planned "
                         "offsets) / sum of triggerExecution"},
        "steady_note": "records landing after the first observed landing / (time all landed - time of that first observation); "
        f"landing count sampled every {args.sample_interval}s from dstb high watermarks"
        + ("; WARNING: --records <= --max-records-per-trigger, so this window lies inside the first micro-batch"
           if n <= args.max_records_per_trigger else ""),
        "wall_from_query_start": rate_block(n, records.payload_bytes, wall_s),
        "wall_including_spark_session": rate_block(n, records.payload_bytes, wall_s + started["session_s"]),
        "spark_session_s": round(started["session_s"], 2),
        "first_landing_after_query_start_s": [round(before_first[0] - t0, 2), round(first[0] - t0, 2)],
        "verified_on_target": landed,
        "batches": batches,
        "landing_timeline": timeline if len(timeline) <= 400 else timeline[:: max(1, len(timeline) // 400)],
    }


# --------------------------------------------------------------------------------------------
# latency at a fixed rate


class ArrivalRecorder(threading.Thread):
    def __init__(self, bootstrap: str, topic: str):
        super().__init__(name="latency-consumer", daemon=True)
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
             "fetch.wait.max.ms": 50, "fetch.min.bytes": 1}
        )
        parts = partition_ids(self.consumer, topic)
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        self.latencies_ms: list[float] = []
        self.error: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                batch = self.consumer.consume(num_messages=10_000, timeout=0.05)
                now_ms = time.time() * 1000.0
                for msg in batch:
                    if msg.error() is not None:
                        continue
                    self.latencies_ms.append(now_ms - msg.timestamp()[1])
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
        self.consumer.close()


def run_latency(args, clusters: LocalClusters, handle: SparkHandle, value_bytes: int) -> dict:
    total = int(args.latency_rate * args.latency_seconds)
    recorder = ArrivalRecorder(clusters.bootstrap["dstb"], LATENCY_TOPIC)
    recorder.start()
    errors: list[str] = []
    # a latency-minded producer: same no-loss settings, short linger
    producer = Producer(
        {"bootstrap.servers": clusters.bootstrap["src"], "enable.idempotence": True, "acks": "all", "linger.ms": 5,
         "on_delivery": _raise_on_error(errors)}
    )
    pad = b"x" * value_bytes
    try:
        start = time.monotonic()
        sent = 0
        while sent < total:
            due = min(total, int((time.monotonic() - start) * args.latency_rate))
            while sent < due:
                producer.produce(
                    LATENCY_TOPIC, (b"%012d|" % sent + pad)[:value_bytes], b"key-%05d" % (sent % 10_000),
                    partition=sent % args.partitions, timestamp=int(time.time() * 1000),
                    headers=[("bench-seq", b"%d" % sent)],
                )
                sent += 1
            producer.poll(0)
            if sent % 2000 == 0:
                check_queries(handle)
            time.sleep(0.001)
        produce_s = time.monotonic() - start
        if producer.flush(30) or errors:
            raise BenchError(f"latency producer: undelivered or errors {errors[:3]}")
        deadline = time.monotonic() + args.latency_drain_timeout
        while len(recorder.latencies_ms) < total and time.monotonic() < deadline and not recorder.error:
            check_queries(handle)
            time.sleep(0.1)
    finally:
        recorder.stop()
    lat = sorted(recorder.latencies_ms)
    return {
        "rate_records_per_s": args.latency_rate,
        "produce_seconds": round(produce_s, 2),
        "records_produced": total,
        "records_received": len(lat),
        "p50_ms": round(percentile(lat, 0.50), 1),
        "p90_ms": round(percentile(lat, 0.90), 1),
        "p99_ms": round(percentile(lat, 0.99), 1),
        "max_ms": round(lat[-1], 1) if lat else None,
        "min_ms": round(lat[0], 1) if lat else None,
        "trigger_interval": args.trigger_interval,
        "error": recorder.error,
    }


# --------------------------------------------------------------------------------------------
# the run


def install_watchdog(max_seconds: float) -> None:
    """After max_seconds, SIGTERM ourselves: the handler raises and every finally cleans up."""

    def fire() -> None:
        log(f"watchdog: run exceeded --max-seconds={max_seconds}; terminating")
        os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Timer(max_seconds, fire)
    timer.daemon = True
    timer.start()


def _on_sigterm(signum, _frame):
    raise SystemExit(f"terminated by signal {signum}")


def parse_args(argv: Iterable[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--records", type=int, default=400_000, help="records preloaded on src")
    p.add_argument("--partitions", type=int, default=8, help="partitions of the benchmark topics")
    p.add_argument("--value-bytes", type=int, default=100, help="bytes per record value")
    p.add_argument("--master", default="local[2]", help="Spark master for (b)")
    p.add_argument("--max-records-per-trigger", type=int, default=200_000)
    p.add_argument("--trigger-interval", default="1 second", help="distributor.trigger_interval")
    p.add_argument("--mode", choices=["fused", "source-sink"], default=None,
                   help="distributor.mode of (b); default: the deployment's default")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting for the deployment's spark.conf (repeatable), e.g. "
                   "spark.driver.extraJavaOptions=-XX:+UseParallelGC")
    p.add_argument("--both-directions", action="store_true",
                   help="run both distributors (src->dstb and dstb->src) via DistributionApp instead of only src->dstb")
    p.add_argument("--latency-rate", type=float, default=2000.0, help="records/s in the latency phase")
    p.add_argument("--latency-seconds", type=float, default=20.0)
    p.add_argument("--latency-drain-timeout", type=float, default=60.0)
    p.add_argument("--sample-interval", type=float, default=0.05, help="landing-count sampling period for (b)")
    p.add_argument("--case-timeout", type=float, default=300.0, help="timeout of each case")
    p.add_argument("--max-seconds", type=float, default=1500.0, help="watchdog for the whole run")
    p.add_argument("--skip", default="", help="comma list of cases to skip: a,b,c,latency,stages")
    p.add_argument("--results-dir", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--no-save", action="store_true", help="do not write the results file")
    p.add_argument("--keep-dir", action="store_true", help="keep the temp dir (broker data, logs, checkpoints)")
    p.add_argument("--label", default="", help="free text stored in the result")
    return p.parse_args(argv)


def main(argv: Iterable[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    install_watchdog(args.max_seconds)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    started_at = dt.datetime.now(dt.timezone.utc)
    result: dict = {
        "benchmark": "distributor_throughput",
        "label": args.label,
        "started_at": started_at.isoformat(timespec="seconds"),
        "machine": machine_info(),
        "code": code_info(),
        "config": {
            "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
            "spark_master": args.master, "max_records_per_trigger": args.max_records_per_trigger,
            "trigger_interval": args.trigger_interval, "mode": args.mode or "(deployment default)", "spark_conf": dict(item.partition("=")[::2] for item in args.spark_conf),
            "distributors": "both (DistributionApp)" if args.both_directions else "src->dstb only",
            "producer": PRODUCER_CONF, "loop_consumer": CONSUMER_CONF,
        },
        "cases": {},
        "ratios": {},
        "latency": None,
        "errors": [],
    }
    tmp = Path(tempfile.mkdtemp(prefix="treedist-bench-"))
    log(f"temp dir {tmp}")
    clusters: LocalClusters | None = None
    broker_children: list[int] = []
    handle = SparkHandle()
    try:
        clusters = LocalClusters.start(CLUSTERS, tmp / "clusters")
        brokers = broker_pids(clusters)
        broker_children.extend(pid for name, pid in brokers.items() if pid != clusters.brokers[name].pid)
        log(f"brokers up: {clusters.bootstrap} pids {brokers}")
        for name, servers in clusters.bootstrap.items():
            ensure_topics(name, admin_client({"bootstrap.servers": servers}), {TOPIC: args.partitions, LATENCY_TOPIC: args.partitions, "bench-prof": args.partitions, "bench-prof-loop": args.partitions}, TOPIC_CONFIG)

        t = time.monotonic()
        records = make_records(args.records, args.partitions, args.value_bytes)
        result["config"]["payload_bytes_per_record"] = round(records.payload_bytes / len(records), 1)
        result["config"]["payload_mb"] = round(records.payload_bytes / MB, 2)
        log(f"generated {len(records)} records ({records.payload_bytes / MB:.1f} MB payload) in {time.monotonic() - t:.1f}s")
        preload_s = produce_all(clusters.bootstrap["src"], TOPIC, records, args.case_timeout)
        have = count_records(clusters.bootstrap["src"], TOPIC)
        if have != len(records):
            raise BenchError(f"preload: src holds {have} records, expected {len(records)}")
        result["preload"] = rate_block(len(records), records.payload_bytes, preload_s)
        log(f"preloaded src/{TOPIC}: {result['preload']['records_per_s']:.0f} records/s")

        probe = CpuProbe(brokers)
        cases = result["cases"]

        def run_case(key: str, label: str, fn: Callable[[], dict]) -> None:
            log(f"{label} ...")
            probe.begin()
            try:
                out = fn()
                cases[key] = {"status": "ok", **out, **probe.end()}
                cases[key]["our_cpu_us_per_record"] = round(sum(cases[key]["cpu_seconds"].values()) / len(records) * 1e6, 1)
                log(f"{label}: {json.dumps({k: out.get(k) for k in ('records_per_s', 'mb_per_s', 'seconds')})}")
            except Exception as err:
                cases[key] = {"status": "error", "error": f"{type(err).__name__}: {err}", **probe.end()}
                result["errors"].append(f"{key}: {type(err).__name__}: {err}")
                log(f"{label} FAILED:\n{traceback.format_exc()}")

        if "a" not in skip:
            run_case("a_loop", "(a) hand-written loop src -> dsta",
                     lambda: run_loop(clusters.bootstrap["src"], clusters.bootstrap["dsta"], records, args.case_timeout))
        if "c" not in skip:
            def produce_only() -> dict:
                seconds = produce_all(clusters.bootstrap["dstc"], TOPIC, records, args.case_timeout)
                landed = count_records(clusters.bootstrap["dstc"], TOPIC)
                if landed != len(records):
                    raise BenchError(f"produce-only: dstc holds {landed}, expected {len(records)}")
                return {**rate_block(len(records), records.payload_bytes, seconds), "verified_on_target": landed}

            run_case("c_produce_only", "(c) produce-only into dstc", produce_only)

        if "stages" not in skip:
            log("stage profile (CPU per record of the distributor's Python steps, no Spark) ...")
            try:
                result["stage_profile"] = run_stage_profile(
                    clusters.bootstrap["src"], clusters.bootstrap["dsta"], min(len(records), 200_000), args.partitions)
                log(f"stage profile: {json.dumps(result['stage_profile']['cpu_us_per_record'])}")
            except Exception as err:
                result["stage_profile"] = {"status": "error", "error": f"{type(err).__name__}: {err}"}
                log(f"stage profile FAILED:\n{traceback.format_exc()}")

        if "b" not in skip:
            why_not = spark_layer_status()
            if why_not:
                cases["b_treedist"] = {"status": "skipped", "reason": why_not}
                log(f"(b) skipped: {why_not}")
            else:
                log("(b) treedist distributor src -> dstb ...")
                probe.begin()
                b_started = None
                try:
                    b_started = start_treedist(args, clusters, tmp, handle, probe)
                    out = run_treedist(args, clusters, records, b_started, handle, probe)
                    cases["b_treedist"] = {**out, **probe.end()}
                    log(f"(b): steady {json.dumps(out['steady'])}; wall from query start "
                        f"{out['wall_from_query_start']['seconds']}s")
                except Exception as err:
                    cases["b_treedist"] = {"status": "error", "error": f"{type(err).__name__}: {err}", **probe.end()}
                    result["errors"].append(f"b_treedist: {type(err).__name__}: {err}")
                    log(f"(b) FAILED:\n{traceback.format_exc()}")
                if "latency" not in skip and cases["b_treedist"].get("status") == "ok":
                    log(f"latency phase: {args.latency_rate:.0f} records/s for {args.latency_seconds:.0f}s on src/{LATENCY_TOPIC} ...")
                    probe.begin()
                    try:
                        result["latency"] = {**run_latency(args, clusters, handle, args.value_bytes), **probe.end()}
                        log(f"latency: p50 {result['latency']['p50_ms']} ms, p99 {result['latency']['p99_ms']} ms, "
                            f"{result['latency']['records_received']}/{result['latency']['records_produced']} received")
                    except Exception as err:
                        result["latency"] = {"status": "error", "error": f"{type(err).__name__}: {err}"}
                        result["errors"].append(f"latency: {type(err).__name__}: {err}")
                        log(f"latency FAILED:\n{traceback.format_exc()}")
                    if b_started is not None:
                        cases["b_treedist"]["batches_latency_phase"] = progress_rows(b_started["forward"])[-5:]

        def rps(key: str, sub: str | None = None) -> float | None:
            case = cases.get(key) or {}
            if case.get("status") != "ok":
                return None
            block = case.get(sub) if sub else case
            return (block or {}).get("records_per_s")

        a, b, c = rps("a_loop"), rps("b_treedist", "steady"), rps("c_produce_only")
        b_wall = rps("b_treedist", "wall_from_query_start")
        ratios = result["ratios"]
        if a and b:
            ratios["b_over_a"] = round(b / a, 3)
        if b and c:
            ratios["b_over_c"] = round(b / c, 3)
        if a and c:
            ratios["a_over_c"] = round(a / c, 3)
        if a and b_wall:
            ratios["b_wall_over_a"] = round(b_wall / a, 3)
        a_cpu = (cases.get("a_loop") or {}).get("our_cpu_us_per_record")
        b_cpu = ((cases.get("b_treedist") or {}).get("steady_cpu") or {}).get("our_cpu_us_per_record")
        if a_cpu and b_cpu:
            ratios["cpu_per_record_b_over_a"] = round(b_cpu / a_cpu, 2)
    except BaseException as err:
        result["errors"].append(f"run: {type(err).__name__}: {err}")
        log(f"run FAILED:\n{traceback.format_exc()}")
    finally:
        log("stopping Spark and brokers")
        try:
            handle.stop()
        except BaseException as err:
            result["errors"].append(f"stopping spark: {err}")
        if clusters is not None:
            # The launcher's PID is the `noida-db` Python wrapper, which runs the broker binary
            # as its child and does not forward SIGTERM: stop the binaries first, by PID.
            for pid in broker_children + [p for b in clusters.brokers.values() for p in descendants(b.pid)]:
                if _stat(pid) is not None:
                    try:
                        stop_pid(pid)
                    except ProcessLookupError:
                        pass
            clusters.stop()
        if args.keep_dir:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    result["machine"]["loadavg_at_end"] = [float(x) for x in _read("/proc/loadavg").split()[:3]]
    result["duration_s"] = round(time.monotonic() - T0, 1)
    text = json.dumps(result, indent=2, default=str)
    print(text, flush=True)
    if not args.no_save:
        out_dir = Path(args.results_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"distributor_throughput-{started_at.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(text + "\n")
        log(f"wrote {path}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
