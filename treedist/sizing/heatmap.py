"""The partition-count heatmap of `treedist plan partitions --plot` (matplotlib, Agg; driver).

Moved out of the CLI: the CLI parses and prints, drawing belongs with the sizing model.
"""

from __future__ import annotations

from pathlib import Path

from treedist.sizing import PartitionPlan
from treedist.sizing.partitions import is_balanced
from treedist.sizing.uniformity import uniformity_grid

PLOT_MAX_COUNTS = 240  # columns of the heatmap at most

def draw_heatmap(plan: PartitionPlan, path: Path) -> None:
    """Uniformity (least / most loaded broker, in leaders) per partition count (x) and cluster
    size (y). Uniform cells (n divides p) are solid orange, the others shaded by how close
    they come; counts outside the feasible range or unbalanced (eq. 7) are washed out;
    recommended counts are labelled on top."""
    try:
        import matplotlib
    except ImportError:  # an extra: pip install 'treedist-kafka[plot]'
        from treedist.sizing.errors import SizingError

        raise SizingError("--plot needs matplotlib: pip install 'treedist-kafka[plot]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    i = plan.inputs
    lo, hi = 1, plan.searched[1]
    if hi - lo + 1 > PLOT_MAX_COUNTS:
        lo = max(1, min(plan.lower, hi - PLOT_MAX_COUNTS + 1))
        hi = lo + PLOT_MAX_COUNTS - 1
    counts = list(range(lo, hi + 1))
    sizes = list(range(1, i.target_size + 1))
    grid = np.array(uniformity_grid(counts, sizes))
    upper = plan.upper if plan.upper is not None else hi
    usable = np.array(
        [plan.feasible and plan.lower <= p <= upper and is_balanced(p, i.replication_factor, i.servers) for p in counts]
    )

    width = min(20.0, max(9.0, 3.0 + 0.055 * len(counts)))
    height = max(4.0, 2.0 + 0.33 * len(sizes))
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    extent = (lo - 0.5, hi + 0.5, sizes[-1] + 0.5, 0.5)
    show = dict(aspect="auto", interpolation="nearest", extent=extent)
    blues = ListedColormap(plt.get_cmap("Blues")(np.linspace(0.0, 0.85, 256)))
    shades = ax.imshow(np.ma.masked_where(grid >= 1.0, grid), cmap=blues, vmin=0, vmax=1, **show)
    ax.imshow(np.ma.masked_where(grid < 1.0, grid), cmap=ListedColormap(["#f28e2b"]), vmin=0, vmax=1, **show)
    washed = np.ma.masked_where(np.broadcast_to(usable, grid.shape), np.ones_like(grid))
    ax.imshow(washed, cmap=ListedColormap(["white"]), alpha=0.65, vmin=0, vmax=1, **show)

    ax.set_xlabel("partitions per topic (p)")
    ax.set_ylabel("cluster size (servers)")
    ax.set_yticks(sizes)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=24, integer=True))
    recommended = [c.recommendation.partitions for c in plan.candidates if lo <= c.recommendation.partitions <= hi]
    top_axis = ax.secondary_xaxis("top")
    top_axis.set_xticks(recommended)
    top_axis.set_xticklabels([str(p) for p in recommended], rotation=90, fontsize=8, color="crimson")
    top_axis.tick_params(color="crimson", length=6)
    bar = fig.colorbar(shades, ax=ax, pad=0.01)
    bar.set_label("least / most loaded broker (leaders)")
    ax.legend(
        handles=[
            Patch(color="#f28e2b", label="uniform: n divides p"),
            Patch(facecolor="white", edgecolor="grey", label="outside feasible range or unbalanced (eq. 7)"),
        ],
        loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False,
    )
    bound = "unbounded" if plan.upper is None else str(plan.upper)
    ax.set_title(
        f"load uniformity per partition count and cluster size; n={i.servers}, r={i.replication_factor}, "
        f"feasible {plan.lower}..{bound} ({i.controller.value}); recommended counts in red",
        fontsize=9, pad=30,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
