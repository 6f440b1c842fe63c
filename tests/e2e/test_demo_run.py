"""`treedist run` with no config: the embedded 4-cluster demo verifies clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from treedist.local.etcd import LocalEtcd

from tests.fixtures.secured_etcd import assert_refuses_strangers

pytestmark = pytest.mark.e2e


def test_demo_run_prints_a_clean_verification(tmp_path):
    treedist = Path(sys.executable).parent / "treedist"
    state = tmp_path / "demo"
    result = subprocess.run(
        [str(treedist), "run", "--duration", "20", "--rate", "300", "--drain-timeout", "600", "--state-dir", str(state)],
        # Generous, within pytest's 900 s: 4 Kafka nodes took 146 s to answer at a load of 60.
        capture_output=True, text=True, timeout=840, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "verification" in result.stdout.lower()
    # the demo's consumer group switched from c1 to c3 mid-run without missing an event
    assert "consumer group switch c1 -> c3" in result.stdout and "missed 0," in result.stdout, result.stdout[-2000:]
    # ... because its offsets were translated (not because it read c3 from the start)
    flat = " ".join(result.stdout.split())  # rich wraps long lines at the terminal width
    assert "offsets there" in flat and "not translated in time" not in flat, result.stdout[-2000:]
    # through the control plane: a worker ran every unit
    assert "unit 10 of 10" in flat and "runs on worker w1" in flat, result.stdout[:3000]
    # Avro events: every record decodes on every cluster through that cluster's own registry.
    decoded = [line for line in result.stdout.splitlines() if "decoded through its own registry" in line]
    assert len(decoded) == 4 and all(line.endswith(", 0 failed to decode") for line in decoded), decoded
    assert all(int(line.split(": ")[1].split()[0]) > 0 for line in decoded), decoded
    # The local clusters were stopped by PID afterwards.
    status = json.loads((state / "clusters" / "clusters.json").read_text())
    from treedist.local.launcher import pid_alive

    assert not any(pid_alive(b["pid"]) for b in status["brokers"])
    # ... through a secured etcd: TLS with client certificates, auth, the password by reference
    control = yaml.safe_load((state / "deployment.yaml").read_text())["control"]
    assert control["etcd"][0].startswith("https://") and set(control["etcd_tls"]) == {"ca", "cert", "key"}
    assert control["auth"]["password"].startswith("${file:"), control["auth"]
    etcd = LocalEtcd.load(state / "etcd")  # stopped with the demo: started again on its data to probe it
    assert etcd is not None and not etcd.is_ours()
    etcd.restart()
    try:
        assert_refuses_strangers(etcd)
    finally:
        etcd.stop()
