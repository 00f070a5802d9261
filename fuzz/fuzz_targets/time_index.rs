//! `.timeindex` files (`TimeIndex`): open read-only and writable, sanity check, lookups by
//! timestamp, appends and truncation. Input: base offset (8), target timestamp (8), the file.
#![no_main]
use kafkalog::index::time::TimeIndex;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let base = i64::from_le_bytes(data[0..8].try_into().unwrap());
    let target = i64::from_le_bytes(data[8..16].try_into().unwrap());
    let dir = DIR.get_or_init(kafkalog_fuzz::scratch_dir);
    let path = dir.path().join("00000000000000000000.timeindex");
    std::fs::write(&path, &data[16..]).unwrap();
    for writable in [false, true] {
        let Ok(mut idx) = TimeIndex::open(&path, base, 4096, writable) else {
            continue;
        };
        let _ = idx.sanity_check();
        let _ = idx.lookup(target);
        let _ = idx.lookup(i64::MIN);
        let _ = idx.lookup(i64::MAX);
        let last = idx.last_entry();
        let _ = idx.entry(idx.entries().saturating_sub(1));
        let _ = idx.entry(idx.entries());
        if writable {
            let _ = idx.resize(4096);
            let _ = idx.maybe_append(
                last.timestamp.wrapping_add(1),
                last.offset.wrapping_add(1),
                false,
            );
            let _ = idx.maybe_append(target, target, true);
            let _ = idx.truncate_to(target);
            let _ = idx.lookup(target);
            let _ = idx.trim_to_valid_size();
            let _ = idx.close();
        }
    }
});
