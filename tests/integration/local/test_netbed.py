"""The multi-host bed's teardown (treedist.local.netbed), with real namespaces, links and
processes: leftovers of a crashed run are removed by their prefix only, and a bed whose start
fails part-way leaves nothing behind. Skipped, with the reason, where `ip netns` is not
permitted."""

from __future__ import annotations

import subprocess

import pytest

from treedist.local.launcher import pid_alive
from treedist.local.netbed import HOSTS, NetBed, NetBedError, netns_unavailable, teardown_prefix

REASON = netns_unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host bed: {REASON}")


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_leftovers_are_removed_by_their_prefix_only():
    ours, other = "tdlt", "tdlo"
    try:
        for ns in (f"{ours}-master", f"{other}-master"):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "link", "add", f"{ours}-br", "type", "bridge"], check=True)
        subprocess.run(["ip", "link", "add", f"{other}-br", "type", "bridge"], check=True)
        # a process of the crashed run, still inside its namespace (in no group of its own)
        sleeper = subprocess.Popen(["ip", "netns", "exec", f"{ours}-master", "sleep", "600"])
        teardown_prefix(ours, None, grace=5)
        sleeper.wait(timeout=30)
        assert not pid_alive(sleeper.pid)
        assert f"{ours}-master" not in _namespaces() and f"{ours}-br" not in _links()
        assert f"{other}-master" in _namespaces() and f"{other}-br" in _links()
    finally:
        teardown_prefix(ours, None, grace=5)
        teardown_prefix(other, None, grace=5)


def test_a_bed_that_fails_part_way_leaves_nothing(tmp_path):
    bed = NetBed(str(tmp_path / "bed"), "tdlf", "10.77.9.0/24")
    with pytest.raises(NetBedError, match="exited"):
        bed.up(worker_memory="not-a-size")  # the master starts; each worker refuses the size and exits
    master = next(p for p in bed.processes if p.role == "spark-master")
    assert not pid_alive(master.pid)
    assert not {n for n in _namespaces() if n.startswith("tdlf-")}
    assert not {n for n in _links() if n.startswith("tdlf-")}
    assert {bed.ns(h) for h in HOSTS} == {f"tdlf-{h}" for h in HOSTS}  # the names it had made
