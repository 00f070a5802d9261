//! Kafka's `LogLoaderTest`: reopening a log after a clean or unclean shutdown, torn tails, missing
//! or corrupt indexes rebuilt, stray files, producer state rebuilt, read-only opens that change
//! nothing.

use std::fs;
use std::path::{Path, PathBuf};

use crate::config::LogConfig;
use crate::log::{FetchIsolation, Log, LogOptions};
use crate::record::builder::BatchOptions;
use crate::testutil::{batch_at, batch_with, offsets_of};

fn options(read_only: bool) -> LogOptions {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "400").unwrap();
    config.set("index.interval.bytes", "1").unwrap();
    config.set("file.delete.delay.ms", "0").unwrap();
    // Old fixed timestamps below are fine.
    config
        .set("message.timestamp.before.max.ms", "9223372036854775807")
        .unwrap();
    LogOptions {
        config,
        read_only,
        create: !read_only,
        ..Default::default()
    }
}

fn open(dir: &Path) -> Log {
    Log::open(dir, options(false)).unwrap()
}

fn idempotent(seq: i32) -> Vec<u8> {
    batch_with(
        BatchOptions {
            producer_id: 42,
            producer_epoch: 0,
            base_sequence: seq,
            ..Default::default()
        },
        &[1_000, 1_001],
    )
}

/// A log of 30 records in batches of 2 over several segments, the last batch an idempotent one;
/// flushed but not closed, and copied as a crashed broker would leave it (no clean shutdown
/// marker, no checkpoints).
fn crashed_copy(root: &Path) -> PathBuf {
    let live = root.join("live").join("t-0");
    let log = open(&live);
    for i in 0..14 {
        log.append_as_leader(&batch_at(0, &[1_000 + i, 1_000 + i]), 0)
            .unwrap();
    }
    log.append_as_leader(&idempotent(0), 0).unwrap();
    log.flush().unwrap();
    let copy = root.join("crashed").join("t-0");
    fs::create_dir_all(&copy).unwrap();
    for e in fs::read_dir(&live).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && e.file_name() != ".lock" {
            fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
    }
    log.close().unwrap();
    copy
}

/// The offset a segment file or snapshot is named after.
fn base_offset_of(path: &Path) -> i64 {
    path.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out
}

fn all_batches(log: &Log) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let records = log
            .read(next, 1 << 20, FetchIsolation::LogEnd, true)
            .unwrap()
            .records;
        let batches = offsets_of(&records);
        next = batches.last().unwrap().1 + 1;
        out.extend(batches);
    }
    out
}

fn expected() -> Vec<(i64, i64)> {
    (0..15).map(|i| (2 * i, 2 * i + 1)).collect()
}

#[test]
fn reopen_after_clean_shutdown_recovers_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let log = open(&dir);
    for i in 0..15 {
        log.append_as_leader(&batch_at(0, &[i, i]), 0).unwrap();
    }
    let segments = log.segment_base_offsets();
    log.close().unwrap();
    drop(log);
    let log = open(&dir);
    assert_eq!(log.recovered_bytes_truncated(), 0);
    assert_eq!(log.segment_base_offsets(), segments);
    assert_eq!((log.log_end_offset(), log.recovery_point()), (30, 30));
    assert_eq!(all_batches(&log), expected());
}

/// `root/t-0`: 15 batches of two records (offsets 0..29), closed, with the log dir's
/// clean-shutdown marker as a broker that stopped cleanly leaves it.
fn closed_beside_a_clean_shutdown_marker(
    root: &Path,
) -> (PathBuf, crate::log::checkpoint::CleanShutdownFile) {
    let dir = root.join("t-0");
    let log = open(&dir);
    for i in 0..15 {
        log.append_as_leader(&batch_at(0, &[i, i]), 0).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let marker = crate::log::checkpoint::CleanShutdownFile::in_log_dir(root);
    marker.write(7).unwrap();
    (dir, marker)
}

#[test]
fn a_writer_removes_the_clean_shutdown_marker_so_its_crash_is_recovered() {
    let root = tempfile::tempdir().unwrap();
    let (dir, marker) = closed_beside_a_clean_shutdown_marker(root.path());
    let read_only = Log::open(&dir, options(true)).unwrap();
    drop(read_only);
    assert!(marker.exists(), "a read-only open changes nothing");
    let log = open(&dir);
    assert!(
        !marker.exists(),
        "a writer must not leave a clean-shutdown claim behind it"
    );
    log.append_as_leader(&batch_at(0, &[1, 2]), 0).unwrap();
    // The process dies halfway through its next batch.
    let last_log = files(&dir, ".log").pop().unwrap();
    let mut bytes = fs::read(&last_log).unwrap();
    let torn = batch_at(32, &[3, 4, 5]);
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    drop(log);
    fs::write(&last_log, &bytes).unwrap();
    let log = open(&dir);
    assert_eq!(log.recovered_bytes_truncated(), (torn.len() / 2) as u64);
    assert_eq!(log.log_end_offset(), 32);
}

#[test]
fn reopen_after_unclean_shutdown_recovers_every_segment() {
    let root = tempfile::tempdir().unwrap();
    let dir = crashed_copy(root.path());
    let log = open(&dir);
    assert_eq!(log.recovered_bytes_truncated(), 0);
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(all_batches(&log), expected());
    // Producer state rebuilt from the log: the idempotent batch is still known.
    let retry = log.append_as_leader(&idempotent(0), 0).unwrap();
    assert!(retry.duplicate);
}

#[test]
fn a_torn_tail_is_truncated_on_recovery() {
    let root = tempfile::tempdir().unwrap();
    let dir = crashed_copy(root.path());
    let last_log = files(&dir, ".log").pop().unwrap();
    let size = fs::metadata(&last_log).unwrap().len();
    // Half a batch written when the broker died.
    let torn = batch_at(30, &[1, 2, 3]);
    let mut bytes = fs::read(&last_log).unwrap();
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    fs::write(&last_log, &bytes).unwrap();

    // Read-only: the tail is hidden and nothing on disk changes.
    let ro = Log::open(&dir, options(true)).unwrap();
    assert_eq!(ro.log_end_offset(), 30);
    assert_eq!(all_batches(&ro), expected());
    drop(ro);
    assert_eq!(fs::read(&last_log).unwrap(), bytes);

    let log = open(&dir);
    assert_eq!(log.recovered_bytes_truncated(), (torn.len() / 2) as u64);
    assert_eq!(fs::metadata(&last_log).unwrap().len(), size);
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(
        log.append_as_leader(&batch_at(0, &[5]), 0)
            .unwrap()
            .first_offset,
        30
    );
}

#[test]
fn a_corrupt_batch_in_the_middle_is_refused_or_truncated_from_there_on_request() {
    let root = tempfile::tempdir().unwrap();
    let dir = crashed_copy(root.path());
    let last_log = files(&dir, ".log").pop().unwrap();
    let mut bytes = fs::read(&last_log).unwrap();
    let base = base_offset_of(&last_log);
    // Flip a byte in the records of the segment's first batch: its CRC no longer matches.
    let n = bytes.len();
    let first = crate::record::file_records::headers_in(&bytes)
        .next()
        .unwrap()
        .unwrap();
    bytes[first.size - 1] ^= 0xff;
    fs::write(&last_log, &bytes).unwrap();
    // Valid batches follow the damaged one, so this is damage, not a torn tail: refused unless
    // Kafka's recovery is asked for.
    match Log::open(&dir, options(false)) {
        Err(crate::error::Error::LogDamaged { damage, .. }) => assert!(!damage.is_empty()),
        other => panic!("expected LogDamaged, got {:?}", other.map(|_| ())),
    }
    let log = Log::open(
        &dir,
        LogOptions {
            on_corruption: crate::log::loader::OnCorruption::Truncate,
            ..options(false)
        },
    )
    .unwrap();
    assert_eq!(log.recovered_bytes_truncated(), n as u64);
    assert_eq!(log.log_end_offset(), base);
}

#[test]
fn missing_indexes_are_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let dir = crashed_copy(root.path());
    for p in files(&dir, ".index")
        .into_iter()
        .chain(files(&dir, ".timeindex"))
    {
        fs::remove_file(p).unwrap();
    }
    // Read-only: rebuilt privately, none written beside the log.
    let ro = Log::open(&dir, options(true)).unwrap();
    assert_eq!(all_batches(&ro), expected());
    assert_eq!(
        ro.offset_for_timestamp(1_010).unwrap().map(|t| t.offset),
        Some(20)
    );
    drop(ro);
    assert!(files(&dir, ".index").is_empty());

    let log = open(&dir);
    assert_eq!(all_batches(&log), expected());
    assert_eq!(
        files(&dir, ".index").len(),
        log.number_of_segments(),
        "an index per segment again"
    );
    assert_eq!(
        log.offset_for_timestamp(1_010).unwrap().map(|t| t.offset),
        Some(20)
    );
}

#[test]
fn corrupt_indexes_are_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let dir = crashed_copy(root.path());
    for p in files(&dir, ".index") {
        let len = fs::metadata(&p).unwrap().len() as usize;
        fs::write(&p, vec![0x7f; len.max(16)]).unwrap();
    }
    let log = open(&dir);
    assert_eq!(all_batches(&log), expected());
    for offset in [0, 7, 15, 29] {
        let read = log.read(offset, 1, FetchIsolation::LogEnd, true).unwrap();
        let (first, last) = offsets_of(&read.records)[0];
        assert!(
            first <= offset && offset <= last,
            "{offset}: {first}..{last}"
        );
    }
}

#[test]
fn stray_files_of_an_interrupted_operation_are_removed() {
    let root = tempfile::tempdir().unwrap();
    let dir = crashed_copy(root.path());
    let stray_deleted = dir.join("00000000000000000099.log.deleted");
    let stray_cleaned = dir.join("00000000000000000098.log.cleaned");
    // Temporary files of atomic writes a kill -9 cut short (they piled up; a black-box tester).
    let stray_temps = [
        dir.join("00000000000000003285.snapshot.tmp"),
        dir.join("leader-epoch-checkpoint.tmp"),
    ];
    for stray in [&stray_deleted, &stray_cleaned]
        .into_iter()
        .chain(&stray_temps)
    {
        fs::write(stray, b"x").unwrap();
    }
    // Read-only leaves them.
    drop(Log::open(&dir, options(true)).unwrap());
    assert!(stray_deleted.exists() && stray_cleaned.exists());
    assert!(stray_temps.iter().all(|p| p.exists()));
    let log = open(&dir);
    assert!(!stray_deleted.exists());
    assert!(!stray_cleaned.exists());
    assert!(stray_temps.iter().all(|p| !p.exists()));
    assert_eq!(all_batches(&log), expected());
}

#[test]
fn a_missing_producer_snapshot_is_rebuilt_from_the_log() {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("t-0");
    let log = open(&live);
    log.append_as_leader(&idempotent(0), 0).unwrap();
    log.roll().unwrap();
    log.append_as_leader(&batch_at(0, &[1_000]), 0).unwrap();
    log.close().unwrap();
    drop(log);
    for p in files(&live, ".snapshot") {
        fs::remove_file(p).unwrap();
    }
    let log = open(&live);
    assert_eq!(log.active_producers().len(), 1);
    assert!(log.append_as_leader(&idempotent(0), 0).unwrap().duplicate);
}

/// A batch as Kafka's cleaner leaves it: its offsets kept, records removed from inside.
fn cleaned_batch(base_offset: i64, kept_deltas: &[i32], last_delta: i32) -> Vec<u8> {
    let mut b = crate::record::builder::BatchBuilder::new(BatchOptions {
        base_offset,
        ..Default::default()
    });
    for &d in kept_deltas {
        b.append_with_offset_delta(d, 1_000, Some(b"k"), Some(b"v"), &[])
            .unwrap();
    }
    let bytes = b.build().unwrap();
    let batch = crate::record::batch::DefaultBatch::new(&bytes).unwrap();
    assert_eq!(batch.last_offset_delta(), last_delta);
    bytes
}

#[test]
fn a_compacted_folder_copied_alone_reads_its_gaps_as_compaction() {
    // No cleaner checkpoint and no config beside the copy: the cleaned batch itself says the
    // topic is compacted; the same gap in a log with no such batch is damage.
    for cleaned in [true, false] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("users-0");
        fs::create_dir_all(&dir).unwrap();
        let mut seg = crate::segment::LogSegment::open(
            &dir,
            0,
            &crate::config::LogConfig::default(),
            true,
            "",
            0,
        )
        .unwrap();
        seg.append(4, &batch_at(0, &[1_000; 5])).unwrap();
        let later = if cleaned {
            cleaned_batch(10, &[1, 4], 4)
        } else {
            batch_at(10, &[1_000; 5])
        };
        seg.append(14, &later).unwrap();
        seg.flush().unwrap();
        drop(seg);
        let opened = Log::open(&dir, options(true));
        if cleaned {
            let log = opened.unwrap();
            assert_eq!(log.log_end_offset(), 15);
            assert_eq!(all_batches(&log), [(0, 4), (10, 14)]);
        } else {
            let err = opened.err().unwrap().to_string();
            assert!(err.contains("offsets 5..9 are missing"), "{err}");
        }
    }
}

/// Every file under `root` with its length and CRC.
fn tree(root: &Path) -> Vec<(PathBuf, usize, u32)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = fs::read(&path).unwrap();
                out.push((path, bytes.len(), crc32fast::hash(&bytes)));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_torn_tail_beside_the_clean_shutdown_marker_is_damage_and_a_failed_open_changes_nothing() {
    use crate::log::{DamageAction, OnCorruption};
    let root = tempfile::tempdir().unwrap();
    let (dir, marker) = closed_beside_a_clean_shutdown_marker(root.path());
    // The last batch loses its last bytes after the broker stopped cleanly.
    let last_log = files(&dir, ".log").pop().unwrap();
    let size = fs::metadata(&last_log).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&last_log)
        .unwrap()
        .set_len(size - 5)
        .unwrap();
    let before = tree(root.path());

    // The default writable open refuses (the marker says nothing needs recovery), changing nothing:
    // not the marker, not the active segment's indexes (resized for appends once loaded).
    let refused = Log::open(&dir, options(false)).err().unwrap();
    // Refused as other damage is (a black-box tester's `except LogDamagedError` missed it).
    let crate::error::Error::LogDamaged { damage, .. } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(damage.len(), 1);
    assert_eq!(damage[0].file, last_log);
    let refused = refused.to_string();
    assert!(
        refused.contains("clean-shutdown marker") && refused.contains("on_corruption='truncate'"),
        "{refused}"
    );
    assert_eq!(tree(root.path()), before, "a failed open changes nothing");

    // Read-only, skipping or truncating: the torn tail is reported, not hidden.
    for mode in [OnCorruption::Skip, OnCorruption::Truncate] {
        let log = Log::open(
            &dir,
            LogOptions {
                on_corruption: mode,
                ..options(true)
            },
        )
        .unwrap();
        assert_eq!(log.log_end_offset(), 28, "{mode:?}");
        let damage = log.damaged_ranges();
        assert_eq!(damage.len(), 1, "{mode:?}: {damage:?}");
        assert_eq!(damage[0].file, last_log);
        // At the torn batch; its own header is not to be trusted, but the recovery point the
        // clean shutdown left says where the log ended: offsets 28..29 are lost.
        let torn_at = size - batch_at(0, &[14, 14]).len() as u64;
        assert_eq!(damage[0].position, torn_at, "{mode:?}");
        assert_eq!(damage[0].offsets, Some((28, 29)), "{mode:?}");
        assert!(
            damage[0].to_string().ends_with("offsets 28..29 lost"),
            "{}",
            damage[0]
        );
        drop(log);
        assert_eq!(
            tree(root.path()),
            before,
            "{mode:?} read-only changes nothing"
        );
    }

    // Writable with Kafka's recovery: cut at the torn batch, then the marker goes.
    let log = Log::open(
        &dir,
        LogOptions {
            on_corruption: OnCorruption::Truncate,
            ..options(false)
        },
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), 28);
    assert_eq!(log.damaged_ranges()[0].action, DamageAction::Removed);
    assert_eq!(log.damaged_ranges()[0].offsets, Some((28, 29)));
    assert!(!marker.exists());
    assert_eq!(all_batches(&log), expected()[..14]);
}

#[test]
fn logs_closing_at_once_keep_each_others_checkpoint_entries() {
    // The log dir's checkpoint files are shared by its partitions and replaced whole on each
    // close: concurrent closes must neither lose entries nor trip over each other's temp file.
    let root = tempfile::tempdir().unwrap();
    let partitions = 12;
    for round in 0..3 {
        std::thread::scope(|scope| {
            for p in 0..partitions {
                let dir = root.path().join(format!("t-{p}"));
                scope.spawn(move || {
                    let log = open(&dir);
                    let leo = log.log_end_offset();
                    log.append_as_leader(&batch_at(0, &[1_000 + p as i64; 2]), 0)
                        .unwrap();
                    log.update_high_watermark(leo + 2).unwrap();
                    log.delete_records(leo + 1).unwrap();
                    log.close().unwrap();
                });
            }
        });
        let end = 2 * (round + 1) as i64;
        for name in [
            "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint",
            "replication-offset-checkpoint",
        ] {
            let text = fs::read_to_string(root.path().join(name)).unwrap();
            let entries: Vec<&str> = text.lines().skip(2).collect();
            assert_eq!(
                entries.len(),
                partitions,
                "{name} after round {round}:\n{text}"
            );
            let want = if name.starts_with("log-start") {
                end - 1
            } else {
                end
            };
            for p in 0..partitions {
                assert!(
                    entries.contains(&format!("t {p} {want}").as_str()),
                    "{name}: t-{p}"
                );
            }
        }
    }
}

/// Descriptors of this process open on files under `dir`.
fn fds_under(dir: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

#[test]
fn close_releases_every_segments_files_and_keeps_answering_about_them() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let writer = open(&dir);
    for i in 0..30 {
        writer
            .append_as_leader(&batch_at(0, &[1_000 + i; 3]), 0)
            .unwrap();
    }
    assert!(writer.number_of_segments() > 5);
    let (bases, size) = (writer.segment_base_offsets(), writer.size_in_bytes());
    writer.close().unwrap();
    assert_eq!(fds_under(root.path()), 0, "a closed writer holds no file");
    assert_eq!(
        (writer.segment_base_offsets(), writer.size_in_bytes()),
        (bases.clone(), size)
    );
    let reader = Log::open(&dir, options(true)).unwrap();
    let mapped = reader
        .read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap();
    assert!(fds_under(root.path()) >= bases.len());
    reader.close().unwrap();
    assert_eq!(fds_under(root.path()), 0, "a closed reader holds no file");
    assert_eq!(reader.number_of_segments(), bases.len());
    assert!(reader.read(0, 100, FetchIsolation::LogEnd, true).is_err());
    // What was read before the close stays readable.
    assert_eq!(offsets_of(&mapped.records)[0], (0, 2));
}

#[test]
fn close_all_writes_every_logs_checkpoint_entries_at_once() {
    let root = tempfile::tempdir().unwrap();
    let logs: Vec<Log> = (0..5)
        .map(|p| {
            let log = open(&root.path().join(format!("t-{p}")));
            log.append_as_leader(&batch_at(0, &[1_000; 3]), 0).unwrap();
            log.update_high_watermark(2).unwrap();
            log
        })
        .collect();
    let reader = Log::open(root.path().join("t-0"), options(true)).unwrap();
    let listed = logs.iter().chain([&logs[1], &reader]);
    Log::close_all(listed).unwrap();
    assert!(logs
        .iter()
        .chain([&reader])
        .all(|l| l.read(0, 10, FetchIsolation::LogEnd, true).is_err()));
    for (name, want) in [
        ("recovery-point-offset-checkpoint", 3),
        ("replication-offset-checkpoint", 2),
    ] {
        let text = fs::read_to_string(root.path().join(name)).unwrap();
        for p in 0..5 {
            assert!(text.contains(&format!("t {p} {want}\n")), "{name}:\n{text}");
        }
    }
    // Closed, each can be opened for writing again (its folder lock was released).
    for p in 0..5 {
        open(&root.path().join(format!("t-{p}"))).close().unwrap();
    }
}

/// A writable open refused for damage leaves the producer snapshots too: recovery drops those
/// past where it starts before it finds the damage, and their files went then (a black-box
/// tester: the snapshot a clean close wrote at the log end was gone after the refusal). Once
/// an open succeeds, the dropped snapshots' files go.
#[test]
fn a_refused_writable_open_keeps_the_producer_snapshots() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let log = open(&dir);
    // Segments of a few batches each, until the active one holds three.
    let mut seq = 0;
    while files(&dir, ".log").len() < 3
        || offsets_of(&fs::read(files(&dir, ".log").pop().unwrap()).unwrap()).len() < 3
    {
        log.append_as_leader(&idempotent(seq), 0).unwrap();
        seq += 2;
    }
    log.close().unwrap();
    drop(log);
    let snapshots = files(&dir, ".snapshot");
    let logs = files(&dir, ".log");
    assert!(
        logs.len() >= 3 && snapshots.len() >= 2,
        "{logs:?} {snapshots:?}"
    );
    // A byte of the last segment's first batch flipped (its next batch is whole: not a tail).
    let last_log = logs.last().unwrap();
    let mut bytes = fs::read(last_log).unwrap();
    assert!(offsets_of(&bytes).len() >= 2);
    bytes[40] ^= 0xff;
    fs::write(last_log, &bytes).unwrap();
    let before = tree(root.path());

    let refused = Log::open(&dir, options(false)).err().unwrap();
    assert!(
        matches!(refused, crate::error::Error::LogDamaged { .. }),
        "{refused}"
    );
    assert_eq!(tree(root.path()), before, "a failed open changes nothing");

    let mut truncating = options(false);
    truncating.on_corruption = crate::log::OnCorruption::Truncate;
    let log = Log::open(&dir, truncating).unwrap();
    let end = log.log_end_offset();
    drop(log);
    assert_eq!(
        end,
        base_offset_of(last_log),
        "the damaged segment's batches go"
    );
    let beyond: Vec<PathBuf> = files(&dir, ".snapshot")
        .into_iter()
        .filter(|p| base_offset_of(p) > end)
        .collect();
    assert!(
        beyond.is_empty(),
        "snapshots past the recovered end: {beyond:?}"
    );
}

#[test]
fn a_read_only_open_replays_a_segment_whose_txn_index_kafka_would_rebuild() {
    // Kafka's sanity check refuses a `.txnindex` whose entries end below the segment (zeros
    // left by a crashed page cache, say) and the broker rebuilds it; a read-only view cannot
    // write the file, so read_committed readers must still learn what was aborted.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let log = open(&dir);
    for i in 0..6 {
        log.append_as_leader(&batch_at(0, &[i, i]), 0).unwrap();
    }
    for (seq, abort) in [(0, true), (2, false), (4, true)] {
        crate::testutil::append_transaction(&log, seq, abort, 0);
    }
    log.append_as_leader(&batch_at(0, &[9, 9]), 0).unwrap();
    let want = log.collect_aborted_transactions(0, i64::MAX).unwrap();
    let firsts: Vec<i64> = want.iter().map(|t| t.first_offset).collect();
    assert_eq!(firsts, vec![12, 18]);
    log.close().unwrap();
    drop(log);
    crate::log::checkpoint::CleanShutdownFile::in_log_dir(root.path())
        .write(7)
        .unwrap();
    let indexes: Vec<PathBuf> = files(&dir, ".txnindex")
        .into_iter()
        .filter(|p| fs::metadata(p).unwrap().len() > 0 && base_offset_of(p) > 0)
        .collect();
    assert!(
        !indexes.is_empty(),
        "the aborts are indexed past the first segment"
    );
    for p in &indexes {
        let len = fs::metadata(p).unwrap().len() as usize;
        fs::write(p, vec![0u8; len]).unwrap();
    }
    let before = tree(root.path());
    let read_only = Log::open(&dir, options(true)).unwrap();
    assert_eq!(
        read_only.collect_aborted_transactions(0, i64::MAX).unwrap(),
        want
    );
    drop(read_only);
    assert_eq!(
        tree(root.path()),
        before,
        "a read-only open changes nothing"
    );
    // A writable open rebuilds the files as Kafka's recovery does.
    let writable = open(&dir);
    assert_eq!(
        writable.collect_aborted_transactions(0, i64::MAX).unwrap(),
        want
    );
}

/// A writer's retention renames a segment `.deleted` between a read-only open's listing of the
/// folder and its open of the file: the open lists again and starts after it (a black-box
/// tester's reads of a log under retention failed 2 opens in 887 with "No such file").
#[test]
fn a_segment_deleted_while_a_read_only_open_lists_the_folder_is_left_out() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let log = open(&dir);
    for i in 0..15 {
        log.append_as_leader(&batch_at(0, &[i, i]), 0).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let mut segments = files(&dir, "log");
    segments.sort();
    let (first, second) = (segments[0].clone(), base_offset_of(&segments[1]));
    let mut deleted = false;
    super::loader::AFTER_LISTING.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move |_: &Path| {
            if !deleted {
                for suffix in ["log", "index", "timeindex"] {
                    let file = first.with_extension(suffix);
                    fs::rename(&file, file.with_extension(format!("{suffix}.deleted"))).unwrap();
                }
                deleted = true;
            }
        }))
    });
    let opened = Log::open(&dir, options(true));
    super::loader::AFTER_LISTING.with(|hook| *hook.borrow_mut() = None);
    let log = opened.unwrap();
    assert_eq!(log.log_start_offset(), second);
    assert_eq!(all_batches(&log).first().map(|b| b.0), Some(second));
}
