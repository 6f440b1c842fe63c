"""Stop a spark-submitted treedist driver the clean way: the preStop hook of a driver pod on
Kubernetes (runs in the driver's container, beside spark-submit; deploy/kubernetes/).

    python3 -m treedist.prestop [--under PID] [--timeout SECONDS]

Kubernetes stops a pod with SIGTERM to its first process, tini, which passes it to
spark-submit's JVM only; the JVM's shutdown hook then stops the SparkContext under the running
queries and leaves the Python driver without its gateway. The Python driver (the process
running `scripts/treedist-submit.py`) must get the SIGTERM instead, and the pod must not be
signalled before it has stopped. `pkill -f treedist-submit.py` does not do that: the JVM's and
tini's command lines name the script too (it is spark-submit's primary resource).

1. find the drivers: processes under `--under` (default 1, the pod's first process) whose
   program is a Python interpreter and whose script is `treedist-submit.py`;
2. send each one SIGTERM (once: a second one would force it, treedist.driver.lifecycle);
3. wait until they have exited (batches settle, queries stop, Spark stops; spark-submit then
   exits with the driver's code), at most `--timeout` seconds.
Exit 0 when no driver runs any more (also when none ran), 1 when one still ran at the timeout:
kubelet goes on with the pod's stop either way, within `terminationGracePeriodSeconds`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

ENTRY = "treedist-submit.py"
PROC = Path("/proc")


def _cmdline(pid: int) -> list[str]:
    try:
        return [arg for arg in (PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0") if arg]
    except OSError:  # gone meanwhile, or not ours to read
        return []


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process now (one pass over /proc)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def is_driver(argv: list[str]) -> bool:
    """A Python interpreter running treedist-submit.py (its first argument that is not an
    interpreter option); never a JVM, tini or a shell that only names the script."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return False
    script = next((arg for arg in argv[1:] if not arg.startswith("-")), "")
    return Path(script).name == ENTRY


def drivers(under: int = 1) -> list[int]:
    """Step 1: the drivers among the descendants of `under` (and `under` itself)."""
    children, found, todo = _children(), [], [under]
    while todo:
        pid = todo.pop()
        if is_driver(_cmdline(pid)):
            found.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has stopped; its parent (spark-submit) reaps it


def stop(under: int = 1, timeout_s: float = 150.0, say=print) -> int:
    """Steps 2 and 3; the exit code (module docstring)."""
    pids = drivers(under)
    if not pids:
        say(f"no {ENTRY} driver runs under pid {under}: nothing to stop")
        return 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    say(f"SIGTERM sent to the driver{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))}; "
        f"waiting up to {timeout_s:.0f} s for the clean stop")
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids):
        if time.monotonic() >= deadline:
            say(f"driver still running after {timeout_s:.0f} s: {', '.join(str(p) for p in pids if _alive(p))}")
            return 1
        time.sleep(0.5)
    say("driver stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m treedist.prestop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--under", type=int, default=1, help="look for drivers under this pid (default 1: the pod's "
                                                              "first process)")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds to wait for the clean stop (default 150; "
                                                                     "keep it below the pod's terminationGracePeriodSeconds)")
    args = parser.parse_args(argv)
    return stop(args.under, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
