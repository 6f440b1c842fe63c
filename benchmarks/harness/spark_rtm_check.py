"""A check that spark_rtm copies by treedist's copy-flag rule, on real Kafka and real Spark.

Records with known copy-flag headers are produced on c1 (partition 0, then a sentinel), the
contender is started as vs_mm2 starts it (the single link's route: level 1, mask 1, bit 1,
to c2), and c2's copies are read until the sentinel's copy arrives (a task copies its
partition in order). Expected: no header, only a higher level's bit, or a malformed value
-> copied with level 1's bit ORed in, the origin header added and the other headers kept;
level 1's bit already set (alone or with others) -> not copied.

vs_mm2 runs it in a smoke run with spark_rtm among the contenders (`spark_rtm_rule_check` in
the JSON; a failure is listed in `checks`): a test under tests/ cannot use the suite's one
SparkSession (`local[2,4]`, started without the connector's jars, which must be on the class
path when the JVM starts, and Real-time Mode needs a slot per partition), so it would start a
JVM of its own. Standalone (starts c1 and c2 in a temp dir, stops them by PID):
    .venv/bin/python -m benchmarks.harness.spark_rtm_check
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.harness import spark_rtm
from benchmarks.harness.kafka import PRODUCER, create_topic
from benchmarks.harness.treedist_run import REPO
from benchmarks.harness.trees import levels

FLAGS, ORIGIN = spark_rtm.FLAGS, spark_rtm.ORIGIN
SINGLE_LINK = {"level": 1, "children": ["c1", "c2"]}
# key -> (headers on c1, the copy's copy-flag value on c2 or None: not copied)
CASES = {
    "no-header": ([], "1"),
    "other-header-only": ([("bench-seq", b"x")], "1"),
    "level2-bit": ([(FLAGS, b"2")], "3"),
    "level3-bit-with-origin": ([(FLAGS, b"4"), (ORIGIN, b"c9/t/0/7")], "5"),
    "malformed": ([(FLAGS, b"x1")], "1"),
    "level1-bit": ([(FLAGS, b"1")], None),
    "level1-and-2-bits": ([(FLAGS, b"3")], None),
    "last-header-counts": ([(FLAGS, b"2"), (FLAGS, b"1")], None),
}
SENTINEL = "sentinel"


def check(boot: dict[str, str], workdir: Path, partitions: int = 8, timeout: float = 240.0) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = f"rtm-rule-{uuid.uuid4().hex[:8]}"
    for cluster in ("c1", "c2"):
        create_topic(boot[cluster], topic, partitions)
    producer = Producer({"bootstrap.servers": boot["c1"], **PRODUCER})
    for key, (headers, _) in [*CASES.items(), (SENTINEL, ([], "1"))]:
        producer.produce(topic, b"v", key.encode(), 0, headers=headers)
    if producer.flush(30):
        raise RuntimeError("spark_rtm rule check: records left undelivered on c1")
    log = workdir / f"{topic}.log"
    cmd = spark_rtm.command("c1", boot, topic, partitions, levels(SINGLE_LINK)["c1"], workdir / f"ck-{topic}")
    run = spark_rtm.SparkRtmRun(cmd, log, REPO)
    consumer = Consumer({"bootstrap.servers": boot["c2"], "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: dict[str, list] = {}
    started = time.monotonic()
    try:
        while SENTINEL not in got and time.monotonic() - started < timeout:
            if run.proc.poll() is not None:
                raise RuntimeError(f"spark_rtm exited with {run.proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    got.setdefault(msg.key().decode(), []).append(
                        [(k, v.decode() if v is not None else None) for k, v in msg.headers() or []])
    finally:
        consumer.close()
        output = run.stop()
    seconds = round(time.monotonic() - started, 1)
    results = {}
    for key, (headers, want) in CASES.items():
        copies = got.get(key, [])
        flags = [[v for k, v in hs if k == FLAGS] for hs in copies]
        if want is None:
            ok = not copies
        else:
            kept = [(k, v.decode()) for k, v in headers if k != FLAGS]
            origin_ok = all(any(k == ORIGIN for k, _ in hs) for hs in copies)
            ok = bool(copies) and all(f == [want] for f in flags) and origin_ok and all(
                all(item in hs for item in kept) for hs in copies)
        results[key] = {"sent_flags": [v.decode() for k, v in headers if k == FLAGS], "want": want,
                        "copies": len(copies), "copy_flags": flags, "ok": ok}
    return {"ok": SENTINEL in got and all(r["ok"] for r in results.values()), "sentinel_copied": SENTINEL in got,
            "seconds_to_sentinel": seconds, "topic": topic, "cases": results, "spark_rtm_output": output}


def main() -> int:
    from treedist.local.local_clusters import LocalClusters

    workdir = Path(tempfile.mkdtemp(prefix="treedist-rtm-check-"))
    clusters = LocalClusters.start(["c1", "c2"], workdir / "brokers", engine="kafka")
    try:
        result = check(dict(clusters.bootstrap), workdir)
    finally:
        clusters.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
