from treedist.errors import TreedistError


class LocalClusterError(TreedistError):
    """A local broker that would not start, answer metadata, or stop."""
