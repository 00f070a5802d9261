//! Kafka's `LogConfig`: the per-log settings that segments and the log obey, with Kafka's
//! defaults and its topic-level property names (`segment.bytes`, `retention.ms`, ...).

use crate::error::{Error, Result};
use crate::record::codec::Compression;
use crate::record::record::TimestampType;

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// segment.bytes, or internal.segment.bytes when set (Kafka 4's `segmentSize()`)
    pub segment_bytes: u64,
    /// internal.segment.bytes: Kafka 4's way past segment.bytes' 1 MiB floor (tests, small
    /// segments); set, it is the segment size whatever segment.bytes says.
    pub internal_segment_bytes: Option<u64>,
    /// segment.ms
    pub segment_ms: i64,
    /// segment.jitter.ms
    pub segment_jitter_ms: i64,
    /// segment.index.bytes
    pub max_index_size: usize,
    /// index.interval.bytes
    pub index_interval_bytes: usize,
    /// retention.ms (-1: unlimited)
    pub retention_ms: i64,
    /// retention.bytes (-1: unlimited)
    pub retention_bytes: i64,
    /// max.message.bytes: the largest batch the log accepts
    pub max_message_bytes: usize,
    /// message.timestamp.type
    pub message_timestamp_type: TimestampType,
    /// message.timestamp.before.max.ms
    pub message_timestamp_before_max_ms: i64,
    /// message.timestamp.after.max.ms
    pub message_timestamp_after_max_ms: i64,
    /// file.delete.delay.ms
    pub file_delete_delay_ms: i64,
    /// flush.messages (i64::MAX: leave flushing to the OS, Kafka's default)
    pub flush_messages: i64,
    /// preallocate
    pub preallocate: bool,
    /// cleanup.policy: `delete`, `compact` or both. Retention by time and size applies only to
    /// `delete` logs; compaction itself is not this library's (yet).
    pub cleanup_policy_delete: bool,
    pub cleanup_policy_compact: bool,
    /// How much one batch may inflate when decompressed (a decoder limit, not a Kafka setting).
    pub max_decompressed_batch_bytes: usize,
    /// compression.type: `None` for `producer` (batches kept in the codec they came in), else the
    /// codec a leader's append rewrites batches in (`uncompressed` is `Compression::None`).
    pub compression_type: Option<Compression>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            internal_segment_bytes: None,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            max_index_size: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            max_message_bytes: 1024 * 1024 + 12,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 60 * 60 * 1000,
            file_delete_delay_ms: 60_000,
            flush_messages: i64::MAX,
            preallocate: false,
            max_decompressed_batch_bytes: crate::record::batch::DEFAULT_MAX_DECOMPRESSED_BYTES,
            cleanup_policy_delete: true,
            cleanup_policy_compact: false,
            compression_type: None,
        }
    }
}

/// The config key of [`LogConfig::max_decompressed_batch_bytes`].
pub const MAX_DECOMPRESSED_BATCH_BYTES: &str = "kafkalog.max.decompressed.batch.bytes";

/// The start of [`LogConfig::set`]'s error for a name it does not know.
const UNKNOWN_CONFIG: &str = "unknown log config";

impl LogConfig {
    /// Sets one property by its Kafka topic-config name (`segment.bytes`, ...) from a string.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        // Applied to a copy: a value the checks refuse leaves the config as it was.
        let mut next = self.clone();
        next.apply(name, value)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Whether `name` is a topic config kafkalog takes (those it models, and those of the
    /// broker's other machinery it accepts and passes over).
    pub fn is_known(name: &str) -> bool {
        match LogConfig::default().apply(name, "") {
            Err(Error::InvalidArgument(message)) => !message.starts_with(UNKNOWN_CONFIG),
            _ => true,
        }
    }

    fn apply(&mut self, name: &str, value: &str) -> Result<()> {
        fn num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T> {
            value.trim().parse().map_err(|_| {
                Error::InvalidArgument(format!("{name}: '{value}' is not a valid number"))
            })
        }
        // Kafka's `atLeast(min)` validators.
        fn at_least(name: &str, value: &str, min: i64) -> Result<i64> {
            let v: i64 = num(name, value)?;
            if v < min {
                return Err(Error::InvalidArgument(format!(
                    "{name}: {v} is below the minimum ({min})"
                )));
            }
            Ok(v)
        }
        // Kafka's INT settings: a value past 32 bits is refused as its ConfigDef refuses it.
        fn int<T: TryFrom<i64>>(name: &str, value: &str) -> Result<T> {
            let v: i64 = num(name, value)?;
            let v = i32::try_from(v).map_err(|_| {
                Error::InvalidArgument(format!(
                    "Invalid value {v} for configuration {name}: Not a number of type INT"
                ))
            })?;
            T::try_from(i64::from(v)).map_err(|_| {
                Error::InvalidArgument(format!("{name}: {v} is below the minimum (0)"))
            })
        }
        match name {
            "segment.bytes" => {
                let bytes = int(name, value)?;
                self.segment_bytes = self.internal_segment_bytes.unwrap_or(bytes);
            }
            "internal.segment.bytes" => {
                let bytes = int(name, value)?;
                self.internal_segment_bytes = Some(bytes);
                self.segment_bytes = bytes;
            }
            "segment.ms" => self.segment_ms = num(name, value)?,
            "segment.jitter.ms" => self.segment_jitter_ms = at_least(name, value, 0)?,
            "segment.index.bytes" => self.max_index_size = int(name, value)?,
            "index.interval.bytes" => self.index_interval_bytes = int(name, value)?,
            "retention.ms" => self.retention_ms = num(name, value)?,
            "retention.bytes" => self.retention_bytes = num(name, value)?,
            "max.message.bytes" => self.max_message_bytes = int(name, value)?,
            // Kafka's `BrokerCompressionType` names; `producer` keeps what producers send.
            "compression.type" => {
                self.compression_type = match value.trim() {
                    "producer" => None,
                    "uncompressed" => Some(Compression::None),
                    "gzip" => Some(Compression::Gzip),
                    "snappy" => Some(Compression::Snappy),
                    "lz4" => Some(Compression::Lz4),
                    "zstd" => Some(Compression::Zstd),
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "compression.type: '{other}' (uncompressed, zstd, lz4, snappy, gzip \
                             or producer)"
                        )))
                    }
                }
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match value {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "message.timestamp.type: '{other}' (CreateTime or LogAppendTime)"
                        )))
                    }
                }
            }
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = at_least(name, value, 0)?
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = at_least(name, value, 0)?
            }
            "file.delete.delay.ms" => self.file_delete_delay_ms = at_least(name, value, 0)?,
            "flush.messages" => self.flush_messages = at_least(name, value, 1)?,
            // kafkalog's own: how far one batch may inflate when decompressed (a guard against
            // decompression bombs, above any batch a producer's 1 MiB default writes).
            MAX_DECOMPRESSED_BATCH_BYTES => {
                self.max_decompressed_batch_bytes = at_least(name, value, 1)? as usize
            }
            // Kafka's BOOLEAN type: true or false in any case, nothing else.
            "preallocate" => {
                self.preallocate = match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "preallocate: '{value}' (true or false)"
                        )))
                    }
                }
            }
            // Settings of the broker's other machinery (compaction, replication) that do not change
            // how one log reads or writes its files.
            "cleanup.policy" => {
                let (mut delete, mut compact) = (false, false);
                for policy in value.split(',').map(str::trim) {
                    match policy {
                        "delete" => delete = true,
                        "compact" => compact = true,
                        other => {
                            return Err(Error::InvalidArgument(format!(
                                "cleanup.policy: '{other}' (delete, compact, or both)"
                            )))
                        }
                    }
                }
                self.cleanup_policy_delete = delete;
                self.cleanup_policy_compact = compact;
            }
            "min.insync.replicas"
            | "unclean.leader.election.enable"
            | "min.cleanable.dirty.ratio"
            | "delete.retention.ms"
            | "min.compaction.lag.ms"
            | "max.compaction.lag.ms"
            | "flush.ms"
            | "local.retention.ms"
            | "local.retention.bytes"
            | "remote.storage.enable"
            | "message.downconversion.enable"
            | "follower.replication.throttled.replicas"
            | "leader.replication.throttled.replicas"
            | "message.format.version"
            | "message.timestamp.difference.max.ms" => {}
            other => {
                return Err(Error::InvalidArgument(format!(
                    "{UNKNOWN_CONFIG} '{other}'"
                )))
            }
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
        if self.segment_bytes < 14 {
            return Err(Error::InvalidArgument(format!(
                "segment.bytes {} is below the minimum (14)",
                self.segment_bytes
            )));
        }
        if self.max_index_size < 12 {
            return Err(Error::InvalidArgument(format!(
                "segment.index.bytes {} is below one entry",
                self.max_index_size
            )));
        }
        if self.segment_ms <= 0 {
            return Err(Error::InvalidArgument("segment.ms must be positive".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod log_config_test;
