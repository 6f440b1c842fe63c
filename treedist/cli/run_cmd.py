"""`treedist run`: every distributor of a deployment in one Spark application.

With no -c it is the embedded demo: four local clusters in the reference tree, a demo topic,
a steady stream of keyed events to random clusters, live progress, and a verification.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table

from treedist.cli.common import console, load
from treedist.cli.endpoint_options import (EXPOSURE_FLAGS, LogFileOption, LogLevelOption, RunStatusPortOption, UiPortOption,
                                          exposed_by_flags, metrics_port_option)
from treedist.config import Deployment, parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.kafka.watermarks import OffsetReader
from treedist.local import LocalClusterError, LocalClusters
from treedist.local.launcher import ENGINE_NAMES, ENGINES
from treedist.local.demo import DemoWorkload
from treedist.local.switch import GroupSwitch
from treedist.local.deployment import write_local_deployment
from treedist.driver.lifecycle import StopRequested, StopSignals
from treedist.driver.process import DriverProcess
from treedist.driver.preflight import check_clients, check_connections
from treedist.endpoints import Exposure

DEMO_TOPIC = "demo"


def register(app: typer.Typer) -> None:
    app.command("run")(run)


@exposed_by_flags()
def run(
    config: Path = typer.Option(None, "--config", "-c", help="Deployment YAML; without it, the embedded 4-cluster demo."),
    duration: float = typer.Option(None, "--duration", help="Stop after this many seconds (default: run until Ctrl-C or SIGTERM)."),
    rate: float = typer.Option(2000.0, "--rate", help="Demo only: events per second produced to random clusters."),
    partitions: int = typer.Option(6, "--partitions", help="Demo only: partitions of the demo topic."),
    state_dir: Path = typer.Option(Path(".treedist/demo"), "--state-dir", help="Demo only: clusters, checkpoints and config (wiped at start; only a new, empty or treedist-marked directory)."),
    keep_clusters: bool = typer.Option(False, "--keep-clusters", help="Demo only: leave the local clusters running afterwards."),
    drain_timeout: float = typer.Option(180.0, "--drain-timeout", help="Demo only: seconds to wait for distributors to catch up before verifying."),
    metrics_port: int = metrics_port_option(),
    ui_port: int = UiPortOption,
    status_port: int = RunStatusPortOption,
    workers: int = typer.Option(1, "--workers", min=1, help="Demo only: control-plane workers to start (kill one "
                                                            "to see its units fail over to the others)."),
    engine: str = typer.Option("kafka", "--engine", help="Demo only: the local clusters' engine: kafka (Apache Kafka, "
                                                         "KRaft; ~10 s to start 4) or noida (noida-db, the quick option)."),
    brokers: int = typer.Option(1, "--brokers", min=1, max=5, help="Demo only: KRaft nodes per local cluster (kafka "
                                                                   "engine); 3: replication factor 3, min.insync.replicas=2."),
    etcd_mode: str = typer.Option("secured", "--etcd-mode", help="Demo only: the local etcd secured (TLS with client "
                                                                 "certificates, authentication) or plain (http, no auth)."),
    exposed: Exposure = EXPOSURE_FLAGS,  # --bind, --tls-cert, --tls-key, --auth-user, --auth-password, --insecure
    log_level: str = LogLevelOption,
    log_file: Path = LogFileOption,
) -> None:
    """Run all distributors until Ctrl-C, SIGTERM or --duration, or the embedded demo without -c.

    One streaming query per source cluster, reading each record once for all of its levels.
    With -c, in this process (a deployment with a control section runs on `treedist worker`s
    instead); without -c, the embedded demo runs through the control plane: local etcd and
    --workers worker processes.

    SIGTERM and SIGINT stop cleanly (batches settle, queries stop, local clusters stop; the
    demo still drains and verifies); a second signal forces. Exit 0 (130 after SIGINT); the
    demo exits 1 when its verification is not clean.

    --status-port serves /healthz (alive) and /readyz (200 when every query runs; 503 with
    the reasons), as do the metrics and web view ports.

    Example: treedist run -c deploy.yaml --metrics-port 9100 --ui-port 8080"""
    from treedist.ops.logs import setup_logging

    ops = Ops(metrics_port, ui_port, setup_logging(log_level, log_file), str(config or ""), exposed, status_port)
    with DriverProcess(console.print) as process:
        if config is not None:
            deployment = load(config)
            if deployment.control is not None:
                from treedist.control.errors import ControlError

                raise ControlError(f"{config}: control: this deployment runs on the control plane: start it with "
                                   f"`treedist worker -c {config}` (one or more), or remove the control section")
            app = None  # a signal may come before it exists
            with process.until_stopped("stopping the distributors (offsets are safe in the checkpoints) ..."):
                app = _start_app(process, deployment, ops)
                _show_progress(app, duration)
            failed = app.failed() if app is not None else []
        else:
            from treedist.local.etcd import MODES

            if engine not in ENGINES:
                raise LocalClusterError(f"--engine {engine!r}: expected one of {list(ENGINES)}")
            if etcd_mode not in MODES:
                raise LocalClusterError(f"--etcd-mode {etcd_mode!r}: expected one of {list(MODES)}")
            if brokers > 1 and engine != "kafka":
                raise LocalClusterError(f"--brokers {brokers}: multi-broker clusters run on --engine kafka only, not {engine!r}")
            clean = _run_demo(duration, rate, partitions, state_dir, keep_clusters, drain_timeout, process.signals,
                              ops, workers=workers, log_level="debug" if log_level == "debug" else "info", engine=engine,
                              etcd_mode=etcd_mode, brokers=brokers)
    # left the block: everything it started has stopped
    if config is None:
        raise typer.Exit(process.exit_code(clean))
    if failed:
        console.print(f"[red]links over their restart budget at the end:[/] {', '.join(failed)}")
    raise typer.Exit(process.exit_code(clean=not failed))


@dataclass(frozen=True)
class Ops:
    """What `run` serves and logs besides its work (treedist.ops)."""

    metrics_port: int
    ui_port: int
    recent_errors: object  # treedist.ops.logs.RecentErrors
    config_path: str
    exposure: object = None  # treedist.endpoints.Exposure of metrics and the web view (None: loopback)
    status_port: int = 0  # /healthz, /readyz and /api/status (treedist.ops.web.StatusServer)


def _start_app(process: DriverProcess, deployment: Deployment, ops: Ops):
    """Client settings checked, Spark started, distributors started; each registered on
    `process` (treedist.driver.process) so that whatever happens later (or during the start)
    is stopped in reverse order. The status snapshot (treedist.ops) is refreshed by a
    background job; metrics and the web view, when asked for, serve it. The status port
    listens once Spark runs, before the queries start: /readyz says "starting" until every query runs."""
    import threading

    from treedist.ops.probes import app_readiness
    from treedist.ops.serve import serve
    from treedist.ops.snapshot import RUN_TIMESTAMP_SCAN_RECORDS, StatusJob, StatusSource
    from treedist.driver.running import background_jobs

    check_clients(deployment)  # one line naming cluster and key, before any Spark output
    check_connections(deployment)  # one line naming cluster and cause (login, TLS, unreachable), ditto
    spark = process.session(deployment)
    source = StatusSource(deployment, config_path=ops.config_path, recent_errors=ops.recent_errors,
                          timestamp_scan_records=RUN_TIMESTAMP_SCAN_RECORDS)
    app = process.application(deployment, spark, jobs=[*background_jobs(deployment), StatusJob(source)])
    source.attach(app)
    started = threading.Event()
    ready = app_readiness(app, deployment, stopping=lambda: process.stopping, started=started.is_set)
    if ops.status_port:
        from treedist.ops.web import StatusServer

        status = StatusServer(source, ops.status_port, ready, ops.exposure).start()
        process.callback(status.stop)
        console.print(f"status port: {status.url}")
    _announce_queries(app)
    app.start()
    started.set()
    for what, url in serve(process, source, metrics_port=ops.metrics_port, ui_port=ops.ui_port, exposure=ops.exposure,
                           readiness=ready).items():
        console.print(f"{what}: {url}")
    return app


def _announce_queries(app) -> None:
    """Start-up progress: "query 2 of 4 (c2-messages) starting" as each query starts."""
    from treedist.records.plan import plan_all

    total = len(plan_all(app.deployment))
    app.on_query_start(lambda plan: console.print(f"query {len(app.running) + 1} of {total} ({plan.query_name}) starting ..."))


def _show_progress(app, duration: float | None) -> None:
    """Supervise and show the distributors every second until --duration (or a signal)."""
    with Live(console=console, refresh_per_second=2) as live:
        for _ in _ticks(duration):
            app.check()
            live.update(_distributor_table(app.progress()))


def _run_demo(duration, rate, partitions, state_dir: Path, keep_clusters: bool, drain_timeout: float,
              signals: StopSignals, ops: Ops, workers: int = 1, log_level: str = "warning", engine: str = "kafka",
              etcd_mode: str = "secured", brokers: int = 1) -> bool:
    """The embedded demo, through the control plane: local clusters, registries and etcd;
    `workers` `treedist worker` processes (each its own Spark application) take the
    deployment's units from the leader; events flow, a consumer group switches clusters,
    then the workers stop, and every cluster is verified."""
    from treedist.cli.verify_cmd import print_report
    from treedist.control.connect import etcd_client
    from treedist.control.keys import Keys
    from treedist.local import avro_demo  # imported here, not at the top: its registry client would cost every command memory
    from treedist.local.etcd import SECURED, start_etcd
    from treedist.local import statedir as state_dirs
    from treedist.local.lock import StateDirLock
    from treedist.local.workers import LocalWorkers
    from treedist.control.ready import units_readiness
    from treedist.control.status import control_snapshot
    from treedist.ops.serve import serve
    from treedist.ops.snapshot import RUN_TIMESTAMP_SCAN_RECORDS, StatusSource
    from treedist.verify import verify_topic

    clusters_dir = state_dir / "clusters"
    with ExitStack() as stack:
        stack.enter_context(StateDirLock(state_dir))  # before anything in state_dir is stopped or wiped
        state_dirs.check_ours(state_dir)  # a directory treedist did not mark is never stopped in or wiped
        previous = LocalClusters.load(clusters_dir)  # left running by an earlier --keep-clusters
        if previous:
            previous.stop()
        state_dirs.reset(state_dir)
        shape = f" of {brokers} brokers each (replication factor 3, min.insync.replicas=2)" if brokers >= 3 else (
            f" of {brokers} brokers each" if brokers > 1 else "")
        console.print(f"starting 4 local {ENGINE_NAMES[engine]} clusters{shape} and etcd in {state_dir} ...")
        started_at = time.monotonic()
        clusters = LocalClusters.start(["c1", "c2", "c3", "c4"], clusters_dir, engine=engine, nodes=brokers)
        console.print(f"4 clusters answered in {time.monotonic() - started_at:.1f} s")
        if keep_clusters:
            stack.callback(console.print, "local clusters left running; stop them with: "
                                          f"treedist local down --state-dir {clusters_dir}")
        else:
            stack.callback(clusters.stop)
            signals.on_force(lambda: clusters.stop(grace=0.5))
        etcd = start_etcd(state_dir / "etcd", secured=etcd_mode == SECURED)  # TLS, client certificates, auth
        stack.callback(etcd.stop)
        signals.on_force(lambda: etcd.stop(grace=0.5))
        ports = avro_demo.registry_ports(clusters.names)
        config_path = state_dir / "deployment.yaml"
        spec = write_local_deployment(
            config_path,
            clusters.bootstrap,
            topics=[DEMO_TOPIC],
            checkpoint_location=str((state_dir / "checkpoints").resolve()),
            # exact: the switch skips nothing however far the copies lag (timestamp mode skips what
            # arrived on c1 later than the margin, as on a loaded machine with three-broker clusters)
            offsets={"mode": "exact", "margin": "5s", "poll_interval": "1s"},
            schemas={"primary": "c1", "registries": {c: f"http://127.0.0.1:{p}" for c, p in ports.items()}},
            control={**etcd.control(), "lease_ttl": "6s"},  # the password as ${file:...}
        )
        deployment = parse_deployment(spec, source=str(config_path))
        check_clients(deployment)  # one line naming cluster and key, before any worker starts
        registries = avro_demo.start_registries(deployment)  # Avro events: IDs from c1, distributed
        for server in registries.values():
            stack.callback(server.stop)
        for name, cluster in deployment.clusters.items():
            ensure_topics(name, admin_client(cluster.client_config()), {DEMO_TOPIC: partitions})
        control = etcd_client(deployment.control, str(config_path))
        stack.callback(control.close)
        keys = Keys(deployment.control.prefix)
        source = StatusSource(deployment, config_path=str(config_path), recent_errors=ops.recent_errors,
                              timestamp_scan_records=RUN_TIMESTAMP_SCAN_RECORDS)
        ready = units_readiness(lambda: control_snapshot(control, keys), deployment_units(deployment))
        if ops.status_port:
            from treedist.ops.web import StatusServer

            status = StatusServer(source, ops.status_port, ready, ops.exposure).start()
            stack.callback(status.stop)
            console.print(f"status port: {status.url}")
        console.print(
            f"deployment written to {config_path}; starting {workers} worker{'s' if workers > 1 else ''} "
            f"(etcd {etcd.client_url}{', TLS and auth' if etcd.secured else ''}); the leader assigns the units: "
            "one query per cluster, the offset "
            "jobs, topic sync and the schema distributor ..."
        )
        clients = {name: c.client_config() for name, c in deployment.clusters.items()}
        counters = {name: OffsetReader(conf, cluster=name, timeout_s=5.0) for name, conf in clients.items()}
        with ExitStack() as work_stack:
            pool = LocalWorkers(config_path, state_dir / "workers", log_level=log_level)
            work_stack.callback(pool.stop_all)
            signals.on_force(pool.force)
            try:
                for i in range(workers):
                    pool.start(f"w{i + 1}")
                pool.wait_ready()
                _await_units(control, keys, len(deployment_units(deployment)), signals)
            except StopRequested as stop:
                console.print(f"{stop} while starting: stopping; nothing to verify")
                return False
            for what, url in serve(work_stack, source, metrics_port=ops.metrics_port, ui_port=ops.ui_port,
                                   exposure=ops.exposure, readiness=ready).items():
                console.print(f"{what}: {url}")
            workload = DemoWorkload(clients, DEMO_TOPIC, rate,
                                    serialize=avro_demo.serializer(deployment.schemas.registries["c1"], DEMO_TOPIC))
            workload.start()
            work_stack.callback(workload.stop)
            # consumes on c1, switches to c3 mid-run
            switch = GroupSwitch(clients, DEMO_TOPIC, margin_ms=deployment.offsets.margin_ms)
            switch.start()
            switch_at = time.monotonic() + (duration / 2 if duration else 30.0)
            with Live(console=console, refresh_per_second=2) as live:
                try:
                    for _ in _ticks(duration):
                        if time.monotonic() >= switch_at:
                            switch.switch()
                        live.update(_demo_view(_control(control, keys), workload, _received(counters)))
                except StopRequested as stop:
                    console.print(f"{stop}: stopping the producers, then draining and verifying ...")
                workload.stop()
                console.print(f"stopped producing after {workload.total} events; waiting for the distributors to catch up ...")
                deadline = time.monotonic() + drain_timeout
                while time.monotonic() < deadline:
                    received = _received(counters)
                    live.update(_demo_view(_control(control, keys), workload, received))
                    if all(r >= workload.total for r in received.values()):
                        break
                    time.sleep(1)
            moved = switch.finish(workload.total)
            console.print("stopping the workers (batches settle, units are released) ...")
            codes = pool.stop_all()
            if any(code != 0 for code in codes.values()):
                console.print(f"[red]workers did not stop cleanly:[/] {codes}")
        report = verify_topic(deployment, DEMO_TOPIC)
        console.print(f"\nverification of '{DEMO_TOPIC}' after {workload.total} events:")
        print_report(report)
        after = "not translated in time: read from the start" if moved.translated_after_s is None else (
            f"offsets there {moved.translated_after_s:.1f} s after the switch")
        console.print(f"consumer group switch {moved.first} -> {moved.second} (offsets.mode {deployment.offsets.mode}; {after}): "
                      f"read {moved.read_first} on {moved.first}, {moved.read_second} on {moved.second}; "
                      f"missed {moved.missed}, repeated {moved.repeated}")
        decoded = avro_demo.decode_check(deployment, DEMO_TOPIC)
        for d in decoded:
            console.print(f"{d.cluster}: {d.records} records decoded through its own registry, "
                          f"{'[red]' if d.failures else ''}{d.failures} failed to decode{'[/]' if d.failures else ''}"
                          + (f" (first: {d.first_error})" if d.first_error else ""))
        return report.ok and moved.missed == 0 and not any(d.failures for d in decoded)


def deployment_units(deployment: Deployment) -> list[str]:
    from treedist.driver.unit_kinds import units_of

    return [unit.id for unit in units_of(deployment)]


def _await_units(control, keys, total: int, signals: StopSignals, timeout_s: float = 180.0) -> None:
    """Print each unit as a worker starts it, until every unit runs (start-up progress)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = _control(control, keys)
        for unit in snap.get("units", []):
            if unit["running_on"] and unit["unit"] not in seen:
                seen.add(unit["unit"])
                console.print(f"unit {len(seen)} of {total} ({unit['unit']}) runs on worker {unit['running_on']}")
        if len(seen) >= total:
            return
        time.sleep(0.5)
    console.print(f"[yellow]{total - len(seen)} unit(s) not running after {timeout_s:.0f} s; going on[/]")


def _control(control, keys) -> dict:
    from treedist.control.errors import ControlError
    from treedist.control.status import control_snapshot

    try:
        return control_snapshot(control, keys)
    except ControlError as err:
        return {"error": str(err), "workers": [], "units": []}


def _ticks(duration: float | None):
    started = time.monotonic()
    while duration is None or time.monotonic() - started < duration:
        yield
        time.sleep(1)


def _received(counters) -> dict[str, int]:
    """Records of the demo topic on each cluster (originals and copies), from watermarks."""
    return {name: reader.record_count(DEMO_TOPIC) for name, reader in counters.items()}


def _demo_view(control: dict, workload: DemoWorkload, received: dict[str, int]) -> Group:
    expected = workload.total
    table = Table(title=f"demo topic '{DEMO_TOPIC}': every event must reach every cluster once")
    for col in ("cluster", "produced here", "received", "expected", "behind"):
        table.add_column(col, justify="right")
    for name, count in received.items():
        behind = expected - count
        table.add_row(name, str(workload.delivered[name]), str(count), str(expected), str(behind), style="red" if behind < 0 else None)
    return Group(table, *_control_tables(control))


def _control_tables(control: dict) -> list[Table]:
    """Workers (leader, units, CPU, RSS) and units (worker, state, rate, lag), from etcd."""
    workers = Table(title=f"workers (leader: {control.get('leader') or '-'})" + (f" [red]{control['error']}[/]" if control.get("error") else ""))
    for col in ("worker", "leader", "units", "cpu", "rss MiB"):
        workers.add_column(col, justify="right")
    for w in control.get("workers", []):
        workers.add_row(w["name"], "yes" if w["leader"] else "", str(len(w["units"])),
                        f"{w['cpu']:.2f}" if w.get("cpu") is not None else "-",
                        str(int(w["rss_bytes"] / 2**20)) if w.get("rss_bytes") else "-")
    units = Table(title="units")
    for col in ("unit", "worker", "state", "records/s", "lag"):
        units.add_column(col, justify="right")
    for u in control.get("units", []):
        units.add_row(u["unit"], u["running_on"] or f"({u['assigned_to'] or '-'})", u["state"],
                      _num(u.get("records_per_s")), _num(u.get("lag_records")))
    return [workers, units]


def _num(value) -> str:
    return "-" if value is None else str(value)


def _distributor_table(rows: list[dict]) -> Table:
    table = Table(title="distributors")
    for col in ("distributor", "target", "state", "batch", "read/s", "read", "copied", "malformed", "restarts"):
        table.add_column(col, justify="right")
    for r in rows:
        state = r["state"] if r["state"] in ("running", "starting") else f"[red]{r['state']}[/]"
        if r["waiting_on"]:
            state += f" for {', '.join(r['waiting_on'])}"
        table.add_row(
            r["distributor"], r["target"], state, str(r["batch"]),
            str(r["records_per_second"]), str(r["records_in"]), str(r["copied"]), str(r["malformed"]), str(r["restarts"]),
        )
    return table
