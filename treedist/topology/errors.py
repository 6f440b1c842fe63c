from treedist.errors import TreedistError


class TopologyError(TreedistError):
    """A tree or a target override that breaks the distribution model's rules."""
