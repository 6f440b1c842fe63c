"""What a copy must preserve, reduced to one 64-bit digest per record. Pure, no I/O.

A copy must keep the original's key, value, timestamp, partition number and every header
except the two treedist writes itself (copy flags and origin). The digest covers exactly
those, with length-prefixed fields so that no two different records share an encoding
(None and b"" differ; header order matters, as the distributor keeps it).
"""

from __future__ import annotations

import struct
from hashlib import blake2b
from typing import Iterable, Sequence

Header = tuple[str, bytes | None]

_HEAD = struct.Struct("<iqii")  # partition, timestamp, len(key), len(value); -1 = None
_LENGTHS = struct.Struct("<ii")  # len(header name), len(header value); -1 = None


def split_headers(
    headers: Sequence[Header] | None, origin_header: str, flags_header: str
) -> tuple[bytes | None, list[Header]]:
    """(the origin header's value or None, the other headers in order). Last origin header wins."""
    origin: bytes | None = None
    others: list[Header] = []
    if headers:
        for key, value in headers:
            if key == origin_header:
                origin = value if value is not None else b""
            elif key != flags_header:
                others.append((key, value))
    return origin, others


def record_digest(
    partition: int, timestamp: int, key: bytes | None, value: bytes | None, headers: Iterable[Header] = ()
) -> int:
    """An unsigned 64-bit digest of (partition, timestamp, key, value, headers in order).

    Stable across processes and runs (blake2b over a length-prefixed encoding)."""
    parts = [
        _HEAD.pack(partition, timestamp, -1 if key is None else len(key), -1 if value is None else len(value)),
        key or b"",
        value or b"",
    ]
    for name, data in headers:
        raw = name.encode() if isinstance(name, str) else name
        parts.append(_LENGTHS.pack(len(raw), -1 if data is None else len(data)))
        parts.append(raw)
        parts.append(data or b"")
    return int.from_bytes(blake2b(b"".join(parts), digest_size=8).digest(), "little")
