import json
import pickle

import pytest

from treedist.kafka.errors import ReadPositionError
from treedist.kafka.read_positions import KafkaOffsets, OffsetRange, TopicPartitionKey as TP


def test_dict_form_is_spark_sql_kafka_json_sorted_by_topic_and_partition_number():
    offsets = KafkaOffsets({TP("b", 10): 5, TP("a", 2): 7, TP("b", 9): 1, TP("a", 0): 0})
    assert json.dumps(offsets.to_dict()) == '{"a": {"0": 0, "2": 7}, "b": {"9": 1, "10": 5}}'


def test_round_trip_through_json():
    offsets = KafkaOffsets({TP("t", 0): 3, TP("u.v", 11): 12})
    assert KafkaOffsets.from_dict(json.loads(json.dumps(offsets.to_dict()))) == offsets


def test_empty_offsets():
    assert KafkaOffsets.from_dict({}).to_dict() == {}


@pytest.mark.parametrize("bad", [[1], {"t": 3}, {"t": {"x": 1}}, {"t": {"0": "seven"}}, {"t": {"0": -1}}])
def test_malformed_checkpoint_offsets_are_named_errors(bad):
    with pytest.raises(ReadPositionError):
        KafkaOffsets.from_dict(bad)


def test_offset_range_is_picklable_and_checked():
    rng = OffsetRange("t", 1, 10, 20)
    assert pickle.loads(pickle.dumps(rng)) == rng
    assert rng.count == 10 and rng.tp == TP("t", 1)
    assert "t[1]" in str(rng) and "[10, 20)" in str(rng)
    with pytest.raises(ReadPositionError):
        OffsetRange("t", 1, 20, 20)
    with pytest.raises(ReadPositionError):
        OffsetRange("t", 1, -1, 2)
