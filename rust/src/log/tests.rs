//! Concurrency of `Log` with std threads: one appender, several readers. Readers must only see
//! whole, valid batches with consecutive offsets and the values the appender wrote (offset `o`
//! holds `r<o>`), never past the log end offset read right after the read.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::LogConfig;
use crate::log::{FetchIsolation, Log, LogOptions};
use crate::record::batch::BatchIter;
use crate::record::builder::{BatchBuilder, BatchOptions};

fn batch_of(first: i64, count: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions::default());
    for o in first..first + count {
        let v = format!("r{o}");
        b.append(1_000 + o, None, Some(v.as_bytes()), &[]).unwrap();
    }
    b.build().unwrap()
}

fn open(dir: &std::path::Path) -> Log {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "8192").unwrap();
    config.set("index.interval.bytes", "256").unwrap();
    config.set("file.delete.delay.ms", "0").unwrap();
    Log::open(
        dir.join("t-0"),
        LogOptions {
            config,
            read_only: false,
            create: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Checks fetched bytes: whole valid batches, consecutive, values as written, below `bound`.
fn check_fetch(bytes: &[u8], start: i64, bound: i64) -> usize {
    let mut prev: Option<i64> = None;
    let mut n = 0;
    let mut scratch = Vec::new();
    for batch in BatchIter::new(bytes) {
        let Ok(batch) = batch else {
            // max_bytes may cut the last batch: only ever at the end
            break;
        };
        batch.ensure_valid().expect("valid batch");
        let crate::record::batch::Batch::V2(v2) = &batch else {
            panic!("not a v2 batch")
        };
        let base = v2.base_offset();
        assert_eq!(batch.last_offset() - base + 1, 1 + base % 5);
        assert!(
            batch.last_offset() < bound,
            "{} >= {bound}",
            batch.last_offset()
        );
        if let Some(p) = prev {
            assert_eq!(base, p + 1, "gap");
        } else {
            assert!(base <= start && start <= batch.last_offset());
        }
        for r in batch.records(&mut scratch, usize::MAX).unwrap() {
            assert_eq!(r.value.unwrap(), format!("r{}", r.offset).as_bytes());
        }
        prev = Some(batch.last_offset());
        n += 1;
    }
    n
}

#[test]
fn one_appender_many_readers() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open(dir.path()));
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let appender = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let k = 1 + n % 5;
                let info = log.append_as_leader(&batch_of(n, k), 0).unwrap();
                assert_eq!((info.first_offset, info.last_offset), (n, n + k - 1));
                n += k;
            }
            n
        })
    };
    let mut readers = Vec::new();
    for seed in 0..3u64 {
        let (log, stop, reads) = (log.clone(), stop.clone(), reads.clone());
        readers.push(std::thread::spawn(move || {
            let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let leo = log.log_end_offset();
                let start = if leo == 0 {
                    0
                } else {
                    (x >> 33) as i64 % (leo + 1)
                };
                let max = [1usize, 100, 1000, 1 << 20][(x >> 20) as usize % 4];
                let iso = if x & 1 == 0 {
                    FetchIsolation::LogEnd
                } else {
                    FetchIsolation::HighWatermark
                };
                let info = log.read(start, max, iso, true).unwrap();
                let bound = log.log_end_offset();
                let n = check_fetch(&info.records, start, bound);
                if start < leo && iso == FetchIsolation::LogEnd {
                    assert!(n > 0, "nothing read at {start} < {leo}");
                }
                // records(): consecutive from start
                let recs = log
                    .records(Some(start), Some(start + 50), FetchIsolation::HighWatermark)
                    .unwrap();
                for (i, r) in recs.iter().enumerate() {
                    assert_eq!(r.offset, start + i as i64);
                    assert_eq!(
                        r.value.as_deref().unwrap(),
                        format!("r{}", r.offset).as_bytes()
                    );
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let acked = appender.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 10);
    assert_eq!(log.log_end_offset(), acked);
    assert!(log.number_of_segments() > 2);
    let all = log.records(None, None, FetchIsolation::LogEnd).unwrap();
    assert_eq!(all.len() as i64, acked);
}

/// A close whose checkpoint write fails (no descriptor left for it, a full disk) still closes
/// the log and frees its writer lock: held, neither a retried close (it failed the same way)
/// nor another writer could ever get on (a black-box tester at `ulimit -n` one short).
#[test]
fn a_close_whose_checkpoints_fail_still_closes_and_frees_the_writer_lock() {
    let data = tempfile::tempdir().unwrap();
    let log = open(data.path());
    log.append_as_leader(&batch_of(0, 5), 0).unwrap();
    // A folder where the recovery-point checkpoint goes: its write (a rename) fails.
    let blocker = data.path().join("recovery-point-offset-checkpoint");
    std::fs::create_dir_all(blocker.join("in-the-way")).unwrap();
    assert!(log.close().is_err());
    assert!(log.append_as_leader(&batch_of(5, 1), 0).is_err(), "closed");
    std::fs::remove_dir_all(&blocker).unwrap();
    let again = open(data.path());
    assert_eq!(again.log_end_offset(), 5);
    again.close().unwrap();
}
