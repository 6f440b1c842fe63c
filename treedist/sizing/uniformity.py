"""Keeping load uniform while a cluster grows (chapter 5.3, "keeping load uniform", and 7.2).

A topic's p partitions spread over n brokers give each broker floor(p/n) or ceil(p/n)
leaders. Load is uniform when n divides p (eq. 8: p = 0 (mod n), which also makes the
replicas uniform, eq. 7). Picking p with many divisors up to the largest cluster size
one expects keeps load uniform at each of those sizes without re-partitioning, which
would break the key-to-partition mapping. The thesis's highlighted counts for target
size 12 (24, 36, 48, 60, 72, 120) are the counts that keep load uniform on the most sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from treedist.sizing.errors import require_count

DEFAULT_TARGET_SIZE = 12
DEFAULT_TOP = 10


def uniformity(partitions: int, servers: int) -> float:
    """Least over most loaded broker, in leaders: floor(p/n) / ceil(p/n); 1.0 iff n divides p."""
    low, rem = divmod(partitions, servers)
    return 1.0 if rem == 0 else low / (low + 1)


def is_uniform(partitions: int, servers: int) -> bool:
    """Eq. (8): p = 0 (mod n)."""
    return partitions % servers == 0


def uniform_sizes(partitions: int, target_size: int) -> tuple[int, ...]:
    """The cluster sizes 1..target_size on which `partitions` spread uniformly."""
    return tuple(n for n in range(1, target_size + 1) if is_uniform(partitions, n))


def largest_jump(sizes: tuple[int, ...]) -> tuple[int, int] | None:
    """The widest step between consecutive uniform sizes: scaling past `a` must go to `b`.

    Ties keep the earliest step. None for fewer than two sizes.
    """
    steps = list(zip(sizes, sizes[1:]))
    if not steps:
        return None
    return max(steps, key=lambda s: (s[1] - s[0], -s[0]))


def uniformity_grid(counts: Iterable[int], sizes: Iterable[int]) -> list[list[float]]:
    """grid[i][j] = uniformity(sizes[i], counts[j]): one row per cluster size, for a heatmap."""
    counts, sizes = list(counts), list(sizes)
    return [[uniformity(p, n) for p in counts] for n in sizes]


@dataclass(frozen=True)
class Recommendation:
    partitions: int
    uniform_sizes: tuple[int, ...]  # within 1..target_size
    target_size: int
    largest_jump: tuple[int, int] | None
    reason: str

    def as_dict(self) -> dict:
        return {
            "partitions": self.partitions,
            "uniform_sizes": list(self.uniform_sizes),
            "uniform_count": len(self.uniform_sizes),
            "target_size": self.target_size,
            "largest_jump": list(self.largest_jump) if self.largest_jump else None,
            "reason": self.reason,
        }


def recommend(
    candidates: Iterable[int], target_size: int = DEFAULT_TARGET_SIZE, top: int = DEFAULT_TOP
) -> tuple[Recommendation, ...]:
    """The `top` candidate counts that keep load uniform on the most cluster sizes up to
    `target_size`; among equals the smaller count first, since end-to-end latency (eq. 10)
    and unavailability (eq. 11) grow with p. Each comes with the reason it was picked.
    """
    require_count("target_size", target_size)
    require_count("top", top)
    ranked = sorted(set(candidates), key=lambda p: (-len(uniform_sizes(p, target_size)), p))[:top]
    if not ranked:
        return ()
    best = len(uniform_sizes(ranked[0], target_size))
    out: list[Recommendation] = []
    for p in ranked:
        sizes = uniform_sizes(p, target_size)
        jump = largest_jump(sizes)
        out.append(Recommendation(p, sizes, target_size, jump, _reason(p, sizes, target_size, jump, best, out)))
    return tuple(out)


def _reason(
    p: int,
    sizes: tuple[int, ...],
    target: int,
    jump: tuple[int, int] | None,
    best: int,
    earlier: list[Recommendation],
) -> str:
    parts = [f"uniform on {len(sizes)} of {target} sizes" + (", the most in range" if len(sizes) == best and not earlier else "")]
    if jump and jump[1] - jump[0] > 1:
        skipped = f"{jump[0] + 1}" if jump[1] - jump[0] == 2 else f"{jump[0] + 1}-{jump[1] - 1}"
        parts.append(f"largest jump {jump[0]}->{jump[1]} (skips {skipped})")
    if sizes and sizes[-1] != target:
        parts.append(f"not uniform at the target size {target}")
    same = next((r for r in earlier if r.uniform_sizes == sizes), None)
    if same is not None:
        parts.append(f"same sizes as {same.partitions} but larger: only for more consumer throughput (eq. 9)")
    else:
        rival = next((r for r in earlier if len(r.uniform_sizes) == len(sizes)), None)
        if rival is not None:
            diff_here = sorted(set(sizes) - set(rival.uniform_sizes))
            diff_there = sorted(set(rival.uniform_sizes) - set(sizes))
            parts.append(
                f"as many sizes as {rival.partitions}, with {_sizes(diff_here)} instead of {_sizes(diff_there)}"
            )
    return "; ".join(parts)


def _sizes(sizes: Iterable[int]) -> str:
    return ",".join(str(n) for n in sizes)
