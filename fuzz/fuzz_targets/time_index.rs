//! `.timeindex` files (`TimeIndex`): open read-only and writable, sanity check, lookups by
//! timestamp, appends and truncation. Input: base offset (8), target timestamp (8), the file.
#![no_main]
use kafkalog::index::time::TimeIndex;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(input) = kafkalog_fuzz::index_input(data, "00000000000000000000.timeindex") else {
        return;
    };
    let (base, target) = (input.base, input.target);
    let open = |writable| TimeIndex::open(&input.path, base, 4096, writable);
    kafkalog_fuzz::open_both_ways(open, |idx, writable| {
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
    });
});
