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
    /// message.timestamp.before.max.ms, as set (the limit a log applies:
    /// [`LogConfig::timestamp_before_max_ms`])
    pub message_timestamp_before_max_ms: i64,
    /// message.timestamp.after.max.ms, as set; `None` for Kafka's default, which 4.0 changed
    /// from unlimited to an hour (KIP-937; the limit: [`LogConfig::timestamp_after_max_ms`])
    pub message_timestamp_after_max_ms: Option<i64>,
    /// message.timestamp.difference.max.ms, as set: Kafka 3.x's limit both ways where the two
    /// above are not set; removed in 4.0
    pub message_timestamp_difference_max_ms: i64,
    /// Whether the log's broker runs Kafka 3.x, whose timestamp limits are unlimited by default
    /// and fall back on `message.timestamp.difference.max.ms` (a ZooKeeper-mode broker's dir,
    /// or one whose broker registered with no 4.x metadata version): set from the data dir
    pub kafka_3_timestamp_limits: bool,
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
    /// compression.gzip.level (KIP-390): the level of batches a leader rewrites in gzip; -1 is
    /// Java's `Deflater.DEFAULT_COMPRESSION` (6).
    pub compression_gzip_level: i32,
    /// compression.lz4.level: taken and kept for the topic, but kafkalog's lz4 is always LZ4's
    /// fast compressor (Kafka's at the default level 9; above it Kafka uses LZ4 HC).
    pub compression_lz4_level: i32,
    /// compression.zstd.level: the level of batches a leader rewrites in zstd.
    pub compression_zstd_level: i32,
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
            message_timestamp_after_max_ms: None,
            message_timestamp_difference_max_ms: i64::MAX,
            kafka_3_timestamp_limits: false,
            file_delete_delay_ms: 60_000,
            flush_messages: i64::MAX,
            preallocate: false,
            max_decompressed_batch_bytes: crate::record::batch::DEFAULT_MAX_DECOMPRESSED_BYTES,
            cleanup_policy_delete: true,
            cleanup_policy_compact: false,
            compression_type: None,
            compression_gzip_level: GZIP_DEFAULT_LEVEL,
            compression_lz4_level: LZ4_DEFAULT_LEVEL,
            compression_zstd_level: crate::record::codec::ZSTD_DEFAULT_LEVEL,
        }
    }
}

/// Kafka's `CompressionType.GZIP.defaultLevel()`: `Deflater.DEFAULT_COMPRESSION`.
const GZIP_DEFAULT_LEVEL: i32 = -1;
/// Kafka's `CompressionType.LZ4.defaultLevel()`.
const LZ4_DEFAULT_LEVEL: i32 = 9;
/// zstd's `ZSTD_minCLevel()` (`Zstd.minCompressionLevel()`), the lowest level Kafka takes.
const ZSTD_MIN_LEVEL: i32 = -131072;

/// The config key of [`LogConfig::max_decompressed_batch_bytes`].
pub const MAX_DECOMPRESSED_BATCH_BYTES: &str = "kafkalog.max.decompressed.batch.bytes";

/// The start of [`LogConfig::set`]'s error for a name it does not know.
const UNKNOWN_CONFIG: &str = "unknown log config";

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// Kafka's `ServerTopicConfigSynonyms`: for each topic config, the broker configs it falls back
/// to, in order (the first one set wins: `log.retention.ms`, then `.minutes`, then `.hours`),
/// with the factor turning the broker config's unit into the topic config's.
const TOPIC_CONFIG_SYNONYMS: &[(&str, &[(&str, i64)])] = &[
    ("segment.bytes", &[("log.segment.bytes", 1)]),
    (
        "segment.ms",
        &[("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)],
    ),
    (
        "segment.jitter.ms",
        &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", HOUR_MS),
        ],
    ),
    ("segment.index.bytes", &[("log.index.size.max.bytes", 1)]),
    ("flush.messages", &[("log.flush.interval.messages", 1)]),
    (
        "flush.ms",
        &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
    ),
    ("retention.bytes", &[("log.retention.bytes", 1)]),
    (
        "retention.ms",
        &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", MINUTE_MS),
            ("log.retention.hours", HOUR_MS),
        ],
    ),
    ("max.message.bytes", &[("message.max.bytes", 1)]),
    ("index.interval.bytes", &[("log.index.interval.bytes", 1)]),
    (
        "delete.retention.ms",
        &[("log.cleaner.delete.retention.ms", 1)],
    ),
    (
        "min.compaction.lag.ms",
        &[("log.cleaner.min.compaction.lag.ms", 1)],
    ),
    (
        "max.compaction.lag.ms",
        &[("log.cleaner.max.compaction.lag.ms", 1)],
    ),
    (
        "file.delete.delay.ms",
        &[("log.segment.delete.delay.ms", 1)],
    ),
    (
        "min.cleanable.dirty.ratio",
        &[("log.cleaner.min.cleanable.ratio", 1)],
    ),
    ("cleanup.policy", &[("log.cleanup.policy", 1)]),
    (
        "unclean.leader.election.enable",
        &[("unclean.leader.election.enable", 1)],
    ),
    ("min.insync.replicas", &[("min.insync.replicas", 1)]),
    ("compression.type", &[("compression.type", 1)]),
    ("compression.gzip.level", &[("compression.gzip.level", 1)]),
    ("compression.lz4.level", &[("compression.lz4.level", 1)]),
    ("compression.zstd.level", &[("compression.zstd.level", 1)]),
    ("preallocate", &[("log.preallocate", 1)]),
    (
        "message.format.version",
        &[("log.message.format.version", 1)],
    ),
    (
        "message.timestamp.type",
        &[("log.message.timestamp.type", 1)],
    ),
    (
        "message.timestamp.difference.max.ms",
        &[("log.message.timestamp.difference.max.ms", 1)],
    ),
    (
        "message.timestamp.before.max.ms",
        &[("log.message.timestamp.before.max.ms", 1)],
    ),
    (
        "message.timestamp.after.max.ms",
        &[("log.message.timestamp.after.max.ms", 1)],
    ),
    (
        "message.downconversion.enable",
        &[("log.message.downconversion.enable", 1)],
    ),
    ("local.retention.ms", &[("log.local.retention.ms", 1)]),
    ("local.retention.bytes", &[("log.local.retention.bytes", 1)]),
];

/// The topic configs a broker's configs give a topic that does not set them itself, as Kafka's
/// `LogManager` makes a log's defaults from its broker's (`log.retention.hours=2` gives
/// `retention.ms=7200000`): each topic config from the first of its broker synonyms set.
/// Returns (topic config, value, the broker config it came from).
pub fn topic_defaults_from_broker(
    broker: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(&'static str, String, &'static str)>> {
    let mut out = Vec::new();
    for &(topic_config, synonyms) in TOPIC_CONFIG_SYNONYMS {
        let Some(&(name, factor)) = synonyms.iter().find(|(n, _)| broker.contains_key(*n)) else {
            continue;
        };
        let value = &broker[name];
        let value = if factor == 1 {
            value.clone()
        } else {
            value
                .trim()
                .parse::<i64>()
                .ok()
                .and_then(|v| v.checked_mul(factor))
                .ok_or_else(|| {
                    Error::InvalidArgument(format!("{name}: '{value}' is not a valid number"))
                })?
                // As `KafkaConfig.logRetentionTimeMillis`: any negative time is -1, unlimited.
                .max(-1)
                .to_string()
        };
        out.push((topic_config, value, name));
    }
    Ok(out)
}

impl LogConfig {
    /// How far before the broker's clock a record's timestamp may be (Kafka's
    /// `LogConfig.messageTimestampBeforeMaxMs`): 3.x takes `message.timestamp.difference.max.ms`
    /// where this is not set.
    pub fn timestamp_before_max_ms(&self) -> i64 {
        match self.message_timestamp_before_max_ms {
            i64::MAX if self.kafka_3_timestamp_limits => self.message_timestamp_difference_max_ms,
            before => before,
        }
    }

    /// How far past the broker's clock a record's timestamp may be (Kafka's
    /// `LogConfig.messageTimestampAfterMaxMs`): an hour by default since 4.0; unlimited before,
    /// or `message.timestamp.difference.max.ms` where that is set.
    pub fn timestamp_after_max_ms(&self) -> i64 {
        match (
            self.message_timestamp_after_max_ms,
            self.kafka_3_timestamp_limits,
        ) {
            (Some(after), false) => after,
            (None, false) => 60 * 60 * 1000,
            (Some(after), true) if after != i64::MAX => after,
            (_, true) => self.message_timestamp_difference_max_ms,
        }
    }

    /// The topic's level for `codec` (`compression.gzip.level`, ...), `None` at Kafka's default.
    pub fn compression_level(&self, codec: Compression) -> Option<i32> {
        let (level, default) = match codec {
            Compression::Gzip => (self.compression_gzip_level, GZIP_DEFAULT_LEVEL),
            Compression::Lz4 => (self.compression_lz4_level, LZ4_DEFAULT_LEVEL),
            Compression::Zstd => (
                self.compression_zstd_level,
                crate::record::codec::ZSTD_DEFAULT_LEVEL,
            ),
            Compression::None | Compression::Snappy => return None,
        };
        (level != default).then_some(level)
    }

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
        // Kafka's `between(min, max)` validators (`min.cleanable.dirty.ratio`'s, a DOUBLE).
        fn between(name: &str, value: &str, min: f64, max: f64) -> Result<f64> {
            let v: f64 = num(name, value)?;
            if !(min..=max).contains(&v) {
                return Err(Error::InvalidArgument(format!(
                    "{name}: {value} is not between {min} and {max}"
                )));
            }
            Ok(v)
        }
        // Kafka's BOOLEAN type: true or false in any case, nothing else.
        fn boolean(name: &str, value: &str) -> Result<bool> {
            match value.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(Error::InvalidArgument(format!(
                    "{name}: '{value}' (true or false)"
                ))),
            }
        }
        // The compression levels' validators (`CompressionType.levelValidator()`): within the
        // codec's levels, or gzip's default (-1) outside them.
        fn level(
            name: &str,
            value: &str,
            levels: std::ops::RangeInclusive<i32>,
            default: i32,
        ) -> Result<i32> {
            let v: i32 = int(name, value)?;
            if v != default && !levels.contains(&v) {
                return Err(Error::InvalidArgument(format!(
                    "{name}: {v} is not between {} and {}",
                    levels.start(),
                    levels.end()
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
            // -1 is unlimited; Kafka refuses anything lower.
            "retention.ms" => self.retention_ms = at_least(name, value, -1)?,
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
                self.message_timestamp_after_max_ms = Some(at_least(name, value, 0)?)
            }
            "message.timestamp.difference.max.ms" => {
                self.message_timestamp_difference_max_ms = at_least(name, value, 0)?
            }
            "file.delete.delay.ms" => self.file_delete_delay_ms = at_least(name, value, 0)?,
            "flush.messages" => self.flush_messages = at_least(name, value, 1)?,
            // kafkalog's own: how far one batch may inflate when decompressed (a guard against
            // decompression bombs, above any batch a producer's 1 MiB default writes).
            MAX_DECOMPRESSED_BATCH_BYTES => {
                self.max_decompressed_batch_bytes = at_least(name, value, 1)? as usize
            }
            "preallocate" => self.preallocate = boolean(name, value)?,
            "compression.gzip.level" => {
                self.compression_gzip_level = level(name, value, 1..=9, GZIP_DEFAULT_LEVEL)?
            }
            "compression.lz4.level" => {
                self.compression_lz4_level = level(name, value, 1..=17, LZ4_DEFAULT_LEVEL)?
            }
            "compression.zstd.level" => {
                self.compression_zstd_level = level(
                    name,
                    value,
                    ZSTD_MIN_LEVEL..=22,
                    crate::record::codec::ZSTD_DEFAULT_LEVEL,
                )?
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
            // Settings of the broker's other machinery (replication, compaction, tiered storage)
            // that do not change how one log reads or writes its files: checked as Kafka's
            // ConfigDef checks them, then passed over.
            "min.insync.replicas" => {
                at_least(name, value, 1).and_then(|_| int::<i64>(name, value))?;
            }
            "min.cleanable.dirty.ratio" => {
                between(name, value, 0.0, 1.0)?;
            }
            "delete.retention.ms" | "min.compaction.lag.ms" | "flush.ms" => {
                at_least(name, value, 0)?;
            }
            "max.compaction.lag.ms" => {
                at_least(name, value, 1)?;
            }
            "local.retention.ms" | "local.retention.bytes" => {
                at_least(name, value, -2)?;
            }
            "unclean.leader.election.enable"
            | "remote.storage.enable"
            | "remote.log.copy.disable"
            | "remote.log.delete.on.disable"
            | "message.downconversion.enable" => {
                boolean(name, value)?;
            }
            "follower.replication.throttled.replicas"
            | "leader.replication.throttled.replicas"
            | "message.format.version" => {}
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
