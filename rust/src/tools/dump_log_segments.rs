//! Kafka's `DumpLogSegments` (`kafka-dump-log.sh`) without a JVM: the same options and, for the
//! same files, the same output, line for line, so scripts written against Kafka's tool keep working.
//!
//! Files are told apart by suffix as Kafka's tool does: `.log` and KRaft `.checkpoint` snapshots
//! (batches, records with `--deep-iteration`, contents with `--print-data-log`), `.index` and
//! `.timeindex` (entries, checked against the log), `.txnindex` (aborted transactions) and
//! `.snapshot` (producer state). Anything else is reported on `err` and skipped.
//!
//! Batches come from the crate's batch and record decoders; only the framing walk is this
//! module's, because it must stop exactly where Kafka's `FileLogInputStream` stops (a batch cut
//! short by the end of the file or `--max-bytes` ends the walk and is reported as invalid trailing
//! bytes; a size below the minimum or an unknown magic is an error, as it is for Kafka's tool).
//!
//! Index and time-index problems (entries pointing at the wrong batch, timestamps that disagree
//! with the log) and non-consecutive offsets are collected and printed on `err` after all files,
//! in Kafka's wording. `kafka_major` selects the 3.x tool's few differences in wording.
//!
//! `--offsets-decoder`, `--transaction-log-decoder` and `--cluster-metadata-decoder` print record
//! contents through `crate::internal_topics`, as Kafka's `MessageParser`s do.

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::internal_topics::message::Reader;
use crate::internal_topics::{
    cluster_metadata, group_metadata, share_group_state, transaction_log, ParsedRecord,
};
use crate::log::producer_state::read_snapshot;
use crate::record::batch::{
    is_incorrect_declared_batch_size, Batch, DefaultBatch, DEFAULT_MAX_DECOMPRESSED_BYTES,
    HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_V2, NO_SEQUENCE, RECORD_BATCH_OVERHEAD,
};
use crate::record::control::{ControlRecordType, EndTransactionMarker};
use crate::record::java_utf8::java_utf8_lossy;
use crate::record::legacy::{self, LegacyEntry};
use crate::record::record::Record;

/// Kafka's `LegacyRecord.RECORD_OVERHEAD_V0`: the smallest size field `FileLogInputStream` accepts.
const MIN_RECORD_SIZE: i32 = 14;
/// Kafka's `RecordBatch.NO_TIMESTAMP`.
const NO_TIMESTAMP: i64 = -1;
/// Bytes read per refill when walking a log file.
const CHUNK: usize = 4 << 20;
const OFFSET_INDEX_ENTRY: usize = 8;
const TIME_INDEX_ENTRY: usize = 12;
const ABORTED_TXN_ENTRY: usize = 34;
/// Kafka's `AbstractIndex.warmEntries` span: the last 8 KiB of entries.
const WARM_SECTION_BYTES: usize = 8192;

/// How record keys and values are printed: Kafka's `org.apache.kafka.tools.api` decoders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// `StringDecoder`: UTF-8, invalid sequences replaced by U+FFFD (the default).
    String,
    /// `IntegerDecoder`: the first 4 bytes, big-endian.
    Integer,
    /// `LongDecoder`: the first 8 bytes, big-endian.
    Long,
}

impl Decoder {
    /// The decoder for a `--key-decoder-class`/`--value-decoder-class` name, with or without its
    /// package (`org.apache.kafka.tools.api.` in 4.x, `kafka.serializer.` in older releases).
    pub fn from_class_name(name: &str) -> Result<Self> {
        match name.rsplit('.').next().unwrap_or(name) {
            "StringDecoder" => Ok(Decoder::String),
            "IntegerDecoder" => Ok(Decoder::Integer),
            "LongDecoder" => Ok(Decoder::Long),
            _ => Err(Error::Unsupported(format!(
                "decoder class {name}: kafkalog runs no Java classes; the built-in decoders are \
                 StringDecoder, IntegerDecoder and LongDecoder"
            ))),
        }
    }

    fn decode<'b>(self, bytes: &'b [u8], what: &str, offset: i64) -> Result<Cow<'b, str>> {
        let short = |need: usize| {
            Error::InvalidArgument(format!(
                "the {what} of the record at offset {offset} has {} bytes, fewer than the {need} \
                 the {self:?} decoder reads",
                bytes.len()
            ))
        };
        Ok(match self {
            Decoder::String => java_utf8_lossy(bytes),
            Decoder::Integer => {
                let b: [u8; 4] = bytes.get(..4).ok_or_else(|| short(4))?.try_into().unwrap();
                Cow::Owned(i32::from_be_bytes(b).to_string())
            }
            Decoder::Long => {
                let b: [u8; 8] = bytes.get(..8).ok_or_else(|| short(8))?.try_into().unwrap();
                Cow::Owned(i64::from_be_bytes(b).to_string())
            }
        })
    }
}

/// How record contents are printed: the key and value decoders, or one of Kafka's internal
/// topic decoders (`--offsets-decoder`, `--transaction-log-decoder`,
/// `--cluster-metadata-decoder`, `--share-group-state-decoder`), which imply `--print-data-log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageParser {
    #[default]
    Decoders,
    Offsets,
    TransactionLog,
    ClusterMetadata,
    ShareGroupState,
}

impl MessageParser {
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name {
            "" | "decoders" => MessageParser::Decoders,
            "offsets" => MessageParser::Offsets,
            "transaction-log" | "transaction_log" => MessageParser::TransactionLog,
            "cluster-metadata" | "cluster_metadata" => MessageParser::ClusterMetadata,
            "share-group-state" | "share_group_state" => MessageParser::ShareGroupState,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "message parser {other:?}: one of decoders, offsets, transaction-log, cluster-metadata, share-group-state"
                )))
            }
        })
    }

    /// The key and payload Kafka's parser prints for `r`.
    fn parse(self, r: &Record<'_>, kafka_major: u8) -> Result<ParsedRecord> {
        Ok(match self {
            MessageParser::Decoders => unreachable!("the key and value decoders print directly"),
            MessageParser::Offsets => {
                group_metadata::parse_for_dump(r.key, r.value, r.offset, kafka_major)?
            }
            MessageParser::TransactionLog => {
                transaction_log::parse_for_dump(r.key, r.value, r.offset, kafka_major)?
            }
            MessageParser::ClusterMetadata => cluster_metadata::parse_for_dump(r.value, r.offset),
            MessageParser::ShareGroupState => {
                share_group_state::parse_for_dump(r.key, r.value, r.offset)?
            }
        })
    }
}

/// DumpLogSegments' options (same names, same defaults).
#[derive(Debug, Clone)]
pub struct DumpOptions {
    /// `--print-data-log` (or any decoder option): print keys and values; implies deep iteration.
    pub print_data_log: bool,
    /// `--deep-iteration`: one line per record, not only per batch.
    pub deep_iteration: bool,
    /// `--skip-record-metadata`: record lines without their metadata (and control records' info).
    pub skip_record_metadata: bool,
    /// `--index-sanity-check`: only the check a broker runs on startup, per index file.
    pub index_sanity_check: bool,
    /// `--verify-index-only`: check index entries against the log without printing them.
    pub verify_index_only: bool,
    /// `--max-bytes`: read at most this many bytes of each log file.
    pub max_bytes: i32,
    /// `--max-message-size`: how far past an index entry's position its batch may end.
    pub max_message_size: i32,
    pub key_decoder: Decoder,
    pub value_decoder: Decoder,
    /// An internal topic's decoder instead of the key and value decoders.
    pub parser: MessageParser,
    /// One JSON object per line (batch, record, index entry, ...) instead of Kafka's text.
    pub json: bool,
    /// Print as this major release's tool does (3 or 4).
    pub kafka_major: u8,
    /// Lines printed before each log file's batches, where Kafka's tool makes its decoders
    /// (3.x's deprecation notes for `kafka.serializer.*` classes).
    pub decoder_notes: Vec<String>,
    /// Files found by listing a folder (not named by the user): one a running broker removed
    /// since (retention, the log cleaner) is skipped with a note, not an error.
    pub listed_from_folders: std::collections::HashSet<String>,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            print_data_log: false,
            deep_iteration: false,
            skip_record_metadata: false,
            index_sanity_check: false,
            verify_index_only: false,
            max_bytes: i32::MAX,
            max_message_size: 5 * 1024 * 1024,
            key_decoder: Decoder::String,
            value_decoder: Decoder::String,
            parser: MessageParser::Decoders,
            json: false,
            kafka_major: 4,
            decoder_notes: Vec::new(),
            listed_from_folders: Default::default(),
        }
    }
}

impl DumpOptions {
    fn prints_data(&self) -> bool {
        self.print_data_log || self.parser != MessageParser::Decoders
    }
    fn is_deep_iteration(&self) -> bool {
        self.deep_iteration || self.prints_data()
    }
}

/// What the dump found wrong, for the caller's exit code.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DumpSummary {
    pub files: usize,
    pub batches: u64,
    pub records: u64,
    /// Index entries pointing at another batch, time index disagreements, invalid batches
    /// (CRC), non-consecutive offsets and invalid trailing bytes.
    pub problems: u64,
}

/// One file's reported `(a, b)` pairs.
type FileReports = (String, Vec<(i64, i64)>);

/// Per-file lists of `(a, b)` pairs, in the order files were first reported.
#[derive(Default)]
struct PerFile(Vec<FileReports>);

impl PerFile {
    fn push(&mut self, file: &str, pair: (i64, i64)) {
        match self.0.iter_mut().find(|(f, _)| f == file) {
            Some((_, pairs)) => pairs.push(pair),
            None => self.0.push((file.to_string(), vec![pair])),
        }
    }
    fn count(&self) -> u64 {
        self.0.iter().map(|(_, p)| p.len() as u64).sum()
    }

    /// Kafka's tool keeps these in a `java.util.HashMap` keyed by path and prints them in its
    /// iteration order; reproduced so that reports line up with Kafka's, file for file.
    fn sort_as_java_hash_map(&mut self) {
        self.sort_by(java_hash_map_order);
    }

    /// Kafka 3.x's Scala tool keeps them in a `scala.collection.mutable.HashMap` instead.
    fn sort_as_scala_hash_map(&mut self) {
        self.sort_by(scala_hash_map_order);
    }

    fn sort_by(&mut self, order_of: fn(&[&str]) -> Vec<usize>) {
        let keys: Vec<&str> = self.0.iter().map(|(f, _)| f.as_str()).collect();
        let order = order_of(&keys);
        let mut entries: Vec<Option<FileReports>> =
            std::mem::take(&mut self.0).into_iter().map(Some).collect();
        self.0 = order
            .into_iter()
            .filter_map(|i| entries[i].take())
            .collect();
    }
}

/// The iteration order of a `java.util.HashMap` after `computeIfAbsent` of `keys` (distinct) in
/// order: buckets by `hash ^ hash >>> 16` masked by the table size; within a bucket, newest
/// first (`computeIfAbsent` links a new node at the head). The table doubles before an insert
/// that finds it more than 3/4 full, and after one that makes a bucket 8 long while the table is
/// smaller than 64 (where Java would otherwise make the bucket a tree). Tree buckets of larger
/// tables, which take 8 colliding paths, are not modelled.
fn java_hash_map_order(keys: &[&str]) -> Vec<usize> {
    let hashes: Vec<u32> = keys
        .iter()
        .map(|k| {
            let h = java_string_hash(k) as u32;
            h ^ (h >> 16)
        })
        .collect();
    let mut capacity = 16usize;
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); capacity];
    // Splitting a bucket keeps its order.
    let resize = |buckets: &mut Vec<Vec<usize>>, capacity: &mut usize| {
        *capacity *= 2;
        let mut grown: Vec<Vec<usize>> = vec![Vec::new(); *capacity];
        for bucket in buckets.iter() {
            for &i in bucket {
                grown[hashes[i] as usize & (*capacity - 1)].push(i);
            }
        }
        *buckets = grown;
    };
    for (i, &h) in hashes.iter().enumerate() {
        if i > capacity * 3 / 4 {
            resize(&mut buckets, &mut capacity);
        }
        let bucket = &mut buckets[h as usize & (capacity - 1)];
        let before = bucket.len();
        bucket.insert(0, i);
        if before >= 7 && capacity < 64 {
            resize(&mut buckets, &mut capacity);
        }
    }
    buckets.into_iter().flatten().collect()
}

/// The iteration order of a Scala 2.13 `mutable.HashMap` after `put` of `keys` (distinct) in
/// order: buckets by `hash ^ hash >>> 16` masked by the table size (16, doubled before an
/// insert that would bring it to 3/4 full); within a bucket, by that hash as a signed int, then
/// oldest first (a new node goes after those whose hash is not larger). Growing keeps both.
fn scala_hash_map_order(keys: &[&str]) -> Vec<usize> {
    let hashes: Vec<i32> = keys
        .iter()
        .map(|k| {
            let h = java_string_hash(k);
            h ^ ((h as u32) >> 16) as i32
        })
        .collect();
    let mut capacity = 16usize;
    for size in 0..keys.len() {
        if size + 1 >= capacity * 3 / 4 {
            capacity *= 2;
        }
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| (hashes[i] as u32 as usize & (capacity - 1), hashes[i], i));
    order
}

/// Java's `String.hashCode` (over UTF-16 code units, wrapping).
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

#[derive(Default)]
struct Reports {
    index_mismatches: PerFile,
    time_mismatches: PerFile,
    time_out_of_order: PerFile,
    time_not_found: PerFile,
    non_consecutive: PerFile,
}

impl Reports {
    fn print(&mut self, err: &mut dyn Write, kafka_major: u8) -> Result<()> {
        for reports in [
            &mut self.index_mismatches,
            &mut self.time_mismatches,
            &mut self.time_out_of_order,
            &mut self.time_not_found,
            &mut self.non_consecutive,
        ] {
            if kafka_major >= 4 {
                reports.sort_as_java_hash_map();
            } else {
                reports.sort_as_scala_hash_map();
            }
        }
        // Kafka keeps these in a TreeMap per file: index mismatches by index offset, largest
        // first, non-consecutive pairs by the earlier offset (4.x); a later pair for the same
        // key replaces the earlier one.
        for (file, pairs) in &mut self.index_mismatches.0 {
            sort_unique_by_key(pairs, true);
            write_report(
                err,
                &format!("Mismatches in :{file}"),
                pairs,
                |index, log| format!("  Index offset: {index}, log offset: {log}"),
            )?;
        }
        for (file, pairs) in &self.time_mismatches.0 {
            let heading = format!("Found timestamp mismatch in :{file}");
            write_report(err, &heading, pairs, |index, log| {
                format!("  Index timestamp: {index}, log timestamp: {log}")
            })?;
        }
        for (file, pairs) in &self.time_out_of_order.0 {
            let heading = format!("Found out of order timestamp in :{file}");
            write_report(err, &heading, pairs, |index, prev| {
                format!("  Index timestamp: {index}, Previously indexed timestamp: {prev}")
            })?;
        }
        for (file, pairs) in &self.time_not_found.0 {
            let heading = if kafka_major >= 4 {
                format!("The following indexed offsets are not found in :{file}")
            } else {
                "The following indexed offsets are not found in the log.".to_string()
            };
            write_report(err, &heading, pairs, |indexed, found| {
                format!("Indexed offset: {indexed}, found log offset: {found}")
            })?;
        }
        for (file, pairs) in &mut self.non_consecutive.0 {
            if kafka_major >= 4 {
                sort_unique_by_key(pairs, false);
            } else {
                // The 3.x tool prepends to a list: latest first.
                pairs.reverse();
            }
            let heading = format!("Non-consecutive offsets in {file}");
            write_report(err, &heading, pairs, |first, second| {
                format!("  {first} is followed by {second}")
            })?;
        }
        Ok(())
    }
}

/// One of the verification reports: its heading, then a line per pair.
fn write_report(
    err: &mut dyn Write,
    heading: &str,
    pairs: &[(i64, i64)],
    line: impl Fn(i64, i64) -> String,
) -> Result<()> {
    writeln!(err, "{heading}")?;
    for &(a, b) in pairs {
        writeln!(err, "{}", line(a, b))?;
    }
    Ok(())
}

/// A record's ` key: K payload: V` as Kafka's tool prints it after the record's metadata (`| `
/// first when the metadata is skipped), once both are decoded.
struct KeyAndPayload {
    prefix: &'static str,
    kafka_major: u8,
}

impl KeyAndPayload {
    fn new(opts: &DumpOptions) -> Self {
        KeyAndPayload {
            prefix: if opts.skip_record_metadata { "| " } else { " " },
            kafka_major: opts.kafka_major,
        }
    }

    fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        self.write(out, "key: ", key);
        self.prefix = " ";
    }

    fn payload(&mut self, out: &mut Vec<u8>, payload: &str) {
        // The 3.x tool always puts a plain space before the payload.
        if self.kafka_major < 4 {
            self.prefix = " ";
        }
        self.write(out, "payload: ", payload);
    }

    fn write(&self, out: &mut Vec<u8>, label: &str, text: &str) {
        out.extend_from_slice(self.prefix.as_bytes());
        out.extend_from_slice(label.as_bytes());
        out.extend_from_slice(text.as_bytes());
    }
}

fn sort_unique_by_key(pairs: &mut Vec<(i64, i64)>, descending: bool) {
    // Stable sort keeps insertion order within a key; the last one wins, as in a map.
    pairs.sort_by_key(|p| p.0);
    let mut unique: Vec<(i64, i64)> = Vec::with_capacity(pairs.len());
    for p in pairs.drain(..) {
        match unique.last_mut() {
            Some(last) if last.0 == p.0 => *last = p,
            _ => unique.push(p),
        }
    }
    if descending {
        unique.reverse();
    }
    *pairs = unique;
}

/// Java's `new File(arg).toString()`: repeated separators collapsed, a trailing one dropped.
fn java_file_string(arg: &str) -> String {
    let mut s = String::with_capacity(arg.len());
    for c in arg.chars() {
        if c == '/' && s.ends_with('/') {
            continue;
        }
        s.push(c);
    }
    if s.len() > 1 && s.ends_with('/') {
        s.pop();
    }
    s
}

/// Java's `File.getAbsolutePath()`: the path as given, prefixed with the working directory.
fn java_absolute_path(shown: &str) -> String {
    if shown.starts_with('/') {
        return shown.to_string();
    }
    match std::env::current_dir() {
        Ok(cwd) => format!("{}/{shown}", cwd.display()),
        Err(_) => shown.to_string(),
    }
}

fn file_name(shown: &str) -> &str {
    shown.rsplit('/').next().unwrap_or(shown)
}

/// The base offset in a segment file's name (what precedes its first dot).
fn base_offset_of(path: &Path, name: &str) -> Result<i64> {
    let stem = name.split('.').next().unwrap_or("");
    stem.parse().map_err(|_| {
        Error::InvalidArgument(format!(
            "{}: the file name before its first dot is not a segment's base offset (20 digits), \
             as Kafka's tool needs (a tiered-storage copy's <offset>-<uuid> name is not one)",
            path.display()
        ))
    })
}

/// An index file read whole: Kafka's are at most `i32::MAX` bytes (its sizes are Java ints), so
/// a larger one is refused rather than read into memory.
fn read_index_file(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::files::read_regular(path, i32::MAX as u64)
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

/// Dumps `files` (paths as given on the command line) to `out`, reports to `err`.
pub fn dump_log_segments(
    files: &[String],
    opts: &DumpOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<DumpSummary> {
    let mut reports = Reports::default();
    let mut summary = DumpSummary::default();
    for arg in files {
        let shown = java_file_string(arg);
        if opts.json {
            json_line(out, &[("type", J::Str("file")), ("path", J::Str(&shown))])?;
        } else {
            writeln!(out, "Dumping {shown}")?;
        }
        let name = file_name(&shown);
        let Some(dot) = name.rfind('.') else {
            writeln!(err, "Ignoring unknown file {shown}")?;
            continue;
        };
        let path = PathBuf::from(&shown);
        summary.files += 1;
        let mut ctx = FileDump {
            text: Vec::new(),
            path: &path,
            shown: &shown,
            name,
            opts,
            listed: opts.listed_from_folders.contains(arg),
            out: &mut *out,
            reports: &mut reports,
            summary: &mut summary,
        };
        let dumped = match &name[dot..] {
            ".log" | ".checkpoint" => {
                if !opts.json {
                    for note in &opts.decoder_notes {
                        writeln!(ctx.out, "{note}")?;
                    }
                }
                ctx.dump_log()
            }
            ".index" => ctx.dump_index(),
            ".timeindex" => ctx.dump_time_index(),
            ".snapshot" => match ctx.dump_producer_snapshot() {
                // As Kafka's tool: a corrupt snapshot is reported in its words and the dump goes
                // on; a file that cannot be read ends it, as for every other kind.
                Err(Error::CorruptRecord { message, .. }) => {
                    writeln!(err, "{message}")?;
                    summary.problems += 1;
                    Ok(())
                }
                other => other,
            },
            ".txnindex" => ctx.dump_txn_index(),
            _ => {
                summary.files -= 1;
                writeln!(err, "Ignoring unknown file {shown}")?;
                Ok(())
            }
        };
        match dumped {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound
                    && opts.listed_from_folders.contains(arg)
                    && !path.exists() =>
            {
                summary.files -= 1;
                writeln!(
                    err,
                    "Skipping {shown}: removed since its folder was listed (a running broker's \
                     retention or log cleaner)"
                )?;
            }
            other => other?,
        }
    }
    summary.problems += reports.index_mismatches.count()
        + reports.time_mismatches.count()
        + reports.time_out_of_order.count()
        + reports.time_not_found.count()
        + reports.non_consecutive.count();
    reports.print(err, opts.kafka_major)?;
    Ok(summary)
}

/// Reads a log file through a window of at least [`CHUNK`] bytes, walking batches with Kafka's
/// `FileLogInputStream` rules.
struct LogWindow<'f> {
    file: &'f File,
    path: &'f Path,
    end: u64,
    buf: Vec<u8>,
    /// Bytes of `buf` read from the file at `start`.
    filled: usize,
    start: u64,
}

impl<'f> LogWindow<'f> {
    fn new(file: &'f File, path: &'f Path, end: u64) -> Self {
        LogWindow {
            file,
            path,
            end,
            buf: Vec::new(),
            filled: 0,
            start: 0,
        }
    }

    /// `len` bytes at `pos`; the caller has checked that they lie before `end`.
    fn get(&mut self, pos: u64, len: usize) -> Result<&[u8]> {
        let buffered_end = self.start + self.filled as u64;
        if pos < self.start || pos + len as u64 > buffered_end {
            let want = (len.max(CHUNK) as u64).min(self.end - pos) as usize;
            // Grows (zero-filled) only when a refill needs more than any before.
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            self.file
                .read_exact_at(&mut self.buf[..want], pos)
                .map_err(io_err(self.path))?;
            self.start = pos;
            self.filled = want;
        }
        let off = (pos - self.start) as usize;
        Ok(&self.buf[off..off + len])
    }

    /// The batch at `pos`, `None` where `FileLogInputStream.nextBatch` answers null (fewer than a
    /// header's bytes left, or a batch running past the end).
    fn next_batch(&mut self, pos: u64) -> Result<Option<&[u8]>> {
        if pos + HEADER_SIZE_UP_TO_MAGIC as u64 >= self.end {
            return Ok(None);
        }
        let head = self.get(pos, HEADER_SIZE_UP_TO_MAGIC)?;
        let size = i32::from_be_bytes(head[8..12].try_into().unwrap());
        let magic = head[16] as i8;
        if size < MIN_RECORD_SIZE {
            return Err(Error::corrupt(format!(
                "Found record size {size} smaller than minimum record overhead \
                 ({MIN_RECORD_SIZE}) in file {}.",
                self.path.display()
            ))
            .at(Some(self.path), pos));
        }
        if pos + LOG_OVERHEAD as u64 + size as u64 > self.end {
            return Ok(None);
        }
        // Kafka's `FileLogInputStream` reads a magic above 2 as a v2 batch.
        if magic < 0 {
            return Err(
                Error::corrupt(format!("Invalid magic found in record: {magic}"))
                    .at(Some(self.path), pos),
            );
        }
        self.get(pos, LOG_OVERHEAD + size as usize).map(Some)
    }
}

fn parse_batch(bytes: &[u8]) -> Result<Batch<'_>> {
    if bytes[16] >= MAGIC_V2 {
        Ok(Batch::V2(DefaultBatch::new_as_file_batch(bytes)?))
    } else {
        Ok(Batch::Legacy(legacy::parse_entry_unverified(bytes)?))
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`.
fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

fn optional_long(v: Option<i64>) -> String {
    match v {
        Some(v) => format!("OptionalLong[{v}]"),
        None => "OptionalLong.empty".to_string(),
    }
}

/// One record of a deep iteration, with what the legacy format adds.
struct DeepRecord<'a> {
    record: Record<'a>,
    /// `(isValid, crc)` of a legacy message.
    legacy: Option<(bool, u32)>,
}

/// The records of a legacy entry as Kafka's deep iterator yields them, each with its own CRC.
fn legacy_deep_records<'s>(
    entry: &LegacyEntry<'s>,
    scratch: &'s mut Vec<u8>,
) -> Result<Vec<DeepRecord<'s>>> {
    if !entry.is_compressed() {
        return Ok(vec![DeepRecord {
            record: entry.to_record(),
            legacy: Some((entry.is_valid(), entry.crc)),
        }]);
    }
    *scratch = legacy::decompress_wrapper(entry, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
    let inner: &'s [u8] = scratch;
    // Read as Kafka's deep iterator reads them: an inner CRC that fails prints `isValid: false`
    // and the dump goes on; a message cut short ends the inner set.
    let entries = legacy::inner_entries_as_kafka_reads(entry, inner)?;
    let records = legacy::records_of_inner_entries(entry, &entries)?;
    let checks = entries.iter().map(|e| (e.is_valid(), e.crc));
    Ok(records
        .into_iter()
        .zip(checks)
        .map(|(record, check)| DeepRecord {
            record,
            legacy: Some(check),
        })
        .collect())
}

struct FileDump<'a> {
    /// Reused buffer for one batch's record lines.
    text: Vec<u8>,
    path: &'a Path,
    shown: &'a str,
    name: &'a str,
    opts: &'a DumpOptions,
    /// Found by listing a folder ([`DumpOptions::listed_from_folders`]).
    listed: bool,
    out: &'a mut dyn Write,
    reports: &'a mut Reports,
    summary: &'a mut DumpSummary,
}

impl FileDump<'_> {
    /// A running (or killed) broker's empty active segment: a 0-byte log beside its index's
    /// pre-allocated, zero-filled room. Kafka's tool, named the index, reads the zeros as an
    /// entry and fails (its first entry points at no batch); a folder listed whole is dumped as
    /// the broker sees it, an index with no entry yet. Not for files the user named.
    fn is_untrimmed_room_of_an_empty_log(&self, index_bytes: &[u8], log: &File) -> bool {
        self.listed
            && !index_bytes.is_empty()
            && index_bytes.iter().all(|&b| b == 0)
            && log.metadata().is_ok_and(|m| m.len() == 0)
    }

    fn print_empty(&mut self) -> Result<()> {
        if self.opts.json {
            return json_line(
                self.out,
                &[("type", J::Str("empty")), ("path", J::Str(self.shown))],
            );
        }
        writeln!(self.out, "{} is empty.", self.shown)?;
        Ok(())
    }

    fn open(&self, path: &Path) -> Result<File> {
        crate::files::open_regular(path).map_err(io_err(path))
    }

    fn dump_log(&mut self) -> Result<()> {
        let opts = self.opts;
        if !opts.json {
            if self.name.ends_with(".log") {
                let start = base_offset_of(self.path, self.name)?;
                writeln!(self.out, "Log starting offset: {start}")?;
            } else if self.name == "bootstrap.checkpoint" {
                writeln!(self.out, "KRaft bootstrap snapshot")?;
            } else {
                let (offset, epoch) = parse_snapshot_name(self.path, self.name)?;
                writeln!(self.out, "Snapshot end offset: {offset}, epoch: {epoch}")?;
            }
        }
        let file = self.open(self.path)?;
        let size = file.metadata().map_err(io_err(self.path))?.len();
        let end = size.min(opts.max_bytes.max(0) as u64);
        let mut window = LogWindow::new(&file, self.path, end);
        let abs = java_absolute_path(self.shown);
        let mut position = 0u64;
        let mut last_offset = -1i64;
        let mut scratch = Vec::new();
        while let Some(bytes) = window.next_batch(position)? {
            let batch = parse_batch(bytes).map_err(|e| e.at(Some(self.path), position))?;
            self.summary.batches += 1;
            self.print_batch_level(&batch, position)?;
            if opts.is_deep_iteration() {
                self.dump_batch_records(&batch, &mut scratch, &mut last_offset, &abs)
                    .map_err(|e| e.at(Some(self.path), position))?;
            }
            position += batch.size_in_bytes() as u64;
        }
        let trailing = end - position;
        if trailing > 0 && opts.max_bytes == i32::MAX {
            self.summary.problems += 1;
            if opts.json {
                json_line(
                    self.out,
                    &[
                        ("type", J::Str("invalidBytes")),
                        ("position", J::U(position)),
                        ("bytes", J::U(trailing)),
                    ],
                )?;
            } else {
                writeln!(
                    self.out,
                    "Found {trailing} invalid bytes at the end of {}",
                    self.name
                )?;
            }
        }
        Ok(())
    }

    fn print_batch_level(&mut self, batch: &Batch<'_>, position: u64) -> Result<()> {
        let (valid, crc, codec) = match batch {
            Batch::V2(b) => (
                b.size_in_bytes() >= RECORD_BATCH_OVERHEAD && b.is_valid(),
                b.crc(),
                b.compression()?,
            ),
            Batch::Legacy(e) => (e.is_valid(), e.crc, e.compression()?),
        };
        if !valid {
            self.summary.problems += 1;
        }
        let ts_type = batch.timestamp_type();
        if self.opts.json {
            let mut fields: Vec<(&str, J)> = vec![("type", J::Str("batch"))];
            if let Batch::V2(b) = batch {
                fields.extend([
                    ("baseOffset", J::I(b.base_offset())),
                    ("lastOffset", J::I(b.last_offset())),
                    ("count", J::I(b.records_count().into())),
                    ("baseSequence", J::I(b.base_sequence().into())),
                    ("lastSequence", J::I(b.last_sequence().into())),
                    ("producerId", J::I(b.producer_id())),
                    ("producerEpoch", J::I(b.producer_epoch().into())),
                    (
                        "partitionLeaderEpoch",
                        J::I(b.partition_leader_epoch().into()),
                    ),
                    ("isTransactional", J::B(b.is_transactional())),
                    ("isControl", J::B(b.is_control())),
                    ("deleteHorizonMs", J::OptI(b.delete_horizon_ms())),
                ]);
            } else {
                fields.push(("offset", J::I(batch.last_offset())));
            }
            fields.extend([
                ("position", J::U(position)),
                ("timestampType", J::Str(ts_type.name())),
                ("maxTimestamp", J::I(batch.max_timestamp())),
                ("size", J::U(batch.size_in_bytes() as u64)),
                ("magic", J::U(batch.magic().into())),
                ("compresscodec", J::Str(codec.name())),
                ("crc", J::U(crc.into())),
                ("isvalid", J::B(valid)),
            ]);
            return json_line(self.out, &fields);
        }
        let out = &mut *self.out;
        match batch {
            Batch::V2(b) => write!(
                out,
                "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
                 producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
                 isControl: {} deleteHorizonMs: {}",
                b.base_offset(),
                b.last_offset(),
                b.records_count(),
                b.base_sequence(),
                b.last_sequence(),
                b.producer_id(),
                b.producer_epoch(),
                b.partition_leader_epoch(),
                b.is_transactional(),
                b.is_control(),
                optional_long(b.delete_horizon_ms()),
            )?,
            Batch::Legacy(e) => write!(out, "offset: {}", e.offset)?,
        }
        writeln!(
            out,
            " position: {position} {}: {} size: {} magic: {} compresscodec: {} crc: {crc} isvalid: {valid}",
            ts_type.name(),
            batch.max_timestamp(),
            batch.size_in_bytes(),
            batch.magic(),
            codec.name(),
        )?;
        Ok(())
    }

    fn dump_batch_records(
        &mut self,
        batch: &Batch<'_>,
        scratch: &mut Vec<u8>,
        last_offset: &mut i64,
        abs: &str,
    ) -> Result<()> {
        // Records are decoded one at a time, so a damaged record stops the dump right after the
        // lines before it, as in Kafka's tool; but Kafka's `DefaultRecordBatch.iterator()` reads
        // a compressed batch's records whole into a list first, so there a damaged record stops
        // it before any line of the batch.
        let records: Box<dyn Iterator<Item = Result<DeepRecord<'_>>>> = match batch {
            Batch::V2(b) => {
                let payload = b.records_payload(scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
                let records = b.records_in(payload).map(|r| {
                    r.map(|record| DeepRecord {
                        record,
                        legacy: None,
                    })
                });
                if b.compression()? == crate::record::codec::Compression::None {
                    Box::new(records)
                } else {
                    Box::new(records.collect::<Result<Vec<_>>>()?.into_iter().map(Ok))
                }
            }
            Batch::Legacy(e) => Box::new(legacy_deep_records(e, scratch)?.into_iter().map(Ok)),
        };
        // The batch's lines go to `out` in one write: formatting into a Vec is monomorphic and
        // cheap, where each fragment through `dyn Write` costs a virtual call.
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        let mut failure = None;
        let mut records = records.peekable();
        while let Some(record) = records.next() {
            // Kafka's iterator finds bytes left after the declared records as it reads the last
            // one, and prints that record no more; the crate's iterator finds them after.
            if let Some(Err(e)) = records.peek() {
                if is_incorrect_declared_batch_size(e) {
                    failure = records.next().and_then(|r| r.err());
                    break;
                }
            }
            let result =
                record.and_then(|r| self.record_line(&mut text, &r, batch, last_offset, abs));
            if let Err(e) = result {
                failure = Some(e);
                break;
            }
        }
        self.out.write_all(&text)?;
        self.text = text;
        failure.map_or(Ok(()), Err)
    }

    fn record_line(
        &mut self,
        out: &mut Vec<u8>,
        deep: &DeepRecord<'_>,
        batch: &Batch<'_>,
        last_offset: &mut i64,
        abs: &str,
    ) -> Result<()> {
        let opts = self.opts;
        let DeepRecord { record: r, legacy } = deep;
        let (base_offset, base_sequence) = match batch {
            Batch::V2(b) => (b.base_offset(), b.base_sequence()),
            Batch::Legacy(_) => (0, NO_SEQUENCE),
        };
        let is_control = batch.is_control();
        self.summary.records += 1;
        if opts.kafka_major >= 4 {
            if r.offset != *last_offset + 1 {
                self.reports
                    .non_consecutive
                    .push(abs, (*last_offset, r.offset));
            }
        } else if *last_offset != -1 && r.offset != *last_offset + 1 {
            self.reports
                .non_consecutive
                .push(abs, (*last_offset, r.offset));
        }
        *last_offset = r.offset;
        let sequence = if batch.magic() >= MAGIC_V2 && base_sequence >= 0 {
            increment_sequence(base_sequence, (r.offset - base_offset) as i32)
        } else {
            NO_SEQUENCE
        };
        if opts.json {
            return self.json_record(r, batch, *legacy, sequence);
        }
        if !opts.skip_record_metadata {
            // Pieces and itoa rather than `write!`: this line is printed once per record.
            let mut ints = itoa::Buffer::new();
            out.extend_from_slice(b"| offset: ");
            out.extend_from_slice(ints.format(r.offset).as_bytes());
            out.push(b' ');
            out.extend_from_slice(batch.timestamp_type().name().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(ints.format(r.timestamp).as_bytes());
            out.extend_from_slice(b" keySize: ");
            out.extend_from_slice(ints.format(r.key.map_or(-1, |k| k.len() as i64)).as_bytes());
            out.extend_from_slice(b" valueSize: ");
            out.extend_from_slice(
                ints.format(r.value.map_or(-1, |v| v.len() as i64))
                    .as_bytes(),
            );
            if batch.magic() >= MAGIC_V2 {
                out.extend_from_slice(b" sequence: ");
                out.extend_from_slice(ints.format(sequence).as_bytes());
                out.extend_from_slice(b" headerKeys: [");
                for (i, h) in r.headers.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(h.key.as_bytes());
                }
                out.push(b']');
            }
            if let Some((valid, crc)) = legacy {
                // The 3.x tool printed a stray brace here.
                let brace = if opts.kafka_major >= 4 { "" } else { "}" };
                write!(out, " isValid: {valid} crc: {crc}{brace}")?;
            }
            if is_control {
                out.extend_from_slice(control_record_text(r, opts.kafka_major)?.as_bytes());
            }
        }
        if opts.prints_data() && !is_control && opts.parser != MessageParser::Decoders {
            let parsed = opts.parser.parse(r, opts.kafka_major)?;
            let mut fields = KeyAndPayload::new(opts);
            if let Some(k) = &parsed.key {
                fields.key(out, k);
            }
            if let Some(p) = &parsed.payload {
                fields.payload(out, p);
            }
        } else if opts.print_data_log && !is_control {
            // Both decoded before either is printed, as Kafka's `DecoderMessageParser.parse`
            // does: a value its decoder refuses leaves the line without the key too.
            let key = r
                .key
                .map(|k| opts.key_decoder.decode(k, "key", r.offset))
                .transpose()?;
            let value = r
                .value
                .map(|v| opts.value_decoder.decode(v, "value", r.offset))
                .transpose()?;
            let mut fields = KeyAndPayload::new(opts);
            if let Some(k) = &key {
                fields.key(out, k);
            }
            if let Some(v) = &value {
                fields.payload(out, v);
            }
        }
        out.push(b'\n');
        Ok(())
    }

    fn json_record(
        &mut self,
        r: &Record<'_>,
        batch: &Batch<'_>,
        legacy: Option<(bool, u32)>,
        sequence: i32,
    ) -> Result<()> {
        let opts = self.opts;
        let header_keys: Vec<&str> = r.headers.iter().map(|h| h.key.as_ref()).collect();
        let mut fields: Vec<(&str, J)> = vec![
            ("type", J::Str("record")),
            ("offset", J::I(r.offset)),
            ("timestampType", J::Str(batch.timestamp_type().name())),
            ("timestamp", J::I(r.timestamp)),
            ("keySize", J::I(r.key.map_or(-1, |k| k.len() as i64))),
            ("valueSize", J::I(r.value.map_or(-1, |v| v.len() as i64))),
        ];
        if batch.magic() >= MAGIC_V2 {
            fields.push(("sequence", J::I(sequence.into())));
            fields.push(("headerKeys", J::Strs(&header_keys)));
        }
        if let Some((valid, crc)) = legacy {
            fields.push(("isValid", J::B(valid)));
            fields.push(("crc", J::U(crc.into())));
        }
        let control;
        if batch.is_control() {
            control = control_record_json(r)?;
            fields.push(("control", J::Raw(&control)));
        }
        let (key, value);
        let (key_json, payload_json);
        if opts.parser != MessageParser::Decoders && !batch.is_control() {
            // The decoded records as JSON values, not as the strings Kafka's tool prints.
            let parsed = opts.parser.parse(r, opts.kafka_major)?;
            key_json = serde_json::to_string(&parsed.key_json).expect("a Value serializes");
            payload_json = serde_json::to_string(&parsed.payload_json).expect("a Value serializes");
            fields.push(("key", J::Raw(&key_json)));
            fields.push(("payload", J::Raw(&payload_json)));
        } else if opts.print_data_log && !batch.is_control() {
            key = r
                .key
                .map(|k| opts.key_decoder.decode(k, "key", r.offset))
                .transpose()?;
            value = r
                .value
                .map(|v| opts.value_decoder.decode(v, "value", r.offset))
                .transpose()?;
            fields.push(("key", J::OptStr(key.as_deref())));
            fields.push(("payload", J::OptStr(value.as_deref())));
        }
        json_line(self.out, &fields)
    }

    /// `--index-sanity-check`: Kafka's tool runs the index's sanity check alone and says so when
    /// it passes; a failure is this file's error.
    fn passed_sanity_check(&mut self, check: Result<()>) -> Result<()> {
        check?;
        if self.opts.json {
            return json_line(
                self.out,
                &[
                    ("type", J::Str("sanity_check")),
                    ("path", J::Str(self.shown)),
                    ("passed", J::B(true)),
                ],
            );
        }
        writeln!(self.out, "{} passed sanity check.", self.shown)?;
        Ok(())
    }

    fn dump_index(&mut self) -> Result<()> {
        let opts = self.opts;
        let base = base_offset_of(self.path, self.name)?;
        let log_path = sibling(self.path, self.name, ".log");
        let log = self.open(&log_path)?;
        let bytes = read_index_file(self.path).map_err(io_err(self.path))?;
        let index = RawOffsetIndex::new(base, &bytes);
        if index.entries() == 0 || self.is_untrimmed_room_of_an_empty_log(&bytes, &log) {
            return self.print_empty();
        }
        if opts.index_sanity_check {
            return self.passed_sanity_check(index.sanity_check(self.path, bytes.len()));
        }
        let log_size = log.metadata().map_err(io_err(&log_path))?.len();
        let abs = java_absolute_path(self.shown);
        for i in 0..index.entries() {
            let (offset, position) = index.entry(i);
            // A crashed broker leaves zero-filled entries after the last real one.
            if offset == base && i > 0 {
                return Ok(());
            }
            let first = first_batch_last_offset(
                &log,
                &log_path,
                log_size,
                position,
                opts.max_message_size,
            )?;
            if first != offset {
                self.reports.index_mismatches.push(&abs, (offset, first));
            }
            if !opts.verify_index_only {
                if opts.json {
                    json_line(
                        self.out,
                        &[
                            ("type", J::Str("index")),
                            ("offset", J::I(offset)),
                            ("position", J::I(position.into())),
                        ],
                    )?;
                } else {
                    writeln!(self.out, "offset: {offset} position: {position}")?;
                }
            }
        }
        Ok(())
    }

    fn dump_time_index(&mut self) -> Result<()> {
        let opts = self.opts;
        let base = base_offset_of(self.path, self.name)?;
        let log_path = sibling(self.path, self.name, ".log");
        let index_path = sibling(self.path, self.name, ".index");
        let log = self.open(&log_path)?;
        let index_bytes = read_index_file(&index_path).map_err(io_err(&index_path))?;
        let index = RawOffsetIndex::new(base, &index_bytes);
        let bytes = read_index_file(self.path).map_err(io_err(self.path))?;
        let time_index = RawTimeIndex::new(base, &bytes);
        if self.is_untrimmed_room_of_an_empty_log(&bytes, &log) {
            return self.print_empty();
        }
        if opts.index_sanity_check {
            return self.passed_sanity_check(time_index.sanity_check(self.path, bytes.len()));
        }
        let log_size = log.metadata().map_err(io_err(&log_path))?.len();
        let abs = java_absolute_path(self.shown);
        let mut prev_timestamp = NO_TIMESTAMP;
        let mut window = LogWindow::new(&log, &log_path, log_size);
        let mut scratch = Vec::new();
        for i in 0..time_index.entries() {
            let (timestamp, offset) = time_index.entry(i);
            if offset == base && i > 0 {
                return Ok(());
            }
            let start = index.lookup(offset).1.max(0) as u64;
            if start > log_size {
                return Err(Error::InvalidArgument(format!(
                    "offset index {} points at position {start}, past the end of {} ({log_size} bytes)",
                    index_path.display(),
                    log_path.display()
                )));
            }
            // The first batch from the indexed position whose last offset reaches the entry.
            let mut pos = start;
            let mut matching = None;
            while let Some(bytes) = window.next_batch(pos)? {
                let batch = parse_batch(bytes).map_err(|e| e.at(Some(&log_path), pos))?;
                if batch.last_offset() >= offset {
                    let max_ts = if batch.last_offset() == offset {
                        max_record_timestamp(&batch, &mut scratch)
                            .map_err(|e| e.at(Some(&log_path), pos))?
                    } else {
                        NO_TIMESTAMP
                    };
                    matching = Some((batch.last_offset(), max_ts));
                    break;
                }
                pos += batch.size_in_bytes() as u64;
            }
            match matching {
                None => self.reports.time_not_found.push(&abs, (offset, -1)),
                Some((last, _)) if last != offset => {
                    self.reports.time_not_found.push(&abs, (offset, last))
                }
                Some((_, max_ts)) => {
                    if max_ts != timestamp {
                        self.reports.time_mismatches.push(&abs, (timestamp, max_ts));
                    }
                    if prev_timestamp >= timestamp {
                        self.reports
                            .time_out_of_order
                            .push(&abs, (timestamp, prev_timestamp));
                    }
                }
            }
            if !opts.verify_index_only {
                if opts.json {
                    json_line(
                        self.out,
                        &[
                            ("type", J::Str("timeindex")),
                            ("timestamp", J::I(timestamp)),
                            ("offset", J::I(offset)),
                        ],
                    )?;
                } else {
                    writeln!(self.out, "timestamp: {timestamp} offset: {offset}")?;
                }
            }
            prev_timestamp = timestamp;
        }
        Ok(())
    }

    fn dump_txn_index(&mut self) -> Result<()> {
        let bytes = read_index_file(self.path).map_err(io_err(self.path))?;
        // Kafka's iterator stops before a partial entry at the end.
        for e in bytes.chunks_exact(ABORTED_TXN_ENTRY) {
            // Kafka 4 reads the version whole and takes 0 only; 3.x read its first byte and
            // refused it above 0.
            let (version, refused) = if self.opts.kafka_major >= 4 {
                let version = i16::from_be_bytes([e[0], e[1]]);
                (version, version != 0)
            } else {
                let version = i16::from(e[0] as i8);
                (version, version > 0)
            };
            if refused {
                let shown = java_absolute_path(self.shown);
                let supported = if self.opts.kafka_major >= 4 {
                    "supported version range is 0 to 0"
                } else {
                    "current version is 0"
                };
                return Err(Error::corrupt_index(format!(
                    "Unexpected aborted transaction version {version} in transaction index {shown}, {supported}"
                )));
            }
            let at = |i: usize| i64::from_be_bytes(e[i..i + 8].try_into().unwrap());
            let (producer_id, first, last, lso) = (at(2), at(10), at(18), at(26));
            if self.opts.json {
                json_line(
                    self.out,
                    &[
                        ("type", J::Str("abortedTxn")),
                        ("version", J::I(version.into())),
                        ("producerId", J::I(producer_id)),
                        ("firstOffset", J::I(first)),
                        ("lastOffset", J::I(last)),
                        ("lastStableOffset", J::I(lso)),
                    ],
                )?;
            } else {
                writeln!(
                    self.out,
                    "version: {version} producerId: {producer_id} firstOffset: {first} \
                     lastOffset: {last} lastStableOffset: {lso}"
                )?;
            }
        }
        Ok(())
    }

    fn dump_producer_snapshot(&mut self) -> Result<()> {
        for entry in read_snapshot(self.path)? {
            let batch = entry.batch_metadata().next();
            if self.opts.json {
                let mut fields = vec![
                    ("type", J::Str("producer")),
                    ("producerId", J::I(entry.producer_id)),
                    ("producerEpoch", J::I(entry.producer_epoch.into())),
                    ("coordinatorEpoch", J::I(entry.coordinator_epoch.into())),
                    (
                        "currentTxnFirstOffset",
                        J::OptI(entry.current_txn_first_offset),
                    ),
                    ("lastTimestamp", J::I(entry.last_timestamp)),
                ];
                if let Some(m) = batch {
                    fields.extend([
                        ("firstSequence", J::I(m.first_seq().into())),
                        ("lastSequence", J::I(m.last_seq.into())),
                        ("lastOffset", J::I(m.last_offset)),
                        ("offsetDelta", J::I(m.offset_delta.into())),
                        ("timestamp", J::I(m.timestamp)),
                    ]);
                }
                json_line(self.out, &fields)?;
                continue;
            }
            write!(
                self.out,
                "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {} \
                 lastTimestamp: {}",
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch,
                optional_long(entry.current_txn_first_offset),
                entry.last_timestamp
            )?;
            if self.opts.kafka_major < 4 {
                self.out.write_all(b" ")?;
            }
            if let Some(m) = batch {
                let sep = if self.opts.kafka_major >= 4 { " " } else { "" };
                write!(
                    self.out,
                    "{sep}firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                    m.first_seq(),
                    m.last_seq,
                    m.last_offset,
                    m.offset_delta,
                    m.timestamp
                )?;
            }
            self.out.write_all(b"\n")?;
        }
        Ok(())
    }
}

fn sibling(path: &Path, name: &str, suffix: &str) -> PathBuf {
    let stem = name.split('.').next().unwrap_or("");
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    match dir {
        Some(d) => d.join(format!("{stem}{suffix}")),
        None => PathBuf::from(format!("{stem}{suffix}")),
    }
}

/// `<20-digit end offset>-<10-digit epoch>.checkpoint`, Kafka's `Snapshots.parse`.
fn parse_snapshot_name(path: &Path, name: &str) -> Result<(i64, i32)> {
    let stem = name.strip_suffix(".checkpoint").unwrap_or(name);
    let parsed = stem
        .split_once('-')
        .and_then(|(o, e)| Some((o.parse().ok()?, e.parse().ok()?)));
    parsed.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{}: not a KRaft snapshot name (<end offset>-<epoch>.checkpoint)",
            path.display()
        ))
    })
}

/// The last offset of the first batch at `position`, read as Kafka's tool does (a slice of at
/// most `max_message_size` bytes).
fn first_batch_last_offset(
    log: &File,
    log_path: &Path,
    log_size: u64,
    position: i32,
    max_message_size: i32,
) -> Result<i64> {
    if position < 0 || position as u64 > log_size {
        return Err(Error::InvalidArgument(format!(
            "an index entry points at position {position}, past the end of {} ({log_size} bytes)",
            log_path.display()
        )));
    }
    let end = (position as u64 + max_message_size.max(0) as u64).min(log_size);
    let mut window = LogWindow::new(log, log_path, end);
    match window.next_batch(position as u64)? {
        Some(bytes) => Ok(parse_batch(bytes)
            .map_err(|e| e.at(Some(log_path), position as u64))?
            .last_offset()),
        // An index entry at the log's end (a zero-filled index beside an empty log, as a
        // broker killed right after rolling leaves them): Kafka's tool fails there too (its
        // iterator has no next batch).
        None if position as u64 == log_size => Err(Error::corrupt(format!(
            "an index entry points at position {position}, the end of {} ({log_size} bytes): \
             no batch there",
            log_path.display()
        ))),
        None => Err(Error::corrupt(format!(
            "no whole batch within --max-message-size ({max_message_size}) bytes of position \
             {position} in {}",
            log_path.display()
        ))),
    }
}

fn max_record_timestamp(batch: &Batch<'_>, scratch: &mut Vec<u8>) -> Result<i64> {
    let mut max = NO_TIMESTAMP;
    match batch {
        Batch::V2(b) => {
            let payload = b.records_payload(scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
            for r in b.records_in(payload) {
                max = max.max(r?.timestamp);
            }
        }
        Batch::Legacy(e) => {
            for r in legacy_deep_records(e, scratch)? {
                max = max.max(r.record.timestamp);
            }
        }
    }
    Ok(max)
}

/// An offset index as a non-writable Kafka open sees it: every whole entry of the file counts.
struct RawOffsetIndex<'b> {
    base: i64,
    bytes: &'b [u8],
}

impl<'b> RawOffsetIndex<'b> {
    fn new(base: i64, bytes: &'b [u8]) -> Self {
        RawOffsetIndex { base, bytes }
    }
    fn entries(&self) -> usize {
        self.bytes.len() / OFFSET_INDEX_ENTRY
    }
    fn entry(&self, i: usize) -> (i64, i32) {
        let e = &self.bytes[i * OFFSET_INDEX_ENTRY..];
        let relative = i32::from_be_bytes(e[0..4].try_into().unwrap());
        (
            self.base + i64::from(relative),
            i32::from_be_bytes(e[4..8].try_into().unwrap()),
        )
    }
    /// Kafka's `OffsetIndex.lookup`: the warm section first, then the cold binary search, over
    /// every entry (zero-filled ones included, as Kafka's tool searches them).
    fn lookup(&self, target: i64) -> (i64, i32) {
        match index_slot(self.entries(), OFFSET_INDEX_ENTRY, target, |i| {
            self.entry(i).0
        }) {
            Some(slot) => self.entry(slot),
            None => (self.base, 0),
        }
    }
    fn sanity_check(&self, path: &Path, len: usize) -> Result<()> {
        let n = self.entries();
        if n != 0 {
            let last = self.entry(n - 1).0;
            if last < self.base {
                return Err(Error::corrupt_index(format!(
                    "Corrupt index found, index file ({}) has non-zero size but the last offset \
                     is {last} which is less than the base offset {}.",
                    path.display(),
                    self.base
                )));
            }
        }
        if !len.is_multiple_of(OFFSET_INDEX_ENTRY) {
            return Err(Error::corrupt_index(format!(
                "Index file {} is corrupt, found {len} bytes which is neither positive nor a \
                 multiple of {OFFSET_INDEX_ENTRY}.",
                path.file_name().unwrap_or_default().to_string_lossy()
            )));
        }
        Ok(())
    }
}

struct RawTimeIndex<'b> {
    base: i64,
    bytes: &'b [u8],
}

impl<'b> RawTimeIndex<'b> {
    fn new(base: i64, bytes: &'b [u8]) -> Self {
        RawTimeIndex { base, bytes }
    }
    fn entries(&self) -> usize {
        self.bytes.len() / TIME_INDEX_ENTRY
    }
    /// `(timestamp, offset)`.
    fn entry(&self, i: usize) -> (i64, i64) {
        let e = &self.bytes[i * TIME_INDEX_ENTRY..];
        let relative = i32::from_be_bytes(e[8..12].try_into().unwrap());
        (
            i64::from_be_bytes(e[0..8].try_into().unwrap()),
            self.base + i64::from(relative),
        )
    }
    fn sanity_check(&self, path: &Path, len: usize) -> Result<()> {
        let n = self.entries();
        if n != 0 {
            let (last_ts, last_offset) = self.entry(n - 1);
            let first_ts = self.entry(0).0;
            if last_ts < first_ts {
                return Err(Error::corrupt_index(format!(
                    "Corrupt time index found, time index file ({}) has non-zero size but the \
                     last timestamp is {last_ts} which is less than the first timestamp {first_ts}",
                    path.display()
                )));
            }
            if last_offset < self.base {
                return Err(Error::corrupt_index(format!(
                    "Corrupt time index found, time index file ({}) has non-zero size but the \
                     last offset is {last_offset} which is less than the first offset {}",
                    path.display(),
                    self.base
                )));
            }
        }
        if !len.is_multiple_of(TIME_INDEX_ENTRY) {
            return Err(Error::corrupt_index(format!(
                "Time index file {} is corrupt, found {len} bytes which is neither positive nor \
                 a multiple of {TIME_INDEX_ENTRY}.",
                path.display()
            )));
        }
        Ok(())
    }
}

/// Kafka's `AbstractIndex.largestLowerBoundSlotFor` over `entries` keys read by `key`.
fn index_slot(
    entries: usize,
    entry_size: usize,
    target: i64,
    key: impl Fn(usize) -> i64,
) -> Option<usize> {
    if entries == 0 {
        return None;
    }
    let search = |mut lo: usize, mut hi: usize| {
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let found = key(mid);
            if found > target {
                hi = mid - 1;
            } else if found < target {
                lo = mid;
            } else {
                return mid;
            }
        }
        lo
    };
    let first_warm = (entries - 1).saturating_sub(WARM_SECTION_BYTES / entry_size);
    if key(first_warm) < target {
        return Some(search(first_warm, entries - 1));
    }
    if key(0) > target {
        return None;
    }
    Some(search(0, first_warm))
}

// ---- control records ----

/// What Kafka's tool prints after a control record's metadata.
fn control_record_text(r: &Record<'_>, kafka_major: u8) -> Result<String> {
    let control_type = ControlRecordType::parse_key(r.key)?;
    Ok(match control_type {
        ControlRecordType::Abort | ControlRecordType::Commit => {
            let marker = EndTransactionMarker::parse(control_type, r.value)?;
            format!(
                " endTxnMarker: {} coordinatorEpoch: {}",
                control_type.name(),
                marker.coordinator_epoch
            )
        }
        ControlRecordType::LeaderChange if kafka_major >= 4 => {
            format!(
                " LeaderChange: {}",
                control_message_json(control_type, r.value)?
            )
        }
        ControlRecordType::SnapshotHeader => {
            format!(
                " SnapshotHeader {}",
                control_message_json(control_type, r.value)?
            )
        }
        ControlRecordType::SnapshotFooter => {
            format!(
                " SnapshotFooter {}",
                control_message_json(control_type, r.value)?
            )
        }
        ControlRecordType::KRaftVersion => {
            format!(
                " KRaftVersion {}",
                control_message_json(control_type, r.value)?
            )
        }
        ControlRecordType::KRaftVoters => {
            format!(
                " KRaftVoters {}",
                control_message_json(control_type, r.value)?
            )
        }
        other => format!(" controlType: {}({})", other.name(), other.id()),
    })
}

fn control_record_json(r: &Record<'_>) -> Result<String> {
    let control_type = ControlRecordType::parse_key(r.key)?;
    let body = match control_type {
        ControlRecordType::Abort | ControlRecordType::Commit => {
            let marker = EndTransactionMarker::parse(control_type, r.value)?;
            format!("{{\"coordinatorEpoch\":{}}}", marker.coordinator_epoch)
        }
        ControlRecordType::Unknown(_) => "null".to_string(),
        t => control_message_json(t, r.value)?,
    };
    Ok(format!(
        "{{\"type\":\"{}\",\"typeId\":{},\"data\":{body}}}",
        control_type.name(),
        control_type.id()
    ))
}

/// The JSON Kafka's generated converters write for a KRaft control record's value (a flexible
/// message whose first field is its own version).
fn control_message_json(control_type: ControlRecordType, value: Option<&[u8]>) -> Result<String> {
    let value = value.ok_or_else(|| {
        Error::corrupt(format!(
            "{} control record has a null value",
            control_type.name()
        ))
    })?;
    let mut r = Reader::new(value);
    let version = r.i16()?;
    let mut j = String::new();
    j.push_str(&format!("{{\"version\":{version}"));
    match control_type {
        ControlRecordType::LeaderChange => {
            j.push_str(&format!(",\"leaderId\":{}", r.i32()?));
            for field in ["voters", "grantingVoters"] {
                j.push_str(&format!(",\"{field}\":["));
                let n = r.compact_len()?;
                for i in 0..n {
                    if i > 0 {
                        j.push(',');
                    }
                    j.push_str(&format!("{{\"voterId\":{}", r.i32()?));
                    if version >= 1 {
                        j.push_str(&format!(",\"voterDirectoryId\":\"{}\"", r.uuid()?));
                    }
                    r.skip_tagged_fields()?;
                    j.push('}');
                }
                j.push(']');
            }
        }
        ControlRecordType::SnapshotHeader => {
            j.push_str(&format!(",\"lastContainedLogTimestamp\":{}", r.i64()?));
        }
        ControlRecordType::SnapshotFooter => {}
        ControlRecordType::KRaftVersion => {
            j.push_str(&format!(",\"kRaftVersion\":{}", r.i16()?));
        }
        ControlRecordType::KRaftVoters => {
            j.push_str(",\"voters\":[");
            let n = r.compact_len()?;
            for i in 0..n {
                if i > 0 {
                    j.push(',');
                }
                j.push_str(&format!(
                    "{{\"voterId\":{},\"voterDirectoryId\":\"{}\",\"endpoints\":[",
                    r.i32()?,
                    r.uuid()?
                ));
                let endpoints = r.compact_len()?;
                for e in 0..endpoints {
                    if e > 0 {
                        j.push(',');
                    }
                    let name = r.compact_string()?;
                    let host = r.compact_string()?;
                    let port = r.u16()?;
                    r.skip_tagged_fields()?;
                    j.push_str(&format!(
                        "{{\"name\":{},\"host\":{},\"port\":{port}}}",
                        json_string(&name),
                        json_string(&host)
                    ));
                }
                let (min, max) = (r.i16()?, r.i16()?);
                r.skip_tagged_fields()?;
                r.skip_tagged_fields()?;
                j.push_str(&format!(
                    "],\"kRaftVersionFeature\":{{\"minSupportedVersion\":{min},\"maxSupportedVersion\":{max}}}}}"
                ));
            }
            j.push(']');
        }
        _ => {}
    }
    r.skip_tagged_fields()?;
    j.push('}');
    Ok(j)
}

// ---- JSON lines ----

/// One JSON value of a flat object line.
enum J<'a> {
    Str(&'a str),
    OptStr(Option<&'a str>),
    Strs(&'a [&'a str]),
    I(i64),
    OptI(Option<i64>),
    U(u64),
    B(bool),
    /// Already JSON.
    Raw(&'a str),
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a str always serializes")
}

fn json_line(out: &mut dyn Write, fields: &[(&str, J<'_>)]) -> Result<()> {
    let mut line = String::with_capacity(128);
    line.push('{');
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push('"');
        line.push_str(name);
        line.push_str("\":");
        match value {
            J::Str(s) => line.push_str(&json_string(s)),
            J::OptStr(Some(s)) => line.push_str(&json_string(s)),
            J::OptStr(None) | J::OptI(None) => line.push_str("null"),
            J::Strs(items) => {
                line.push('[');
                for (k, s) in items.iter().enumerate() {
                    if k > 0 {
                        line.push(',');
                    }
                    line.push_str(&json_string(s));
                }
                line.push(']');
            }
            J::I(v) | J::OptI(Some(v)) => line.push_str(&v.to_string()),
            J::U(v) => line.push_str(&v.to_string()),
            J::B(v) => line.push_str(if *v { "true" } else { "false" }),
            J::Raw(s) => line.push_str(s),
        }
    }
    line.push_str("}\n");
    out.write_all(line.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::txn::AbortedTxn;
    use crate::record::builder::{BatchBuilder, BatchOptions};

    /// The order each Kafka's own tool printed its reports in, whatever the order of the files
    /// on the command line (a black-box tester's runs): Kafka 3.9.2's Scala `mutable.HashMap`,
    /// Kafka 4.4's `java.util.HashMap`.
    #[test]
    fn report_order_follows_each_kafka_versions_hash_map() {
        let in_order = |keys: &[&'static str], order: Vec<usize>| -> Vec<&'static str> {
            order.into_iter().map(|i| keys[i]).collect()
        };
        let data = |v: &str, file: &str| format!("/tmp/s17/tB/b{v}/data/{file}.log");
        let name = |p: &str| -> &'static str { Box::leak(p.to_string().into_boxed_str()) };
        let (comp, compdel) = (
            name(&data("39", "comp-0/00000000000000000120")),
            name(&data("39", "compdel-0/00000000000000000000")),
        );
        for keys in [[comp, compdel], [compdel, comp]] {
            assert_eq!(
                in_order(&keys, scala_hash_map_order(&keys)),
                [comp, compdel]
            );
        }
        let printed: Vec<&'static str> = [
            "compdel-0/00000000000000000000",
            "compdel-0/00000000000000000165",
            "comp-0/00000000000000000177",
            "comp-0/00000000000000000120",
        ]
        .iter()
        .map(|f| name(&data("44", f)))
        .collect();
        let given = [printed[3], printed[2], printed[0], printed[1]];
        assert_eq!(in_order(&given, java_hash_map_order(&given)), printed);
        let given = [printed[0], printed[1], printed[3], printed[2]];
        assert_eq!(in_order(&given, java_hash_map_order(&given)), printed);
    }

    #[test]
    fn java_paths() {
        assert_eq!(java_file_string("a//b/"), "a/b");
        assert_eq!(java_file_string("/"), "/");
        assert_eq!(
            file_name("/x/00000000000000000000.log"),
            "00000000000000000000.log"
        );
    }

    #[test]
    fn warm_and_cold_lookup() {
        let keys: Vec<i64> = (0..5000).map(|i| i * 10).collect();
        let slot = |t| index_slot(keys.len(), 8, t, |i| keys[i]);
        assert_eq!(slot(-1), None);
        assert_eq!(slot(0), Some(0));
        assert_eq!(slot(15), Some(1));
        assert_eq!(slot(49_990), Some(4999));
        assert_eq!(slot(1_000_000), Some(4999));
        assert_eq!(slot(12_345), Some(1234));
    }

    #[test]
    fn java_string_hashes() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("/tmp/00000000000000000000.log"), {
            "/tmp/00000000000000000000.log"
                .bytes()
                .fold(0i32, |h, b| h.wrapping_mul(31).wrapping_add(b as i32))
        });
    }

    #[test]
    fn java_hash_map_iteration_order() {
        // Checked against OpenJDK 17's HashMap.computeIfAbsent + keySet().
        let keys = [
            "/tmp/x/00000000000000003199.log",
            "/tmp/x/00000000000000002852.log",
            "/tmp/x/00000000000000001010.log",
            "/tmp/x/00000000000000003052.log",
            "/tmp/x/00000000000000003219.log",
            "/tmp/x/00000000000000002585.log",
            "/tmp/x/00000000000000000140.log",
        ];
        let order: Vec<&str> = java_hash_map_order(&keys)
            .into_iter()
            .map(|i| keys[i])
            .collect();
        assert_eq!(
            order,
            [
                "/tmp/x/00000000000000002852.log",
                "/tmp/x/00000000000000003199.log",
                "/tmp/x/00000000000000001010.log",
                "/tmp/x/00000000000000003052.log",
                "/tmp/x/00000000000000000140.log",
                "/tmp/x/00000000000000002585.log",
                "/tmp/x/00000000000000003219.log",
            ]
        );
    }

    #[test]
    fn utf8_replacement_follows_java() {
        let r = |b: &[u8]| java_utf8_lossy(b).into_owned();
        // ASCII (a header key, nearly always) is borrowed as it is, empty included.
        assert!(matches!(
            java_utf8_lossy(b"traceparent"),
            Cow::Borrowed("traceparent")
        ));
        assert!(matches!(java_utf8_lossy(b""), Cow::Borrowed("")));
        assert_eq!(r(b"key\x7f\x00"), "key\u{7f}\u{0}");
        assert_eq!(r(b"caf\xc3\xa9"), "caf\u{e9}");
        // An encoded surrogate: one replacement in Java, three in Rust's from_utf8_lossy.
        assert_eq!(r(b"\xed\xa0\x80"), "\u{fffd}");
        assert_eq!(r(b"\xe2\x82"), "\u{fffd}");
        assert_eq!(r(b"\xc0\xaf"), "\u{fffd}\u{fffd}");
        assert_eq!(r(b"ok\xc3("), "ok\u{fffd}(");
        assert_eq!(r(b"\xf0\x9f\x98"), "\u{fffd}");
        assert_eq!(r(b"\xf0\x9f\x98\x80"), "\u{1f600}");
    }

    #[test]
    fn sequences_wrap_as_kafka() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }

    #[test]
    fn uuid_is_url_safe_base64() {
        assert_eq!(
            crate::internal_topics::message::uuid_string(&[0u8; 16]),
            "AAAAAAAAAAAAAAAAAAAAAA"
        );
        assert_eq!(
            crate::internal_topics::message::uuid_string(&[0xfb, 0xff]),
            "-_8"
        );
    }

    fn write_log(dir: &Path, base: i64, batches: &[Vec<u8>]) -> PathBuf {
        let path = dir.join(format!("{base:020}.log"));
        std::fs::write(&path, batches.concat()).unwrap();
        path
    }

    fn batch(base: i64, values: &[&[u8]]) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions {
            base_offset: base,
            ..Default::default()
        });
        for (i, v) in values.iter().enumerate() {
            b.append(1000 + i as i64, Some(b"k"), Some(v), &[]).unwrap();
        }
        b.build().unwrap()
    }

    fn dump(files: &[String], opts: &DumpOptions) -> (String, String, DumpSummary) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = dump_log_segments(files, opts, &mut out, &mut err).unwrap();
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
            s,
        )
    }

    /// Kafka 4 reads a `.txnindex` entry's version whole and refuses anything but 0 (a
    /// negative one too); 3.x read its first byte and refused it above 0 (a black-box tester:
    /// version -45 was printed, exit 0, where Kafka 4.4's tool fails).
    #[test]
    fn txn_index_versions_are_refused_as_each_release_refuses_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let entry = |version: i16| {
            let mut e = AbortedTxn {
                producer_id: 7,
                first_offset: 1,
                last_offset: 3,
                last_stable_offset: 4,
            }
            .to_bytes()
            .to_vec();
            e[..2].copy_from_slice(&version.to_be_bytes());
            e
        };
        let files = [path.to_str().unwrap().to_string()];
        for (version, major, refused) in [
            (0, 4, None),
            (-45, 4, Some("version -45 in transaction index")),
            (1, 4, Some("supported version range is 0 to 0")),
            (0x00ff, 3, None), // first byte 0
            (-45, 3, None),    // first byte 0xff: -1, accepted by 3.x
            (0x0100, 3, Some("version 1 in transaction index")),
            (0x0100, 3, Some("current version is 0")),
        ] {
            std::fs::write(&path, entry(version)).unwrap();
            let opts = DumpOptions {
                kafka_major: major,
                ..DumpOptions::default()
            };
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let dumped = dump_log_segments(&files, &opts, &mut out, &mut err);
            match refused {
                None => assert!(dumped.is_ok(), "{version} {major}: {dumped:?}"),
                Some(what) => {
                    let message = dumped.unwrap_err().to_string();
                    assert!(message.contains(what), "{version} {major}: {message}");
                }
            }
        }
    }

    /// A folder's file that a running broker removed after the CLI listed the folder is
    /// skipped with a note; one the user named stays an error, as in Kafka's tool.
    #[test]
    fn a_listed_file_removed_since_is_skipped_a_named_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let kept = write_log(dir.path(), 0, &[batch(0, &[b"a"])]);
        let gone = dir.path().join("00000000000000000001.log");
        let files = [gone.display().to_string(), kept.display().to_string()];
        let named = dump_log_segments(
            &files,
            &DumpOptions::default(),
            &mut Vec::new(),
            &mut Vec::new(),
        );
        assert!(
            matches!(named, Err(Error::Io { ref source, .. }) if source.kind() == std::io::ErrorKind::NotFound),
            "{named:?}"
        );
        let opts = DumpOptions {
            listed_from_folders: files.iter().cloned().collect(),
            ..Default::default()
        };
        let (out, err, summary) = dump(&files, &opts);
        assert!(
            err.starts_with(&format!("Skipping {}: removed since", gone.display())),
            "{err}"
        );
        assert!(
            out.contains("baseOffset: 0 lastOffset: 0 count: 1"),
            "{out}"
        );
        assert_eq!((summary.files, summary.batches), (1, 1));
    }

    /// A running or killed broker's empty active segment: a 0-byte log, its indexes' zeroed
    /// room. Named, the `.index` fails as in Kafka's tool; listed from a folder, it is empty.
    #[test]
    fn an_empty_active_segments_index_room_is_empty_when_its_folder_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let log = write_log(dir.path(), 0, &[]);
        let index = log.with_extension("index");
        let time_index = log.with_extension("timeindex");
        std::fs::write(&index, vec![0u8; 8 * 100]).unwrap();
        std::fs::write(&time_index, vec![0u8; 12 * 100]).unwrap();
        let named = [index.display().to_string()];
        assert!(dump_log_segments(
            &named,
            &DumpOptions::default(),
            &mut Vec::new(),
            &mut Vec::new()
        )
        .is_err());
        let files = [
            log.display().to_string(),
            index.display().to_string(),
            time_index.display().to_string(),
        ];
        let opts = DumpOptions {
            listed_from_folders: files.iter().cloned().collect(),
            ..Default::default()
        };
        let (out, err, summary) = dump(&files, &opts);
        assert!(err.is_empty(), "{err}");
        assert!(
            out.contains(&format!("{} is empty.", index.display())),
            "{out}"
        );
        assert!(
            out.contains(&format!("{} is empty.", time_index.display())),
            "{out}"
        );
        assert_eq!(summary.problems, 0);
    }

    #[test]
    fn torn_tail_is_reported_as_invalid_bytes_and_gaps_as_non_consecutive() {
        let dir = tempfile::tempdir().unwrap();
        let mut torn = batch(2, &[b"c"]);
        torn.truncate(30);
        let log = write_log(
            dir.path(),
            0,
            &[batch(0, &[b"a", b"b\xff"]), batch(5, &[b"d"]), torn],
        );
        let opts = DumpOptions {
            print_data_log: true,
            ..Default::default()
        };
        let (out, err, summary) = dump(&[log.display().to_string()], &opts);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "Log starting offset: 0");
        assert!(
            lines[2].starts_with("baseOffset: 0 lastOffset: 1 count: 2 "),
            "{out}"
        );
        assert!(
            lines[3].ends_with("headerKeys: [] key: k payload: a"),
            "{out}"
        );
        assert!(lines[4].ends_with("key: k payload: b\u{fffd}"), "{out}");
        assert_eq!(
            lines.last().unwrap(),
            &"Found 30 invalid bytes at the end of 00000000000000000000.log"
        );
        assert!(err.contains("  1 is followed by 5"), "{err}");
        assert_eq!(summary.batches, 2);
        assert_eq!(summary.records, 3);
        assert_eq!(summary.problems, 2);
    }

    #[test]
    fn a_size_below_the_minimum_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut bad = batch(0, &[b"a"]);
        bad[8..12].copy_from_slice(&3i32.to_be_bytes());
        let log = write_log(dir.path(), 0, &[bad]);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = dump_log_segments(
            &[log.display().to_string()],
            &DumpOptions::default(),
            &mut out,
            &mut err,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("Found record size 3 smaller than minimum record overhead (14)"),
            "{e}"
        );
    }
}
