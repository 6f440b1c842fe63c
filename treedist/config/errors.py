from treedist.errors import TreedistError


class ConfigError(TreedistError):
    """A deployment file that cannot be read or does not validate; names file and field.

    One line, as the CLI prints it (exit 2): a line break inside a quoted key or value is
    written as `\\n` (a key with a newline broke the line; found by tests/fuzz/test_config.py)."""

    def __init__(self, message: object = "", *args: object) -> None:
        if isinstance(message, str):
            message = message.replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(message, *args)
