//! `LogSegment::append` of pre-built 16 KiB batches (index.interval.bytes 4096, so every batch also
//! gets an offset and a time index entry) against the I/O floor: `File::write_all` of the same bytes
//! to a plain file in the same directory.
//!
//! Each criterion iteration appends one batch. Every `SEGMENT_BATCHES` batches (16 MiB) the segment
//! (or plain file) is dropped and a fresh one opened in a new tempdir, outside the timed region, so
//! files stay small, offsets stay valid and dirty pages are discarded rather than written back.

mod common;

use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use kafkalog::config::LogConfig;
use kafkalog::record::batch::set_base_offset;
use kafkalog::record::Compression;
use kafkalog::segment::LogSegment;

const BATCH_BYTES: usize = 16 * 1024;
const SEGMENT_BATCHES: usize = 1024;

/// `SEGMENT_BATCHES` uncompressed batches of about 16 KiB with consecutive offsets.
fn batches() -> Vec<(i64, Vec<u8>)> {
    // ~108 bytes per record on the wire: find the record count that lands closest to 16 KiB.
    let all = common::sample_records(400, 1);
    let mut n = 1;
    while common::build_batch(&all[..n + 1], Compression::None, 0).len() <= BATCH_BYTES {
        n += 1;
    }
    let template = common::build_batch(&all[..n], Compression::None, 0);
    (0..SEGMENT_BATCHES)
        .map(|i| {
            let base = (i * n) as i64;
            let mut b = template.clone();
            set_base_offset(&mut b, base);
            (base + n as i64 - 1, b)
        })
        .collect()
}

fn bench(c: &mut Criterion, batches: &[(i64, Vec<u8>)]) {
    let config = LogConfig {
        index_interval_bytes: 4096,
        ..LogConfig::default()
    };
    let mut g = c.benchmark_group("append");
    g.throughput(Throughput::Bytes(batches[0].1.len() as u64));
    g.bench_function("log_segment", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let dir = tempfile::tempdir().unwrap();
                let mut seg = LogSegment::open(dir.path(), 0, &config, true, "", 0).unwrap();
                let n = (iters - done).min(SEGMENT_BATCHES as u64) as usize;
                let start = Instant::now();
                for (last, bytes) in &batches[..n] {
                    seg.append(*last, bytes).unwrap();
                }
                total += start.elapsed();
                drop(seg);
                done += n as u64;
            }
            total
        })
    });
    g.bench_function("file_write_all", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let dir = tempfile::tempdir().unwrap();
                let mut f = File::create(dir.path().join("00000000000000000000.log")).unwrap();
                let n = (iters - done).min(SEGMENT_BATCHES as u64) as usize;
                let start = Instant::now();
                for (_, bytes) in &batches[..n] {
                    f.write_all(bytes).unwrap();
                }
                total += start.elapsed();
                drop(f);
                done += n as u64;
            }
            total
        })
    });
    g.finish();
}

fn main() {
    let batches = batches();
    // Sanity: the segment indexes every batch at this interval.
    {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            index_interval_bytes: 4096,
            ..LogConfig::default()
        };
        let mut seg = LogSegment::open(dir.path(), 0, &config, true, "", 0).unwrap();
        for (last, bytes) in &batches[..8] {
            seg.append(*last, bytes).unwrap();
        }
        assert_eq!(seg.offset_index().entries(), 7);
    }
    let mut c = common::criterion();
    bench(&mut c, &batches);
    c.final_summary();
    println!(
        "append: batches of {} bytes, {SEGMENT_BATCHES} per segment",
        batches[0].1.len()
    );
    common::print_ratio(
        "append",
        "log_segment",
        "file_write_all",
        common::Rate::Bytes(batches[0].1.len() as u64),
    );
}
