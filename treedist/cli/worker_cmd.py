"""`treedist worker`: one worker of a deployment's control plane (treedist.control.worker):
registers in etcd, runs the units the leader assigns it, leads when elected."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import typer

from treedist.cli.common import ConfigOption, console
from treedist.cli.endpoint_options import (EXPOSURE_FLAGS, LogFileOption, LogLevelOption, StatusPortOption, exposed_by_flags,
                                          metrics_port_option)
from treedist.control.errors import ControlError
from treedist.endpoints import Exposure

_LABEL = re.compile(r"^([A-Za-z0-9._-]+)=([A-Za-z0-9._-]+)$")


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)


@exposed_by_flags()
def worker(
    config: Path = ConfigOption,
    name: str = typer.Option(None, "--name", help="This worker's name, unique in the deployment (default: host-pid)."),
    label: list[str] = typer.Option([], "--label", help="KEY=VALUE, repeatable (e.g. dc=eu1): units whose source "
                                                        "cluster has the same labels prefer this worker."),
    state_dir: Path = typer.Option(Path(".treedist/worker"), "--state-dir", help="Local files of this worker."),
    connect_timeout: float = typer.Option(None, "--connect-timeout", help="Give up when etcd has not answered for "
                                                                          "this many seconds (default: keep retrying)."),
    status_port: int = StatusPortOption,
    metrics_port: int = metrics_port_option(" of the units this worker runs"),
    exposed: Exposure = EXPOSURE_FLAGS,  # --bind, --tls-cert, --tls-key, --auth-user, --auth-password, --insecure
    log_level: str = LogLevelOption,
    log_file: Path = LogFileOption,
) -> None:
    """Run one worker until SIGTERM or Ctrl-C: its units stop cleanly (batches settle), its
    leadership and lease are given back, so the others take over at once.

    The status port also answers /healthz (alive) and /readyz (200 when every unit assigned
    here runs and etcd answers, 503 with the reasons otherwise), as does the metrics port.

    Example: treedist worker -c deploy.yaml --label dc=eu1 --status-port 8090"""
    from treedist.config import load_spec
    from treedist.control.ready import worker_readiness
    from treedist.control.view import ViewServer
    from treedist.control.worker import Worker, WorkerOptions
    from treedist.ops.logs import setup_logging
    from treedist.driver.lifecycle import stop_with_parent
    from treedist.driver.process import DriverProcess

    setup_logging(log_level, log_file)
    stop_with_parent()  # started by the demo or the tests: stop when they die (SIGKILL included)
    labels = {}
    for item in label:
        match = _LABEL.match(item)
        if not match:
            raise ControlError(f"--label {item!r}: expected KEY=VALUE with [A-Za-z0-9._-] on both sides, e.g. dc=eu1")
        labels[match.group(1)] = match.group(2)
    name = name or f"{socket.gethostname()}-{os.getpid()}"
    options = WorkerOptions(name=name, labels=labels, state_dir=state_dir.resolve(), connect_timeout_s=connect_timeout)
    with DriverProcess(console.print) as process:
        node = Worker(load_spec(config), str(config), options, stopping=lambda: process.stopping)
        ready = worker_readiness(node, stopping=lambda: process.stopping)
        with process.until_stopped(f"worker {name} stopping (units settle and are handed over) ..."):
            if status_port:  # before the start: /healthz answers and /readyz says "starting" meanwhile
                view = ViewServer(node.view, status_port, exposure=exposed, readiness=ready).start()
                process.callback(view.stop)
                console.print(f"worker view: {view.url}")
            node.start(process)
            if metrics_port:
                from treedist.ops.worker_metrics import serve_worker_metrics

                metrics = serve_worker_metrics(process, node.deployment, node.app, name, metrics_port, str(config), exposed,
                                               readiness=ready)
                console.print(f"metrics: {metrics.url}")
            console.print(f"worker {name} ({node.deployment_id}) running; stop with Ctrl-C or SIGTERM")
            node.run()
    raise typer.Exit(process.exit_code())
