"""The root of every treedist exception; each package derives its own root from it."""


class TreedistError(Exception):
    """Base class of all errors raised by treedist."""
