"""The multi-host bed's WAN (treedist.local.netbed + treedist.local.wanproxy), on real
namespaces and links, without Spark or Kafka: the WAN proxy run inside one host delays what
crosses it to another host by the 40 ms round trip, and `limit_link` (tbf on the host's veth
pair) caps the host's link at its rate. Skipped, with the reason, where `ip netns` is not
permitted."""

from __future__ import annotations

import socket
import statistics
import sys
import threading
import time

import pytest

from treedist.local.netbed import NetBed, netns_unavailable
from treedist.local.wanproxy import Route, WanProxy

REASON = netns_unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host bed: {REASON}")
ECHO_PORT, PROXY_PORT = 9000, 9001
ECHO = ("import socketserver,sys\n"
        "class E(socketserver.BaseRequestHandler):\n"
        "    def handle(self):\n"
        "        while d := self.request.recv(65536): self.request.sendall(d)\n"
        # SO_REUSEADDR: the previous test's echo on the same port leaves connections in TIME-WAIT
        # (socketserver's default does not set it: "Address already in use", echo never listened)
        "socketserver.ThreadingTCPServer.allow_reuse_address = True\n"
        "s = socketserver.ThreadingTCPServer((sys.argv[1], int(sys.argv[2])), E); s.daemon_threads = True\n"
        "s.serve_forever()\n")


@pytest.fixture
def bed(tmp_path):
    bed = NetBed(str(tmp_path / "bed"), "tdwn", "10.77.9.0/24")
    bed.save()
    try:
        bed._network()  # the hosts and links only: no Spark, no Kafka
        bed.spawn("driver", [sys.executable, "-c", ECHO, bed.address("driver"), str(ECHO_PORT)], "echo", "socketserver")
        _connect((bed.address("driver"), ECHO_PORT)).close()
        yield bed
    finally:
        bed.down(grace=5)


def _connect(address, timeout: float = 30.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(address, timeout=10)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _echo(sock: socket.socket, payload: bytes) -> bytes:
    sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
    sender.start()
    got = bytearray()
    while len(got) < len(payload):
        chunk = sock.recv(1 << 16)
        assert chunk, f"closed after {len(got)} of {len(payload)} bytes"
        got += chunk
    sender.join(30)
    return bytes(got)


def test_the_proxy_in_one_host_delays_what_crosses_to_another(bed, tmp_path):
    proxy = WanProxy.start([Route(f"{bed.address('kafka')}:{PROXY_PORT}", f"{bed.address('driver')}:{ECHO_PORT}")],
                           tmp_path / "wanproxy.log", delay_ms=20.0, prefix=["ip", "netns", "exec", bed.ns("kafka")])
    try:
        with _connect((bed.address("kafka"), PROXY_PORT)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for i in range(20):
                started = time.monotonic()
                assert _echo(sock, b"ping-%03d" % i) == b"ping-%03d" % i
                rtts.append((time.monotonic() - started) * 1000)
        print(f"\nround trip kafka host -> driver host through the WAN proxy: median {statistics.median(rtts):.1f} ms")
        assert min(rtts) >= 40.0, rtts
    finally:
        proxy.stop()


def test_a_limited_link_carries_no_more_than_its_rate(bed):
    rate_mbit = 8.0  # 1 MB/s each way
    bed.limit_link("driver", rate_mbit)
    payload = bytes(range(256)) * 8192  # 2 MiB
    with _connect((bed.address("driver"), ECHO_PORT)) as sock:
        started = time.monotonic()
        assert _echo(sock, payload) == payload
        seconds = time.monotonic() - started
    print(f"\n2 MiB echoed over the driver host's link at {rate_mbit} Mbit/s in {seconds:.2f} s")
    burst = 64 * 1024  # limit_link's bucket: that much may pass at once
    assert seconds >= (len(payload) - burst) / (rate_mbit * 1e6 / 8)
    bed.limit_link("driver", None)
    with _connect((bed.address("driver"), ECHO_PORT)) as sock:
        assert _echo(sock, payload) == payload
