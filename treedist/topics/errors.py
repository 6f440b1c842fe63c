from treedist.errors import TreedistError


class TopicSyncError(TreedistError):
    """Root of topic metadata sync's errors; messages name the cluster, topic and key."""
