"""Topic throughput T_T from two samples of end offsets (pure; the CLI takes the samples).

Until the control plane's load reports exist, `plan partitions --from-deployment` reads
each selected topic's end offsets on each cluster twice, `seconds` apart. The records
appended in between, over the time between the samples, are the topic's rate on that
cluster; times an average record size, its byte rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from treedist.sizing.errors import require_positive

# (topic, partition) -> end offset
Offsets = Mapping[tuple[str, int], int]


@dataclass(frozen=True)
class TopicRate:
    cluster: str
    topic: str
    partitions: int
    records: int  # appended during the window
    seconds: float
    records_per_second: float
    bytes_per_second: float | None  # with an average record size

    def as_dict(self) -> dict:
        return {
            "cluster": self.cluster,
            "topic": self.topic,
            "partitions": self.partitions,
            "records": self.records,
            "seconds": self.seconds,
            "records_per_second": self.records_per_second,
            "bytes_per_second": self.bytes_per_second,
        }


def topic_rates(
    cluster: str, before: Offsets, after: Offsets, seconds: float, record_bytes: float | None = None
) -> list[TopicRate]:
    """Rates per topic; partitions only in `after` (created meanwhile) count from 0.
    An offset that went back (topic recreated) counts as no progress."""
    require_positive("window_seconds", seconds)
    if record_bytes is not None:
        require_positive("record_bytes", record_bytes)
    appended: dict[str, int] = {}
    partitions: dict[str, int] = {}
    for (topic, partition), end in after.items():
        start = before.get((topic, partition), 0)
        appended[topic] = appended.get(topic, 0) + max(0, end - start)
        partitions[topic] = partitions.get(topic, 0) + 1
    out = []
    for topic in sorted(appended):
        rps = appended[topic] / seconds
        out.append(
            TopicRate(cluster, topic, partitions[topic], appended[topic], seconds, rps,
                      rps * record_bytes if record_bytes is not None else None)
        )
    return out


def busiest(rates: list[TopicRate]) -> TopicRate | None:
    """The topic with the highest rate on any cluster: the T_T a partition count must carry."""
    return max(rates, key=lambda r: (r.records_per_second, r.cluster, r.topic), default=None)
