"""Copy flags: the bit mask that records which tree levels a record has crossed.

Pure functions, no I/O. A record without the header has flags 0. The header value is the
flags as a decimal ASCII number; anything else (empty, non-digits, 2**63 or more) is
malformed and handled by the MalformedFlagsPolicy.
"""

from __future__ import annotations

import enum

from treedist.topology.errors import TopologyError

MIN_LEVEL = 1
MAX_LEVEL = 63


class MalformedFlagsPolicy(str, enum.Enum):
    """What a distributor does with a copy-flag header it cannot parse.

    copy (default): treat the flags as 0, so the record is distributed at every level and
    nothing is lost; a corrupted copy may then arrive twice somewhere (reported by verify).
    skip: distribute nothing for this record (it stays only where it is).
    fail: stop the query with an error naming topic, partition and offset.
    """

    COPY = "copy"
    SKIP = "skip"
    FAIL = "fail"


class MalformedFlags(TopologyError, ValueError):
    """A header value that is not a decimal number below 2**63. A TopologyError (the
    package's root error; found by tests/fuzz), still a ValueError for older callers."""


def level_bit(level: int) -> int:
    """The copy-flag bit of a level: 1 << (level - 1)."""
    _check_level(level)
    return 1 << (level - 1)


def level_mask(level: int) -> int:
    """The bits a distributor of this level inspects: its own and every lower one."""
    _check_level(level)
    return (1 << level) - 1


def should_copy(flags: int, mask: int) -> bool:
    """The distribution rule: copy iff no bit of this level or below is set."""
    return flags & mask == 0


def encode_flags(flags: int) -> bytes:
    return str(flags).encode("ascii")


def parse_flags(value: bytes | None) -> int:
    """Header bytes -> flags. None (no header) is 0. Raises MalformedFlags otherwise."""
    if value is None:
        return 0
    text = value.decode("ascii", errors="replace").strip()
    if text.isdigit() and len(text) <= 20:
        flags = int(text)
        if flags < 1 << MAX_LEVEL:
            return flags
    raise MalformedFlags(f"copy-flag header {value[:32]!r} is not a decimal number below 2**63")


def format_bits(flags: int, width: int = 4) -> str:
    """Flags as a fixed-width binary string, e.g. 5 -> '0101' (as docs/concepts.md writes them)."""
    return format(flags, f"0{width}b")


def _check_level(level: int) -> None:
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise ValueError(f"level {level} is outside {MIN_LEVEL}..{MAX_LEVEL}")
