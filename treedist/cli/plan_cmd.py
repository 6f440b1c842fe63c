"""`treedist plan cluster|partitions|limits`: the thesis's sizing model (chapter 5), in the terminal.

The math is in `treedist.sizing` (pure), the broker reads of `--from-deployment` in
`treedist.sizing.sample`, the heatmap in `treedist.sizing.heatmap`; this module parses
options and prints tables or JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from treedist.cli.common import JsonOption, console, load, print_json
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
from treedist.sizing.errors import InvalidSizingInput
from treedist.sizing.limits import THESIS_LATENCY, THESIS_TOPIC_COUNTS, LimitTable, Restriction
from treedist.sizing.measure import TopicRate, busiest
from treedist.sizing.partitions import DEFAULT_SEARCH_CEILING
from treedist.sizing.uniformity import DEFAULT_TARGET_SIZE, DEFAULT_TOP
from treedist.sizing.heatmap import draw_heatmap
from treedist.sizing.sample import measure_deployment

plan_app = typer.Typer(
    help="Size clusters and topics with the thesis's model (eqs. 1-11): servers, partition bounds, limit tables.",
    no_args_is_help=True,
)

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
    """Max topic throughput (eq. 3), per-server storage and network needs (4, 5), fewest servers for T_T.

    Example: treedist plan cluster --throughput 100 --storage-throughput 200 --network-throughput 125 -r 3 -n 5"""
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
    """Partition bounds (eqs. 6-11), the feasible range, and counts that keep load uniform up to --target-size.

    Example: treedist plan partitions -n 5 -r 3 --throughput 100 --consumer-throughput 10 --max-latency 0.1"""
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
    """The partition-limit tables of chapter 5.3 (eqs. 10, 11) for both controllers; defaults reproduce the thesis.

    Example: treedist plan limits -t 100 -t 1000"""
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
