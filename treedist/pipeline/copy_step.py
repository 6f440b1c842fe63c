"""The copy-flag step of one distributor, on Arrow record batches. Pure: no I/O.

Runs in executors (inside mapInArrow). For each input record (spark-sql-kafka schema):
  1. flags = the last copy-flag header parsed (no header: 0); a malformed one follows the
     MalformedFlagsPolicy and is counted and reported with topic, partition and offset;
  2. keep the record iff flags & mask == 0 (the distribution rule);
  3. replace every copy-flag header by one with flags | bit;
  4. add the origin header (cluster/topic/partition/offset) when the record has none, i.e.
     on the first copy made from the cluster the record was produced on.
Other headers keep their order. Vectorised with numpy/pyarrow; Python loops only run over
copy-flag header values (few distinct ones, cached) and over records that get an origin.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treedist.pipeline.errors import MalformedFlagsError, OversizedRecord
from treedist.topology.flags import MalformedFlags, MalformedFlagsPolicy, encode_flags, parse_flags

log = logging.getLogger(__name__)
MAX_LOGGED_PER_BATCH = 20


@dataclass
class StepStats:
    records_in: int = 0
    copied: int = 0
    malformed: int = 0
    malformed_examples: list[str] = field(default_factory=list)

    def add(self, other: "StepStats") -> None:
        self.records_in += other.records_in
        self.copied += other.copied
        self.malformed += other.malformed
        self.malformed_examples.extend(other.malformed_examples[: MAX_LOGGED_PER_BATCH - len(self.malformed_examples)])


@dataclass(frozen=True)
class CopyStep:
    cluster: str  # the cluster this distributor reads from
    mask: int
    bit: int
    flags_header: str = "treedist-copy-flags"
    origin_header: str = "treedist-origin"
    malformed_policy: MalformedFlagsPolicy = MalformedFlagsPolicy.COPY
    max_record_bytes: int = 1_000_000

    def apply(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, StepStats]:
        n = batch.num_rows
        stats = StepStats(records_in=n)
        headers = batch.column("headers")
        flat = headers.flatten()
        parent = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False).astype(np.int64)
        keys, values = flat.field("key"), flat.field("value")
        is_flag = _equals(keys, self.flags_header)
        is_origin = _equals(keys, self.origin_header)

        flags, malformed = self._flags(n, parent, is_flag, values)
        selected = (flags & self.mask) == 0
        if malformed.any():
            selected = self._apply_policy(batch, malformed, selected, stats)
        self._check_sizes(batch, selected)

        rows = np.nonzero(selected)[0]
        stats.copied = int(rows.size)
        new_headers = self._rebuild_headers(batch, headers.type, flat, parent, is_flag, is_origin, flags, rows)
        # Same schema out as in: the copies are rows of the source, with new headers.
        take = pa.array(rows, pa.int64())
        columns = [
            new_headers if name == "headers" else batch.column(i).take(take)
            for i, name in enumerate(batch.schema.names)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema), stats

    # 1. parse
    def _flags(self, n: int, parent: np.ndarray, is_flag: np.ndarray, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        flags = np.zeros(n, dtype=np.int64)
        malformed = np.zeros(n, dtype=bool)
        idx = np.nonzero(is_flag)[0]
        if idx.size:
            cache: dict[bytes | None, int] = {}
            parsed = np.empty(idx.size, dtype=np.int64)
            for i, raw in enumerate(values.take(pa.array(idx)).to_pylist()):
                value = cache.get(raw)
                if value is None:
                    try:
                        value = parse_flags(raw if raw is not None else b"")
                    except MalformedFlags:
                        value = -1
                    cache[raw] = value
                parsed[i] = value
            # Entries are in row order, so on repeated headers the last one wins.
            flags[parent[idx]] = parsed
            malformed = flags < 0
            flags[malformed] = 0
        return flags, malformed

    # 2. policy for malformed headers
    def _apply_policy(self, batch: pa.RecordBatch, malformed: np.ndarray, selected: np.ndarray, stats: StepStats) -> np.ndarray:
        bad = np.nonzero(malformed)[0]
        stats.malformed = int(bad.size)
        where = [self._describe(batch, int(i)) for i in bad[:MAX_LOGGED_PER_BATCH]]
        stats.malformed_examples = where
        if self.malformed_policy is MalformedFlagsPolicy.FAIL:
            raise MalformedFlagsError(
                f"distributor on {self.cluster!r}: malformed {self.flags_header!r} header at {where[0]} "
                f"({bad.size} in this batch; policy 'fail')"
            )
        for w in where:
            log.warning("malformed %r header at %s; policy %s", self.flags_header, w, self.malformed_policy.value)
        if self.malformed_policy is MalformedFlagsPolicy.SKIP:
            return selected & ~malformed
        return selected  # COPY: flags already 0

    def _check_sizes(self, batch: pa.RecordBatch, selected: np.ndarray) -> None:
        size = (
            pc.fill_null(pc.binary_length(batch.column("value")), 0).to_numpy(zero_copy_only=False)
            + pc.fill_null(pc.binary_length(batch.column("key")), 0).to_numpy(zero_copy_only=False)
        )
        too_big = np.nonzero(selected & (size > self.max_record_bytes))[0]
        if too_big.size:
            i = int(too_big[0])
            raise OversizedRecord(
                f"record at {self._describe(batch, i)} is {int(size[i])} bytes, over "
                f"distributor.max_record_bytes={self.max_record_bytes}"
            )

    # 3. + 4. headers of the copies
    def _rebuild_headers(self, batch, list_type, flat, parent, is_flag, is_origin, flags, rows) -> pa.Array:
        n = batch.num_rows
        selected = np.zeros(n, dtype=bool)
        selected[rows] = True
        keep = ~is_flag & selected[parent]
        kept = np.nonzero(keep)[0]
        kept_count = np.bincount(parent[kept], minlength=n)
        has_origin = np.bincount(parent[is_origin], minlength=n) > 0
        add_origin = ~has_origin[rows]

        counts = kept_count[rows] + 1 + add_origin
        offsets = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        out_row = np.cumsum(selected) - 1  # input row -> output row

        k, s = kept.size, rows.size
        src = np.empty(int(offsets[-1]), dtype=np.int64)
        kept_start = np.concatenate(([0], np.cumsum(kept_count)))[parent[kept]]
        src[offsets[out_row[parent[kept]]] + (np.arange(k) - kept_start)] = np.arange(k)
        flag_pos = offsets[:-1] + kept_count[rows]
        src[flag_pos] = k + np.arange(s)
        origin_rows = rows[add_origin]
        src[flag_pos[add_origin] + 1] = k + s + np.arange(origin_rows.size)

        encoded: dict[int, bytes] = {}
        flag_values = [encoded.setdefault(f, encode_flags(f)) for f in (flags[rows] | self.bit).tolist()]
        origin_values = self._origins(batch, origin_rows)
        entry_type = list_type.value_type
        pool = pa.StructArray.from_arrays(
            [
                pa.concat_arrays([
                    flat.field("key").take(pa.array(kept)).cast(entry_type.field("key").type),
                    pa.array([self.flags_header] * s, entry_type.field("key").type),
                    pa.array([self.origin_header] * origin_rows.size, entry_type.field("key").type),
                ]),
                pa.concat_arrays([
                    flat.field("value").take(pa.array(kept)).cast(entry_type.field("value").type),
                    pa.array(flag_values, entry_type.field("value").type),
                    origin_values.cast(entry_type.field("value").type),
                ]),
            ],
            fields=list(entry_type),
        )
        entries = pool.take(pa.array(src))
        offset_type = pa.int64() if pa.types.is_large_list(list_type) else pa.int32()
        return pa.ListArray.from_arrays(pa.array(offsets, offset_type), entries, type=list_type) if offset_type == pa.int32() \
            else pa.LargeListArray.from_arrays(pa.array(offsets, offset_type), entries, type=list_type)

    def _origins(self, batch: pa.RecordBatch, rows: np.ndarray) -> pa.Array:
        """Origin header values (the `Origin.encode` format), built column-wise."""
        take = pa.array(rows, pa.int64())
        cluster = pa.array([self.cluster] * rows.size, pa.string())
        joined = pc.binary_join_element_wise(
            cluster,
            batch.column("topic").take(take),
            batch.column("partition").take(take).cast(pa.string()),
            batch.column("offset").take(take).cast(pa.string()),
            "/",
        )
        return joined.cast(pa.binary())

    def _describe(self, batch: pa.RecordBatch, i: int) -> str:
        topic = batch.column("topic")[i].as_py()
        partition = batch.column("partition")[i].as_py()
        offset = batch.column("offset")[i].as_py()
        return f"cluster {self.cluster!r} topic {topic!r} partition {partition} offset {offset}"


def _equals(array: pa.Array, text: str) -> np.ndarray:
    if len(array) == 0:
        return np.zeros(0, dtype=bool)
    return pc.fill_null(pc.equal(array, text), False).to_numpy(zero_copy_only=False)
