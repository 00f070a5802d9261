//! The crate's error type. Mirrors the Kafka exceptions a storage caller can see
//! (`CorruptRecordException`, `OffsetOutOfRangeException`, `InvalidOffsetException`, ...);
//! the Python layer maps each variant onto one exception class.

use std::path::{Path, PathBuf};

pub type Result<T> = std::result::Result<T, Error>;

/// Where in which file a problem was found; filled in by the layer that knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub file: Option<PathBuf>,
    pub position: Option<u64>,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.position) {
            (Some(file), Some(pos)) => write!(f, " (in {} at position {})", file.display(), pos),
            (Some(file), None) => write!(f, " (in {})", file.display()),
            (None, Some(pos)) => write!(f, " (at position {})", pos),
            (None, None) => Ok(()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error{}: {source}{}", path.as_ref().map(|p| format!(" on {}", p.display())).unwrap_or_default(), advice_for(source))]
    Io {
        path: Option<PathBuf>,
        #[source]
        source: std::io::Error,
    },
    /// Bytes that do not parse as Kafka records: bad CRC, length past the end, bad varint...
    #[error("corrupt record: {message}{location}")]
    CorruptRecord { message: String, location: Location },
    /// A log whose damage goes beyond a torn tail (see `log::loader`): the message names the
    /// first damaged range; `damage` lists them all.
    #[error("{message}")]
    LogDamaged {
        message: String,
        damage: Vec<crate::log::DamagedRange>,
    },
    /// An index file whose contents break Kafka's invariants (sanity check).
    #[error("corrupt index: {message}{location}")]
    CorruptIndex { message: String, location: Location },
    #[error("offset {offset} is out of range [{start}, {end})")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    /// Kafka's InvalidOffsetException: a non-monotonic index append and the like.
    #[error("invalid offset: {0}")]
    InvalidOffset(String),
    /// Kafka's IndexOffsetOverflowException / LogSegmentOffsetOverflowException.
    #[error("offset overflow: {0}")]
    OffsetOverflow(String),
    #[error("record too large: {0}")]
    RecordTooLarge(String),
    /// A batch that parses but breaks a rule of the log (timestamps, offsets, sequences...).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("read-only: {0}")]
    ReadOnly(String),
    /// Kafka's `OutOfOrderSequenceException`: an idempotent producer's sequence does not follow
    /// its last one (or a new epoch does not start at 0).
    #[error("producer state: OutOfOrderSequence: {0}")]
    OutOfOrderSequence(String),
    /// Kafka's `InvalidProducerEpochException`: a write from an epoch older than the producer's.
    #[error("producer state: InvalidProducerEpoch: {0}")]
    InvalidProducerEpoch(String),
    /// Kafka's `InvalidTxnStateException`: a non-transactional write inside an open transaction.
    #[error("producer state: InvalidTxnState: {0}")]
    InvalidTxnState(String),
    /// Kafka's `TransactionCoordinatorFencedException`: a marker from an older coordinator epoch.
    #[error("producer state: TransactionCoordinatorFenced: {0}")]
    TransactionCoordinatorFenced(String),
    #[error("{0}")]
    IllegalState(String),
    /// Kafka's `UnknownTopicOrPartitionException`: a topic or partition the data dir lacks.
    #[error("UnknownTopicOrPartition: {0}")]
    UnknownTopicOrPartition(String),
    /// Kafka's `TopicExistsException`.
    #[error("TopicExists: {0}")]
    TopicExists(String),
    /// Kafka's `InvalidTopicException`: a name Kafka refuses, or one colliding with a topic's.
    #[error("InvalidTopic: {0}")]
    InvalidTopic(String),
    /// Kafka's `InvalidPartitionsException`: a partition count that cannot be.
    #[error("InvalidPartitions: {0}")]
    InvalidPartitions(String),
    /// Kafka's `CommitFailedException`: a commit from a member that no longer owns the partition.
    #[error("CommitFailed: {0}")]
    CommitFailed(String),
    /// Kafka's `NoOffsetForPartitionException`: no committed offset and no reset policy.
    #[error("NoOffsetForPartition: {0}")]
    NoOffsetForPartition(String),
    /// A second writer: of a log folder (Kafka's log dir lock), or a second live producer of a
    /// transactional id.
    #[error("{0}")]
    ConcurrentWriter(String),
}

/// A copy of the error for each caller that learns it (every future of a failed producer
/// batch). An I/O error is rebuilt from its OS error number where it has one, so a copy keeps
/// the advice that number brings (`ulimit -n` for EMFILE); otherwise from its kind and message.
impl Clone for Error {
    fn clone(&self) -> Self {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: source.raw_os_error().map_or_else(
                    || std::io::Error::new(source.kind(), source.to_string()),
                    std::io::Error::from_raw_os_error,
                ),
            },
            Error::CorruptRecord { message, location } => Error::CorruptRecord {
                message: message.clone(),
                location: location.clone(),
            },
            Error::LogDamaged { message, damage } => Error::LogDamaged {
                message: message.clone(),
                damage: damage.clone(),
            },
            Error::CorruptIndex { message, location } => Error::CorruptIndex {
                message: message.clone(),
                location: location.clone(),
            },
            Error::OffsetOutOfRange { offset, start, end } => Error::OffsetOutOfRange {
                offset: *offset,
                start: *start,
                end: *end,
            },
            Error::InvalidOffset(m) => Error::InvalidOffset(m.clone()),
            Error::OffsetOverflow(m) => Error::OffsetOverflow(m.clone()),
            Error::RecordTooLarge(m) => Error::RecordTooLarge(m.clone()),
            Error::InvalidRecord(m) => Error::InvalidRecord(m.clone()),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Unsupported(m) => Error::Unsupported(m.clone()),
            Error::ReadOnly(m) => Error::ReadOnly(m.clone()),
            Error::OutOfOrderSequence(m) => Error::OutOfOrderSequence(m.clone()),
            Error::InvalidProducerEpoch(m) => Error::InvalidProducerEpoch(m.clone()),
            Error::InvalidTxnState(m) => Error::InvalidTxnState(m.clone()),
            Error::TransactionCoordinatorFenced(m) => {
                Error::TransactionCoordinatorFenced(m.clone())
            }
            Error::IllegalState(m) => Error::IllegalState(m.clone()),
            Error::UnknownTopicOrPartition(m) => Error::UnknownTopicOrPartition(m.clone()),
            Error::TopicExists(m) => Error::TopicExists(m.clone()),
            Error::InvalidTopic(m) => Error::InvalidTopic(m.clone()),
            Error::InvalidPartitions(m) => Error::InvalidPartitions(m.clone()),
            Error::CommitFailed(m) => Error::CommitFailed(m.clone()),
            Error::NoOffsetForPartition(m) => Error::NoOffsetForPartition(m.clone()),
            Error::ConcurrentWriter(m) => Error::ConcurrentWriter(m.clone()),
        }
    }
}

impl Error {
    pub fn corrupt(message: impl Into<String>) -> Self {
        Error::CorruptRecord {
            message: message.into(),
            location: Location::default(),
        }
    }

    pub fn corrupt_index(message: impl Into<String>) -> Self {
        Error::CorruptIndex {
            message: message.into(),
            location: Location::default(),
        }
    }

    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: Some(path.as_ref().to_path_buf()),
            source,
        }
    }

    /// Memory that could not be had: an I/O-class error (`KafkaStorageError` in Python), never a
    /// report of damage, nor an abort of the process.
    pub fn out_of_memory(path: Option<&Path>, what: String) -> Self {
        Error::Io {
            path: path.map(Path::to_path_buf),
            source: std::io::Error::new(std::io::ErrorKind::OutOfMemory, what),
        }
    }

    /// Whether this is [`Self::out_of_memory`]'s error: memory ran out, the data is not at fault.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::OutOfMemory)
    }

    /// Attach the file and position to a corruption error found while decoding a buffer
    /// (the decoder only knows offsets relative to its slice). Keeps an existing file.
    pub fn at(mut self, file: Option<&Path>, position: u64) -> Self {
        if let Error::CorruptRecord { location, .. } | Error::CorruptIndex { location, .. } =
            &mut self
        {
            if location.file.is_none() {
                location.file = file.map(Path::to_path_buf);
            }
            location.position = Some(position + location.position.unwrap_or(0));
        }
        self
    }

    pub fn in_file(mut self, file: &Path) -> Self {
        match &mut self {
            Error::CorruptRecord { location, .. } | Error::CorruptIndex { location, .. }
                if location.file.is_none() =>
            {
                location.file = Some(file.to_path_buf());
            }
            Error::Io { path, .. } if path.is_none() => *path = Some(file.to_path_buf()),
            _ => {}
        }
        self
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: None, source }
    }
}

/// Shorthand for `Err(Error::corrupt(format!(...)))`.
#[macro_export]
macro_rules! corrupt {
    ($($arg:tt)*) => { Err($crate::error::Error::corrupt(format!($($arg)*))) };
}

/// What to do about an I/O error a user can fix: an open log holds a descriptor per segment
/// file (as Kafka's broker does), so a partition with thousands of segments needs a higher
/// open-file limit than the usual 1024.
fn advice_for(source: &std::io::Error) -> String {
    if source.raw_os_error() != Some(libc::EMFILE) {
        return String::new();
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let now = if known {
        format!(" (now {})", limit.rlim_cur)
    } else {
        String::new()
    };
    format!(
        "; an open log holds its segments' files open, as a broker does: raise the open-file \
         limit{now}, e.g. `ulimit -n 65536`, or close logs no longer read"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_open_files_says_what_to_raise() {
        let e = Error::io(
            "/d/t-0/00000000000000001099.index",
            std::io::Error::from_raw_os_error(libc::EMFILE),
        );
        let text = e.to_string();
        assert!(text.starts_with("I/O error on /d/t-0/00000000000000001099.index: "));
        assert!(
            text.contains("ulimit -n") && text.contains("(now "),
            "{text}"
        );
        let other = Error::io("/d", std::io::Error::from_raw_os_error(libc::ENOENT));
        assert!(!other.to_string().contains("ulimit"));
    }

    #[test]
    fn a_copy_of_an_io_error_keeps_its_os_error_and_its_advice() {
        // Every future of a failed producer batch gets a copy: the copy says what the first does.
        let e = Error::io(
            "/d/t-0/00000000000000000000.index",
            std::io::Error::from_raw_os_error(libc::EMFILE),
        );
        let copy = e.clone();
        assert_eq!(copy.to_string(), e.to_string());
        assert!(copy.to_string().contains("ulimit -n"));
        let oom = Error::out_of_memory(None, "inflating a batch".into()).clone();
        assert!(oom.is_out_of_memory() && oom.to_string().contains("inflating a batch"));
    }
}
