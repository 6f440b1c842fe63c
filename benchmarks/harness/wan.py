"""The `wan` scenario of the vs_mm2 benchmark: the 4-cluster reference tree in two data
centres, {c1, c2} and {c3, c4}, joined by the WAN proxy (treedist.local.wanproxy: 20 ms each
way, 40 ms round trip), on local Apache Kafka clusters.

Each contender is deployed as its documentation recommends for two data centres: a process per
data centre, its clients reaching the other data centre's brokers only through the proxy
(`TwoDataCentres.view(dc)`):
- MirrorMaker 2 (dedicated mode, `--clusters <dc's clusters>`): each process runs the flows
  INTO its data centre, so it consumes from the remote clusters and produces locally (Kafka's
  geo-replication docs: "consume from remote, produce to local"). Tuned for the WAN as Kafka's
  docs advise for high-latency links: bigger TCP buffers (`send.buffer.bytes`,
  `receive.buffer.bytes`), the large fetches and batches of the throughput settings, and more
  tasks (one per partition).
- treedist: one Spark application per data centre running the units of its own clusters
  (benchmarks.harness.one_unit, as a control-plane worker per data centre would), so c1's and
  c2's level-1 links stay inside dc1 and only the level-3 links (c1 -> c3, c3 -> c1, ...) write
  across the WAN.

The measurement side (landing sampler, latency probe, preload, rate producer) reads and writes
the brokers directly: latency is CreateTime to receipt on the target, not through the proxy.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness import mm2
from benchmarks.harness.treedist_run import TreedistRun, write_deployment
from treedist.local.wanproxy import DEFAULT_DELAY_MS, TwoDataCentres

DCS = {"dc1": ["c1", "c2"], "dc2": ["c3", "c4"]}
ONE_HOP_ACROSS = "c3"  # c1's level-3 link (tree) and flow c1 -> c3 (MM2): one hop across the WAN
# Kafka's docs for high-latency links: TCP buffers above the defaults (consumer receive 64 KiB,
# producer send 128 KiB would cap a connection at buffer/RTT: 1.6 MB/s at 40 ms).
WAN_CLIENT = {"send.buffer.bytes": str(4 << 20), "receive.buffer.bytes": str(4 << 20)}


def start_clusters(workdir: Path, delay_ms: float = DEFAULT_DELAY_MS) -> TwoDataCentres:
    return TwoDataCentres.start(workdir / "brokers", DCS, delay_ms=delay_ms)


def mm2_properties(view: dict[str, str], flows, topic: str, policy: str, tasks: int) -> dict[str, str]:
    props = mm2.properties(view, list(flows), topic, policy, tasks=tasks)
    for alias in view:
        props.update({f"{alias}.consumer.{k}": v for k, v in WAN_CLIENT.items()})
        props.update({f"{alias}.producer.{k}": v for k, v in WAN_CLIENT.items()})
    return props


def start(contender: str, scenario, wan: TwoDataCentres, topic: str, partitions: int, workdir: Path, run_id: str,
          master: str):
    """One process per data centre; returns (procs, logs, stop, settings)."""
    procs, logs, stops, settings = [], [], [], {}
    for dc, members in DCS.items():
        name = f"{run_id}-{dc}"
        if contender == "mm2":
            props = mm2_properties(wan.view(dc), scenario.mm2_flows, topic, scenario.mm2_policy, tasks=partitions)
            proc = mm2.start(props, workdir, name, args=["--clusters", *members])
            procs.append(proc)
            logs.append(workdir / f"{name}.log")
            settings[dc] = {"clusters": members, "properties": props}
        elif contender == "treedist":
            config = write_deployment(workdir / f"{name}.yaml", wan.view(dc), scenario.tree, [topic],
                                      workdir / f"ck-{name}", master)
            run = TreedistRun(config, workdir / f"{name}.log", units=[f"messages/{c}" for c in members])
            procs.append(run.proc)
            logs.append(run.log_file)
            stops.append(run.stop)
            settings[dc] = {"units": [f"messages/{c}" for c in members], "deployment": config.read_text()}
        else:
            raise ValueError(f"{contender}: the wan scenario runs mm2 and treedist")
    settings["wan"] = wan.proxy.settings()
    settings["brokers"] = wan.direct

    def stop() -> None:
        from concurrent.futures import ThreadPoolExecutor

        from treedist.local.launcher import stop_all

        if stops:  # both data centres' applications at once: each settles its in-flight batch
            with ThreadPoolExecutor(len(stops)) as pool:
                list(pool.map(lambda s: s(), stops))
        else:
            stop_all([p.pid for p in procs], grace=30)

    return procs, logs, stop, settings


def summary(results: dict[str, list[dict]]) -> dict:
    """The WAN figures per contender, over rounds: in drain mode each link's copies per second
    in the steady window (target cluster -> rate); at a fixed rate the one-hop latency across
    the WAN (c1 -> c3) and, for the record, every target's."""
    from benchmarks.harness.results import median_and_range

    out: dict = {"data_centres": DCS, "one_hop_across_wan": f"c1 -> {ONE_HOP_ACROSS}"}
    for mode, rounds in results.items():
        names = sorted({c for r in rounds for c in r["runs"]})
        block = {}
        for c in names:
            runs = [r["runs"][c] for r in rounds if c in r["runs"]]
            if mode == "drain":
                per_link: dict[str, list] = {}
                for run in runs:
                    for key, rate in run["steady"]["per_target_copies_per_second"].items():
                        per_link.setdefault(_cluster(key, run), []).append(rate)
                block[c] = {"link_copies_per_second": {k: median_and_range(v) for k, v in sorted(per_link.items())}}
            else:
                block[c] = {f"one_hop_{q}_across_wan": median_and_range(
                    [r["latency_at_receipt"].get(ONE_HOP_ACROSS, {}).get(q) for r in runs]) for q in ("p50_ms", "p99_ms")}
                block[c]["by_target_by_round"] = [r["latency_at_receipt"] for r in runs]
        out[mode] = block
    return out


def _cluster(key: str, run: dict) -> str:
    """`bootstrap/topic` (a landing target) -> `into <cluster>`, the link's end."""
    boot = key.split("/", 1)[0]
    names = {b: c for c, b in run["settings"]["brokers"].items()}
    return f"into {names.get(boot, boot)}"
