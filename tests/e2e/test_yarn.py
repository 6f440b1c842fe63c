"""The YARN recipe of docs/operations.md, run for real: PySpark's bin/spark-submit with
`--master yarn` on a MiniYARNCluster (tests/fixtures/yarn.py) beside a MiniDFSCluster
(tests/fixtures/hdfs.py), scripts/treedist-submit.py on 2 local Kafka clusters, checkpoints on
hdfs://, the venv packed by `treedist pack-env` and shipped with `spark.archives` (issue 33
point 5).

Invariants, in client and in cluster deploy mode: every record reaches both clusters once;
the application is the ResourceManager's (`/ws/v1/cluster/apps`: RUNNING while it copies);
its two executors (Spark's executor list) run in the NodeManager's containers, whose Python
workers run `./environment/bin/python` from the unpacked archive, not the driver's venv;
SIGTERM to the Python driver stops it cleanly: spark-submit exits 0 and YARN records the
application FINISHED / SUCCEEDED. In cluster mode the Python driver itself runs in the
ApplicationMaster's container, on the shipped environment too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

import pyspark
from treedist.config import parse_deployment
from treedist.local import free_port
from treedist.local.deployment import local_deployment
from treedist.ops.checkpoint import recent_batches
from treedist.spark.checkpoint_fs import join

from tests.e2e.test_spark_standalone import _tree
from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_until_complete
from tests.fixtures.yarn import Yarn, yarn  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2"]
PARTITIONS = 2
ENTRY = Path(__file__).resolve().parents[2] / "scripts" / "treedist-submit.py"
SPARK_HOME = Path(pyspark.__file__).parent
TREEDIST = Path(sys.executable).with_name("treedist")


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory) -> Path:
    archive = tmp_path_factory.mktemp("env") / "treedist-env.tar.gz"
    packed = subprocess.run([str(TREEDIST), "pack-env", "-o", str(archive),
                             "--exclude", "*/site-packages/playwright/*"], capture_output=True, text=True, timeout=600)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    return archive


def _own_processes() -> dict[int, tuple[str, Path]]:
    """pid -> (argv[0], working directory) of every process we may read."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv0 = (proc / "cmdline").read_bytes().split(b"\0")[0].decode()
            found[int(proc.name)] = (argv0, (proc / "cwd").resolve())
        except (OSError, ValueError):
            continue
    return found


def _in_containers(yarn: Yarn, app_id: str) -> dict[int, tuple[str, Path]]:
    """The processes whose working directory is one of the application's containers."""
    dirs = {d.resolve() for d in yarn.container_dirs(app_id)}
    return {pid: (argv0, cwd) for pid, (argv0, cwd) in _own_processes().items() if cwd in dirs}


def _loaded_confluent_kafka(pid: int) -> str | None:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return next((line.split()[-1] for line in maps.splitlines() if "/confluent_kafka/" in line), None)


def _wait(predicate, timeout: float, alive, what: str):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        alive()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1.0)
    return found


def _submit(yarn: Yarn, hdfs, archive: Path, local_kafka, tmp_path: Path, mode: str):  # noqa: F811
    """Steps: write the deployment (checkpoints on HDFS), spark-submit it to YARN in `mode`,
    wait for each query's first batch, produce, verify; check the application on YARN and its
    executors and Python workers in containers; SIGTERM the Python driver; spark-submit exits
    0 and YARN says SUCCEEDED."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    topic = f"yarn-{mode}-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere(bootstrap, topic, PARTITIONS)
    root = hdfs.location(f"yarn-{mode}")
    name = f"treedist-yarn-{mode}"
    ui = free_port()
    spec = local_deployment(
        bootstrap, topics=[topic], checkpoint_location=root,
        distributor={"trigger_interval": "500 milliseconds"},
        spark={"master": "local[1]", "app_name": name,  # spark-submit's master is used, not this one
               "conf": {"spark.ui.enabled": "true", "spark.ui.port": str(ui), **hdfs.spark_conf()}})
    spec["topics"]["sync"] = {"enabled": False}
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "HADOOP_CONF_DIR": str(yarn.conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": "./environment/bin/python", "COLUMNS": "200"}
    if mode == "client":
        # The driver runs here and starts Python processes of its own (the data sources'
        # planners) with the same PYSPARK_PYTHON, from its working directory (the recipe's link).
        (tmp_path / "environment").symlink_to(sys.prefix)
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        args = [str(ENTRY), "-c", str(config)]
    else:
        # YARN names the application when spark-submit submits it, before the driver reads
        # the deployment's spark.app_name
        # spark-submit hands a PYSPARK_DRIVER_PYTHON of its own environment (here: set by earlier
        # tests in this process) to the ApplicationMaster, where it wins over PYSPARK_PYTHON:
        # the recipe names the shipped one for both
        env.pop("PYSPARK_DRIVER_PYTHON", None)
        args = ["--name", name, "--files", str(config),
                "--conf", "spark.yarn.appMasterEnv.PYSPARK_PYTHON=./environment/bin/python",
                "--conf", "spark.yarn.appMasterEnv.PYSPARK_DRIVER_PYTHON=./environment/bin/python",
                str(ENTRY), "-c", config.name]
    output = tmp_path / "spark-submit.txt"
    with output.open("w") as out:
        submit = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "yarn", "--deploy-mode", mode,
             "--conf", f"spark.archives={archive}#environment",
             "--conf", "spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python",
             # Spark's jars are on this (every NodeManager's) host: not uploaded per application
             "--conf", f"spark.yarn.jars=local:{SPARK_HOME / 'jars'}/*",
             "--conf", "spark.executor.instances=2", "--conf", "spark.executor.cores=1",
             "--conf", "spark.executor.memory=512m", "--driver-memory", "512m", *args],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    app_id = None
    try:
        def alive() -> None:
            assert submit.poll() is None, output.read_text()[-4000:]

        apps = _wait(lambda: [a for a in yarn.apps() if a["name"] == name and a["state"] == "RUNNING"], 240, alive,
                     "the application RUNNING on YARN")
        app_id = apps[0]["id"]
        store = hdfs.store()
        _wait(lambda: all(recent_batches(join(root, "messages", c), 0.0, time.time(), store=store) for c in CLUSTERS),
              240, alive, "both queries' first batch")
        total = produce_concurrently(bootstrap, topic, 150, PARTITIONS)
        report = wait_until_complete(parse_deployment(spec), topic, timeout=240, check=alive)
        assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                   for c in report.clusters), report

        running = [a for a in yarn.apps() if a["state"] == "RUNNING"]
        assert [(a["id"], a["applicationType"]) for a in running] == [(app_id, "SPARK")], running
        # Spark's executor list (the driver's REST API; in cluster mode through YARN's proxy)
        base = (f"http://127.0.0.1:{ui}" if mode == "client" else f"http://{yarn.webapp}/proxy/{app_id}")
        with urllib.request.urlopen(f"{base}/api/v1/applications/{app_id}/executors", timeout=30) as answer:
            executors = [e for e in json.loads(answer.read()) if e["id"] != "driver" and e["isActive"]]
        assert len(executors) == 2, executors
        assert all("/containerlogs/container_" in e["executorLogs"]["stdout"] for e in executors), executors
        # their Python workers run the shipped environment, in the application's containers
        processes = _in_containers(yarn, app_id)
        workers = {pid: argv0 for pid, (argv0, _) in processes.items() if _loaded_confluent_kafka(pid)}
        assert workers and set(workers.values()) == {"./environment/bin/python"}, processes
        for pid in workers:
            loaded = _loaded_confluent_kafka(pid)
            assert loaded.startswith(str(yarn.work_dir.resolve())) and not loaded.startswith(sys.prefix), loaded
        # the Python driver: spark-submit's child in client mode, the ApplicationMaster's in cluster mode
        drivers = [pid for pid in _tree(submit.pid) | set(processes) if _is_python_entry(pid)]
        assert len(drivers) == 1, drivers
        if mode == "cluster":  # the Python driver runs in the ApplicationMaster's container
            assert drivers[0] in processes, (drivers, processes)

        os.kill(drivers[0], signal.SIGTERM)
        code = submit.wait(timeout=180)
    finally:
        if submit.poll() is None:
            os.killpg(submit.pid, signal.SIGKILL)
            submit.wait()
            if app_id is not None:  # in cluster mode the application outlives spark-submit
                yarn.kill(app_id)
    text = output.read_text()
    assert code == 0, text[-4000:]
    final = _wait(lambda: [a for a in yarn.apps() if a["id"] == app_id and a["state"] == "FINISHED"], 60,
                  lambda: None, "YARN to record the application FINISHED")
    assert final[0]["finalStatus"] == "SUCCEEDED", final


def _is_python_entry(pid: int) -> bool:
    """Whether `pid` is a Python process running the entry point (the JVMs name it too)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return False
    return Path(argv[0]).name.startswith("python") and any(a.endswith(ENTRY.name) for a in argv)


def test_spark_submit_to_yarn_in_client_mode_copies_every_record_on_containers(
        yarn, hdfs, packed_env, local_kafka, tmp_path):  # noqa: F811
    _submit(yarn, hdfs, packed_env, local_kafka, tmp_path, "client")


def test_spark_submit_to_yarn_in_cluster_mode_runs_the_driver_in_the_application_master(
        yarn, hdfs, packed_env, local_kafka, tmp_path):  # noqa: F811
    _submit(yarn, hdfs, packed_env, local_kafka, tmp_path, "cluster")
