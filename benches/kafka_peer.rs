//! kafkalog's side of the rows benches/run_all.py measures against Kafka's own Java code
//! (benches/java/KafkaPeer.java, under JMH): deep iteration of a segment touching every record's
//! key, value and headers, `OffsetIndex::lookup` / `TimeIndex::lookup` over the same 1024 targets
//! (the same LCG as the Java side), and building 500-record batches with `BatchBuilder` appended
//! with `FileRecords::append`. Also the machine's limits: memcpy bandwidth, CRC32C throughput and
//! the kernel's read of the cached file into a window.
//!
//! `cargo bench --bench kafka_peer -- <segment.log> [seconds]` prints one JSON object per line
//! (`ns_per_op` is the median over the timed samples, after a warm-up of the same length).
//! Without a segment it says so and exits (`cargo bench` runs every bench, this one needs input).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kafkalog::index::{OffsetIndex, TimeIndex};
use kafkalog::record::batch::Batch;
use kafkalog::record::builder::{BatchBuilder, BatchOptions};
use kafkalog::record::file_records::{FileAccess, FileRecords};

const LOOKUPS: usize = 1024;
const APPEND_RECORDS: usize = 500;
const APPEND_VALUE_BYTES: usize = 100;
const MAX_BATCH: usize = 64 << 20;

fn targets(lo: i64, hi: i64, n: usize, seed: u64) -> Vec<i64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + ((x >> 33) % ((hi - lo + 1) as u64)) as i64
        })
        .collect()
}

/// Median nanoseconds per call of `op`, after warming up for `secs`, sampling for `secs`.
fn measure(secs: f64, mut op: impl FnMut() -> u64) -> (f64, usize) {
    let budget = Duration::from_secs_f64(secs);
    let start = Instant::now();
    while start.elapsed() < budget {
        black_box(op());
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || samples.len() < 5 {
        let t = Instant::now();
        black_box(op());
        samples.push(t.elapsed().as_nanos() as f64);
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (samples[samples.len() / 2], samples.len())
}

fn report(op: &str, ns: f64, samples: usize, extra: &str) {
    println!("{{\"op\": \"{op}\", \"ns_per_op\": {ns:.1}, \"samples\": {samples}{extra}}}");
}

/// Deep iteration through the crate's batch loop and record decoder; returns the bytes touched.
fn deep_iteration(
    records: &FileRecords,
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(&kafkalog::record::record::Record<'_>),
) -> u64 {
    let mut sum = 0u64;
    records
        .for_each_batch(0, records.size_in_bytes(), MAX_BATCH, &mut |_, batch| {
            // Records decoded as they are pulled, as Kafka's deep iteration does.
            batch
                .record_iter(scratch, MAX_BATCH)?
                .try_for_each_record(|r| {
                    sum += (r.key.map_or(0, <[u8]>::len)
                        + r.value.map_or(0, <[u8]>::len)
                        + r.headers.len()) as u64;
                    each(&r);
                    Ok(())
                })?;
            Ok(true)
        })
        .expect("segment decodes");
    sum
}

/// Records of one batch touched as [`deep_iteration`] does; returns their bytes.
#[inline(always)]
fn touch_records(batch: &Batch<'_>, scratch: &mut Vec<u8>) -> kafkalog::Result<u64> {
    let mut sum = 0u64;
    batch
        .record_iter(scratch, MAX_BATCH)?
        .try_for_each_record(|r| {
            sum += (r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len) + r.headers.len())
                as u64;
            Ok(())
        })?;
    Ok(sum)
}

/// [`deep_iteration`] through `FileRecords::for_each_batch_mapped`: CRC checked, records decoded,
/// the batches read from a memory map of the file, on this thread only.
fn deep_iteration_mapped(records: &FileRecords, scratch: &mut Vec<u8>) -> u64 {
    let mut sum = 0u64;
    records
        .for_each_batch_mapped(
            0,
            records.size_in_bytes(),
            MAX_BATCH,
            // One thread, as Kafka's side: the per-core comparison.
            FileAccess::Mapped {
                check_crcs_ahead: false,
                release_behind: false,
                windows_without_checker: false,
            },
            &mut |_, batch, _| {
                sum += touch_records(batch, scratch)?;
                Ok(true)
            },
        )
        .expect("segment decodes");
    sum
}

/// Kafka's bare `FileRecords` deep iteration, which checks no CRC: the crate's batch reader and
/// record decoder with `ensure_valid` left out, the same work as the Java side's `deepIteration`.
fn deep_iteration_without_crc(records: &FileRecords, scratch: &mut Vec<u8>) -> u64 {
    let mut reader = records.batches(0, records.size_in_bytes(), MAX_BATCH);
    let mut sum = 0u64;
    while let Some((_, bytes)) = reader.next_batch().expect("segment reads") {
        let batch = Batch::parse(bytes).expect("batch parses");
        sum += touch_records(&batch, scratch).expect("records decode");
    }
    sum
}

/// Deep iteration of the segment's bytes already in memory, CRC checked per batch: what Kafka's
/// consumer does with a fetch response (`MemoryRecords`), without the file read both sides pay
/// in the `FileRecords` rows.
fn deep_iteration_in_memory(bytes: &[u8], scratch: &mut Vec<u8>) -> u64 {
    let (mut pos, mut sum) = (0usize, 0u64);
    while pos < bytes.len() {
        let batch = Batch::parse(&bytes[pos..]).expect("batch parses");
        batch.ensure_valid().expect("batch CRC");
        sum += touch_records(&batch, scratch).expect("records decode");
        pos += batch.size_in_bytes();
    }
    sum
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(log) = args.first().map(PathBuf::from) else {
        eprintln!("kafka_peer: needs a segment (.log); benches/run_all.py runs it");
        return;
    };
    let secs: f64 = args.get(1).map_or(3.0, |s| s.parse().expect("seconds"));
    let records = FileRecords::open(&log, false).expect("open segment");
    assert!(records.mapped().is_some(), "a read-only segment maps");
    let mut scratch = Vec::new();

    // The same check as the Java side: record count and zlib's chained CRC32 of keys then values.
    let (mut n, mut crc) = (0u64, crc32fast::Hasher::new());
    let (mut first, mut last, mut min_ts, mut max_ts) = (i64::MAX, -1i64, i64::MAX, i64::MIN);
    deep_iteration(&records, &mut scratch, |r| {
        n += 1;
        crc.update(r.key.unwrap_or_default());
        crc.update(r.value.unwrap_or_default());
        (first, last) = (first.min(r.offset), last.max(r.offset));
        (min_ts, max_ts) = (min_ts.min(r.timestamp), max_ts.max(r.timestamp));
    });
    println!(
        "{{\"op\": \"checksum\", \"records\": {n}, \"crc32\": {}}}",
        crc.finalize()
    );

    let (ns, s) = measure(secs, || deep_iteration(&records, &mut scratch, |_| {}));
    report(
        "deep_iteration",
        ns,
        s,
        &format!(", \"records\": {n}, \"bytes\": {}", records.size_in_bytes()),
    );
    // For a profiler: `KAFKA_PEER_ONLY=in_memory` runs the in-memory iteration alone.
    if std::env::var("KAFKA_PEER_ONLY").is_ok_and(|v| v == "in_memory") {
        let bytes = std::fs::read(&log).expect("read segment");
        let (ns, s) = measure(secs, || deep_iteration_in_memory(&bytes, &mut scratch));
        report(
            "deep_iteration_in_memory",
            ns,
            s,
            &format!(", \"records\": {n}"),
        );
        return;
    }
    // For a profiler: `KAFKA_PEER_ONLY=deep_iteration` stops here.
    if std::env::var("KAFKA_PEER_ONLY").is_ok_and(|v| v == "deep_iteration") {
        return;
    }
    // The same iteration over the file memory-mapped (how kafkalog's zero-copy reader reads a
    // read-only file no writer holds): no copy of the file into a read buffer.
    let mapped = deep_iteration_mapped(&records, &mut scratch);
    let (ns, s) = measure(secs, || deep_iteration_mapped(&records, &mut scratch));
    report(
        "deep_iteration_mapped",
        ns,
        s,
        &format!(", \"records\": {n}, \"sum\": {mapped}"),
    );
    let bare = deep_iteration_without_crc(&records, &mut scratch);
    assert_eq!(
        mapped, bare,
        "mapped and read iteration touch the same bytes"
    );
    let (ns, s) = measure(secs, || deep_iteration_without_crc(&records, &mut scratch));
    report(
        "deep_iteration_no_crc",
        ns,
        s,
        &format!(", \"records\": {n}, \"sum\": {bare}"),
    );
    let bytes = std::fs::read(&log).expect("read segment");
    let in_memory = deep_iteration_in_memory(&bytes, &mut scratch);
    assert_eq!(
        in_memory, bare,
        "in-memory and file iteration touch the same bytes"
    );
    let (ns, s) = measure(secs, || deep_iteration_in_memory(&bytes, &mut scratch));
    report(
        "deep_iteration_in_memory",
        ns,
        s,
        &format!(", \"records\": {n}, \"sum\": {in_memory}"),
    );

    let stem = log.with_extension("");
    let base: i64 = stem
        .file_name()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("segment named by its base offset");
    let offset_index = OffsetIndex::open(stem.with_extension("index"), base, 10 << 20, false)
        .expect("open .index");
    let time_index = TimeIndex::open(stem.with_extension("timeindex"), base, 10 << 20, false)
        .expect("open .timeindex");
    // Java's side takes the batches' max timestamps; for these files (one timestamp per batch
    // or increasing ones) the records' extremes give the same range.
    let offset_targets = targets(first, last, LOOKUPS, 42);
    let time_targets = targets(min_ts, max_ts, LOOKUPS, 43);
    let (ns, s) = measure(secs, || {
        offset_targets
            .iter()
            .map(|&t| offset_index.lookup(t).position as u64)
            .sum()
    });
    report(
        "offset_index_lookup",
        ns,
        s,
        &format!(
            ", \"lookups\": {LOOKUPS}, \"entries\": {}",
            offset_index.entries()
        ),
    );
    let (ns, s) = measure(secs, || {
        time_targets
            .iter()
            .map(|&t| time_index.lookup(t).offset as u64)
            .sum()
    });
    report(
        "time_index_lookup",
        ns,
        s,
        &format!(
            ", \"lookups\": {LOOKUPS}, \"entries\": {}",
            time_index.entries()
        ),
    );

    let keys: Vec<Vec<u8>> = (0..APPEND_RECORDS)
        .map(|i| format!("key-{i:08}").into_bytes())
        .collect();
    let value: Vec<u8> = (0..APPEND_VALUE_BYTES)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut out =
        FileRecords::open(&dir.path().join("00000000000000000000.log"), true).expect("append file");
    let (ns, s) = measure(secs, || {
        if out.size_in_bytes() > 64 << 20 {
            out.truncate_to(0).expect("truncate");
        }
        let mut b = BatchBuilder::new(BatchOptions::default());
        for (i, k) in keys.iter().enumerate() {
            b.append(1_700_000_000_000 + i as i64, Some(k), Some(&value), &[])
                .expect("append record");
        }
        out.append(&b.build().expect("build")).expect("append") as u64
    });
    report(
        "build_and_append",
        ns,
        s,
        &format!(", \"records\": {APPEND_RECORDS}"),
    );

    machine_limits(&log, secs);
}

/// The machine's ceilings on this segment's bytes: a memcpy of the whole file (already in memory)
/// and CRC32C over it (the crate's checksum, hardware-accelerated where the CPU has it).
fn machine_limits(log: &Path, secs: f64) {
    let bytes = std::fs::read(log).expect("read segment");
    let mut dst = vec![0u8; bytes.len()];
    let (ns, s) = measure(secs, || {
        dst.copy_from_slice(&bytes);
        dst[dst.len() / 2] as u64
    });
    report("memcpy", ns, s, &format!(", \"bytes\": {}", bytes.len()));
    let (ns, s) = measure(secs, || u64::from(kafkalog::checksum::crc32c(&bytes)));
    report("crc32c", ns, s, &format!(", \"bytes\": {}", bytes.len()));
    // The kernel's copy of the cached file into a reused window of the size `FileRecords`'
    // batch reader fills, nothing decoded: the floor of every row that reads the file (Kafka's
    // `FileRecords` reads into its buffer the same way).
    let file = std::fs::File::open(log).expect("open segment");
    let mut window = vec![0u8; READ_WINDOW];
    let (ns, s) = measure(secs, || {
        use std::os::unix::fs::FileExt;
        let (mut position, mut sum) = (0usize, 0u64);
        while position < bytes.len() {
            let want = READ_WINDOW.min(bytes.len() - position);
            file.read_exact_at(&mut window[..want], position as u64)
                .expect("read segment");
            sum += u64::from(window[want - 1]);
            position += want;
        }
        sum
    });
    report(
        "read_windows",
        ns,
        s,
        &format!(", \"bytes\": {}", bytes.len()),
    );
}

/// `FileRecords`' batch reader's full window.
const READ_WINDOW: usize = 1 << 20;
