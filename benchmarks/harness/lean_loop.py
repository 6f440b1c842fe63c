"""The competent hand-written loop of the vs_mm2 benchmark: one process copying some
partitions of one cluster's topic under the tree's copy-flag rule.

Built to be as well tuned as treedist, so that the comparison is with the best a plain loop
does, not a strawman:
- the same librdkafka settings as treedist's source and sink (imported from
  treedist.spark.options: large fetches, `queued.min.messages` read-ahead, 1 MiB batches,
  linger 20 ms, idempotent acks=all producers, failure-only delivery reports);
- headers handled as treedist's RecordCopier does: the copy-flag header found by a reverse
  scan, its value parsed once per distinct value (cached), the copy's flag entry cached per
  flags, the origin entry added only on a first copy; produce() called positionally;
- `gc.disable()`: the loop allocates only short-lived objects, so the cyclic collector is
  pure overhead;
- at-least-once: about every second, flush the producers, then commit the positions;
- run as several processes (one per core) with the partitions split between them.

Run: python -m benchmarks.harness.lean_loop '<json>' with cluster, bootstraps {cluster:
servers}, topic, partitions [owned partition numbers], levels [[mask, bit, target]], group,
flags_header, origin_header, lingering (treedist's lingering consumer settings). SIGTERM stops it: it flushes, commits and prints one JSON line.
"""

from __future__ import annotations

import gc
import json
import signal
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from treedist.kafka.clients import lingering_consumer_settings
from treedist.spark.options import consumer_settings, producer_settings

COMMIT_EVERY_S = 1.0
BATCH = 10_000


def _clients(args: dict) -> tuple[Consumer, dict[str, Producer]]:
    consumer_conf = consumer_settings({"bootstrap.servers": args["bootstraps"][args["cluster"]]})
    if args.get("lingering"):  # treedist lingers in this run: its tailing consumers batch their fetches
        consumer_conf = lingering_consumer_settings(consumer_conf)
    # treedist's replay settings (`auto.offset.reset=error`, partition EOF events) serve its
    # planned ranges; a loop resumes from its committed offsets, else the beginning.
    consumer_conf.update({"group.id": args["group"], "auto.offset.reset": "earliest", "enable.partition.eof": "false"})
    consumer = Consumer(consumer_conf)
    consumer.assign(_start_positions(consumer, args["topic"], args["partitions"]))
    producers = {}
    for _, _, target in args["levels"]:
        conf = producer_settings({"bootstrap.servers": args["bootstraps"][target]})
        conf["delivery.report.only.error"] = True  # a confluent-kafka property: a bool
        producers[target] = Producer(conf)
    return consumer, producers


def _start_positions(consumer: Consumer, topic: str, partitions: list[int]) -> list[TopicPartition]:
    """The group's committed offsets, else the beginning. Asked explicitly and retried: on a
    fresh broker the group coordinator answers "load in progress" for a while, and a consumer
    assigned at OFFSET_STORED was seen to stay without a position (nothing read for minutes)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
            return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                    for tp in committed]
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run(args: dict) -> dict:
    gc.disable()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer, producers = _clients(args)
    fh, oh = args["flags_header"], args["origin_header"]
    origin_prefix = f"{args['cluster']}/{args['topic']}/"
    levels = [(mask, bit, producers[target]) for mask, bit, target in args["levels"]]
    parsed: dict[bytes | None, int] = {}
    routes: dict[int, tuple] = {}
    absent = object()
    read = copied = commits = 0
    next_commit = time.monotonic() + COMMIT_EVERY_S
    while not stop:
        messages = consumer.consume(BATCH, 0.1)
        for msg in messages:
            if msg.error() is not None:
                continue
            read += 1
            headers = msg.headers()
            raw = absent
            if headers is not None:
                for entry in reversed(headers):  # the last copy-flag header counts
                    if entry[0] == fh:
                        raw = entry[1]
                        break
            if raw is absent:
                flags = 0
            else:
                flags = parsed.get(raw)
                if flags is None:  # treedist's "copy" policy: a malformed value counts as 0
                    text = (raw or b"").decode("ascii", "replace")
                    flags = parsed[raw] = int(text) if text.isdigit() else 0
            todo = routes.get(flags)
            if todo is None:
                todo = routes[flags] = tuple((p.produce, p, (fh, str(flags | bit).encode()))
                                             for mask, bit, p in levels if not flags & mask)
            if not todo:
                continue
            others, has_origin = None, False
            if headers is not None:
                others = []
                for entry in headers:
                    if entry[0] != fh:
                        others.append(entry)
                        has_origin |= entry[0] == oh
            partition = msg.partition()
            origin = None if has_origin else (oh, f"{origin_prefix}{partition}/{msg.offset()}".encode())
            topic, key, value, ts = msg.topic(), msg.key(), msg.value(), msg.timestamp()[1]
            for produce, producer, tail in todo:
                if others is None:
                    new = [tail, origin] if origin is not None else [tail]
                else:
                    new = [*others, tail, origin] if origin is not None else [*others, tail]
                while True:
                    try:
                        produce(topic, value, key, partition, None, None, ts, new)
                        break
                    except BufferError:
                        producer.poll(0.05)
                copied += 1
        for producer in producers.values():
            producer.poll(0)
        if time.monotonic() >= next_commit:
            commits += _commit(consumer, producers)
            next_commit = time.monotonic() + COMMIT_EVERY_S
    commits += _commit(consumer, producers)
    consumer.close()
    return {"cluster": args["cluster"], "partitions": args["partitions"], "read": read, "copied": copied, "commits": commits}


def _commit(consumer: Consumer, producers: dict[str, Producer]) -> int:
    """At-least-once: every copy of what was read is delivered before its offsets are committed."""
    for producer in producers.values():
        if producer.flush(120):
            raise RuntimeError("copies left undelivered after 120 s")
    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
    if positions:
        consumer.commit(offsets=positions, asynchronous=False)
    return 1


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)
