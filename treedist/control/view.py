"""A worker's own view over HTTP (`treedist worker --status-port`): `GET /api/worker` is what
this worker believes and does (lease, leadership terms, units and their runs), as JSON.

Served by uvicorn (ASGI, starlette) on loopback by default, in a daemon thread of the
worker's driver process. Operators and tests read it next to etcd's state: etcd says what
should be, each worker's view says what is.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from treedist.control.errors import ControlError


class ViewServer:
    def __init__(self, view: Callable[[], dict], port: int, host: str = "127.0.0.1") -> None:
        async def worker(_: Request) -> JSONResponse:
            return JSONResponse(view())

        config = uvicorn.Config(Starlette(routes=[Route("/api/worker", worker)]), host=host, port=port,
                                log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the worker's StopSignals own SIGINT/SIGTERM
        self.host, self.port = host, port
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()), name="treedist-worker-view",
                                        daemon=True)

    def start(self, timeout_s: float = 10.0) -> "ViewServer":
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ControlError(f"the worker view could not listen on {self.host}:{self.port}; is the port in use? "
                                   "Choose another with --status-port")
            time.sleep(0.05)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/api/worker"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
