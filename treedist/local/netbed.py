"""A multi-host test bed on one machine: hosts are network namespaces joined by veth pairs on a
bridge (iproute2), each with its own address and its own loopback (runs on the machine that
starts it, as root; for tests and for trying treedist on a real Spark cluster).

Hosts (addresses on `subnet`, by default 10.77.0.0/24; the bridge itself has `.1`, so the
machine's own namespace, where the tests run, reaches every host):

| host    | address | runs |
|---------|---------|------|
| master  | .10     | the Spark standalone master (RPC 7077, web UI and REST status 8080) |
| worker1 | .11     | a Spark standalone worker (1 core, 1 GiB for executors) |
| worker2 | .12     | another one |
| kafka   | .20     | the local Kafka clusters (treedist.local.launcher bound to this address) |
| driver  | .30     | nothing at start: the treedist driver or `treedist worker` is run here by the caller |

No host reaches another through loopback: each namespace has its own `lo`, and every service
binds and advertises its host's address. Each namespace has a default route through the
bridge, so "the address of the interface of the default route" means something inside it.

Steps of `up` (each registered for teardown before the next, so a failure part-way tears down
what was made):
1. leftovers of an earlier run with the same `prefix` are torn down (its processes killed by
   PID, its namespaces and links deleted: only names starting with the prefix);
2. the bridge `<prefix>-br` and, per host, namespace `<prefix>-<host>` and a veth pair
   (`<prefix>-<host>` on the bridge, `eth0` inside);
3. the Spark master, then the two workers, waited on until both are ALIVE at the master;
4. the Kafka clusters, started by this module's `kafka-up` entry run inside the kafka host.
Every PID is written to `<base_dir>/netbed.json` as soon as it exists; `down` (or a later
`up`) stops them by PID, never by name.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import live_cmdline, pid_alive, stop_all
from treedist.local.spark_standalone import MASTER_CLASS, WORKER_CLASS, MasterAddress, wait_for
from treedist.local.statefile import read_state, write_state

STATE_FILE = "netbed.json"
DEFAULT_PREFIX = "tdnb"
DEFAULT_SUBNET = "10.77.0.0/24"
# host -> last octet of its address (the bridge is .1)
HOSTS = {"master": 10, "worker1": 11, "worker2": 12, "kafka": 20, "driver": 30}
SPARK_WORKERS = ("worker1", "worker2")
MASTER_PORT, MASTER_UI_PORT, WORKER_UI_PORT = 7077, 8080, 8081
# The standalone daemons only schedule: small heaps, C1 only (2 cores shared with Kafka,
# executors and the driver).
DAEMON_JVM = ["-Xms32m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
READY_TIMEOUT_S = 180.0
IP_TIMEOUT_S = 30.0


class NetBedError(LocalClusterError):
    """The bed could not be built (no `ip netns`, not root, a daemon that did not start)."""


def netns_unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can (tries one and removes it)."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "not root: `ip netns add` needs CAP_SYS_ADMIN and CAP_NET_ADMIN"
    probe = f"tdprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip() or made.returncode}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=IP_TIMEOUT_S)
    return None


def spark_home() -> Path:
    """PySpark's package directory: its `jars/` are Spark's, as SPARK_HOME expects."""
    try:
        import pyspark
    except ImportError:
        raise NetBedError("pyspark is not installed") from None
    return Path(pyspark.__file__).resolve().parent


def scala_version() -> str:
    """The Scala version of PySpark's jars (`spark-core_2.13-*.jar` -> 2.13)."""
    for jar in (spark_home() / "jars").glob("spark-core_*.jar"):
        return jar.name.split("_", 1)[1].split("-", 1)[0]
    raise NetBedError(f"no spark-core jar in {spark_home() / 'jars'}")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run("ip", args, check)


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run("tc", args, check)


def set_rate(where: list[str], dev: str, rate_mbit: float | None) -> None:
    """Cap device `dev` (in the namespace `where` names: [] or ["-n", ns]) at `rate_mbit` with a
    root tbf, or remove the cap (None)."""
    if rate_mbit is None:
        _tc(*where, "qdisc", "del", "dev", dev, "root", check=False)
    else:  # burst: at least rate/HZ (one timer tick's worth), or tbf cannot reach the rate
        burst = max(64 * 1024, int(rate_mbit * 1e6 / 8 / 100))
        _tc(*where, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate_mbit}mbit",
            "burst", str(burst), "latency", "200ms")


def _run(tool: str, args, check: bool) -> subprocess.CompletedProcess:
    proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise NetBedError(f"{tool} {' '.join(args)}: {proc.stderr.strip()}")
    return proc


@dataclass
class Process:
    host: str
    role: str
    pid: int
    log_file: str
    marker: str  # a string its command line holds: a recorded PID reused by another process is not ours

    def is_ours(self) -> bool:
        args = live_cmdline(self.pid)
        return args is not None and self.marker in " ".join(args)


@dataclass
class NetBed:
    """A bed's names, addresses and processes; `state` is what `netbed.json` holds."""

    base_dir: str
    prefix: str = DEFAULT_PREFIX
    subnet: str = DEFAULT_SUBNET
    processes: list[Process] = field(default_factory=list)
    kafka_dir: str | None = None
    bootstrap: dict[str, str] = field(default_factory=dict)

    # -- names and addresses ------------------------------------------------------------

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        net = ipaddress.ip_network(self.subnet)
        return str(net.network_address + (1 if host == "bridge" else HOSTS[host]))

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    @property
    def master(self) -> MasterAddress:
        """The Spark master, on the `master` host."""
        return MasterAddress(self.address("master"), MASTER_PORT, MASTER_UI_PORT)

    # -- state file ----------------------------------------------------------------------

    def save(self) -> None:
        write_state(self.base_dir, STATE_FILE, asdict(self))

    @classmethod
    def load(cls, base_dir: str | Path) -> "NetBed | None":
        raw = read_state(base_dir, STATE_FILE)
        if raw is None:
            return None
        return cls(**{**raw, "processes": [Process(**p) for p in raw.get("processes", [])]})

    # -- processes -----------------------------------------------------------------------

    def spawn(self, host: str, argv: list[str], role: str, marker: str, env: dict[str, str] | None = None,
              cwd: str | None = None) -> Process:
        """Start `argv` inside `host` (`ip netns exec` execs it: the PID is the command's own), in
        a session of its own, output to `<base_dir>/<role>.log`; recorded at once."""
        log_file = Path(self.base_dir) / f"{role}.log"
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *argv], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)
        started = Process(host, role, proc.pid, str(log_file), marker)
        self.processes.append(started)
        self.save()
        return started

    def pids(self, host: str) -> list[int]:
        """Every process in the host's namespace (ours and their children: executors, Python workers)."""
        out = _ip("netns", "pids", self.ns(host), check=False).stdout
        return [int(p) for p in out.split()]

    def rss_bytes(self, host: str) -> int:
        """The summed resident memory of the host's processes now."""
        total = 0
        for pid in self.pids(host):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                continue  # it exited between the listing and the read
        return total

    # -- up and down ---------------------------------------------------------------------

    def up(self, clusters: list[str] | None = None, worker_memory: str = "1g") -> "NetBed":
        """Steps 1-4 of the module's docstring. On any failure everything made is torn down."""
        clusters = clusters or ["c1", "c2", "c3", "c4"]
        teardown_prefix(self.prefix, self.base_dir)  # step 1
        Path(self.base_dir).mkdir(parents=True, exist_ok=True)
        self.save()
        try:
            self._network()  # step 2
            self._spark(worker_memory)  # step 3
            self._kafka(clusters)  # step 4
        except BaseException:
            self.down()
            raise
        return self

    def _network(self) -> None:
        prefixlen = ipaddress.ip_network(self.subnet).prefixlen
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.address('bridge')}/{prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in HOSTS:
            ns, outside = self.ns(host), self.ns(host)
            _ip("netns", "add", ns)
            _ip("link", "add", outside, "type", "veth", "peer", "name", f"{self.prefix}-in")
            _ip("link", "set", f"{self.prefix}-in", "netns", ns)
            _ip("-n", ns, "link", "set", f"{self.prefix}-in", "name", "eth0")
            _ip("link", "set", outside, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/{prefixlen}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "route", "add", "default", "via", self.address("bridge"))

    def _spark_env(self, host: str) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            env.pop(key, None)  # the caller's loopback choice must not leak into a host
        env.update({
            # What bin/load-spark-env.sh exports: without it a worker cannot build an
            # executor's command ("Cannot find any build directories").
            "SPARK_HOME": str(spark_home()), "SPARK_SCALA_VERSION": scala_version(),
            "SPARK_LOCAL_IP": self.address(host),
            "SPARK_WORKER_DIR": str(Path(self.base_dir) / f"{host}-work"),
        })
        return env

    def _spark_cmd(self, main_class: str, args: list[str]) -> list[str]:
        from treedist.local.kafka_dist import java

        return [java(), *DAEMON_JVM, "-cp", str(spark_home() / "jars" / "*"), main_class, *args]

    def _spark(self, worker_memory: str) -> None:
        master = self.address("master")
        self.spawn("master", self._spark_cmd(MASTER_CLASS, ["--host", master, "--port", str(MASTER_PORT),
                                                            "--webui-port", str(MASTER_UI_PORT)]),
                   "spark-master", MASTER_CLASS, env=self._spark_env("master"), cwd=self.base_dir)
        _wait(lambda: self.master.status() is not None, self.processes[-1], "the Spark master to answer")
        for host in SPARK_WORKERS:
            self.start_worker(host, worker_memory, wait=False)
        self._wait_workers(SPARK_WORKERS)

    def start_worker(self, host: str, memory: str = "1g", wait: bool = True) -> Process:
        """Start the Spark worker of `host` (again, after `kill_host`), by default waiting until
        the master has it ALIVE."""
        work = Path(self.base_dir) / f"{host}-work"
        work.mkdir(parents=True, exist_ok=True)
        started = self.spawn(host, self._spark_cmd(WORKER_CLASS, [self.master.url, "--host", self.address(host),
                                                                  "--webui-port", str(WORKER_UI_PORT), "--cores", "1",
                                                                  "--memory", memory, "--work-dir", str(work)]),
                             f"spark-{host}", WORKER_CLASS, env=self._spark_env(host), cwd=str(work))
        if wait:
            self._wait_workers([host])
        return started

    def _wait_workers(self, hosts) -> None:
        wanted = {self.address(h) for h in hosts}
        _wait(lambda: wanted <= {w.get("host") for w in (self.master.status() or {}).get("workers", [])
                                 if w.get("state") == "ALIVE"},
              self.processes[-1], f"the Spark workers of {sorted(hosts)} to register with the master")

    # -- faults --------------------------------------------------------------------------

    def kill_host(self, host: str) -> list[int]:
        """SIGKILL every process of `host` at once (a host lost: its daemon, executors and
        Python workers die without a word). Returns the PIDs killed."""
        pids = self.pids(host)
        for pid in pids:  # SIGKILL only, no SIGTERM first: nothing gets to clean up
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def set_link(self, host: str, up: bool) -> None:
        """Take the host's link to the bridge down (nothing reaches it, it reaches nothing) or
        bring it back up."""
        _ip("link", "set", self.ns(host), "up" if up else "down")

    def limit_link(self, host: str, rate_mbit: float | None) -> None:
        """Limit the host's link to `rate_mbit` each way (tbf on both ends of its veth pair), or
        lift the limit (None). This kernel has tbf but not netem: delay comes from the WAN proxy
        (treedist.local.wanproxy; `WanProxy.start(..., prefix=["ip", "netns", "exec", ns])`
        runs it inside a host)."""
        for where in ([], ["-n", self.ns(host)]):
            set_rate(where, self.ns(host) if not where else "eth0", rate_mbit)

    def _kafka(self, clusters: list[str]) -> None:
        """Run `kafka-up` inside the kafka host: the launcher's free ports, binds and readiness
        checks must see that host's address. It exits once every broker answers; the brokers
        (own sessions) stay."""
        self.kafka_dir = str(Path(self.base_dir) / "kafka")
        self.save()
        argv = [sys.executable, "-m", "treedist.local.netbed", "kafka-up", "--dir", self.kafka_dir,
                "--host", self.address("kafka"), *clusters]
        proc = subprocess.run(["ip", "netns", "exec", self.ns("kafka"), *argv], capture_output=True, text=True,
                              timeout=600)
        self._record_brokers()
        if proc.returncode != 0:
            raise NetBedError(f"the Kafka clusters did not start on {self.ns('kafka')}: {(proc.stdout + proc.stderr)[-1500:]}")
        self.save()

    def _record_brokers(self) -> None:
        from treedist.local.local_clusters import LocalClusters

        started = LocalClusters.load(self.kafka_dir) if self.kafka_dir else None
        if started is None:
            return
        self.bootstrap = started.bootstrap
        for broker in started.brokers.values():
            if not any(p.pid == broker.pid for p in self.processes):
                self.processes.append(Process("kafka", f"kafka-{broker.name}", broker.pid, broker.log_file,
                                              str(Path(broker.data_dir) / "server.properties")))
        self.save()

    def down(self, grace: float = 30.0) -> None:
        """Stop every recorded process that is still ours (by PID, all at once, SIGKILL after
        `grace`), then whatever else still runs in the bed's namespaces (executors, drivers
        the caller started there), then delete namespaces, veth pairs and the bridge."""
        self._record_brokers()  # a failed kafka-up may have left a state file with PIDs
        stop_all([p.pid for p in self.processes if p.is_ours()], grace)
        teardown_prefix(self.prefix, None)

    def status(self) -> dict:
        return {
            "prefix": self.prefix, "subnet": self.subnet, "master": self.master.url, "master_ui": self.master.ui,
            "bootstrap": self.bootstrap,
            "hosts": {h: {"namespace": self.ns(h), "address": self.address(h),
                          "exists": self.ns(h) in _namespaces(self.prefix)} for h in HOSTS},
            "processes": [{**asdict(p), "running": p.is_ours()} for p in self.processes],
        }


def _namespaces(prefix: str) -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(prefix + "-")]


def teardown_prefix(prefix: str, base_dir: str | None, grace: float = 10.0) -> None:
    """Remove what a bed named `prefix` left: the processes recorded in `base_dir`'s state file
    (by PID, if still theirs), every process still inside one of its namespaces (they can only
    be the bed's), the namespaces, and links whose names start with `<prefix>-`. Only names
    with that prefix are touched."""
    if base_dir is not None:
        old = NetBed.load(base_dir)
        if old is not None and old.prefix == prefix:
            stop_all([p.pid for p in old.processes if p.is_ours()], grace)
    namespaces = _namespaces(prefix)
    inside = [int(pid) for ns in namespaces for pid in _ip("netns", "pids", ns, check=False).stdout.split()]
    _kill(inside, grace)
    for ns in namespaces:
        _ip("netns", "del", ns, check=False)
    links = _ip("-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(prefix + "-"):
            _ip("link", "del", name, check=False)


def _kill(pids: list[int], grace: float) -> None:
    """SIGTERM each process itself (executors and Python workers lead no group of their own),
    SIGKILL those left after `grace`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if pid_alive(p)]
        if not pids:
            return


def _wait(predicate, process: Process, what: str, timeout: float = READY_TIMEOUT_S) -> None:
    wait_for(predicate, timeout, process.pid, process.role, process.log_file, what, error=NetBedError)


def _kafka_up(argv: list[str]) -> int:
    """Entry run inside the kafka host: start the named clusters bound to --host."""
    import argparse

    from treedist.local.local_clusters import LocalClusters

    parser = argparse.ArgumentParser(prog="netbed kafka-up")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("clusters", nargs="+")
    args = parser.parse_args(argv)
    started = LocalClusters.start(args.clusters, args.dir, engine="kafka", host=args.host)
    print(json.dumps(started.bootstrap))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`scripts/netbed up|down|status [--dir D] [--prefix P] [--subnet S]`."""
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kafka-up"]:
        return _kafka_up(argv[1:])
    parser = argparse.ArgumentParser(prog="netbed", description="The multi-host test bed (treedist.local.netbed).")
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", default=".treedist/netbed", help="state file, logs and Kafka data")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help="names of namespaces and links start with PREFIX-")
    parser.add_argument("--subnet", default=DEFAULT_SUBNET)
    parser.add_argument("--clusters", type=int, default=4, help="Kafka clusters c1..cN on the kafka host")
    args = parser.parse_args(argv)
    base = str(Path(args.dir).resolve())
    try:
        if args.command == "up":
            reason = netns_unavailable()
            if reason:
                raise NetBedError(reason)
            bed = NetBed(base, args.prefix, args.subnet).up([f"c{i}" for i in range(1, args.clusters + 1)])
            print(json.dumps(bed.status(), indent=2))
        elif args.command == "down":
            bed = NetBed.load(base)
            if bed is not None:
                bed.down()
            else:
                teardown_prefix(args.prefix, None)
            print(f"bed {args.prefix} torn down")
        else:
            bed = NetBed.load(base)
            if bed is None:
                print(f"no bed recorded in {base}", file=sys.stderr)
                return 1
            print(json.dumps(bed.status(), indent=2))
    except LocalClusterError as err:
        print(f"netbed: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
