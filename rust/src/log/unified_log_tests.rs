//! Kafka's `UnifiedLogTest`: offsets (log start/end, high watermark, last stable offset), append
//! validation, idempotent and transactional producers, rolling, truncation, timestamps, retention.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::error::Error;
use crate::log::{FetchIsolation, Log, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP};
use crate::record::builder::{end_txn_marker_batch, BatchOptions};
use crate::record::control::{ControlRecordType, EndTransactionMarker};
use crate::record::record::TimestampType;
use crate::testutil::{batch_at, batch_with, offsets_of, values_of, writable_options as options};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &Path, settings: &[(&str, &str)]) -> Log {
    Log::open(
        dir.join("t-0"),
        options(settings, true, Arc::new(AtomicI64::new(NOW))),
    )
    .unwrap()
}

/// A leader append of `n` records stamped `NOW + i`.
fn append(log: &Log, n: usize) -> crate::log::LogAppendInfo {
    let stamps: Vec<i64> = (0..n as i64).map(|i| NOW + i).collect();
    log.append_as_leader(&batch_at(0, &stamps), 0).unwrap()
}

fn producer_batch(pid: i64, epoch: i16, seq: i32, n: usize, txn: bool) -> Vec<u8> {
    let stamps: Vec<i64> = (0..n as i64).map(|i| NOW + i).collect();
    batch_with(
        BatchOptions {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            is_transactional: txn,
            ..Default::default()
        },
        &stamps,
    )
}

fn marker(pid: i64, epoch: i16, commit: bool) -> Vec<u8> {
    let control_type = if commit {
        ControlRecordType::Commit
    } else {
        ControlRecordType::Abort
    };
    end_txn_marker_batch(
        0,
        NOW,
        0,
        pid,
        epoch,
        EndTransactionMarker {
            control_type,
            coordinator_epoch: 0,
        },
    )
    .unwrap()
}

/// `(base, last)` offsets of every batch from `from` up to the isolation's bound, segment by
/// segment (one read answers from one segment, as Kafka's).
fn read_all(log: &Log, from: i64, isolation: FetchIsolation) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let records = log.read(next, 1 << 20, isolation, true).unwrap().records;
        let batches = offsets_of(&records);
        let Some(&(_, last)) = batches.last() else {
            return out;
        };
        out.extend(batches);
        next = last + 1;
    }
}

#[test]
fn append_assigns_offsets_and_moves_the_log_end_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    let info = append(&log, 3);
    assert_eq!(
        (info.first_offset, info.last_offset, info.record_count),
        (0, 2, 3)
    );
    assert_eq!(
        (info.max_timestamp, info.offset_of_max_timestamp),
        (NOW + 2, 2)
    );
    let info = append(&log, 2);
    assert_eq!((info.first_offset, info.last_offset), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    // A lone leader's high watermark follows the log end offset.
    assert_eq!(log.high_watermark(), 5);
    assert_eq!(
        read_all(&log, 0, FetchIsolation::HighWatermark),
        [(0, 2), (3, 4)]
    );
    assert_eq!(read_all(&log, 4, FetchIsolation::LogEnd), [(3, 4)]);
    let fetched = log.read(0, 1 << 20, FetchIsolation::LogEnd, true).unwrap();
    assert_eq!(
        values_of(&fetched.records),
        ["v0", "v1", "v2", "v0", "v1"],
        "as written"
    );
}

#[test]
fn reads_stop_at_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(NOW));
    let log = Log::open(dir.path().join("t-0"), options(&[], false, clock)).unwrap();
    append(&log, 2);
    append(&log, 2);
    assert_eq!(log.high_watermark(), 0);
    assert!(read_all(&log, 0, FetchIsolation::HighWatermark).is_empty());
    assert_eq!(log.update_high_watermark(2).unwrap(), 2);
    assert_eq!(read_all(&log, 0, FetchIsolation::HighWatermark), [(0, 1)]);
    assert_eq!(read_all(&log, 0, FetchIsolation::LogEnd), [(0, 1), (2, 3)]);
    // Clamped to the log end offset; maybe_increment only moves forward.
    assert_eq!(log.update_high_watermark(100).unwrap(), 4);
    assert_eq!(log.maybe_increment_high_watermark(3).unwrap(), None);
    assert_eq!(log.high_watermark(), 4);
}

#[test]
fn read_out_of_range_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    append(&log, 2);
    let err = log.read(3, 1000, FetchIsolation::LogEnd, true).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OffsetOutOfRange {
                offset: 3,
                start: 0,
                end: 2
            }
        ),
        "{err}"
    );
    // Reading at the log end offset is an empty read, not an error.
    assert!(log
        .read(2, 1000, FetchIsolation::LogEnd, true)
        .unwrap()
        .records
        .is_empty());
}

#[test]
fn append_validation_refuses_bad_batches_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("max.message.bytes", "200")]);
    assert!(matches!(
        log.append_as_leader(&[], 0).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    let big: Vec<i64> = vec![NOW; 50];
    let err = log.append_as_leader(&batch_at(0, &big), 0).unwrap_err();
    assert!(matches!(err, Error::RecordTooLarge(_)), "{err}");
    // A corrupt CRC.
    let mut bad = batch_at(0, &[NOW]);
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    let err = log.append_as_leader(&bad, 0).unwrap_err();
    assert!(matches!(err, Error::CorruptRecord { .. }), "{err}");
    // A timestamp an hour past the broker's clock (message.timestamp.after.max.ms).
    let err = log
        .append_as_leader(&batch_at(0, &[NOW + 3_600_001]), 0)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRecord(_)), "{err}");
    // Clients cannot write control batches.
    let err = log.append_as_leader(&marker(1, 0, true), 0).unwrap_err();
    assert!(matches!(err, Error::InvalidRecord(_)), "{err}");
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_in_bytes(), 0);
}

#[test]
fn log_append_time_stamps_the_broker_clock() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("message.timestamp.type", "LogAppendTime")]);
    let info = log.append_as_leader(&batch_at(0, &[5, 6]), 0).unwrap();
    assert_eq!((info.log_append_time, info.max_timestamp), (NOW, NOW));
    let fetched = log.read(0, 10_000, FetchIsolation::LogEnd, true).unwrap();
    let batch = crate::record::batch::DefaultBatch::new(&fetched.records).unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp(), NOW);
}

#[test]
fn follower_appends_keep_offsets_that_follow_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    log.append_as_follower(&batch_at(10, &[NOW, NOW])).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    let err = log.append_as_follower(&batch_at(11, &[NOW])).unwrap_err();
    assert!(matches!(err, Error::InvalidOffset(_)), "{err}");
    assert_eq!(log.log_end_offset(), 12);
}

#[test]
fn idempotent_producer_duplicates_and_out_of_order_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    let first = log
        .append_as_leader(&producer_batch(7, 0, 0, 2, false), 0)
        .unwrap();
    assert!(!first.duplicate);
    // A retry of the same batch: the original offsets, nothing written.
    let retry = log
        .append_as_leader(&producer_batch(7, 0, 0, 2, false), 0)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (0, 1));
    assert_eq!(log.log_end_offset(), 2);
    // A gap in sequences.
    let err = log
        .append_as_leader(&producer_batch(7, 0, 5, 1, false), 0)
        .unwrap_err();
    assert!(matches!(err, Error::OutOfOrderSequence(_)), "{err}");
    assert!(format!("{err}").contains("producer state: OutOfOrderSequence: "));
    // An older epoch is fenced.
    log.append_as_leader(&producer_batch(7, 1, 0, 1, false), 0)
        .unwrap();
    let err = log
        .append_as_leader(&producer_batch(7, 0, 2, 1, false), 0)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidProducerEpoch(_)), "{err}");
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn last_stable_offset_waits_for_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    append(&log, 2);
    log.append_as_leader(&producer_batch(9, 0, 0, 3, true), 0)
        .unwrap();
    append(&log, 1);
    assert_eq!(log.high_watermark(), 6);
    assert_eq!(log.first_unstable_offset(), Some(2));
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(read_all(&log, 0, FetchIsolation::TxnCommitted), [(0, 1)]);
    log.append_txn_marker(&marker(9, 0, false), 0).unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 7);
    // The aborted transaction is reported to committed readers.
    let fetched = log
        .read(0, 100_000, FetchIsolation::TxnCommitted, true)
        .unwrap();
    let aborted = fetched.aborted_transactions.unwrap();
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id, aborted[0].first_offset), (9, 2));
    assert_eq!(log.collect_aborted_transactions(0, 7).unwrap(), aborted);
}

#[test]
fn segments_roll_on_segment_bytes_and_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("segment.bytes", "300")]);
    for _ in 0..10 {
        append(&log, 2);
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 2, "{bases:?}");
    assert!(bases.windows(2).all(|w| w[0] < w[1]));
    let expected: Vec<(i64, i64)> = (0..10).map(|i| (2 * i, 2 * i + 1)).collect();
    assert_eq!(read_all(&log, 0, FetchIsolation::LogEnd), expected);
    let before = log.number_of_segments();
    assert_eq!(log.roll().unwrap(), 20);
    assert_eq!(log.number_of_segments(), before + 1);
    append(&log, 1);
    assert_eq!(*log.segment_base_offsets().last().unwrap(), 20);
}

#[test]
fn truncate_to_moves_the_log_end_and_high_watermark_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("segment.bytes", "300")]);
    for _ in 0..10 {
        append(&log, 2);
    }
    assert!(log.truncate_to(8).unwrap());
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.high_watermark(), 8);
    assert!(log.segment_base_offsets().iter().all(|&b| b <= 8));
    assert_eq!(
        read_all(&log, 0, FetchIsolation::LogEnd),
        [(0, 1), (2, 3), (4, 5), (6, 7)]
    );
    // Whole batches only: the batch holding offset 5 (4..5) goes with it, and the log end is 4,
    // the first offset gone (Kafka would say 5, with no record at 4).
    assert!(log.truncate_to(5).unwrap());
    assert_eq!(log.log_end_offset(), 4);
    assert!(!log.truncate_to(100).unwrap(), "nothing above the log end");
    log.truncate_fully_and_start_at(50).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(append(&log, 1).first_offset, 50);
}

#[test]
fn an_append_past_the_largest_offset_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    log.truncate_fully_and_start_at(i64::MAX - 2).unwrap();
    let stamps = [NOW, NOW + 1, NOW + 2];
    let err = log.append_as_leader(&batch_at(0, &stamps), 0).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidOffset(m) if m.contains("largest offset")),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), i64::MAX - 2, "nothing was appended");
    assert_eq!(append(&log, 2).last_offset, i64::MAX - 1);
}

#[test]
fn offset_for_timestamp_answers_list_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("segment.bytes", "300")]);
    for i in 0..6 {
        let stamps = [NOW + i * 10, NOW + i * 10 + 1];
        log.append_as_leader(&batch_at(0, &stamps), 3).unwrap();
    }
    let at = |ts| {
        log.offset_for_timestamp(ts)
            .unwrap()
            .map(|t| (t.timestamp, t.offset))
    };
    assert_eq!(at(NOW + 25), Some((NOW + 30, 6)));
    assert_eq!(at(NOW + 51), Some((NOW + 51, 11)));
    assert_eq!(at(NOW + 52), None);
    assert_eq!(
        log.offset_for_timestamp(EARLIEST_TIMESTAMP)
            .unwrap()
            .unwrap()
            .offset,
        0
    );
    assert_eq!(
        log.offset_for_timestamp(LATEST_TIMESTAMP)
            .unwrap()
            .unwrap()
            .offset,
        12
    );
    let max = log.offset_for_timestamp(MAX_TIMESTAMP).unwrap().unwrap();
    assert_eq!((max.timestamp, max.offset), (NOW + 51, 11));
    assert_eq!(
        log.offset_for_timestamp(NOW).unwrap().unwrap().leader_epoch,
        Some(3),
        "leader epoch"
    );
}

/// A compacted log whose first segment the cleaner emptied: Kafka searches the first segment
/// whose `largestTimestamp` reaches the target, an empty one standing for its file's mtime, and
/// only that one, so a target up to the mtime finds nothing (Kafka 4.4 and 3.9 answer -1; a
/// black-box tester saw offset 151 here).
#[test]
fn offset_for_timestamp_stops_at_an_emptied_segment_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("segment.bytes", "300")]);
    for i in 0..6 {
        let stamps = [NOW + i * 10, NOW + i * 10 + 1];
        log.append_as_leader(&batch_at(0, &stamps), 0).unwrap();
    }
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    drop(log);
    let folder = dir.path().join("t-0");
    for ext in ["log", "index", "timeindex"] {
        std::fs::write(folder.join(format!("{:020}.{ext}", bases[0])), b"").unwrap();
    }
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_millis((NOW + 25) as u64);
    std::fs::File::options()
        .write(true)
        .open(folder.join(format!("{:020}.log", bases[0])))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let mut read_only = options(
        &[("cleanup.policy", "compact")],
        true,
        Arc::new(AtomicI64::new(NOW)),
    );
    read_only.read_only = true;
    let log = Log::open(&folder, read_only).unwrap();
    let at = |ts| {
        log.offset_for_timestamp(ts)
            .unwrap()
            .map(|t| (t.timestamp, t.offset))
    };
    assert_eq!(at(NOW), None);
    assert_eq!(at(NOW + 25), None);
    let after = log.segment_base_offsets()[1];
    let found = at(NOW + 26).unwrap();
    assert!(found.1 >= after && found.0 >= NOW + 26, "{found:?}");
}

#[test]
fn delete_records_and_retention_remove_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        &[("segment.bytes", "300"), ("file.delete.delay.ms", "0")],
    );
    for _ in 0..10 {
        append(&log, 2);
    }
    let segments = log.number_of_segments();
    let err = log.delete_records(21).unwrap_err();
    assert!(matches!(err, Error::OffsetOutOfRange { .. }), "{err}");
    assert_eq!(log.delete_records(9).unwrap(), 9);
    let err = log.read(8, 1000, FetchIsolation::LogEnd, true).unwrap_err();
    assert!(matches!(err, Error::OffsetOutOfRange { .. }), "{err}");
    let deleted = log.delete_old_segments().unwrap();
    assert!(deleted > 0);
    assert_eq!(log.number_of_segments(), segments - deleted);
    assert!(log.segment_base_offsets()[0] <= 9);
    assert_eq!(log.log_start_offset(), 9);
    assert_eq!(read_all(&log, 9, FetchIsolation::LogEnd)[0], (8, 9));
}

#[test]
fn retention_by_size_and_time_keeps_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(NOW));
    let settings = [
        ("segment.bytes", "300"),
        ("retention.bytes", "400"),
        ("file.delete.delay.ms", "0"),
    ];
    let log = Log::open(
        dir.path().join("t-0"),
        options(&settings, true, clock.clone()),
    )
    .unwrap();
    for _ in 0..10 {
        append(&log, 2);
    }
    assert!(log.delete_old_segments().unwrap() > 0);
    assert!(log.size_in_bytes() <= 400 + 300);
    assert_eq!(log.log_end_offset(), 20);
    // A week later (retention.ms's default), every segment but an empty active one goes.
    clock.store(NOW + 8 * 24 * 3600 * 1000, Ordering::SeqCst);
    log.delete_old_segments().unwrap();
    assert_eq!(log.number_of_segments(), 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (20, 20));
}

#[test]
fn reopen_after_close_keeps_offsets_and_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("segment.bytes", "300")]);
    for _ in 0..5 {
        append(&log, 2);
    }
    log.append_as_leader(&producer_batch(7, 0, 0, 2, false), 0)
        .unwrap();
    log.close().unwrap();
    drop(log);
    let log = open(dir.path(), &[("segment.bytes", "300")]);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(log.high_watermark(), 12);
    let retry = log
        .append_as_leader(&producer_batch(7, 0, 0, 2, false), 0)
        .unwrap();
    assert!(
        retry.duplicate,
        "the producer's last batch survives the reopen"
    );
}

#[test]
fn a_small_fetch_lists_the_aborted_transaction_just_past_it() {
    // Kafka's addAbortedTransactions bounds the search by the first index entry past the bytes
    // read, else the next segment or the log end, not by the last offset read.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    append(&log, 1);
    log.append_as_leader(&producer_batch(7, 0, 0, 2, true), 0)
        .unwrap();
    log.append_txn_marker(&marker(7, 0, false), 0).unwrap();
    let fetched = log.read(0, 1, FetchIsolation::TxnCommitted, true).unwrap();
    assert_eq!(offsets_of(&fetched.records), [(0, 0)]);
    let aborted = fetched.aborted_transactions.unwrap();
    assert_eq!(
        aborted
            .iter()
            .map(|a| (a.producer_id, a.first_offset))
            .collect::<Vec<_>>(),
        [(7, 1)]
    );
}

#[test]
fn max_timestamp_is_found_below_the_log_start_as_kafka_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    log.append_as_leader(
        &batch_at(0, &[NOW + 100, NOW + 900, NOW + 200, NOW + 300]),
        0,
    )
    .unwrap();
    log.append_as_leader(&batch_at(0, &[NOW + 400]), 0).unwrap();
    log.delete_records(2).unwrap();
    let max = log.offset_for_timestamp(MAX_TIMESTAMP).unwrap().unwrap();
    assert_eq!((max.timestamp, max.offset), (NOW + 900, 1));
}

#[test]
fn list_offsets_as_a_consumer_asks_stops_at_what_it_can_fetch() {
    // Kafka's Partition.fetchOffsetForTimestamp: LATEST is the isolation's last fetchable offset,
    // and a record found at or past it is not fetchable yet.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    append(&log, 2); // NOW, NOW + 1
    log.append_as_leader(&producer_batch(9, 0, 0, 3, true), 0)
        .unwrap(); // offsets 2..4, NOW..NOW + 2, open
    let at = |ts, isolation| {
        log.list_offsets(ts, isolation)
            .unwrap()
            .map(|t| (t.timestamp, t.offset))
    };
    assert_eq!(at(NOW + 2, None), Some((NOW + 2, 4)));
    assert_eq!(
        at(NOW + 2, Some(FetchIsolation::HighWatermark)),
        Some((NOW + 2, 4))
    );
    assert_eq!(at(NOW + 2, Some(FetchIsolation::TxnCommitted)), None);
    assert_eq!(
        at(NOW + 1, Some(FetchIsolation::TxnCommitted)),
        Some((NOW + 1, 1))
    );
    assert_eq!(
        at(LATEST_TIMESTAMP, Some(FetchIsolation::TxnCommitted)),
        Some((-1, 2))
    );
    assert_eq!(
        at(LATEST_TIMESTAMP, Some(FetchIsolation::HighWatermark)),
        Some((-1, 5))
    );
    assert_eq!(
        at(EARLIEST_TIMESTAMP, Some(FetchIsolation::TxnCommitted)),
        Some((-1, 0))
    );
}

/// A leader rewrites batches at the topic's `compression.<codec>.level` (KIP-390), as a broker
/// does: gzip at level 1 and at 9 give different bytes, each the size its level makes.
#[test]
fn a_leader_recompresses_at_the_topic_compression_level() {
    use crate::record::codec::{compress_at_level, Compression};
    let payload_size = |level: &str| {
        let dir = tempfile::tempdir().unwrap();
        let log = open(
            dir.path(),
            &[
                ("compression.type", "gzip"),
                ("compression.gzip.level", level),
            ],
        );
        let values: Vec<Vec<u8>> = (0..200u32)
            .map(|i| format!("value {i} {}", "abcdefgh".repeat((i % 7) as usize)).into_bytes())
            .collect();
        let mut b = crate::record::builder::BatchBuilder::new(BatchOptions::default());
        for v in &values {
            b.append(NOW, None, Some(v), &[]).unwrap();
        }
        log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        log.read(0, 1 << 20, FetchIsolation::LogEnd, true)
            .unwrap()
            .records
            .len()
    };
    let (fast, best) = (payload_size("1"), payload_size("9"));
    assert_ne!(fast, best);
    let sample = b"value 1 abcdefgh value 2 abcdefghabcdefgh".repeat(50);
    let at = |level| compress_at_level(Compression::Gzip, &sample, Some(level)).unwrap();
    assert!(at(1).len() > at(9).len());
    assert!(fast > best);
}

/// Kafka's `LogValidator` under `compression.type` other than `producer`: a leader rewrites a
/// batch in another codec in the topic's (producer fields and records kept), leaves a batch
/// already in it and a coordinator's uncompressed marker as they are; a follower keeps its
/// batches as the leader wrote them.
#[test]
fn a_leader_rewrites_batches_in_the_topic_compression_type() {
    use crate::record::batch::DefaultBatch;
    use crate::record::codec::Compression;
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("compression.type", "zstd")]);
    let codecs_of = |bytes: &[u8]| -> Vec<Compression> {
        crate::record::batch::BatchIter::new(bytes)
            .map(|b| b.unwrap().compression().unwrap())
            .collect()
    };
    let lz4 = batch_with(
        BatchOptions {
            compression: Compression::Lz4,
            producer_id: 7,
            producer_epoch: 2,
            base_sequence: 0,
            is_transactional: true,
            ..Default::default()
        },
        &[NOW, NOW + 1, -1],
    );
    let info = log.append_as_leader(&lz4, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 2));
    log.append_as_leader(&batch_at(0, &[NOW + 2]), 0).unwrap();
    log.append_txn_marker(&marker(7, 2, true), 0).unwrap();
    let zstd = batch_with(
        BatchOptions {
            compression: Compression::Zstd,
            ..Default::default()
        },
        &[NOW + 3],
    );
    log.append_as_leader(&zstd, 0).unwrap();
    let stored = log
        .read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap()
        .records;
    assert_eq!(
        codecs_of(&stored),
        [
            Compression::Zstd,
            Compression::Zstd,
            Compression::None,
            Compression::Zstd
        ]
    );
    let values = values_of(&stored);
    assert_eq!(values.len(), 6, "{values:?}");
    assert_eq!(values[..4], ["v0", "v1", "v2", "v0"].map(String::from));
    assert_eq!(values[5], "v0");
    let first = DefaultBatch::new(&stored).unwrap();
    assert_eq!(
        (
            first.producer_id(),
            first.producer_epoch(),
            first.base_sequence()
        ),
        (7, 2, 0)
    );
    assert!(first.is_transactional());
    let mut scratch = Vec::new();
    let stamps: Vec<i64> = crate::record::batch::Batch::parse(&stored)
        .unwrap()
        .records(&mut scratch, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(stamps, [NOW, NOW + 1, -1]);
    assert_eq!(log.last_stable_offset(), log.log_end_offset());

    // A follower copies the leader's bytes, whatever its own setting.
    let follower_dir = tempfile::tempdir().unwrap();
    let follower = open(follower_dir.path(), &[("compression.type", "gzip")]);
    follower.append_as_follower(&stored).unwrap();
    let copied = follower
        .read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap()
        .records;
    assert_eq!(copied, stored);
}

/// A batch rewritten in the topic's codec is held to max.message.bytes as written.
#[test]
fn a_rewritten_batch_larger_than_max_message_bytes_is_refused() {
    use crate::record::codec::Compression;
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        &[
            ("compression.type", "uncompressed"),
            ("max.message.bytes", "400"),
        ],
    );
    let mut b = crate::record::builder::BatchBuilder::new(BatchOptions {
        compression: Compression::Gzip,
        ..Default::default()
    });
    b.append(NOW, None, Some(&[b'x'; 2000]), &[]).unwrap();
    let small = b.build().unwrap();
    assert!(small.len() <= 400, "{}", small.len());
    let err = log.append_as_leader(&small, 0).unwrap_err();
    assert!(matches!(err, Error::RecordTooLarge(_)), "{err}");
    assert_eq!(log.log_end_offset(), 0);
}

/// Kafka's `validateBatch`/`validateKey`/`validateTimestamp` for a client's batch: an idempotent
/// batch needs a sequence, a producer's batch carries CreateTime, a compacted topic takes only
/// keyed records, and a record without a timestamp (-1) is not held to the time range.
#[test]
fn client_batches_are_validated_as_kafka_validates_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[("message.timestamp.before.max.ms", "1000")]);
    let err = log
        .append_as_leader(&producer_batch(3, 0, -1, 2, false), 0)
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRecord(m) if m.contains("Invalid sequence number -1")),
        "{err}"
    );
    let log_append_time = batch_with(
        BatchOptions {
            timestamp_type: TimestampType::LogAppendTime,
            log_append_time: Some(NOW),
            ..Default::default()
        },
        &[NOW],
    );
    let err = log.append_as_leader(&log_append_time, 0).unwrap_err();
    assert!(matches!(err, Error::InvalidRecord(_)), "{err}");
    assert_eq!(log.log_end_offset(), 0);
    log.append_as_leader(&batch_at(0, &[-1]), 0).unwrap();
    assert!(log
        .append_as_leader(&batch_at(0, &[NOW - 1001]), 0)
        .is_err());
    assert_eq!(log.log_end_offset(), 1);

    let compacted_dir = tempfile::tempdir().unwrap();
    let compacted = open(compacted_dir.path(), &[("cleanup.policy", "compact")]);
    let err = compacted
        .append_as_leader(&batch_at(0, &[NOW]), 0)
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRecord(m) if m.contains("without key")),
        "{err}"
    );
    let mut keyed = crate::record::builder::BatchBuilder::new(BatchOptions::default());
    keyed.append(NOW, Some(b"k"), None, &[]).unwrap();
    compacted
        .append_as_leader(&keyed.build().unwrap(), 0)
        .unwrap();
    assert_eq!(compacted.log_end_offset(), 1);
}

#[test]
fn truncate_fully_refuses_a_negative_start_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    append(&log, 3);
    assert!(matches!(
        log.truncate_fully_and_start_at(-3).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 3));
}

/// `delete_records` into a batch, then `truncate_to` inside that batch: segments drop the whole
/// batch, so the log ends at its base, below the log start; the log start follows it down (as
/// Kafka's `min(targetOffset, logStartOffset)` with the offset the log really ends at). It
/// stayed above the end: appends went below the log start, and the closed log no longer opened
/// (a black-box tester). The lowered log start is checkpointed at once, so a crash before close
/// does not leave a checkpointed log start past the log end (read back as offsets lost).
#[test]
fn truncating_below_the_log_start_brings_it_down_and_checkpoints_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    append(&log, 10);
    append(&log, 10);
    log.delete_records(15).unwrap();
    assert!(log.truncate_to(17).unwrap());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 10));
    let checkpointed = || {
        crate::log::checkpoint::OffsetCheckpointFile::new(
            dir.path()
                .join(crate::log::loader::LOG_START_OFFSET_CHECKPOINT),
        )
        .read()
        .unwrap()
        .get(&("t".to_string(), 0))
        .copied()
    };
    assert_eq!(checkpointed(), Some(10), "written before close");
    let info = append(&log, 5);
    assert_eq!((info.first_offset, info.last_offset), (10, 14));
    log.close().unwrap();
    let log = open(dir.path(), &[]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 15));

    // Below a log start at a batch boundary, and fully: checkpointed as well.
    log.delete_records(12).unwrap();
    log.truncate_fully_and_start_at(3).unwrap();
    assert_eq!(checkpointed(), Some(3));
    drop(log); // no close: as a crash would leave it
    let log = open(dir.path(), &[]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
}

/// A leader epoch below -1 (Kafka's "none") is refused before anything is written; it would be
/// stamped into the batch and read back as a damaged one.
#[test]
fn leader_epoch_below_none_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &[]);
    let err = log.append_as_leader(&batch_at(0, &[NOW]), -5).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("leader epoch -5"), "{err}");
    assert_eq!(log.log_end_offset(), 0);
    // -1 is Kafka's "no epoch": taken, nothing assigned to the epoch cache.
    log.append_as_leader(&batch_at(0, &[NOW]), -1).unwrap();
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.current_leader_epoch(), 0);
}
