"""The fault harness on three-broker clusters (tests/fixtures/clusters.py `three_broker_pair`):
paced producers with real timestamps, a hop-latency probe on a target, the operators' acts
(a rolling restart waiting for full ISRs, a broker killed, leader elections, a reassignment)
and the figures of one case (records, missing, duplicated, order violations, the worst hop
latency during the fault, the time until copies are back to their steady latency).

Runs in the test process (tests/e2e/test_three_brokers.py and scripts/faults-3brokers)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import yaml

from treedist.config import parse_deployment
from treedist.driver.app import DistributionApp
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment
from treedist.local.launcher import LocalBroker, restart_broker, stop_pid, wait_ready

from tests.e2e.workload import create_topic_everywhere, wait_for_counts, wait_until_complete

RESULTS_ENV = "TREEDIST_FAULTS_RESULTS"  # a JSON-lines file each case appends its figures to
PARTITIONS = 3
# records/s per mode into c2 (both modes at once: twice that); scripts/faults-3brokers sets it higher
RATE = float(os.environ.get("TREEDIST_FAULTS_RATE", "100"))
MODES = {"at_least_once": ("a1", "a2"), "exactly_once": ("e1", "e2")}


class PacedProducer:
    """Records at `rate` per second to `topic` of one cluster (idempotent, acks=all), each
    with its CreateTime = when it was produced, round robin over `partitions`, until `stop()`;
    a record that cannot be delivered meanwhile waits in the producer (librdkafka's 300 s
    delivery timeout). `stop()` flushes, fails on any delivery error, returns the count."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, name: str = "p"):
        self.bootstrap, self.topic, self.partitions, self.rate, self.name = bootstrap, topic, partitions, rate, name
        self.acknowledged = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"paced-{name}")

    def start(self) -> "PacedProducer":
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        assert not self.errors, self.errors[:5]
        return self.acknowledged

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "log_level": 0})

        def on_delivery(err, _msg):
            if err is None:
                self.acknowledged += 1
            else:
                self.errors.append(f"{self.name}: {err}")

        started, i = time.monotonic(), 0
        while not self._stop.is_set():
            while i < int((time.monotonic() - started) * self.rate):
                producer.produce(self.topic, key=f"{self.name}-key-{i % 50}".encode(), value=f"{self.name}-{i}".encode(),
                                 partition=i % self.partitions, timestamp=int(time.time() * 1000), on_delivery=on_delivery)
                i += 1
            producer.poll(0.02)
        if producer.flush(300) != 0:
            self.errors.append(f"{self.name}: records undelivered after 300 s")


class HopProbe:
    """Receives the copies on a target (read_committed, from the topic's beginning, no group)
    and keeps (CreateTime, receipt time) of each: a hop's latency is their difference."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.samples: list[tuple[float, float]] = []  # (CreateTime s, receipt s)
        self._halt = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hop-probe", "enable.auto.commit": False,
                                   "isolation.level": "read_committed", "fetch.wait.max.ms": 100, "log_level": 0})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"probe-{topic}")

    def start(self) -> "HopProbe":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._halt.is_set():
            batch = self._consumer.consume(10_000, 0.1)
            now = time.time()
            self.samples.extend((m.timestamp()[1] / 1000.0, now) for m in batch if m.error() is None)
        self._consumer.close()


@dataclass
class CaseFigures:
    """One case in one delivery mode: what docs/faults.md's table shows."""

    case: str
    delivery: str
    records: int
    missing: int
    duplicated: int
    order_violations: int
    worst_hop_ms: float  # the worst latency of a record created during the fault
    steady_hop_ms: float  # the 95th percentile before the fault
    back_to_steady_s: float  # from the fault's end until the last copy over max(1 s, 3 x steady) arrived
    fault_s: float
    per_cluster: dict = field(default_factory=dict)

    def record(self) -> None:
        record_figures("fault figures", asdict(self))


def record_figures(label: str, figures: dict) -> None:
    """Print a case's figures and append them to the results file (RESULTS_ENV), if one is set."""
    print(f"{label}: " + json.dumps(figures))
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(figures) + "\n")


def latency_figures(samples: list[tuple[float, float]], fault_start: float, fault_end: float) -> tuple[float, float, float]:
    """(worst hop ms during the fault, steady 95th percentile ms before it, seconds from the
    fault's end until the last copy slower than max(1 s, 3 x steady) arrived; 0 when none)."""
    before = sorted(r - c for c, r in samples if fault_start - 20 <= c < fault_start)
    steady = before[int(0.95 * (len(before) - 1))] if before else 0.0
    during = [r - c for c, r in samples if fault_start <= c <= fault_end]
    threshold = max(1.0, 3 * steady)
    slow = [r for c, r in samples if c >= fault_start and r - c > threshold]
    back = max(0.0, max(slow) - fault_end) if slow else 0.0
    return round(max(during, default=0.0) * 1000, 1), round(steady * 1000, 1), round(back, 1)


def isr_full(admin: AdminClient, topics: list[str] | None = None) -> bool:
    """Every partition's ISR is its replica set (every topic of the cluster, internal ones too)."""
    md = admin.list_topics(timeout=10)
    for name, topic in md.topics.items():
        if topics is not None and name not in topics:
            continue
        for p in topic.partitions.values():
            if p.leader < 0 or sorted(p.isrs) != sorted(p.replicas):
                return False
    return True


def wait_isr_full(bootstrap: str, timeout: float = 300.0, tick=lambda: None) -> float:
    """Poll until `isr_full`; return the seconds it took; fail after `timeout`."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    started = time.monotonic()
    while True:
        tick()
        try:
            if isr_full(admin):
                return time.monotonic() - started
        except Exception:  # a metadata request while a node restarts
            pass
        assert time.monotonic() - started < timeout, f"ISR of {bootstrap} not full after {timeout} s"
        time.sleep(1)


def restart_node(clusters: LocalClusters, node: LocalBroker, tick=lambda: None, kill: bool = False) -> LocalBroker:
    """Stop one node (SIGTERM: a controlled shutdown, or SIGKILL), start it again on its ports,
    wait until it answers; record it in `clusters`."""
    if kill:
        os.killpg(node.pid, signal.SIGKILL)
        time.sleep(1)
    stop_pid(node.pid, grace=60)
    tick()
    back = restart_broker(node)
    wait_ready(back, timeout=300)
    clusters.replace_node(back)
    clusters.save()
    return back


def rolling_restart(clusters: LocalClusters, name: str, tick=lambda: None, log=print) -> None:
    """What operators do: every node of cluster `name`, one at a time, each time waiting until
    every partition's ISR is full again before the next."""
    for node in list(clusters.nodes(name)):
        started = time.monotonic()
        restart_node(clusters, node, tick)
        isr_s = wait_isr_full(clusters.bootstrap[name], tick=tick)
        log(f"rolling restart of {name}: node {node.node_id} back in {time.monotonic() - started:.1f} s "
            f"(ISR full after {isr_s:.1f} s more)")


class Copying:
    """One topic copied from `source` to `target` as run_case drives it: a PacedProducer on the
    source, a HopProbe on the target's copy. Subclasses set `app` (the copier's process:
    check() raises once it died, failed(), link_states()) and `figures()`."""

    def __init__(self, delivery: str, source: str, target: str, topic: str, bootstrap: dict[str, str]):
        self.delivery, self.source, self.target, self.topic, self.bootstrap = delivery, source, target, topic, bootstrap
        self.produced = 0
        self.producer: PacedProducer | None = None
        self.probe = HopProbe(bootstrap[target], topic, PARTITIONS).start()

    def produce(self) -> None:
        self.producer = PacedProducer(self.bootstrap[self.source], self.topic, PARTITIONS, RATE, self.source).start()

    def caught_up(self, within_s: float = 3.0) -> bool:
        """The last copy received arrived within `within_s` of its creation: the link copies
        what is produced as it comes, no backlog (the start of a query, a previous case)."""
        return bool(self.probe.samples) and self.probe.samples[-1][1] - self.probe.samples[-1][0] <= within_s

    def stop_producing(self) -> None:
        if self.producer is not None:
            self.produced += self.producer.stop()
            self.producer = None

    def measured(self, case: str, report, fault_start: float, fault_end: float, deleted: int = 0) -> CaseFigures:
        """The case's figures from a verify report of the copy and the probe's samples, recorded.
        `deleted`: copies an operator deleted with the target's topic, not counted as missing."""
        worst, steady, back = latency_figures(self.probe.samples, fault_start, fault_end)
        figures = CaseFigures(case, self.delivery, report.expected, sum(c.missing for c in report.clusters) - deleted,
                              sum(c.duplicated for c in report.clusters),
                              sum(c.order_violations for c in report.clusters), worst, steady, back,
                              round(fault_end - fault_start, 1),
                              {c.cluster: {"records": c.records, "missing": c.missing, "duplicated": c.duplicated,
                                           "order_violations": c.order_violations, "unexpected": c.unexpected,
                                           "mismatched": c.mismatched} for c in report.clusters})
        figures.record()
        return figures


class Mode(Copying):
    """One delivery mode's deployment, application, topic and probe."""

    def __init__(self, delivery: str, clusters, spark, tmp: Path):
        source, target = MODES[delivery]
        topic = f"rolling-{delivery.replace('_', '-')}"
        bootstrap = {source: clusters.bootstrap["c1"], target: clusters.bootstrap["c2"]}
        spec = local_deployment(bootstrap, topics=[topic], tree={"level": 1, "children": [source, target]},
                                checkpoint_location=str(tmp / delivery / "cp"),
                                distributor={"trigger_interval": "200 milliseconds", "delivery": delivery,
                                             "delivery_timeout_ms": 20000})
        spec["clusters"][target]["passive"] = True
        self.config = tmp / delivery / "deployment.yaml"
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text(yaml.safe_dump(spec))
        self.deployment = parse_deployment(spec)
        create_topic_everywhere(bootstrap, topic, PARTITIONS)
        self.app = DistributionApp(self.deployment, spark)
        super().__init__(delivery, source, target, topic, bootstrap)

    def figures(self, case: str, fault_start: float, fault_end: float, timeout: float = 420) -> CaseFigures:
        """Wait until the target holds every record, then verify (read_committed) and measure.
        Watermarks first (cheap; in exactly_once they count transaction markers too, so only a
        lower bound of the wait), then the verification, which reads every record."""
        wait_for_counts({self.target: self.bootstrap[self.target]}, self.topic, self.produced, timeout, self.app.check)
        report = wait_until_complete(self.deployment, self.topic, timeout=timeout, check=self.app.check)
        figures = self.measured(case, report, fault_start, fault_end)
        assert report.expected == self.produced, report.as_dict()
        return figures


def both_modes(clusters: LocalClusters, spark, tmp: Path):
    """A module fixture's body: both modes' applications started on `clusters`, stopped after."""
    both = [Mode(delivery, clusters, spark, tmp) for delivery in MODES]
    for mode in both:
        mode.app.start()
    try:
        yield both
    finally:
        for mode in both:
            mode.stop_producing()
            mode.probe.stop()
            mode.app.stop()


def tick_all(modes):
    def tick() -> None:
        for mode in modes:
            mode.app.check()
    return tick


def pause(seconds: float, tick=lambda: None) -> None:
    """Sleep `seconds`, supervising (`tick`) every second."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        tick()
        time.sleep(min(1.0, max(0.0, until - time.monotonic())))


def copy_steadily(modes: list[Copying], tick, baseline_s: float) -> None:
    """Every copy's producer started at RATE; until each copies as it comes (at most 180 s),
    then `baseline_s` of steady copying."""
    for mode in modes:
        mode.produce()
    deadline = time.monotonic() + 180  # on a loaded machine the steady latency may stay above 3 s
    while not all(mode.caught_up() for mode in modes) and time.monotonic() < deadline:
        pause(1, tick)
    pause(baseline_s, tick)


def run_case(modes: list[Copying], case: str, fault, baseline_s: float = 15, settle_s: float = 10) -> list[CaseFigures]:
    """Every copy (both modes, or MirrorMaker 2's) at RATE: until they copy as it comes (at most
    180 s), `baseline_s` of steady copying, `fault()` (its span is the fault's), `settle_s`
    more, then the producers stop and each is verified and measured: 0 missing and 0 order
    violations in all, 0 duplicated in exactly_once, no copier failed."""
    tick = tick_all(modes)
    copy_steadily(modes, tick, baseline_s)
    start = time.time()
    fault()
    end = time.time()
    pause(settle_s, tick)
    for mode in modes:
        mode.stop_producing()
    out = []
    for mode in modes:
        figures = mode.figures(case, start, end)
        assert figures.missing == 0 and figures.order_violations == 0, figures
        if mode.delivery == "exactly_once":
            assert figures.duplicated == 0, figures
        assert not mode.app.failed(), mode.app.link_states()
        out.append(figures)
    return out


def markdown_rows(path: str) -> str:
    """docs/faults.md's rows from a results file (one CaseFigures per line)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        f = json.loads(line)
        rows.append(f"| {f['case']} | {f['delivery']} | {f['records']:,} | {f['missing']} | {f['duplicated']} | "
                    f"{f['order_violations']} | {f['worst_hop_ms'] / 1000:.1f} s (steady p95 {f['steady_hop_ms'] / 1000:.2f} s) | "
                    f"{f['back_to_steady_s']:.1f} s | {f['fault_s']:.0f} s |")
    return "\n".join(rows)


if __name__ == "__main__":
    import sys

    print(markdown_rows(sys.argv[1]))
