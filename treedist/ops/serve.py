"""What a long-running command serves besides its work (driver): the metrics endpoint and
the web view, both reading one `StatusSource`. Loopback unless told otherwise: both share
one `treedist.endpoints.Exposure` (--bind, TLS, basic auth)."""

from __future__ import annotations

import logging
from contextlib import ExitStack

from treedist.endpoints import Exposure
from treedist.ops.metrics import MetricsServer
from treedist.ops.probes import Readiness
from treedist.ops.snapshot import StatusSource
from treedist.ops.web import WebServer

log = logging.getLogger(__name__)


def serve(stack: ExitStack, source: StatusSource, *, metrics_port: int | None, ui_port: int | None,
          host: str = "127.0.0.1", exposure: Exposure | None = None, readiness: Readiness | None = None) -> dict[str, str]:
    """Start what was asked for (a port of None or 0: off), where and how `exposure` says
    (default: plain HTTP on `host`, loopback); each server's stop is registered on `stack`.
    Both answer `/healthz` and `/readyz` too (`readiness`: treedist.ops.probes).
    Returns name -> URL of what listens."""
    urls: dict[str, str] = {}
    if metrics_port:
        metrics = MetricsServer(source, metrics_port, host, exposure, readiness=readiness).start()
        stack.callback(metrics.stop)
        urls["metrics"] = metrics.url
    if ui_port:
        web = WebServer(source, ui_port, host, exposure, readiness=readiness).start()
        stack.callback(web.stop)
        urls["web view"] = web.url
    return urls
