"""A worker's own view over HTTP (`treedist worker --status-port`): `GET /api/worker` is what
this worker believes and does (lease, leadership terms, units and their runs), as JSON.

Served by uvicorn (ASGI, starlette) on loopback by default, in a daemon thread of the
worker's driver process; `--bind` with TLS and basic auth (treedist.endpoints) to expose it. Operators and tests read it next to etcd's state: etcd says what
should be, each worker's view says what is.
"""

from __future__ import annotations

from typing import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from treedist.control.errors import ControlError
from treedist.endpoints import Exposure
from treedist.ops.probes import Readiness
from treedist.ops.web import ThreadedServer


class ViewServer(ThreadedServer):
    """The worker's status port: `/api/worker`, and `/healthz` and `/readyz` (`readiness`:
    treedist.control.ready.worker_readiness) for systemd watchers and Kubernetes probes."""

    def __init__(self, view: Callable[[], dict], port: int, host: str = "127.0.0.1",
                 exposure: Exposure | None = None, readiness: Readiness | None = None) -> None:
        async def worker(_: Request) -> JSONResponse:
            return JSONResponse(view())

        super().__init__(Starlette(routes=[Route("/api/worker", worker)]), port, host, name="treedist-worker-view",
                         what="the worker view", hint="--status-port", error=ControlError, exposure=exposure,
                         readiness=readiness)

    @property
    def url(self) -> str:
        return self.exposure.url(self.port, "/api/worker")
