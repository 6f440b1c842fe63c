"""The executor's cycle-collector policy around a task (run in a fresh interpreter: it
freezes the process's objects).

Named invariants:
- inside a task automatic collection is off, after it the previous state is back (also
  when the task raises);
- the first task of a worker moves the objects alive then to the permanent generation,
  later tasks do not freeze again.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc
from treedist.records.task import lean_gc

assert gc.isenabled() and gc.get_freeze_count() == 0
with lean_gc():
    inside = gc.isenabled()
    frozen_first = gc.get_freeze_count()
assert not inside, "no automatic collection inside a task"
assert gc.isenabled(), "enabled again after it"
assert frozen_first > 0, "the first task froze what was alive"
junk = [[] for _ in range(1000)]
try:
    with lean_gc():
        # (frozen objects freed by reference counting leave the permanent generation)
        assert gc.get_freeze_count() <= frozen_first, "later tasks do not freeze again"
        raise ValueError("task failed")
except ValueError:
    pass
assert gc.isenabled(), "enabled again after a failed task"
gc.disable()
with lean_gc():
    pass
assert not gc.isenabled(), "a disabled collector stays disabled"
print("ok")
"""


def test_collector_off_inside_a_task_and_frozen_once():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
