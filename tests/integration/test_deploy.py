"""What ships in deploy/, checked with what this machine has: the systemd unit (systemd's own
`systemd-analyze verify` where it is installed, and its command line against the real CLI),
the Kubernetes manifests (parsed, their probes pointed at the endpoints a real server answers,
their names and paths the same as the recipe's in docs/operations.md, the preStop hook a real
command), and the Dockerfile's Spark release against the pinned pyspark.

Not done here: building the image (no Docker engine on this project's machines) and applying
the manifests (no Kubernetes cluster); nor running the unit under systemd (no systemd as PID 1).
The probes and the preStop hook on a real spark-submit driver: tests/e2e/test_spark_submit.py.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from treedist.config import parse_deployment
from treedist.local.launcher import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "treedist-worker.service"
TREEDIST = str(Path(sys.executable).parent / "treedist")
PER_QUERY_STOP_S = 10 + 30  # a batch in flight settles (treedist.driver.running), then spark.sql.streaming.stopTimeout


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True, delimiters=("=",))
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def _exec_start() -> list[str]:
    return shlex.split(_unit()["Service"]["ExecStart"])


def _recipe() -> list[str]:
    """The spark-submit command of the Kubernetes recipe in docs/operations.md, as argv."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("### Kubernetes"):text.index("### YARN")]
    block = next(b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "--master k8s://" in b)
    return shlex.split(block.replace("\\\n", " "))


def _conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")


def _manifests() -> dict[str, list[dict]]:
    return {str(path.relative_to(DEPLOY / "kubernetes")): list(yaml.safe_load_all(path.read_text()))
            for path in sorted((DEPLOY / "kubernetes").rglob("*.yaml"))}


def _driver_container() -> tuple[dict, dict]:
    pod = _manifests()["driver-pod.yaml"][0]
    return pod, next(c for c in pod["spec"]["containers"] if c["name"] == "spark-kubernetes-driver")


# -- systemd ---------------------------------------------------------------------------------


def test_the_worker_unit_runs_the_worker_as_its_user_and_stops_it_the_clean_way():
    service = _unit()["Service"]
    assert service["User"] == "treedist" and service["Restart"] == "on-failure"
    assert service["EnvironmentFile"].startswith("/etc/treedist/")  # secrets, not in the unit
    # SIGTERM to the Python driver alone: Spark's JVM (its child) must not run its shutdown hook
    assert (service["KillSignal"], service["KillMode"]) == ("SIGTERM", "mixed")
    assert int(service["TimeoutStopSec"]) >= 4 * PER_QUERY_STOP_S  # a worker running a 4-cluster tree's queries
    assert int(service["LimitNOFILE"]) >= 65536
    assert service["RestartPreventExitStatus"] == "2"  # bad input: restarting does not fix it
    # hardening that leaves Spark a /tmp, a writable state dir and a JIT
    assert service["PrivateTmp"] == "yes" and service["StateDirectory"] == "treedist"
    assert service["ProtectSystem"] == "strict" and "MemoryDenyWriteExecute" not in service


def test_the_units_command_line_is_a_real_worker_command_whose_flags_exist():
    argv = _exec_start()
    assert Path(argv[0]).name == "treedist" and argv[1] == "worker"
    assert argv[argv.index("-c") + 1] == "/etc/treedist/deploy.yaml" and argv[argv.index("--name") + 1] == "%H"
    helped = subprocess.run([TREEDIST, "worker", "--help"], capture_output=True, text=True, timeout=120,
                            env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL)
    assert helped.returncode == 0, helped.stderr
    flags = [arg for arg in argv[2:] if arg.startswith("-")]
    assert [f for f in flags if f not in helped.stdout] == [] and "--status-port" in flags
    # the same line, %H as systemd expands it: every flag parses, the missing file is what stops it
    line = [TREEDIST, *(arg.replace("%H", socket.gethostname()) for arg in argv[1:])]
    ran = subprocess.run(line, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert ran.returncode == 2 and "No such option" not in ran.stderr, ran.stderr
    assert "/etc/treedist/deploy.yaml" in ran.stderr or Path("/etc/treedist/deploy.yaml").exists(), ran.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path):
    # verify checks that ExecStart's program exists: point it at this venv's treedist
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(_exec_start()[0], TREEDIST))
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    # it exits 0 on unknown keys and bad values too, with a line each
    assert result.returncode == 0 and (result.stdout + result.stderr).strip() == "", result.stdout + result.stderr


# -- Kubernetes -----------------------------------------------------------------------------


def test_every_manifest_parses_and_names_its_kind():
    manifests = _manifests()
    assert {"driver-pod.yaml", "cluster/namespace.yaml", "cluster/rbac.yaml", "cluster/checkpoints-pvc.yaml",
            "cluster/deployment-configmap.yaml"} <= set(manifests)
    kinds = {doc["kind"] for docs in manifests.values() for doc in docs}
    assert kinds == {"Pod", "Namespace", "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim", "ConfigMap"}
    for name, docs in manifests.items():
        for doc in docs:
            assert doc["apiVersion"] and (doc["kind"] == "Pod" or doc["metadata"]["name"]), name
            if doc["kind"] not in ("Pod", "Namespace"):
                assert doc["metadata"]["namespace"] == "treedist", name


def test_the_recipe_uses_the_manifests_names_and_paths():
    argv, manifests = _recipe(), _manifests()
    conf = _conf(argv)
    assert conf["spark.kubernetes.driver.podTemplateFile"] == "deploy/kubernetes/driver-pod.yaml"
    assert conf["spark.kubernetes.driver.podTemplateContainerName"] == "spark-kubernetes-driver"
    assert conf["spark.kubernetes.namespace"] == "treedist"
    accounts = [d["metadata"]["name"] for d in manifests["cluster/rbac.yaml"] if d["kind"] == "ServiceAccount"]
    assert [conf["spark.kubernetes.authenticate.driver.serviceAccountName"]] == accounts
    binding = next(d for d in manifests["cluster/rbac.yaml"] if d["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == accounts[0]
    claim = manifests["cluster/checkpoints-pvc.yaml"][0]["metadata"]["name"]
    assert conf["spark.kubernetes.driver.volumes.persistentVolumeClaim.cp.options.claimName"] == claim
    # the deployment: mounted where the command reads it, its checkpoints on the claim
    pod, container = _driver_container()
    mount = next(m for m in container["volumeMounts"] if m["name"] == "deployment")
    entry = argv.index("local:///opt/treedist/scripts/treedist-submit.py")
    assert argv[argv.index("-c", entry) + 1] == mount["mountPath"]
    configmap = manifests["cluster/deployment-configmap.yaml"][0]
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "deployment")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    deployment = parse_deployment(yaml.safe_load(configmap["data"][mount["subPath"]]), source="configmap", resolve=False)
    mounted = conf["spark.kubernetes.driver.volumes.persistentVolumeClaim.cp.mount.path"]
    assert deployment.checkpoint_location.startswith(mounted + "/")
    secrets = conf["spark.kubernetes.driver.secrets.treedist-secrets"]
    assert f"${{file:{secrets}/" in configmap["data"]["deploy.yaml"]  # passwords by reference to the Secret
    # the container's memory is what Spark sets: driver memory + overhead
    memory_mib = int(argv[argv.index("--driver-memory") + 1].removesuffix("m"))
    overhead_mib = int(conf["spark.driver.memoryOverhead"].removesuffix("g")) * 1024
    assert container["resources"]["limits"]["memory"] == f"{memory_mib + overhead_mib}Mi"


def test_the_probes_are_on_the_status_port_of_the_command_and_answer_there(tmp_path):
    from treedist.ops.probes import app_readiness
    from treedist.ops.snapshot import StatusSource
    from treedist.ops.web import StatusServer

    from tests.fixtures.deployments import unreachable_deployment

    argv = _recipe()
    _, container = _driver_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["status"] == int(argv[argv.index("--status-port") + 1])
    assert ports["metrics"] == int(argv[argv.index("--metrics-port") + 1])
    assert argv[argv.index("--bind") + 1] == "0.0.0.0"  # kubelet reaches the pod's address, not its loopback
    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {kind: probe["port"] for kind, probe in probes.items()} == dict.fromkeys(probes, "status")
    assert [probes["startupProbe"]["path"], probes["livenessProbe"]["path"], probes["readinessProbe"]["path"]] == \
        ["/healthz", "/healthz", "/readyz"]
    # the paths on a real status server of `treedist run --status-port` (a deployment whose
    # clusters do not answer, nothing started: alive, not ready)
    config = unreachable_deployment(tmp_path)
    deployment = parse_deployment(yaml.safe_load(config.read_text()), source=str(config))
    server = StatusServer(StatusSource(deployment), free_port(), app_readiness(None, deployment, started=lambda: False)).start()
    try:
        with httpx.Client(timeout=30) as client:
            answers = {kind: client.get(f"http://127.0.0.1:{server.port}{probe['path']}") for kind, probe in probes.items()}
    finally:
        server.stop()
    assert answers["livenessProbe"].status_code == 200 and answers["startupProbe"].status_code == 200
    assert answers["readinessProbe"].status_code == 503
    assert answers["readinessProbe"].json()["reasons"][0].startswith("starting")


def test_the_pre_stop_hook_is_a_real_command_that_waits_less_than_the_grace_period():
    pod, container = _driver_container()
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert f"PYSPARK_DRIVER_PYTHON={command[0]}" in dockerfile  # the driver's own interpreter in the image
    assert command[1:3] == ["-m", "treedist.prestop"]
    timeout = float(command[command.index("--timeout") + 1])
    assert timeout + 10 < pod["spec"]["terminationGracePeriodSeconds"]
    # the same module and flags here, looking under a process that runs no driver
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        ran = subprocess.run([sys.executable, *command[1:], "--under", str(sleeper.pid)], capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert ran.returncode == 0 and "nothing to stop" in ran.stdout, ran.stdout + ran.stderr


# -- the image ------------------------------------------------------------------------------


def test_the_dockerfile_takes_spark_from_the_release_of_the_pinned_pyspark():
    """Docker cannot build here (no engine): the tag is checked instead."""
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    tag = re.search(r"^ARG SPARK_IMAGE=apache/spark:(\S+)$", dockerfile, re.M).group(1)
    version, _, variant = tag.partition("-")
    assert variant == "scala2.13-java17-python3-ubuntu"  # the official image's naming; Java 17 as installed below
    assert "openjdk-17-jre-headless" in dockerfile
    pinned = re.search(r"^pyspark==([0-9][0-9.]*)", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned is not None, "constraints.txt pins no pyspark"
    assert version == pinned.group(1) == importlib.metadata.version("pyspark")
