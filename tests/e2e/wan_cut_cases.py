"""The link between two data centres cut for 60 s, then capped, under load (scripts/faults-wan;
not collected by the suite: its name is not test_*.py). docs/faults.md has the results.

The bed: the two data centres of test_multihost.py's WAN cases ({c1, c2} and {c3, c4}, 20 ms
each way through treedist.local.wanproxy), with the proxy in a network namespace of its own
(treedist.local.wanlink): every byte between the data centres crosses one veth pair, which is
taken down for the cut and capped with `tc` tbf for the slow link. One `treedist worker` per
data centre (labels and `control.affinity`: each runs its own clusters' units), one etcd.

Producers write `RATE` records/s on c1 and on c3 (one per data centre) before, during and
after the faults; c2 and c4 only receive, so their counts show the local copies. Checked, in
each delivery mode: during the cut, c2 and c4 keep receiving (each data centre's worker copies
locally); after it, and after the cap is lifted, every record reaches every cluster: 0 missing,
and in exactly_once 0 duplicated (`verify --strict`); no worker exits, no unit moves. Printed:
the local copies during the cut, the remote lag at the end of each fault, and the time from
the link's return (the cap's lift) until every cluster holds every record."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.kafka.watermarks import OffsetReader
from treedist.local.deployment import local_deployment

from tests.e2e.test_multihost import (CLUSTERS, PARTITIONS, TREEDIST, WAN_BOOTSTRAP_ENV, WAN_DCS, _placed_by_dc,
                                      _tail)
from tests.e2e.brokers3 import pause, record_figures
from tests.e2e.workload import ProducersAtRate, create_topic_everywhere, wait_until_complete

pytestmark = pytest.mark.e2e
RATE = float(os.environ.get("TREEDIST_FAULTS_RATE", "100"))  # records/s on each of c1 and c3
CUT_S, CAP_S, CAP_MBIT = 60.0, 60.0, 0.1


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_the_link_between_data_centres_cut_for_60_s_then_capped(etcd, tmp_path, delivery):
    from treedist.control.etcd import EtcdClient
    from treedist.control.keys import Keys
    from treedist.control.status import control_snapshot
    from treedist.local.wanlink import WanLink
    from treedist.local.wanproxy import TwoDataCentres
    from treedist.local.workers import LocalWorkers

    link = WanLink().up()
    try:
        wan = TwoDataCentres.start(tmp_path / "wan", WAN_DCS, delay_ms=20.0, link=link)
    except BaseException:
        link.down()
        raise
    client = EtcdClient([etcd.client_url])
    pool = LocalWorkers(tmp_path / "deployment.yaml", tmp_path / "workers")
    figures: dict = {"case": "the link between the data centres cut for 60 s, then capped", "delivery": delivery,
                     "rate_per_dc": RATE, "cut_s": CUT_S, "cap_s": CAP_S, "cap_mbit": CAP_MBIT}
    try:
        topic = f"wan-cut-{uuid.uuid4().hex[:8]}"
        create_topic_everywhere(wan.direct, topic, PARTITIONS)
        keys = Keys(f"/wan-cut-{uuid.uuid4().hex[:8]}")
        common = {"topics": [topic], "checkpoint_location": str(tmp_path / "checkpoints"),
                  "distributor": {"delivery": delivery}, "offsets": {"enabled": False}}
        spec = local_deployment({c: "${env:" + WAN_BOOTSTRAP_ENV.format(c.upper()) + "}" for c in CLUSTERS}, **common,
                                control={"etcd": [etcd.client_url], "prefix": keys.prefix, "lease_ttl": "10s",
                                         "affinity": True, "report_interval": "1s", "rebalance": {"cooldown": "5s"}})
        for c in CLUSTERS:
            spec["clusters"][c]["labels"] = {"dc": wan.dc_of(c)}
        spec["topics"]["sync"] = {"enabled": False}
        (tmp_path / "deployment.yaml").write_text(yaml.safe_dump(spec))
        direct = local_deployment(wan.direct, **common)  # verify reads every cluster directly
        direct["topics"]["sync"] = {"enabled": False}
        (tmp_path / "verify.yaml").write_text(yaml.safe_dump(direct))
        readers = {c: OffsetReader({"bootstrap.servers": s}, cluster=c, timeout_s=10.0) for c, s in wan.direct.items()}

        def counts() -> dict[str, int]:
            return {c: r.record_count(topic) for c, r in readers.items()}

        for dc in WAN_DCS:
            pool.start(f"worker-{dc}", labels={"dc": dc},
                       env={WAN_BOOTSTRAP_ENV.format(c.upper()): address for c, address in wan.view(dc).items()})

        def alive() -> None:
            for name, worker in pool.workers.items():
                assert worker.alive(), f"{name} exited: {_tail(str(worker.output))} {_tail(str(worker.log_file))}"

        deadline = time.monotonic() + 300
        while not _placed_by_dc(control_snapshot(client, keys)):
            assert time.monotonic() < deadline, f"units not placed by data centre: {control_snapshot(client, keys)}"
            pause(1, alive)
        producers = ProducersAtRate({c: wan.direct[c] for c in ("c1", "c3")}, topic, PARTITIONS, RATE).start()
        try:
            deadline = time.monotonic() + 300  # every cluster receives: the links run, both ways
            while not all(n > 0 for n in counts().values()):
                assert time.monotonic() < deadline, f"no copies everywhere after 300 s: {counts()}"
                pause(1, alive)
            pause(20, alive)

            link.cut()
            cut_at = time.monotonic()
            try:
                pause(10, alive)  # past the first timeouts: what follows is the cut's steady state
                local_from = counts()
                pause(CUT_S - 10, alive)
                local_to = counts()
            finally:
                link.cut(False)
            restored_at = time.monotonic()
            figures["cut_actual_s"] = round(restored_at - cut_at, 1)
            # only c1 and c3 are written to: c2 grows by c1's local copies, c4 by c3's
            figures["during_cut"] = {c: local_to[c] - local_from[c] for c in CLUSTERS}
            figures["counts_at_cut_end"] = local_to
            # checked at the end, after the rest of the case has been measured
            figures["local_copies_went_on"] = figures["during_cut"]["c2"] > 0 and figures["during_cut"]["c4"] > 0
            figures["after_cut"] = _caught_up(counts, producers, restored_at, alive)

            link.limit(CAP_MBIT)
            capped_at = time.monotonic()
            try:
                pause(CAP_S, alive)
                figures["at_cap_end"] = counts()
            finally:
                link.limit(None)
            figures["after_cap"] = _caught_up(counts, producers, time.monotonic(), alive)
            figures["cap_actual_s"] = round(time.monotonic() - capped_at, 1)
        finally:
            total = producers.stop()
        report = wait_until_complete(parse_deployment(direct), topic, timeout=420, check=alive)
        figures["records_produced"] = total
        figures["per_cluster"] = {c.cluster: {"records": c.records, "missing": c.missing, "duplicated": c.duplicated,
                                              "order_violations": c.order_violations} for c in report.clusters}
        record_figures("wan figures", figures)
        assert all((c.missing, c.unexpected) == (0, 0) for c in report.clusters), report.as_dict()
        assert _placed_by_dc(control_snapshot(client, keys)), control_snapshot(client, keys)  # no unit moved
        assert all(code == 0 for code in pool.stop_all(grace_s=60).values()), \
            [_tail(str(w.output)) for w in pool.workers.values()]
        verify = subprocess.run([TREEDIST, "verify", "-c", str(tmp_path / "verify.yaml"), "--topic", topic]
                                + (["--strict"] if delivery == "exactly_once" else []),
                                capture_output=True, text=True, timeout=300)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert figures["local_copies_went_on"], f"c2 or c4 received nothing during the cut: {figures['during_cut']}"
    finally:
        pool.stop_all(grace_s=60)
        client.close()
        wan.stop()


def _caught_up(counts, producers: ProducersAtRate, since: float, tick, timeout: float = 300) -> dict:
    """Until every cluster holds at least as many records as c1 and c3 had acknowledged at
    `since` (what was produced until the link came back), sampled every second: the seconds from
    `since` (None after `timeout`) and the counts then. Watermarks: a lower bound of the wait in
    exactly_once (they count transaction markers too); the verification at the end is exact."""
    produced = sum(producers.acknowledged.values())
    deadline = time.monotonic() + timeout
    while True:
        now = counts()
        if min(now.values()) >= produced:
            return {"seconds": round(time.monotonic() - since, 1), "produced_then": produced, "counts": now}
        if time.monotonic() > deadline:
            return {"seconds": None, "produced_then": produced, "counts": now}
        pause(1, tick)
