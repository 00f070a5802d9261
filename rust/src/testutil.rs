//! Batches for the crate's unit tests (what Kafka's tests build with `MemoryRecords.withRecords`).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::config::LogConfig;
use crate::log::LogOptions;
use crate::record::batch::BatchIter;
use crate::record::builder::{BatchBuilder, BatchOptions};
use crate::record::file_records::headers_in;

/// One v2 batch at `base_offset` with a record per timestamp; record `o` holds the value `v<o>`.
pub fn batch_at(base_offset: i64, timestamps: &[i64]) -> Vec<u8> {
    batch_with(
        BatchOptions {
            base_offset,
            ..Default::default()
        },
        timestamps,
    )
}

/// One v2 batch with the given header fields and a record per timestamp.
pub fn batch_with(options: BatchOptions, timestamps: &[i64]) -> Vec<u8> {
    let base_offset = options.base_offset;
    let mut b = BatchBuilder::new(options);
    for (i, &ts) in timestamps.iter().enumerate() {
        let v = format!("v{}", base_offset + i as i64);
        b.append(ts, None, Some(v.as_bytes()), &[]).unwrap();
    }
    b.build().unwrap()
}

/// Appends a transaction of producer 7 to `log` as the leader of `epoch`: a transactional batch
/// of two records (`txn`, sequences from `seq`), then its COMMIT or ABORT marker.
pub fn append_transaction(log: &crate::log::Log, seq: i32, abort: bool, epoch: i32) {
    let mut b = BatchBuilder::new(BatchOptions {
        producer_id: 7,
        producer_epoch: 0,
        base_sequence: seq,
        is_transactional: true,
        ..Default::default()
    });
    b.append(2_000, None, Some(b"txn"), &[]).unwrap();
    b.append(2_000, None, Some(b"txn"), &[]).unwrap();
    log.append_as_leader(&b.build().unwrap(), epoch).unwrap();
    append_end_txn_marker(log, 7, abort, epoch, 2_001);
}

/// Appends the COMMIT or ABORT marker of `producer_id` (epoch 0) to `log` as the leader of
/// `epoch`, stamped `timestamp`.
pub fn append_end_txn_marker(
    log: &crate::log::Log,
    producer_id: i64,
    abort: bool,
    epoch: i32,
    timestamp: i64,
) {
    use crate::record::builder::end_txn_marker_batch;
    use crate::record::control::{ControlRecordType, EndTransactionMarker};
    let control_type = if abort {
        ControlRecordType::Abort
    } else {
        ControlRecordType::Commit
    };
    let marker = EndTransactionMarker {
        control_type,
        coordinator_epoch: 0,
    };
    let marker = end_txn_marker_batch(0, timestamp, epoch, producer_id, 0, marker).unwrap();
    log.append_txn_marker(&marker, epoch).unwrap();
}

/// `(base_offset, last_offset)` of every batch in `bytes`.
pub fn offsets_of(bytes: &[u8]) -> Vec<(i64, i64)> {
    headers_in(bytes)
        .map(|h| {
            let h = h.unwrap();
            (h.base_offset, h.last_offset)
        })
        .collect()
}

/// The record values in `bytes`, as strings.
pub fn values_of(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for b in BatchIter::new(bytes) {
        let b = b.unwrap();
        for r in b.records(&mut scratch, usize::MAX).unwrap() {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

/// Options for a writable log that creates its folder: `settings` by their Kafka names over
/// `LogConfig`'s defaults, the clock read from `clock` (which the test moves).
pub fn writable_options(
    settings: &[(&str, &str)],
    single_replica: bool,
    clock: Arc<AtomicI64>,
) -> LogOptions {
    let mut config = LogConfig::default();
    for (k, v) in settings {
        config.set(k, v).unwrap();
    }
    LogOptions {
        config,
        read_only: false,
        create: true,
        single_replica,
        clock: Arc::new(move || clock.load(Ordering::SeqCst)),
        ..LogOptions::default()
    }
}

/// A new writable log at `path` with the default config (created if absent).
pub fn create_log(path: &std::path::Path) -> crate::log::Log {
    crate::log::Log::open(
        path,
        LogOptions {
            read_only: false,
            create: true,
            ..LogOptions::default()
        },
    )
    .unwrap()
}

/// The resident bytes of this process's memory map of `path` (`/proc/self/smaps`), 0 when it
/// is not mapped.
#[cfg(target_os = "linux")]
pub fn mapped_resident_bytes(path: &std::path::Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.to_str().unwrap();
    let mut lines = smaps.lines();
    let mut resident = 0;
    while let Some(line) = lines.next() {
        if !line.ends_with(name) {
            continue;
        }
        for field in lines.by_ref() {
            if let Some(kb) = field.strip_prefix("Rss:") {
                resident += kb
                    .trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap()
                    * 1024;
                break;
            }
        }
    }
    resident
}
