"""The web view: one page that draws the tree and updates live, and one JSON endpoint
(driver of `treedist run`, or `treedist status --ui-port`).

- `GET /`            the page: inline HTML, CSS, JS and SVG (no CDN: it works offline);
- `GET /api/status`  the snapshot, the same JSON as `treedist status --json`.

Served by uvicorn (ASGI, starlette) on loopback by default, in a daemon thread.
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

from treedist.ops.errors import OpsError
from treedist.ops.snapshot import StatusSource


def web_app(source: StatusSource) -> Starlette:
    page = resources.files("treedist.ops").joinpath("page.html").read_text()

    async def index(_: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def status(_: Request) -> JSONResponse:
        # a refresh does blocking broker calls: off the event loop
        return JSONResponse(await run_in_threadpool(source.snapshot, 1.0))

    return Starlette(routes=[Route("/", index), Route("/api/status", status)])


class WebServer:
    """uvicorn in a daemon thread; `start()` returns once it listens, `stop()` joins it."""

    def __init__(self, source: StatusSource, port: int, host: str = "127.0.0.1") -> None:
        config = uvicorn.Config(web_app(source), host=host, port=port, log_level="warning", access_log=False,
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # our StopSignals own SIGINT/SIGTERM
        self.host, self.port = host, port
        self._thread = threading.Thread(target=self._serve, name="treedist-web", daemon=True)

    def _serve(self) -> None:
        asyncio.run(self._server.serve())

    def start(self, timeout_s: float = 10.0) -> "WebServer":
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OpsError(f"the web view could not listen on {self.host}:{self.port}; is the port in use? "
                               "Choose another with --ui-port")
            time.sleep(0.05)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
