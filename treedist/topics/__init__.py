"""Topic metadata sync: the distributed topics exist on every cluster with the same partition
count and topic-level configs (docs/topics.md).

`reconcile` is the pure decision core (observed state + previous pass -> actions and
conflicts); `treedist.kafka.topic_admin` does the Admin API I/O; `sync` runs one pass over a
deployment; `job` is the driver-side background job that repeats it.
"""

from treedist.topics.errors import TopicSyncError

__all__ = ["TopicSyncError"]
