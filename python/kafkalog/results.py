"""Typed results of the kafkalog API, named after the Kafka classes they mirror.

The named tuples are what the Rust extension returns (so they unpack and compare like the plain
tuples earlier versions returned); the ``TypedDict`` classes describe the dicts it returns.
"""

from typing import Any, Literal, NamedTuple, Optional, TypedDict

__all__ = [
    "Isolation",
    "Compression",
    "TimestampType",
    "TimestampTypeName",
    "OnCorruption",
    "PartitionerName",
    "AssignmentStrategy",
    "Acks",
    "OffsetReset",
    "MessageParser",
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
    "CommittedOffset",
]

Isolation = Literal["log_end", "high_watermark", "txn_committed", "read_uncommitted", "read_committed", "committed"]
"""How far a read goes, Kafka's ``FetchIsolation``: ``"log_end"`` (LOG_END, everything written),
``"high_watermark"`` (HIGH_WATERMARK), ``"txn_committed"`` (TXN_COMMITTED: up to the last stable
offset, aborted transactions dropped). A consumer's ``IsolationLevel`` names map onto them as
Kafka's ``FetchIsolation.of`` does: ``"read_uncommitted"`` is ``"high_watermark"``,
``"read_committed"`` is ``"txn_committed"``; ``"committed"`` is an alias of ``"txn_committed"``."""

Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
"""Kafka's ``CompressionType`` by its ``name``."""

TimestampTypeName = Literal["create_time", "log_append_time", "no_timestamp"]
"""Kafka's ``TimestampType`` (CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE) as a record or batch
reports it."""

TimestampType = Literal["create_time", "log_append_time", "CreateTime", "LogAppendTime"]
"""A timestamp type to write: ``"create_time"`` or ``"log_append_time"``; Kafka's config spellings
``"CreateTime"`` and ``"LogAppendTime"`` (``message.timestamp.type``) are aliases."""

PartitionerName = Literal["default", "built_in", "murmur2", "round_robin", "roundrobin", "random"]
"""A producer's partitioner (Kafka's ``partitioner.class``): ``"default"`` (``"built_in"``, Kafka's
``BuiltInPartitioner``), ``"murmur2"``, ``"round_robin"`` (``"roundrobin"``, Kafka's
``RoundRobinPartitioner``) or ``"random"``."""

AssignmentStrategy = Literal["range", "roundrobin", "round_robin", "cooperative-sticky", "cooperative_sticky", "sticky"]
"""Kafka's ``partition.assignment.strategy``: ``"range"``, ``"roundrobin"``, ``"sticky"`` or
``"cooperative-sticky"`` (the underscore spellings are aliases). The two sticky ones assign alike,
as Kafka's do; members of one group must name the same one."""

Acks = Literal["all", "-1", "1", "0"]
"""Kafka's ``acks``: ``"all"`` (``"-1"``) fsyncs each batch; ``"1"`` and ``"0"`` leave it to the page cache."""

OffsetReset = Literal["earliest", "latest", "none"]
"""Kafka's ``auto.offset.reset``."""

MessageParser = Literal["decoders", "offsets", "transaction-log", "cluster-metadata", "share-group-state"]
"""What ``dump_log_segments`` decodes records with: the key and value decoders, or one of Kafka's
internal topic parsers (``--offsets-decoder``, ``--transaction-log-decoder``,
``--cluster-metadata-decoder``)."""

OnCorruption = Literal["error", "skip", "truncate"]
"""What ``Log`` does with damage beyond a torn tail: raise ``LogDamagedError``, skip it (read-only)
or truncate the log there (Kafka's recovery)."""


def _document_fields(cls: Any, **docs: str) -> None:
    """Gives a named tuple's fields their docstrings (shown by ``help()``)."""
    for name, doc in docs.items():
        getattr(cls, name).__doc__ = doc


class OffsetPosition(NamedTuple):
    """Kafka's ``OffsetPosition``: an ``.index`` entry, an offset and the byte position of its
    batch in the segment's ``.log``."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """Kafka's ``TimestampOffset``: a ``.timeindex`` entry, a timestamp and the offset of the
    batch that holds it."""

    timestamp: int
    offset: int


class _TimestampAndOffsetTuple(NamedTuple):
    timestamp: int
    offset: int


class TimestampAndOffset(_TimestampAndOffsetTuple):
    """Kafka's ``FileRecords.TimestampAndOffset``: the answer to ListOffsets by timestamp, the
    first record whose timestamp is at or after the target and its offset, and the leader epoch
    ListOffsets returns with it (``leader_epoch``, None where Kafka's is empty). It unpacks and
    compares as the tuple ``(timestamp, offset)``; the leader epoch is an attribute beside it."""

    leader_epoch: Optional[int]

    def __new__(cls, timestamp: int, offset: int,
                leader_epoch: Optional[int] = None) -> "TimestampAndOffset":
        self = super().__new__(cls, timestamp, offset)
        self.leader_epoch = leader_epoch
        return self

    def __getnewargs__(self) -> tuple[int, int, Optional[int]]:  # type: ignore[override]
        return (self.timestamp, self.offset, self.leader_epoch)

    def __repr__(self) -> str:
        return (f"TimestampAndOffset(timestamp={self.timestamp}, offset={self.offset}, "
                f"leader_epoch={self.leader_epoch})")


class LogOffsetPosition(NamedTuple):
    """Kafka's ``FileRecords.LogOffsetPosition``: the batch that holds an offset, its byte
    position and size in the ``.log`` file."""

    offset: int
    position: int
    size: int


class LogOffsetMetadata(NamedTuple):
    """Kafka's ``LogOffsetMetadata``: an offset, the segment that holds it and its byte position
    there."""

    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int


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
    producer_epoch: int
    last_seq: int
    last_data_offset: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: Optional[int]

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


class CommittedOffset(TypedDict):
    """One committed offset, as ListConsumerGroupOffsets answers it (Kafka's
    ``OffsetAndMetadata`` with its commit time)."""

    offset: int
    leader_epoch: Optional[int]
    """None where the commit carried none."""
    metadata: str
    commit_timestamp: int
    """ms"""


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
    damage: list[str]
    """Damaged ranges the open stepped over (``on_corruption="skip"``); the sums are of the
    batches around them."""
    tail_loss: Optional[str]
    """``Log.tail_loss``: offsets the recovery-point checkpoint says were flushed past the log
    end, missing from its last segment (None when nothing is)."""


_document_fields(
    OffsetPosition,
    offset='The absolute offset.',
    position='The byte position in the ``.log`` file.',
)
_document_fields(
    TimestampOffset,
    timestamp="The timestamp (ms); -1 for an empty index's lookup.",
    offset='The absolute offset.',
)
_document_fields(
    TimestampAndOffset,
    timestamp="The record's timestamp (ms); -1 for EARLIEST_TIMESTAMP and LATEST_TIMESTAMP.",
    offset="The record's offset.",
)
_document_fields(
    LogOffsetPosition,
    offset="The batch's last offset.",
    position="The batch's byte position in the ``.log`` file.",
    size="The batch's size in bytes.",
)
_document_fields(
    LogOffsetMetadata,
    message_offset='The offset.',
    segment_base_offset='The base offset of the segment that holds it.',
    relative_position_in_segment="The byte position in that segment's ``.log``.",
)
_document_fields(
    ProducerStateEntry,
    producer_id='The producer id.',
    producer_epoch="The producer's epoch.",
    last_seq="The sequence number of the producer's last record (-1 when none).",
    last_data_offset="The offset of the producer's last record (-1 when none).",
    last_timestamp="The max timestamp of the producer's last batch (-1 when none).",
    coordinator_epoch="The epoch of the coordinator that wrote the producer's last transaction marker.",
    current_txn_first_offset="The first offset of the producer's open transaction, None when none is open.",
)
