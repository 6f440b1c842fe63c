from treedist.errors import TreedistError


class OffsetsError(TreedistError):
    """Root of the offset distribution's errors; messages name cluster, group and topic."""
