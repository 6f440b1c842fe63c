"""Credentials from `client` settings never leave the process: not in treedist's output or
JSON, not in Spark's plans, UI or event log, not in checkpoints; Spark's UI, when a user turns
it on, listens on loopback only (real Spark, real brokers, real HTTP)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from treedist.local.deployment import local_deployment

from tests.e2e.workload import create_topic_everywhere, produce_concurrently

pytestmark = pytest.mark.e2e
TREEDIST = str(Path(sys.executable).parent / "treedist")
SECRET = "Kn0wn-Pa55word-7f3a9"
# 127.0.0.1 as /proc/net/tcp writes it, the same as an IPv4-mapped IPv6 address, and ::1.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_a_known_password_appears_nowhere(local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    produce_concurrently(bootstrap, unique_topic, 100, 2)
    events, ui_port = tmp_path / "events", _free_port()
    events.mkdir()
    spec = local_deployment(
        bootstrap, topics=[unique_topic], tree={"level": 1, "children": ["c1", "c2"]},
        checkpoint_location=str(tmp_path / "cp"),
        # Uncompressed: Spark 4 compresses event logs (zstd) by default, and a grep of
        # compressed bytes can never find the password.
        spark={"conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                        "spark.eventLog.compress": "false",
                        "spark.ui.enabled": "true", "spark.ui.port": str(ui_port)}},
    )
    for name in spec["clusters"]:  # SASL settings a PLAINTEXT broker ignores: they still travel everywhere
        spec["clusters"][name]["client"] = {"sasl.username": "treedist", "sasl.password": SECRET, "sasl.mechanism": "PLAIN"}
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump(spec))

    run = subprocess.Popen([TREEDIST, "run", "-c", str(config), "--duration", "40"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    pages = []
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "cp" / "messages" / "c2" / "commits" / "0").exists():
            assert run.poll() is None and time.monotonic() < deadline, "the distributors did not start"
            time.sleep(0.5)
        listening = _listening_addresses(ui_port)
        assert listening and listening <= LOOPBACK, f"Spark's UI must listen on loopback only, found {listening}"
        for page in ("/environment/", "/jobs/", "/SQL/", "/StreamingQuery/", "/executors/", "/stages/"):
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}{page}", timeout=10) as response:
                pages.append((page, response.read().decode(errors="replace")))
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output[-3000:]

    shown = {
        "topology --json": subprocess.run([TREEDIST, "topology", "show", "-c", str(config), "--json"],
                                          capture_output=True, text=True, timeout=60),
        "verify --json": subprocess.run([TREEDIST, "verify", "-c", str(config), "--topic", unique_topic, "--json"],
                                        capture_output=True, text=True, timeout=120),
    }
    assert all(r.returncode == 0 for r in shown.values()), {k: r.stderr for k, r in shown.items()}
    event_logs = [p for p in events.rglob("*") if p.is_file()]
    assert event_logs, "Spark wrote no event log"
    checkpoint_files = [p for p in (tmp_path / "cp").rglob("*") if p.is_file()]

    places = {"run output": output, **{k: r.stdout + r.stderr for k, r in shown.items()}}
    places.update({f"UI {page}": text for page, text in pages})
    places.update({f"event log {p.name}": p.read_text(errors="replace") for p in event_logs})
    places.update({f"checkpoint {p.relative_to(tmp_path)}": p.read_text(errors="replace") for p in checkpoint_files})
    assert any("StreamingQuery" in text or "c1-messages" in text for text in places.values())  # the grep saw real content
    assert any("SparkListenerApplicationStart" in places[f"event log {p.name}"] for p in event_logs)  # readable, not compressed
    leaks = [where for where, text in places.items() if SECRET in text]
    assert not leaks, f"the password appears in: {leaks}"
