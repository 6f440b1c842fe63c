"""Typed source offsets and input partitions: what the Spark checkpoint and the tasks carry.

`KafkaOffsets` is the source's offset: for each topic-partition, the next offset to read.
Its dict form is spark-sql-kafka's JSON, `{"topic": {"0": 42, "1": 7}}`, ordered by topic
then partition number so that equal offsets always serialize to equal JSON (Spark compares
the JSON to decide whether a new micro-batch has data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

from pyspark.sql.datasource import InputPartition

from treedist.kafka.watermarks import TopicPartitionKey  # noqa: F401  (re-exported: the checkpoint type)
from treedist.kafka.errors import ReadPositionError


@dataclass(frozen=True)
class KafkaOffsets:
    """The next offset to read for every topic-partition the source knows (immutable)."""

    positions: Mapping[TopicPartitionKey, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for tp, offset in self.positions.items():
            if offset < 0:
                raise ReadPositionError(f"negative offset {offset} for {tp}")

    def __len__(self) -> int:
        return len(self.positions)

    def __contains__(self, tp: object) -> bool:
        return tp in self.positions

    def __iter__(self) -> Iterator[TopicPartitionKey]:
        return iter(sorted(self.positions))

    def get(self, tp: TopicPartitionKey, default: int | None = None) -> int | None:
        return self.positions.get(tp, default)

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.positions}

    def to_dict(self) -> dict[str, dict[str, int]]:
        """The JSON-ready checkpoint form, sorted by topic then partition number."""
        out: dict[str, dict[str, int]] = {}
        for tp in sorted(self.positions):
            out.setdefault(tp.topic, {})[str(tp.partition)] = int(self.positions[tp])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> "KafkaOffsets":
        """Parse the checkpoint form; raises ReadPositionError naming the malformed entry."""
        positions: dict[TopicPartitionKey, int] = {}
        if not isinstance(data, Mapping):
            raise ReadPositionError(f"source offset is not a JSON object: {data!r}")
        for topic, parts in data.items():
            if not isinstance(parts, Mapping):
                raise ReadPositionError(f"source offset for topic {topic!r} is not an object")
            for partition, offset in parts.items():
                try:
                    tp = TopicPartitionKey(str(topic), int(partition))
                    value = int(offset)
                except (TypeError, ValueError) as exc:
                    raise ReadPositionError(
                        f"malformed source offset {topic!r}/{partition!r}: {offset!r}"
                    ) from exc
                positions[tp] = value
        return cls(positions)


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task's work: records [from_offset, until_offset) of one topic-partition.

    Built on the driver by `partitions()`, pickled to an executor, replayed by `read()`.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    def __post_init__(self) -> None:
        if not 0 <= self.from_offset < self.until_offset:
            raise ReadPositionError(f"empty or negative range {self}")

    @property
    def count(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def tp(self) -> TopicPartitionKey:
        return TopicPartitionKey(self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] offsets [{self.from_offset}, {self.until_offset})"
