//! The Python exception hierarchy: one class per kind of `Error`, all under `KafkaLogError`.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::Error;

create_exception!(
    kafkalog,
    KafkaLogError,
    PyException,
    "Base class of every kafkalog error."
);
create_exception!(
    kafkalog,
    CorruptRecordError,
    KafkaLogError,
    "Bytes that are not valid Kafka records (CRC mismatch, truncated or oversized lengths)."
);
create_exception!(
    kafkalog,
    LogDamagedError,
    CorruptRecordError,
    "A log damaged beyond a torn tail (invalid batches with valid ones after them, a missing or \
     emptied segment, offsets going backwards or missing); the message names file, position and \
     offsets. Open with on_corruption='skip' or 'truncate' to read it anyway."
);
create_exception!(
    kafkalog,
    CorruptIndexError,
    KafkaLogError,
    "An index file that breaks Kafka's invariants."
);
create_exception!(
    kafkalog,
    OffsetOutOfRangeError,
    KafkaLogError,
    "An offset outside [log start offset, log end offset]."
);
create_exception!(
    kafkalog,
    InvalidOffsetError,
    KafkaLogError,
    "A non-monotonic or overflowing offset given to an index or log."
);
create_exception!(
    kafkalog,
    RecordTooLargeError,
    KafkaLogError,
    "A record or batch over the configured maximum size."
);
create_exception!(
    kafkalog,
    InvalidRecordError,
    KafkaLogError,
    "A batch that breaks a rule of the log (timestamps, sequence, epoch)."
);
create_exception!(
    kafkalog,
    ReadOnlyError,
    KafkaLogError,
    "A write to a log, segment or index opened read-only."
);
create_exception!(
    kafkalog,
    ProducerStateError,
    KafkaLogError,
    "An idempotent or transactional producer protocol violation."
);
create_exception!(
    kafkalog,
    OutOfOrderSequenceError,
    ProducerStateError,
    "Kafka's OutOfOrderSequenceException: a producer's sequence does not follow its last one."
);
create_exception!(
    kafkalog,
    InvalidProducerEpochError,
    ProducerStateError,
    "Kafka's InvalidProducerEpochException: a write from an older producer epoch (fenced)."
);
create_exception!(
    kafkalog,
    InvalidTxnStateError,
    ProducerStateError,
    "Kafka's InvalidTxnStateException: a non-transactional write inside an open transaction."
);
create_exception!(
    kafkalog,
    TransactionCoordinatorFencedError,
    ProducerStateError,
    "Kafka's TransactionCoordinatorFencedException: a marker from an older coordinator epoch."
);

create_exception!(
    kafkalog,
    CommitFailedError,
    KafkaLogError,
    "Kafka's CommitFailedException: a group member's commit of a partition it no longer owns \
     (its session expired, or a rebalance moved the partition); poll to rejoin."
);
create_exception!(
    kafkalog,
    NoOffsetForPartitionError,
    KafkaLogError,
    "Kafka's NoOffsetForPartitionException: a group with no committed offset for a partition, \
     read with auto_offset_reset='none'."
);
create_exception!(
    kafkalog,
    ConcurrentWriterError,
    KafkaLogError,
    "A second writer: a log folder already opened for writing (in this or another process), \
     or a transactional id held by a live producer."
);

/// Errors that are also Python's own kinds, so `except ValueError` / `except OSError` still
/// catch them: classes with two bases, which `create_exception!` cannot make.
static INVALID_ARGUMENT: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static KAFKA_STORAGE: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static PATH_NOT_FOUND: GILOnceCell<Py<PyType>> = GILOnceCell::new();
/// Kafka's request errors about an argument: `InvalidArgumentError`s, so also `ValueError`s.
static UNKNOWN_TOPIC_OR_PARTITION: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static TOPIC_EXISTS: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static INVALID_TOPIC: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static INVALID_PARTITIONS: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn new_error_type(
    py: Python<'_>,
    name: &str,
    bases: &[&Bound<'_, PyType>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "kafkalog")?;
    namespace.set_item("__doc__", doc)?;
    let class = py
        .get_type::<PyType>()
        .call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(class.downcast_into::<PyType>()?.unbind())
}

/// A count, size or duration given as a Python int: a negative one is `InvalidArgumentError` (a
/// `ValueError`) naming the argument, where an unsigned parameter would raise `OverflowError`.
pub fn non_negative(name: &str, value: i64) -> PyResult<u64> {
    u64::try_from(value).map_err(|_| {
        crate::error::Error::InvalidArgument(format!("{name} must be 0 or more, got {value}"))
            .into()
    })
}

/// A size that must be at least 1 (rows or bytes a batch holds): said the same way for 0 and
/// for a negative one.
pub fn positive_size(name: &str, value: i64) -> PyResult<usize> {
    match usize::try_from(value) {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(crate::error::Error::InvalidArgument(format!(
            "{name} must be at least 1, got {value}"
        ))
        .into()),
    }
}

/// A Kafka field given as a Python int (an epoch, a sequence): one outside the field's width is
/// `InvalidArgumentError` naming it, where a parameter of that width would raise `OverflowError`.
pub fn kafka_field<T: TryFrom<i64>>(name: &str, value: i64) -> PyResult<T> {
    T::try_from(value).map_err(|_| {
        let width = std::mem::size_of::<T>() * 8;
        crate::error::Error::InvalidArgument(format!(
            "{name} {value} does not fit Kafka's {width}-bit field"
        ))
        .into()
    })
}

/// [`kafka_field`] of an optional argument.
pub fn optional_kafka_field<T: TryFrom<i64>>(
    name: &str,
    value: Option<i64>,
) -> PyResult<Option<T>> {
    value.map(|v| kafka_field(name, v)).transpose()
}

/// [`non_negative`] as a `usize`.
pub fn non_negative_size(name: &str, value: i64) -> PyResult<usize> {
    Ok(non_negative(name, value)? as usize)
}

/// An instance of one of the classes `register` makes, or of its Python base before it made it.
fn two_base_error(
    cell: &GILOnceCell<Py<PyType>>,
    fallback: fn(String) -> PyErr,
    msg: String,
) -> PyErr {
    Python::with_gil(|py| match cell.get(py) {
        Some(class) => PyErr::from_type(class.bind(py).clone(), msg),
        None => fallback(msg),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = py.get_type::<KafkaLogError>();
    let invalid_argument = new_error_type(
        py,
        "InvalidArgumentError",
        &[&base, &py.get_type::<PyValueError>()],
        "An argument kafkalog cannot use (a bad option, a folder that is not a partition \
         folder, ...); also a ValueError.",
    )?;
    let storage = new_error_type(
        py,
        "KafkaStorageError",
        &[&base, &py.get_type::<PyOSError>()],
        "Kafka's KafkaStorageException: a file or folder that cannot be read or written; also an \
         OSError.",
    )?;
    let not_found = new_error_type(
        py,
        "PathNotFoundError",
        &[storage.bind(py), &py.get_type::<PyFileNotFoundError>()],
        "A file or folder that does not exist; also a FileNotFoundError.",
    )?;
    let argument_error =
        |name: &str, doc: &str| new_error_type(py, name, &[invalid_argument.bind(py)], doc);
    let unknown_topic_or_partition = argument_error(
        "UnknownTopicOrPartitionError",
        "Kafka's UnknownTopicOrPartitionException: a topic or partition the data dir does not \
         hold.",
    )?;
    let topic_exists = argument_error(
        "TopicExistsError",
        "Kafka's TopicExistsException: a topic created twice.",
    )?;
    let invalid_topic = argument_error(
        "InvalidTopicError",
        "Kafka's InvalidTopicException: a topic name Kafka refuses, or one that collides with an \
         existing topic's ('.' and '_' are the same in metric names).",
    )?;
    let invalid_partitions = argument_error(
        "InvalidPartitionsError",
        "Kafka's InvalidPartitionsException: a partition count under 1, or not above the \
         topic's current count.",
    )?;
    for (name, class, cell) in [
        (
            "UnknownTopicOrPartitionError",
            unknown_topic_or_partition,
            &UNKNOWN_TOPIC_OR_PARTITION,
        ),
        ("TopicExistsError", topic_exists, &TOPIC_EXISTS),
        ("InvalidTopicError", invalid_topic, &INVALID_TOPIC),
        (
            "InvalidPartitionsError",
            invalid_partitions,
            &INVALID_PARTITIONS,
        ),
        ("InvalidArgumentError", invalid_argument, &INVALID_ARGUMENT),
        ("KafkaStorageError", storage, &KAFKA_STORAGE),
        ("PathNotFoundError", not_found, &PATH_NOT_FOUND),
    ] {
        m.add(name, class.bind(py))?;
        let _ = cell.set(py, class);
    }
    m.add("KafkaLogError", py.get_type::<KafkaLogError>())?;
    m.add("CorruptRecordError", py.get_type::<CorruptRecordError>())?;
    m.add("LogDamagedError", py.get_type::<LogDamagedError>())?;
    m.add("CorruptIndexError", py.get_type::<CorruptIndexError>())?;
    m.add(
        "OffsetOutOfRangeError",
        py.get_type::<OffsetOutOfRangeError>(),
    )?;
    m.add("InvalidOffsetError", py.get_type::<InvalidOffsetError>())?;
    m.add("RecordTooLargeError", py.get_type::<RecordTooLargeError>())?;
    m.add("InvalidRecordError", py.get_type::<InvalidRecordError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("ProducerStateError", py.get_type::<ProducerStateError>())?;
    m.add(
        "OutOfOrderSequenceError",
        py.get_type::<OutOfOrderSequenceError>(),
    )?;
    m.add(
        "InvalidProducerEpochError",
        py.get_type::<InvalidProducerEpochError>(),
    )?;
    m.add(
        "InvalidTxnStateError",
        py.get_type::<InvalidTxnStateError>(),
    )?;
    m.add(
        "TransactionCoordinatorFencedError",
        py.get_type::<TransactionCoordinatorFencedError>(),
    )?;
    m.add("CommitFailedError", py.get_type::<CommitFailedError>())?;
    m.add(
        "NoOffsetForPartitionError",
        py.get_type::<NoOffsetForPartitionError>(),
    )?;
    m.add(
        "ConcurrentWriterError",
        py.get_type::<ConcurrentWriterError>(),
    )?;
    Ok(())
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        let msg = e.to_string();
        match e {
            Error::CorruptRecord { .. } => CorruptRecordError::new_err(msg),
            Error::LogDamaged { .. } => LogDamagedError::new_err(msg),
            Error::CorruptIndex { .. } => CorruptIndexError::new_err(msg),
            Error::OffsetOutOfRange { .. } => OffsetOutOfRangeError::new_err(msg),
            Error::InvalidOffset(_) | Error::OffsetOverflow(_) => InvalidOffsetError::new_err(msg),
            Error::RecordTooLarge(_) => RecordTooLargeError::new_err(msg),
            Error::InvalidRecord(_) => InvalidRecordError::new_err(msg),
            Error::ReadOnly(_) => ReadOnlyError::new_err(msg),
            Error::OutOfOrderSequence(_) => OutOfOrderSequenceError::new_err(msg),
            Error::InvalidProducerEpoch(_) => InvalidProducerEpochError::new_err(msg),
            Error::InvalidTxnState(_) => InvalidTxnStateError::new_err(msg),
            Error::TransactionCoordinatorFenced(_) => {
                TransactionCoordinatorFencedError::new_err(msg)
            }
            Error::InvalidArgument(_) => {
                two_base_error(&INVALID_ARGUMENT, PyValueError::new_err, msg)
            }
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                two_base_error(&PATH_NOT_FOUND, PyFileNotFoundError::new_err, msg)
            }
            Error::Io { .. } => two_base_error(&KAFKA_STORAGE, PyOSError::new_err, msg),
            Error::UnknownTopicOrPartition(_) => {
                two_base_error(&UNKNOWN_TOPIC_OR_PARTITION, PyValueError::new_err, msg)
            }
            Error::TopicExists(_) => two_base_error(&TOPIC_EXISTS, PyValueError::new_err, msg),
            Error::InvalidTopic(_) => two_base_error(&INVALID_TOPIC, PyValueError::new_err, msg),
            Error::InvalidPartitions(_) => {
                two_base_error(&INVALID_PARTITIONS, PyValueError::new_err, msg)
            }
            Error::CommitFailed(_) => CommitFailedError::new_err(msg),
            Error::NoOffsetForPartition(_) => NoOffsetForPartitionError::new_err(msg),
            Error::ConcurrentWriter(_) => ConcurrentWriterError::new_err(msg),
            Error::Unsupported(_) | Error::IllegalState(_) => KafkaLogError::new_err(msg),
        }
    }
}
