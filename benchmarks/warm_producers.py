"""Warm producers on Apache Kafka and on noida-db (issue 31 point 6): what a task's first copy
to a target waits for when its producer is built then (cold), against a producer built
earlier and left idle (warm: `treedist.records.client_pool.warm_producers`, and the executor
warm-up's `treedist.records.warm.warm_worker`).

Per bed (`--engines`): one local broker (`treedist.local`: `kafka` Apache Kafka, `noida`
noida-db; `kafka_wan` an Apache Kafka broker reached through the 40 ms WAN proxy,
`treedist.local.wanproxy`, as a target in another data centre is), a topic of 8 partitions
holding `--backlog` records of 100 B (noida-db answers an InitProducerId only after
rewriting its data file, docs/architecture.md, so its cost grows with the data it holds),
then `--pairs` pairs in alternating order (cold, warm; warm, cold; ...):
- cold: a `DeliveryProducer` with treedist's producer settings is built, the task's target
  check (`check_targets`), one record per partition produced, `finish()`;
- warm: the same producer built `--idle` s before (librdkafka's thread connects and gets the
  producer id meanwhile, as a parked producer does), then the same steps.
Timed from the build (cold) or from the target check (warm) to `finish()`'s return: the
wait of a first copy. The difference is what a warm producer saves once per worker and target.

Run: heavy .venv/bin/python -m benchmarks.warm_producers [--engines kafka,noida,kafka_wan] [--pairs 20]
It prints one JSON object (also saved in benchmarks/results/warm_producers-*.json).
"""

from __future__ import annotations

import tempfile
import time

from benchmarks.harness import cli
from benchmarks.harness.kafka import Records, create_topic, preload
from benchmarks.harness.results import log, machine, median_and_range, save
from treedist.kafka.producer import DeliveryProducer
from treedist.local import LocalClusters
from treedist.local.wanproxy import TwoDataCentres
from treedist.spark.options import producer_settings

TOPIC = "warm-probe"
PARTITIONS = 8


def first_copy_s(settings: dict[str, str], producer: DeliveryProducer | None) -> float:
    """One first copy: build the producer unless given (warm), check, produce, finish."""
    started = time.monotonic()
    producer = producer if producer is not None else DeliveryProducer(settings)
    producer.check_targets({TOPIC: PARTITIONS - 1})
    for partition in range(PARTITIONS):
        producer.raw.produce(TOPIC, b"w" * 100, b"k", partition)
    producer.count(PARTITIONS, 0)
    producer.finish()
    return time.monotonic() - started


def start_bed(engine: str, base: str):
    """One broker of the bed: its bootstrap as the probe sees it, its local one (the preload's),
    and the bed (stopped by PID)."""
    if engine == "kafka_wan":
        wan = TwoDataCentres.start(base, {"far": ["w1"]})
        return wan.proxied["w1"], wan.direct["w1"], wan
    clusters = LocalClusters.start(["w1"], base, engine=engine)
    return clusters.bootstrap["w1"], clusters.bootstrap["w1"], clusters


def probe_engine(engine: str, pairs: int, idle_s: float, backlog: int) -> dict:
    """Steps of the module docstring on one broker of `engine`, stopped by PID at the end."""
    with tempfile.TemporaryDirectory(prefix=f"treedist-warm-{engine}-") as base:
        started = time.monotonic()
        boot, local, bed = start_bed(engine, base)
        try:
            ready_s = time.monotonic() - started
            create_topic(local, TOPIC, PARTITIONS)
            log(f"{engine}: broker ready in {ready_s:.1f} s; preloading {backlog} records")
            preload_s = preload(local, TOPIC, Records(backlog, PARTITIONS)) if backlog else 0.0
            settings = producer_settings({"bootstrap.servers": boot, "delivery.timeout.ms": "120000"})
            cold, warm = [], []
            for i in range(pairs):
                for kind in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
                    if kind == "cold":
                        cold.append(first_copy_s(settings, None))
                    else:
                        parked = DeliveryProducer(settings)
                        time.sleep(idle_s)
                        warm.append(first_copy_s(settings, parked))
            ms = lambda xs: median_and_range([round(x * 1000, 1) for x in xs])  # noqa: E731
            result = {"broker_ready_s": round(ready_s, 2), "backlog_records": backlog, "preload_s": round(preload_s, 2),
                      "cold_first_copy_ms": ms(cold), "warm_first_copy_ms": ms(warm)}
            result["saved_ms_median"] = round(result["cold_first_copy_ms"]["median"] - result["warm_first_copy_ms"]["median"], 1)
            log(f"{engine}: cold {result['cold_first_copy_ms']['median']} ms, warm {result['warm_first_copy_ms']['median']} ms")
            return result
        finally:
            bed.stop()


def main() -> None:
    p = cli.parser(__doc__, max_seconds=600)
    p.add_argument("--engines", default="kafka,noida,kafka_wan")
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--idle", type=float, default=1.0, help="seconds a warm producer is parked before use")
    p.add_argument("--backlog", type=int, default=200_000, help="records held by the broker (~25 MB)")
    args = p.parse_args()
    doc = cli.begin(args, pairs=4, backlog=50_000)
    doc["engines"] = {e: probe_engine(e, args.pairs, args.idle, args.backlog) for e in args.engines.split(",")}
    doc["machine_at_end"] = machine()
    save("warm_producers", doc, keep=not args.no_save)


if __name__ == "__main__":
    main()
