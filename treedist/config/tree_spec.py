"""`tree`: the distribution tree as the file writes it, a cluster name or `{level, children}`.
What the tree means is treedist.topology's.
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Discriminator, Field, StrictInt, Tag, field_validator

from treedist.config.frozen import Frozen
from treedist.topology.flags import MAX_LEVEL, MIN_LEVEL

class InnerNodeSpec(Frozen):
    level: StrictInt = Field(
        ge=MIN_LEVEL, le=MAX_LEVEL,
        description=f"This node's level ({MIN_LEVEL}..{MAX_LEVEL}), strictly above its children's: every "
                    "cluster under it has a distributor at this level copying to the other child's subtree.",
    )
    children: tuple["TreeSpec", ...]
    """Exactly two children, each a cluster name (a leaf) or an inner node `{level, children}`."""

    @field_validator("children")
    @classmethod
    def _two_children(cls, children: tuple) -> tuple:
        if len(children) != 2:
            raise ValueError(f"an inner node has exactly two children, got {len(children)}")
        return children


def _tree_kind(value: object) -> str:
    return "cluster" if isinstance(value, str) else "node"


TreeSpec = Annotated[
    Union[Annotated[str, Tag("cluster")], Annotated[InnerNodeSpec, Tag("node")]],
    Discriminator(_tree_kind),
]
InnerNodeSpec.model_rebuild()


def plain(spec: object) -> object:
    """The tree as plain data, `treedist.topology.tree`'s YAML shape: a cluster name or
    `{"level": n, "children": [a, b]}`."""
    if isinstance(spec, InnerNodeSpec):
        return {"level": spec.level, "children": [plain(c) for c in spec.children]}
    return spec
