"""Prometheus metrics of one `treedist worker` (driver: the worker's process): the metrics of
`treedist run` cut to the units this worker runs, and which units those are.

A worker runs some of a deployment's units (treedist.control): its `/metrics` carries the
links of the clusters whose record query runs here (with their live counters), the
reachability of every cluster (the worker reaches all of them), the pipelines it runs (offset
jobs, topic sync, the schema distributor: the application only holds its own), and
`treedist_worker_unit{worker, unit} 1` per unit. Several workers' metrics, summed, give the
deployment's without counting a link twice.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from treedist.driver.unit_kinds import Unit
from treedist.endpoints import Exposure
from treedist.ops.metrics import MetricsServer
from treedist.ops.snapshot import StatusSource

UNITS_READ_ATTEMPTS = 3


def _running_units(app) -> list[str]:
    """`app.units()`, read from the scrape's thread while the worker's loop may start or stop
    a unit: a dict changed during the read is read again (bounded)."""
    for attempt in range(UNITS_READ_ATTEMPTS):
        try:
            return app.units()
        except RuntimeError:  # "dictionary changed size during iteration"
            if attempt == UNITS_READ_ATTEMPTS - 1:
                raise
    return []


class UnitsSource:
    """The snapshot of `source` with its links cut to the clusters whose `messages/<cluster>`
    unit runs in `app` (duck-types StatusSource for the metrics server)."""

    def __init__(self, source: StatusSource, app) -> None:
        self.source, self.app = source, app

    def snapshot(self, max_age_s: float = 1.0) -> dict:
        snap = self.source.snapshot(max_age_s)
        units = (Unit.parse(unit_id) for unit_id in _running_units(self.app))
        here = {unit.cluster for unit in units if unit.kind == "messages"}
        return {**snap, "links": [link for link in snap["links"] if link["cluster"] in here]}


class UnitsCollector(Collector):
    """`treedist_worker_unit{worker, unit}`: 1 for each unit this worker runs."""

    def __init__(self, app, worker: str) -> None:
        self.app, self.worker = app, worker

    def collect(self) -> Iterator[Metric]:
        units = GaugeMetricFamily("treedist_worker_unit", "1 for each unit (messages/<cluster>, offsets/<cluster>, "
                                  "topic-sync, schemas/<primary>) this worker runs.", labels=["worker", "unit"])
        for unit in _running_units(self.app):
            units.add_metric([self.worker, unit], 1)
        yield units


def serve_worker_metrics(stack: ExitStack, deployment, app, worker: str, port: int, config_path: str = "",
                         exposure: Exposure | None = None, readiness=None) -> MetricsServer:
    """Start the worker's metrics endpoint on `port` (as `exposure` says; loopback by default),
    its stop registered on `stack`; `/readyz` there answers the worker's `readiness`."""
    source = StatusSource(deployment, config_path=config_path)
    source.attach(app)
    server = MetricsServer(UnitsSource(source, app), port, exposure=exposure, readiness=readiness)  # type: ignore[arg-type]
    server.registry.register(UnitsCollector(app, worker))
    server.start()
    stack.callback(server.stop)
    return server
