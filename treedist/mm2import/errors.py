from treedist.errors import TreedistError


class Mm2ImportError(TreedistError):
    """An MM2 configuration that cannot be imported: names the line, setting or cluster.

    Never carries a setting's value when the setting is a credential."""
