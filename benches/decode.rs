//! Decoding every record of a ~1000-record batch (records ~100 bytes) per codec: `Batch::parse`,
//! `DefaultBatch::records_payload` (decompression) and `records_in` (iterate `Record`s, summing key
//! and value lengths). No CRC check (`ensure_valid` is a separate, optional step).
//!
//! Baseline: the codec's raw decompression alone of the same payload (`codec::decompress`), for
//! `none` a memcpy of the records bytes into a pre-allocated buffer. The ratio is therefore the
//! cost of decompressing and parsing over decompressing alone.

mod common;

use std::hint::black_box;

use criterion::Throughput;
use kafkalog::record::batch::{
    Batch, DEFAULT_MAX_DECOMPRESSED_BYTES, MAGIC_V2, RECORD_BATCH_OVERHEAD,
};
use kafkalog::record::{codec, Compression};

const RECORDS: usize = 1000;

fn decode_all(bytes: &[u8], scratch: &mut Vec<u8>) -> usize {
    let Batch::V2(batch) = Batch::parse(bytes).unwrap() else {
        unreachable!("v2 batch")
    };
    let payload = batch
        .records_payload(scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)
        .unwrap();
    let mut total = 0;
    for r in batch.records_in(payload) {
        let r = r.unwrap();
        total += r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len);
    }
    total
}

fn main() {
    let records = common::sample_records(RECORDS, 3);
    let expected: usize = records.iter().map(|(k, v)| k.len() + v.len()).sum();
    let mut c = common::criterion();
    let mut sizes = Vec::new();
    {
        let mut g = c.benchmark_group("decode");
        g.throughput(Throughput::Elements(RECORDS as u64));
        for (codec, name) in common::CODECS {
            let batch = common::build_batch(&records, codec, 0);
            let payload = &batch[RECORD_BATCH_OVERHEAD..];
            let mut scratch = Vec::new();
            assert_eq!(decode_all(&batch, &mut scratch), expected);
            let raw_len = if codec == Compression::None {
                payload.len()
            } else {
                codec::decompress(codec, payload, DEFAULT_MAX_DECOMPRESSED_BYTES, MAGIC_V2)
                    .unwrap()
                    .len()
            };
            sizes.push((name, batch.len(), raw_len));
            g.bench_function(format!("{name}_records"), |b| {
                let mut scratch = Vec::new();
                b.iter(|| black_box(decode_all(black_box(&batch), &mut scratch)))
            });
            g.bench_function(format!("{name}_decompress_only"), |b| {
                if codec == Compression::None {
                    let mut buf = vec![0u8; payload.len()];
                    b.iter(|| {
                        buf.copy_from_slice(black_box(payload));
                        black_box(&buf);
                    })
                } else {
                    b.iter(|| {
                        black_box(
                            codec::decompress(
                                codec,
                                black_box(payload),
                                DEFAULT_MAX_DECOMPRESSED_BYTES,
                                MAGIC_V2,
                            )
                            .unwrap(),
                        )
                    })
                }
            });
        }
        g.finish();
    }
    c.final_summary();
    for (name, batch_len, raw_len) in sizes {
        println!("decode/{name}: batch {batch_len} bytes, records section {raw_len} bytes uncompressed, {RECORDS} records");
    }
    for (_, name) in common::CODECS {
        common::print_ratio(
            "decode",
            &format!("{name}_records"),
            &format!("{name}_decompress_only"),
            common::Rate::Elements(RECORDS as u64, "records"),
        );
    }
}
