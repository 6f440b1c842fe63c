"""CPU and memory of process trees, read from /proc (Linux), sampled in a background thread.

A tree is a root PID and all its descendants. Children are sampled periodically, so the CPU
of a process that exits between two samples is counted up to its last sample (Spark's Python
workers are long-lived; the short-lived ones are a few ms each). Processes can be left out
of a tree (the local brokers, which are children of the benchmark process but not part of
what is measured).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from treedist.ops.procstat import all_processes as _all

_TICK = os.sysconf("SC_CLK_TCK")
_SPAWNED = ("spark-jvm", "driver-or-other", "gone")  # a JVM child that is not one of Spark's Python processes


def stop_group(proc: subprocess.Popen, first_wait: float) -> int | None:
    """Stop a contender started in its own process group, by PID only: SIGINT to the group
    (a clean stop, up to `first_wait` seconds), then SIGTERM (20 s), then SIGKILL (10 s);
    returns its exit code (None if it outlived them all)."""
    for sig, wait in ((signal.SIGINT, first_wait), (signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.returncode


def pss(pid: int) -> int:
    """Proportional set size in bytes (each shared page divided among the processes that map
    it), 0 for a gone process: summed over processes it is their real memory use."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree(root: int, procs: dict[int, tuple[int, float, int]], exclude: set[int] = frozenset()) -> set[int]:
    """`root` and its descendants in a snapshot, minus `exclude` and their descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in exclude or pid not in procs:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def kind(pid: int) -> str:
    """What a process of treedist's tree is, from its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "java" in cmd.split(" ")[0]:
        return "spark-jvm"
    for marker, label in (("python_streaming_source_runner", "python-planner"), ("pyspark.worker", "python-executor"),
                          ("pyspark.sql.worker", "python-spark-other"), ("pyspark.daemon", "python-spark-other"),
                          ("noida-db", "broker")):
        if marker in cmd:
            return label
    return "driver-or-other"


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / _TICK


@dataclass
class Window:
    """CPU seconds per tree (and the machine) between two marks."""

    seconds: float
    cpu: dict[str, float]
    machine_busy: float

    def as_dict(self) -> dict:
        return {
            "seconds": round(self.seconds, 3),
            "cpu_seconds": {k: round(v, 3) for k, v in self.cpu.items()},
            "machine_busy_cpu_seconds": round(self.machine_busy, 3),
            "other_processes_cpu_seconds": round(max(0.0, self.machine_busy - sum(self.cpu.values())), 3),
            "machine_busy_fraction": round(self.machine_busy / (self.seconds * (os.cpu_count() or 1)), 3) if self.seconds else None,
        }


@dataclass
class TreeMeter:
    """Samples named process trees every `interval` seconds: CPU per tree, peak RSS per tree."""

    roots: dict[str, int]
    exclude: set[int] = field(default_factory=set)
    interval: float = 0.25
    _cpu: dict[str, dict[int, float]] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)
    history: list[tuple[float, dict[str, float], float]] = field(default_factory=list)  # (time, cpu per tree, machine busy)
    kind_history: list[tuple[float, dict[str, dict[str, float]]]] = field(default_factory=list)  # (time, tree -> kind -> cpu)
    kinds: dict[int, str] = field(default_factory=dict)
    peak_rss_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)  # at each tree's peak
    peak_count_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)  # processes of each kind then
    # The peak as first measured: spawn clones of the JVM included (see `_spawn_clones`).
    peak_rss_with_clones: dict[str, int] = field(default_factory=dict)
    spawn_clones_seen: int = 0
    measure_pss: bool = False  # also the peak of the summed PSS (reads smaps_rollup: slower)
    peak_pss: dict[str, int] = field(default_factory=dict)
    # Reading smaps_rollup costs ~2-3 ms of CPU per large process (the harness's, on a 2-core
    # machine beside the contenders): vs_mm2 reads PSS at most once a second, of its contenders only.
    pss_interval: float = 0.0
    pss_skip: tuple[str, ...] = ()  # tree names (prefixes) whose PSS is not read
    _pss_at: float = float("-inf")
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tree-meter", daemon=True)

    def add(self, name: str, pid: int) -> None:
        with self._lock:
            self.roots[name] = pid
        self.sample()

    def start(self) -> "TreeMeter":
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        procs = _all()
        read_pss = self.measure_pss and time.monotonic() - self._pss_at >= self.pss_interval
        if read_pss:
            self._pss_at = time.monotonic()
        with self._lock:
            for name, root in self.roots.items():
                pids = tree(root, procs, self.exclude)
                seen = self._cpu.setdefault(name, {})
                for pid in pids:
                    seen[pid] = max(seen.get(pid, 0.0), procs[pid][1])
                    if self.kinds.get(pid, "driver-or-other") == "driver-or-other":
                        # re-read until known: spark-submit's shell execs into the JVM later
                        self.kinds[pid] = kind(pid)
                raw = sum(procs[pid][2] for pid in pids)
                self.peak_rss_with_clones[name] = max(self.peak_rss_with_clones.get(name, 0), raw)
                clones = self._spawn_clones(pids, procs)
                self.spawn_clones_seen += len(clones)
                pids -= clones
                rss = raw - sum(procs[pid][2] for pid in clones)
                if read_pss and not name.startswith(self.pss_skip):
                    self.peak_pss[name] = max(self.peak_pss.get(name, 0), sum(pss(pid) for pid in pids))
                if rss > self.peak_rss.get(name, 0):
                    self.peak_rss[name] = rss
                    by_kind: dict[str, int] = {}
                    count: dict[str, int] = {}
                    for pid in pids:
                        label = self.kinds.get(pid) or kind(pid)
                        by_kind[label] = by_kind.get(label, 0) + procs[pid][2]
                        count[label] = count.get(label, 0) + 1
                    self.peak_rss_by_kind[name] = by_kind
                    self.peak_count_by_kind[name] = count
            now = time.monotonic()
            self.history.append((now, {n: sum(seen.values()) for n, seen in self._cpu.items()}, machine_busy_seconds()))
            self.kind_history.append((now, {n: self._kinds_of(seen) for n, seen in self._cpu.items()}))

    def _kinds_of(self, seen: dict[int, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, cpu in seen.items():
            label = self.kinds.get(pid, "gone")
            out[label] = out.get(label, 0.0) + cpu
        return out

    def _spawn_clones(self, pids: set[int], procs: dict) -> set[int]:
        """Children of the JVM that are not Python processes: a process being spawned
        (Hadoop forks `chmod` for checkpoint files, several times a second). Between its
        clone and its exec such a child shares the JVM's memory (CLONE_VM) and reports the
        JVM's whole RSS as its own; by the time its command line is read it may already be
        `jspawnhelper`, `chmod` or gone. Summing it would count the JVM twice for that
        instant; what it is after the exec (a few MiB for a few ms) is left out with it."""
        out = set()
        for pid in pids:
            parent = procs[pid][0]
            if parent in pids and self.kinds.get(parent) == "spark-jvm" and kind(pid) in _SPAWNED:
                out.add(pid)
        return out

    def mark(self) -> tuple[float, dict[str, float], float]:
        """A point to measure from or to: (monotonic time, cpu per tree, machine busy)."""
        self.sample()
        with self._lock:
            cpu = {name: sum(seen.values()) for name, seen in self._cpu.items()}
        return time.monotonic(), cpu, machine_busy_seconds()

    @staticmethod
    def between(start: tuple, end: tuple) -> Window:
        t0, c0, m0 = start
        t1, c1, m1 = end
        return Window(t1 - t0, {k: v - c0.get(k, 0.0) for k, v in c1.items()}, m1 - m0)

    def at(self, when: float) -> tuple[float, dict[str, float], float]:
        """The sample closest to monotonic time `when` (for windows found after the fact)."""
        with self._lock:
            return min(self.history, key=lambda h: abs(h[0] - when))

    def by_kind(self, name: str, start_pids: dict[int, float] | None = None) -> dict[str, float]:
        """CPU seconds of tree `name` so far, by process kind (minus `start_pids`' values)."""
        with self._lock:
            out: dict[str, float] = {}
            for pid, cpu in self._cpu.get(name, {}).items():
                label = self.kinds.get(pid, "gone")
                out[label] = out.get(label, 0.0) + cpu - (start_pids or {}).get(pid, 0.0)
            return {k: round(v, 3) for k, v in out.items()}

    def by_kind_between(self, name: str, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds of tree `name` by process kind between the samples closest to `t0` and `t1`."""
        with self._lock:
            first = min(self.kind_history, key=lambda h: abs(h[0] - t0))[1].get(name, {})
            last = min(self.kind_history, key=lambda h: abs(h[0] - t1))[1].get(name, {})
        return {k: round(v - first.get(k, 0.0), 3) for k, v in last.items()}

    def pids(self, name: str) -> dict[int, float]:
        with self._lock:
            return dict(self._cpu.get(name, {}))

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_rss.clear()
            self.peak_rss_with_clones.clear()
            self.peak_pss.clear()
