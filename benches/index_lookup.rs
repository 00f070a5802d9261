//! `OffsetIndex::lookup` (Kafka's warm/cold search, KAFKA-6432) against a plain binary search over
//! the same index file, for caught-up targets (near the last offset) and for random targets.
//!
//! Baseline: one binary search over all entries (Kafka's search before KAFKA-6432), written here
//! over the very bytes the index searches (`MmapIndex::entry_bytes`): the writable index's shared
//! mapping, and the read-only index's snapshot. Comparing across two different mappings of the
//! same file measured the memory, not the search: on this machine a second read-only mapping of
//! the file answered random lookups 2x faster than the writable mapping the appends had faulted in,
//! with the same search code.

mod common;

use std::collections::HashSet;
use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use kafkalog::index::{IndexSearchType, OffsetIndex, SlotObserver};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A nearly full default 10 MiB index (1,310,720 slots). Not a power of two on purpose: a middle
/// split of 2^k entries reads slots at aligned positions, which flattered the plain search.
const ENTRIES: usize = 1_310_000;
const OFFSET_STRIDE: i64 = 10;
const POSITION_STRIDE: i32 = 1600; // 1600 * ENTRIES < i32::MAX
const BASE_OFFSET: i64 = 1_000_000;
/// Lookups per criterion iteration (cycled over a pre-drawn target list).
const BATCH: usize = 1024;
/// Interleaved rounds of the paired measurement (each: one batch of each search).
const PAIRED_ROUNDS: usize = 400;
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

/// A writable index of `ENTRIES` entries at `path`, filled through `append` as a log's active
/// segment fills its index.
fn filled_index(path: &std::path::Path) -> OffsetIndex {
    let mut index = OffsetIndex::open(
        path,
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
    index
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = filled_index(&dir.path().join("00000000000001000000.index"));
    // A reader's view of a rolled segment's index (closed, so trimmed to its entries): `Log`s
    // opened read-only snapshot their indexes into memory.
    let rolled = dir.path().join("rolled").join("00000000000001000000.index");
    std::fs::create_dir(rolled.parent().unwrap()).unwrap();
    filled_index(&rolled).close().unwrap();
    let read_only = OffsetIndex::open(
        &rolled,
        BASE_OFFSET,
        kafkalog::index::DEFAULT_MAX_INDEX_SIZE,
        false,
    )
    .unwrap();
    assert_eq!(read_only.entries(), ENTRIES);
    let last = index.last_offset();
    let mut rng = StdRng::seed_from_u64(42);
    let caught_up: Vec<i64> = (0..BATCH)
        .map(|_| last - rng.gen_range(0..CAUGHT_UP_SPAN as i64 * OFFSET_STRIDE))
        .collect();
    let random: Vec<i64> = (0..BATCH)
        .map(|_| rng.gen_range(BASE_OFFSET..=last))
        .collect();

    let indexes = [("", &index), ("read_only_", &read_only)];
    // Both searches must agree before anything is timed.
    for (_, idx) in indexes {
        for &t in caught_up.iter().chain(&random) {
            let k = idx.lookup(t);
            assert_eq!(
                (k.offset, k.position),
                plain_lookup(idx.entry_bytes(), ENTRIES, BASE_OFFSET, t),
                "target {t}"
            );
        }
    }

    let mut g = c.benchmark_group("index_lookup");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, targets) in [("caught_up", &caught_up), ("random", &random)] {
        for (kind, idx) in indexes {
            g.bench_function(format!("{kind}{name}_warm_cold"), |b| {
                b.iter(|| {
                    for &t in targets.iter() {
                        black_box(idx.lookup(black_box(t)));
                    }
                })
            });
            let bytes = idx.entry_bytes();
            g.bench_function(format!("{kind}{name}_plain_binary_search"), |b| {
                b.iter(|| {
                    for &t in targets.iter() {
                        black_box(plain_lookup(bytes, ENTRIES, BASE_OFFSET, black_box(t)));
                    }
                })
            });
        }
    }
    g.finish();

    // Criterion times each function in its own window of seconds, and on a shared machine the
    // load drifts between windows; its 1024 targets also repeat, so after the first pass their
    // search paths sit in the caches. So the pairs again, interleaved batch by batch on fresh
    // targets (each search its own draw, so neither finds the other's lines cached), order
    // alternating: the median of the per-round time ratios.
    println!();
    let mut rng = StdRng::seed_from_u64(11);
    // `random_repeated`: criterion's 1024 random targets every round, so the paths are cached.
    for (name, span, repeated) in [
        ("caught_up", CAUGHT_UP_SPAN as i64 * OFFSET_STRIDE, false),
        ("random", last - BASE_OFFSET, false),
        ("random_repeated", last - BASE_OFFSET, true),
    ] {
        for (kind, idx) in indexes {
            let bytes = idx.entry_bytes();
            let mut draw = || -> Vec<i64> {
                if repeated {
                    return random.clone();
                }
                (0..BATCH).map(|_| last - rng.gen_range(0..=span)).collect()
            };
            let mut ratios: Vec<f64> = (0..PAIRED_ROUNDS)
                .map(|round| {
                    let (ours, theirs) = (draw(), draw());
                    let time_warm_cold = || {
                        let start = Instant::now();
                        for &t in &ours {
                            black_box(idx.lookup(black_box(t)));
                        }
                        start.elapsed().as_secs_f64()
                    };
                    let time_plain = || {
                        let start = Instant::now();
                        for &t in &theirs {
                            black_box(plain_lookup(bytes, ENTRIES, BASE_OFFSET, black_box(t)));
                        }
                        start.elapsed().as_secs_f64()
                    };
                    if round % 2 == 0 {
                        let w = time_warm_cold();
                        w / time_plain()
                    } else {
                        let p = time_plain();
                        time_warm_cold() / p
                    }
                })
                .collect();
            ratios.sort_by(f64::total_cmp);
            println!(
                "PAIRED index_lookup/{kind}{name}: warm_cold / plain_binary_search time {:.2}x (median of {PAIRED_ROUNDS} interleaved rounds of {BATCH} {} targets each; quartiles {:.2}x-{:.2}x)",
                ratios[PAIRED_ROUNDS / 2],
                if repeated { "repeated" } else { "fresh" },
                ratios[PAIRED_ROUNDS / 4],
                ratios[PAIRED_ROUNDS * 3 / 4],
            );
        }
    }

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
            let a = plain_floor_slot(index.entry_bytes(), ENTRIES, BASE_OFFSET, t, &mut one);
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
    index.close().unwrap();
}

fn main() {
    let mut c = common::criterion();
    bench(&mut c);
    c.final_summary();
    let rate = common::Rate::Elements(BATCH as u64, "lookups");
    for name in [
        "caught_up",
        "random",
        "read_only_caught_up",
        "read_only_random",
    ] {
        common::print_ratio(
            "index_lookup",
            &format!("{name}_warm_cold"),
            &format!("{name}_plain_binary_search"),
            rate,
        );
    }
}
