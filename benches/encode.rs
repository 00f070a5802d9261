//! `BatchBuilder` append + build of 1000 records (~100 bytes each) per codec: record encoding,
//! compression, header and CRC32C.
//!
//! Reference (printed as a ratio): the codec's raw compression alone (`codec::compress`) of the
//! same uncompressed records section, for `none` the copy `compress` makes; the ratio is the cost
//! of building the batch over compressing its records.

mod common;

use std::hint::black_box;

use criterion::Throughput;
use kafkalog::record::batch::RECORD_BATCH_OVERHEAD;
use kafkalog::record::builder::{BatchBuilder, BatchOptions};
use kafkalog::record::{codec, Compression};

const RECORDS: usize = 1000;

fn main() {
    let records = common::sample_records(RECORDS, 5);
    let raw = common::build_batch(&records, Compression::None, 0)[RECORD_BATCH_OVERHEAD..].to_vec();
    let mut c = common::criterion();
    {
        let mut g = c.benchmark_group("encode");
        g.throughput(Throughput::Elements(RECORDS as u64));
        for (codec, name) in common::CODECS {
            g.bench_function(format!("{name}_batch_builder"), |b| {
                b.iter(|| {
                    let mut builder = BatchBuilder::new(BatchOptions {
                        compression: codec,
                        ..BatchOptions::default()
                    });
                    for (i, (k, v)) in records.iter().enumerate() {
                        builder
                            .append(1_700_000_000_000 + i as i64, Some(k), Some(v), &[])
                            .unwrap();
                    }
                    black_box(builder.build().unwrap())
                })
            });
            g.bench_function(format!("{name}_compress_only"), |b| {
                b.iter(|| black_box(codec::compress(codec, black_box(&raw)).unwrap()))
            });
        }
        g.finish();
    }
    c.final_summary();
    for (codec, name) in common::CODECS {
        let size = common::build_batch(&records, codec, 0).len();
        println!(
            "encode/{name}: {RECORDS} records, {} bytes uncompressed -> batch of {size} bytes",
            raw.len()
        );
    }
    let rate = common::Rate::Elements(RECORDS as u64, "records");
    for (_, name) in common::CODECS {
        common::print_rate("encode", &format!("{name}_batch_builder"), rate);
    }
    for (_, name) in common::CODECS {
        common::print_ratio(
            "encode",
            &format!("{name}_batch_builder"),
            &format!("{name}_compress_only"),
            rate,
        );
    }
}
