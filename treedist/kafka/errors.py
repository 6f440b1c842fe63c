from treedist.errors import TreedistError


class KafkaLayerError(TreedistError):
    """Root of the Kafka client helpers' errors."""


class ClusterUnreachable(KafkaLayerError):
    """A cluster that did not answer metadata within the bounded retries."""


class TopicMissing(KafkaLayerError):
    """A topic (or partition) the distribution needs that is absent on a cluster."""


class KafkaRefused(KafkaLayerError):
    """A broker refused a request in a way retrying cannot change (e.g. not authorised)."""


class ReadPositionError(KafkaLayerError):
    """A read position or range that cannot be parsed or planned; names topic, partition and offsets."""
