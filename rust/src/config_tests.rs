//! Kafka's `LogConfigTest`: the defaults Kafka's `LogConfig` has, each topic config set by its
//! Kafka name, and invalid values refused with an error naming the config.

use crate::config::LogConfig;
use crate::error::Error;
use crate::record::record::TimestampType;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn with(name: &str, value: &str) -> crate::error::Result<LogConfig> {
    let mut config = LogConfig::default();
    config.set(name, value)?;
    Ok(config)
}

/// A config name, a value, the field it sets and what the field then holds.
type Case = (&'static str, &'static str, fn(&LogConfig) -> i64, i64);

fn invalid(name: &str, value: &str) -> String {
    match with(name, value) {
        Err(Error::InvalidArgument(message)) => message,
        other => panic!("{name}={value:?} should be refused, got {other:?}"),
    }
}

/// The defaults of Kafka's `LogConfig` / `ServerLogConfigs` (4.x).
#[test]
fn defaults_are_kafkas() {
    let c = LogConfig::default();
    assert_eq!(c.segment_bytes, 1024 * 1024 * 1024);
    assert_eq!(c.segment_ms, 7 * DAY_MS);
    assert_eq!(c.segment_jitter_ms, 0);
    assert_eq!(c.max_index_size, 10 * 1024 * 1024);
    assert_eq!(c.index_interval_bytes, 4096);
    assert_eq!(c.retention_ms, 7 * DAY_MS);
    assert_eq!(c.retention_bytes, -1);
    // 1 MiB of records plus the log overhead: Kafka's 1048588.
    assert_eq!(c.max_message_bytes, 1_048_588);
    assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
    assert_eq!(c.message_timestamp_before_max_ms, i64::MAX);
    assert_eq!(c.message_timestamp_after_max_ms, None);
    assert_eq!(c.timestamp_after_max_ms(), 3_600_000);
    assert_eq!(c.file_delete_delay_ms, 60_000);
    assert_eq!(c.flush_messages, i64::MAX);
    assert!(!c.preallocate);
    assert!(c.cleanup_policy_delete && !c.cleanup_policy_compact);
    c.validate().unwrap();
}

/// Every numeric topic config, set by its Kafka name, lands in its own field.
#[test]
fn each_topic_config_is_set_by_its_kafka_name() {
    let cases: [Case; 12] = [
        (
            "segment.bytes",
            "1048576",
            |c| c.segment_bytes as i64,
            1_048_576,
        ),
        ("segment.ms", "3600000", |c| c.segment_ms, 3_600_000),
        ("segment.jitter.ms", "500", |c| c.segment_jitter_ms, 500),
        (
            "segment.index.bytes",
            "4096",
            |c| c.max_index_size as i64,
            4096,
        ),
        (
            "index.interval.bytes",
            "1",
            |c| c.index_interval_bytes as i64,
            1,
        ),
        ("retention.ms", "-1", |c| c.retention_ms, -1),
        (
            "retention.bytes",
            "1073741824",
            |c| c.retention_bytes,
            1 << 30,
        ),
        (
            "max.message.bytes",
            "2000000",
            |c| c.max_message_bytes as i64,
            2_000_000,
        ),
        (
            "message.timestamp.before.max.ms",
            "86400000",
            |c| c.message_timestamp_before_max_ms,
            DAY_MS,
        ),
        (
            "message.timestamp.after.max.ms",
            "1000",
            |c| c.timestamp_after_max_ms(),
            1000,
        ),
        ("file.delete.delay.ms", "0", |c| c.file_delete_delay_ms, 0),
        ("flush.messages", "1", |c| c.flush_messages, 1),
    ];
    for (name, value, field, expected) in cases {
        let c = with(name, value).unwrap();
        assert_eq!(field(&c), expected, "{name}");
        // Nothing else moved.
        let mut back = c.clone();
        back.set(name, &field(&LogConfig::default()).to_string())
            .unwrap();
        if name == "message.timestamp.after.max.ms" {
            // Set, even to the default, it stays set: a 3.x broker's dir takes it over
            // message.timestamp.difference.max.ms.
            back.message_timestamp_after_max_ms = None;
        }
        assert_eq!(back, LogConfig::default(), "{name}");
    }
    // Surrounding blanks are trimmed, as Kafka's ConfigDef trims.
    assert_eq!(with("retention.ms", " 1000 ").unwrap().retention_ms, 1000);
}

#[test]
fn timestamp_type_preallocate_and_cleanup_policy() {
    assert_eq!(
        with("message.timestamp.type", "LogAppendTime")
            .unwrap()
            .message_timestamp_type,
        TimestampType::LogAppendTime
    );
    assert_eq!(
        with("message.timestamp.type", "CreateTime")
            .unwrap()
            .message_timestamp_type,
        TimestampType::CreateTime
    );
    assert!(with("preallocate", "true").unwrap().preallocate);
    assert!(!with("preallocate", "false").unwrap().preallocate);
    let policy = |v: &str| {
        let c = with("cleanup.policy", v).unwrap();
        (c.cleanup_policy_delete, c.cleanup_policy_compact)
    };
    assert_eq!(policy("delete"), (true, false));
    assert_eq!(policy("compact"), (false, true));
    assert_eq!(policy("compact,delete"), (true, true));
    assert_eq!(policy("delete, compact"), (true, true));
}

/// Configs of the broker's other machinery are accepted and change nothing a log reads or writes.
#[test]
fn broker_only_configs_are_accepted_and_ignored() {
    for (name, value) in [
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "true"),
        ("min.cleanable.dirty.ratio", "0.5"),
        ("delete.retention.ms", "1000"),
        ("flush.ms", "1000"),
        ("local.retention.ms", "-2"),
        ("remote.storage.enable", "false"),
        ("message.format.version", "3.0-IV1"),
    ] {
        assert_eq!(with(name, value).unwrap(), LogConfig::default(), "{name}");
    }
}

/// The broker's other configs and the compression levels are checked as Kafka's `ConfigDef`
/// checks them (4.4 and 3.9 brokers refuse each value below; kafkalog stored them, and refused
/// the KIP-390 levels as unknown, a black-box tester found).
#[test]
fn passed_over_configs_and_compression_levels_are_checked_as_kafka_checks_them() {
    for (name, value) in [
        ("retention.ms", "-2"),
        ("local.retention.ms", "-3"),
        ("local.retention.bytes", "-3"),
        ("min.insync.replicas", "0"),
        ("min.insync.replicas", "2147483648"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("delete.retention.ms", "-1"),
        ("min.compaction.lag.ms", "-1"),
        ("max.compaction.lag.ms", "0"),
        ("flush.ms", "-1"),
        ("unclean.leader.election.enable", "yes"),
        ("remote.storage.enable", "1"),
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "0"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("compression.zstd.level", "-131073"),
    ] {
        assert!(invalid(name, value).contains(name), "{name}={value}");
    }
    use crate::record::codec::Compression;
    let c = LogConfig::default();
    assert_eq!(
        (
            c.compression_gzip_level,
            c.compression_lz4_level,
            c.compression_zstd_level
        ),
        (-1, 9, 3)
    );
    for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
        assert_eq!(c.compression_level(codec), None, "Kafka's default");
    }
    assert_eq!(with("retention.ms", "-1").unwrap().retention_ms, -1);
    let c = with("compression.gzip.level", "1").unwrap();
    assert_eq!(c.compression_level(Compression::Gzip), Some(1));
    assert_eq!(
        with("compression.gzip.level", "-1").unwrap(),
        LogConfig::default()
    );
    assert_eq!(
        with("compression.lz4.level", "17")
            .unwrap()
            .compression_lz4_level,
        17
    );
    let c = with("compression.zstd.level", "-5").unwrap();
    assert_eq!(c.compression_level(Compression::Zstd), Some(-5));
    assert_eq!(
        with("min.cleanable.dirty.ratio", "1").unwrap(),
        LogConfig::default()
    );
    assert_eq!(
        with("remote.log.copy.disable", "TRUE").unwrap(),
        LogConfig::default()
    );
}

/// compression.type by Kafka's names: `producer` (the default) keeps a producer's codec.
#[test]
fn compression_type_takes_kafka_names() {
    use crate::record::codec::Compression;
    for (value, expected) in [
        ("producer", None),
        ("uncompressed", Some(Compression::None)),
        ("gzip", Some(Compression::Gzip)),
        ("snappy", Some(Compression::Snappy)),
        ("lz4", Some(Compression::Lz4)),
        ("zstd", Some(Compression::Zstd)),
    ] {
        assert_eq!(
            with("compression.type", value).unwrap().compression_type,
            expected
        );
    }
    for bad in ["none", "brotli", "ZSTD", ""] {
        assert!(with("compression.type", bad).is_err(), "{bad}");
    }
}

/// Kafka's INT configs refuse a value past 32 bits, as its ConfigDef does.
#[test]
fn int_configs_refuse_values_past_32_bits() {
    for name in [
        "segment.bytes",
        "segment.index.bytes",
        "index.interval.bytes",
        "max.message.bytes",
    ] {
        let err = with(name, "1099511627776").unwrap_err().to_string();
        assert!(err.contains("Not a number of type INT"), "{name}: {err}");
        assert!(with(name, "2147483647").is_ok(), "{name}");
    }
}

/// Kafka's `testFromPropsInvalid`: "not_a_number" for every numeric config, and each config's
/// out-of-range values, refused with a message naming the config.
#[test]
fn test_from_props_invalid() {
    for name in [
        "segment.bytes",
        "segment.ms",
        "segment.jitter.ms",
        "segment.index.bytes",
        "index.interval.bytes",
        "retention.ms",
        "retention.bytes",
        "max.message.bytes",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "file.delete.delay.ms",
        "flush.messages",
    ] {
        assert_eq!(
            invalid(name, "not_a_number"),
            format!("{name}: 'not_a_number' is not a valid number")
        );
    }
    // Sizes cannot be negative.
    for name in [
        "segment.bytes",
        "segment.index.bytes",
        "index.interval.bytes",
        "max.message.bytes",
    ] {
        assert!(invalid(name, "-1").starts_with(name), "{name}");
    }
    assert_eq!(
        invalid("segment.bytes", "13"),
        "segment.bytes 13 is below the minimum (14)"
    );
    assert_eq!(
        invalid("segment.index.bytes", "11"),
        "segment.index.bytes 11 is below one entry"
    );
    assert_eq!(invalid("segment.ms", "0"), "segment.ms must be positive");
    assert_eq!(invalid("segment.ms", "-1"), "segment.ms must be positive");
    assert_eq!(
        invalid("cleanup.policy", "true"),
        "cleanup.policy: 'true' (delete, compact, or both)"
    );
    assert_eq!(
        invalid("cleanup.policy", "foobar"),
        "cleanup.policy: 'foobar' (delete, compact, or both)"
    );
    assert_eq!(
        invalid("message.timestamp.type", "NoTimestampType"),
        "message.timestamp.type: 'NoTimestampType' (CreateTime or LogAppendTime)"
    );
    assert_eq!(
        invalid("retention.millis", "1"),
        "unknown log config 'retention.millis'"
    );
}

/// Kafka's `atLeast` bounds and BOOLEAN parsing; a refused value leaves the config unchanged.
#[test]
fn test_from_props_out_of_bounds_and_refused_values_change_nothing() {
    let mut c = LogConfig::default();
    let before = c.clone();
    for (name, value, message) in [
        (
            "segment.jitter.ms",
            "-1",
            "segment.jitter.ms: -1 is below the minimum (0)",
        ),
        (
            "file.delete.delay.ms",
            "-5",
            "file.delete.delay.ms: -5 is below the minimum (0)",
        ),
        (
            "flush.messages",
            "0",
            "flush.messages: 0 is below the minimum (1)",
        ),
        (
            "message.timestamp.before.max.ms",
            "-1",
            "message.timestamp.before.max.ms: -1 is below the minimum (0)",
        ),
        (
            "message.timestamp.after.max.ms",
            "-1",
            "message.timestamp.after.max.ms: -1 is below the minimum (0)",
        ),
        ("preallocate", "yes", "preallocate: 'yes' (true or false)"),
        (
            "segment.bytes",
            "13",
            "segment.bytes 13 is below the minimum (14)",
        ),
    ] {
        let err = c.set(name, value).unwrap_err();
        assert!(err.to_string().contains(message), "{name}: {err}");
        assert_eq!(c, before, "{name}={value} refused, yet the config changed");
    }
    c.set("preallocate", "TRUE").unwrap();
    assert!(c.preallocate);
    c.set("preallocate", "false").unwrap();
    assert!(!c.preallocate);
    c.set("flush.messages", "1").unwrap();
    assert_eq!(c.flush_messages, 1);
}

/// Kafka 4's `internal.segment.bytes` (how its topics get segments under segment.bytes' 1 MiB
/// floor) is the segment size whenever it is set, in either order; it was refused as unknown
/// and a broker's topic config naming it was passed over (a black-box tester).
#[test]
fn internal_segment_bytes_wins_over_segment_bytes() {
    for order in [
        [
            ("internal.segment.bytes", "1024"),
            ("segment.bytes", "1048576"),
        ],
        [
            ("segment.bytes", "1048576"),
            ("internal.segment.bytes", "1024"),
        ],
    ] {
        let mut c = LogConfig::default();
        for (name, value) in order {
            c.set(name, value).unwrap();
        }
        assert_eq!(c.segment_bytes, 1024, "{order:?}");
    }
    assert!(LogConfig::is_known("internal.segment.bytes"));
}

/// Timestamp limits as Kafka's own `LogConfig` resolves them (its 3.9.2 and 4.4.0 jars,
/// `messageTimestampBeforeMaxMs` / `messageTimestampAfterMaxMs` for these properties): 4.0 made
/// the after limit an hour by default and dropped `message.timestamp.difference.max.ms`, which
/// 3.x takes for either limit left unset.
#[test]
fn timestamp_limits_as_each_release_resolves_them() {
    const MAX: i64 = i64::MAX;
    let cases: [(&[(&str, &str)], (i64, i64), (i64, i64)); 4] = [
        (&[], (MAX, MAX), (MAX, 3_600_000)),
        (
            &[("message.timestamp.difference.max.ms", "1000")],
            (1000, 1000),
            (MAX, 3_600_000),
        ),
        (
            &[
                ("message.timestamp.difference.max.ms", "1000"),
                ("message.timestamp.after.max.ms", "5000"),
            ],
            (1000, 5000),
            (MAX, 5000),
        ),
        (
            &[("message.timestamp.after.max.ms", "5000")],
            (MAX, 5000),
            (MAX, 5000),
        ),
    ];
    for (settings, kafka_3, kafka_4) in cases {
        let mut c = LogConfig::default();
        for (k, v) in settings {
            c.set(k, v).unwrap();
        }
        let limits = |c: &LogConfig| (c.timestamp_before_max_ms(), c.timestamp_after_max_ms());
        assert_eq!(limits(&c), kafka_4, "4.x {settings:?}");
        c.kafka_3_timestamp_limits = true;
        assert_eq!(limits(&c), kafka_3, "3.x {settings:?}");
    }
}
