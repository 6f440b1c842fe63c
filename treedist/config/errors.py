from treedist.errors import TreedistError


class ConfigError(TreedistError):
    """A deployment file that cannot be read or does not validate; names file and field.

    One line, as the CLI prints it (exit 2): a line break inside a quoted key or value is
    written escaped, `\\n` for a newline (a key with a newline broke the line; found by
    tests/fuzz/test_config.py). Every character `str.splitlines` breaks at counts, \\x1e
    among them: a cluster named '\\x1e' whose value was an unset `${env:...}` reference split
    the secrets' message in two (found by the same fuzz test, 2026-12-07)."""

    def __init__(self, message: object = "", *args: object) -> None:
        if isinstance(message, str):
            message = message.translate(_ESCAPED_BREAKS)
        super().__init__(message, *args)


_ESCAPED_BREAKS = str.maketrans({c: c.encode("unicode_escape").decode("ascii")
                                 for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})
