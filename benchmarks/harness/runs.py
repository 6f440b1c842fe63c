"""One contender's run in the vs_mm2 benchmark, on clusters that stay up for the whole
benchmark: fresh topics, idle brokers, then either a drain of a preloaded backlog (throughput
and CPU per copy) or a fixed rate (latency at the consumer's receipt and CPU per copy).

Every run is measured the same way, whatever the contender: the same landing sampler
(`landing.Landing`, 20 Hz), the same CPU meter (`procs.TreeMeter`: the contender's process
trees, each broker apart, the machine), the same producers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from benchmarks.harness import contenders
from benchmarks.harness.kafka import create_topic, produce_at_rate, rate_producer
from benchmarks.harness.landing import Landing
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.results import log
from benchmarks.harness.treedist_run import REPO

SETTLED_CORES = 0.05  # a broker is idle below this CPU rate (an idle KRaft node uses ~0.01-0.02)


@dataclass
class Context:
    scenario: contenders.Scenario
    boot: dict[str, str]
    meter: TreeMeter
    workdir: Path
    partitions: int
    master: str
    skip: float  # seconds after every target receives copies before the steady window opens
    window: float
    timeout: float
    steady_share: float = 0.1  # the window opens once this share of the copies landed (and `skip` passed)
    delivery: str = "at_least_once"  # exactly_once: MM2 and treedist transactional, every count read_committed
    wan: object = None  # the wan scenario's TwoDataCentres (ctx.boot: the brokers' direct addresses)
    distributor: dict | None = None  # treedist's `distributor` settings beyond its defaults (--distributor)
    rtm_batch_duration: str | None = None  # spark_rtm's real-time trigger (--rtm-batch-duration)

    @property
    def read_committed(self) -> bool:
        return self.delivery == "exactly_once"


def broker_keys(ctx: Context) -> list[str]:
    return [f"broker:{c}" for c in ctx.boot]


def make_topics(ctx: Context, contender: str, topic: str) -> None:
    for cluster, names in ctx.scenario.topics(contender, topic).items():
        for name in names:
            create_topic(ctx.boot[cluster], name, ctx.partitions)


def drop_topics(ctx: Context, keep_prefix: str = "__") -> None:
    """Delete every topic a run left (its own, MM2's internal ones): the next run starts on
    brokers holding nothing but their own metadata, whatever ran before."""
    for bootstrap in ctx.boot.values():
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [t for t in admin.list_topics(timeout=10).topics if not t.startswith(keep_prefix)]
        if names:
            for future in admin.delete_topics(names, operation_timeout=30).values():
                try:
                    future.result(60)
                except Exception as err:  # a topic already gone is fine; anything else is logged
                    log(f"delete on {bootstrap}: {err}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(t in admin.list_topics(timeout=10).topics for t in names):
            time.sleep(0.2)


def settle(ctx: Context, timeout: float = 90.0) -> dict:
    """Wait until every broker's CPU over the last 2 s is below SETTLED_CORES (bounded)."""
    started = time.monotonic()
    rates: dict[str, float] = {}
    while True:
        m0 = ctx.meter.mark()
        time.sleep(2.0)
        window = TreeMeter.between(m0, ctx.meter.mark())
        rates = {k: round(window.cpu.get(k, 0.0) / window.seconds, 3) for k in broker_keys(ctx)}
        if max(rates.values()) < SETTLED_CORES or time.monotonic() - started > timeout:
            break
    return {"waited_s": round(time.monotonic() - started, 1), "broker_cores_last_2s": rates,
            "settled": max(rates.values()) < SETTLED_CORES}


def preload_part(bootstrap: str, topic: str, partitions: int, owned: list[int], records: int, value_bytes: int,
                 tag: str) -> float:
    """Produce the records of `Records(records, partitions, value_bytes, tag)` that fall in the
    `owned` partitions (same keys, header, values and CreateTimes); returns seconds taken."""
    from confluent_kafka import Producer

    from benchmarks.harness.kafka import PRODUCER

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER, "delivery.report.only.error": True})
    value = b"v" * value_bytes
    base = int(time.time() * 1000) - 3_600_000
    started = time.monotonic()
    for part in owned:
        for i in range(part, records, partitions):
            while True:
                try:
                    producer.produce(topic, value, f"key-{i % 10_000:05d}".encode(), part, timestamp=base + i,
                                     headers=[("bench-seq", f"{tag}{i}".encode())])
                    break
                except BufferError:
                    producer.poll(0.05)
    if producer.flush(300):
        raise RuntimeError(f"preload to {bootstrap}/{topic}: records left undelivered")
    return time.monotonic() - started


def _preload_all(ctx: Context, topic: str, sources: list[str], records: int, value_bytes: int) -> dict:
    """One producer process per core (spread over the producing clusters, each owning some
    partitions): a produce-only figure of the same parallelism as the loop's, the floor check."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    cores = os.cpu_count() or 1
    per_source = max(1, cores // len(sources))
    jobs = [(ctx.boot[c], topic, ctx.partitions, [p for p in range(ctx.partitions) if p % per_source == k], records,
             value_bytes, c) for c in sources for k in range(per_source)]
    started = time.monotonic()
    # spawn, not fork: this process runs threads (meter, sampler, librdkafka's)
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=get_context("spawn")) as pool:
        list(pool.map(preload_part, *zip(*jobs)))
    seconds = time.monotonic() - started
    return {"records": records * len(sources), "seconds": round(seconds, 2), "processes": len(jobs),
            "records_per_second": round(records * len(sources) / seconds)}


def _cpu(window, prefix: str) -> float:
    return sum(v for k, v in window.cpu.items() if k.startswith(prefix))


def _meter(ctx: Context, handle: contenders.Handle) -> str:
    prefix = f"{handle.key}:"
    for i, pid in enumerate(handle.pids):
        ctx.meter.add(f"{prefix}{i}", pid)
    return prefix


def _cpu_by_kind(ctx: Context, handle: contenders.Handle, t0: float, t1: float) -> dict[str, float]:
    """The contender's CPU seconds between `t0` and `t1` by process kind (procs.kind: Spark JVM,
    Python planners and executors, the driver), summed over its roots: where a copy's CPU goes."""
    out: dict[str, float] = {}
    for i in range(len(handle.pids)):
        for kind, seconds in ctx.meter.by_kind_between(f"{handle.key}:{i}", t0, t1).items():
            out[kind] = round(out.get(kind, 0.0) + seconds, 3)
    return out


def _figures(ctx: Context, prefix: str, w, copies: int) -> dict:
    own = _cpu(w, prefix)
    brokers = {k.split(":", 1)[1]: round(w.cpu.get(k, 0.0), 3) for k in broker_keys(ctx)}
    return {
        "seconds": round(w.seconds, 3),
        "copies": copies,
        "copies_per_second": round(copies / w.seconds) if w.seconds > 0 else None,
        "cpu_seconds": round(own, 3),
        "cpu_us_per_copy": round(own * 1e6 / copies, 2) if copies else None,
        "broker_cpu_seconds": brokers,
        "broker_cpu_us_per_copy": round(sum(brokers.values()) * 1e6 / copies, 2) if copies else None,
        "machine_busy_fraction": w.as_dict()["machine_busy_fraction"],
        "other_processes_cpu_seconds": w.as_dict()["other_processes_cpu_seconds"],
    }


def _peak_memory(ctx: Context, prefix: str) -> dict:
    """The contender's peak RSS over its run (start-up included), summed over its processes
    (procs.TreeMeter: JVM spawn clones left out), and the peak summed PSS when the meter reads
    it (`--pss`); with several roots, the sum of each root's peak."""
    mib = 1 << 20
    rss = sum(v for k, v in ctx.meter.peak_rss.items() if k.startswith(prefix))
    out = {"peak_rss_mib": round(rss / mib)}
    by_kind: dict[str, int] = {}  # what the peak held, by process kind (executors, planners, the JVM, ...)
    for name, kinds in ctx.meter.peak_rss_by_kind.items():
        if name.startswith(prefix):
            for label, value in kinds.items():
                by_kind[label] = by_kind.get(label, 0) + value
    out["peak_rss_mib_by_kind"] = {label: round(value / mib) for label, value in sorted(by_kind.items())}
    out["peak_processes_by_kind"] = {label: sum(c.get(label, 0) for n, c in ctx.meter.peak_count_by_kind.items()
                                                if n.startswith(prefix)) for label in sorted(by_kind)}
    if ctx.meter.measure_pss:
        out["peak_pss_mib"] = round(sum(v for k, v in ctx.meter.peak_pss.items() if k.startswith(prefix)) / mib)
    return out


def drain(ctx: Context, contender: str, topic: str, records: int, value_bytes: int, run_id: str) -> dict:
    """Preload `records` on every producing cluster, start the contender, time the drain."""
    sc = ctx.scenario
    sources = sc.producers(rate_mode=False)
    make_topics(ctx, contender, topic)
    log(f"{run_id}: preloading {records} records on {sources}")
    produced = _preload_all(ctx, topic, sources, records, value_bytes)
    settled = settle(ctx)
    expected = produced["records"] * sc.copies_per_record()
    targets = {ctx.boot[c]: {t: ctx.partitions for t in ts} for c, ts in sc.targets(contender, topic, sources).items()}
    landing = Landing(targets, expected, read_committed=ctx.read_committed)
    bench_cpu0 = time.process_time()
    mark0 = ctx.meter.mark()
    handle, settings = contenders.start(contender, sc, ctx.boot, topic, ctx.partitions, ctx.workdir, run_id, ctx.master,
                                        delivery=ctx.delivery, wan=ctx.wan, distributor=ctx.distributor,
                                        rtm_batch_duration=ctx.rtm_batch_duration)
    prefix = _meter(ctx, handle)
    landing.start()
    log(f"{run_id}: {contender} started; waiting for {expected} copies")
    try:
        complete = landing.wait_done(ctx.timeout, check=handle.check)
        time.sleep(1.0)  # a copy beyond the expected count (a duplicate) would show up now
        if ctx.read_committed:  # markers count as offsets, so "done" came up to a few markers early:
            still_until = time.monotonic() + 30  # let the last transactions land (until 3 s without a change)
            while time.monotonic() < still_until and landing.samples[-1][0] - landing.when(landing.latest()) < 3.0:
                time.sleep(0.2)
        end_mark = ctx.meter.mark()
    finally:
        handle.stop()
        landing.stop()
    bench_cpu = time.process_time() - bench_cpu0
    final = landing._total() - landing.baseline  # after the stop: nothing more can land
    offsets_landed = final
    if ctx.read_committed:  # offsets count the transactions' markers too: count the records
        final = committed_records(targets) - landing.baseline
    if not complete:
        raise RuntimeError(f"{run_id}: {landing.latest()} of {expected} copies landed in {ctx.timeout}s")
    done = landing.done_at
    all_receiving = max(landing.first_seen.values())
    first_any = min(landing.first_seen.values())
    # Steady means past each contender's own start: the window opens `skip` s after every
    # target receives copies AND once `steady_share` of the copies landed. With the first rule
    # alone, treedist's single-link window fell inside its first micro-batch (whose copies land
    # mostly at its end) and measured 12-27k copies/s against ~100k from its checkpoints.
    share_at = landing.when(ctx.steady_share * expected) or all_receiving
    w_start = max(all_receiving + ctx.skip, share_at)
    w_end = min(w_start + ctx.window, done)
    full = w_start + ctx.window <= done
    if w_end - w_start < 1.0:  # drained too fast for any steady window: report the whole drain, flagged
        w_start, w_end = first_any, done
    (t0, n0), (t1, n1) = landing.at(w_start), landing.at(w_end)
    steady = _figures(ctx, prefix, TreeMeter.between(ctx.meter.at(t0), ctx.meter.at(t1)), n1 - n0)
    steady.update({"window_full": full, "sampler_hz": landing.hz(t0, t1),
                   "per_target_copies_per_second": landing.per_target_rates(t0, t1)})
    with_startup = _figures(ctx, prefix, TreeMeter.between(mark0, ctx.meter.at(done)), expected)
    return {
        "contender": contender, "run_id": run_id, "topic": topic, "preload": produced, "settle": settled,
        "expected_copies": expected, "copies_landed": final, "copies_per_record": round(final / produced["records"], 4),
        "transaction_markers": offsets_landed - final if ctx.read_committed else None,
        "first_copy_after_launch_s": round(first_any - handle.launched, 2),
        "all_targets_receiving_after_launch_s": round(all_receiving - handle.launched, 2),
        "all_landed_after_launch_s": round(done - handle.launched, 2),
        "steady": steady, "with_startup": with_startup,
        "harness_cpu_seconds": round(bench_cpu, 3), "settings": settings,
        "process_outputs": handle.outputs, "cpu_by_root": {k: round(v, 3) for k, v in
                                                            TreeMeter.between(mark0, end_mark).cpu.items() if k.startswith(prefix)},
    }


def committed_records(targets: dict[str, dict[str, int]], timeout: float = 300.0) -> int:
    """Records a read_committed consumer reads on `targets` ({bootstrap: {topic: partitions}}),
    from each partition's start to its end: offsets alone count transaction markers too (one
    per partition per transaction). Run after the contender stopped (nothing more lands);
    bounded by `timeout`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    total = 0
    deadline = time.monotonic() + timeout
    for bootstrap, topics in targets.items():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "vs-mm2-count", "enable.auto.commit": False,
                             "enable.partition.eof": True, "isolation.level": "read_committed",
                             "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
        try:
            parts = [TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)]
            consumer.assign(parts)
            pending = {(tp.topic, tp.partition) for tp in parts}
            while pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"counting the committed records on {bootstrap}: {len(pending)} partitions "
                                       f"unread after {timeout}s")
                for msg in consumer.consume(100_000, 1.0):
                    err = msg.error()
                    if err is None:
                        total += 1
                    elif err.code() == KafkaError._PARTITION_EOF:
                        pending.discard((msg.topic(), msg.partition()))
        finally:
            consumer.close()
    return total


def fixed_rate(ctx: Context, contender: str, topic: str, rate: float, warmup: float, run_id: str) -> dict:
    """Records at `rate` on c1; after a warm-up, `window` seconds measured: latency from
    CreateTime to a consumer's receipt on every target, CPU per copy."""
    sc = ctx.scenario
    make_topics(ctx, contender, topic)
    settled = settle(ctx)
    targets = sc.targets(contender, topic, ["c1"])
    # spark_rtm's copies carry the source's CreateTime in a header (Spark's sink cannot set it)
    stamp = {"timestamp_header": h} if (h := contenders.timestamp_header(contender)) else {}
    probe_targets = [{"name": c, "bootstrap": ctx.boot[c], "topic": t, "partitions": ctx.partitions, **stamp}
                     for c, ts in targets.items() for t in ts]
    probe_spec = {"targets": probe_targets, "read_committed": ctx.read_committed}
    probe = subprocess.Popen([sys.executable, "-m", "benchmarks.harness.latency_probe", json.dumps(probe_spec)],
                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    handle = None
    stop_s = None
    try:
        if probe.stdout.readline().strip() != "ready":
            raise RuntimeError("latency probe did not start")
        ctx.meter.add(f"probe:{run_id}", probe.pid)
        handle, settings = contenders.start(contender, sc, ctx.boot, topic, ctx.partitions, ctx.workdir, run_id, ctx.master,
                                            delivery=ctx.delivery, wan=ctx.wan, distributor=ctx.distributor,
                                            rtm_batch_duration=ctx.rtm_batch_duration)
        prefix = _meter(ctx, handle)
        sampled = {ctx.boot[c]: {t: ctx.partitions for t in ts} for c, ts in targets.items()}
        producer = rate_producer(ctx.boot["c1"])
        # Warm-up: through the contender's start-up until it has caught up (every record produced
        # before the last second's has landed on every target), then `warmup` s more. Records
        # keep coming at the rate meanwhile, so the start-up backlog is drained first: latency
        # is measured in the steady state, not while a contender is still catching up.
        landing = Landing(sampled, 1 << 62, read_committed=ctx.read_committed)
        landing.start()
        deadline = time.monotonic() + ctx.timeout
        warm_sent = last_chunk = 0
        while time.monotonic() < deadline:
            handle.check()
            if len(landing.first_seen) == len(probe_targets) and landing.latest() >= (warm_sent - last_chunk) * len(probe_targets):
                break
            last_chunk = produce_at_rate(ctx.boot["c1"], topic, ctx.partitions, rate, 1.0, producer=producer)
            warm_sent += last_chunk
        else:
            raise RuntimeError(f"{run_id}: not caught up on every target after {ctx.timeout}s")
        caught_up_s = round(time.monotonic() - handle.launched, 2)
        produce_at_rate(ctx.boot["c1"], topic, ctx.partitions, rate, warmup, producer=producer)
        before = landing.latest()
        from_ms = int(time.time() * 1000) + 1
        mark0 = ctx.meter.mark()
        sent = produce_at_rate(ctx.boot["c1"], topic, ctx.partitions, rate, ctx.window, producer=producer)
        until_ms = int(time.time() * 1000) + 1
        want = before + sent * len(probe_targets)
        wait_until = time.monotonic() + 30
        while landing.latest() < want and time.monotonic() < wait_until:
            time.sleep(0.1)
        mark1 = ctx.meter.mark()
        by_kind = _cpu_by_kind(ctx, handle, mark0[0], mark1[0])
        landing.stop()
        copies = landing.latest() - before
        if ctx.read_committed:  # offsets count transaction markers too: at most the copies made
            copies = min(copies, sent * len(probe_targets))
        probe.stdin.write(json.dumps({"from_ms": from_ms, "until_ms": until_ms, "expected": sent}) + "\n")
        probe.stdin.flush()
        latency = json.loads(probe.stdout.readline())
        handle.check()
    finally:
        if handle is not None:
            # after the window's records landed, with no more arriving: a lingering task is mid-linger
            # and must end it early (benchmarks/linger_costs.py stops one while records arrive)
            stopping = time.monotonic()
            handle.stop()
            stop_s = round(time.monotonic() - stopping, 2)
        if probe.poll() is None:
            probe.kill()
            probe.wait(10)
    return {"contender": contender, "run_id": run_id, "rate": rate, "sent": sent, "settle": settled,
            "caught_up_after_launch_s": caught_up_s, "stop_s": stop_s, **_peak_memory(ctx, prefix),
            "latency_at_receipt": latency, "measured": _figures(ctx, prefix, TreeMeter.between(mark0, mark1), copies),
            "cpu_seconds_by_process_kind": by_kind,
            "settings": settings}
