"""Topic sync: one pass over N topics (default 1,000) on 4 local clusters, cold (every topic
exists on c1 only: 3 x N topics to create, with their partitions and a topic-level config)
and warm (everything agrees: nothing to do). Seconds per pass and Admin API calls per pass
(by method), measured on `treedist.topics.sync.TopicSync`, the code the background job runs.
Run: .venv/bin/python -m benchmarks.topic_sync [--quick] [--topics 1000] [--partitions 2]
"""

from __future__ import annotations

import time

from benchmarks.harness import cli
from benchmarks.harness.results import log, machine, save
from benchmarks.harness.workbench import Workbench
from treedist.config import parse_deployment
from treedist.kafka.topic_admin import TopicAdmin
from treedist.local.deployment import local_deployment
from treedist.topics.sync import TopicSync

CLUSTERS = ["c1", "c2", "c3", "c4"]
PREFIX = "bench-sync-"


def one_pass(sync: TopicSync) -> dict:
    before = dict(sync.calls.counts)
    started = time.monotonic()
    result = sync.run_once()
    seconds = time.monotonic() - started
    calls = {k: v - before.get(k, 0) for k, v in sync.calls.counts.items() if v - before.get(k, 0)}
    kinds: dict[str, int] = {}
    for action in result.applied:
        kinds[action.kind] = kinds.get(action.kind, 0) + 1
    return {"seconds": round(seconds, 3), "admin_calls": sum(calls.values()), "admin_calls_by_method": calls,
            "actions": kinds, "unreachable": list(result.unreachable)}


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=900)
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--warm-passes", type=int, default=3)
    args = p.parse_args(argv)
    facts = cli.begin(args, topics=100, warm_passes=2)
    with Workbench() as bench:
        boot = bench.brokers(CLUSTERS, {}, "sync")
        names = [f"{PREFIX}{i:05d}" for i in range(args.topics)]
        log(f"creating {len(names)} topics on c1")
        seed = TopicAdmin("c1", {"bootstrap.servers": boot["c1"]}, timeout_s=60.0)
        failed = seed.create({n: (args.partitions, {"retention.ms": "86400000"}) for n in names}, None)
        assert not failed, list(failed.values())[:3]
        spec = local_deployment(boot)
        spec["topics"] = {"regex": [f"{PREFIX}.*"]}
        sync = TopicSync(parse_deployment(spec), timeout_s=60.0)
        log("cold pass")
        cold = one_pass(sync)
        log(f"cold: {cold['seconds']} s, {cold['admin_calls']} calls")
        # every cluster has every topic with the partitions and the config now (checked, not assumed)
        for cluster in CLUSTERS:
            seen = TopicAdmin(cluster, {"bootstrap.servers": boot[cluster]}, timeout_s=60.0).describe(lambda n: n.startswith(PREFIX))
            assert len(seen) == args.topics and all(
                s.partitions == args.partitions and s.configs == {"retention.ms": "86400000"} for s in seen.values()
            ), cluster
        warm = [one_pass(sync) for _ in range(args.warm_passes)]
        log(f"warm: {[w['seconds'] for w in warm]} s")
        assert all(not w["actions"] for w in warm)
    save("topic_sync", {
        **facts,
        "clusters": len(CLUSTERS), "topics": args.topics, "partitions_per_topic": args.partitions,
        "cold_pass": cold, "warm_passes": warm,
        "warm_pass_seconds_median": sorted(w["seconds"] for w in warm)[len(warm) // 2],
        "machine_at_end": machine(),
    }, keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
