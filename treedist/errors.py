"""The root of every treedist exception; each package derives its own root from it."""


class TreedistError(Exception):
    """Base class of all errors raised by treedist."""


def first_line(err: object) -> str:
    """An error's first non-empty line, for one-line log messages (its repr when it has no text)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)
