"""The WAN proxy (treedist.local.wanproxy) as a process, in front of a real TCP echo server:
the round trip through it is the configured 40 ms, a stream arrives whole and in order, and
the rate limit holds. Light (one Python process, no broker)."""

from __future__ import annotations

import socket
import socketserver
import statistics
import threading
import time

import pytest

from treedist.local.launcher import free_port, pid_alive
from treedist.local.wanproxy import Route, WanProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(1 << 16):
            self.request.sendall(data)


@pytest.fixture
def echo():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _proxy(tmp_path, upstream: str, **kwargs) -> tuple[WanProxy, tuple[str, int]]:
    port = free_port()
    proxy = WanProxy.start([Route(f"127.0.0.1:{port}", upstream)], tmp_path / "wanproxy.log", **kwargs)
    return proxy, ("127.0.0.1", port)


def _read(sock: socket.socket, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        assert chunk, f"the proxy closed the stream after {len(got)} of {size} bytes"
        got += chunk
    return bytes(got)


def test_the_round_trip_through_the_proxy_is_40_ms(echo, tmp_path):
    proxy, address = _proxy(tmp_path, echo, delay_ms=20.0)
    try:
        with socket.create_connection(address) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for i in range(30):
                ping = b"ping-%04d" % i
                started = time.monotonic()
                sock.sendall(ping)
                assert _read(sock, len(ping)) == ping
                rtts.append((time.monotonic() - started) * 1000)
        print(f"\nround trip through the WAN proxy: median {statistics.median(rtts):.1f} ms, "
              f"min {min(rtts):.1f}, max {max(rtts):.1f} (30 pings)")
        assert min(rtts) >= 40.0, rtts  # each way waits 20 ms: never less
        # and nothing else holds a ping back (bound loose: the 2-core machine is shared)
        assert statistics.median(rtts) < 40.0 + 200.0, rtts
    finally:
        proxy.stop()
    assert not pid_alive(proxy.pid)


def test_a_stream_arrives_whole_and_in_order_at_the_limited_rate(echo, tmp_path):
    rate = 1_000_000  # bytes/s each way
    proxy, address = _proxy(tmp_path, echo, delay_ms=20.0, rate_bytes=rate)
    payload = bytes(range(256)) * 8192  # 2 MiB, every byte's position recognisable
    try:
        with socket.create_connection(address) as sock:
            started = time.monotonic()
            sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
            sender.start()
            echoed = _read(sock, len(payload))
            seconds = time.monotonic() - started
            sender.join(30)
        assert echoed == payload
        print(f"\n2 MiB echoed through the proxy at {rate} B/s each way in {seconds:.2f} s")
        # The link carries at most `rate` bytes/s: 2 MiB can not cross in less than 2 MiB/rate.
        assert seconds >= len(payload) / rate
    finally:
        proxy.stop()
