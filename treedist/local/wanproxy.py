"""A wide-area link between two data centres on one machine: a TCP proxy on asyncio that
forwards each byte after a fixed one-way delay (default 20 ms: 40 ms round trip), keeping every
TCP stream in order, optionally at a limited rate, and brokers that advertise it.

Runs on the machine that starts local clusters (tests, benchmarks, the multi-host bed), as its
own process (`python -m treedist.local.wanproxy`), started and stopped by PID. The kernel here
has `tbf` (rate) but not `netem` (delay), hence a proxy.

How the delay and the rate are applied (`Link.schedule`, pure): a chunk read from one side at
`t` leaves when the link is free (serialisation at `rate` bytes/s, shared by every connection
crossing in that direction) and is written to the other side `delay` later. Per connection and
direction at most `window` bytes are in flight (read, not yet written): the proxy then stops
reading, the sender's TCP backs up, as a real connection's window limits it to window/RTT.
A new connection waits one round trip before its upstream connection is opened (the TCP
handshake across the WAN).

Two data centres (`TwoDataCentres.start`): every broker has a second listener, `WAN`, that
advertises the proxy's address for it; a client in the other data centre bootstraps through
the proxy and, since Kafka answers metadata with the addresses of the listener asked, keeps
using it for every broker connection. `view(dc)` gives the bootstrap addresses as seen from
`dc`: its own clusters direct, the others through the proxy.

Steps of `TwoDataCentres.start` (a failure stops what was started):
1. ports: client, WAN and controller listener per broker, and the proxy's port per cluster;
2. the brokers (treedist.local.launcher, Apache Kafka), each with its WAN listener;
3. the proxy, one route per cluster (proxy port -> the broker's WAN listener);
4. every broker waited on until it answers metadata, directly and through the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from treedist.local.errors import LocalClusterError

HOST = "127.0.0.1"
DEFAULT_DELAY_MS = 20.0  # one way: 40 ms round trip
# Linux's largest autotuned TCP window by default (net.ipv4.tcp_rmem's max is 6 MiB; 4 MiB
# is its wmem max): what one connection can have in flight on a long link.
DEFAULT_WINDOW = 4 << 20
CHUNK = 64 << 10
READY_TIMEOUT_S = 30.0


class WanProxyError(LocalClusterError):
    """The proxy could not start (a port taken, a bad route) or a broker did not answer through it."""


@dataclass
class Link:
    """One direction of the WAN: a one-way `delay` (seconds) and an optional `rate` (bytes/s),
    shared by every connection crossing in that direction. Pure: the caller passes the time."""

    delay: float
    rate: float | None = None
    free_at: float = 0.0  # when the last scheduled chunk has left (serialisation at `rate`)

    def schedule(self, now: float, size: int) -> float:
        """When a chunk of `size` bytes read at `now` arrives on the other side. Never earlier
        than a chunk scheduled before it: streams stay in order."""
        if self.rate is None:
            return now + self.delay
        departs = max(now, self.free_at)
        self.free_at = departs + size / self.rate
        return self.free_at + self.delay


@dataclass(frozen=True)
class Route:
    """Listen on `listen` (host:port), forward to `upstream` (host:port)."""

    listen: str
    upstream: str

    @staticmethod
    def parse(text: str) -> "Route":
        listen, sep, upstream = text.partition("=")
        if not sep or ":" not in listen or ":" not in upstream:
            raise WanProxyError(f"route {text!r}: expected LISTEN_HOST:PORT=UPSTREAM_HOST:PORT")
        return Route(listen, upstream)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link, window: int) -> None:
    """Forward one direction of one connection: read, schedule on `link`, write when due, in order."""
    queue: asyncio.Queue = asyncio.Queue()
    room = asyncio.Condition()
    in_flight = 0

    async def deliver() -> None:
        nonlocal in_flight
        loop = asyncio.get_running_loop()
        while True:
            due, chunk = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if chunk is None:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()
            async with room:
                in_flight -= len(chunk)
                room.notify_all()

    sender = asyncio.create_task(deliver())
    loop = asyncio.get_running_loop()
    try:
        while True:
            chunk = await reader.read(CHUNK)
            now = loop.time()
            if not chunk:
                queue.put_nowait((now + link.delay, None))
                break
            queue.put_nowait((link.schedule(now, len(chunk)), chunk))
            async with room:  # the window: stop reading once it is full (the sender backs up)
                in_flight += len(chunk)
                await room.wait_for(lambda: in_flight < window or sender.done())
            if sender.done():
                break
        await sender
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        writer.close()  # one side went away: the other learns it as a real link's peer would
    finally:
        sender.cancel()


class Proxy:
    """The proxy's event loop side: one listener per route, two pumps per connection."""

    def __init__(self, routes: list[Route], delay: float, rate: float | None, window: int) -> None:
        self.routes, self.window = routes, window
        self.delay = delay
        # One Link per direction: the connections of every route share the WAN.
        self.out, self.back = Link(delay, rate), Link(delay, rate)
        self.servers: list[asyncio.AbstractServer] = []

    async def start(self) -> None:
        for route in self.routes:
            host, port = _split(route.listen)
            up_host, up_port = _split(route.upstream)
            self.servers.append(await asyncio.start_server(
                lambda r, w, h=up_host, p=up_port: self._connection(r, w, h, p), host, port))

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, host: str, port: int) -> None:
        upstream_w = None
        try:
            await asyncio.sleep(2 * self.delay)  # the handshake's round trip across the WAN
            upstream_r, upstream_w = await asyncio.open_connection(host, port)
            await asyncio.gather(_pump(client_r, upstream_w, self.out, self.window),
                                 _pump(upstream_r, client_w, self.back, self.window))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # either side went away: close both (a real link would reset too)
        finally:
            for w in (client_w, upstream_w):
                if w is not None:
                    w.close()


async def _serve(routes: list[Route], delay: float, rate: float | None, window: int) -> None:
    proxy = Proxy(routes, delay, rate, window)
    await proxy.start()
    print("ready", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    # Nothing to flush or save: exit at once rather than cancel every connection's tasks
    # (asyncio.run's teardown logs each cancelled stream callback as an error).
    sys.stdout.flush()
    os._exit(0)


@dataclass
class WanProxy:
    """A started proxy process (in its own session; stopped by PID)."""

    pid: int
    log_file: str
    routes: list[Route]
    delay_ms: float
    rate_bytes: float | None = None
    window: int = DEFAULT_WINDOW
    _proc: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    @classmethod
    def start(cls, routes: list[Route], log_file: str | Path, delay_ms: float = DEFAULT_DELAY_MS,
              rate_bytes: float | None = None, window: int = DEFAULT_WINDOW,
              prefix: list[str] | None = None) -> "WanProxy":
        """Start the proxy (inside `prefix`, e.g. `ip netns exec NS`, if given) and wait until
        every route listens."""
        argv = [*(prefix or []), sys.executable, "-m", "treedist.local.wanproxy", "--delay-ms", str(delay_ms),
                "--window", str(window), *(["--rate-bytes", str(rate_bytes)] if rate_bytes else []),
                *[f"{r.listen}={r.upstream}" for r in routes]]
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        started = cls(proc.pid, str(log_file), routes, delay_ms, rate_bytes, window, proc)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "ready" not in Path(log_file).read_text(errors="replace").split():
            if proc.poll() is not None or time.monotonic() > deadline:
                started.stop()
                raise WanProxyError(f"the WAN proxy did not start: {Path(log_file).read_text(errors='replace')[-1500:]}")
            time.sleep(0.05)
        return started

    def settings(self) -> dict:
        return {"one_way_delay_ms": self.delay_ms, "round_trip_ms": 2 * self.delay_ms,
                "rate_bytes_per_s": self.rate_bytes, "window_bytes": self.window, "proxy": "treedist.local.wanproxy (asyncio)"}

    def stop(self) -> None:
        from treedist.local.launcher import stop_pid

        stop_pid(self.pid, grace=5)
        if self._proc is not None:
            self._proc.wait(10)


def _wan_props(host: str, port: int, wan_port: int, controller_port: int, advertised_wan: str,
               wan_host: str | None = None) -> dict[str, str]:
    """A broker's listeners: EXTERNAL (its own data centre), WAN (advertised as the proxy; bound
    on `wan_host` where the proxy reaches it, by default `host`), CONTROLLER."""
    return {
        "listeners": f"EXTERNAL://{host}:{port},WAN://{wan_host or host}:{wan_port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"EXTERNAL://{host}:{port},WAN://{advertised_wan}",
        "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,WAN:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }


@dataclass
class TwoDataCentres:
    """Local Apache Kafka clusters in two data centres joined by the WAN proxy."""

    dcs: dict[str, list[str]]
    direct: dict[str, str]  # cluster -> its EXTERNAL listener (its own data centre)
    proxied: dict[str, str]  # cluster -> the proxy's address for it (the other data centre)
    clusters: object  # LocalClusters
    proxy: WanProxy
    link: object | None = None  # a WanLink (treedist.local.wanlink): the proxy in a namespace of its own

    @classmethod
    def start(cls, base_dir: str | Path, dcs: dict[str, list[str]], delay_ms: float = DEFAULT_DELAY_MS,
              rate_bytes: float | None = None, window: int = DEFAULT_WINDOW, host: str = HOST,
              link=None) -> "TwoDataCentres":
        """Steps 1-4 of the module's docstring. With `link` (a WanLink that is up), the proxy runs
        in the link's namespace and listens on its address, the brokers' WAN listeners bind on
        the machine's end of it: every byte between the data centres crosses the link, which
        can then be cut or capped (`link.cut()`, `link.limit()`). Stopping them takes the link down."""
        from concurrent.futures import ThreadPoolExecutor

        from treedist.local.local_clusters import LocalClusters
        from treedist.local.launcher import free_port, start_broker, stop_all, wait_ready

        base = Path(base_dir).resolve()
        base.mkdir(parents=True, exist_ok=True)
        names = [c for members in dcs.values() for c in members]
        ports = {c: {k: free_port(host) for k in ("port", "wan", "controller", "proxy")} for c in names}  # step 1
        brokers: dict = {}
        proxy = None
        try:
            with ThreadPoolExecutor(max_workers=len(names)) as pool:  # step 2: storage formats in parallel
                proxy_host, wan_host = (link.inside, link.outside) if link is not None else (host, host)
                futures = {c: pool.submit(start_broker, c, base, p["port"], "kafka", p["controller"],
                                          {"extra_props": _wan_props(host, p["port"], p["wan"], p["controller"],
                                                                     f"{proxy_host}:{p['proxy']}", wan_host)}, host)
                           for c, p in ports.items()}
                for c, future in futures.items():
                    brokers[c] = future.result()
                proxy = WanProxy.start([Route(f"{proxy_host}:{p['proxy']}", f"{wan_host}:{p['wan']}")
                                        for p in ports.values()], base / "wanproxy.log", delay_ms, rate_bytes, window,
                                       prefix=link.exec_prefix() if link is not None else None)  # step 3
                proxied = {c: f"{proxy_host}:{p['proxy']}" for c, p in ports.items()}
                list(pool.map(lambda b: wait_ready(b), brokers.values()))  # step 4
                list(pool.map(lambda c: _answers(c, proxied[c]), names))
        except BaseException:
            if proxy is not None:
                proxy.stop()
            stop_all([b.pid for b in brokers.values()])
            raise
        clusters = LocalClusters(base, brokers)
        clusters.save()
        direct = {c: b.bootstrap for c, b in brokers.items()}
        state = {"dcs": dcs, "direct": direct, "proxied": proxied, "proxy": {"pid": proxy.pid, **proxy.settings()}}
        (base / "wan.json").write_text(json.dumps(state, indent=2))
        return cls(dcs, direct, proxied, clusters, proxy, link)

    def dc_of(self, cluster: str) -> str:
        return next(dc for dc, members in self.dcs.items() if cluster in members)

    def view(self, dc: str) -> dict[str, str]:
        """Bootstrap addresses as seen from `dc`: its clusters direct, the others through the WAN."""
        if dc not in self.dcs:
            raise WanProxyError(f"unknown data centre {dc!r}; known: {sorted(self.dcs)}")
        return {c: (self.direct[c] if self.dc_of(c) == dc else self.proxied[c]) for c in self.direct}

    def stop(self) -> None:
        self.proxy.stop()
        self.clusters.stop()
        if self.link is not None:
            self.link.down()


def _answers(cluster: str, bootstrap: str, timeout: float = 60.0) -> None:
    """Metadata through the proxy lists the proxy's address (the WAN listener is advertised)."""
    from treedist.kafka import clients

    admin = clients.admin({"bootstrap.servers": bootstrap, "log_level": 0})  # quiet until the WAN listener answers
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            brokers = admin.list_topics(timeout=5).brokers
        except Exception:  # KafkaException until the WAN listener answers
            time.sleep(0.2)
            continue
        seen = {f"{b.host}:{b.port}" for b in brokers.values()}
        if seen == {bootstrap}:
            return
        raise WanProxyError(f"cluster {cluster!r} through the WAN proxy at {bootstrap} advertises {sorted(seen)}")
    raise WanProxyError(f"cluster {cluster!r} did not answer through the WAN proxy at {bootstrap} in {timeout}s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="wanproxy", description=__doc__.split("\n\n")[0])
    p.add_argument("routes", nargs="+", help="LISTEN_HOST:PORT=UPSTREAM_HOST:PORT")
    p.add_argument("--delay-ms", type=float, default=DEFAULT_DELAY_MS, help="one-way delay (default 20: 40 ms RTT)")
    p.add_argument("--rate-bytes", type=float, help="rate limit per direction, bytes/s (default: none)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="bytes in flight per connection and direction")
    args = p.parse_args(argv)
    try:
        routes = [Route.parse(r) for r in args.routes]
        if args.delay_ms < 0 or (args.rate_bytes is not None and args.rate_bytes <= 0) or args.window <= 0:
            raise WanProxyError("--delay-ms must be >= 0, --rate-bytes and --window > 0")
        asyncio.run(_serve(routes, args.delay_ms / 1000, args.rate_bytes, args.window))
    except (WanProxyError, OSError) as err:
        print(f"wanproxy: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
