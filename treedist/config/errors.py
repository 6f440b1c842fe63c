from treedist.errors import TreedistError


class ConfigError(TreedistError):
    """A deployment file that cannot be read or does not validate; names file and field."""
