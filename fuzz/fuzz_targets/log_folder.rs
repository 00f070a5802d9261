//! A whole partition folder of fuzzed files (split from the input, see
//! `kafkalog_fuzz::split_folder`): `Log::open` read-only, reads at every isolation, then a check
//! that the read-only open changed no file; then a writable open (Kafka's recovery), an append,
//! a read and a close.
#![no_main]
use kafkalog::log::{FetchIsolation, Log, LogOptions};
use kafkalog::record::builder::{BatchBuilder, BatchOptions};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

fn options(read_only: bool) -> LogOptions {
    let mut o = LogOptions {
        read_only,
        ..LogOptions::default()
    };
    o.config.max_index_size = 4096;
    o.config.segment_bytes = 1 << 20;
    o.config.max_decompressed_batch_bytes = kafkalog_fuzz::MAX_DECOMPRESSED;
    o.clock = std::sync::Arc::new(|| 1_700_000_000_000);
    o
}

fn read_everything(log: &Log) {
    for isolation in [
        FetchIsolation::LogEnd,
        FetchIsolation::HighWatermark,
        FetchIsolation::TxnCommitted,
    ] {
        let _ = log.records(None, None, isolation);
        let _ = log.read(log.log_start_offset(), 1 << 16, isolation, true);
    }
    let _ = log.records(Some(log.log_end_offset()), None, FetchIsolation::LogEnd);
    let _ = (
        log.last_stable_offset(),
        log.high_watermark(),
        log.recovery_point(),
    );
}

fuzz_target!(|data: &[u8]| {
    let root = DIR.get_or_init(kafkalog_fuzz::scratch_dir).path();
    let dir = root.join("topic-0");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    for (name, bytes) in kafkalog_fuzz::split_folder(data) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let before = kafkalog_fuzz::snapshot_dir(&dir);
    if let Ok(log) = Log::open(&dir, options(true)) {
        read_everything(&log);
        let _ = log.close();
    }
    assert!(
        kafkalog_fuzz::snapshot_dir(&dir) == before,
        "a read-only open changed the folder"
    );
    if let Ok(log) = Log::open(&dir, options(false)) {
        read_everything(&log);
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
            .unwrap();
        let _ = log.append_as_leader(&b.build().unwrap(), 0);
        read_everything(&log);
        let _ = log.close();
    }
});
