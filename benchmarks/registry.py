"""The embedded schema registry and the schema distributor.

1. Registrations/s and ID lookups/s against one registry (`treedist registry serve` as its own
   process, so client and server do not share a GIL): N distinct schemas registered one after
   another over HTTP (each acknowledged only after the registry read its record back from
   `_schemas`), then M lookups `GET /schemas/ids/{id}` of random IDs; per-request p50/p99.
2. Distribution latency on 4 clusters: registries c1 (primary) .. c4 as processes, the schema
   distributor (one Spark streaming query, this process, trigger 100 ms); after a warm-up,
   K registrations on c1 under `acme-prod-eu-orders-value`-style subjects, each timed from the
   registration's acknowledgement until every other registry serves the translated subject
   with the same ID (polling every 20 ms: the resolution). Target: within 5 s.
Run: .venv/bin/python -m benchmarks.registry [--quick] [--registrations 500] [--lookups 5000] [--distributions 20]
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import httpx
import yaml

from benchmarks.harness import cli
from benchmarks.harness.kafka import percentiles
from benchmarks.harness.results import log, machine, save
from benchmarks.harness.workbench import REPO, Workbench
from treedist.local.launcher import free_port, stop_pid

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
CLUSTERS = ["c1", "c2", "c3", "c4"]
VARS = {"tenant": "acme", "instance": "prod", "env": "eu"}
FORMATS = {"c1": "{tenant}-{instance}-{env}-{topic}", "c2": "{tenant}-{env}-{topic}", "c3": "{topic}",
           "c4": "{tenant}-{instance}-{env}-{topic}"}
USED_VARS = {"c1": VARS, "c2": {"tenant": "acme", "env": "eu"}, "c3": {}, "c4": VARS}


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{i}", "fields": [{"name": "id", "type": "string"}]})


def deployment(bench: Workbench, boot: dict[str, str], ports: dict[str, int]) -> dict:
    clusters = {}
    for c in CLUSTERS:
        clusters[c] = {"bootstrap_servers": boot[c], "topic_format": FORMATS[c]}
        if USED_VARS[c]:
            clusters[c]["vars"] = USED_VARS[c]
    return {
        "clusters": clusters,
        "tree": {"level": 2, "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}]},
        "topics": {"names": ["orders"]},
        "checkpoint_location": str(bench.dir / "ck"),
        "schemas": {"primary": "c1", "registries": {c: f"http://127.0.0.1:{p}" for c, p in ports.items()}},
    }


def start_registries(bench: Workbench, config, ports: dict[str, int]) -> dict[str, subprocess.Popen]:
    procs = {}
    for c, port in ports.items():
        log_file = open(bench.dir / f"registry-{c}.log", "ab")
        procs[c] = subprocess.Popen([sys.executable, "-m", "treedist.cli", "registry", "serve", "-c", str(config),
                                     "--cluster", c, "--port", str(port)], cwd=REPO, stdout=log_file,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        bench.meter.add(f"registry:{c}", procs[c].pid)
    for c, port in ports.items():
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if procs[c].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"registry {c} did not start; see {bench.dir}/registry-{c}.log")
            time.sleep(0.05)
    return procs


def timed(calls) -> tuple[list[float], float]:
    """Per-call milliseconds and the total seconds of running `calls` one after another."""
    lat = []
    began = time.perf_counter()
    for call in calls:
        t0 = time.perf_counter()
        call()
        lat.append((time.perf_counter() - t0) * 1000)
    return lat, time.perf_counter() - began


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=900)
    p.add_argument("--registrations", type=int, default=500)
    p.add_argument("--lookups", type=int, default=5000)
    p.add_argument("--distributions", type=int, default=20)
    args = p.parse_args(argv)
    facts = cli.begin(args, registrations=50, lookups=300, distributions=3)
    result: dict = {}
    with Workbench() as bench:
        boot = bench.brokers(CLUSTERS, {}, "registry")
        ports = {c: free_port() for c in CLUSTERS}
        config = bench.dir / "deploy.yaml"
        config.write_text(yaml.safe_dump(deployment(bench, boot, ports)))
        procs = start_registries(bench, config, ports)
        try:
            primary = httpx.Client(base_url=f"http://127.0.0.1:{ports['c1']}", headers=CT, timeout=30)

            def register(i: int, subject: str):
                response = primary.post(f"/subjects/{subject}/versions", json={"schema": schema(i)})
                response.raise_for_status()
                return response.json()["id"]

            # Distinct record names under one subject are not BACKWARD compatible: measure registration, not refusal.
            primary.put("/config", json={"compatibility": "NONE"}).raise_for_status()
            log(f"{args.registrations} registrations")
            reg_lat, reg_s = timed([lambda i=i: register(i, f"bench{i % 50}-value") for i in range(args.registrations)])
            log(f"{args.lookups} ID lookups")
            ids = list(range(1, args.registrations + 1))
            look_lat, look_s = timed([lambda: primary.get(f"/schemas/ids/{random.choice(ids)}").raise_for_status()
                                      for _ in range(args.lookups)])
            result["registrations"] = {"per_second": round(args.registrations / reg_s, 1), **percentiles(reg_lat)}
            result["id_lookups"] = {"per_second": round(args.lookups / look_s, 1), **percentiles(look_lat)}

            log("schema distributor: starting Spark")
            from treedist.config import load_deployment
            from treedist.driver.schemas import SchemaDistributor
            from treedist.spark.session import FAST_START_CONF, build_session

            spark = build_session(master=args.master, app_name="bench-registry", conf=FAST_START_CONF)
            dep = load_deployment(config)
            distributor = SchemaDistributor(dep, spark, trigger_interval="100 milliseconds").start()
            others = {c: httpx.Client(base_url=f"http://127.0.0.1:{ports[c]}", timeout=10) for c in CLUSTERS[1:]}
            naming = dep.subject_naming()

            def served_everywhere(subject: str, schema_id: int, timeout: float = 300) -> float:
                t0 = time.perf_counter()
                pending = {c: naming.translate_subject("c1", subject, c) for c in others}
                while pending:
                    for c, sub in list(pending.items()):
                        r = others[c].get(f"/subjects/{sub}/versions/latest")
                        if r.status_code == 200 and r.json()["id"] == schema_id:
                            del pending[c]
                    if time.perf_counter() - t0 > timeout:
                        raise RuntimeError(f"not distributed in {timeout}s: {pending}; {distributor.stats()}")
                    distributor.check()
                    time.sleep(0.02)
                return (time.perf_counter() - t0) * 1000

            try:
                log("warm-up: all earlier registrations distributed")
                warm_t0 = time.perf_counter()
                last = register(10**6, "acme-prod-eu-warmup-value")
                served_everywhere("acme-prod-eu-warmup-value", last)
                warm_s = time.perf_counter() - warm_t0
                dist = []
                for k in range(args.distributions):
                    subject = f"acme-prod-eu-orders{k}-value"
                    schema_id = register(2 * 10**6 + k, subject)
                    dist.append(served_everywhere(subject, schema_id))
                    time.sleep(0.3)
                result["distribution"] = {"first_served_after_start_s": round(warm_s, 1), **percentiles(dist),
                                          "within_5s": sum(1 for d in dist if d <= 5000), "stats": distributor.stats()}
            finally:
                distributor.stop()
                spark.stop()
        finally:
            for proc in procs.values():
                stop_pid(proc.pid)
    save("registry", {**facts, **result, "machine_at_end": machine()}, keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
