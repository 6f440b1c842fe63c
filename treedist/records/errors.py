from treedist.errors import TreedistError


class PipelineError(TreedistError):
    """Root of the distributor pipeline's errors."""


class MalformedFlagsError(PipelineError):
    """A copy-flag header that cannot be parsed, under the `fail` policy; names the record."""


class OversizedRecord(PipelineError):
    """A record larger than distributor.max_record_bytes; names the record."""
