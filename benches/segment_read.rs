//! `LogSegment::translate_offset` and `LogSegment::read` at random offsets of a ~100 MB segment
//! with the default index interval (4096 bytes), against the baseline without the sparse offset
//! index: a linear header scan from position 0 (`FileRecords::search_for_offset_with_size(target, 0)`,
//! one positional read of each batch header), plus, for `read`, the same `read_range` afterwards.
//!
//! The segment holds ~1.1 KB batches of 10 records (~100 bytes each), written through
//! `LogSegment::append` 1 MiB at a time, so the index has an entry every ~4 batches.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::SamplingMode;
use kafkalog::config::LogConfig;
use kafkalog::record::batch::set_base_offset;
use kafkalog::record::Compression;
use kafkalog::segment::LogSegment;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SEGMENT_BYTES: usize = 100 * 1000 * 1000;
const RECORDS_PER_BATCH: usize = 10;
const CHUNK_BYTES: usize = 1 << 20;
/// `read`'s max_size: Kafka's default max.partition.fetch.bytes.
const FETCH_BYTES: usize = 1 << 20;
const TARGETS: usize = 4096;

fn build(dir: &std::path::Path, config: &LogConfig) -> LogSegment {
    let template = common::build_batch(
        &common::sample_records(RECORDS_PER_BATCH, 9),
        Compression::None,
        0,
    );
    let mut seg = LogSegment::open(dir, 0, config, true, "", 0).unwrap();
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + template.len());
    let mut next = 0i64;
    let mut written = 0usize;
    while written < SEGMENT_BYTES {
        chunk.clear();
        while chunk.len() + template.len() <= CHUNK_BYTES {
            let at = chunk.len();
            chunk.extend_from_slice(&template);
            set_base_offset(&mut chunk[at..], next);
            next += RECORDS_PER_BATCH as i64;
        }
        seg.append(next - 1, &chunk).unwrap();
        written += chunk.len();
    }
    seg.flush().unwrap();
    seg
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let seg = build(dir.path(), &config);
    let log = seg.log();
    let max_batch = seg.max_batch_size();
    let next_offset = seg.read_next_offset().unwrap();
    println!(
        "segment_read: {} bytes, {} offsets, {} index entries (index.interval.bytes {})",
        seg.size(),
        next_offset,
        seg.offset_index().entries(),
        config.index_interval_bytes
    );
    let mut rng = StdRng::seed_from_u64(11);
    let targets: Vec<i64> = (0..TARGETS)
        .map(|_| rng.gen_range(0..next_offset))
        .collect();
    for &t in targets.iter().take(64) {
        let a = seg.translate_offset(t, 0).unwrap();
        let b = log.search_for_offset_with_size(t, 0, max_batch).unwrap();
        assert_eq!(a, b, "target {t}");
        assert_eq!(
            seg.read(t, FETCH_BYTES, None, true)
                .unwrap()
                .unwrap()
                .records
                .len(),
            FETCH_BYTES.min((seg.size() - a.unwrap().position) as usize)
        );
    }

    let mut c = common::criterion();
    {
        let mut g = c.benchmark_group("translate_offset");
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function("sparse_index", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % TARGETS;
                black_box(seg.translate_offset(black_box(targets[i]), 0).unwrap())
            })
        });
        g.sample_size(10).measurement_time(Duration::from_secs(4));
        g.bench_function("linear_scan", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % TARGETS;
                black_box(
                    log.search_for_offset_with_size(black_box(targets[i]), 0, max_batch)
                        .unwrap(),
                )
            })
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("read");
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function("sparse_index", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % TARGETS;
                black_box(
                    seg.read(black_box(targets[i]), FETCH_BYTES, None, true)
                        .unwrap(),
                )
            })
        });
        g.sample_size(10).measurement_time(Duration::from_secs(4));
        g.bench_function("linear_scan", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % TARGETS;
                let found = log
                    .search_for_offset_with_size(black_box(targets[i]), 0, max_batch)
                    .unwrap()
                    .unwrap();
                black_box(
                    log.read_range(found.position, FETCH_BYTES.max(found.size))
                        .unwrap(),
                )
            })
        });
        g.finish();
    }
    c.final_summary();
    common::print_ratio(
        "translate_offset",
        "sparse_index",
        "linear_scan",
        common::Rate::None,
    );
    common::print_ratio("read", "sparse_index", "linear_scan", common::Rate::None);
}
