"""How the status reads a query's copy-ahead intents from its checkpoint on the local file
system (`snapshot.copied_from_checkpoint`, `ahead.Intents.latest`): the running batch's intents
count for the shown lag only while the query is not known failed and the batch is young, never
for what landed; a store that errors costs only the intents; the reads stop at their budget."""

from __future__ import annotations

import json
import os
import time

from treedist.config import parse_deployment
from treedist.kafka.watermarks import TopicPartitionKey
from treedist.local.deployment import local_deployment
from treedist.ops.checkpoint import recent_batches
from treedist.ops.snapshot import copied_from_checkpoint
from treedist.records.ahead import Intents, ahead_dir
from treedist.records.plan import plan_all
from treedist.records.positions import batch_token
from treedist.spark.checkpoint_fs import Store

TP = TopicPartitionKey("demo", 0)
LINGER_S = 6.0


def _checkpoint(tmp_path):
    """A query's checkpoint with batch 7 committed (end 100) and batch 8 planned (end 150),
    the latter's task having copied ahead to 170, the former's from 100 to 120."""
    spec = local_deployment({"c1": "localhost:1", "c2": "localhost:2"}, topics=["demo"],
                            checkpoint_location=str(tmp_path / "checkpoints"),
                            distributor={"task_linger": f"{LINGER_S:g}s"})
    [plan] = [p for p in plan_all(parse_deployment(spec)) if p.cluster == "c1"]
    root = plan.checkpoint
    os.makedirs(os.path.join(root, "offsets"))
    os.makedirs(os.path.join(root, "commits"))
    ends = {}
    for batch_id, end in ((7, 100), (8, 150)):
        offset = {"levels": {str(level.level): {"demo": {"0": end}} for level in plan.levels}}
        with open(os.path.join(root, "offsets", str(batch_id)), "w") as f:
            f.write('v1\n{"batchWatermarkMs":0}\n' + json.dumps(offset))
        ends[batch_id] = batch_token(offset)
    open(os.path.join(root, "commits", "7"), "w").close()
    intents = Intents.of(root, Store())
    intents.make_dir()
    [newest] = recent_batches(root, 0.0, time.time(), at_most=1)
    assert newest.token == ends[7]
    return plan, newest, intents, ends


def _level_positions(found):
    return {position[TP] for position in found.values()}


def test_the_running_batchs_intents_show_while_young_and_never_count_as_landed(tmp_path):
    plan, newest, intents, ends = _checkpoint(tmp_path)
    intents.write(ends[8], [(TP, 150, 170)])
    latest = {TP: 200}
    now = time.time()
    landed, shown = copied_from_checkpoint(plan, newest, latest, failed=False, now=now)
    assert (_level_positions(landed), _level_positions(shown)) == ({100}, {170})
    # the query is known failed: the running batch's intents show no more
    landed, shown = copied_from_checkpoint(plan, newest, latest, failed=True, now=now)
    assert (_level_positions(landed), _level_positions(shown)) == ({100}, {100})
    # the running batch was planned longer ago than its linger and the margin: a hung task
    # or a target that never acknowledges no longer reads low
    planned = os.path.join(plan.checkpoint, "offsets", "8")
    os.utime(planned, (now - LINGER_S - 60, now - LINGER_S - 60))
    landed, shown = copied_from_checkpoint(plan, newest, latest, failed=False, now=now)
    assert (_level_positions(landed), _level_positions(shown)) == ({100}, {100})


def test_the_committed_batchs_intents_landed_unless_beyond_the_latest_offset(tmp_path):
    plan, newest, intents, ends = _checkpoint(tmp_path)
    intents.write(ends[7], [(TP, 100, 120)])
    landed, shown = copied_from_checkpoint(plan, newest, {TP: 200}, failed=False, now=time.time())
    assert (_level_positions(landed), _level_positions(shown)) == ({120}, {120})
    # a torn read of an in-place rewrite can hold a mix of two offsets beyond the latest one
    landed, shown = copied_from_checkpoint(plan, newest, {TP: 110}, failed=False, now=time.time())
    assert (_level_positions(landed), _level_positions(shown)) == ({100}, {100})


def test_what_cannot_be_read_costs_only_the_intents(tmp_path):
    plan, newest, intents, ends = _checkpoint(tmp_path)
    other = TopicPartitionKey("demo", 1)
    for level in newest.positions.values():
        level[other] = 100
    intents.write(ends[7], [(TP, 100, 120)])
    # an intent the store fails to read (a directory there: IsADirectoryError) is no intent
    os.mkdir(os.path.join(ahead_dir(plan.checkpoint), "demo~1"))
    landed, shown = copied_from_checkpoint(plan, newest, {TP: 200, other: 200}, failed=False, now=time.time())
    assert [(p[TP], p[other]) for p in (*landed.values(), *shown.values())] == [(120, 100)] * (2 * len(plan.levels))
    # the running batch's offset log entry cannot be read as one: the committed end only
    with open(os.path.join(plan.checkpoint, "offsets", "8"), "w") as f:
        f.write("v1\n{}\nnot json")
    landed, shown = copied_from_checkpoint(plan, newest, {TP: 200, other: 200}, failed=False, now=time.time())
    assert (_level_positions(landed), _level_positions(shown)) == ({100}, {100})


def test_intent_reads_stop_at_their_budget(tmp_path):
    """A read that never returns (a FIFO nobody writes: a store that hangs) leaves the
    partition without an intent after the budget; the others are read."""
    intents = Intents.of(str(tmp_path), Store())
    intents.make_dir()
    fast = [TopicPartitionKey("a", p) for p in range(20)]
    intents.write("t", [(tp, 10, 10 + tp.partition) for tp in fast])
    stuck = TopicPartitionKey("b", 0)
    fifo = os.path.join(ahead_dir(str(tmp_path)), "b~0")
    os.mkfifo(fifo)
    try:
        found = intents.latest([stuck, *fast], budget_s=0.3, workers=4)
        assert found == {tp: ("t", 10, 10 + tp.partition) for tp in fast}
    finally:
        _release(fifo)


def _release(fifo: str) -> None:
    """Let the stuck reader end: a writer opens the FIFO and closes it (EOF: no intent)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # ENXIO: nobody reads it (any more)
        pass


def test_no_partitions_read_no_intents(tmp_path):
    assert Intents.of(str(tmp_path), Store()).latest([], budget_s=0.5) == {}
