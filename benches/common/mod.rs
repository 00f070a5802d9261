//! Shared helpers for the kafkalog benches: criterion settings, reading criterion's own
//! estimates back after a group ran, and printing `RATIO` lines.
//!
//! A ratio is always `subject time / baseline time` (criterion's median estimates) for one operation, both measured by criterion
//! in the same process run: below 1.0x the subject is faster than its baseline. Estimates are read
//! from `<criterion dir>/<group>/<id>/new/estimates.json`; a file not written by this run (the
//! benchmark was filtered out) is reported as skipped instead of reusing an old number.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use criterion::Criterion;

/// When this bench process started; estimates older than this belong to an earlier run.
fn process_start() -> SystemTime {
    static START: OnceLock<SystemTime> = OnceLock::new();
    *START.get_or_init(|| SystemTime::now() - Duration::from_secs(1))
}

/// Short measurement settings so the whole `cargo bench` stays within a few minutes.
pub fn criterion() -> Criterion {
    process_start();
    Criterion::default()
        .warm_up_time(Duration::from_millis(1000))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args()
}

/// Where criterion writes its results, found the way criterion 0.5 finds it: `CRITERION_HOME`,
/// else `$CARGO_TARGET_DIR/criterion`, else `<target>/criterion` derived from this executable
/// (`<target>/release/deps/<bench>-<hash>`).
pub fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(target) = exe
            .parent()
            .and_then(|p| p.parent())
            .and_then(|p| p.parent())
        {
            return target.join("criterion");
        }
    }
    PathBuf::from("target/criterion")
}

/// Mean and median point estimates (ns per iteration) of `<group>/<id>` from this run.
pub struct Estimate {
    pub mean_ns: f64,
    pub median_ns: f64,
}

/// The number after the first `"point_estimate":` that follows `"<field>":` in criterion's JSON.
fn point_estimate(json: &str, field: &str) -> Option<f64> {
    let at = json.find(&format!("\"{field}\":"))?;
    let rest = &json[at..];
    let key = "\"point_estimate\":";
    let p = rest.find(key)? + key.len();
    let num: String = rest[p..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        .collect();
    num.parse().ok()
}

/// `None` when the estimate is missing or was not written by this process run.
pub fn estimate(group: &str, id: &str) -> Option<Estimate> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new")
        .join("estimates.json");
    let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
    if modified < process_start() {
        return None;
    }
    let json = std::fs::read_to_string(&path).ok()?;
    Some(Estimate {
        mean_ns: point_estimate(&json, "mean")?,
        median_ns: point_estimate(&json, "median")?,
    })
}

/// A ratio with three significant digits, and the speed-up spelled out when it is large.
pub fn fmt_ratio(r: f64) -> String {
    let digits = if r >= 1.0 || r <= 0.0 {
        2
    } else {
        (1 - r.log10().floor() as i32).max(2) as usize
    };
    let s = format!("{r:.digits$}x");
    if r > 0.0 && r < 0.1 {
        format!("{s} (baseline takes {:.0}x as long)", 1.0 / r)
    } else {
        s
    }
}

/// A human unit for nanoseconds.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// What a per-iteration time means as a rate.
#[derive(Clone, Copy)]
pub enum Rate {
    None,
    /// Bytes per iteration: print MB/s (10^6 bytes).
    Bytes(u64),
    /// Elements (records, lookups) per iteration: print per-second counts.
    Elements(u64, &'static str),
}

fn fmt_rate(rate: Rate, ns: f64) -> String {
    match rate {
        Rate::None => String::new(),
        Rate::Bytes(b) => format!(", {:.0} MB/s", b as f64 / ns * 1e3),
        Rate::Elements(n, unit) => {
            let per_s = n as f64 / ns * 1e9;
            if per_s >= 1e6 {
                format!(", {:.2} M {unit}/s", per_s / 1e6)
            } else {
                format!(", {:.1} k {unit}/s", per_s / 1e3)
            }
        }
    }
}

/// Prints `RATIO <group>/<subject> vs <baseline>: 0.42x (12.3 ns vs 29.1 ns median ...)` from the
/// median estimates (robust to a noisy neighbour on a shared machine), with rates when `rate` says
/// what an iteration does, and the ratio of the means after.
pub fn print_ratio(group: &str, subject: &str, baseline: &str, rate: Rate) {
    match (estimate(group, subject), estimate(group, baseline)) {
        (Some(s), Some(b)) => println!(
            "RATIO {group}/{subject} vs {baseline}: {} ({} vs {} median{}; mean ratio {})",
            fmt_ratio(s.median_ns / b.median_ns),
            fmt_ns(s.median_ns),
            fmt_ns(b.median_ns),
            match rate {
                Rate::None => String::new(),
                _ => format!(
                    "{} vs{}",
                    fmt_rate(rate, s.median_ns),
                    &fmt_rate(rate, b.median_ns)[1..]
                ),
            },
            fmt_ratio(s.mean_ns / b.mean_ns),
        ),
        _ => println!(
            "RATIO {group}/{subject} vs {baseline}: skipped (not both measured in this run)"
        ),
    }
}

/// Prints `RATE <group>/<id>: 12.3 µs median, 81.3 M records/s` for a benchmark without a pair.
pub fn print_rate(group: &str, id: &str, rate: Rate) {
    match estimate(group, id) {
        Some(e) => println!(
            "RATE {group}/{id}: {} median{}",
            fmt_ns(e.median_ns),
            fmt_rate(rate, e.median_ns)
        ),
        None => println!("RATE {group}/{id}: skipped (not measured in this run)"),
    }
}

/// `n` (key, value) pairs of about 100 bytes together: an 8-byte key and a value of
/// space-separated words from a small vocabulary, so the codecs see text-like data (compressible
/// about 3-5x) rather than random bytes or runs of one byte. Deterministic.
pub fn sample_records(n: usize, seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    const WORDS: &[&str] = &[
        "order", "user", "click", "view", "cart", "paid", "item", "price", "eu-west", "us-east",
        "mobile", "web", "session", "true", "false", "null", "status", "ok", "retry", "timeout",
        "checkout", "search", "query", "page", "home", "login", "logout", "sku", "qty", "total",
        "currency", "EUR", "USD", "id", "ts", "ref",
    ];
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let key = format!("k{:07}", (i as u64 * 7919 + seed) % 10_000_000).into_bytes();
            let mut value = String::with_capacity(100);
            while value.len() < 86 {
                value.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
                value.push(if rng.gen_bool(0.3) { '=' } else { ' ' });
                if rng.gen_bool(0.2) {
                    value.push_str(&rng.gen_range(0..100_000u32).to_string());
                    value.push(' ');
                }
            }
            value.truncate(92);
            (key, value.into_bytes())
        })
        .collect()
}

/// One v2 batch of `records` at `base_offset` with `codec`, timestamps 1.7e12 + i ms.
pub fn build_batch(
    records: &[(Vec<u8>, Vec<u8>)],
    codec: kafkalog::record::Compression,
    base_offset: i64,
) -> Vec<u8> {
    use kafkalog::record::builder::{BatchBuilder, BatchOptions};
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset,
        compression: codec,
        ..BatchOptions::default()
    });
    for (i, (k, v)) in records.iter().enumerate() {
        b.append(1_700_000_000_000 + i as i64, Some(k), Some(v), &[])
            .unwrap();
    }
    b.build().unwrap()
}

/// Every codec, with the names the bench ids use.
pub const CODECS: [(kafkalog::record::Compression, &str); 5] = [
    (kafkalog::record::Compression::None, "none"),
    (kafkalog::record::Compression::Gzip, "gzip"),
    (kafkalog::record::Compression::Snappy, "snappy"),
    (kafkalog::record::Compression::Lz4, "lz4"),
    (kafkalog::record::Compression::Zstd, "zstd"),
];
