"""CPU and memory of this process and its descendants (the Spark JVM and Python workers), from
/proc (Linux). Driver or worker process: a worker reads it for its load reports, the metrics
endpoint for the process tree's CPU and RSS."""

from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def process_stat(pid: int) -> tuple[int, float, int] | None:
    """(ppid, cpu seconds (user + system), rss bytes) of a live process, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, int(fields[21]) * _PAGE


def all_processes() -> dict[int, tuple[int, float, int]]:
    """process_stat of every live process, by PID."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = process_stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def tree_usage(root: int | None = None) -> tuple[float, int]:
    """(cpu seconds, rss bytes) summed over `root` (default: this process) and its descendants."""
    root = os.getpid() if root is None else root
    procs = all_processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    cpu, rss, todo = 0.0, 0, [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            cpu += procs[pid][1]
            rss += procs[pid][2]
            todo.extend(children.get(pid, ()))
    return cpu, rss


class CpuMeter:
    """Cores used by the process tree since the previous call (0.0 on the first)."""

    def __init__(self) -> None:
        self._mark: tuple[float, float] | None = None

    def sample(self) -> tuple[float, int]:
        cpu, rss = tree_usage()
        now = time.monotonic()
        cores = 0.0
        if self._mark is not None and now > self._mark[0]:
            cores = max(0.0, (cpu - self._mark[1]) / (now - self._mark[0]))
        self._mark = (now, cpu)
        return round(cores, 3), rss
