//! `.index` files (`OffsetIndex`): open read-only and writable, sanity check, lookups, the
//! fetch upper bound, appends and truncation. Input: base offset (8 bytes), lookup target (8),
//! then the file.
#![no_main]
use kafkalog::index::offset::{OffsetIndex, OffsetPosition};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(input) = kafkalog_fuzz::index_input(data, "00000000000000000000.index") else {
        return;
    };
    let (base, target) = (input.base, input.target);
    let open = |writable| OffsetIndex::open(&input.path, base, 4096, writable);
    kafkalog_fuzz::open_both_ways(open, |idx, writable| {
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
    });
});
