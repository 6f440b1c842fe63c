from treedist.errors import TreedistError


class TopologyError(TreedistError):
    """A tree or a target override that breaks the distribution model's rules."""


class NoActiveClusterError(TopologyError):
    """Every cluster is passive: no records would be distributed (the one place this is checked)."""


class PassiveRelayError(TopologyError):
    """A distributor that would copy to a passive cluster that would have to relay the copy."""

    def __init__(self, cluster: str, message: str):
        super().__init__(message)
        self.cluster = cluster  # the passive cluster (config errors are placed at its field)


class SpecError(TopologyError):
    """A tree as the file writes it that is not a tree of the deployment's clusters; names where."""
