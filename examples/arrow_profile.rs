//! Profiling driver (not a benchmark): builds a 100,000-record log, then reads it `REPEAT` times
//! in the mode given: `arrow` (LogArrowReader), `decode` (Log::for_each_batch alone) or `setup`
//! (only the log). Run under `perf stat -e instructions` or callgrind and subtract `setup`.

use std::sync::Arc;

use kafkalog::arrow::LogArrowReader;
use kafkalog::log::{FetchIsolation, Log, LogOptions};
use kafkalog::record::builder::{BatchBuilder, BatchOptions};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "arrow".into());
    let repeat: usize = std::env::args().nth(2).map_or(10, |r| r.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profile-0");
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
    for start in (0..100_000).step_by(500) {
        let mut b = BatchBuilder::new(BatchOptions::default());
        for i in start..start + 500 {
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
    let mut rows = 0usize;
    for _ in 0..repeat {
        match mode.as_str() {
            "arrow" => {
                let reader = LogArrowReader::new(
                    log.clone(),
                    None,
                    None,
                    FetchIsolation::HighWatermark,
                    false,
                    65536,
                )
                .unwrap();
                rows += reader.map(|b| b.unwrap().num_rows()).sum::<usize>();
            }
            "decode" => log
                .for_each_batch(
                    None,
                    None,
                    FetchIsolation::HighWatermark,
                    false,
                    &mut |_, _, records, range| {
                        rows += records[range].len();
                        Ok(true)
                    },
                )
                .unwrap(),
            _ => {}
        }
    }
    println!("{mode}: {rows} rows");
}
