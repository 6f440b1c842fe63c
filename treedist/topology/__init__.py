"""Pure topology core: the tree, copy flags, distributors, and the record walk. No I/O."""

from treedist.topology.distributors import Distributor, Topology, build_topology
from treedist.topology.errors import NoActiveClusterError, PassiveRelayError, TopologyError
from treedist.topology.flags import (
    MalformedFlags,
    MalformedFlagsPolicy,
    encode_flags,
    level_bit,
    level_mask,
    parse_flags,
    should_copy,
)
from treedist.topology.naming import Naming, NamingError, TopicFormat, is_valid_topic
from treedist.topology.simulate import Hop, Simulation, simulate
from treedist.topology.tree import Inner, Leaf, Node, from_spec, leaves, to_spec

__all__ = [
    "Distributor", "Topology", "build_topology", "TopologyError", "NoActiveClusterError", "PassiveRelayError", "MalformedFlags",
    "MalformedFlagsPolicy", "encode_flags", "level_bit", "level_mask", "parse_flags",
    "should_copy", "Hop", "Simulation", "simulate", "Inner", "Leaf", "Node", "from_spec",
    "leaves", "to_spec", "Naming", "NamingError", "TopicFormat", "is_valid_topic",
]
