"""Checks before any distributor starts, on the driver.

`check_clients` (before Spark starts): every cluster's client settings, as the distributors
will use them, are accepted by librdkafka. `check_connections` (before Spark starts, `treedist
run -c`): every cluster answers with those settings; a refused login, a failed TLS handshake or
an unreachable cluster is one line naming the cluster and the cause. `preflight` (before the
queries start): every cluster answers, and every distributed topic of a source exists on its
target (under the target's name for it) with at least as many partitions (copies keep the
partition number). In `distributor.delivery: exactly_once`, `check_connections` and
`preflight` also check that every cluster runs transactions (`check_transactions`); a
worker (`treedist worker`, at start and before applying a live config) checks those that
answer (`check_answering_transactions`).
"""

from __future__ import annotations

from typing import Callable, TypeVar

from confluent_kafka import KafkaError
from pydantic import SecretStr

from treedist.config import Deployment
from treedist.kafka import TopicMissing, admin_client, partition_counts
from treedist.kafka.clients import SettingConflict
from treedist.kafka.reach import REACH_TIMEOUT_S, ClusterConnectFailed, check_reachable
from treedist.kafka.settings_check import ClientSettingError, check_client_settings
from treedist.records.plan import consumer_settings, producer_settings
from treedist.records.transactions import (CHECK_LATER, EXACTLY_ONCE, REFUSALS, TransactionsUnsupported,
                                           clusters_to_probe, probe_transactions, transactions_verdict)

E = TypeVar("E", bound=Exception)


def check_clients(deployment: Deployment) -> None:
    """Build every cluster's consumer, producer and admin client with the distributors' own
    settings and destroy them; raise ClientSettingError naming the cluster and the key (a setting
    that contradicts replay safety included). Credentials never appear in the message."""
    for name, cluster in deployment.clusters.items():
        client = cluster.client_config()
        secrets = [v.get_secret_value() for v in cluster.client.values() if isinstance(v, SecretStr)]
        user_keys = set(cluster.client)
        try:
            merged = {**consumer_settings(client), **producer_settings(client, deployment.distributor.delivery_timeout_ms)}
        except SettingConflict as err:
            raise ClientSettingError(f"cluster {name!r}: clusters.{name}.client: {err}") from None
        # Not a librdkafka setting: confluent-kafka's own, which the sink turns into a bool.
        merged.pop("delivery.report.only.error", None)
        if deployment.distributor.delivery == EXACTLY_ONCE and merged.get("isolation.level") != "read_committed":
            # an aborted copy read as if committed would travel a second hop
            raise ClientSettingError(f"cluster {name!r}: clusters.{name}.client.isolation.level="
                                     f"{merged.get('isolation.level')!r}: distributor.delivery: exactly_once reads "
                                     f"with 'read_committed' only")
        try:
            check_client_settings(name, merged, user_keys)
        except ClientSettingError as err:
            message = str(err)
            for secret in secrets:
                if secret:
                    message = message.replace(secret, "***")
            raise ClientSettingError(message) from None


def check_connections(deployment: Deployment, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Connect to every cluster at once (threads: an unreachable one costs `timeout_s` once, not
    per cluster) with its own settings; raise ClusterConnectFailed naming every cluster that
    fails and why, on one line, in the deployment's order."""
    failures = _each_cluster(deployment, lambda name: check_reachable(name, deployment.clusters[name].client_config(),
                                                                      timeout_s), ClusterConnectFailed, "reach")
    if failures:
        raise ClusterConnectFailed("; ".join(str(f) for f in failures), failures[0].cause)
    check_transactions(deployment, timeout_s)


def check_transactions(deployment: Deployment, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """In exactly_once only (driver): every cluster answers an InitProducerId with a probe
    transactional.id, all at once (threads); raise TransactionsUnsupported naming every
    cluster that does not, on one line, in the deployment's order."""
    if deployment.distributor.delivery != EXACTLY_ONCE:
        return

    def probe(name: str) -> None:
        settings = producer_settings(deployment.clusters[name].client_config(), deployment.distributor.delivery_timeout_ms)
        probe_transactions(name, settings, timeout_s)

    failures = _each_cluster(deployment, probe, TransactionsUnsupported, "transactions")
    if failures:
        raise TransactionsUnsupported("; ".join(str(f) for f in failures))


def check_answering_transactions(deployment: Deployment, names: list[str] | None = None,
                                 timeout_s: float = REACH_TIMEOUT_S) -> dict[str, str]:
    """In exactly_once only (driver: a worker's start and each live config that needs it):
    like `check_transactions`, for the clusters (`names`, default all) that answer now; a
    worker must start while a cluster is down, and a probe cannot tell a cluster that is
    down from one without a transaction coordinator (`transactions_verdict`).

    Steps, per cluster, all at once (threads): 1. metadata with its settings (check_reachable);
    2. if it answered, the InitProducerId probe; 3. if that failed, metadata again. Raise
    TransactionsUnsupported naming every cluster that answers without transactions, on one
    line; return cluster -> why it was not checked (down, its login refused, its transaction
    coordinator not ready: to be checked again)."""
    if deployment.distributor.delivery != EXACTLY_ONCE:
        return {}
    wanted = list(deployment.clusters) if names is None else [n for n in deployment.clusters if n in names]
    if not wanted:
        return {}

    def reach(name: str) -> None:
        check_reachable(name, deployment.clusters[name].client_config(), timeout_s)

    def answers(name: str) -> bool:
        try:
            reach(name)
        except ClusterConnectFailed:
            return False
        return True

    reached = {name: None if err is None else str(err)
               for name, err in _outcomes(wanted, reach, ClusterConnectFailed, "reach").items()}

    def probe(name: str) -> None:
        settings = producer_settings(deployment.clusters[name].client_config(), deployment.distributor.delivery_timeout_ms)
        try:
            probe_transactions(name, settings, timeout_s)
        except TransactionsUnsupported as err:
            answers_after = answers(name)
            if transactions_verdict(err.code, answers_after) == CHECK_LATER:
                # its key exists: no other thread writes it
                reached[name] = (f"cluster {name!r}: its transaction coordinator is not ready "
                                 f"({KafkaError(err.code).str()})" if answers_after else
                                 f"cluster {name!r}: stopped answering during the transactions probe")
                return
            if err.code in REFUSALS:
                raise
            raise TransactionsUnsupported(f"{err}; it answers metadata, but no transaction coordinator within "
                                          f"{timeout_s:g} s", err.code) from None

    failures = {name: f for name, f in _outcomes(clusters_to_probe(reached), probe, TransactionsUnsupported,
                                                  "transactions").items() if f is not None}
    if failures:
        raise TransactionsUnsupported("; ".join(str(f) for f in failures.values()), clusters=tuple(failures))
    return {name: why for name, why in reached.items() if why is not None}


def check_change_transactions(new: Deployment, names: list[str], timeout_s: float = REACH_TIMEOUT_S) -> None:
    """CLI (`treedist config set|push`, before etcd is written): the check a worker makes before
    it applies `new` (`check_answering_transactions` of `names`, the clusters
    `transactions_to_check` gives: the same verdicts, no second checker), stricter in one way:
    a cluster that cannot be checked now (down, its login refused, its transaction
    coordinator not ready) refuses the change too. A worker given such a change applies it and
    checks the cluster when it answers; the operator making it is told now instead, before
    any worker copies in exactly_once. Raise TransactionsUnsupported naming every cluster
    that refuses, on one line."""
    unchecked = check_answering_transactions(new, names, timeout_s)
    if unchecked:
        raise TransactionsUnsupported("; ".join(
            f"{why}: its transactions (distributor.delivery: exactly_once) cannot be checked now"
            for why in unchecked.values()), clusters=tuple(unchecked))


def transactions_to_check(current: Deployment | None, new: Deployment) -> list[str]:
    """Pure: the clusters of `new` whose transactions a live config change must check before
    it is applied: none unless `new` is exactly_once; all if `current` is not (or is None:
    nothing stored); else those added or whose client settings changed (the others were
    checked when they came in, or are left to their tasks)."""
    if new.distributor.delivery != EXACTLY_ONCE:
        return []
    if current is None or current.distributor.delivery != EXACTLY_ONCE:
        return list(new.clusters)
    return [name for name, cluster in new.clusters.items()
            if name not in current.clusters or current.clusters[name].client_config() != cluster.client_config()]


def _each_cluster(deployment: Deployment, probe: Callable[[str], None], error: type[E], thread_name: str) -> list[E]:
    """Run `probe(cluster)` for every cluster at once (threads: an unreachable one costs its
    timeout once, not per cluster); the `error`s they raised, in the deployment's order."""
    return [f for f in _outcomes(list(deployment.clusters), probe, error, thread_name).values() if f is not None]


def _outcomes(names: list[str], probe: Callable[[str], None], error: type[E], thread_name: str) -> dict[str, E | None]:
    """Run `probe(name)` for every name at once (threads); name -> the `error` it raised or
    None, in the given order."""
    from concurrent.futures import ThreadPoolExecutor

    def attempt(name: str) -> E | None:
        try:
            probe(name)
        except error as err:
            return err
        return None

    with ThreadPoolExecutor(max_workers=max(1, len(names)), thread_name_prefix=thread_name) as pool:
        return dict(zip(names, pool.map(attempt, names)))


def preflight(deployment: Deployment, attempts: int = 5, timeout: float = 5.0) -> dict[str, dict[str, int]]:
    """Return cluster -> distributed topic -> partitions; raise naming the cluster or topic.

    Each cluster gets `attempts` metadata requests of `timeout` seconds, with backoff.
    """
    counts = {
        name: partition_counts(
            name,
            admin_client(cluster.client_config()),
            lambda topic, name=name: deployment.selects(name, topic) is not None,
            attempts=attempts,
            timeout=timeout,
        )
        for name, cluster in deployment.clusters.items()
    }
    naming = deployment.naming()
    problems = []
    for dist in deployment.topology().all_distributors():
        source, target = counts[dist.cluster], counts[dist.target]
        for topic, partitions in sorted(source.items()):
            there = naming.translate(dist.cluster, topic, dist.target)
            have = target.get(there) if there is not None else None
            if have is None:
                problems.append(f"topic {topic!r} exists on {dist.cluster!r} but {there!r} not on its target {dist.target!r}"
                                if there != topic else f"topic {topic!r} exists on {dist.cluster!r} but not on its target {dist.target!r}")
            elif have < partitions:
                problems.append(
                    f"topic {topic!r} has {partitions} partitions on {dist.cluster!r} but {have} on its target {dist.target!r}"
                )
    if problems:
        raise TopicMissing("; ".join(sorted(set(problems))))
    check_transactions(deployment)
    return counts
