"""Offset distribution on the 4-cluster reference tree: 100 groups x 60 partitions.

The offset jobs run as in treedist's driver (treedist.offsets.offset_jobs under the pipeline's
Scheduler, poll_interval 1 s), in this process, against 4 fresh local brokers; no Spark (the
jobs do not use it). The same records (60 partitions x 20, 1 s apart) are written on every
cluster, as the record distributors would have copied them. All groups commit every partition on
c1 once (the initial load: 6,000 commits to translate); then, round after round, 10 groups
commit new offsets on c1 and a watcher polls c4 (two hops) until each group's translation is
there. Reported: commit-on-c1 to translation-on-c4 latency p50/p99 over the groups of the rounds;
time and CPU of one cycle of a job (initial load and quiet); the driver's memory (RSS) added by
the jobs.
Run: .venv/bin/python -m benchmarks.offsets [--quick] [--groups 100] [--partitions 60] [--rounds 10]
"""

from __future__ import annotations

import resource
import time

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from benchmarks.harness import cli
from benchmarks.harness.kafka import percentiles
from benchmarks.harness.results import log, machine, save
from benchmarks.harness.trees import REFERENCE_4, clusters
from benchmarks.harness.workbench import Workbench
from treedist.config import parse_deployment
from treedist.kafka.admin import group_committed, groups_committed
from treedist.local.deployment import local_deployment
from treedist.offsets import offset_jobs
from treedist.offsets.groups import COORDINATOR_BUSY
from treedist.driver.jobs import Scheduler

TOPIC = "offsets-bench"
RECORDS = 20


def rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# Apache Kafka answers a group's commits NOT_COORDINATOR (per partition, in a result that does
# not raise) while it loads the `__consumer_offsets` partition of the group: right after the
# topic's creation, i.e. on the first commits of a fresh cluster. Unchecked, they were lost and
# the initial load waited forever for translations of commits that never happened. Those
# answers are treedist's own GroupClient's COORDINATOR_BUSY.
COORDINATOR_LOADING = COORDINATOR_BUSY


def commit_all(admin: AdminClient, groups: list[str], partitions: int, offset: int, attempts: int = 60) -> None:
    """Commit `offset` on every partition of every group, at once; the groups whose coordinator
    is loading are committed again (0.5 s apart, at most `attempts` times)."""
    todo = list(groups)
    for _ in range(attempts):
        futures = {g: admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g, [TopicPartition(TOPIC, p, offset) for p in range(partitions)])])[g]
            for g in todo}
        todo = []
        for g, f in futures.items():
            try:
                errors = [tp.error for tp in f.result(timeout=30).topic_partitions if tp.error is not None]
            except KafkaException as err:
                errors = [err.args[0]]
            if any(e.code() not in COORDINATOR_LOADING for e in errors):
                raise RuntimeError(f"committing group {g!r} on the source: {errors[0]}")
            if errors:
                todo.append(g)
        if not todo:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{len(todo)} groups, e.g. {todo[0]!r}: coordinator still loading after {attempts} attempts")


def coordinators_ready(admin: AdminClient, groups: list[str], attempts: int = 120) -> None:
    """Wait (0.5 s apart, bounded) until the coordinators of `groups` answer: on a fresh Apache
    Kafka cluster the first group request creates `__consumer_offsets`, whose 50 partitions
    then load for seconds; not part of what is measured."""
    for _ in range(attempts):
        try:
            groups_committed(admin, groups, timeout=30)
            return
        except KafkaException:
            time.sleep(0.5)
    raise RuntimeError(f"group coordinators not ready after {attempts} attempts")


def translated(admin: AdminClient, group: str, partitions: int, offset: int) -> bool:
    # Through treedist's reader: a bare list_consumer_group_offsets on a group whose coordinator
    # is still loading crashes the process (librdkafka#5040; treedist.kafka.admin.groups_committed).
    try:
        result = group_committed(admin, group, timeout=30)
    except KafkaException:
        return False
    found = {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == TOPIC}
    return len(found) == partitions and all(o == offset for o in found.values())


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=1200)
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--partitions", type=int, default=60)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--per-round", type=int, default=10)
    args = p.parse_args(argv)
    facts = cli.begin(args, groups=10, partitions=6, rounds=2, per_round=3)
    with Workbench() as bench:
        boot = bench.brokers(clusters(REFERENCE_4), {TOPIC: args.partitions}, "offsets")
        base = int(time.time() * 1000) - 3_600_000
        for servers in boot.values():
            producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
            for part in range(args.partitions):
                for i in range(RECORDS):
                    producer.produce(TOPIC, value=b"x", partition=part, timestamp=base + i * 1000)
            producer.flush(60)
        deployment = parse_deployment(local_deployment(boot, topics=[TOPIC], offsets={"margin": "0s", "poll_interval": "1s"}))
        groups = [f"bench-{i:03d}" for i in range(args.groups)]
        c1, c4 = AdminClient({"bootstrap.servers": boot["c1"]}), AdminClient({"bootstrap.servers": boot["c4"]})
        for servers in boot.values():  # every cluster's jobs read and commit these groups
            coordinators_ready(AdminClient({"bootstrap.servers": servers}), groups)
        rss_before = rss_mib()
        jobs = offset_jobs(deployment)
        scheduler = Scheduler(jobs)
        scheduler.start()
        try:
            log(f"initial load: {args.groups} groups x {args.partitions} partitions committed on c1")
            cpu0, t0 = time.process_time(), time.monotonic()
            commit_all(c1, groups, args.partitions, 10)
            # margin 0: committed 10 -> last consumed record 9 -> record 9 on every cluster
            while not all(translated(c4, g, args.partitions, 9) for g in groups):
                time.sleep(0.2)
            initial = {"seconds_to_c4": round(time.monotonic() - t0, 2), "cpu_seconds": round(time.process_time() - cpu0, 2),
                       "commits_translated": 3 * args.groups * args.partitions}
            log(f"initial load on c4 after {initial['seconds_to_c4']} s")
            latencies = []
            for r in range(args.rounds):
                chosen = groups[(r * args.per_round) % len(groups):][: args.per_round]
                offset = 11 + r % (RECORDS - 12)
                committed_at = time.monotonic()
                commit_all(c1, chosen, args.partitions, offset)
                waiting = set(chosen)
                while waiting:
                    for g in sorted(waiting):
                        if translated(c4, g, args.partitions, offset - 1):
                            latencies.append(1000 * (time.monotonic() - committed_at))
                            waiting.discard(g)
                    time.sleep(0.05)
            log("quiet: 10 s without commits")
            passes0 = {s["name"]: s["passes"] for s in scheduler.snapshot()}
            cpu0, t0 = time.process_time(), time.monotonic()
            time.sleep(10)
            quiet_cpu, quiet_s = time.process_time() - cpu0, time.monotonic() - t0
            passes = sum(s["passes"] - passes0[s["name"]] for s in scheduler.snapshot())
            states = scheduler.snapshot()
        finally:
            scheduler.stop()
        rss_after = rss_mib()
    result = {
        "groups": args.groups, "partitions": args.partitions,
        "commit_c1_to_c4": percentiles(latencies),
        "initial_load": initial,
        "quiet_cycle": {"passes": passes, "cpu_ms_per_pass": round(1000 * quiet_cpu / max(passes, 1), 1),
                        "seconds": round(quiet_s, 1)},
        "last_pass_seconds": {s["name"]: round(s["last_pass_seconds"] or 0, 3) for s in states},
        "job_failures": {s["name"]: s["failures"] for s in states},
        "driver_rss_mib": {"before_jobs": round(rss_before, 1), "after": round(rss_after, 1),
                           "peak": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
    }
    save("offsets", {**facts, **result, "machine_at_end": machine()}, keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
