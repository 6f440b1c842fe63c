"""The hand-written baselines, each run as its own process (so its CPU is its own):

- `copy`: a single-process confluent-kafka consume -> produce loop copying one topic from a
  source to a destination (same partition, key, value, headers and timestamp; idempotent
  producer, acks=all): what one link costs without treedist;
- `fanout`: the same loop for one cluster of a tree, consuming its topic once and, for every
  level of the cluster, producing the record to that level's target under the copy-flag rule
  (flags from the header, absent = 0; copy iff flags & mask == 0; the copy carries flags | bit
  and, on the first copy, an origin header `cluster/topic/partition/offset`). It runs until a
  stop file appears, so copies that arrive later are forwarded too.

Both write one JSON line of stats to stdout at the end.
Run: python -m benchmarks.harness.loops copy|fanout '<json arguments>'
"""

from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.harness.kafka import CONSUMER, PRODUCER
from treedist.topology.flags import MalformedFlags, encode_flags, parse_flags

FLAGS = "treedist-copy-flags"
ORIGIN = "treedist-origin"


def _consumer(bootstrap: str, topic: str, partitions: int) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-loop", **CONSUMER})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def copy(args: dict) -> dict:
    consumer = _consumer(args["src"], args["topic"], args["partitions"])
    producer = Producer({"bootstrap.servers": args["dst"], **PRODUCER, "delivery.report.only.error": True})
    produce, want, done = producer.produce, args["count"], 0
    started = time.monotonic()
    while done < want:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error() is not None:
                continue
            try:
                produce(msg.topic(), msg.value(), msg.key(), msg.partition(), timestamp=msg.timestamp()[1], headers=msg.headers())
            except BufferError:
                producer.poll(0.05)
                produce(msg.topic(), msg.value(), msg.key(), msg.partition(), timestamp=msg.timestamp()[1], headers=msg.headers())
            done += 1
    left = producer.flush(120)
    seconds = time.monotonic() - started
    consumer.close()
    return {"records": done, "seconds": seconds, "undelivered": left}


def _caught_up(consumer: Consumer, tps: list[TopicPartition]) -> bool:
    """Every partition's position at its last known high watermark (no broker request)."""
    for tp in consumer.position(tps):
        high = consumer.get_watermark_offsets(tp, cached=True)[1]
        if tp.offset < 0 or high < 0 or tp.offset < high:
            return False
    return True


def fanout(args: dict) -> dict:
    """args: cluster, bootstraps {cluster: servers}, topic, partitions, levels [[mask, bit, target]], stop_file;
    optionally count: stop once that many records were read (all copies flushed; `seconds` from the start)."""
    cluster, topic = args["cluster"], args["topic"]
    tps = [TopicPartition(topic, p, 0) for p in range(args["partitions"])]
    consumer = _consumer(args["bootstraps"][cluster], topic, args["partitions"])
    producers = {t: Producer({"bootstrap.servers": args["bootstraps"][t], **PRODUCER, "delivery.report.only.error": True})
                 for _, _, t in args["levels"]}
    levels = [(mask, bit, producers[target].produce, producers[target]) for mask, bit, target in args["levels"]]
    read = copied = 0
    count = args.get("count")
    started = time.monotonic()
    while not os.path.exists(args["stop_file"]) and (count is None or read < count):
        messages = consumer.consume(10_000, 0.2)
        if not messages:
            if _caught_up(consumer, tps):  # noida-db answers empty fetches at once: do not spin while waiting
                consumer.pause(tps)
                time.sleep(0.01)
                consumer.resume(tps)
            # else a (large) fetch is in flight: pausing now would throw its answer away
            continue
        for msg in messages:
            if msg.error() is not None:
                continue
            read += 1
            headers = msg.headers() or []
            flags, others, has_origin = 0, [], False
            for key, value in headers:
                if key == FLAGS:
                    try:
                        flags = parse_flags(value)
                    except MalformedFlags:
                        flags = 0
                else:
                    others.append((key, value))
                    has_origin |= key == ORIGIN
            origin = None if has_origin else f"{cluster}/{topic}/{msg.partition()}/{msg.offset()}".encode()
            for mask, bit, produce, producer in levels:
                if flags & mask:
                    continue
                new = others + [(FLAGS, encode_flags(flags | bit))]
                if origin is not None:
                    new.append((ORIGIN, origin))
                try:
                    produce(topic, msg.value(), msg.key(), msg.partition(), timestamp=msg.timestamp()[1], headers=new)
                except BufferError:
                    producer.poll(0.05)
                    produce(topic, msg.value(), msg.key(), msg.partition(), timestamp=msg.timestamp()[1], headers=new)
                copied += 1
        for producer in producers.values():
            producer.poll(0)
    left = sum(p.flush(120) for p in producers.values())
    seconds = time.monotonic() - started
    consumer.close()
    return {"cluster": cluster, "read": read, "copied": copied, "undelivered": left, "seconds": seconds}


def produce(args: dict) -> dict:
    """Produce-only capacity: the benchmark's records into a fresh topic, same producer settings."""
    from benchmarks.harness.kafka import Records, preload

    records = Records(args["count"], args["partitions"], args["value_bytes"])
    return {"records": records.count, "seconds": preload(args["dst"], args["topic"], records)}


if __name__ == "__main__":
    result = {"copy": copy, "fanout": fanout, "produce": produce}[sys.argv[1]](json.loads(sys.argv[2]))
    print(json.dumps(result), flush=True)
