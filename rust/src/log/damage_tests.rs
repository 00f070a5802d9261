//! The loader's damage rules on logs this crate writes: a torn tail of the last segment is
//! recovered silently; an invalid batch with valid ones after it, an emptied or deleted segment
//! between others, offsets going backwards and gaps are refused by default, read around with
//! `Skip`, recovered Kafka's way with `Truncate`; read-only opens change nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::LogConfig;
use crate::error::Error;
use crate::log::{DamageAction, FetchIsolation, Log, LogOptions, OnCorruption};
use crate::record::builder::{BatchBuilder, BatchOptions};
use crate::record::file_records::FileRecords;

pub(crate) fn batch_of(count: i64, size: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions::default());
    for i in 0..count {
        let v = vec![b'a' + (i % 26) as u8; size];
        b.append(1_000 + i, None, Some(&v), &[]).unwrap();
    }
    b.build().unwrap()
}

fn config() -> LogConfig {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "2600").unwrap();
    config.set("index.interval.bytes", "256").unwrap();
    config.set("file.delete.delay.ms", "0").unwrap();
    config
}

fn options(read_only: bool, on_corruption: OnCorruption) -> LogOptions {
    LogOptions {
        config: config(),
        read_only,
        on_corruption,
        ..Default::default()
    }
}

/// A log of 4 segments in `root/t-0`, 4 records per batch, 10 batches per segment, as a copy of
/// a partition folder has it: without the log dir's checkpoint files, so the open validates
/// every segment.
fn four_segments(root: &Path) -> PathBuf {
    let dir = four_segments_with_checkpoints(root);
    for name in [
        crate::log::loader::RECOVERY_POINT_CHECKPOINT,
        crate::log::loader::LOG_START_OFFSET_CHECKPOINT,
        crate::log::loader::REPLICATION_OFFSET_CHECKPOINT,
    ] {
        std::fs::remove_file(root.join(name)).unwrap();
    }
    dir
}

fn four_segments_with_checkpoints(root: &Path) -> PathBuf {
    let dir = root.join("t-0");
    let log = Log::open(
        &dir,
        LogOptions {
            create: true,
            ..options(false, OnCorruption::Error)
        },
    )
    .unwrap();
    while log.number_of_segments() < 4 || log.log_end_offset() % 40 != 0 {
        log.append_as_leader(&batch_of(4, 40), 0).unwrap();
    }
    log.close().unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 40, 80, 120]);
    dir
}

fn seg(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// (bytes, length, mtime) of every file under `root`.
pub(crate) fn snapshot(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let m = std::fs::metadata(&p).unwrap();
                out.insert(
                    p.clone(),
                    (std::fs::read(&p).unwrap(), m.len(), m.modified().unwrap()),
                );
            }
        }
    }
    out
}

/// Batch positions of a segment file.
fn positions(path: &Path) -> Vec<u64> {
    let f = FileRecords::open(path, false).unwrap();
    f.headers_from(0, 1 << 20)
        .map(|h| h.unwrap().position)
        .collect()
}

fn offsets(log: &Log) -> Vec<i64> {
    log.records(None, None, FetchIsolation::LogEnd)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect()
}

fn open_ro(dir: &Path, mode: OnCorruption) -> crate::error::Result<Log> {
    let before = snapshot(dir.parent().unwrap());
    let r = Log::open(dir, options(true, mode));
    if let Ok(log) = &r {
        let _ = log.records(None, None, FetchIsolation::LogEnd);
    }
    assert!(
        snapshot(dir.parent().unwrap()) == before,
        "a read-only open changed files"
    );
    r
}

fn damaged_message(r: crate::error::Result<Log>) -> String {
    match r {
        Err(Error::LogDamaged { message, damage }) => {
            assert!(!damage.is_empty());
            message
        }
        Err(e) => panic!("expected LogDamaged, got {e}"),
        Ok(_) => panic!("expected LogDamaged, the open succeeded"),
    }
}

#[test]
fn flipped_bytes_in_a_middle_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let p = seg(&dir, 40);
    let third = positions(&p)[2];
    let mut bytes = std::fs::read(&p).unwrap();
    for b in &mut bytes[third as usize + 70..third as usize + 80] {
        *b ^= 0xff;
    }
    std::fs::write(&p, &bytes).unwrap();

    let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
    assert!(msg.contains("00000000000000000040.log"), "{msg}");
    assert!(msg.contains(&format!("at position {third}")), "{msg}");
    assert!(msg.contains("offsets 48..51 lost"), "{msg}");

    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    let want: Vec<i64> = (0..160).filter(|o| !(48..52).contains(o)).collect();
    assert_eq!(offsets(&log), want);
    let d = log.damaged_ranges();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].position, d[0].offsets), (third, Some((48, 51))));
    assert_eq!(d[0].action, DamageAction::Skipped);
    // a fetch never hands out the damaged bytes
    let fetched = log.read(44, 1 << 20, FetchIsolation::LogEnd, true).unwrap();
    assert!(crate::record::file_records::headers_in(&fetched.records).all(|h| h.is_ok()));
    assert_eq!(
        log.read(48, 1 << 20, FetchIsolation::LogEnd, true)
            .unwrap()
            .fetch_offset_metadata
            .relative_position_in_segment as u64,
        positions(&p)[3]
    );
    drop(log);

    let log = open_ro(&dir, OnCorruption::Truncate).unwrap();
    assert_eq!(log.log_end_offset(), 48);
    drop(log);

    // writable: refused, nothing deleted; Kafka's recovery only when asked, and reported
    damaged_message(Log::open(&dir, options(false, OnCorruption::Error)));
    assert!(seg(&dir, 120).exists() && seg(&dir, 80).exists());
    assert!(matches!(
        Log::open(&dir, options(false, OnCorruption::Skip)),
        Err(Error::InvalidArgument(_))
    ));
    let log = Log::open(&dir, options(false, OnCorruption::Truncate)).unwrap();
    assert_eq!(log.log_end_offset(), 48);
    let removed: Vec<_> = log
        .damaged_ranges()
        .iter()
        .map(|d| (d.file.clone(), d.offsets, d.action))
        .collect();
    assert_eq!(
        removed,
        vec![
            (seg(&dir, 40), Some((48, 79)), DamageAction::Removed),
            (seg(&dir, 80), Some((80, 119)), DamageAction::Removed),
            (seg(&dir, 120), Some((120, 159)), DamageAction::Removed),
        ]
    );
    log.append_as_leader(&batch_of(2, 10), 0).unwrap();
    log.close().unwrap();
    drop(log);
    assert!(!seg(&dir, 80).exists() && !seg(&dir, 120).exists());
    let log = open_ro(&dir, OnCorruption::Error).unwrap();
    assert_eq!(offsets(&log), (0..50).collect::<Vec<_>>());
}

#[test]
fn damage_below_the_recovery_point_is_an_error_when_read() {
    // Kafka validates only what was not flushed; a flushed segment's damage shows when read,
    // naming file and position (a skipping open validates everything).
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments_with_checkpoints(tmp.path());
    let p = seg(&dir, 40);
    let third = positions(&p)[2];
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[third as usize + 70] ^= 0xff;
    std::fs::write(&p, &bytes).unwrap();
    let log = open_ro(&dir, OnCorruption::Error).unwrap();
    let e = log
        .records(Some(21), None, FetchIsolation::LogEnd)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("00000000000000000040.log") && e.contains(&format!("position {third}")),
        "{e}"
    );
    drop(log);
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(log.damaged_ranges().len(), 1);
    assert_eq!(offsets(&log).len(), 156);
}

#[test]
fn emptied_and_deleted_middle_segments() {
    for deleted in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = four_segments(tmp.path());
        if deleted {
            for ext in ["log", "index", "timeindex"] {
                std::fs::remove_file(dir.join(format!("{:020}.{ext}", 80))).unwrap();
            }
        } else {
            std::fs::write(seg(&dir, 80), b"").unwrap();
        }
        let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
        let named = if deleted {
            seg(&dir, 120)
        } else {
            seg(&dir, 80)
        };
        assert!(msg.contains(&named.display().to_string()), "{msg}");
        assert!(msg.contains("offsets 80..119"), "{msg}");
        let log = open_ro(&dir, OnCorruption::Skip).unwrap();
        let want: Vec<i64> = (0..160).filter(|o| !(80..120).contains(o)).collect();
        assert_eq!(offsets(&log), want);
        assert_eq!(log.damaged_ranges()[0].action, DamageAction::Missing);
        drop(log);
        damaged_message(Log::open(&dir, options(false, OnCorruption::Error)));
        // Kafka keeps a gap as it is
        let log = Log::open(&dir, options(false, OnCorruption::Truncate)).unwrap();
        assert_eq!(log.log_end_offset(), 160);
        assert_eq!(log.damaged_ranges().len(), 1);
        drop(log);
        // a compacted log may have gaps
        let mut compact = options(true, OnCorruption::Error);
        compact.config.set("cleanup.policy", "compact").unwrap();
        let log = Log::open(&dir, compact).unwrap();
        assert!(log.damaged_ranges().is_empty());
        assert_eq!(offsets(&log).len(), 120);
    }
}

#[test]
fn corrupt_length_at_offset_zero_and_offsets_going_backwards() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let mut bytes = std::fs::read(seg(&dir, 0)).unwrap();
    bytes[8..12].copy_from_slice(&0x7fff_ff00i32.to_be_bytes());
    std::fs::write(seg(&dir, 0), &bytes).unwrap();
    let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
    assert!(
        msg.contains("00000000000000000000.log at position 0"),
        "{msg}"
    );
    assert!(msg.contains("offsets 0..3 lost"), "{msg}");
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(offsets(&log), (4..160).collect::<Vec<_>>());
    drop(log);

    // A base offset (outside the CRC) rewritten below the previous batch's.
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let p = seg(&dir, 80);
    let fifth = positions(&p)[5] as usize;
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[fifth..fifth + 8].copy_from_slice(&84i64.to_be_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
    assert!(msg.contains("offsets going backwards"), "{msg}");
    assert!(msg.contains(&format!("at position {fifth}")), "{msg}");
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(log.damaged_ranges()[0].offsets, Some((100, 103)));
    assert_eq!(offsets(&log).len(), 156);
    drop(log);
    damaged_message(Log::open(&dir, options(false, OnCorruption::Error)));
    let log = Log::open(&dir, options(false, OnCorruption::Truncate)).unwrap();
    assert_eq!(log.log_end_offset(), 100);

    // The same in the log's very last batch: a whole valid batch, not what a crash leaves, so
    // damage and not a torn tail recovered without a word (a black-box tester's case).
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let p = seg(&dir, 120);
    let last = *positions(&p).last().unwrap() as usize;
    let before = std::fs::read(&p).unwrap();
    let mut bytes = before.clone();
    bytes[last..last + 8].copy_from_slice(&150i64.to_be_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
    assert!(msg.contains("offsets going backwards"), "{msg}");
    damaged_message(Log::open(&dir, options(false, OnCorruption::Error)));
    assert_eq!(std::fs::read(&p).unwrap(), bytes);
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(log.damaged_ranges().len(), 1);
    assert_eq!(offsets(&log).len(), 156);
}

#[test]
fn torn_tails_stay_silent() {
    // the last segment cut mid-batch, then a zero-filled tail as a crashed page cache leaves it
    for zeros in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = four_segments(tmp.path());
        let p = seg(&dir, 120);
        let last = *positions(&p).last().unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        if zeros {
            bytes.truncate(last as usize + 30);
            bytes.resize(bytes.len() + 4096, 0);
        } else {
            bytes.truncate(last as usize + 30);
        }
        std::fs::write(&p, &bytes).unwrap();
        let log = open_ro(&dir, OnCorruption::Error).unwrap();
        assert_eq!(log.log_end_offset(), 156);
        assert!(log.damaged_ranges().is_empty());
        drop(log);
        let log = Log::open(&dir, options(false, OnCorruption::Error)).unwrap();
        assert_eq!(log.log_end_offset(), 156);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), last);
    }
    // a crash right after a roll: the segment before an empty active one is torn
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let p = seg(&dir, 120);
    let last = *positions(&p).last().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(last + 20).unwrap();
    for ext in ["log", "index", "timeindex"] {
        std::fs::write(dir.join(format!("{:020}.{ext}", 160)), b"").unwrap();
    }
    let log = open_ro(&dir, OnCorruption::Error).unwrap();
    assert_eq!(log.log_end_offset(), 156);
    drop(log);
    let log = Log::open(&dir, options(false, OnCorruption::Error)).unwrap();
    assert_eq!(log.log_end_offset(), 156);
    assert!(log.damaged_ranges().is_empty());
}

/// Cuts the last batch of the last segment (120) 20 bytes in: a torn write.
fn tear_the_last_batch(dir: &Path) {
    let p = seg(dir, 120);
    let last = *positions(&p).last().unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(last + 20)
        .unwrap();
}

/// A crash right after a roll, read with `Skip`: the torn tail goes as a default open lets it
/// go, and so do the empty segments after it, so both opens end the log at the same offset (the
/// empty segment's base was taken for the log end, offsets no batch holds, a black-box tester).
#[test]
fn skip_ends_a_torn_log_where_a_default_open_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    tear_the_last_batch(&dir);
    std::fs::write(seg(&dir, 160), b"").unwrap();
    for mode in [OnCorruption::Error, OnCorruption::Skip] {
        let log = open_ro(&dir, mode).unwrap();
        assert_eq!(log.log_end_offset(), 156, "{mode:?}");
        assert!(log.damaged_ranges().is_empty(), "{mode:?}");
        assert_eq!(offsets(&log), (0..156).collect::<Vec<_>>());
    }
}

/// The same tail damage in a segment the log dir's recovery point covers was flushed before any
/// crash: not a torn tail. A default open, as Kafka's recovery, does not read that segment (a
/// read of it fails); `Skip` reads every segment and reports the damage with the offsets lost.
#[test]
fn damage_below_the_recovery_point_is_not_a_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments_with_checkpoints(tmp.path());
    tear_the_last_batch(&dir);
    for ext in ["log", "index", "timeindex"] {
        std::fs::write(dir.join(format!("{:020}.{ext}", 160)), b"").unwrap();
    }
    let log = open_ro(&dir, OnCorruption::Error).unwrap();
    assert_eq!(log.log_end_offset(), 160);
    let e = log
        .records(Some(150), None, FetchIsolation::LogEnd)
        .unwrap_err();
    assert!(matches!(e, Error::CorruptRecord { .. }), "{e}");
    drop(log);
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(log.log_end_offset(), 160);
    let damage = log.damaged_ranges();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(damage[0].offsets, Some((156, 159)));
    assert_eq!(damage[0].action, DamageAction::Skipped);
    assert!(
        damage[0].reason.contains("recovery point"),
        "{}",
        damage[0].reason
    );
    assert_eq!(offsets(&log), (0..156).collect::<Vec<_>>());
}

#[test]
fn not_a_partition_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for read_only in [true, false] {
        let e = Log::open(&empty, options(read_only, OnCorruption::Error)).unwrap_err();
        assert!(e.to_string().contains("no Kafka segment files"), "{e}");
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    four_segments(tmp.path());
    for create in [false, true] {
        let e = Log::open(
            tmp.path(),
            LogOptions {
                create,
                ..options(false, OnCorruption::Error)
            },
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("data dir holding 1 partition folders (t-0)"),
            "{e}"
        );
    }
    let e = Log::open(
        seg(&tmp.path().join("t-0"), 0),
        options(true, OnCorruption::Error),
    )
    .unwrap_err();
    assert!(e.to_string().contains("a segment file"), "{e}");
    let log = Log::open(
        &empty,
        LogOptions {
            create: true,
            ..options(false, OnCorruption::Error)
        },
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn resync_finds_the_next_valid_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let p = seg(&dir, 0);
    let pos = positions(&p);
    let f = FileRecords::open(&p, false).unwrap();
    assert_eq!(f.find_next_valid_batch(0, 0, 1 << 20).unwrap(), Some(0));
    assert_eq!(
        f.find_next_valid_batch(1, 0, 1 << 20).unwrap(),
        Some(pos[1])
    );
    assert_eq!(
        f.find_next_valid_batch(pos[9] + 1, 0, 1 << 20).unwrap(),
        None
    );
    // offsets below the segment's base are not a resync point
    assert_eq!(f.find_next_valid_batch(1, 100, 1 << 20).unwrap(), None);
}

#[test]
fn log_start_checkpoint_past_the_log_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments_with_checkpoints(tmp.path());
    let checkpoint = tmp
        .path()
        .join(crate::log::loader::LOG_START_OFFSET_CHECKPOINT);
    // Segment files deleted from the file system after the log start moved to 200.
    std::fs::write(&checkpoint, "0\n1\nt 0 200\n").unwrap();

    let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
    assert!(msg.contains("log-start-offset-checkpoint"), "{msg}");
    assert!(msg.contains("offsets 160..199"), "{msg}");
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(offsets(&log), (0..160).collect::<Vec<_>>());
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.damaged_ranges()[0].action, DamageAction::Missing);
    drop(log);
    // Kafka's view: every segment gone, an empty log at the checkpoint.
    let log = open_ro(&dir, OnCorruption::Truncate).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (200, 200));
    assert_eq!(offsets(&log), Vec::<i64>::new());
    assert_eq!(log.damaged_ranges()[0].action, DamageAction::Removed);
    drop(log);

    damaged_message(Log::open(&dir, options(false, OnCorruption::Error)));
    assert!(seg(&dir, 0).exists() && seg(&dir, 120).exists());
    let log = Log::open(&dir, options(false, OnCorruption::Truncate)).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (200, 200));
    assert_eq!(log.segment_base_offsets(), vec![200]);
    log.append_as_leader(&batch_of(2, 10), 3).unwrap();
    log.close().unwrap();
    drop(log);
    assert!(!seg(&dir, 0).exists() && !seg(&dir, 120).exists());
    let log = open_ro(&dir, OnCorruption::Error).unwrap();
    assert_eq!(offsets(&log), vec![200, 201]);
    assert_eq!(log.current_leader_epoch(), 3);
}

/// A stray empty segment file whose base offset falls inside the segment before it, read
/// around with `Skip`: that segment's batches past it are out of place, reported without a
/// placeholder for the batch before the first one read (a black-box tester saw `after offset -9223372036854775808`).
#[test]
fn a_batch_out_of_place_first_names_no_batch_before_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = four_segments_with_checkpoints(root.path());
    std::fs::File::create(seg(&dir, 22)).unwrap();
    let log = Log::open(&dir, options(true, OnCorruption::Skip)).unwrap();
    let message = log
        .records(Some(21), None, FetchIsolation::LogEnd)
        .unwrap_err()
        .to_string();
    assert!(message.contains("out of place"), "{message}");
    assert!(!message.contains(&i64::MIN.to_string()), "{message}");
}

/// A FIFO, a device or a folder under a name Kafka keeps a regular file by: the open refuses it,
/// naming it, where a FIFO's open waited for a writer forever and `/dev/zero` read as a
/// segment with no batches (a black-box tester).
#[test]
fn files_that_are_not_regular_are_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let names = [
        format!("{:020}.log", 120),
        format!("{:020}.index", 40),
        format!("{:020}.timeindex", 80),
        crate::log::epoch::LEADER_EPOCH_CHECKPOINT_FILE.to_string(),
    ];
    for name in names {
        let path = dir.join(&name);
        let saved = tmp.path().join("saved");
        std::fs::rename(&path, &saved).unwrap();
        for kind in ["fifo", "device", "folder"] {
            match kind {
                "fifo" => {
                    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
                    // SAFETY: a valid NUL-terminated path.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
                }
                "device" => std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
                _ => std::fs::create_dir(&path).unwrap(),
            }
            let (tx, rx) = std::sync::mpsc::channel();
            let d = dir.clone();
            std::thread::spawn(move || {
                let r = Log::open(&d, options(true, OnCorruption::Error)).map(|_| ());
                let _ = tx.send(r.map_err(|e| e.to_string()));
            });
            let r = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("the open of a log with a {kind} as {name} hangs"));
            let e = r.expect_err(&format!("a {kind} as {name} was read"));
            assert!(
                e.contains(&name) && e.contains("where Kafka keeps a regular file"),
                "{kind} {name}: {e}"
            );
            if kind == "folder" {
                std::fs::remove_dir(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
        std::fs::rename(&saved, &path).unwrap();
    }
    assert_eq!(
        open_ro(&dir, OnCorruption::Error).unwrap().log_end_offset(),
        160
    );
}

/// An index file larger than any Kafka writes (its sizes are Java ints) is corrupt, not read
/// into memory whole: a sparse 100 GiB index asked the allocator for 100 GiB and aborted the
/// process under a memory limit (a black-box tester).
#[test]
fn an_index_larger_than_kafka_writes_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let index = dir.join(format!("{:020}.index", 40));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&index)
        .unwrap()
        .set_len(100 << 30)
        .unwrap();
    let e = Log::open(&dir, options(true, OnCorruption::Error)).unwrap_err();
    assert!(matches!(e, Error::CorruptIndex { .. }), "{e}");
    assert!(
        e.to_string().contains("larger than any Kafka writes"),
        "{e}"
    );
}

/// A whole batch whose CRC holds but whose header breaks Kafka's `LogValidator` rules (a last
/// offset delta below 0, more records than offsets) at the end of the log: refused as damage by
/// a default open, not cut silently as the torn tail a crash leaves, and not read. Before, a
/// delta of -2 took offset 159 off the log with no damage listed (a black-box tester).
#[test]
fn a_crc_valid_batch_with_an_impossible_offset_range_is_damage() {
    for (delta, count) in [(-2i32, 3i32), (0, 3), (2, -1)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = four_segments(tmp.path());
        let mut bytes = batch_of(3, 10);
        bytes[..8].copy_from_slice(&160i64.to_be_bytes());
        bytes[23..27].copy_from_slice(&delta.to_be_bytes());
        bytes[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = crate::checksum::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let p = seg(&dir, 120);
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, &bytes).unwrap();
        drop(f);
        let e = open_ro(&dir, OnCorruption::Error).unwrap_err();
        assert!(
            matches!(e, Error::LogDamaged { .. }),
            "{delta} {count}: {e}"
        );
        let log = open_ro(&dir, OnCorruption::Skip).unwrap();
        assert_eq!(log.log_end_offset(), 160, "{delta} {count}");
        assert_eq!(log.damaged_ranges().len(), 1, "{delta} {count}");
        assert_eq!(offsets(&log), (0..160).collect::<Vec<_>>());
    }
}

/// A `*.log` file not named as a segment is (a 19-digit name, a number past i64, letters):
/// Kafka's loader parses any such name as an offset, loading or refusing the log; left out,
/// its records went missing with nothing said (a black-box tester renamed the last segment).
#[test]
fn a_log_file_not_named_as_a_segment_is_refused() {
    for name in [
        "0000000000000000120.log",
        "99999999999999999999.log",
        "0000000000000000012a.log",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = four_segments(tmp.path());
        std::fs::rename(seg(&dir, 120), dir.join(name)).unwrap();
        for mode in [OnCorruption::Error, OnCorruption::Skip] {
            let e = open_ro(&dir, mode).unwrap_err();
            assert!(matches!(e, Error::LogDamaged { .. }), "{name}: {e}");
            assert!(e.to_string().contains(name), "{name}: {e}");
        }
    }
}

/// A transaction marker whose control key does not parse (its CRC holds) fails the open's
/// producer-state replay naming the segment file and the batch's position; the message named
/// neither (a black-box tester).
#[test]
fn a_marker_that_does_not_parse_is_named_where_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: 160,
        producer_id: 9,
        producer_epoch: 0,
        is_transactional: true,
        is_control: true,
        ..Default::default()
    });
    b.append(2_000, Some(&[0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[])
        .unwrap();
    let marker = b.build().unwrap();
    let p = seg(&dir, 120);
    let at = std::fs::metadata(&p).unwrap().len();
    let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
    std::io::Write::write_all(&mut f, &marker).unwrap();
    drop(f);
    let e = open_ro(&dir, OnCorruption::Error).unwrap_err().to_string();
    assert!(e.contains("control record key"), "{e}");
    assert!(
        e.contains(&format!("{} at position {at}", p.display())),
        "{e}"
    );
}

/// A writable `create=True` open of a new partition folder in a broker's log dir is refused as
/// `Topic.create` there is: the broker would take the folder for a stray and delete it with
/// what was written (a black-box tester's records were never served). An existing partition
/// folder there opens for writing as before.
#[test]
fn a_new_partition_folder_beside_a_broker_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    std::fs::write(tmp.path().join("meta.properties"), "version=1\n").unwrap();
    let stray = tmp.path().join("t-1");
    let e = Log::open(
        &stray,
        LogOptions {
            create: true,
            ..options(false, OnCorruption::Error)
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("a Kafka broker's log dir"), "{e}");
    assert!(!stray.exists(), "nothing was created");
    let log = Log::open(&dir, options(false, OnCorruption::Error)).unwrap();
    assert_eq!(log.log_end_offset(), 160);
}

/// A segment whose file name is one past its first batch's base offset (renamed by hand, or as
/// logs of old brokers have them) right where the segment before it ends: Kafka's loader takes
/// it, as its recovery checks only that a batch's last offset fits the segment, and its fetches
/// read on into it, so every record stays readable and a recovery keeps them all (a black-box
/// tester's 4.4 broker kept 300 records where kafkalog's truncate cut 180).
#[test]
fn a_segment_named_past_its_first_batch_is_read_as_kafka_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    for suffix in ["log", "index", "timeindex"] {
        let from = dir.join(format!("{:020}.{suffix}", 80));
        if from.exists() {
            std::fs::rename(&from, dir.join(format!("{:020}.{suffix}", 81))).unwrap();
        }
    }
    let all: Vec<i64> = (0..160).collect();
    for mode in [OnCorruption::Error, OnCorruption::Skip] {
        let log = open_ro(&dir, mode).unwrap();
        assert!(
            log.damaged_ranges().is_empty(),
            "{:?}",
            log.damaged_ranges()
        );
        assert_eq!(offsets(&log), all);
        let fetched = log.read(80, 1 << 20, FetchIsolation::LogEnd, true).unwrap();
        assert_eq!(crate::testutil::offsets_of(&fetched.records)[0], (80, 83));
    }
    for mode in [OnCorruption::Error, OnCorruption::Truncate] {
        let log = Log::open(&dir, options(false, mode)).unwrap();
        assert_eq!(log.log_end_offset(), 160);
        assert_eq!(offsets(&log), all);
        log.close().unwrap();
    }
    // A gap is still a gap: a segment whose first batch is below its name but not where the
    // segment before ends (the one between deleted) is damage as before.
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    std::fs::rename(seg(&dir, 80), seg(&dir, 85)).unwrap();
    std::fs::remove_file(seg(&dir, 40)).unwrap();
    let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
    assert!(msg.contains("00000000000000000085.log"), "{msg}");
}

/// A magic byte flipped above 2 lies outside the CRC: the batch's v2 CRC still holds, so it is a
/// whole batch Kafka's recovery keeps (its consumers then fail on it), never a crash's torn
/// tail: at the log's very end too it is damage, not dropped in silence, and a truncating
/// recovery says Kafka's would have kept it (a black-box tester's 4.4 broker kept 300 records).
#[test]
fn a_magic_byte_flipped_past_2_is_damage_never_a_torn_tail() {
    for last in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = four_segments(tmp.path());
        let p = seg(&dir, if last { 120 } else { 80 });
        let at = if last {
            *positions(&p).last().unwrap()
        } else {
            positions(&p)[5]
        } as usize;
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[at + 16] = 7;
        std::fs::write(&p, &bytes).unwrap();
        let msg = damaged_message(open_ro(&dir, OnCorruption::Error));
        assert!(msg.contains("unknown magic 7"), "{msg}");
        assert!(msg.contains(&format!("at position {at}")), "{msg}");
        let log = open_ro(&dir, OnCorruption::Skip).unwrap();
        assert_eq!(offsets(&log).len(), 156);
        drop(log);
        let log = Log::open(&dir, options(false, OnCorruption::Truncate)).unwrap();
        assert_eq!(log.log_end_offset(), if last { 156 } else { 100 });
        let removed = &log.damaged_ranges()[0];
        assert_eq!(removed.action, DamageAction::Removed);
        assert!(
            removed.reason.contains("its CRC holds"),
            "{}",
            removed.reason
        );
    }
}

/// A leader-epoch checkpoint that does not parse stops a broker's load of the log and a default
/// open; a read-only view that skips damage reads every record without it and lists it.
#[test]
fn a_garbled_leader_epoch_checkpoint_is_skipped_by_a_view_that_skips_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = four_segments(tmp.path());
    let checkpoint = dir.join("leader-epoch-checkpoint");
    std::fs::write(&checkpoint, "0\n2\n0 0\nnot an entry\n").unwrap();
    match open_ro(&dir, OnCorruption::Error) {
        Err(Error::CorruptRecord { message, .. }) => assert!(message.contains("line"), "{message}"),
        other => panic!("expected CorruptRecord, got {:?}", other.map(|_| ())),
    }
    let log = open_ro(&dir, OnCorruption::Skip).unwrap();
    assert_eq!(offsets(&log), (0..160).collect::<Vec<_>>());
    let [skipped] = log.damaged_ranges() else {
        panic!("{:?}", log.damaged_ranges())
    };
    assert_eq!(
        (&skipped.file, skipped.action),
        (&checkpoint, DamageAction::Skipped)
    );
    assert!(Log::open(&dir, options(false, OnCorruption::Truncate)).is_err());
}
