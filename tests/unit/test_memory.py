"""treedist.memory: the driver caps its own glibc malloc arenas (counted with glibc's malloc_info)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# A child process: optionally caps its arenas, then 12 threads allocate at the same time
# (ctypes malloc, so glibc's allocator and not Python's), then glibc's own report of its heaps
# (`malloc_info`: one <heap nr=...> per arena) is counted.
CHILD = textwrap.dedent("""
    import ctypes, sys, threading, tempfile
    from treedist.memory import limit_malloc_arenas
    capped = limit_malloc_arenas(2) if sys.argv[1] == "cap" else None
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    start = threading.Barrier(12)
    held = []
    def work():
        start.wait()
        for _ in range(200):
            held.append(libc.malloc(4096))
    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads: t.start()
    for t in threads: t.join()
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    with tempfile.NamedTemporaryFile(suffix=".xml") as f:
        fp = libc.fopen(f.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        report = open(f.name).read()
    print(capped, report.count("<heap nr="))
""")


def _heaps(mode: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, check=True)
    capped, heaps = out.stdout.split()
    return capped, int(heaps)


def test_capped_process_allocates_from_at_most_two_arenas():
    capped, heaps = _heaps("cap")
    assert capped == "True"
    assert 1 <= heaps <= 2


def test_without_the_cap_the_same_threads_spread_over_more_arenas():
    # The contrast that shows the test above measures the cap, not the machine.
    _, heaps = _heaps("none")
    assert heaps > 2


def test_an_operators_malloc_arena_max_stays(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    from treedist.memory import limit_malloc_arenas

    assert limit_malloc_arenas() is False


def test_without_glibcs_mallopt_it_declines(monkeypatch):
    # musl, macOS (no mallopt symbol) and Windows (no CDLL(None)): no cap, no error.
    import ctypes

    from treedist import memory

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)

    def no_libc(name, *args, **kwargs):
        raise TypeError("expected str, bytes or os.PathLike object, not NoneType")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert memory.limit_malloc_arenas() is False
