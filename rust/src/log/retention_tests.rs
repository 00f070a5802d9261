//! The retention cases of Kafka's `UnifiedLogTest` (`deleteOldSegments`, `deleteRecords`):
//! `retention.bytes`, `retention.ms`, `cleanup.policy`, the log start offset, never past the high
//! watermark, never leaving the log without an active segment, and what goes with a segment
//! (leader epochs, producer snapshots).

use std::path::Path;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use crate::error::Error;
use crate::log::epoch::EpochEntry;
use crate::log::Log;
use crate::testutil::writable_options;

const NOW: i64 = 1_700_000_000_000;
const RECORDS: usize = 15;

/// Kafka's `TestUtils.singletonRecords("test", timestamp)`: one record per batch. Leader appends
/// assign the offsets, so every batch built at offset 0 has the same size.
/// Keyed, as a compacted topic takes only keyed records.
fn singleton(timestamp: i64) -> Vec<u8> {
    let mut b = crate::record::builder::BatchBuilder::new(Default::default());
    b.append(timestamp, Some(b"k"), Some(b"v0"), &[]).unwrap();
    b.build().unwrap()
}

/// Kafka's `createLog(segmentBytes = 5 * set.sizeInBytes, ...)`: five batches per segment.
fn create_log(dir: &Path, settings: &[(&str, String)], single_replica: bool) -> Log {
    let segment_bytes = (5 * singleton(0).len()).to_string();
    let mut all = vec![
        ("segment.bytes", segment_bytes.as_str()),
        ("file.delete.delay.ms", "0"),
    ];
    all.extend(settings.iter().map(|(k, v)| (*k, v.as_str())));
    let clock = Arc::new(AtomicI64::new(NOW));
    Log::open(
        dir.join("t-0"),
        writable_options(&all, single_replica, clock),
    )
    .unwrap()
}

/// Three segments of five batches (offsets 0-4, 5-9, 10-14), every record stamped `timestamp`.
fn three_segments(settings: &[(&str, String)], timestamp: i64) -> (tempfile::TempDir, Log) {
    let dir = tempfile::tempdir().unwrap();
    let log = create_log(dir.path(), settings, true);
    for _ in 0..RECORDS {
        log.append_as_leader(&singleton(timestamp), 0).unwrap();
    }
    assert_eq!(log.segment_base_offsets(), [0, 5, 10]);
    (dir, log)
}

fn set_size() -> i64 {
    singleton(0).len() as i64
}

fn epochs(log: &Log) -> Vec<(i32, i64)> {
    log.read_state()
        .leader_epoch_cache
        .entries()
        .iter()
        .map(
            |EpochEntry {
                 epoch,
                 start_offset,
             }| (*epoch, *start_offset),
        )
        .collect()
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

#[test]
fn should_delete_size_based_segments() {
    let (dir, log) = three_segments(&[("retention.bytes", (set_size() * 10).to_string())], NOW);
    assert_eq!(log.delete_old_segments().unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), [5, 10]);
    assert_eq!(log.log_start_offset(), 5);
    assert_eq!(log.size_in_bytes() as i64, set_size() * 10);
    assert_eq!(
        segment_files(dir.path()),
        [
            "00000000000000000005.log".to_string(),
            "00000000000000000010.log".to_string()
        ]
    );
    // Retention is idempotent: a second pass finds nothing more to delete.
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 2);
}

#[test]
fn should_not_delete_size_based_segments_when_under_retention_size() {
    let (_dir, log) = three_segments(&[("retention.bytes", (set_size() * 15).to_string())], NOW);
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 3);
    assert_eq!(log.log_start_offset(), 0);
}

/// Every segment is past retention: the log rolls first, so an empty active segment remains.
#[test]
fn should_delete_time_based_segments_ready_to_be_deleted() {
    let (dir, log) = three_segments(&[("retention.ms", "10000".into())], 10);
    assert_eq!(log.delete_old_segments().unwrap(), 3);
    assert_eq!(log.segment_base_offsets(), [15]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (15, 15));
    assert_eq!(log.size_in_bytes(), 0);
    assert_eq!(
        segment_files(dir.path()),
        ["00000000000000000015.log".to_string()]
    );
    // The empty active segment is never deleted, however old the log's clock says it is.
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 1);
}

#[test]
fn should_not_delete_time_based_segments_when_none_ready_to_be_deleted() {
    let (_dir, log) = three_segments(&[("retention.ms", "10000000".into())], NOW);
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 3);
}

/// `retention.ms=-1` is unlimited: the oldest records stay.
#[test]
fn unlimited_retention_deletes_nothing() {
    let (_dir, log) = three_segments(
        &[
            ("retention.ms", "-1".into()),
            ("retention.bytes", "-1".into()),
        ],
        10,
    );
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 3);
}

/// Only segments older than retention go, oldest first, and never one with a newer record.
#[test]
fn time_based_retention_stops_at_the_first_recent_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = create_log(dir.path(), &[("retention.ms", "10000".into())], true);
    for i in 0..RECORDS {
        // The second segment holds one recent record among old ones (all within segment.ms of
        // each other, so no segment rolls on time).
        let ts = if i == 7 { NOW } else { NOW - 20_000 };
        log.append_as_leader(&singleton(ts), 0).unwrap();
    }
    assert_eq!(log.delete_old_segments().unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), [5, 10]);
}

#[test]
fn should_not_delete_segments_when_policy_does_not_include_delete() {
    let (_dir, log) = three_segments(
        &[
            ("retention.ms", "10000".into()),
            ("retention.bytes", set_size().to_string()),
            ("cleanup.policy", "compact".into()),
        ],
        10,
    );
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 3);
}

#[test]
fn should_delete_segments_ready_to_be_deleted_when_cleanup_policy_is_compact_and_delete() {
    let (_dir, log) = three_segments(
        &[
            ("retention.ms", "10000".into()),
            ("cleanup.policy", "compact,delete".into()),
        ],
        10,
    );
    assert_eq!(log.delete_old_segments().unwrap(), 3);
    assert_eq!(log.number_of_segments(), 1);
}

/// Segments wholly below the log start offset go whatever the cleanup policy.
#[test]
fn should_delete_start_offset_breached_segments_when_policy_does_not_include_delete() {
    let (_dir, log) = three_segments(&[("cleanup.policy", "compact".into())], 10);
    assert_eq!(log.maybe_increment_log_start_offset(6).unwrap(), 6);
    assert_eq!(log.delete_old_segments().unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), [5, 10]);
    assert_eq!(log.log_start_offset(), 6);
}

#[test]
fn test_log_deletion_after_delete_records() {
    let (_dir, log) = three_segments(&[], NOW);
    assert_eq!(log.log_start_offset(), 0);

    log.delete_records(1).unwrap();
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 3);
    assert_eq!(log.log_start_offset(), 1);

    log.delete_records(6).unwrap();
    log.delete_old_segments().unwrap();
    assert_eq!(log.number_of_segments(), 2);
    assert_eq!(log.log_start_offset(), 6);

    log.delete_records(15).unwrap();
    log.delete_old_segments().unwrap();
    assert_eq!(log.number_of_segments(), 1);
    assert_eq!(log.log_start_offset(), 15);
    // A lower offset never moves the log start offset back.
    assert_eq!(log.delete_records(3).unwrap(), 15);
}

/// `deleteRecords` past the high watermark is Kafka's OffsetOutOfRangeException.
#[test]
fn delete_records_past_the_high_watermark_is_refused() {
    let (_dir, log) = three_segments(&[], NOW);
    match log.delete_records(16).unwrap_err() {
        Error::OffsetOutOfRange { offset, start, end } => {
            assert_eq!((offset, start, end), (16, 0, 15))
        }
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
    assert_eq!(log.log_start_offset(), 0);
}

/// Kafka's `deleteRecordsOnLeader`: -1 (`DeleteRecordsRequest.HIGH_WATERMARK`) deletes up to
/// the high watermark, another negative offset is out of range, and a topic whose cleanup.policy
/// has no `delete` refuses it (a black-box tester's -1 and -2 did nothing without a word).
#[test]
fn delete_records_to_the_high_watermark_and_below_zero() {
    let (_dir, log) = three_segments(&[], NOW);
    for offset in [-2, i64::MIN] {
        let err = log.delete_records(offset).unwrap_err();
        assert!(matches!(err, Error::OffsetOutOfRange { .. }), "{err:?}");
    }
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.delete_records(-1).unwrap(), log.high_watermark());
    assert_eq!(log.log_start_offset(), 15);

    let dir = tempfile::tempdir().unwrap();
    let compacted = create_log(dir.path(), &[("cleanup.policy", "compact".into())], true);
    compacted.append_as_leader(&singleton(NOW), 0).unwrap();
    let err = compacted.delete_records(1).unwrap_err();
    assert!(
        err.to_string().contains("cleanup.policy has no 'delete'"),
        "{err}"
    );
    assert_eq!(compacted.log_start_offset(), 0);
}

/// Nothing at or past the high watermark is deleted, however old: a follower may still need it.
#[test]
fn retention_never_deletes_past_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let log = create_log(dir.path(), &[("retention.ms", "10000".into())], false);
    for _ in 0..RECORDS {
        log.append_as_leader(&singleton(10), 0).unwrap();
    }
    assert_eq!(log.high_watermark(), 0);
    assert_eq!(log.delete_old_segments().unwrap(), 0);
    assert_eq!(log.number_of_segments(), 3);
    // With the high watermark inside the second segment only the first is wholly below it.
    log.update_high_watermark(7).unwrap();
    assert_eq!(log.delete_old_segments().unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), [5, 10]);
    log.update_high_watermark(15).unwrap();
    assert_eq!(log.delete_old_segments().unwrap(), 2);
    assert_eq!(log.segment_base_offsets(), [15]);
}

fn appended_with_epochs(
    settings: &[(&str, String)],
    epochs: [(i32, usize); 3],
) -> (tempfile::TempDir, Log) {
    let dir = tempfile::tempdir().unwrap();
    let log = create_log(dir.path(), settings, true);
    for (epoch, count) in epochs {
        for _ in 0..count {
            log.append_as_leader(&singleton(NOW), epoch).unwrap();
        }
    }
    assert_eq!(log.segment_base_offsets(), [0, 5, 10]);
    (dir, log)
}

#[test]
fn should_truncate_leader_epochs_when_deleting_segments() {
    let retention = [("retention.bytes", (set_size() * 10).to_string())];
    let (_dir, log) = appended_with_epochs(&retention, [(0, 5), (1, 5), (2, 5)]);
    assert_eq!(epochs(&log), [(0, 0), (1, 5), (2, 10)]);
    log.delete_old_segments().unwrap();
    assert_eq!(epochs(&log), [(1, 5), (2, 10)]);
}

#[test]
fn should_update_offset_for_leader_epochs_when_deleting_segments() {
    let retention = [("retention.bytes", (set_size() * 10).to_string())];
    let (_dir, log) = appended_with_epochs(&retention, [(0, 7), (1, 3), (2, 5)]);
    assert_eq!(epochs(&log), [(0, 0), (1, 7), (2, 10)]);
    log.delete_old_segments().unwrap();
    assert_eq!(epochs(&log), [(0, 5), (1, 7), (2, 10)]);
}

/// The producer snapshot a roll took at a segment's base offset goes with the segment.
#[test]
fn test_retention_deletes_producer_state_snapshots() {
    let (dir, log) = three_segments(&[("retention.bytes", (set_size() * 5).to_string())], NOW);
    let snapshots = |log: &Log| log.read_state().producer_state.snapshot_offsets();
    assert_eq!(snapshots(&log), [5, 10]);
    assert_eq!(log.delete_old_segments().unwrap(), 2);
    assert_eq!(log.segment_base_offsets(), [10]);
    assert_eq!(snapshots(&log), [10]);
    let on_disk: Vec<String> = std::fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".snapshot"))
        .collect();
    assert_eq!(on_disk, ["00000000000000000010.snapshot".to_string()]);
}

/// Kafka 4's order within one `deleteOldSegments`: the log start offset, then size, then time.
/// Segments old, recent, old, recent: time first stops at the first recent segment and the size
/// pass then takes one more; size first takes two, and the time pass the old one after them.
#[test]
fn size_retention_runs_before_time_retention() {
    let old = NOW - 10 * 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    let segment = 5 * set_size();
    let log = create_log(
        dir.path(),
        &[
            ("retention.ms", 3_600_000.to_string()),
            // Five closed segments and an active one: over the limit by two segments.
            ("retention.bytes", (4 * segment).to_string()),
        ],
        true,
    );
    for timestamp in [old, NOW, old, NOW, NOW, NOW] {
        for _ in 0..5 {
            log.append_as_leader(&singleton(timestamp), 0).unwrap();
        }
    }
    assert_eq!(log.segment_base_offsets(), [0, 5, 10, 15, 20, 25]);
    assert_eq!(log.delete_old_segments().unwrap(), 3);
    assert_eq!(log.log_start_offset(), 15);
    assert_eq!(log.delete_old_segments().unwrap(), 0);
}
