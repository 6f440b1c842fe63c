"""The 4-cluster reference tree on a Spark cluster across hosts (the multi-host bed,
treedist.local.netbed): the driver (`treedist run -c`) in its own network namespace, the
Spark master and two workers each in theirs, the Kafka clusters in another. Executors run on
both worker hosts (their addresses read from the driver's executor list and the master's REST
status), and every record reaches every cluster exactly once (`treedist verify --strict`).

Faults on the cluster: the link between the bridge and one worker's host down for 30 s, and
every process of one worker's host SIGKILLed, mid-stream: nothing missing, duplicates allowed.

Across a WAN (treedist.local.wanproxy, 40 ms round trip between two data centres): one driver
in dc1, and one `treedist worker` per data centre, each running the units of its own clusters.

Measured and printed (and written to `<bed>/measurements.json`): the time from the driver's
launch to the first copy on every cluster, and the peak resident memory per host (the sum
over the host's processes, sampled every second)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.kafka.watermarks import OffsetReader
from treedist.local.deployment import local_deployment
from treedist.local.launcher import stop_all
from treedist.local.netbed import HOSTS, SPARK_WORKERS
from treedist.ops.checkpoint import recent_batches
from treedist.spark.checkpoint_fs import join

from tests.e2e.workload import ProducersAtRate, create_topic_everywhere, produce_concurrently, wait_until_complete
from tests.fixtures.netbed import netbed  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
PARTITIONS = 3
BEFORE, WHILE_RUNNING = 200, 400  # records per cluster produced before the driver starts, and after
DRIVER_UI_PORT = 4040  # free: the driver host runs nothing else
TREEDIST = str(Path(sys.executable).with_name("treedist"))


class Sampler:
    """Calls `sample()` every `every_s` seconds in a thread, from entering the block to leaving it."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every_s)

    def sample(self) -> None:
        raise NotImplementedError


class RssSampler(Sampler):
    """Samples each host's summed RSS every `every_s` seconds; keeps the peak per host."""

    def __init__(self, bed, every_s: float = 1.0) -> None:
        super().__init__(every_s)
        self.bed = bed
        self.peak = {host: 0 for host in HOSTS}

    def sample(self) -> None:
        for host in HOSTS:
            self.peak[host] = max(self.peak[host], self.bed.rss_bytes(host))


def _get(url: str, attempts: int = 4):
    """GET a JSON answer from a Spark UI. The UI answers in its own threads and, with the
    suite's load on two cores, sometimes takes longer than a read timeout: a timed-out or
    refused read is tried again (bounded), the last error raised."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=15) as answer:
                return json.loads(answer.read())
        except (TimeoutError, urllib.error.URLError, ConnectionError):
            if attempt == attempts - 1:
                raise
            time.sleep(2)


def _tail(path: str, chars: int = 3000) -> str:
    try:
        return Path(path).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _deployment(bed, tmp_path: Path, app_name: str, conf: dict[str, str] | None = None,
                s3=None) -> tuple[Path, object, str, dict[str, str]]:
    """A fresh topic on every cluster with BEFORE records each, and the deployment running the
    tree on the bed's master: (config file, deployment, topic, bootstrap). With `s3` (an
    `S3Store`), its checkpoints are in that bucket (`s3a://`)."""
    bootstrap = {c: bed.bootstrap[c] for c in CLUSTERS}
    assert all(b.startswith(bed.address("kafka") + ":") for b in bootstrap.values()), bootstrap
    topic = f"multihost-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere(bootstrap, topic, PARTITIONS)
    spec = local_deployment(
        bootstrap, topics=[topic],
        checkpoint_location=s3.location("checkpoints") if s3 else str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "500 milliseconds"}, offsets={"enabled": False},
        spark={"master": bed.master.url, "app_name": app_name,
               "conf": {"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "512m",
                        "spark.ui.enabled": "true", "spark.ui.port": str(DRIVER_UI_PORT),
                        **(s3.spark_conf() if s3 else {}), **(conf or {})}},
    )
    spec["topics"]["sync"] = {"enabled": False}
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    produce_concurrently(bootstrap, topic, BEFORE, PARTITIONS)
    return config, parse_deployment(spec), topic, bootstrap


def _start_driver(bed, config: Path, topic: str, bootstrap: dict[str, str], env: dict[str, str] | None = None,
                  argv: list[str] | None = None):
    """`treedist run -c` (or `argv`) on the driver host; waits for the first copy on every
    cluster (each holds more than its own BEFORE records). Returns (process, seconds from
    launch to then)."""
    readers = {c: OffsetReader({"bootstrap.servers": s}, cluster=c, timeout_s=10.0) for c, s in bootstrap.items()}
    launched = time.monotonic()
    driver = bed.spawn("driver", argv or [TREEDIST, "run", "-c", str(config)], "driver", str(config), cwd=str(config.parent),
                       env={**{k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}, **(env or {})})
    try:
        deadline = time.monotonic() + 300
        while not all(r.record_count(topic) > BEFORE for r in readers.values()):
            assert driver.is_ours(), f"the driver exited: {_tail(driver.log_file)}"
            assert time.monotonic() < deadline, f"no copies after 300 s: {_tail(driver.log_file)}"
            time.sleep(0.5)
    except BaseException:
        stop_all([driver.pid] if driver.is_ours() else [], grace=60)
        raise
    return driver, time.monotonic() - launched


def _executors(bed) -> list[dict]:
    """Every executor the driver had (live and dead), from its UI's REST API."""
    driver_ui = f"http://{bed.address('driver')}:{DRIVER_UI_PORT}"
    app_id = _get(driver_ui + "/api/v1/applications")[0]["id"]
    return _get(f"{driver_ui}/api/v1/applications/{app_id}/allexecutors")


def _lossless(report, total: int) -> None:
    """Nothing missing or unexpected anywhere; duplicates (a replayed batch after a fault) allowed."""
    for c in report.clusters:
        assert (c.missing, c.unexpected, c.records - c.duplicated) == (0, 0, total), report.as_dict()
    print(f"duplicates per cluster: { {c.cluster: c.duplicated for c in report.clusters} }")


def test_the_tree_runs_on_a_spark_cluster_across_hosts(netbed, s3_on_bed, tmp_path):
    """... with its checkpoints on the S3-compatible store (moto on the kafka host, `s3a://`):
    the driver's JVM writes Spark's logs there, executors on the worker hosts their copy-ahead
    intents."""
    bed = netbed
    config, deployment, topic, bootstrap = _deployment(bed, tmp_path, "treedist-multihost", s3=s3_on_bed)
    driver_ui = f"http://{bed.address('driver')}:{DRIVER_UI_PORT}"
    with RssSampler(bed) as rss:
        driver, first_copy_s = _start_driver(bed, config, topic, bootstrap)
        try:
            def alive() -> None:
                assert driver.is_ours(), f"the driver exited: {_tail(driver.log_file)}"

            total = BEFORE * len(CLUSTERS) + produce_concurrently(bootstrap, topic, WHILE_RUNNING, PARTITIONS)
            report = wait_until_complete(deployment, topic, timeout=300, check=alive)
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                       for c in report.clusters), report

            # executors on both worker hosts, none on the driver's: the driver's executor list ...
            app_id = _get(driver_ui + "/api/v1/applications")[0]["id"]
            executors = _get(f"{driver_ui}/api/v1/applications/{app_id}/executors")
            hosts = {e["id"]: e["hostPort"].rsplit(":", 1)[0] for e in executors}
            assert hosts.pop("driver") == bed.address("driver"), executors
            assert set(hosts.values()) == {bed.address(w) for w in SPARK_WORKERS}, executors
            # ... and the master's REST status: the application holds a core of each worker
            state = bed.master.status()
            assert [(a["id"], a["name"], a["cores"]) for a in state["activeapps"]] == [(app_id, "treedist-multihost", 2)]
            assert {w["host"]: w["coresused"] for w in state["workers"]} == {bed.address(w): 1 for w in SPARK_WORKERS}
            # the checkpoints are in the bucket: every query's committed batches read from there
            root = deployment.checkpoint_location
            assert root.startswith("s3a://") and not (tmp_path / "checkpoints").exists()
            assert all(recent_batches(join(root, "messages", c), 0.0, time.time(), store=s3_on_bed.store())
                       for c in CLUSTERS), root
        finally:
            stop_all([driver.pid] if driver.is_ours() else [], grace=60)

    verify = subprocess.run([TREEDIST, "verify", "-c", str(config), "--topic", topic, "--strict"],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    measured = {"time_to_first_copy_s": round(first_copy_s, 1), "records": total,
                "peak_rss_mib": {h: round(v / 2**20) for h, v in rss.peak.items()}}
    (Path(bed.base_dir) / "measurements.json").write_text(json.dumps(measured, indent=2))
    print(f"\nmulti-host bed: {json.dumps(measured)}")


def _python_workers(bed, host: str) -> dict[int, tuple[str, str]]:
    """pid -> (argv[0], cwd) of the Python processes on `host` that have loaded confluent-kafka,
    with the path it was loaded from (executors' Python workers hold kept Kafka clients)."""
    found = {}
    for pid in bed.pids(host):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        loaded = [line.split()[-1] for line in maps.splitlines() if "/confluent_kafka/" in line]
        if loaded:
            found[pid] = (argv0, loaded[0])
    return found


@pytest.mark.long
def test_executors_run_the_environment_shipped_with_spark_archives(netbed, tmp_path):
    """The venv packed by `treedist pack-env`, shipped with `spark.archives` and unpacked by
    Spark in each executor's directory: the executors' Python workers run its interpreter and
    load its packages (not the driver's venv), and the tree still copies every record once."""
    bed = netbed
    archive = tmp_path / "treedist-env.tar.gz"
    packed = subprocess.run([TREEDIST, "pack-env", "-o", str(archive), "--exclude", "*/site-packages/playwright/*"],
                            capture_output=True, text=True, timeout=600)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    config, deployment, topic, bootstrap = _deployment(bed, tmp_path, "treedist-multihost-archives",
                                                       {"spark.archives": f"{archive}#environment"})
    # The driver starts Python processes of its own (the data sources' planners) with the same
    # PYSPARK_PYTHON, from its working directory: there `environment` is the driver's venv.
    (config.parent / "environment").symlink_to(sys.prefix)
    driver, _ = _start_driver(bed, config, topic, bootstrap, env={"PYSPARK_PYTHON": "./environment/bin/python"})
    try:
        total = BEFORE * len(CLUSTERS) + produce_concurrently(bootstrap, topic, WHILE_RUNNING, PARTITIONS)
        report = wait_until_complete(deployment, topic, timeout=300,
                                     check=lambda: None if driver.is_ours() else pytest.fail(_tail(driver.log_file)))
        assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                   for c in report.clusters), report
        for host in SPARK_WORKERS:
            workers = _python_workers(bed, host)
            assert workers, f"no Python worker with Kafka clients on {host}"
            for argv0, loaded in workers.values():
                assert argv0 == "./environment/bin/python", workers
                assert "/environment/lib/" in loaded, workers
                assert not loaded.startswith(sys.prefix), workers
    finally:
        stop_all([driver.pid] if driver.is_ours() else [], grace=60)


def test_a_control_plane_worker_runs_the_tree_on_the_cluster_and_serves_its_metrics(netbed, tmp_path):
    """`treedist worker` on the driver host (etcd beside it, on that host's address) with the
    bed's master: it leads, runs every unit with executors on both worker hosts, copies every
    record once, and its `--metrics-port` (bound to the host's address) lists its units."""
    from treedist.local.etcd import etcd_binary

    bed = netbed
    host = bed.address("driver")
    etcd_url = f"http://{host}:2379"
    etcd = bed.spawn("driver", [etcd_binary(), "--name", "bed", "--data-dir", str(tmp_path / "etcd"),
                                "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                                "--listen-peer-urls", f"http://{host}:2380",
                                "--initial-advertise-peer-urls", f"http://{host}:2380",
                                "--initial-cluster", f"bed=http://{host}:2380", "--log-level", "warn"],
                     "etcd", str(tmp_path / "etcd"))
    try:
        config, deployment, topic, bootstrap = _deployment(bed, tmp_path, "treedist-multihost-worker")
        spec = yaml.safe_load(config.read_text())
        spec["control"] = {"etcd": [etcd_url], "prefix": f"/bed-{uuid.uuid4().hex[:8]}", "lease_ttl": "10s"}
        config.write_text(yaml.safe_dump(spec))
        worker, _ = _start_driver(bed, config, topic, bootstrap, argv=[
            TREEDIST, "worker", "-c", str(config), "--name", "bed-w1", "--state-dir", str(tmp_path / "worker"),
            "--metrics-port", "9100", "--bind", host, "--insecure"])
        try:
            total = BEFORE * len(CLUSTERS) + produce_concurrently(bootstrap, topic, WHILE_RUNNING, PARTITIONS)
            report = wait_until_complete(deployment, topic, timeout=300,
                                         check=lambda: None if worker.is_ours() else pytest.fail(_tail(worker.log_file)))
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                       for c in report.clusters), report
            hosts = {e["hostPort"].rsplit(":", 1)[0] for e in _executors(bed) if e["id"] != "driver" and e["isActive"]}
            assert hosts == {bed.address(w) for w in SPARK_WORKERS}, _executors(bed)
            with urllib.request.urlopen(f"http://{host}:9100/metrics", timeout=30) as answer:
                text = answer.read().decode()
            units = {line.split('unit="')[1].split('"')[0] for line in text.splitlines()
                     if line.startswith("treedist_worker_unit{")}
            assert {f"messages/{c}" for c in CLUSTERS} <= units, text[:2000]
        finally:
            stop_all([worker.pid] if worker.is_ours() else [], grace=90)
    finally:
        stop_all([etcd.pid] if etcd.is_ours() else [], grace=10)


FAULT_RATE = 50.0  # records/s per cluster while a fault happens


def _active_on(bed, host: str) -> list[dict]:
    return [e for e in _executors(bed) if e["isActive"] and e["hostPort"].rsplit(":", 1)[0] == bed.address(host)]


def _wait_active_on_both(bed, timeout_s: float = 60.0) -> None:
    """Both workers' executors are active. The first copy can come from one executor while
    the other is still registering, so this waits (bounded) instead of reading once."""
    deadline = time.monotonic() + timeout_s
    while not (_active_on(bed, "worker1") and _active_on(bed, "worker2")):
        assert time.monotonic() < deadline, _executors(bed)
        time.sleep(1)


@pytest.mark.long
def test_the_link_to_a_worker_host_down_for_30_s_loses_nothing(netbed, tmp_path):
    """The worker1 host's link to the bridge goes down for 30 s mid-stream (its executor
    reaches neither the driver nor the brokers, nothing reaches it) and comes back: the
    queries recover, every record reaches every cluster."""
    bed = netbed
    config, deployment, topic, bootstrap = _deployment(bed, tmp_path, "treedist-multihost-link")
    driver, _ = _start_driver(bed, config, topic, bootstrap)
    try:
        _wait_active_on_both(bed)
        producers = ProducersAtRate(bootstrap, topic, PARTITIONS, FAULT_RATE).start()
        time.sleep(5)
        bed.set_link("worker1", up=False)
        try:
            time.sleep(30)
        finally:
            bed.set_link("worker1", up=True)
        time.sleep(10)
        total = BEFORE * len(CLUSTERS) + producers.stop()
        report = wait_until_complete(deployment, topic, timeout=400,
                                     check=lambda: None if driver.is_ours() else pytest.fail(_tail(driver.log_file)))
        _lossless(report, total)
    finally:
        stop_all([driver.pid] if driver.is_ours() else [], grace=60)


@pytest.mark.long
def test_a_worker_host_killed_mid_stream_loses_nothing(netbed, tmp_path):
    """Every process of the worker1 host (the Spark worker, its executor and Python workers)
    is SIGKILLed mid-stream: the tasks run again on worker2's executor, every record reaches
    every cluster. worker1's Spark worker is started again afterwards."""
    bed = netbed
    config, deployment, topic, bootstrap = _deployment(bed, tmp_path, "treedist-multihost-kill")
    driver, _ = _start_driver(bed, config, topic, bootstrap)
    try:
        _wait_active_on_both(bed)
        producers = ProducersAtRate(bootstrap, topic, PARTITIONS, FAULT_RATE).start()
        time.sleep(5)
        survivor_tasks = _active_on(bed, "worker2")[0]["totalTasks"]
        assert bed.kill_host("worker1")
        time.sleep(20)
        total = BEFORE * len(CLUSTERS) + producers.stop()
        report = wait_until_complete(deployment, topic, timeout=400,
                                     check=lambda: None if driver.is_ours() else pytest.fail(_tail(driver.log_file)))
        _lossless(report, total)
        # the lost host's executor is gone; the survivor ran the tasks since
        assert not _active_on(bed, "worker1"), _executors(bed)
        assert _active_on(bed, "worker2")[0]["totalTasks"] > survivor_tasks
    finally:
        stop_all([driver.pid] if driver.is_ours() else [], grace=60)
        bed.start_worker("worker1")


def _round_trip_ms(bootstrap: str, samples: int = 10) -> float:
    """The median Kafka request round trip (a metadata request on an established connection)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)  # connect first: the handshake is not a request's round trip
    times = []
    for _ in range(samples):
        started = time.monotonic()
        admin.list_topics(timeout=30)
        times.append((time.monotonic() - started) * 1000)
    return sorted(times)[len(times) // 2]


@pytest.mark.long
def test_the_tree_across_a_40_ms_wan_copies_every_record_once(tmp_path):
    """Two data centres, {c1, c2} and {c3, c4}, joined by the WAN proxy
    (treedist.local.wanproxy, 20 ms each way): every broker advertises the proxy on its WAN
    listener, so a client in the other data centre reaches it only through the proxy. The
    driver (`treedist run -c`) is in dc1: its level-3 links (c1 -> c3, c3 -> c1, ...) cross the
    WAN, and so do c3's and c4's reads and writes. A Kafka request through the proxy takes at
    least the 40 ms round trip; every record reaches every cluster exactly once (verify --strict).
    Local clusters, not the namespace bed: the delay is the proxy's, wherever the hosts are."""
    from treedist.local.wanproxy import TwoDataCentres

    wan = TwoDataCentres.start(tmp_path / "wan", {"dc1": ["c1", "c2"], "dc2": ["c3", "c4"]}, delay_ms=20.0)
    try:
        dc1 = wan.view("dc1")
        assert dc1["c3"] == wan.proxied["c3"] and dc1["c1"] == wan.direct["c1"], dc1
        through, direct = _round_trip_ms(dc1["c3"]), _round_trip_ms(wan.direct["c3"])
        print(f"\nKafka request round trip to c3 from dc1: {through:.1f} ms through the WAN, {direct:.1f} ms direct")
        assert through >= 40.0

        topic = f"wan-{uuid.uuid4().hex[:8]}"
        create_topic_everywhere(wan.direct, topic, PARTITIONS)
        spec = local_deployment(dc1, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
                                distributor={"trigger_interval": "500 milliseconds"}, offsets={"enabled": False})
        spec["topics"]["sync"] = {"enabled": False}
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        # Producers write to their own data centre's cluster (direct), before and while the driver runs.
        total = produce_concurrently(wan.direct, topic, BEFORE, PARTITIONS)
        log_file = tmp_path / "driver.log"
        with open(log_file, "ab") as log:
            driver = subprocess.Popen([TREEDIST, "run", "-c", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(tmp_path))
        try:
            total += produce_concurrently(wan.direct, topic, WHILE_RUNNING, PARTITIONS)
            report = wait_until_complete(parse_deployment(spec), topic, timeout=300,
                                         check=lambda: None if driver.poll() is None else pytest.fail(_tail(str(log_file))))
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                       for c in report.clusters), report
        finally:
            stop_all([driver.pid] if driver.poll() is None else [], grace=60)
        verify = subprocess.run([TREEDIST, "verify", "-c", str(config), "--topic", topic, "--strict"],
                                capture_output=True, text=True, timeout=300)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        wan.stop()


WAN_DCS = {"dc1": ["c1", "c2"], "dc2": ["c3", "c4"]}
# Each worker resolves its clusters' bootstrap servers from its own environment (secrets'
# `${env:...}` references, resolved where the worker runs): the live config in etcd is one for
# both, the addresses are those of each worker's data centre (its own clusters direct, the
# other's through the WAN proxy), as DNS would give them in two real data centres.
WAN_BOOTSTRAP_ENV = "TD_WAN_{}"


class WorkerSampler(Sampler):
    """Per worker (`pid`): the peak RSS of its process tree (the worker, its Spark JVM, its
    Python workers) sampled every second, and when its `/metrics` first counted a copy."""

    def __init__(self, workers: dict[str, tuple[int, int]], every_s: float = 1.0) -> None:
        from treedist.ops.procstat import tree_usage

        super().__init__(every_s)
        self.workers, self._usage = workers, tree_usage  # name -> (pid, metrics port)
        self.peak_rss = {name: 0 for name in workers}
        self.first_copy_at: dict[str, float] = {}

    def _copied(self, port: int) -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            return 0.0  # not serving yet (Spark starting)
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("treedist_records_copied_total{"))

    def sample(self) -> None:
        for name, (pid, port) in self.workers.items():
            self.peak_rss[name] = max(self.peak_rss[name], self._usage(pid)[1])
            if name not in self.first_copy_at and self._copied(port) > 0:
                self.first_copy_at[name] = time.monotonic()


def _peer_ports(root: int) -> set[int]:
    """Remote ports of the established TCP connections of `root`'s process tree (the worker,
    its Spark JVM, its Python workers), from `ss -tnp`."""
    from treedist.ops.procstat import all_processes

    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in all_processes().items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        tree.add(pid := todo.pop())
        todo.extend(children.get(pid, ()))
    table = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True, text=True, timeout=30,
                           check=True).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in table.splitlines()
            if tree & {int(pid) for pid in re.findall(r"pid=(\d+)", line)}}


def _placed_by_dc(snapshot: dict) -> bool:
    """Every messages unit runs (claimed and assigned) on the worker of its source's data centre."""
    units = {u["unit"]: u for u in snapshot["units"]}
    return set(units) == {f"messages/{c}" for c in CLUSTERS} and all(
        u["running_on"] == u["assigned_to"] == f"worker-{dc}"
        for dc, members in WAN_DCS.items() for c in members for u in [units[f"messages/{c}"]])


def test_one_worker_per_data_centre_runs_its_own_sources_across_the_wan(etcd, tmp_path):
    """The WAN of the test above, with the control plane: `treedist worker` in each data
    centre (labels dc=dc1 / dc=dc2, the clusters labelled the same, `control.affinity`, one
    etcd). Each worker reaches its own clusters directly and the other's through the proxy.
    The leader places every `messages/<cluster>` unit on the worker of its source's data centre
    (read from etcd's assignments and claims, and from each worker's own view): a level-3 link
    reads its source locally and writes across the WAN. Records produced on every cluster
    before and while the workers run reach every cluster exactly once (verify --strict).
    Printed: each worker's time from launch to its first copy, and its peak RSS."""
    from treedist.control.etcd import EtcdClient
    from treedist.control.keys import Keys
    from treedist.control.status import control_snapshot
    from treedist.local.launcher import free_port
    from treedist.local.wanproxy import TwoDataCentres
    from treedist.local.workers import LocalWorkers

    wan = TwoDataCentres.start(tmp_path / "wan", WAN_DCS, delay_ms=20.0)
    client = EtcdClient([etcd.client_url])
    pool = LocalWorkers(tmp_path / "deployment.yaml", tmp_path / "workers")
    try:
        topic = f"wan-workers-{uuid.uuid4().hex[:8]}"
        create_topic_everywhere(wan.direct, topic, PARTITIONS)
        keys = Keys(f"/wan-{uuid.uuid4().hex[:8]}")
        common = {"topics": [topic], "checkpoint_location": str(tmp_path / "checkpoints"),
                  "distributor": {"trigger_interval": "500 milliseconds"}, "offsets": {"enabled": False}}
        spec = local_deployment({c: "${env:" + WAN_BOOTSTRAP_ENV.format(c.upper()) + "}" for c in CLUSTERS}, **common,
                                control={"etcd": [etcd.client_url], "prefix": keys.prefix, "lease_ttl": "10s",
                                         "affinity": True, "report_interval": "1s",
                                         "rebalance": {"cooldown": "5s"}})
        for c in CLUSTERS:
            spec["clusters"][c]["labels"] = {"dc": wan.dc_of(c)}
        spec["topics"]["sync"] = {"enabled": False}
        (tmp_path / "deployment.yaml").write_text(yaml.safe_dump(spec))
        # verify reads every cluster directly (the test's own view, not a data centre's)
        direct = local_deployment(wan.direct, **common)
        direct["topics"]["sync"] = {"enabled": False}
        (tmp_path / "verify.yaml").write_text(yaml.safe_dump(direct))

        total = produce_concurrently(wan.direct, topic, BEFORE, PARTITIONS)
        launched, ports = time.monotonic(), {}
        for dc in WAN_DCS:
            ports[f"worker-{dc}"] = free_port()
            pool.start(f"worker-{dc}", labels={"dc": dc},
                       env={WAN_BOOTSTRAP_ENV.format(c.upper()): address for c, address in wan.view(dc).items()},
                       args=["--metrics-port", str(ports[f"worker-{dc}"])])

        def alive() -> None:
            for name, worker in pool.workers.items():
                assert worker.alive(), f"{name} exited: {_tail(str(worker.output))} {_tail(str(worker.log_file))}"

        with WorkerSampler({n: (w.pid, ports[n]) for n, w in pool.workers.items()}) as sampled:
            # the control plane's own state: every unit on the worker of its source's data centre,
            # in etcd (assignment and claim) and in the worker's own view (started there)
            def placed() -> bool:
                return _placed_by_dc(control_snapshot(client, keys)) and all(
                    sorted(pool.workers[f"worker-{dc}"].view()["units"]) == [f"messages/{c}" for c in members]
                    for dc, members in WAN_DCS.items())

            deadline = time.monotonic() + 240
            while not placed():
                alive()
                assert time.monotonic() < deadline, f"units not placed by data centre in 240 s: {control_snapshot(client, keys)}"
                time.sleep(0.5)
            print(f"\nplaced by data centre after {time.monotonic() - launched:.0f} s; "
                  f"moves: {control_snapshot(client, keys)['balance'].get('last_moves')}")
            for dc, members in WAN_DCS.items():
                view = pool.workers[f"worker-{dc}"].view()
                assert view["labels"] == {"dc": dc}, view
                # its level-3 links read here and write to the other data centre
                level3 = {link: target for link, target in view["targets"].items() if link.endswith("-L3")}
                assert level3 and all(link.split("-")[0] in members and wan.dc_of(target) != dc
                                      for link, target in level3.items()), view["targets"]

            total += produce_concurrently(wan.direct, topic, WHILE_RUNNING, PARTITIONS)
            report = wait_until_complete(parse_deployment(direct), topic, timeout=300, check=alive)
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                       for c in report.clusters), report
            assert _placed_by_dc(control_snapshot(client, keys)), control_snapshot(client, keys)  # no unit moved
            # each worker reaches its own clusters directly and the other's only through the WAN
            port = {c: int(address.rsplit(":", 1)[1]) for c, address in wan.direct.items()}
            proxy_port = {c: int(address.rsplit(":", 1)[1]) for c, address in wan.proxied.items()}
            for dc, members in WAN_DCS.items():
                peers = _peer_ports(pool.workers[f"worker-{dc}"].pid)
                remote = [c for c in CLUSTERS if c not in members]
                assert {port[c] for c in members} <= peers and not {port[c] for c in remote} & peers, (dc, peers)
                assert {proxy_port[c] for c in remote} & peers, (dc, peers)  # its level-3 links write across
        assert all(code == 0 for code in pool.stop_all(grace_s=60).values()), [_tail(str(w.output)) for w in pool.workers.values()]
        verify = subprocess.run([TREEDIST, "verify", "-c", str(tmp_path / "verify.yaml"), "--topic", topic, "--strict"],
                                capture_output=True, text=True, timeout=300)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        pool.stop_all(grace_s=60)  # a worker already stopped is not signalled again
        client.close()
        wan.stop()

    measured = {name: {"time_to_first_copy_s": round(sampled.first_copy_at[name] - launched, 1) if name in sampled.first_copy_at else None,
                       "peak_rss_mib": round(sampled.peak_rss[name] / 2**20)} for name in pool.workers}
    print(f"WAN, one worker per data centre ({total} records): {json.dumps(measured)}")
