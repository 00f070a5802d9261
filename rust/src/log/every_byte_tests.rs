//! Every byte, every file: a small log with two segments, transactions, producer snapshots,
//! leader epochs and the log dir's offset checkpoints, then for each file: the `.log` cut at
//! every byte of its last batches, every byte flipped, the tail zero-filled from every byte (as
//! a crashed page cache leaves it); the same for `.index`, `.timeindex`, `.txnindex`,
//! `.snapshot`, `leader-epoch-checkpoint` and the offset checkpoint files. Each case is opened
//! read-only, then writable: no panic, no allocation beyond a bound, and either Kafka's recovery
//! (every batch the change did not touch is read back, through indexes that find each one) or
//! an error naming a file of the log; the read-only open changes no byte, size or mtime.
//! `KAFKALOG_EVERY_BYTE=full` widens it: every batch of each segment, all 8 single-bit flips.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::LogConfig;
use crate::log::damage_tests::{batch_of, snapshot};
use crate::log::{FetchIsolation, Log, LogOptions};
use crate::record::batch::Batch;

use crate::record::file_records::{headers_in, FileRecords};

/// The largest single allocation of this thread, so a case can show it trusted no length field.
struct TrackingAllocator;

thread_local! {
    static LARGEST_ALLOCATION: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST_ALLOCATION.try_with(|m| {
        if size > m.get() {
            m.set(size);
        }
    });
}

unsafe impl GlobalAlloc for TrackingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// No case may allocate more than this at once: the log is a few KB; the readers' 1 MiB window
/// and the 10 MiB offset index of a writable active segment are the largest legitimate buffers.
const ALLOCATION_BOUND: usize = 16 << 20;

fn config() -> LogConfig {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "1400").unwrap();
    config.set("index.interval.bytes", "60").unwrap();
    config.set("file.delete.delay.ms", "0").unwrap();
    config
}

#[derive(Debug, Clone)]
struct BatchAt {
    file: PathBuf,
    start: u64,
    end: u64,
    base: i64,
    last: i64,
}

struct Fixture {
    /// Every file under the root (the log dir), relative to it.
    files: BTreeMap<PathBuf, Vec<u8>>,
    batches: Vec<BatchAt>,
}

/// Two segments; an aborted and a committed transaction in each; leader epochs 0, 1 and 2.
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let log = Log::open(
        &dir,
        LogOptions {
            config: config(),
            read_only: false,
            create: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut seq = 0;
    for i in 0..22 {
        let epoch = i / 8;
        log.append_as_leader(&batch_of(1 + i as i64 % 3, 12), epoch)
            .unwrap();
        if i % 7 == 3 {
            crate::testutil::append_transaction(&log, seq, i % 2 != 0, epoch);
            seq += 2;
        }
    }
    log.close().unwrap();
    assert_eq!(
        log.number_of_segments(),
        2,
        "the fixture wants two segments"
    );
    drop(log);
    let mut files = BTreeMap::new();
    let mut batches = Vec::new();
    for (rel, base) in [(PathBuf::new(), tmp.path()), (PathBuf::from("t-0"), &dir)] {
        for e in std::fs::read_dir(base).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                let name = rel.join(p.file_name().unwrap());
                let bytes = std::fs::read(&p).unwrap();
                if name.extension().is_some_and(|x| x == "log") {
                    for h in headers_in(&bytes) {
                        let h = h.unwrap();
                        batches.push(BatchAt {
                            file: name.clone(),
                            start: h.position,
                            end: h.position + h.size as u64,
                            base: h.base_offset,
                            last: h.last_offset,
                        });
                    }
                }
                files.insert(name, bytes);
            }
        }
    }
    for needed in [
        "t-0/leader-epoch-checkpoint",
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ] {
        assert!(files.contains_key(Path::new(needed)), "{needed} missing");
    }
    assert_eq!(
        files
            .keys()
            .filter(|p| p.extension().is_some_and(|x| x == "txnindex"))
            .count(),
        2
    );
    Fixture { files, batches }
}

/// Where the outcomes of one file type are counted.
#[derive(Debug, Default, Clone)]
struct Tally {
    cases: usize,
    /// Opens that recovered with every untouched batch readable.
    recovered: usize,
    /// Opens refused with an error naming a file of the log.
    refused: usize,
    /// Opens that succeeded and whose reads then stopped at the damage, naming file and position.
    read_errors: usize,
    /// Untouched batches an open lost: must stay 0.
    batches_lost: usize,
    samples: Vec<String>,
}

thread_local! {
    static CASE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

#[derive(Debug)]
enum Op {
    Cut(u64),
    Flip(u64, u8),
    ZeroTail(u64),
}

impl Op {
    fn apply(&self, bytes: &[u8]) -> (Vec<u8>, u64, u64) {
        let mut out = bytes.to_vec();
        let len = bytes.len() as u64;
        match *self {
            Op::Cut(at) => {
                out.truncate(at as usize);
                (out, at, len)
            }
            Op::Flip(at, mask) => {
                out[at as usize] ^= mask;
                (out, at, at + 1)
            }
            Op::ZeroTail(at) => {
                for b in &mut out[at as usize..] {
                    *b = 0;
                }
                (out, at, len)
            }
        }
    }
}

fn full() -> bool {
    std::env::var("KAFKALOG_EVERY_BYTE").is_ok_and(|v| v == "full")
}

/// The operations for one file: over `range` of its bytes.
fn ops(range: std::ops::Range<u64>) -> Vec<Op> {
    let masks: Vec<u8> = if full() {
        vec![0xff, 1, 2, 4, 8, 16, 32, 64, 128]
    } else {
        vec![0xff]
    };
    let mut out = Vec::new();
    for at in range {
        out.push(Op::Cut(at));
        out.push(Op::ZeroTail(at));
        for &m in &masks {
            out.push(Op::Flip(at, m));
        }
    }
    out
}

/// Checks one open: Kafka's recovery with every untouched batch readable, or a clear error.
fn check_open(
    root: &Path,
    result: crate::error::Result<Log>,
    untouched: &[BatchAt],
    tally: &mut Tally,
) -> Option<Log> {
    let log = match result {
        Ok(log) => log,
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&root.display().to_string()),
                "an error that names no file of the log: {msg}"
            );
            tally.refused += 1;
            if tally.samples.len() < 3 && !tally.samples.iter().any(|s| s[..20] == msg[..20]) {
                tally.samples.push(msg);
            }
            return None;
        }
    };
    let mut seen = Vec::new();
    let read = log.for_each_batch(
        None,
        None,
        FetchIsolation::LogEnd,
        true,
        &mut |_, batch, _, _| {
            if let Batch::V2(b) = batch {
                seen.push((b.base_offset(), b.last_offset()));
            }
            Ok(true)
        },
    );
    if let Err(e) = read {
        let msg = e.to_string();
        assert!(
            msg.contains(".log") && msg.contains("position"),
            "a read error that names no file and position: {msg}"
        );
        tally.read_errors += 1;
        return Some(log);
    }
    let leo = log.log_end_offset();
    let case = CASE.with(|c| c.borrow().clone());
    // A checkpointed log start offset changed to another valid number moves the log start, as
    // it would for Kafka: the batches below it are deleted records, not lost ones.
    let start = log.log_start_offset();
    for b in untouched.iter().filter(|b| b.last >= start) {
        if !seen.contains(&(b.base, b.last)) {
            tally.batches_lost += 1;
            panic!(
                "{case}: batch {}..{} of {} lost (log end {leo}, read-only {})",
                b.base,
                b.last,
                b.file.display(),
                log.is_read_only()
            );
        }
        // the indexes find it
        let at = b.base.max(start);
        let fetched = log.read(at, 1, FetchIsolation::LogEnd, true).unwrap();
        let h = headers_in(&fetched.records).next().unwrap().unwrap();
        assert!(
            h.base_offset <= at && at <= h.last_offset,
            "a fetch at {} starts at batch {}..{}",
            at,
            h.base_offset,
            h.last_offset
        );
    }
    tally.recovered += 1;
    Some(log)
}

/// After a writable open and close: each offset index entry of the active segment (the one
/// recovery rebuilt; flushed segments' indexes are checked entry by entry when looked up) points
/// at a batch start of its log.
fn check_indexes_on_disk(dir: &Path) {
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "index"))
        .collect();
    indexes.sort();
    if let Some(p) = indexes.pop() {
        let log = FileRecords::open(&p.with_extension("log"), false).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let base: i64 = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
        for entry in bytes.chunks_exact(8) {
            let rel = i32::from_be_bytes(entry[..4].try_into().unwrap());
            let pos = i32::from_be_bytes(entry[4..].try_into().unwrap());
            if rel == 0 && pos == 0 {
                continue; // preallocated space of an active segment's index
            }
            let h = log.read_header(pos as u64, 1 << 20).unwrap().unwrap();
            assert!(
                h.base_offset <= base + rel as i64 && h.last_offset <= base + rel as i64,
                "{}: entry ({}, {pos}) points at batch {}..{}",
                p.display(),
                base + rel as i64,
                h.base_offset,
                h.last_offset
            );
        }
    }
}

fn write_all(root: &Path, files: &BTreeMap<PathBuf, Vec<u8>>) {
    if root.exists() {
        std::fs::remove_dir_all(root).unwrap();
    }
    std::fs::create_dir_all(root.join("t-0")).unwrap();
    for (rel, bytes) in files {
        std::fs::write(root.join(rel), bytes).unwrap();
    }
}

/// Runs every case for the files `select` picks; returns the tally per file type.
fn run(select: &dyn Fn(&Path) -> bool) -> BTreeMap<String, Tally> {
    let fx = fixture();
    let scratch = tempfile::tempdir_in(
        Some(Path::new("/dev/shm"))
            .filter(|p| p.is_dir())
            .map_or_else(std::env::temp_dir, Path::to_path_buf),
    )
    .unwrap();
    let root = scratch.path().join("logdir");
    let dir = root.join("t-0");
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let targets: Vec<PathBuf> = fx.files.keys().filter(|p| select(p)).cloned().collect();
    for target in targets {
        let original = &fx.files[&target];
        let name = target.file_name().unwrap().to_str().unwrap();
        let kind = match target.extension().and_then(|x| x.to_str()) {
            Some(x) if name.starts_with("000") => format!(".{x}"),
            _ => name.to_string(),
        };
        let range = if kind == ".log" && !full() {
            // the last two batches of the segment
            let in_file: Vec<&BatchAt> = fx.batches.iter().filter(|b| b.file == target).collect();
            in_file[in_file.len().saturating_sub(2)].start..original.len() as u64
        } else {
            0..original.len() as u64
        };
        for op in ops(range) {
            let (mutated, from, to) = op.apply(original);
            CASE.with(|c| *c.borrow_mut() = format!("{} {op:?}", target.display()));
            if mutated == *original {
                continue;
            }
            let tally = tallies.entry(kind.clone()).or_default();
            tally.cases += 1;
            write_all(&root, &fx.files);
            std::fs::write(root.join(&target), &mutated).unwrap();
            let untouched: Vec<BatchAt> = fx
                .batches
                .iter()
                .filter(|b| b.file != target || b.end <= from || b.start >= to)
                .cloned()
                .collect();
            LARGEST_ALLOCATION.with(|m| m.set(0));

            let before = snapshot(&root);
            let ro = Log::open(
                &dir,
                LogOptions {
                    config: config(),
                    ..Default::default()
                },
            );
            let ro_leo = check_open(&root, ro, &untouched, tally).map(|l| l.log_end_offset());
            assert!(
                snapshot(&root) == before,
                "a read-only open changed files ({kind})"
            );

            let rw = Log::open(
                &dir,
                LogOptions {
                    config: config(),
                    read_only: false,
                    ..Default::default()
                },
            );
            if let Some(log) = check_open(&root, rw, &untouched, tally) {
                let leo = log.log_end_offset();
                if let Some(ro_leo) = ro_leo {
                    assert_eq!(
                        ro_leo, leo,
                        "read-only and writable opens disagree ({kind})"
                    );
                }
                log.close().unwrap();
                drop(log);
                check_indexes_on_disk(&dir);
                let again = Log::open(
                    &dir,
                    LogOptions {
                        config: config(),
                        ..Default::default()
                    },
                )
                .unwrap();
                assert_eq!(again.log_end_offset(), leo);
            }
            let largest = LARGEST_ALLOCATION.with(|m| m.get());
            assert!(
                largest <= ALLOCATION_BOUND,
                "a case allocated {largest} bytes at once ({kind})"
            );
        }
    }
    for (kind, t) in &tallies {
        println!(
            "every byte {kind}: {} cases, {} opens recovered, {} refused, {} read errors, {} batches lost",
            t.cases, t.recovered, t.refused, t.read_errors, t.batches_lost
        );
        for s in &t.samples {
            println!("    e.g. {s}");
        }
        assert_eq!(t.batches_lost, 0);
    }
    tallies
}

#[test]
fn every_byte_of_the_log_files() {
    let t = run(&|p| p.extension().is_some_and(|x| x == "log"));
    assert!(t[".log"].cases > 300);
}

#[test]
fn every_byte_of_the_index_files() {
    let t = run(&|p| {
        p.extension()
            .is_some_and(|x| x == "index" || x == "timeindex" || x == "txnindex")
    });
    assert!(t[".index"].cases > 0 && t[".timeindex"].cases > 0 && t[".txnindex"].cases > 0);
}

#[test]
fn every_byte_of_the_snapshots_and_checkpoints() {
    let t = run(&|p| {
        p.extension().is_some_and(|x| x == "snapshot")
            || p.to_str().is_some_and(|s| s.ends_with("checkpoint"))
    });
    for kind in [
        ".snapshot",
        "leader-epoch-checkpoint",
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ] {
        assert!(t.get(kind).is_some_and(|t| t.cases > 0), "{kind}: no cases");
    }
}
