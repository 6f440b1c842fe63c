"""glibc malloc arenas: two per process (driver side, and inherited by what the driver starts).

glibc gives a thread that allocates while the others hold their arenas an arena of its own, up
to 8 per core, each touched in part; the JVM's many threads and librdkafka's (4 per client) in
every Python process would each keep one. `MALLOC_ARENA_MAX` caps them, but glibc reads it only
when a process starts: exported by the driver (treedist.spark.session) it reaches the JVM and
every Python process Spark starts, not the driver itself. The driver caps its own arenas with
`mallopt` first thing (treedist.cli.main), before any of its threads starts.

The driver's RSS with glibc's default and with two arenas: docs/performance.md, "Memory with
lingering tasks".
"""

from __future__ import annotations

import ctypes
import os

# Arenas per process; two suffice where the heavy work is single-threaded.
MALLOC_ARENAS = 2
ARENA_ENV = "MALLOC_ARENA_MAX"
M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_malloc_arenas(count: int = MALLOC_ARENAS) -> bool:
    """Cap this process's glibc malloc arenas at `count`; call it before threads start (one
    that already has an arena keeps it). Returns whether the cap was set: False where the C
    library has no `mallopt` (not glibc), or when `MALLOC_ARENA_MAX` was in the environment at
    start (glibc read the operator's own value then; it stays)."""
    if os.environ.get(ARENA_ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # TypeError: Windows has no CDLL(None)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return mallopt(M_ARENA_MAX, count) == 1
