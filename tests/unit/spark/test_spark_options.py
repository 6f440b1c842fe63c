import pytest

from treedist.spark.errors import SparkOptionError
from treedist.spark.options import SinkOptions, SourceOptions

B = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_source_defaults_and_passthrough():
    opts = SourceOptions.parse({**B, "subscribe": "a, b", "kafka.security.protocol": "SASL_SSL"})
    assert opts.subscribe == ("a", "b")
    assert opts.starting_offsets == "earliest"
    assert opts.max_offsets_per_trigger is None
    assert opts.kafka["bootstrap.servers"] == "127.0.0.1:9092"
    assert opts.kafka["security.protocol"] == "SASL_SSL"
    assert opts.kafka["enable.auto.commit"] == "false"
    assert opts.kafka["auto.offset.reset"] == "error"


def test_source_option_names_are_case_insensitive():
    opts = SourceOptions.parse(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "x.*", "MAXOFFSETSPERTRIGGER": "10"}
    )
    assert opts.subscribe_pattern.pattern == "x.*" and opts.max_offsets_per_trigger == 10


@pytest.mark.parametrize(
    "options, named",
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({**B}, "subscribe"),
        ({**B, "subscribe": "a", "subscribePattern": "a"}, "subscribe"),
        ({**B, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({**B, "subscribe": "a", "maxOffsetsPerTrigger": "many"}, "maxOffsetsPerTrigger"),
        ({**B, "subscribe": "a", "startingOffsets": "middle"}, "startingOffsets"),
        ({**B, "subscribePattern": "("}, "subscribePattern"),
        ({**B, "subscribe": "a", "maxOffsetPerTrigger": "5"}, "maxoffsetpertrigger"),
        ({**B, "subscribe": "a", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ],
)
def test_source_option_errors_name_the_option(options, named):
    with pytest.raises(SparkOptionError, match=named):
        SourceOptions.parse(options)


def test_pattern_is_a_full_match_with_exclusions_and_no_internal_topics():
    opts = SourceOptions.parse({**B, "subscribePattern": "orders.*", "excludePattern": ".*\\.tmp"})
    assert opts.matches("orders") and opts.matches("orders-eu")
    assert not opts.matches("x-orders")
    assert not opts.matches("orders.tmp")
    assert not SourceOptions.parse({**B, "subscribePattern": ".*"}).matches("__consumer_offsets")
    assert SourceOptions.parse({**B, "subscribe": "__special"}).matches("__special")


def test_sink_forces_idempotence_and_acks_all():
    opts = SinkOptions.parse({**B, "topic": "t", "checkpointLocation": "/tmp/x", "kafka.linger.ms": "5"})
    assert opts.kafka["enable.idempotence"] == "true" and opts.kafka["acks"] == "all"
    assert opts.kafka["linger.ms"] == "5" and opts.topic == "t"
    assert SinkOptions.parse({**B, "kafka.acks": "-1"}).kafka["acks"] == "all"
    for bad in ({"kafka.acks": "1"}, {"kafka.enable.idempotence": "false"}, {"kafka.request.required.acks": "0"}):
        with pytest.raises(SparkOptionError, match="conflicts"):
            SinkOptions.parse({**B, **bad})


def test_sink_delivery_timeout_follows_librdkafka_alias():
    assert SinkOptions.parse({**B}).delivery_timeout_s == 120.0
    opts = SinkOptions.parse({**B, "kafka.message.timeout.ms": "5000"})
    assert "delivery.timeout.ms" not in opts.kafka and opts.delivery_timeout_s == 5.0


def test_sink_unknown_option():
    with pytest.raises(SparkOptionError, match="topik"):
        SinkOptions.parse({**B, "topik": "t"})


def test_a_replaying_consumer_reads_ahead_one_consume_batch_unless_told_otherwise():
    from treedist.records.window_read import CONSUME_BATCH
    from treedist.spark.options import consumer_settings

    assert consumer_settings({"bootstrap.servers": "b:9092"})["queued.min.messages"] == str(CONSUME_BATCH)
    assert consumer_settings({"bootstrap.servers": "b:9092", "queued.min.messages": "500"})["queued.min.messages"] == "500"
