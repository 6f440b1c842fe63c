"""Health and readiness probes on every HTTP server a deployment runs (driver: the process that
serves them; `treedist run`, `treedist worker`, `treedist status --ui-port`).

- `GET /healthz`  alive: the process answers (200, `{"alive": true, "pid", "uptime_s"}`); it
  calls nothing else, so it answers while a stop drains or etcd is away;
- `GET /readyz`   ready: 200 with what is ready, or 503 with `reasons` (which unit or query is
  not running and in which state, etcd unreachable for how long, starting, stopping). What
  "ready" means is the serving command's `Readiness`: every assigned unit running and etcd
  reachable on a worker (treedist.control.ready), every query running in `treedist run -c`
  (`app_readiness`), every unit running somewhere in the demo (treedist.control.ready).

Both answer without basic auth (`with_probes`), so that kubelet and other supervisors can call
them on a `--bind` address protected by `--auth-user`: their bodies name units, queries,
clusters and states, never a credential, a record or an error text. Every other path of the
server stays behind the server's `Exposure`.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Callable, Iterable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from treedist.config import Deployment

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
STARTED_AT = time.time()
READ_ATTEMPTS = 3  # a dict the driver's loop changes during a read is read again (bounded)

# A readiness check: (ready, body). The body says what is ready, or why not under "reasons".
Readiness = Callable[[], "tuple[bool, dict]"]


def serving(what: str) -> Readiness:
    """The readiness of a server that runs no unit (`treedist status --ui-port`): ready once it
    serves."""
    return lambda: (True, {"ready": True, "serves": what})


def probe_app(readiness: Readiness) -> Starlette:
    """The two probe routes; the readiness check runs off the event loop (it may read Spark or
    etcd), and a check that raises is a 503 naming the exception's type."""

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"alive": True, "pid": os.getpid(), "uptime_s": round(time.time() - STARTED_AT, 1)})

    async def readyz(_: Request) -> JSONResponse:
        try:
            ready, body = await run_in_threadpool(readiness)
        except Exception as err:  # the probe answers whatever the check met; the reason says what
            ready, body = False, {"ready": False, "reasons": [f"readiness check failed: {type(err).__name__}"]}
        return JSONResponse(body, status_code=200 if ready else 503)

    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz)])


class WithProbes:
    """ASGI: `/healthz` and `/readyz` to the probes (no basic auth), every other path to `app`
    (the server's own routes behind its Exposure)."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app, self.probes = app, probe_app(readiness)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") in PROBE_PATHS:
            await self.probes(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def with_probes(app: ASGIApp, readiness: Readiness | None, what: str = "this endpoint") -> ASGIApp:
    """`app` with the probes in front (`serving(what)` when no readiness is given)."""
    return WithProbes(app, readiness if readiness is not None else serving(what))


def read_retrying(read: Callable[[], object]):
    """`read()`, again when the driver's loop changed a dict during it (bounded)."""
    for attempt in range(READ_ATTEMPTS):
        try:
            return read()
        except RuntimeError:  # "dictionary changed size during iteration": read again
            if attempt == READ_ATTEMPTS - 1:
                raise
    return None


def query_states(app) -> dict[str, str]:
    """Query name -> supervision state of the record queries started in `app` (a
    DistributionApp), plus the schema distributor's query (`running` while active)."""
    states = read_retrying(lambda: {name: run.supervision.state.value for name, run in list(app.running.items())})
    schemas = app.schemas
    if schemas is not None:
        states[schemas.query_name] = "running" if schemas.query is not None and schemas.query.isActive else "stopped"
    return states


def app_readiness(app, deployment: "Deployment", stopping: Callable[[], bool] = lambda: False,
                  started: Callable[[], bool] = lambda: True) -> Readiness:
    """`treedist run -c`: ready when every query of the deployment runs (one per source
    cluster, and the schema distributor's), none starting, waiting, backing off or failed.
    `started`: false while the application starts (Spark, preflight, the held queries)."""
    from treedist.driver.unit_kinds import units_of

    wanted = [unit.query_name for unit in units_of(deployment) if unit.kind == "messages"]
    if deployment.schemas is not None:
        wanted.append(f"{deployment.schemas.primary}-schemas")

    def check() -> tuple[bool, dict]:
        if stopping():
            return False, {"ready": False, "reasons": ["stopping: batches settle, queries stop"]}
        states = query_states(app) if app is not None else {}
        reasons = [] if started() else ["starting: Spark, preflight and the queries"]
        reasons += not_running(wanted, states, "query")
        return not reasons, {"ready": not reasons, "queries": {q: states.get(q, "not started") for q in wanted},
                             **({"reasons": reasons} if reasons else {})}

    return check


def not_running(wanted: Iterable[str], states: dict[str, str], what: str) -> list[str]:
    """One reason per wanted unit or query whose state is not `running`."""
    return [f"{what} {name} {states[name]}" if name in states else f"{what} {name} not started"
            for name in wanted if states.get(name) != "running"]
