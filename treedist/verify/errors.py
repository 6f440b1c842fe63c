"""Errors of `treedist verify`; each names the cluster (and topic/partition where it applies)."""

from treedist.errors import TreedistError


class VerifyError(TreedistError):
    """Root of the verification errors."""


class ClusterReadError(VerifyError):
    """A cluster that could not be read: unreachable, or a consumer/watermark error."""


class TopicNotFound(VerifyError):
    """The topic to verify does not exist on a cluster."""


class ReadTimeout(VerifyError):
    """A partition whose read made no progress toward its start-of-read high watermark in time."""
