"""The pure part of exactly_once (treedist.records.transactions): names, which records a
replayed batch skips, the positions a transaction records. No broker."""

from __future__ import annotations

from confluent_kafka import KafkaError
from hypothesis import given, strategies as st

from treedist.records.positions import LevelRange, PartitionWindow
from treedist.records.transactions import (
    CHECK_LATER,
    HAS_TRANSACTIONS,
    NO_TRANSACTIONS,
    REFUSALS,
    SETTLING,
    clusters_to_probe,
    deployment_key,
    group_settings,
    positions_group,
    skip_committed,
    transactional_id,
    transactional_settings,
    transactions_verdict,
    window_ends,
)


def _window(topic: str, partition: int, *ranges: tuple[int, int, int]) -> PartitionWindow:
    levels = tuple(LevelRange(level, a, b) for level, a, b in ranges)
    return PartitionWindow(topic, partition, min(r.from_offset for r in levels), max(r.until_offset for r in levels), levels)


def test_names_are_per_link_and_per_task():
    assert positions_group("c1", 2) == "treedist-link.c1.L2"
    assert transactional_id("0123456789ab", "c1", "c3", 1) == "treedist.0123456789ab.c1.c3.t1"


def test_the_deployment_key_is_the_same_for_one_checkpoint_root_and_differs_between_two():
    """Two deployments between the same clusters (two checkpoint locations) never share a
    transactional.id, so they never fence each other; one deployment's key survives a
    restart (it is a function of its checkpoint root only)."""
    one = deployment_key("/var/lib/treedist/checkpoints")
    assert one == deployment_key("/var/lib/treedist/checkpoints") and len(one) == 12 and int(one, 16) >= 0
    assert one != deployment_key("/var/lib/treedist-b/checkpoints")
    assert deployment_key("s3a://bucket/a") != deployment_key("s3a://bucket/b")
    assert transactional_id(one, "c1", "c2", 0) != transactional_id(deployment_key("/other"), "c1", "c2", 0)


@given(st.text(min_size=1), st.text(min_size=1))
def test_deployment_keys_are_pure_and_tell_roots_apart(a, b):
    assert deployment_key(a) == deployment_key(a)
    if a != b:
        assert deployment_key(a) != deployment_key(b)  # 48 bits: a collision here is not expected


def test_a_plan_carries_the_key_of_its_deployments_checkpoint_root(tmp_path):
    from treedist.config import parse_deployment
    from treedist.local.deployment import local_deployment
    from treedist.records.plan import plan_cluster

    def plan(location):
        spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, checkpoint_location=str(location))
        return plan_cluster(parse_deployment(spec, "<test>"), "c1")

    a, again, b = plan(tmp_path / "a"), plan(tmp_path / "a"), plan(tmp_path / "b")
    assert a.deployment_key == again.deployment_key == deployment_key(str((tmp_path / "a").resolve()))
    assert a.deployment_key != b.deployment_key


def test_transactional_settings_outlast_the_delivery_timeout():
    out = transactional_settings({"bootstrap.servers": "b", "delivery.timeout.ms": "30000"}, "0123456789ab", "c1",
                                 "c2", 0)
    assert out["transactional.id"] == "treedist.0123456789ab.c1.c2.t0"
    assert int(out["transaction.timeout.ms"]) > 30000  # librdkafka requires message.timeout.ms <= it


def test_group_settings_keep_the_connection_and_drop_producer_settings():
    out = group_settings({"bootstrap.servers": "b", "security.protocol": "SASL_SSL", "enable.idempotence": "true",
                          "acks": "all", "linger.ms": "20", "transactional.id": "x"}, "g")
    assert out == {"bootstrap.servers": "b", "security.protocol": "SASL_SSL", "enable.auto.commit": "false",
                   "isolation.level": "read_committed", "group.id": "g"}


def test_a_replay_skips_what_its_target_committed_for_the_batch():
    w = _window("t", 0, (1, 10, 20), (2, 10, 20))
    names = {1: {"t": "t"}, 2: {"t": "other-t"}}
    # level 1's target committed the whole window, level 2's target nothing: only level 2 copies
    [out] = skip_committed([w], {(1, "t", 0): 20}, names)
    assert out.levels == (LevelRange(1, 20, 20), LevelRange(2, 10, 20)) and out.from_offset == 10
    # both committed: the window is not read at all
    assert skip_committed([w], {(1, "t", 0): 20, (2, "other-t", 0): 20}, names) == []
    # nothing committed: the window as it was
    assert skip_committed([w], {}, names) == [w]


def test_a_position_outside_the_window_skips_nothing():
    w = _window("t", 3, (1, 10, 20))
    names = {1: {"t": "t"}}
    assert skip_committed([w], {(1, "t", 3): 25}, names) == [w]
    assert skip_committed([w], {(1, "t", 3): 5}, names) == [w]


def test_window_ends_are_the_positions_a_transaction_records():
    ws = [_window("t", 0, (1, 0, 5), (2, 3, 5)), _window("u", 1, (2, 7, 9))]
    assert window_ends(ws, 1, {"t": "T", "u": "U"}) == {("T", 0): 5}
    assert window_ends(ws, 2, {"t": "T", "u": "U"}) == {("T", 0): 5, ("U", 1): 9}


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(-5, 60)), min_size=1, max_size=6))
def test_skipping_never_copies_below_a_committed_position_nor_skips_above_it(spans):
    windows = [_window("t", p, (1, min(a, b), max(a, b))) for p, (a, b, _) in enumerate(spans)]
    committed = {(1, "t", p): c for p, (_, _, c) in enumerate(spans)}
    out = {w.partition: w for w in skip_committed(windows, committed, {1: {"t": "t"}})}
    for w in windows:
        r, c = w.levels[0], committed[(1, "t", w.partition)]
        trusted = r.from_offset <= c <= r.until_offset
        start = c if trusted else r.from_offset
        if start >= r.until_offset:
            assert w.partition not in out
        else:
            assert out[w.partition].levels == (LevelRange(1, start, r.until_offset),)


def test_exactly_once_refuses_a_cluster_read_uncommitted_naming_it():
    import pytest

    from treedist.config import parse_deployment
    from treedist.kafka.settings_check import ClientSettingError
    from treedist.local.deployment import local_deployment
    from treedist.driver.preflight import check_clients

    spec = local_deployment({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, topics=["t"], checkpoint_location="/tmp/ck",
                            distributor={"delivery": "exactly_once"})
    spec["clusters"]["b"]["client"] = {"isolation.level": "read_uncommitted"}
    with pytest.raises(ClientSettingError, match=r"clusters\.b\.client\.isolation\.level"):
        check_clients(parse_deployment(spec, "<test>"))
    spec["distributor"]["delivery"] = "at_least_once"  # allowed there: duplicates are allowed anyway
    check_clients(parse_deployment(spec, "<test>"))


def test_a_client_setting_that_contradicts_replay_safety_is_refused_naming_cluster_and_key():
    import pytest

    from treedist.config import parse_deployment
    from treedist.driver.preflight import check_clients
    from treedist.kafka.settings_check import ClientSettingError
    from treedist.local.deployment import local_deployment

    spec = local_deployment({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, topics=["t"], checkpoint_location="/tmp/ck")
    spec["clusters"]["a"]["client"] = {"acks": "1"}
    with pytest.raises(ClientSettingError, match=r"cluster 'a': clusters\.a\.client: setting 'acks'='1'"):
        check_clients(parse_deployment(spec, "<test>"))


# -- which clusters a worker probes, and which answers mean "no transactions" --------------

_CODES = st.sampled_from(sorted(REFUSALS | SETTLING) + [KafkaError._TIMED_OUT, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                                        KafkaError._TRANSPORT, KafkaError._FAIL])


def test_a_refusal_means_no_transactions_even_from_a_cluster_that_went_quiet():
    for code in (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                 KafkaError.UNSUPPORTED_VERSION, KafkaError.INVALID_TRANSACTION_TIMEOUT):
        assert transactions_verdict(code, answers_after=False) == NO_TRANSACTIONS


def test_a_timed_out_probe_is_told_apart_by_the_clusters_answer_afterwards():
    # librdkafka's _TIMED_OUT both for a cluster that went down and for one whose transaction
    # coordinator never comes (Kafka answering COORDINATOR_NOT_AVAILABLE for ever)
    assert transactions_verdict(KafkaError._TIMED_OUT, answers_after=True) == NO_TRANSACTIONS
    assert transactions_verdict(KafkaError._TIMED_OUT, answers_after=False) == CHECK_LATER
    assert transactions_verdict(None, answers_after=False) == HAS_TRANSACTIONS


def test_a_coordinator_still_loading_is_checked_later_not_refused():
    assert transactions_verdict(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, answers_after=True) == CHECK_LATER


@given(st.one_of(st.none(), _CODES), st.booleans())
def test_no_transactions_only_from_a_refusal_or_a_cluster_that_answers_without_a_coordinator(code, answers_after):
    verdict = transactions_verdict(code, answers_after)
    if code is None:
        assert verdict == HAS_TRANSACTIONS
    elif code in REFUSALS:
        assert verdict == NO_TRANSACTIONS
    elif code in SETTLING or not answers_after:
        assert verdict == CHECK_LATER
    else:
        assert verdict == NO_TRANSACTIONS


@given(st.dictionaries(st.sampled_from(["c1", "c2", "c3", "x1"]),
                       st.one_of(st.none(), st.sampled_from(["not reachable", "authentication failed"]))))
def test_only_clusters_that_answered_are_probed_in_order(reached):
    probed = clusters_to_probe(reached)
    assert probed == [name for name in reached if reached[name] is None]
