"""`targets`: per-distributor target overrides, and automatic target failover and failback."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, StrictInt, StrictStr, Tag

from treedist.config.durations import Duration
from treedist.config.frozen import Frozen
from treedist.topology.flags import MAX_LEVEL, MIN_LEVEL

class TargetOverride(Frozen):
    """Send the (cluster, level) distributor's copies to another leaf of its sibling subtree."""

    cluster: StrictStr
    """The distributor's source cluster."""

    level: StrictInt = Field(ge=MIN_LEVEL, le=MAX_LEVEL)
    """The distributor's level."""

    target: StrictStr
    """The leaf of the distributor's sibling subtree that receives its copies instead of the tree's default
    target."""


class FailoverConfig(Frozen):
    """Switch a link away from a target leaf that has not answered for `after` seconds."""

    after: Duration
    """How long a target leaf may go unanswered (the application probes every 2 s) before its links switch to
    another answering leaf of the same sibling subtree, from their checkpoints."""


class FailbackConfig(Frozen):
    """Switch back once the original target has answered again for `after` seconds."""

    after: Duration
    """How long the original target must answer again before links switch back to it."""


def _failback(value: object) -> object:
    """`manual` (kept as None) or a mapping `{after: <duration>}`."""
    if value == "manual" or value is None:
        return None
    if isinstance(value, str):
        raise ValueError(f"failback is 'manual' or {{after: <duration>}}, got {value!r}")
    return value


class TargetsConfig(Frozen):
    """`targets` as a mapping: the overrides plus automatic target failover (`targets` as a
    list is the overrides alone, the original form)."""

    overrides: tuple[TargetOverride, ...] = ()
    """Per-distributor target overrides (what `targets` as a list holds); at most one per (cluster, level)."""

    failover: FailoverConfig | None = None
    """Automatic target failover within a sibling subtree. Unset: off, a link waits for its target."""

    failback: Annotated[
        FailbackConfig | None,
        BeforeValidator(_failback, json_schema_input_type=Union[Literal["manual"], FailbackConfig, None]),
    ] = None
    """When a failed-over link switches back: `manual` (the default: only a restart or a config change does) or
    `{after: <duration>}` of the original target answering again."""


def _targets_form(value: object) -> str:
    return "mapping" if isinstance(value, (dict, TargetsConfig)) else "list"


Targets = Annotated[
    Union[Annotated[tuple[TargetOverride, ...], Tag("list")], Annotated[TargetsConfig, Tag("mapping")]],
    Discriminator(_targets_form),
]
