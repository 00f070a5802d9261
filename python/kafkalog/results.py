"""Typed results of the kafkalog API, named after the Kafka classes they mirror.

The named tuples are what the Rust extension returns (so they unpack and compare like the plain
tuples earlier versions returned); the ``TypedDict`` classes describe the dicts it returns.
"""

from typing import Any, NamedTuple, Optional, TypedDict

__all__ = [
    "OffsetPosition",
    "TimestampOffset",
    "TimestampAndOffset",
    "LogOffsetPosition",
    "LogOffsetMetadata",
    "ProducerStateEntry",
    "AbortedTxn",
    "FetchDataInfo",
    "LogReadInfo",
    "LogAppendInfo",
    "DamagedRange",
    "PartitionStats",
]


class OffsetPosition(NamedTuple):
    """Kafka's ``OffsetPosition``: an ``.index`` entry, an offset and the byte position of its
    batch in the segment's ``.log``."""

    offset: int
    """The absolute offset."""
    position: int
    """The byte position in the ``.log`` file."""


class TimestampOffset(NamedTuple):
    """Kafka's ``TimestampOffset``: a ``.timeindex`` entry, a timestamp and the offset of the
    batch that holds it."""

    timestamp: int
    """The timestamp (ms); -1 for an empty index's lookup."""
    offset: int
    """The absolute offset."""


class TimestampAndOffset(NamedTuple):
    """Kafka's ``FileRecords.TimestampAndOffset``: the answer to ListOffsets by timestamp, the
    first record whose timestamp is at or after the target and its offset."""

    timestamp: int
    """The record's timestamp (ms); -1 for EARLIEST_TIMESTAMP and LATEST_TIMESTAMP."""
    offset: int
    """The record's offset."""


class LogOffsetPosition(NamedTuple):
    """Kafka's ``FileRecords.LogOffsetPosition``: the batch that holds an offset, its byte
    position and size in the ``.log`` file."""

    offset: int
    """The batch's last offset."""
    position: int
    """The batch's byte position in the ``.log`` file."""
    size: int
    """The batch's size in bytes."""


class LogOffsetMetadata(NamedTuple):
    """Kafka's ``LogOffsetMetadata``: an offset, the segment that holds it and its byte position
    there."""

    message_offset: int
    """The offset."""
    segment_base_offset: int
    """The base offset of the segment that holds it."""
    relative_position_in_segment: int
    """The byte position in that segment's ``.log``."""


# The keys ``Log.active_producers`` had as dicts, kept so ``entry["epoch"]`` goes on working.
_PRODUCER_ENTRY_KEYS = {
    "epoch": "producer_epoch",
    "last_sequence": "last_seq",
    "last_offset": "last_data_offset",
    "txn_first_offset": "current_txn_first_offset",
}


class ProducerStateEntry(NamedTuple):
    """Kafka's ``ProducerStateEntry``: what the log remembers of one producer id.

    Indexing by the old dict keys still works as an alias: ``entry["epoch"]`` is
    ``producer_epoch``, ``"last_sequence"`` is ``last_seq``, ``"last_offset"`` is
    ``last_data_offset``, ``"txn_first_offset"`` is ``current_txn_first_offset``.
    """

    producer_id: int
    """The producer id."""
    producer_epoch: int
    """The producer's epoch."""
    last_seq: int
    """The sequence number of the producer's last record (-1 when none)."""
    last_data_offset: int
    """The offset of the producer's last record (-1 when none)."""
    last_timestamp: int
    """The max timestamp of the producer's last batch (-1 when none)."""
    coordinator_epoch: int
    """The epoch of the coordinator that wrote the producer's last transaction marker."""
    current_txn_first_offset: Optional[int]
    """The first offset of the producer's open transaction, None when none is open."""

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        """A field by position, or by an old dict key (an alias, see the class docstring)."""
        if isinstance(key, str):
            try:
                return getattr(self, _PRODUCER_ENTRY_KEYS[key])
            except KeyError:
                raise KeyError(key) from None
        return tuple.__getitem__(self, key)


class AbortedTxn(TypedDict):
    """Kafka's ``AbortedTxn``: one ``.txnindex`` entry."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class FetchDataInfo(TypedDict):
    """Kafka's ``FetchDataInfo``, as ``Segment.read`` returns it."""

    records: bytes
    """The raw bytes of whole batches (the last may be cut by ``max_size``)."""
    offset: int
    """The fetch offset."""
    segment_base_offset: int
    position: int
    """Byte position of the first batch in its segment."""
    first_entry_incomplete: bool


class LogReadInfo(FetchDataInfo):
    """``Log.read``'s ``FetchDataInfo``, with the batches decoded."""

    batches: list[Any]
    """``list[RecordBatch]``: the whole batches of ``records``, decoded."""
    aborted_transactions: Optional[list[AbortedTxn]]
    """The aborted transactions the fetch overlaps (``txn_committed`` isolation), else None."""


class LogAppendInfo(TypedDict):
    """Kafka's ``LogAppendInfo``, as ``Log.append_batches`` returns it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    """The broker's time for LogAppendTime topics, else -1."""
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool
    """True when the batch was a producer's retry, answered with its first append's offsets."""


class DamagedRange(TypedDict):
    """One damaged range found when a log was opened (``Log.damaged_ranges``)."""

    file: str
    position: int
    bytes: int
    first_offset: Optional[int]
    last_offset: Optional[int]
    reason: str
    action: str
    """``"skipped"``, ``"removed"`` or ``"missing"``."""
    description: str


class PartitionStats(TypedDict):
    """``partition_stats``: one partition folder's offsets, sizes and counts."""

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    checkpointed_high_watermark: Optional[int]
    last_stable_offset: int
    segments: int
    bytes: int
    batches: int
    records: int
    control_batches: int
    transactional_records: int
    committed_transactions: int
    aborted_transactions: int
    producers: int
    first_timestamp: Optional[int]
    last_timestamp: Optional[int]
    codecs: dict[str, int]
    """Batches per compression codec name."""
    magic: dict[int, int]
    """Batches per record format (magic 0, 1, 2)."""
