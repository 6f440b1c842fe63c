"""Admin helpers over confluent-kafka: metadata with bounded retries, topic creation/matching.

Runs on the driver. Every call names the cluster in its errors.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewPartitions, NewTopic

from treedist.kafka.errors import ClusterUnreachable, KafkaLayerError, TopicMissing
from treedist.kafka import clients
from treedist.kafka.retry import with_retries


def admin_client(client_config: Mapping[str, object]) -> AdminClient:
    """An AdminClient of the cluster of `client_config` (`treedist.kafka.clients.admin`)."""
    return clients.admin(client_config)


def metadata(cluster: str, admin: AdminClient, attempts: int = 5, timeout: float = 5.0) -> ClusterMetadata:
    """list_topics with bounded retries and exponential backoff; ClusterUnreachable after that."""
    return with_retries(
        lambda: admin.list_topics(timeout=timeout),
        what=f"cluster {cluster!r} did not answer metadata",
        error=ClusterUnreachable,
        attempts=attempts,
        first_backoff_s=0.2,
        max_backoff_s=5.0,
    )


def answers(admin: AdminClient, timeout: float = 2.0) -> bool:
    """Does the cluster of `admin` answer now? One DescribeCluster request (the brokers and
    the controller), bounded by `timeout`; never raises.

    Why not metadata: a cluster's full metadata lists every topic and partition, and a
    liveness check every few seconds paid for all of them (200 topics of 3 partitions: 2.3 ms
    of the caller's CPU and 7.3 ms of the broker's per request, against 0.3 and 1.0 ms;
    docs/performance.md, "The health probe"). A cluster that answered with an error of its
    own (a broker without DescribeCluster, Kafka before 2.8; a Kafka-compatible server that
    refuses it) is asked for metadata instead: only librdkafka's own failures (transport,
    timeout, TLS, authentication: negative codes) or no answer in time say it is down."""
    try:
        admin.describe_cluster(request_timeout=timeout).result(timeout + 1.0)
        return True
    except KafkaException as err:
        code = err.args[0].code() if err.args and isinstance(err.args[0], KafkaError) else None
        if code is None or (code < 0 and code != KafkaError._UNSUPPORTED_FEATURE):
            return False
    except concurrent.futures.TimeoutError:  # librdkafka settles the request at its timeout
        return False
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False


def partition_counts(
    cluster: str,
    admin: AdminClient,
    select: Callable[[str], bool] | None = None,
    attempts: int = 5,
    timeout: float = 5.0,
) -> dict[str, int]:
    """topic -> partition count, for the topics `select` accepts (all when None)."""
    return _counts(metadata(cluster, admin, attempts=attempts, timeout=timeout), select)


def _counts(md: ClusterMetadata, select: Callable[[str], bool] | None = None) -> dict[str, int]:
    return {
        name: len(t.partitions)
        for name, t in md.topics.items()
        if t.error is None and (select is None or select(name))
    }


def ensure_topics(
    cluster: str,
    admin: AdminClient,
    topics: Mapping[str, int],
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create missing topics with the given partition counts; grow ones with fewer partitions.

    Replication factor: 1 on a single-broker cluster, else the broker default (-1).
    """
    md = metadata(cluster, admin)
    existing = _counts(md)
    replication = 1 if len(md.brokers) == 1 else -1
    new = [NewTopic(t, num_partitions=n, replication_factor=replication, config=dict(config or {}))
           for t, n in topics.items() if t not in existing]
    grow = [NewPartitions(t, n) for t, n in topics.items() if t in existing and existing[t] < n]
    futures = {}
    if new:
        futures.update(admin.create_topics(new, operation_timeout=timeout))
    if grow:
        futures.update(admin.create_partitions(grow, operation_timeout=timeout))
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaLayerError(f"cluster {cluster!r}: cannot create topic {topic!r}: {err}") from None
    wait_for_topics(cluster, admin, topics, timeout)


def wait_for_topics(cluster: str, admin: AdminClient, topics: Mapping[str, int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        counts = partition_counts(cluster, admin)
        short = {t: n for t, n in topics.items() if counts.get(t, 0) < n}
        if not short:
            return
        if time.monotonic() > deadline:
            raise TopicMissing(f"cluster {cluster!r}: topics not ready after {timeout}s: {sorted(short)}")
        time.sleep(0.1)



def groups_committed(admin: AdminClient, groups: list[str], timeout: float = 10.0) -> dict:
    """group -> its committed offsets (confluent-kafka's ConsumerGroupTopicPartitions), one
    request per group, sent at once; read only after every group's coordinator answered a
    DescribeGroups: librdkafka (2.16 and master, confluentinc/librdkafka#5040) crashes the
    process with SIGSEGV when an admin client's OffsetFetch is answered NOT_COORDINATOR or
    COORDINATOR_NOT_AVAILABLE (it re-queries the coordinator through a consumer group an admin
    client has not), which Apache Kafka answers while it loads `__consumer_offsets` (a fresh
    cluster, a restart). DescribeGroups gets such errors as the group's result; once it
    succeeds the coordinator is loaded (a move in between, within milliseconds, is the one
    case left). Raises KafkaException while a coordinator is not ready: callers retry
    (bounded) or report."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    for future in admin.describe_consumer_groups(groups, request_timeout=timeout).values():
        future.result(timeout=timeout)
    futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)], request_timeout=timeout)[g]
               for g in groups}
    return {g: f.result(timeout=timeout) for g, f in futures.items()}


def group_committed(admin: AdminClient, group: str, timeout: float = 10.0):
    """`groups_committed` of one group."""
    return groups_committed(admin, [group], timeout)[group]
