"""The driver pod's preStop hook (treedist.prestop) on real processes: a parent whose command
line names treedist-submit.py, as tini's and spark-submit's JVM's do, runs a Python child on a
script of that name. The hook sends SIGTERM to the child alone and returns once it exited; the
parent sees the child's exit code and was never signalled. A real spark-submit driver stopped
this way: tests/e2e/test_spark_submit.py."""

from __future__ import annotations

import subprocess
import sys

from treedist.prestop import drivers, is_driver, stop

DRIVER = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("driver up", flush=True)
time.sleep(120)
sys.exit(3)
"""


def test_is_driver_takes_a_python_running_the_entry_and_nothing_that_only_names_it():
    assert is_driver(["/usr/local/bin/python3", "/opt/treedist/scripts/treedist-submit.py", "-c", "d.yaml"])
    assert is_driver(["python3.11", "-u", "treedist-submit.py"])
    assert not is_driver(["/usr/lib/jvm/java-17/bin/java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit",
                          "local:///opt/treedist/scripts/treedist-submit.py"])
    assert not is_driver(["/usr/bin/tini", "-s", "--", "/opt/entrypoint.sh", "driver", "treedist-submit.py"])
    assert not is_driver(["/usr/local/bin/python3", "other.py", "treedist-submit.py"])
    assert not is_driver([])


def test_the_hook_stops_the_python_driver_only_and_waits_for_it(tmp_path):
    script = tmp_path / "treedist-submit.py"
    script.write_text(DRIVER)
    # the parent names the script on its command line, as tini and the JVM do
    parent = subprocess.Popen(["bash", "-c", '"$0" "$1"; echo "driver exited $?"; sleep 60', sys.executable, str(script)],
                              stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert parent.stdout.readline().strip() == "driver up"
        found = drivers(parent.pid)
        assert len(found) == 1 and found[0] != parent.pid
        said: list[str] = []
        assert stop(parent.pid, timeout_s=60, say=said.append) == 0
        assert said[-1] == "driver stopped", said
        assert parent.stdout.readline().strip() == "driver exited 0"  # its SIGTERM handler's clean exit
        assert parent.poll() is None  # the parent was not signalled
        assert drivers(parent.pid) == []
        assert stop(parent.pid, timeout_s=5, say=said.append) == 0 and "nothing to stop" in said[-1]
    finally:
        parent.kill()
        parent.wait()
