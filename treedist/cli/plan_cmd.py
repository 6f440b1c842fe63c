"""`treedist plan cluster|partitions|limits`: the thesis's sizing model (chapter 5), in the terminal.

The math is in `treedist.sizing` (pure); this module parses options, reads brokers for
`--from-deployment`, prints tables or JSON and draws the uniformity heatmap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from treedist.cli.common import JsonOption, console, load, print_json
from treedist.config import Deployment
from treedist.sizing import (
    ClusterInputs,
    Controller,
    PartitionInputs,
    PartitionPlan,
    SizingError,
    Timings,
    limit_tables,
    plan_cluster,
    plan_partitions,
)
from treedist.sizing.errors import InvalidSizingInput, require_positive
from treedist.sizing.limits import THESIS_LATENCY, THESIS_TOPIC_COUNTS, LimitTable, Restriction
from treedist.sizing.measure import TopicRate, busiest, topic_rates
from treedist.sizing.partitions import DEFAULT_SEARCH_CEILING, is_balanced
from treedist.sizing.uniformity import DEFAULT_TARGET_SIZE, DEFAULT_TOP, uniformity_grid

plan_app = typer.Typer(
    help="Size clusters and topics with the thesis's model (eqs. 1-11): servers, partition bounds, limit tables.",
    no_args_is_help=True,
)

PLOT_MAX_COUNTS = 240  # columns of the heatmap at most

_D = Timings()
TElectOption = typer.Option(_D.t_elect, "--t-elect", help="Seconds to elect one partition's leader (thesis: 0.005).")
TMetaOption = typer.Option(_D.t_meta, "--t-meta", help="Seconds to fetch one partition's metadata from ZooKeeper (thesis: 0.002; 0 for KRaft).")
TReplOption = typer.Option(_D.t_repl, "--t-repl", help="Seconds to replicate one partition to one peer (thesis: 0.00002).")


def register(app: typer.Typer) -> None:
    app.add_typer(plan_app, name="plan")


# -- plan cluster ---------------------------------------------------------------------------


@plan_app.command("cluster")
def cluster(
    throughput: float = typer.Option(..., "--throughput", help="T_T: total topic throughput to carry (any unit; all throughputs share it)."),
    storage_throughput: float = typer.Option(..., "--storage-throughput", help="T_S: one server's storage throughput."),
    network_throughput: float = typer.Option(..., "--network-throughput", help="T_N: one server's network throughput."),
    replication_factor: int = typer.Option(..., "--replication-factor", "-r", help="r: the topic's replication factor."),
    consumer_groups: int = typer.Option(1, "--consumer-groups", "-g", help="g: independent consumer groups reading the topic."),
    servers: int = typer.Option(..., "--servers", "-n", help="n: servers in the cluster."),
    unit: str = typer.Option("MB/s", "--unit", help="Label of the throughput unit, for display only."),
    as_json: bool = JsonOption,
) -> None:
    """Max topic throughput (eq. 3), per-server storage and network needs (4, 5), fewest servers for T_T."""
    plan = plan_cluster(
        ClusterInputs(throughput, storage_throughput, network_throughput, replication_factor, consumer_groups, servers)
    )
    if as_json:
        print_json({**plan.as_dict(), "unit": unit})
        return
    i = plan.inputs
    table = Table(title=f"cluster of {i.servers} servers, r={i.replication_factor}, g={i.consumer_groups}, T_T={i.throughput:g} {unit}")
    for col in ("quantity", "eq.", "value", "note"):
        table.add_column(col)
    table.add_row("max T_T by storage", "1", f"{plan.max_throughput_storage:g} {unit}", "T_S n / r")
    table.add_row("max T_T by network", "2", f"{plan.max_throughput_network:g} {unit}", "T_N n / (r + g)")
    table.add_row("max topic throughput", "3", f"{plan.max_throughput:g} {unit}", f"limited by {plan.limited_by}")
    table.add_row("storage each server needs", "4", f"{plan.required_storage_throughput:g} {unit}", f"has {i.storage_throughput:g}")
    table.add_row("network each server needs", "5", f"{plan.required_network_throughput:g} {unit}", f"has {i.network_throughput:g}")
    table.add_row("fewest servers for T_T", "4, 5", str(plan.min_servers), plan.min_servers_reason)
    console.print(table)
    if plan.fits:
        console.print(f"[green]{i.servers} servers carry {i.throughput:g} {unit}[/]")
    else:
        console.print(f"[red]{i.servers} servers do not carry {i.throughput:g} {unit}: need {plan.min_servers}[/]")


# -- plan partitions ------------------------------------------------------------------------


@plan_app.command("partitions")
def partitions(
    servers: Optional[int] = typer.Option(None, "--servers", "-n", help="n: servers in the cluster (with --from-deployment: measured)."),
    replication_factor: Optional[int] = typer.Option(None, "--replication-factor", "-r", help="r: replication factor (with --from-deployment: measured)."),
    topics: Optional[int] = typer.Option(None, "--topics", "-t", help="t: topics in the cluster, each with about p partitions (default 1; with --from-deployment: counted)."),
    throughput: Optional[float] = typer.Option(None, "--throughput", help="T_T: the topic's total throughput, same unit as --consumer-throughput (eq. 9)."),
    consumer_throughput: Optional[float] = typer.Option(None, "--consumer-throughput", help="T_C: one consumer's throughput (eq. 9)."),
    max_latency: Optional[float] = typer.Option(None, "--max-latency", help="Tolerable end-to-end latency from replication, seconds (eq. 10)."),
    max_unavailability: Optional[float] = typer.Option(None, "--max-unavailability", help="Tolerable unavailability after an unclean broker failure, seconds (eq. 11)."),
    max_partitions: Optional[int] = typer.Option(None, "--max-partitions", help=f"Your own ceiling on p. Without any upper bound, counts up to max({DEFAULT_SEARCH_CEILING}, 2 x lower bound) are searched."),
    controller: Controller = typer.Option(Controller.KRAFT, "--controller", help="Whose eq. (11) bound sets the range: kraft (quorum, t_meta = 0) or zookeeper. Both are shown."),
    t_elect: float = TElectOption,
    t_meta: float = TMetaOption,
    t_repl: float = TReplOption,
    target_size: int = typer.Option(DEFAULT_TARGET_SIZE, "--target-size", help="Largest cluster size to keep load uniform on."),
    top: int = typer.Option(DEFAULT_TOP, "--top", help="How many recommended counts to show."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a PNG heatmap of uniformity per partition count and cluster size."),
    from_deployment: bool = typer.Option(
        False,
        "--from-deployment",
        help="Measure T_T on the running deployment (-c): end offsets of its selected topics on each cluster, sampled "
        "--window-seconds apart; the busiest topic's rate is T_T (records/s, or bytes/s with --record-bytes). "
        "The control plane's load reports do not exist yet; once they do they will be the source.",
    ),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Deployment YAML file (for --from-deployment)."),
    window_seconds: float = typer.Option(10.0, "--window-seconds", help="Sampling window of --from-deployment, seconds."),
    record_bytes: Optional[float] = typer.Option(None, "--record-bytes", help="Average record size in bytes: measure T_T in bytes/s instead of records/s."),
    as_json: bool = JsonOption,
) -> None:
    """Partition bounds (eqs. 6-11), the feasible range, and counts that keep load uniform up to --target-size."""
    measured: list[TopicRate] | None = None
    if from_deployment:
        if config is None:
            raise InvalidSizingInput("config", "--from-deployment needs the deployment file: -c/--config FILE")
        if throughput is not None:
            raise InvalidSizingInput("throughput", "--throughput and --from-deployment both set T_T: give one")
        if consumer_throughput is None:
            unit = "bytes/s" if record_bytes is not None else "records/s"
            raise InvalidSizingInput("consumer_throughput", f"--from-deployment measures T_T in {unit}: give --consumer-throughput in {unit}")
        sample = measure_deployment(load(config), window_seconds, record_bytes)
        measured = sample.rates
        top_rate = busiest(measured)
        if top_rate is None:
            raise SizingError(f"{config}: none of the deployment's selected topics exists on any cluster")
        throughput = top_rate.bytes_per_second if record_bytes is not None else top_rate.records_per_second
        servers = servers if servers is not None else sample.brokers[top_rate.cluster]
        replication_factor = replication_factor if replication_factor is not None else sample.replication[(top_rate.cluster, top_rate.topic)]
        topics = topics if topics is not None else max(sample.topic_counts.values())
    if servers is None:
        raise InvalidSizingInput("servers", "servers is required (--servers N), unless --from-deployment measures it")
    if replication_factor is None:
        raise InvalidSizingInput("replication_factor", "replication_factor is required (--replication-factor R), unless --from-deployment measures it")
    plan = plan_partitions(
        PartitionInputs(
            servers=servers,
            replication_factor=replication_factor,
            topics=topics if topics is not None else 1,
            throughput=throughput,
            consumer_throughput=consumer_throughput,
            max_latency=max_latency,
            max_unavailability=max_unavailability,
            max_partitions=max_partitions,
            controller=controller,
            timings=Timings(t_elect, t_meta, t_repl),
            target_size=target_size,
            top=top,
        )
    )
    if plot is not None:
        draw_heatmap(plan, plot)
    if as_json:
        data = plan.as_dict()
        if measured is not None:
            data["measured"] = {
                "unit": "bytes/s" if record_bytes is not None else "records/s",
                "window_seconds": window_seconds,
                "rates": [r.as_dict() for r in measured],
            }
        if plot is not None:
            data["plot"] = str(plot)
        print_json(data)
        return
    if measured is not None:
        _print_rates(measured, record_bytes)
    _print_partition_plan(plan)
    if plot is not None:
        console.print(f"heatmap written to {plot}")


def _print_rates(rates: list[TopicRate], record_bytes: float | None) -> None:
    table = Table(title="measured T_T (end offsets over the window)")
    for col in ("cluster", "topic", "partitions", "records", "seconds", "records/s", "bytes/s"):
        table.add_column(col)
    top_rate = busiest(rates)
    for r in rates:
        table.add_row(
            r.cluster, r.topic, str(r.partitions), str(r.records), f"{r.seconds:.2f}", f"{r.records_per_second:.1f}",
            f"{r.bytes_per_second:.0f}" if r.bytes_per_second is not None else "-",
            style="bold" if r is top_rate else None,
        )
    console.print(table)
    if top_rate is not None:
        console.print(f"T_T = busiest: {top_rate.topic} on {top_rate.cluster}")


def _print_partition_plan(plan: PartitionPlan) -> None:
    i = plan.inputs
    bounds = Table(title=f"partition bounds: n={i.servers}, r={i.replication_factor}, t={i.topics}")
    for col in ("bound", "eq.", "controller", "p", "why"):
        bounds.add_column(col)
    for b in plan.lower_bounds:
        bounds.add_row(f"lower: {b.name}", b.equation, "", f">= {b.value}", b.detail)
    bounds.add_row("lower: balanced replicas", "7", "", f"p r = 0 mod {i.servers}", f"smallest: {plan.smallest_balanced}")
    for b in plan.upper_bounds:
        dim = b.controller is not None and b.controller is not i.controller
        bounds.add_row(
            f"upper: {b.name}", b.equation, b.controller.value if b.controller else "",
            "none" if b.value is None else f"<= {b.value}", b.detail, style="dim" if dim else None,
        )
    console.print(bounds)
    upper = "unbounded" if plan.upper is None else str(plan.upper)
    if not plan.feasible:
        console.print(
            f"[red]infeasible for {i.controller.value}: lower bound {plan.smallest_balanced} (balanced) "
            f"> upper bound {plan.upper}[/]: relax a tolerance, add servers or lower T_T / raise T_C"
        )
        return
    console.print(f"feasible range ({i.controller.value}): {plan.lower} <= p <= {upper}; searched {plan.searched[0]}..{plan.searched[1]}")
    recs = Table(title=f"recommended counts: uniform load on the most cluster sizes up to {i.target_size}")
    recs.add_column("p", justify="right")
    recs.add_column("uniform on sizes", no_wrap=True)
    recs.add_column("latency (10)", justify="right")
    recs.add_column(f"unavail. {i.controller.value} (11)", justify="right")
    recs.add_column("reason")
    for c in plan.candidates:
        r = c.recommendation
        recs.add_row(
            str(r.partitions), ",".join(map(str, r.uniform_sizes)),
            f"{c.latency * 1000:.3g} ms", f"{c.unavailability[i.controller]:.3g} s", r.reason,
        )
    console.print(recs)


# -- heatmap --------------------------------------------------------------------------------


def draw_heatmap(plan: PartitionPlan, path: Path) -> None:
    """Uniformity (least / most loaded broker, in leaders) per partition count (x) and cluster
    size (y). Uniform cells (n divides p) are solid orange, the others shaded by how close
    they come; counts outside the feasible range or unbalanced (eq. 7) are washed out;
    recommended counts are labelled on top."""
    import matplotlib

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


# -- --from-deployment: end offsets over a window -----------------------------------------


@dataclass
class DeploymentSample:
    """What `measure_deployment` read: rates, and per cluster the broker and topic counts."""

    rates: list[TopicRate] = field(default_factory=list)
    brokers: dict[str, int] = field(default_factory=dict)
    topic_counts: dict[str, int] = field(default_factory=dict)  # non-internal topics per cluster
    replication: dict[tuple[str, str], int] = field(default_factory=dict)  # (cluster, topic) -> fewest replicas


def measure_deployment(deployment: Deployment, window_seconds: float, record_bytes: float | None) -> DeploymentSample:
    """Sample the selected topics' end offsets on every cluster, wait, sample again (driver side)."""
    require_positive("window_seconds", window_seconds)
    if record_bytes is not None:
        require_positive("record_bytes", record_bytes)
    from treedist.kafka.admin import admin_client, metadata
    from treedist.kafka.offsets import OffsetReader

    sample = DeploymentSample()
    admins, partitions, before, started = {}, {}, {}, {}
    for name, cluster_config in deployment.clusters.items():
        admin = admin_client(cluster_config.client_config())
        md = metadata(name, admin)
        admins[name] = OffsetReader(cluster_config.client_config(), cluster=name, timeout_s=15.0, read_committed=False)
        sample.brokers[name] = len(md.brokers)
        sample.topic_counts[name] = sum(1 for t in md.topics if not t.startswith("__"))
        selected = {t: m for t, m in md.topics.items() if m.error is None and deployment.selects(name, t) is not None}
        for topic, meta in selected.items():
            sample.replication[(name, topic)] = min((len(p.replicas) for p in meta.partitions.values()), default=1)
        partitions[name] = [(t, p) for t, m in selected.items() for p in m.partitions]
        started[name] = time.monotonic()
        before[name] = _end_offsets(name, admins[name], partitions[name])
    time.sleep(window_seconds)
    for name, reader in admins.items():
        after = _end_offsets(name, reader, partitions[name])
        elapsed = time.monotonic() - started[name]
        sample.rates.extend(topic_rates(name, before[name], after, elapsed, record_bytes))
    return sample


def _end_offsets(cluster: str, reader, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from treedist.kafka import KafkaLayerError
    from treedist.kafka.offsets import TopicPartitionKey

    try:
        latest = reader.offsets([TopicPartitionKey(t, p) for t, p in partitions], "latest")
    except KafkaLayerError as err:
        raise SizingError(f"cluster {cluster!r}: cannot read end offsets: {err}") from None
    return {(tp.topic, tp.partition): offset for tp, offset in latest.items()}


# -- plan limits ----------------------------------------------------------------------------


@plan_app.command("limits")
def limits(
    topics: Optional[list[int]] = typer.Option(None, "--topics", "-t", help=f"Topic counts t (repeat the option; default {', '.join(map(str, THESIS_TOPIC_COUNTS))})."),
    unavailability: Optional[list[float]] = typer.Option(None, "--unavailability", help="Tolerable unavailability, seconds (repeat; default: the thesis's, per controller)."),
    latency: Optional[list[float]] = typer.Option(None, "--latency", help="Tolerable end-to-end latency, seconds (repeat; default 0.001 0.01 0.1 1)."),
    servers: int = typer.Option(5, "--servers", "-n", help="n (thesis: 5)."),
    replication_factor: int = typer.Option(3, "--replication-factor", "-r", help="r (thesis: 3)."),
    controller: Optional[Controller] = typer.Option(None, "--controller", help="Only this controller (default: both)."),
    t_elect: float = TElectOption,
    t_meta: float = TMetaOption,
    t_repl: float = TReplOption,
    as_json: bool = JsonOption,
) -> None:
    """The partition-limit tables of chapter 5.3 (eqs. 10, 11) for both controllers; defaults reproduce the thesis."""
    tables = limit_tables(
        topic_counts=topics or THESIS_TOPIC_COUNTS,
        unavailability=unavailability or None,
        latency=latency or THESIS_LATENCY,
        servers=servers,
        replication_factor=replication_factor,
        timings=Timings(t_elect, t_meta, t_repl),
        controllers=[controller] if controller else list(Controller),
    )
    if as_json:
        print_json({"tables": [t.as_dict() for t in tables]})
        return
    for table in tables:
        console.print(_limit_table(table))


def _limit_table(table: LimitTable) -> Table:
    name = {Controller.ZOOKEEPER: "ZooKeeper controller", Controller.KRAFT: "quorum (KRaft) controller, t_meta = 0"}
    unit = "max unavailability (s)" if table.restriction is Restriction.UNAVAILABILITY else "max latency (s)"
    out = Table(
        title=f"{name[table.controller]}: {table.restriction.value} (eq. {table.restriction.equation}), "
        f"n={table.servers}, r={table.replication_factor}"
    )
    for col in ("total topics", unit, "partition count limit"):
        out.add_column(col, justify="right")
    for row in table.rows:
        out.add_row(str(row.topics), f"{row.tolerance:g}", "unbounded" if row.limit is None else str(row.limit))
    return out
