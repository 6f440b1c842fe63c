from treedist.errors import TreedistError


class OpsError(TreedistError):
    """Root of the operations layer's errors (status, metrics, web view, logs)."""
