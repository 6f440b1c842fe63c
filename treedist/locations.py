"""Checkpoint locations: a plain path or a URI of a supported scheme (pure).

Used by the config's validation and by `treedist.spark.checkpoint_fs`, which opens them.
"""

from __future__ import annotations

import re

SCHEMES = ("file", "hdfs", "s3a")
URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")


def scheme(location: str) -> str | None:
    """The URI scheme of `location` (lower case), or None for a plain path."""
    match = URI.match(location)
    return match.group(1).lower() if match else None


def check_location(location: str) -> str:
    """`location` itself when it is a plain path or a URI of a supported scheme with a
    path; ValueError naming the scheme or what is missing otherwise."""
    found = scheme(location)
    if found is None:
        return location
    if found not in SCHEMES:
        raise ValueError(f"scheme {found!r} is not supported: use a path, or a file://, hdfs:// or s3a:// URI")
    rest = URI.match(location).group(2)
    if found == "s3a" and not rest.split("/", 1)[0]:
        raise ValueError(f"{location!r} names no bucket (s3a://<bucket>/<path>)")
    if found == "file" and not rest.startswith("/"):
        raise ValueError(f"{location!r} is not an absolute file:// URI (file:///<path>)")
    return location
