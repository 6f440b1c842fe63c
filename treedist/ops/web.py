"""The web view: one page that draws the tree and updates live, and one JSON endpoint
(driver of `treedist run`, or `treedist status --ui-port`).

- `GET /`            the page: inline HTML, CSS, JS and SVG (no CDN: it works offline);
- `GET /api/status`  the snapshot, the same JSON as `treedist status --json`;
- `GET /healthz`, `GET /readyz`  the probes (treedist.ops.probes), as on every server here.

Served by uvicorn (ASGI, starlette) in a daemon thread: on loopback over plain HTTP by
default, elsewhere with TLS and basic auth as a `treedist.endpoints.Exposure` says.
"""

from __future__ import annotations

import asyncio
import threading
import time
from importlib import resources

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from treedist.endpoints import Exposure
from treedist.ops.errors import OpsError
from treedist.ops.probes import Readiness, with_probes
from treedist.ops.snapshot import StatusSource


def web_app(source: StatusSource) -> Starlette:
    page = resources.files("treedist.ops").joinpath("page.html").read_text()

    async def index(_: Request) -> HTMLResponse:
        return HTMLResponse(page)

    return Starlette(routes=[Route("/", index), status_route(source)])


def status_route(source: StatusSource) -> Route:
    """`GET /api/status`: the snapshot (a refresh does blocking broker calls: off the event loop)."""

    async def status(_: Request) -> JSONResponse:
        return JSONResponse(await run_in_threadpool(source.snapshot, 1.0))

    return Route("/api/status", status)


class ThreadedServer:
    """uvicorn serving `app` in a daemon thread of the driver; `start()` returns once it
    listens (or raises `error` naming the address and the flag that picks another port),
    `stop()` joins it. Signals stay with the caller's StopSignals.

    `exposure` says where it listens and how it is protected (TLS, basic auth); without
    one, plain HTTP on `host`, which must then be loopback (the bind check still applies).
    Every server also answers `/healthz` and `/readyz` (treedist.ops.probes), without basic
    auth; `readiness` says what ready means for the serving command (default: it serves)."""

    def __init__(self, app: Starlette, port: int, host: str, *, name: str, what: str, hint: str,
                 error: type[Exception], exposure: Exposure | None = None, readiness: Readiness | None = None) -> None:
        self.exposure = exposure if exposure is not None else Exposure(bind=host).checked()
        host = self.exposure.bind
        config = uvicorn.Config(with_probes(self.exposure.wrap(app), readiness, what), host=host, port=port, log_level="warning", access_log=False,
                                lifespan="off", **self.exposure.uvicorn_options())
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # our StopSignals own SIGINT/SIGTERM
        self.host, self.port = host, port
        self._what, self._hint, self._error = what, hint, error
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()), name=name, daemon=True)

    def start(self, timeout_s: float = 10.0):
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise self._error(f"{self._what} could not listen on {self.host}:{self.port}; is the port in use? "
                                  f"Choose another with {self._hint}")
            time.sleep(0.05)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


class WebServer(ThreadedServer):
    """The web view's server (`--ui-port`)."""

    def __init__(self, source: StatusSource, port: int, host: str = "127.0.0.1", exposure: Exposure | None = None,
                 readiness: Readiness | None = None) -> None:
        super().__init__(web_app(source), port, host, name="treedist-web", what="the web view", hint="--ui-port",
                         error=OpsError, exposure=exposure, readiness=readiness)

    @property
    def url(self) -> str:
        return self.exposure.url(self.port, "/")


class StatusServer(ThreadedServer):
    """`treedist run --status-port`: `/healthz`, `/readyz` (the run's readiness) and
    `/api/status` (the snapshot), without the page: the port supervisors and Kubernetes probe,
    served from before the queries start."""

    def __init__(self, source: StatusSource, port: int, readiness: Readiness, exposure: Exposure | None = None) -> None:
        super().__init__(Starlette(routes=[status_route(source)]), port, "127.0.0.1", name="treedist-status",
                         what="the status port", hint="--status-port", error=OpsError, exposure=exposure,
                         readiness=readiness)

    @property
    def url(self) -> str:
        return self.exposure.url(self.port, "/readyz")
