"""`treedist topology show` and `treedist simulate`: the pure topology, in the terminal."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from rich.tree import Tree

from treedist.cli.common import ConfigOption, JsonOption, console, load, print_json
from treedist.topology import Inner, Leaf, Node, Topology, simulate
from treedist.topology.flags import format_bits

topology_app = typer.Typer(help="Inspect the distribution tree.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(topology_app, name="topology")
    app.command("simulate")(simulate_command)


@topology_app.command("show")
def show(config: Path = ConfigOption, as_json: bool = JsonOption) -> None:
    """Show the tree and every cluster's distributors (level, mask, bit, subtree, target).

    Example: treedist topology show -c deploy.yaml"""
    topo = load(config).topology()
    if as_json:
        print_json(
            {
                "clusters": {
                    c: [d.as_dict() for d in topo.distributors[c]] for c in topo.clusters
                },
                "passive": sorted(topo.passive),
            }
        )
        return
    width = max(topo.max_level(), 4)
    console.print(_rich_tree(topo.tree, topo, width))


def _rich_tree(node: Node, topo: Topology, width: int, parent: Tree | None = None) -> Tree:
    if isinstance(node, Leaf):
        dists = ", ".join(
            f"L{d.level} mask {format_bits(d.mask, width)} -> {d.target}" for d in topo.distributors[node.cluster]
        ) or ("passive: receives only" if node.cluster in topo.passive else "")
        label = f"[bold cyan]{node.cluster}[/]  [dim]{dists}[/]"
        if parent is None:
            return Tree(label)
        parent.add(label)
        return parent
    assert isinstance(node, Inner)
    label = f"[green]level {node.level}[/] (bit {format_bits(1 << (node.level - 1), width)})"
    branch = Tree(label) if parent is None else parent.add(label)
    for child in node.children:
        _rich_tree(child, topo, width, branch)
    return branch


def simulate_command(
    config: Path = ConfigOption,
    origin: str = typer.Option(..., "--origin", help="Cluster the record is produced on."),
    as_json: bool = JsonOption,
) -> None:
    """Walk one record from ORIGIN through the distributors: hops and receipts per cluster.

    Example: treedist simulate -c deploy.yaml --origin c1"""
    deployment = load(config)
    deployment.cluster(origin)  # a clear error for an unknown cluster
    topo = deployment.topology()
    result = simulate(topo, origin)
    if as_json:
        print_json(
            {
                "origin": origin,
                "hops": [h.as_dict() for h in result.hops],
                "receipts": result.receipts,
                "exactly_once": result.exactly_once,
                "passive_origin": result.local,
                "copies": len(result.hops),
            }
        )
        return
    width = max(topo.max_level(), 4)
    hops = Table(title=f"record produced on {origin}")
    for col in ("from", "to", "level", "flags before", "flags after"):
        hops.add_column(col)
    for h in result.hops:
        hops.add_row(h.source, h.target, str(h.level), format_bits(h.flags_before, width), format_bits(h.flags_after, width))
    console.print(hops)
    receipts = Table(title="times each cluster receives the record")
    receipts.add_column("cluster")
    receipts.add_column("received")
    receipts.add_column("expected")  # 0 beside a passive origin: its records stay on it
    for cluster, count in result.receipts.items():
        should = result.should_receive(cluster)
        receipts.add_row(cluster, str(count), str(should), style=None if count == should else "red")
    console.print(receipts)
    verdict = ("NOT exactly once" if not result.exactly_once else
               f"{origin} is passive: it stays there" if result.local else "every cluster receives it exactly once")
    console.print(f"{len(result.hops)} copies; {verdict}")
