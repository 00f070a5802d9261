"""kafkalog: Apache Kafka's on-disk log format (segments, indexes, record batches) in Rust.

The classes and functions come from the Rust extension ``kafkalog._kafkalog``; this package only
re-exports them and adds thin Python conveniences. ``kafkalog.spark`` (with the ``spark`` extra)
is the Spark data source; ``Log.to_arrow`` hands records to pyarrow, polars and duckdb.
"""

from kafkalog._kafkalog import (  # noqa: F401
    __version__,
    KafkaLogError,
    CorruptRecordError,
    LogDamagedError,
    CorruptIndexError,
    OffsetOutOfRangeError,
    InvalidOffsetError,
    RecordTooLargeError,
    InvalidRecordError,
    ReadOnlyError,
    ProducerStateError,
    Record,
    Segment,
    Log,
    RecordIterator,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    OffsetIndex,
    TimeIndex,
    TransactionIndex,
    RecordBatch,
    decode_batches,
    encode_batch,
    create_topic,
    murmur2,
    partition_for_key,
    partition_folders,
    validate_topic_name,
)

__all__ = [name for name in dir() if not name.startswith("_")]
