"""`treedist local up|down|status`: local Kafka-protocol clusters on loopback ports."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from treedist.cli.common import JsonOption, console, print_json
from treedist.local import LocalClusterError, LocalClusters
from treedist.local.launcher import ENGINES, pid_alive
from treedist.local.deployment import write_local_deployment
from treedist.local.etcd import MODES, SECURED, LocalEtcd, start_etcd
from treedist.local.registries import load_registries, planned_ports, start_registries, stop_registries

DEPLOYMENT_FILE = "deployment.yaml"  # in the state dir: what the local registries read

local_app = typer.Typer(help="Launch and stop local clusters: Apache Kafka (KRaft) or noida-db.", no_args_is_help=True)
StateDirOption = typer.Option(Path(".treedist/local"), "--state-dir", help="Data dirs, logs and the PID/port state file.")
EtcdModeOption = typer.Option(SECURED, "--etcd-mode", help="secured (TLS with client certificates, authentication, "
                                                           "a user limited to the deployment's prefix) or plain "
                                                           "(http, no authentication).")


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")


@local_app.command("up")
def up(
    clusters: int = typer.Option(4, "--clusters", "-n", min=1, max=26, help="How many clusters (c1..cN)."),
    state_dir: Path = StateDirOption,
    write_config: Path = typer.Option(None, "--write-config", help="Also write a deployment YAML for these clusters (balanced tree)."),
    registries: bool = typer.Option(True, "--registries/--no-registries", help="Start a schema registry per cluster (c1 primary)."),
    etcd: bool = typer.Option(True, "--etcd/--no-etcd", help="Start an etcd for the control plane (treedist worker)."),
    etcd_mode: str = EtcdModeOption,
    engine: str = typer.Option("kafka", "--engine", help="kafka (Apache Kafka, one KRaft node per cluster) or noida "
                                                         "(noida-db: starts in 0.1 s; no TLS, SASL, ACLs or topic IDs)."),
    brokers: int = typer.Option(1, "--brokers", min=1, max=5, help="KRaft nodes per cluster (kafka only), each broker "
                                                                   "and controller: with 3, topics get replication factor "
                                                                   "3 and min.insync.replicas=2, like a production cluster."),
    as_json: bool = JsonOption,
) -> None:
    """Start N local clusters, a schema registry per cluster and an etcd, and wait until each answers.

    With --brokers 3 each cluster is three KRaft nodes (combined broker and controller, the
    quorum of three survives one node down): topics created on it (the demo topic, topic sync's)
    get replication factor 3 and min.insync.replicas=2; `--json` then shows one row per node.

    Brokers listen on free loopback ports (ones already running are re-used). The deployment
    written with --write-config names the registries and the etcd (`control: {etcd: [...]}`:
    run it with `treedist worker -c FILE`). The etcd is secured unless --etcd-mode plain: the
    deployment's `control.etcd_tls` names the local CA and client certificate, and
    `control.auth` the user `treedist` with its password as `${file:...}` (0600, in the state dir).

    Example: treedist local up -n 2 --brokers 3 --write-config local.yaml"""
    if engine not in ENGINES:
        raise LocalClusterError(f"--engine {engine!r}: expected one of {list(ENGINES)}")
    if etcd_mode not in MODES:
        raise LocalClusterError(f"--etcd-mode {etcd_mode!r}: expected one of {list(MODES)}")
    if brokers > 1 and engine != "kafka":
        raise LocalClusterError(f"--brokers {brokers}: multi-broker clusters run on --engine kafka only, not {engine!r}")
    started = LocalClusters.start([f"c{i}" for i in range(1, clusters + 1)], state_dir, engine=engine, nodes=brokers)
    extra: dict = {}
    if etcd:
        server = LocalEtcd.load(Path(state_dir) / "etcd")
        if server is None or not server.is_ours():
            server = start_etcd(Path(state_dir) / "etcd", secured=etcd_mode == SECURED)
        elif server.secured != (etcd_mode == SECURED):
            raise LocalClusterError(f"--etcd-mode {etcd_mode}: the etcd running in {Path(state_dir) / 'etcd'} is "
                                    f"{'secured' if server.secured else 'plain'}: stop it first (treedist local down)")
        extra["control"] = server.control()
    if registries:
        ports = planned_ports(state_dir, started.names)
        extra["schemas"] = {"primary": started.names[0], "registries": {c: f"http://127.0.0.1:{p}" for c, p in ports.items()}}
        write_local_deployment(Path(state_dir) / DEPLOYMENT_FILE, started.bootstrap, **extra)
        start_registries(state_dir, (Path(state_dir) / DEPLOYMENT_FILE).resolve(), ports)
    if write_config:
        write_local_deployment(write_config, started.bootstrap, **extra)
    _show(started, as_json)


@local_app.command("status")
def status(state_dir: Path = StateDirOption, as_json: bool = JsonOption) -> None:
    """Show the local brokers recorded in the state dir and whether each runs.

    Example: treedist local status --json"""
    _show(_loaded(state_dir), as_json)


@local_app.command("down")
def down(state_dir: Path = StateDirOption) -> None:
    """Stop the local brokers by PID (data stays in the state dir).

    Example: treedist local down --state-dir .treedist/local"""
    clusters = _loaded(state_dir)
    registries = stop_registries(state_dir)  # before their brokers, so they stop cleanly
    clusters.stop()
    etcd = LocalEtcd.load(Path(state_dir) / "etcd")
    if etcd is not None:
        etcd.stop()
    console.print(f"stopped {len(clusters.brokers)} local clusters, {registries} registries"
                  f"{' and etcd' if etcd is not None else ''}; data kept in {state_dir}")


def _loaded(state_dir: Path) -> LocalClusters:
    clusters = LocalClusters.load(state_dir)
    if clusters is None:
        raise LocalClusterError(f"no local clusters recorded in {state_dir} (run `treedist local up`)")
    return clusters


def _show(clusters: LocalClusters, as_json: bool) -> None:
    rows = clusters.status()
    registries = load_registries(clusters.base_dir)
    etcd = LocalEtcd.load(Path(clusters.base_dir) / "etcd")
    for row in rows:
        registry = registries.get(row["name"])
        row["registry"] = registry.url if registry else None
        row["registry_running"] = bool(registry) and pid_alive(registry.pid)
        row["etcd"] = etcd.client_url if etcd else None  # one per state dir, shown on every row
        row["etcd_running"] = bool(etcd) and etcd.is_ours()
        row["etcd_secured"] = bool(etcd) and etcd.secured  # https with client certificates, auth on
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"local clusters ({clusters.base_dir})")
    for col in ("cluster", "node", "engine", "bootstrap", "pid", "running", "registry", "data dir"):
        table.add_column(col)
    for r in rows:
        registry = "-" if not r["registry"] else r["registry"] + ("" if r["registry_running"] else " [red](down)[/]")
        table.add_row(r["cluster"], str(r["node_id"]), r["engine"], r["bootstrap"], str(r["pid"]),
                      "yes" if r["running"] else "[red]no[/]", registry, r["data_dir"])
    console.print(table)
    if etcd is not None:
        security = (f"secured: TLS with client certificates, auth on, user treedist limited to {etcd.prefix}/"
                    if etcd.secured else "plain: no TLS, no auth")
        console.print(f"etcd: {etcd.client_url} ({security}; pid {etcd.pid}, "
                      f"{'running' if etcd.is_ours() else '[red]not running[/]'})")
