from treedist.errors import TreedistError


class Mm2ImportError(TreedistError):
    """An MM2 configuration that cannot be imported: names the line, setting or cluster.

    Never carries a setting's value when the setting is a credential. One line, as the CLI
    prints it (exit 2): a line break inside a quoted value is written as `\\n`."""

    def __init__(self, message: object = "", *args: object) -> None:
        if isinstance(message, str):
            message = message.replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(message, *args)
