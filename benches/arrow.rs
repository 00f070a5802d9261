//! A log of 100,000 records (100-byte values, uncompressed, 500 per batch) read three ways in
//! one run: `LogArrowReader` into Arrow batches with Spark's Kafka schema, the same batches
//! decoded with no Arrow (the `Log::for_each_batch` loop, summing key and value lengths), and the
//! baseline, a memcpy of the segment's bytes. The ratios say what decoding and building Arrow
//! cost over moving the bytes once.

mod common;

use std::hint::black_box;
use std::sync::Arc;

use criterion::Throughput;
use kafkalog::arrow::LogArrowReader;
use kafkalog::log::{FetchIsolation, Log, LogOptions};
use kafkalog::record::builder::{BatchBuilder, BatchOptions};
use kafkalog::record::file_records::FileAccess;

const RECORDS: usize = 100_000;
const PER_BATCH: usize = 500;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench-0");
    let log = Log::open(
        &path,
        LogOptions {
            read_only: false,
            create: true,
            ..Default::default()
        },
    )
    .unwrap();
    let value = vec![b'v'; 100];
    for start in (0..RECORDS).step_by(PER_BATCH) {
        let mut b = BatchBuilder::new(BatchOptions::default());
        for i in start..start + PER_BATCH {
            b.append(
                1_700_000_000_000,
                Some(format!("key-{i:08}").as_bytes()),
                Some(&value),
                &[],
            )
            .unwrap();
        }
        log.append_as_leader(&b.build().unwrap(), 0).unwrap();
    }
    log.close().unwrap();
    let log = Arc::new(Log::open(&path, LogOptions::default()).unwrap());
    let segment = std::fs::read(path.join(format!("{:020}.log", 0))).unwrap();

    let mut c = common::criterion();
    {
        let mut g = c.benchmark_group("arrow");
        g.throughput(Throughput::Elements(RECORDS as u64));
        g.bench_function("to_arrow", |b| {
            b.iter(|| {
                let reader = LogArrowReader::new(
                    log.clone(),
                    None,
                    None,
                    FetchIsolation::HighWatermark,
                    false,
                    65536,
                )
                .unwrap();
                let rows: usize = reader.map(|batch| batch.unwrap().num_rows()).sum();
                assert_eq!(rows, RECORDS);
            })
        });
        g.bench_function("decode_only", |b| {
            b.iter(|| {
                let mut total = 0usize;
                // The loop the Arrow reader runs, records decoded as they are pulled.
                log.for_each_batch_lazy(
                    None,
                    None,
                    FetchIsolation::HighWatermark,
                    false,
                    FileAccess::Windows,
                    &mut |_, _, records, _, _| {
                        for r in records {
                            let r = r?;
                            total += r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len);
                        }
                        Ok(true)
                    },
                )
                .unwrap();
                black_box(total)
            })
        });
        g.bench_function("memcpy_segment", |b| {
            let mut buf = vec![0u8; segment.len()];
            b.iter(|| {
                buf.copy_from_slice(black_box(&segment));
                black_box(&buf);
            })
        });
        g.finish();
    }
    c.final_summary();
    println!("arrow: {RECORDS} records, segment {} bytes", segment.len());
    let rate = common::Rate::Elements(RECORDS as u64, "records");
    common::print_ratio("arrow", "to_arrow", "decode_only", rate);
    common::print_ratio("arrow", "to_arrow", "memcpy_segment", rate);
    common::print_ratio("arrow", "decode_only", "memcpy_segment", rate);
}
