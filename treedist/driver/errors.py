from treedist.errors import TreedistError


class DriverError(TreedistError):
    """Root of the driver runtime's errors (treedist.driver): background jobs, old
    checkpoints, units, the schema distributor, the planner's tasks. The CLI maps it like
    every package's root: one line on stderr, exit 2."""


class UnknownUnit(DriverError):
    """A unit the deployment does not have (`Units.start_unit`); names the unit."""
