"""exactly_once on Apache Kafka: one task of c1's query (executor code, run in this process)
commits its copies to c2 with the link's positions in one transaction; the same task run again
(a batch replayed after a crash) copies nothing twice. Preflight names a cluster without
transactions (noida-db) in one line, exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.records import timings, transactions
from treedist.records.plan import plan_cluster
from treedist.records.distributor_source import DistributorReader
from treedist.records.task import run_task

from tests.e2e.workload import create_topic_everywhere

TREEDIST = Path(sys.executable).parent / "treedist"


def _produce(servers: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def _setup(local_kafka, topic, tmp_path, delivery="exactly_once"):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, topic, 2)
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "ck"),
                            distributor={"delivery": delivery})
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec, "<test>")
    plan = plan_cluster(deployment, "c1")
    Path(plan.checkpoint).mkdir(parents=True)
    return bootstrap, config, plan, DistributorReader(plan, counters=None)


def _verify_strict(config: Path, topic: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TREEDIST), "verify", "-c", str(config), "--topic", topic, "--strict", "--timeout", "10"],
                          capture_output=True, text=True, timeout=300)


def _positions(servers: str, source: str, topic: str, partitions: int) -> dict[int, tuple[int, str]]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": transactions.positions_group(source, 1),
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: (tp.offset, tp.metadata) for tp in found}
    finally:
        consumer.close()


def _read_uncommitted(servers: str, topic: str, partitions: int) -> list[bytes]:
    """Every record value in `topic`, aborted ones included (read_uncommitted), read to its end."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"g-{topic}", "isolation.level": "read_uncommitted",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values, ended = [], set()
        while len(ended) < partitions:
            msg = consumer.poll(30)
            assert msg is not None, f"{servers} not read to its end: {len(values)} records"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                ended.add(msg.partition())
            else:
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def _assert_figures(stats, topic: str, per_partition: int) -> None:
    """The task's per-partition figures (treedist.records.timings): every copy to c2 counted,
    in the latency and the age histograms too (the records have timestamps)."""
    assert set(stats.partitions) == {(0, "c2", topic, 0), (0, "c2", topic, 1)}
    for row in stats.partitions.values():
        assert row[timings.RECORDS] == per_partition
        assert sum(row[timings.LATENCY:timings.LATENCY + timings.NBUCKETS]) == per_partition
        assert sum(row[timings.AGE:timings.AGE + timings.NBUCKETS]) == per_partition
        assert row[timings.LATENCY_SUM] >= row[timings.AGE_SUM]  # confirmed after the copies were handed over


def test_a_task_run_twice_over_the_same_windows_copies_once(local_kafka, unique_topic, tmp_path):
    bootstrap, config, plan, reader = _setup(local_kafka, unique_topic, tmp_path)
    _produce(bootstrap["c1"], unique_topic, 300, 2)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    [task] = reader.partitions(start, end)

    first = run_task(plan, task)
    assert first.copied == 300
    _assert_figures(first, unique_topic, 150)  # measured once the transaction committed
    # The transaction recorded, on c2, where the link c1 -> c2 has copied up to, under the batch's token.
    assert _positions(bootstrap["c2"], "c1", unique_topic, 2) == {0: (150, task.batch), 1: (150, task.batch)}

    replay = run_task(plan, task)  # the same batch again, as after a crash before Spark's commit
    assert (replay.records_in, replay.copied) == (0, 0)

    result = _verify_strict(config, unique_topic)
    assert result.returncode == 0, result.stdout + result.stderr


def test_at_least_once_copies_a_replayed_task_again(local_kafka, unique_topic, tmp_path):
    """The contrast: without transactions a replay writes its copies a second time, and
    verify --strict fails on them (exit 1)."""
    bootstrap, config, plan, reader = _setup(local_kafka, unique_topic, tmp_path, delivery="at_least_once")
    _produce(bootstrap["c1"], unique_topic, 100, 2)
    start = reader.initialOffset()
    [task] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    assert run_task(plan, task).copied == 100
    again = run_task(plan, task)
    assert again.copied == 100
    _assert_figures(again, unique_topic, 50)  # measured once the producer's deliveries were checked
    result = _verify_strict(config, unique_topic)
    assert result.returncode == 1, result.stdout + result.stderr


def test_an_aborted_transaction_is_not_read_and_its_replay_copies_once(local_kafka, unique_topic, tmp_path):
    """A task killed between produce and commit: its copies sit on c2 in an open transaction.
    The retry fences it (same transactional.id), which aborts them: read_committed readers
    (verify, the next hop) never see them, and the retry copies everything once."""
    bootstrap, config, plan, reader = _setup(local_kafka, unique_topic, tmp_path)
    _produce(bootstrap["c1"], unique_topic, 200, 2)
    start = reader.initialOffset()
    [task] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))

    settings = transactions.transactional_settings(plan.producers["c2"], plan.deployment_key, "c1", "c2", 0)
    settings.pop("delivery.report.only.error")  # confluent-kafka's own setting, a bool there
    zombie = Producer(settings)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(50):
        zombie.produce(unique_topic, key=f"k{i}".encode(), value=b"never committed", partition=0)
    assert zombie.flush(30) == 0  # written to c2's log, in a transaction left open

    assert run_task(plan, task).copied == 200
    result = _verify_strict(config, unique_topic)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_aborted_transaction_on_a_cluster_never_travels_its_next_hop(local_kafka, unique_topic, tmp_path):
    """Point 3 of issue 35 on the record path itself: c2 holds committed and aborted records
    of one transactional producer (as a fault leaves a hop's copies); c2's own query reads
    read_committed up to the last stable offset, so its task copies the committed ones to c1
    and none of the aborted ones, which c1 then does not hold even for a read_uncommitted reader."""
    bootstrap, config, _, _ = _setup(local_kafka, unique_topic, tmp_path)
    deployment = parse_deployment(yaml.safe_load(config.read_text()), "<test>")
    plan = plan_cluster(deployment, "c2")
    Path(plan.checkpoint).mkdir(parents=True)
    reader = DistributorReader(plan, counters=None)

    txn = Producer({"bootstrap.servers": bootstrap["c2"], "transactional.id": f"test-{unique_topic}"})
    txn.init_transactions(30)
    for outcome, n in (("committed", 20), ("aborted", 30), ("committed", 10)):
        txn.begin_transaction()
        for i in range(n):
            txn.produce(unique_topic, key=f"{outcome}{i}".encode(), value=outcome.encode(), partition=i % 2)
        # flushed first: an abort purges what is still queued, and the aborted records must be in c2's log
        assert txn.flush(30) == 0
        getattr(txn, "commit_transaction" if outcome == "committed" else "abort_transaction")(30)
    assert sorted(_read_uncommitted(bootstrap["c2"], unique_topic, 2)) == [b"aborted"] * 30 + [b"committed"] * 30

    start = reader.initialOffset()
    [task] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    assert run_task(plan, task).copied == 30
    assert sorted(_read_uncommitted(bootstrap["c1"], unique_topic, 2)) == [b"committed"] * 30
    result = _verify_strict(config, unique_topic)
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_deployments_between_the_same_clusters_never_fence_each_other(local_kafka, unique_topic, tmp_path):
    """Deployments a and b (two checkpoint locations) copy c1's topic to c2 at the same time,
    each into its own topic there (topic_format `a-{topic}`, `b-{topic}`). a's transaction is
    held open on c2 while b's whole task runs (b's init_transactions, under the same task index);
    then a commits it and a's task runs. With one transactional.id for both (before
    `deployment_key`), b's init fenced a: a's commit failed (PRODUCER_FENCED). Both verify
    --strict."""
    c1, c2 = local_kafka.bootstrap["c1"], local_kafka.bootstrap["c2"]
    create_topic_everywhere({"c1": c1}, unique_topic, 2)
    create_topic_everywhere({"c2": c2}, f"a-{unique_topic}", 2)
    create_topic_everywhere({"c2": c2}, f"b-{unique_topic}", 2)
    create_topic_everywhere({"c2": c2}, f"held-{unique_topic}", 1)
    _produce(c1, unique_topic, 300, 2)
    configs, plans, tasks = {}, {}, {}
    for name in ("a", "b"):
        spec = local_deployment({"c1": c1, "c2": c2}, topics=[unique_topic],
                                checkpoint_location=str(tmp_path / name / "ck"), distributor={"delivery": "exactly_once"})
        spec["clusters"]["c2"]["topic_format"] = f"{name}-{{topic}}"
        configs[name] = tmp_path / name / "deployment.yaml"
        configs[name].parent.mkdir()
        configs[name].write_text(yaml.safe_dump(spec))
        plans[name] = plan_cluster(parse_deployment(spec, "<test>"), "c1")
        Path(plans[name].checkpoint).mkdir(parents=True)
        reader = DistributorReader(plans[name], counters=None)
        start = reader.initialOffset()
        [tasks[name]] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    assert plans["a"].deployment_key != plans["b"].deployment_key

    settings = transactions.transactional_settings(plans["a"].producers["c2"], plans["a"].deployment_key, "c1", "c2",
                                                   0)  # a's task 0, as run_task builds it
    settings.pop("delivery.report.only.error")  # confluent-kafka's own setting, a bool there
    held = Producer(settings)
    held.init_transactions(30)
    held.begin_transaction()
    held.produce(f"held-{unique_topic}", value=b"a's transaction, open while b runs")
    assert held.flush(30) == 0

    assert run_task(plans["b"], tasks["b"]).copied == 300
    held.commit_transaction(30)  # not fenced by b
    assert run_task(plans["a"], tasks["a"]).copied == 300

    for name in ("a", "b"):
        result = _verify_strict(configs[name], unique_topic)
        assert result.returncode == 0, f"deployment {name}: {result.stdout}{result.stderr}"


@pytest.fixture(scope="module")
def no_transactions(tmp_path_factory):
    """x1 is an Apache Kafka node whose transaction log can never be created (replication
    factor 3 on one node): it answers metadata, but no InitProducerId. (noida-db runs
    transactions: init, commit, abort, the last stable offset and fencing, probed on
    2026-11-26, so it is not the case here.)"""
    from treedist.local import LocalClusters

    broken = LocalClusters.start(["x1"], tmp_path_factory.mktemp("no-transactions"), engine="kafka",
                                 options={"extra_props": {"transaction.state.log.replication.factor": "3"}})
    try:
        yield broken
    finally:
        broken.stop()


def _until_exit(args: list[str], timeout_s: float = 300) -> tuple[int, str, str]:
    """Run `treedist ARGS` until it exits (at most `timeout_s`); a process that went past its
    preflight is stopped with its JVM."""
    proc = subprocess.Popen([str(TREEDIST), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        out, err = "", "(still running: it went past the check)"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode, out, err


def test_exactly_once_names_a_cluster_without_transactions_and_exits_2(local_kafka, no_transactions, unique_topic,
                                                                        tmp_path):
    bootstrap = {"c1": local_kafka.bootstrap["c1"], "x1": no_transactions.bootstrap["x1"]}
    spec = local_deployment(bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "ck"),
                            distributor={"delivery": "exactly_once"})
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    code, out, err = _until_exit(["run", "-c", str(config)])
    assert code == 2, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "does not support Kafka transactions" in lines[0] and "'x1'" in lines[0], err
    assert "'c1'" not in lines[0], err


def test_a_worker_names_an_answering_cluster_without_transactions_and_exits_2_a_down_one_is_no_reason(
        no_transactions, etcd, unique_topic, tmp_path):
    """`treedist worker` in exactly_once: x1 answers without transactions -> exit 2, one line
    naming it; d1 is down (a closed port) -> not a reason (logged when nothing else stops the
    worker: tests/unit/driver/test_worker_transactions_check.py). (Clusters
    that run transactions pass the same check in tests/e2e/test_exactly_once_control_plane.py.)"""
    import socket

    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{closed.getsockname()[1]}"
        bootstrap = {"x1": no_transactions.bootstrap["x1"], "d1": down}
        spec = local_deployment(bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "ck"),
                                distributor={"delivery": "exactly_once"},
                                control={"etcd": [etcd.client_url], "prefix": f"/treedist-{unique_topic}"})
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        code, out, err = _until_exit(["worker", "-c", str(config), "--name", "w1", "--state-dir", str(tmp_path / "w1"),
                                      "--connect-timeout", "30"], timeout_s=150)
    assert code == 2, out + err
    lines = [line for line in err.splitlines() if line.strip()]  # d1 (down) is not the reason, nor logged after it
    assert len(lines) == 1 and "does not support Kafka transactions" in lines[0] and "'x1'" in lines[0], err
    assert "'d1'" not in lines[0], err
