"""Throughput probe of the treedist-kafka source and sink on local noida-db brokers.

Starts two brokers (source and target cluster) in a temporary directory, fills a source
topic, then measures rows/s for:

  baseline      a hand-written single-process confluent-kafka consume -> produce loop
  spark->noop   treedist-kafka source into Spark's no-op sink
  spark->sink   treedist-kafka source into the treedist-kafka sink (other cluster)

Each Spark query runs with trigger(availableNow=True) after a warm-up query, so Python
worker start-up is not counted. Brokers are started and stopped by PID.

    .venv/bin/python benchmarks/spark_io_probe.py --records 1000000 --partitions 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path) -> tuple[subprocess.Popen, str]:
    import noida_db

    binary = Path(noida_db.__file__).parent / "noida-db"
    port = free_port()
    proc = subprocess.Popen(
        [str(binary), "start", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--only", "kafka",
         "--kafka-port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    raise RuntimeError("broker did not start")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result()


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2 << 20})
    value = b"v" * value_bytes
    headers = [("treedist-flags", b"1")]
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, b"k%09d" % i, i % partitions, timestamp=1_700_000_000_000 + i, headers=headers)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return records / (time.perf_counter() - t0)


def baseline(src: str, dst: str, topic: str, target: str, partitions: int, records: int) -> float:
    """Single process: consume every partition from 0, produce each record to the same partition."""
    c = Consumer({"bootstrap.servers": src, "group.id": "baseline", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20,
                  "queued.max.messages.kbytes": 262144,
                  # noida-db answers a fetch with all it has: allow big responses
                  "receive.message.max.bytes": 1_000_000_000})
    errors: list = []
    p = Producer({"bootstrap.servers": dst, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20, "delivery.report.only.error": True,
                  "on_delivery": lambda err, msg: errors.append(err) if err else None})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    t0 = time.perf_counter()
    done = 0
    produce = p.produce
    last_progress = time.monotonic()
    while done < records:
        if time.monotonic() - last_progress > 60:
            raise RuntimeError(f"baseline stalled at {done} records")
        messages = c.consume(20_000, 1.0)
        if messages:
            last_progress = time.monotonic()
        for m in messages:
            if m.error():
                continue
            try:
                produce(target, m.value(), m.key(), m.partition(), timestamp=m.timestamp()[1], headers=m.headers())
            except BufferError:
                p.poll(0.1)
                produce(target, m.value(), m.key(), m.partition(), timestamp=m.timestamp()[1], headers=m.headers())
            done += 1
        p.poll(0)
    assert p.flush(120) == 0 and not errors
    rate = records / (time.perf_counter() - t0)
    c.close()
    return rate


def total_records(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "count"})
    n = sum(c.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[1] for i in range(partitions))
    c.close()
    return n


def run_query(spark, src: str, topic: str, sink: str, opts: dict[str, str], checkpoint: str) -> tuple[float, int, list]:
    df = (spark.readStream.format("treedist-kafka").option("kafka.bootstrap.servers", src)
          .option("subscribe", topic).load())
    writer = df.writeStream.format(sink).option("checkpointLocation", checkpoint).trigger(availableNow=True)
    for k, v in opts.items():
        writer = writer.option(k, v)
    t0 = time.perf_counter()
    q = writer.start()
    q.awaitTermination()
    elapsed = time.perf_counter() - t0
    if q.exception():
        raise RuntimeError(q.exception())
    progress = q.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    return elapsed, rows, progress


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--master", default="local[2,4]")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="spark-io-probe-"))
    brokers: list[subprocess.Popen] = []
    try:
        src_proc, src = start_broker(work / "src")
        brokers.append(src_proc)
        dst_proc, dst = start_broker(work / "dst")
        brokers.append(dst_proc)
        n, parts = args.records, args.partitions
        for bootstrap, topic in [(src, "warm"), (src, "bench"), (dst, "warm-copy"), (dst, "spark-copy"), (dst, "baseline-copy")]:
            create_topic(bootstrap, topic, parts)
        fill(src, "warm", parts, 2_000, args.value_bytes)
        rate = fill(src, "bench", parts, n, args.value_bytes)
        print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
        print(f"filled {n:,} records of {args.value_bytes} B in {parts} partitions at {rate:,.0f}/s")

        if not args.skip_baseline:
            rate = baseline(src, dst, "bench", "baseline-copy", parts, n)
            print(f"baseline consume->produce (1 process): {rate:,.0f} rows/s", flush=True)

        from treedist.spark.session import build_session

        t0 = time.perf_counter()
        conf = dict(item.split("=", 1) for item in args.conf)
        spark = build_session(master=args.master, app_name="spark-io-probe", conf=conf)
        print(f"session: {time.perf_counter() - t0:.1f}s")
        sink_opts = {"kafka.bootstrap.servers": dst}
        elapsed, _, _ = run_query(spark, src, "warm", "treedist-kafka", {**sink_opts, "topic": "warm-copy"}, str(work / "cp-warm"))
        print(f"warm-up query (2k rows, first batch): {elapsed:.1f}s")

        for name, sink, opts, target in [
            ("spark source->noop", "noop", {}, None),
            ("spark source->sink", "treedist-kafka", {**sink_opts, "topic": "spark-copy"}, "spark-copy"),
        ]:
            elapsed, rows, progress = run_query(spark, src, "bench", sink, opts, str(work / f"cp-{sink}"))
            batch_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"])
            print(f"{name}: {rows:,} rows in {elapsed:.1f}s = {rows / elapsed:,.0f} rows/s "
                  f"(batch time only: {rows / max(batch_ms, 1) * 1000:,.0f} rows/s)", flush=True)
            if target:
                copied = total_records(dst, target, parts)
                assert copied == n, f"{target}: {copied} records, expected {n}"
        spark.stop()
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        for proc in brokers:
            proc.send_signal(signal.SIGTERM)
        for proc in brokers:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # SIGTERM (e.g. from `timeout`) unwinds through main's `finally`, which stops the brokers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
