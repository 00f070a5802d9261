//! `.index` files (`OffsetIndex`): open read-only and writable, sanity check, lookups, the
//! fetch upper bound, appends and truncation. Input: base offset (8 bytes), lookup target (8),
//! then the file.
#![no_main]
use kafkalog::index::offset::{OffsetIndex, OffsetPosition};
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
    let path = dir.path().join("00000000000000000000.index");
    std::fs::write(&path, &data[16..]).unwrap();
    for writable in [false, true] {
        let Ok(mut idx) = OffsetIndex::open(&path, base, 4096, writable) else {
            continue;
        };
        let _ = idx.sanity_check();
        let found = idx.lookup(target);
        let _ = idx.lookup(base);
        let _ = idx.lookup(idx.last_offset());
        let _ = idx.entry(idx.entries().saturating_sub(1));
        let _ = idx.entry(idx.entries());
        let _ = idx.fetch_upper_bound_offset(found, (target & 0xffff) as i32);
        let _ = idx.fetch_upper_bound_offset(
            OffsetPosition {
                offset: target,
                position: i32::MAX,
            },
            i32::MAX,
        );
        if writable {
            let _ = idx.resize(4096);
            let _ = idx.append(idx.last_offset().wrapping_add(1), 0);
            let _ = idx.append(target, (target >> 32) as i32);
            let _ = idx.truncate_to(target);
            let _ = idx.lookup(target);
            let _ = idx.trim_to_valid_size();
            let _ = idx.close();
        }
    }
});
