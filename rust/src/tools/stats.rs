//! `kafkalog stats`: one pass over a partition's batch headers (`FileRecords::for_each_batch`,
//! no record decoded but legacy wrappers' and transaction markers') summing what Kafka's
//! `UnifiedLog` and the kafka-log-dirs / kafka-get-offsets tools tell about a partition.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use crate::error::Result;
use crate::log::{Log, LogOptions, OnCorruption};
use crate::record::batch::Batch;
use crate::record::control::ControlRecordType;
use crate::record::file_records::DEFAULT_MAX_BATCH_SIZE;
use crate::record::record::TimestampType;

/// What a partition holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionStats {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The log's high watermark as a lone replica serves it (see `Log::high_watermark`).
    pub high_watermark: i64,
    /// The broker's last checkpointed high watermark (`replication-offset-checkpoint`), if any.
    pub checkpointed_high_watermark: Option<i64>,
    pub last_stable_offset: i64,
    pub segments: usize,
    pub bytes: u64,
    pub batches: u64,
    /// Data records (control records not counted).
    pub records: u64,
    pub control_batches: u64,
    /// Data records in transactional batches.
    pub transactional_records: u64,
    pub committed_transactions: u64,
    pub aborted_transactions: u64,
    /// Distinct producer ids of idempotent or transactional batches.
    pub producers: usize,
    /// Batch-level times: the smallest first timestamp (a batch's base timestamp, its first
    /// record's, or its max timestamp under LogAppendTime; a record written out of order can be
    /// earlier) and the largest max timestamp; None without timestamps.
    pub first_timestamp: Option<i64>,
    pub last_timestamp: Option<i64>,
    /// Batches per compression codec name ("none", "gzip", ...).
    pub codecs: BTreeMap<String, u64>,
    /// Batches per record format (magic 0, 1, 2).
    pub magic: BTreeMap<u8, u64>,
    /// The damaged ranges the open stepped over (`OnCorruption::Skip`), as `Log::damaged_ranges`
    /// says them; the sums are of the batches around them.
    pub damage: Vec<String>,
    /// `Log::tail_loss`: records the checkpoints say are missing past the log end.
    pub tail_loss: Option<String>,
}

/// Opens `dir` read-only (the log a consumer would read: torn tails left out) and sums its
/// batches from the log start offset on (`bytes` and `segments` are what is on disk); `on_corruption` as `Log::open` takes it (`Skip` sums what is around damage and
/// lists it). `progress` hears each segment's bytes and may stop the work with an error.
pub fn partition_stats(
    dir: &Path,
    on_corruption: OnCorruption,
    progress: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<PartitionStats> {
    let log = Log::open(
        dir,
        LogOptions {
            on_corruption,
            ..Default::default()
        },
    )?;
    let mut s = PartitionStats {
        log_start_offset: log.log_start_offset(),
        log_end_offset: log.log_end_offset(),
        high_watermark: log.high_watermark(),
        checkpointed_high_watermark: log.checkpointed_high_watermark(),
        last_stable_offset: log.last_stable_offset(),
        damage: log.damaged_ranges().iter().map(|d| d.to_string()).collect(),
        tail_loss: log.tail_loss(),
        ..Default::default()
    };
    let mut producers: HashSet<i64> = HashSet::new();
    let st = log.read_state();
    let mut scratch = Vec::new();
    for segment in st.segments.iter() {
        s.segments += 1;
        let file = segment.log();
        let size = file.size_in_bytes();
        s.bytes += size;
        let max_decompressed = segment.max_decompressed();
        file.for_each_batch(0, size, DEFAULT_MAX_BATCH_SIZE, &mut |_, batch| {
            let log_start = s.log_start_offset;
            // Below the log start (DeleteRecords moves it inside a segment, even inside a
            // batch): bytes on disk, but nothing a consumer reads.
            if batch.last_offset() < log_start {
                return Ok(true);
            }
            s.batches += 1;
            *s.magic.entry(batch.magic()).or_default() += 1;
            *s.codecs
                .entry(batch.compression()?.name().to_string())
                .or_default() += 1;
            let mut max_ts = batch.max_timestamp();
            let (first_ts, count) = match batch {
                // The batch the log start falls in, and a batch the cleaner gave a delete
                // horizon (its base timestamp field then holds the horizon): the records' own.
                Batch::V2(b) if b.base_offset() < log_start || b.has_delete_horizon() => {
                    let records = batch.records(&mut scratch, max_decompressed)?;
                    let times: Vec<i64> = records
                        .iter()
                        .filter(|r| r.offset >= log_start)
                        .map(|r| r.timestamp)
                        .collect();
                    max_ts = times.iter().copied().max().unwrap_or(-1);
                    let first = times.iter().copied().filter(|t| *t >= 0).min();
                    (first.unwrap_or(-1), times.len() as u64)
                }
                Batch::V2(b) => {
                    let first = if b.timestamp_type() == TimestampType::LogAppendTime {
                        b.max_timestamp()
                    } else {
                        b.base_timestamp()
                    };
                    (first, b.records_count().max(0) as u64)
                }
                // A legacy wrapper's count is known only once inflated.
                Batch::Legacy(e) => (
                    e.timestamp,
                    batch.records(&mut scratch, max_decompressed)?.len() as u64,
                ),
            };
            if max_ts >= 0 {
                s.last_timestamp = Some(s.last_timestamp.map_or(max_ts, |t| t.max(max_ts)));
            }
            if first_ts >= 0 {
                s.first_timestamp = Some(s.first_timestamp.map_or(first_ts, |t| t.min(first_ts)));
            }
            if batch.producer_id() >= 0 {
                producers.insert(batch.producer_id());
            }
            if batch.is_control() {
                s.control_batches += 1;
                if let Some(marker) = batch.end_txn_marker()? {
                    match marker.control_type {
                        ControlRecordType::Commit => s.committed_transactions += 1,
                        ControlRecordType::Abort => s.aborted_transactions += 1,
                        _ => {}
                    }
                }
            } else {
                s.records += count;
                if batch.is_transactional() {
                    s.transactional_records += count;
                }
            }
            Ok(true)
        })?;
        progress(size)?;
    }
    s.producers = producers.len();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::builder::{BatchBuilder, BatchOptions};

    /// A batch the log cleaner gave a delete horizon keeps the horizon in its base timestamp
    /// field: the first timestamp is its records' own, never the horizon.
    #[test]
    fn a_cleaned_batch_gives_its_records_first_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let log = crate::testutil::create_log(&path);
        let mut b = BatchBuilder::new(BatchOptions {
            delete_horizon_ms: Some(1_700_086_400_000),
            ..Default::default()
        });
        b.append(1_700_000_000_000, Some(b"k"), None, &[]).unwrap();
        b.append(1_700_000_001_000, Some(b"j"), Some(b"v"), &[])
            .unwrap();
        log.append_as_follower(&b.build().unwrap()).unwrap();
        log.close().unwrap();
        let s = partition_stats(&path, OnCorruption::Error, &mut |_| Ok(())).unwrap();
        assert_eq!(s.first_timestamp, Some(1_700_000_000_000));
        assert_eq!(s.last_timestamp, Some(1_700_000_001_000));
        assert_eq!(s.records, 2);
    }
}
