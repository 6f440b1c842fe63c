"""`treedist status`: per link of a running deployment, from another shell: state, rate,
lag (records, seconds), last batch. Reads the brokers and the checkpoints
(treedist.ops.snapshot); with --ui-port it serves the web view until Ctrl-C or SIGTERM."""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from treedist.cli.common import ConfigOption, JsonOption, console, load, print_json
from treedist.cli.endpoint_options import (EXPOSURE_FLAGS, LogFileOption, LogLevelOption, UiPortOption, exposed_by_flags,
                                          metrics_port_option)
from treedist.endpoints import Exposure


def register(app: typer.Typer) -> None:
    app.command("status")(status)


@exposed_by_flags()
def status(
    config: Path = ConfigOption,
    as_json: bool = JsonOption,
    ui_port: int = UiPortOption,
    metrics_port: int = metrics_port_option(" (with --ui-port)"),
    exposed: Exposure = EXPOSURE_FLAGS,  # --bind, --tls-cert, --tls-key, --auth-user, --auth-password, --insecure
    log_level: str = LogLevelOption,
    log_file: Path = LogFileOption,
) -> None:
    """Per link: state, copied records per second, lag in records and in seconds, last batch.

    The state is running, waiting for an unreachable cluster, or failed. Works against a
    running deployment from another shell (it reads the brokers and the checkpoints). With
    --ui-port it serves the web view (and with --metrics-port the metrics) until Ctrl-C.

    Example: treedist status -c deploy.yaml --json"""
    from treedist.ops.logs import setup_logging
    from treedist.ops.snapshot import StatusSource

    deployment = load(config)
    if not ui_port:
        # One look: what the retries and librdkafka would log is in the table (state, and the
        # error of each unreachable cluster), so it is not printed twice.
        ours = logging.getLogger("treedist")
        level = ours.level
        ours.setLevel(logging.CRITICAL)
        try:
            snap = StatusSource(deployment, config_path=str(config)).refresh()
        finally:
            ours.setLevel(level)
        if deployment.control is not None:
            snap["control"] = _control_status(deployment)
        print_json(snap) if as_json else print_status(snap)
        return
    from treedist.ops.serve import serve
    from treedist.driver.lifecycle import StopRequested, StopSignals

    recent = setup_logging(log_level, log_file)
    source = StatusSource(deployment, config_path=str(config), recent_errors=recent)
    with StopSignals() as signals, ExitStack() as stack:
        for what, url in serve(stack, source, metrics_port=metrics_port, ui_port=ui_port, exposure=exposed).items():
            console.print(f"{what}: {url}")
        try:
            while True:
                source.refresh()  # also logs condensed outage lines
                time.sleep(source.refresh_interval_s)
        except StopRequested as stop:
            console.print(f"{stop}: stopping")
    raise typer.Exit(signals.exit_code())


def print_status(snap: dict) -> None:
    table = Table(title=f"links of {snap['deployment'] or 'the deployment'}")
    for col in ("link", "target", "state", "records/s", "lag records", "lag s", "last batch"):
        table.add_column(col, justify="right")
    for link in snap["links"]:
        state = link["state"] + (f" ({', '.join(link['unreachable'])} unreachable)" if link["unreachable"] else "")
        ago = f"{snap['taken_at'] - link['last_batch_at']:.0f} s ago" if link["last_batch_at"] else "-"
        table.add_row(link["distributor"], link["target"], state, str(link["records_per_second"]),
                      _num(link["lag_records"]), _num(link["lag_seconds"]), ago,
                      style={"waiting": "yellow", "failed": "red"}.get(link["state"]))
    console.print(table)
    for link in snap["links"]:
        if link.get("reason"):
            color = "red" if link["state"] == "failed" else "yellow"
            console.print(f"[{color}]{link['distributor']} {link['state']}:[/] {escape(link['reason'])}")
    passive = [name for name, c in snap["clusters"].items() if c.get("passive")]
    if passive:
        console.print("passive (receive only, no links of their own): " + ", ".join(passive))
    down = [f"{name} ({c['error']})" for name, c in snap["clusters"].items() if not c["reachable"]]
    if down:
        console.print("[red]unreachable:[/] " + "; ".join(down))
    if "control" in snap:
        print_control(snap["control"])


def _control_status(deployment) -> dict:
    """The control plane's part of the status (treedist.control.status), or its error."""
    from treedist.control.errors import ControlError
    from treedist.control.connect import etcd_client
    from treedist.control.keys import Keys
    from treedist.control.status import control_snapshot

    try:
        client = etcd_client(deployment.control, "control", attempts=1)
    except ControlError as err:
        return {"error": str(err).splitlines()[0], "workers": [], "units": []}
    try:
        return control_snapshot(client, Keys(deployment.control.prefix))
    except ControlError as err:
        return {"error": str(err).splitlines()[0], "workers": [], "units": []}
    finally:
        client.close()


def print_control(control: dict) -> None:
    if control.get("error"):
        console.print(f"[red]control plane:[/] {control['error']}")
        return
    workers = Table(title=f"workers of deployment {control.get('deployment_id') or '?'} (leader: {control.get('leader') or 'none'})")
    for col in ("worker", "labels", "leader", "lease age s", "cpu", "rss MiB", "units"):
        workers.add_column(col, justify="right")
    for w in control["workers"]:
        workers.add_row(w["name"], ",".join(f"{k}={v}" for k, v in sorted(w["labels"].items())) or "-",
                        "yes" if w["leader"] else "", _num(w["lease_age_s"]), _num(w["cpu"]),
                        _num(int(w["rss_bytes"] / 2**20) if w.get("rss_bytes") else None), " ".join(w["units"]) or "-")
    console.print(workers)
    units = Table(title="units")
    for col in ("unit", "assigned to", "running on", "state", "records/s", "bytes/s", "lag records"):
        units.add_column(col, justify="right")
    for u in control["units"]:
        units.add_row(u["unit"], _num(u["assigned_to"]), _num(u["running_on"]), u["state"], _num(u["records_per_s"]),
                      _num(u["bytes_per_s"]), _num(u["lag_records"]))
    console.print(units)


def _num(value: object) -> str:
    return "?" if value is None else str(value)
