"""Held levels: a distributor whose target does not answer waits while the query's other
distributors go on copying. Pure, no I/O (the driver's supervisor decides; the planner and
the tasks apply).

Why: one query reads its source once for all of its cluster's distributors, and a batch is
committed only when every copy of it was acknowledged. Without holds, a target that does
not answer (a data centre cut off) stops the whole query, and the clusters that answer get
nothing either.

How, in steps:
1. driver (supervisor): the query's target has not answered for `distributor.unreachable_after`
   while its source and another target answer: the level is written to the query's held
   file (`held_file`, beside its live targets file); the query is stopped, its uncommitted
   batch is *abandoned* (its offset-log entry removed, what it was recorded in
   `treedist-abandoned.json` in the checkpoint: `abandonment`) and the query restarted;
2. driver (planner): the next batch is planned from the last committed end; a held level
   keeps its positions (`positions.next_positions(held=...)`), the others advance. Its end
   records, per level, the abandoned batches' tokens and ends (`"abandoned"`: see below);
3. executor: a task copies for the levels that are not held only (no producer for a held
   level's target); with `delivery: exactly_once` it trusts target positions written under
   the abandoned batches' tokens as if they were its own batch's (`trusted_tokens`);
4. driver (supervisor): the target answers again: the level leaves the held file; the next
   batch reads the partitions from the held level's positions (the windows start at the
   lowest level's), and that level copies everything after them.

The abandoned batch may have committed some copies before it was interrupted (on a target
that answered, or on the lost one before it went away). Nothing is lost either way: every
level copies again from its last committed position. In at_least_once those copies are
repeated. In exactly_once a target already holds, for each link, the position its last
transaction committed, under that batch's token (treedist.records.transactions); the next
batch of that level must therefore trust the abandoned token too, and its window must reach
at least the abandoned batch's end for that level, so that the committed position lies
inside the window (`floor`; a floor only extends what a batch reads, it never skips).

`"abandoned"` in a batch's end: `{level: {"tokens": [...], "end": {topic: {partition: offset}},
"waiting": bool}}`. `waiting` true: the level is held and its entry is carried to the next
batch; false: this batch is the level's first after the abandonment (it trusts the tokens);
the entry is not carried further.

Named invariants (tests/unit/records/test_holds.py):
- HELD_STAYS: a held level's positions never advance (only a reset moves them).
- NEVER_SKIPS: a floor only raises a level's end; every level's range starts at its position.
- TRUST_FOLLOWS: a level's first batch after an abandonment trusts every abandoned token
  since its last batch; no later batch does.
- RESET_DROPS_FLOOR: a partition reset (topic recreated) loses its floor.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey
from treedist.records.errors import PipelineError

HELD_SUFFIX = ".held"
ABANDONED_FILE = "treedist-abandoned.json"
# The start of an abandoned first batch: the source's initial offset, which Spark does not log;
# the planner matches it to the first batch it plans from its own `initialOffset`.
INITIAL = "initial"


def held_file(live_targets: str) -> str:
    """The held file of a query whose live targets file is `live_targets`."""
    return live_targets + HELD_SUFFIX


def parse_held(text: str) -> dict[int, str]:
    """Level -> the target it waits for, from a held file's text (`{"3": "c3"}`)."""
    try:
        data = json.loads(text) if text.strip() else {}
        return {int(level): str(target) for level, target in data.items()}
    except (ValueError, AttributeError) as err:
        raise PipelineError(f"malformed held file: {err}: {text[:200]!r}") from None


def format_held(held: Mapping[int, str]) -> str:
    return json.dumps({str(level): held[level] for level in sorted(held)})


def entries(offset: Mapping) -> dict[int, dict]:
    """The `abandoned` part of a batch's end: level -> {"tokens", "end", "waiting"}."""
    data = offset.get("abandoned") if isinstance(offset, Mapping) else None
    if not data:
        return {}
    try:
        return {int(level): {"tokens": list(e["tokens"]), "end": KafkaOffsets.from_dict(e.get("end", {})).positions,
                             "waiting": bool(e.get("waiting", False))}
                for level, e in data.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise PipelineError(f"malformed 'abandoned' in a distributor offset: {err}") from None


def with_entries(offset: dict, found: Mapping[int, dict]) -> dict:
    """`offset` (a checkpoint form) recording `found` (omitted when empty: an end without
    holds is the JSON an older version writes)."""
    if found:
        offset["abandoned"] = {
            str(level): {"tokens": sorted(set(e["tokens"])), "end": KafkaOffsets(dict(e["end"])).to_dict(),
                         "waiting": bool(e["waiting"])}
            for level, e in sorted(found.items())
        }
    return offset


def abandonment(start_token: str, token: str, end: Mapping[int, KafkaOffsets], carried: Mapping[int, dict]) -> dict:
    """What the driver records when it abandons the batch `token` (planned from the end whose
    token is `start_token`, ending at `end`: level -> positions; `carried`: that batch's own
    `abandoned` entries). JSON-ready."""
    merged = merge(carried, {level: {"tokens": [token], "end": offsets.positions, "waiting": False}
                             for level, offsets in end.items()})
    return {"start": start_token, "entries": with_entries({}, merged).get("abandoned", {})}


def from_record(record: Mapping, start_token: str, initial: bool = False) -> dict[int, dict]:
    """The entries of an abandonment record (`abandonment`) if it abandoned a batch planned
    from `start_token` (or the query's first batch, when `initial`: the batch being planned
    starts at the initial offset), else none (a record of an older batch)."""
    if not isinstance(record, Mapping):
        return {}
    if record.get("start") != start_token and not (initial and record.get("start") == INITIAL):
        return {}
    return entries({"abandoned": record.get("entries") or {}})


def merge(a: Mapping[int, dict], b: Mapping[int, dict]) -> dict[int, dict]:
    """Entries of both: per level, the tokens of both and the higher end per partition."""
    out = {level: {"tokens": list(e["tokens"]), "end": dict(e["end"]), "waiting": e["waiting"]} for level, e in a.items()}
    for level, e in b.items():
        if level not in out:
            out[level] = {"tokens": list(e["tokens"]), "end": dict(e["end"]), "waiting": e["waiting"]}
            continue
        mine = out[level]
        mine["tokens"] = sorted(set(mine["tokens"]) | set(e["tokens"]))
        for tp, offset in e["end"].items():
            mine["end"][tp] = max(offset, mine["end"].get(tp, offset))
    return out


def carried(start_entries: Mapping[int, dict]) -> dict[int, dict]:
    """The entries a batch planned from an end with `start_entries` inherits: those of
    levels still waiting (the others' first batch was that end's)."""
    return {level: e for level, e in start_entries.items() if e["waiting"]}


def plan_entries(found: Mapping[int, dict], held: Iterable[int], reset: Iterable[TopicPartitionKey]) -> dict[int, dict]:
    """The entries of the batch being planned: a held level's waits (carried on), any
    other's is this batch's (its first after the abandonment). A reset partition's floor
    is dropped (RESET_DROPS_FLOOR): the old topic's offsets say nothing of the new one's."""
    held, reset = set(held), set(reset)
    return {level: {"tokens": e["tokens"], "end": {tp: o for tp, o in e["end"].items() if tp not in reset},
                    "waiting": level in held}
            for level, e in found.items()}


def floor(end: Mapping[int, KafkaOffsets], found: Mapping[int, dict]) -> dict[int, KafkaOffsets]:
    """Each level whose entry is not waiting, its end raised to the entry's end for the
    partitions it holds (NEVER_SKIPS: only ends move, up)."""
    out = {}
    for level, offsets in end.items():
        e = found.get(level)
        if e is None or e["waiting"]:
            out[level] = offsets
            continue
        out[level] = KafkaOffsets({tp: max(o, e["end"].get(tp, o)) for tp, o in offsets.positions.items()})
    return out


def trusted_tokens(found: Mapping[int, dict]) -> tuple[tuple[int, str], ...]:
    """(level, token) pairs a batch's tasks trust besides their own batch's token
    (TRUST_FOLLOWS: only the levels whose first batch this is)."""
    return tuple(sorted((level, t) for level, e in found.items() if not e["waiting"] for t in e["tokens"]))


def idle_levels(levels: Iterable[int], windows: Iterable) -> tuple[int, ...]:
    """Driver, pure: the `levels` that copy nothing in a batch with `windows`
    (PartitionWindows): a held level (its positions stayed), or one whose positions are ahead
    of the others. The batch's tasks make no client of their targets. Decided from the
    windows alone, so a replay decides the same; a held level with ranges (a replay of a
    batch planned before the hold) copies: its batch is not left unfinished for any level."""
    copying = {r.level for w in windows for r in w.levels if r.until_offset > r.from_offset}
    return tuple(sorted(set(levels) - copying))


def complete_ranges(windows: Iterable, levels: Iterable[int]) -> list:
    """Executor, pure: the windows with an empty range at the window's start for each of
    `levels` that has none in it, so that the copier copies nothing of the window for that
    level (a window lacking a level's range would count as uniform, and the copier copies a
    uniform window for every level: treedist.records.copier). Unchanged in the steady state."""
    from dataclasses import replace

    from treedist.records.positions import LevelRange

    levels = sorted(set(levels))
    out = []
    for w in windows:
        missing = [level for level in levels if all(r.level != level for r in w.levels)]
        if missing:
            w = replace(w, levels=w.levels + tuple(LevelRange(level, w.from_offset, w.from_offset) for level in missing))
        out.append(w)
    return out
