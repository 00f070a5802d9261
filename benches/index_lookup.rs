//! `OffsetIndex::lookup` (Kafka's warm/cold search, KAFKA-6432) against a plain binary search over
//! the same index file, for caught-up targets (near the last offset) and for random targets.
//!
//! Baseline: one binary search over all entries (Kafka's search before KAFKA-6432), written here
//! over a second read-only mmap of the same `.index` file (same page-cache pages, same big-endian
//! decoding), because `MmapIndex`'s bytes are not public.

mod common;

use std::collections::HashSet;
use std::fs::File;
use std::hint::black_box;

use criterion::{Criterion, Throughput};
use kafkalog::index::{IndexSearchType, OffsetIndex, SlotObserver};
use memmap2::Mmap;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ENTRIES: usize = 1 << 20; // 1,048,576 entries = 8 MiB of the default 10 MiB index
const OFFSET_STRIDE: i64 = 10;
const POSITION_STRIDE: i32 = 2000; // 2000 * 2^20 < i32::MAX
const BASE_OFFSET: i64 = 1_000_000;
/// Lookups per criterion iteration (cycled over a pre-drawn target list).
const BATCH: usize = 1024;
/// Lookups over which the distinct 4 KiB pages are counted.
const PAGE_SAMPLE: usize = 10_000;
/// Caught-up targets lie within this many entries of the end (the warm section is 1024 entries).
const CAUGHT_UP_SPAN: usize = 500;

/// Kafka's pre-KAFKA-6432 search: floor over all entries, `None` when every entry is larger.
#[inline]
fn plain_floor_slot<O: SlotObserver>(
    bytes: &[u8],
    entries: usize,
    base: i64,
    target: i64,
    obs: &mut O,
) -> Option<usize> {
    #[inline(always)]
    fn key<O: SlotObserver>(bytes: &[u8], base: i64, n: usize, obs: &mut O) -> i64 {
        obs.on_read(n);
        let at = n * 8;
        base + i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as i64
    }
    if entries == 0 || key(bytes, base, 0, obs) > target {
        return None;
    }
    let (mut lo, mut hi) = (0usize, entries - 1);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let k = key(bytes, base, mid, obs);
        if k > target {
            hi = mid - 1;
        } else if k < target {
            lo = mid;
        } else {
            return Some(mid);
        }
    }
    Some(lo)
}

/// The (offset, position) at a slot, as `OffsetIndex::lookup` answers.
#[inline]
fn plain_lookup(bytes: &[u8], entries: usize, base: i64, target: i64) -> (i64, i32) {
    match plain_floor_slot(bytes, entries, base, target, &mut ()) {
        None => (base, 0),
        Some(n) => {
            let at = n * 8;
            let b = &bytes[at..at + 8];
            (
                base + i32::from_be_bytes(b[..4].try_into().unwrap()) as i64,
                i32::from_be_bytes(b[4..].try_into().unwrap()),
            )
        }
    }
}

fn distinct_pages(slots: &[usize]) -> usize {
    slots
        .iter()
        .map(|s| s * 8 / 4096)
        .collect::<HashSet<_>>()
        .len()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000001000000.index");
    let mut index = OffsetIndex::open(
        &path,
        BASE_OFFSET,
        kafkalog::index::DEFAULT_MAX_INDEX_SIZE,
        true,
    )
    .unwrap();
    for i in 0..ENTRIES {
        index
            .append(
                BASE_OFFSET + i as i64 * OFFSET_STRIDE,
                i as i32 * POSITION_STRIDE,
            )
            .unwrap();
    }
    index.flush().unwrap();
    assert_eq!(index.entries(), ENTRIES);
    // The baseline's view of the same file (the writable mapping is shared, so it sees the entries).
    let file = File::open(&path).unwrap();
    let map = unsafe { Mmap::map(&file) }.unwrap();
    let bytes: &[u8] = &map[..ENTRIES * 8];

    let last = index.last_offset();
    let mut rng = StdRng::seed_from_u64(42);
    let caught_up: Vec<i64> = (0..BATCH)
        .map(|_| last - rng.gen_range(0..CAUGHT_UP_SPAN as i64 * OFFSET_STRIDE))
        .collect();
    let random: Vec<i64> = (0..BATCH)
        .map(|_| rng.gen_range(BASE_OFFSET..=last))
        .collect();

    // Both searches must agree before anything is timed.
    for &t in caught_up.iter().chain(&random) {
        let k = index.lookup(t);
        assert_eq!(
            (k.offset, k.position),
            plain_lookup(bytes, ENTRIES, BASE_OFFSET, t),
            "target {t}"
        );
    }

    let mut g = c.benchmark_group("index_lookup");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, targets) in [("caught_up", &caught_up), ("random", &random)] {
        g.bench_function(format!("{name}_warm_cold"), |b| {
            b.iter(|| {
                for &t in targets.iter() {
                    black_box(index.lookup(black_box(t)));
                }
            })
        });
        g.bench_function(format!("{name}_plain_binary_search"), |b| {
            b.iter(|| {
                for &t in targets.iter() {
                    black_box(plain_lookup(bytes, ENTRIES, BASE_OFFSET, black_box(t)));
                }
            })
        });
    }
    g.finish();

    // Pages touched over PAGE_SAMPLE lookups (slots recorded by the SlotObserver).
    println!();
    for (name, span) in [
        ("caught_up", CAUGHT_UP_SPAN as i64 * OFFSET_STRIDE),
        ("random", last - BASE_OFFSET),
    ] {
        let mut rng = StdRng::seed_from_u64(7);
        let targets: Vec<i64> = (0..PAGE_SAMPLE)
            .map(|_| last - rng.gen_range(0..=span))
            .collect();
        let mut warm: Vec<usize> = Vec::new();
        let mut plain: Vec<usize> = Vec::new();
        for &t in &targets {
            index.lookup_observed(t, &mut warm);
            let mut one: Vec<usize> = Vec::new();
            let a = plain_floor_slot(bytes, ENTRIES, BASE_OFFSET, t, &mut one);
            plain.extend_from_slice(&one);
            // Same answer through the public slot search.
            let b = index.largest_lower_bound_slot_for(t, IndexSearchType::Key);
            assert_eq!(a, b);
        }
        println!(
            "PAGES index_lookup/{name}: warm_cold touched {} distinct 4 KiB pages ({} slot reads), plain_binary_search {} pages ({} slot reads), over {PAGE_SAMPLE} lookups into {ENTRIES} entries ({} pages)",
            distinct_pages(&warm),
            warm.len(),
            distinct_pages(&plain),
            plain.len(),
            ENTRIES * 8 / 4096,
        );
    }
    drop(map);
    index.close().unwrap();
}

fn main() {
    let mut c = common::criterion();
    bench(&mut c);
    c.final_summary();
    let rate = common::Rate::Elements(BATCH as u64, "lookups");
    for name in ["caught_up", "random"] {
        common::print_ratio(
            "index_lookup",
            &format!("{name}_warm_cold"),
            &format!("{name}_plain_binary_search"),
            rate,
        );
    }
}
