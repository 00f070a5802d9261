//! `kafkalog verify`: checks a partition folder the way a broker's `LogLoader` and Kafka's
//! `DumpLogSegments --verify-index-only` would, without writing anything: batch framing and CRCs
//! (`FileRecords::for_each_batch`), offsets across segments, `.index` / `.timeindex` entries
//! against the batches, `.txnindex` against the ABORT markers, and the checkpoints (log dir
//! offsets, `leader-epoch-checkpoint`, producer snapshots, `partition.metadata`) against the log.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::index::offset::{OffsetIndex, OffsetPosition};
use crate::index::time::{TimeIndex, TimestampOffset};
use crate::index::txn::{AbortedTxn, TransactionIndex};
use crate::index::{IndexEntry, MmapIndex};
use crate::log::checkpoint::{
    parse_topic_partition, OffsetCheckpointFile, PartitionMetadataFile,
    LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
};
use crate::log::epoch::{LeaderEpochFileCache, LEADER_EPOCH_CHECKPOINT_FILE};
use crate::log::producer_state::{offset_from_snapshot_name, read_snapshot};
use crate::record::batch::{Batch, DEFAULT_MAX_DECOMPRESSED_BYTES};
use crate::record::control::ControlRecordType;
use crate::record::file_records::{FileRecords, DEFAULT_MAX_BATCH_SIZE};
use crate::segment::offset_from_file_name;

/// Kafka's `LogCleanerManager` checkpoint: the partitions listed in it are compacted.
pub const CLEANER_OFFSET_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// One thing found wrong: the file, the byte position in it when there is one, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub position: Option<u64>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(p) => write!(f, "{} at byte {p}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// What was checked in one partition folder, and what was wrong.
#[derive(Debug, Default, Clone)]
pub struct VerifyReport {
    pub segments: usize,
    pub batches: u64,
    pub bytes: u64,
    /// Whether offset gaps were allowed (a compacted log: listed in the log dir's
    /// `cleaner-offset-checkpoint`, an internal `__` topic, or as asked).
    pub compacted: bool,
    pub problems: Vec<Problem>,
    /// What is worth saying but not wrong: an index file missing (a broker rebuilds it).
    pub notes: Vec<Problem>,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct VerifyOptions {
    /// Allow offset gaps between batches (a compacted topic) even when nothing says so.
    pub compacted: bool,
}

/// A batch as the index checks need it.
#[derive(Debug, Clone, Copy)]
struct BatchPos {
    position: u64,
    base: i64,
    last: i64,
    max_timestamp: i64,
}

/// An ABORT marker's transaction, as the segment holding the marker must index it.
#[derive(Debug, Clone, Copy)]
struct ExpectedAbort {
    producer_id: i64,
    /// None when the transaction may have begun before the first offset in the folder.
    first_offset: Option<i64>,
    /// Kafka indexes an aborted transaction only when it has data (`appendEndTxnMarker`): an
    /// entry is required when the folder holds its data, optional when the data may precede the
    /// folder's first offset, and needless (yet harmless) for a marker alone.
    entry_required: bool,
    marker_offset: i64,
    marker_position: u64,
}

#[derive(Default)]
struct Files {
    logs: BTreeMap<i64, PathBuf>,
    indexes: BTreeMap<i64, PathBuf>,
    time_indexes: BTreeMap<i64, PathBuf>,
    txn_indexes: BTreeMap<i64, PathBuf>,
    snapshots: BTreeMap<i64, PathBuf>,
    /// Segment-named entries that are not regular files (a FIFO would block a reader).
    irregular: Vec<PathBuf>,
    /// `*.log` files not named as segments, which a broker's loader fails on.
    misnamed_logs: Vec<PathBuf>,
}

fn list_files(dir: &Path) -> Result<Files> {
    let mut files = Files::default();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if crate::log::loader::is_misnamed_log_file(name) {
            files.misnamed_logs.push(path);
            continue;
        }
        let named = name.ends_with(".snapshot") || offset_from_file_name(name).is_some();
        if named && !entry.file_type().is_ok_and(|t| t.is_file()) {
            files.irregular.push(path);
            continue;
        }
        if name.ends_with(".snapshot") {
            if let Some(offset) = offset_from_snapshot_name(name) {
                files.snapshots.insert(offset, path);
            }
            continue;
        }
        let Some(base) = offset_from_file_name(name) else {
            continue;
        };
        // Only a segment's live files: `.deleted`, `.cleaned` and `.swap` are a broker's work
        // in progress, which its next start finishes or drops.
        let suffix = &name[20..];
        let map = match suffix {
            ".log" => &mut files.logs,
            ".index" => &mut files.indexes,
            ".timeindex" => &mut files.time_indexes,
            ".txnindex" => &mut files.txn_indexes,
            _ => continue,
        };
        map.insert(base, path);
    }
    Ok(files)
}

fn problem(file: &Path, position: Option<u64>, message: impl Into<String>) -> Problem {
    Problem {
        file: file.to_path_buf(),
        position,
        message: message.into(),
    }
}

/// An error as a problem: its own file and position when it has them.
fn problem_of(err: &Error, file: &Path, position: Option<u64>) -> Problem {
    let (file, position, message) = match err {
        Error::CorruptRecord { message, location } | Error::CorruptIndex { message, location } => (
            location.file.clone().unwrap_or_else(|| file.to_path_buf()),
            location.position.or(position),
            message.clone(),
        ),
        other => (file.to_path_buf(), position, other.to_string()),
    };
    Problem {
        file,
        position,
        message,
    }
}

/// The byte position of `<topic> <partition> ` in an offset checkpoint, for problem lines.
fn checkpoint_line_position(path: &Path, topic: &str, partition: i32) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let prefix = format!("{topic} {partition} ");
    let mut pos = 0u64;
    let mut found = None;
    for line in text.split_inclusive('\n') {
        if line.starts_with(&prefix) {
            found = Some(pos); // later lines win, as in Kafka's reader
        }
        pos += line.len() as u64;
    }
    found
}

/// The checkpoint offsets of one partition in its log dir: (file name, offset).
fn checkpoint_offsets(
    log_dir: &Path,
    topic: &str,
    partition: i32,
    problems: &mut Vec<Problem>,
) -> (Vec<(&'static str, i64)>, bool) {
    let mut out = Vec::new();
    let mut compacted = false;
    for name in [
        RECOVERY_POINT_CHECKPOINT_FILE,
        LOG_START_OFFSET_CHECKPOINT_FILE,
        REPLICATION_OFFSET_CHECKPOINT_FILE,
        CLEANER_OFFSET_CHECKPOINT_FILE,
    ] {
        let file = OffsetCheckpointFile::in_log_dir(log_dir, name);
        if !file.path().exists() {
            continue;
        }
        match file.read_lines() {
            Ok(lines) => {
                let key = (topic.to_string(), partition);
                let mine: Vec<i64> = lines
                    .iter()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, o)| *o)
                    .collect();
                if mine.len() > 1 {
                    problems.push(problem(file.path(), None, format!(
                        "{} lines for {topic}-{partition} (offsets {mine:?}): a broker takes the last",
                        mine.len())));
                }
                if let Some(&offset) = mine.last() {
                    if offset < 0 {
                        problems.push(problem(file.path(), None, format!(
                            "offset {offset} for {topic}-{partition}: no log has a negative offset")));
                    }
                    out.push((name, offset));
                    compacted |= name == CLEANER_OFFSET_CHECKPOINT_FILE;
                }
            }
            Err(e) => problems.push(problem_of(&e, file.path(), None)),
        }
    }
    (out, compacted)
}

/// What follows a producer snapshot that does not load, in verify's note.
const SNAPSHOT_REBUILT: &str = "; a broker deletes it (a WARN in its log) and rebuilds its \
    producers' state from the log when it loads the partition, as kafkalog's Log does";

/// Verifies one partition folder; `progress` hears the bytes of each segment file read, and
/// may stop the work by returning an error (an interrupt).
pub fn verify_partition(
    dir: &Path,
    options: VerifyOptions,
    progress: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<VerifyReport> {
    let files = list_files(dir)?;
    let mut report = VerifyReport::default();
    let problems = &mut report.problems;

    let topic_partition = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_topic_partition);
    let log_dir = dir.parent().unwrap_or(Path::new("."));
    let (checkpoints, listed_compacted) = match &topic_partition {
        Some((topic, partition)) => checkpoint_offsets(log_dir, topic, *partition, problems),
        None => (Vec::new(), false),
    };
    // As the loader decides it: gaps are problems unless something says the log is compacted,
    // a batch the cleaner rewrote included, so what the cleaner may leave (gaps, and batches
    // gone that a .txnindex or a producer snapshot names) waits for the end of the scan.
    let mut compacted = options.compacted
        || listed_compacted
        || crate::log::loader::is_compacted_internal_topic(dir);
    let mut unless_compacted = Vec::new();
    let clean_shutdown = crate::log::checkpoint::CleanShutdownFile::in_log_dir(log_dir).exists();
    let recovery_point = checkpoints
        .iter()
        .find(|(name, _)| *name == RECOVERY_POINT_CHECKPOINT_FILE)
        .map(|(_, offset)| *offset);

    for path in &files.misnamed_logs {
        problems.push(problem(path, None, crate::log::loader::MISNAMED_LOG_FILE));
    }
    for path in &files.irregular {
        problems.push(problem(
            path,
            None,
            "not a regular file where a segment file is expected",
        ));
    }
    for (base, path) in files
        .indexes
        .iter()
        .chain(&files.time_indexes)
        .chain(&files.txn_indexes)
    {
        if !files.logs.contains_key(base) {
            problems.push(problem(path, None, "an index without its .log segment"));
        }
    }

    // Producer snapshots first: their producers' last batches are looked for during the scan.
    let mut wanted: HashMap<(i64, i64), (PathBuf, u64)> = HashMap::new();
    for (&offset, path) in &files.snapshots {
        match read_snapshot(path) {
            Ok(entries) => {
                for e in entries {
                    let last = e.last_data_offset();
                    if last >= offset {
                        problems.push(problem(path, None, format!(
                            "producer {} has its last batch at offset {last}, not before the snapshot's offset {offset}",
                            e.producer_id)));
                    } else if last >= 0 {
                        wanted.insert((e.producer_id, last), (path.clone(), offset as u64));
                    }
                    if let Some(first) = e.current_txn_first_offset {
                        if first >= offset {
                            problems.push(problem(path, None, format!(
                                "producer {}'s open transaction starts at {first}, not before the snapshot's offset {offset}",
                                e.producer_id)));
                        }
                    }
                }
            }
            // A snapshot that does not parse or whose CRC fails is what Kafka's loader deletes
            // with a warning before it rebuilds the producers' state from the log (kafkalog's
            // `Log` too): the log is whole, so a note. One that cannot be read at all is not.
            Err(e @ Error::CorruptRecord { .. }) => {
                let mut found = problem_of(&e, path, None);
                found.message.push_str(SNAPSHOT_REBUILT);
                report.notes.push(found);
            }
            Err(e) => problems.push(problem_of(&e, path, None)),
        }
    }

    let epoch_path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    let epochs = if epoch_path.is_file() {
        match LeaderEpochFileCache::open_file(&epoch_path, true) {
            Ok(c) => Some(c),
            Err(e) => {
                problems.push(problem_of(&e, &epoch_path, None));
                None
            }
        }
    } else {
        None
    };
    let mut epochs_reported: HashSet<i32> = HashSet::new();

    let mut prev_last: Option<i64> = None;
    let mut prev_v2 = false;
    let mut first_offset: Option<i64> = None;
    let mut ongoing: HashMap<i64, i64> = HashMap::new();
    // Producers whose transaction may have begun before the first offset here.
    let mut seen_producers: HashSet<i64> = HashSet::new();
    let mut empty_log_end: Option<i64> = None;
    let mut scratch = Vec::new();

    for (&base, log_path) in &files.logs {
        report.segments += 1;
        let identity = segment_identity(log_path);
        let found_before = (problems.len(), unless_compacted.len(), report.notes.len());
        // A segment's indexes are trimmed to their entries when it rolls (and at a clean
        // shutdown): zeros after the entries are only ever the active segment's room.
        let active = files.logs.range(base + 1..).next().is_none();
        // The indexes are read before the log: a running broker (or writer) appends a batch to
        // the `.log` before its index entries, so every entry read first names a batch the scan
        // below finds, however far the log has grown meanwhile.
        let mut index_problems = Vec::new();
        let offset_entries = read_offset_index(&files, base, active, &mut index_problems);
        let time_entries = read_time_index(&files, base, active, &mut index_problems);
        let txn_entries = read_txn_index(&files, base, &mut index_problems);
        #[cfg(test)]
        tests::AFTER_INDEXES.with(|hook| hook.borrow_mut().as_mut().map(|f| f(log_path)));
        let records = match FileRecords::open(log_path, false) {
            Ok(r) => r,
            Err(e) => {
                if segment_identity(log_path) != identity {
                    report
                        .notes
                        .push(problem(log_path, None, CHANGED_WHILE_VERIFYING));
                } else {
                    problems.push(problem_of(&e, log_path, None));
                }
                continue;
            }
        };
        let size = records.size_in_bytes();
        report.bytes += size;
        if let Some(p) = prev_last {
            if base <= p {
                problems.push(problem(log_path, None, format!(
                    "segment base offset {base} is not above the previous segment's last offset {p}")));
            }
        }
        let mut batches: Vec<BatchPos> = Vec::new();
        let mut expected: Vec<ExpectedAbort> = Vec::new();
        let mut position = 0u64;
        let mut unreadable_tail: Option<(u64, Problem)> = None;
        // Where the invalid bytes at the end of this file begin, a torn write could have left
        // them (no whole batch whose CRC holds among them), and the problems found there from
        // that index on; reset by any batch read whole after them.
        let mut torn_from: Option<(u64, usize)> = None;
        while position < size {
            let mut next = position;
            let result = records.for_each_batch(
                position,
                size,
                DEFAULT_MAX_BATCH_SIZE,
                &mut |pos, batch| {
                    next = pos + batch.size_in_bytes() as u64;
                    torn_from = None;
                    report.batches += 1;
                    let last = batch.last_offset();
                    let (first, v2) = match batch {
                        Batch::V2(b) => {
                            compacted |= b.was_compacted();
                            (b.base_offset(), true)
                        }
                        // A legacy wrapper's inner offsets are known only once inflated.
                        Batch::Legacy(_) => (last, false),
                    };
                    first_offset.get_or_insert(first);
                    if first < base {
                        problems.push(problem(log_path, Some(pos), format!(
                            "batch at offsets {first}..{last} is below the segment's base offset {base}")));
                    }
                    if let Some(p) = prev_last {
                        if first <= p {
                            problems.push(problem(log_path, Some(pos), format!(
                                "offsets go back: batch at {first}..{last} follows offset {p}")));
                        } else if v2 && prev_v2 && first != p + 1 {
                            unless_compacted.push(problem(log_path, Some(pos), format!(
                                "offsets {}..{} are missing before this batch at {first} (only a compacted log has gaps; give --compacted if this topic is)",
                                p + 1, first - 1)));
                        }
                    }
                    prev_last = Some(prev_last.map_or(last, |p| p.max(last)));
                    prev_v2 = v2;
                    batches.push(BatchPos {
                        position: pos,
                        base: first,
                        last,
                        max_timestamp: batch.max_timestamp(),
                    });

                    // Every record framed, compressed batches inflated: a CRC holds over whatever
                    // a producer wrote, so a payload that does not inflate or whose records do not
                    // frame is found here, not by the first consumer.
                    // A v2 batch's records take offsets inside its range, each after the one
                    // before (readers hand them out as they are; a CRC holds over any order).
                    let mut prev_offset = first - 1;
                    let decoded = batch
                        .record_iter(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)
                        .and_then(|records| records.try_for_each_record(|r| {
                            if v2 && (r.offset <= prev_offset || r.offset > last) {
                                return Err(crate::error::Error::corrupt(format!(
                                    "record offsets out of order in the batch at {first}..{last}: offset {} after {prev_offset}",
                                    r.offset)));
                            }
                            prev_offset = r.offset;
                            Ok(())
                        }));
                    match decoded {
                        // Memory running out says nothing of the data: verification stops.
                        Err(e) if e.is_out_of_memory() => return Err(e),
                        Err(e) => problems.push(problem_of(&e, log_path, Some(pos))),
                        Ok(()) => {}
                    }

                    let epoch = batch.partition_leader_epoch();
                    if let Some(cache) = epochs.as_ref().filter(|c| !c.is_empty()) {
                        if v2 && epoch >= 0 && !epochs_reported.contains(&epoch) {
                            let known = cache.epoch_for_offset(first);
                            if known.is_some_and(|k| k != epoch) {
                                epochs_reported.insert(epoch);
                                problems.push(problem(log_path, Some(pos), format!(
                                    "batch at offset {first} has leader epoch {epoch}, but {} gives epoch {} from that offset",
                                    LEADER_EPOCH_CHECKPOINT_FILE, known.unwrap_or(-1))));
                            }
                        }
                    }

                    let pid = batch.producer_id();
                    if pid >= 0 {
                        wanted.remove(&(pid, last));
                        if batch.is_control() {
                            match batch.end_txn_marker() {
                                Ok(Some(marker)) => {
                                    let began = ongoing.remove(&pid);
                                    if marker.control_type == ControlRecordType::Abort {
                                        let known = began.is_some() || seen_producers.contains(&pid);
                                        expected.push(ExpectedAbort {
                                            producer_id: pid,
                                            first_offset: if known || first_offset == Some(0) {
                                                Some(began.unwrap_or(first))
                                            } else {
                                                None
                                            },
                                            entry_required: began.is_some(),
                                            marker_offset: first,
                                            marker_position: pos,
                                        });
                                    }
                                }
                                Ok(None) => {}
                                Err(e) => problems.push(problem_of(&e, log_path, Some(pos))),
                            }
                        } else if batch.is_transactional() {
                            ongoing.entry(pid).or_insert(first);
                        }
                        seen_producers.insert(pid);
                    }
                    Ok(true)
                },
            );
            match result {
                Ok(()) => break,
                Err(e) if e.is_out_of_memory() => return Err(e),
                Err(e) => {
                    let found = problem_of(&e, log_path, Some(next));
                    if records.holds_whole_batch_with_valid_crc(next, DEFAULT_MAX_BATCH_SIZE) {
                        torn_from = None;
                    } else if torn_from.is_none() {
                        torn_from = Some((next, problems.len()));
                    }
                    // Go on after a batch whose frame holds (a bad CRC, a bad record); a frame
                    // that does not leaves nothing after it to read.
                    match records.read_header(next, DEFAULT_MAX_BATCH_SIZE) {
                        Ok(Some(h)) if h.size > 0 && next + (h.size as u64) <= size => {
                            problems.push(found);
                            // Its header still says which offsets it held.
                            report.batches += 1;
                            batches.push(BatchPos {
                                position: next,
                                base: h.base_offset,
                                last: h.last_offset,
                                max_timestamp: h.max_timestamp,
                            });
                            prev_last =
                                Some(prev_last.map_or(h.last_offset, |p| p.max(h.last_offset)));
                            prev_v2 = h.magic >= 2;
                            first_offset.get_or_insert(h.base_offset);
                            position = next + h.size as u64;
                        }
                        _ => {
                            unreadable_tail = Some((next, found));
                            break;
                        }
                    }
                }
            }
        }
        #[cfg(test)]
        tests::AFTER_SCAN.with(|hook| hook.borrow_mut().as_mut().map(|f| f(log_path)));
        let next_base = files.logs.range(base + 1..).next().map(|(b, _)| *b);
        let mut grew = false;
        if let Some((at, found)) = unreadable_tail {
            let tail = size - at;
            // A running broker's (or writer's) batch being appended when the scan took the
            // file's size: the file has grown since.
            grew = active && std::fs::metadata(log_path).is_ok_and(|m| m.len() > size);
            if grew {
                report.notes.push(problem(log_path, Some(at), format!(
                    "the last {tail} bytes were still being written (the file grew while verify read it), so not checked")));
            } else {
                problems.push(found);
                if at < size {
                    problems.push(problem(
                        log_path,
                        Some(at),
                        format!("the last {tail} bytes of the file cannot be read as batches"),
                    ));
                }
            }
        }
        // A torn tail, as the loader tells one: the invalid bytes ending the last segment that
        // holds data, past the recovery point, with no clean-shutdown marker. What a crash
        // leaves and Kafka's recovery cuts on the broker's next start (kafkalog's `Log` too, on
        // open): a note, not damage. Anything the recovery point covers that it took is told by
        // the checkpoint check below.
        if let Some((at, first)) = torn_from.filter(|_| !grew) {
            let flushed = recovery_point.is_some_and(|point| next_base.is_some_and(|n| n <= point));
            let last_with_data = files
                .logs
                .range(base + 1..)
                .all(|(_, later)| std::fs::metadata(later).is_ok_and(|m| m.len() == 0));
            if !clean_shutdown && !flushed && last_with_data && first < problems.len() {
                let found: Vec<String> = problems.drain(first..).map(|p| p.message).collect();
                report.notes.push(problem(log_path, Some(at), format!(
                    "a torn tail, what a crash leaves: the last {} bytes ({}); Kafka's recovery cuts them when the broker next starts, as kafkalog's Log does on open",
                    size - at,
                    found.join("; "))));
            }
        }
        if batches.is_empty() && prev_last.is_none() {
            empty_log_end = Some(base);
        }
        let timed = batches
            .iter()
            .map(|b| b.max_timestamp)
            .max()
            .filter(|t| *t >= 0);
        let time_index_left_as_is = time_index_left_as_is(
            &files,
            base,
            next_base,
            timed,
            clean_shutdown,
            recovery_point,
        );
        for (indexes, suffix) in [
            (&files.indexes, "index"),
            (&files.time_indexes, "timeindex"),
        ] {
            let path = log_path.with_extension(suffix);
            if let (Some(problem_found), "timeindex") = (&time_index_left_as_is, suffix) {
                problems.push(problem(&path, None, problem_found.clone()));
            } else if !indexes.contains_key(&base) {
                report.notes.push(problem(
                    &path,
                    None,
                    "missing, so not checked: a broker rebuilds it from the segment when it \
                     loads the log",
                ));
            }
        }
        problems.append(&mut index_problems);
        let mut found = Vec::new();
        if let Some((path, entries)) = &offset_entries {
            check_offset_index(path, entries, &batches, &mut found);
        }
        push_capped(problems, found);
        let mut found = Vec::new();
        if let Some((path, entries)) = &time_entries {
            check_time_index(path, entries, &batches, &mut found);
        }
        push_capped(problems, found);
        // A writer appends an aborted transaction's entry after its marker: markers the scan
        // found look for it in the index as it is now (entries are only ever appended).
        let txn_entries = txn_entries.map(|before| {
            let mut ignored = Vec::new();
            match (before, read_txn_index(&files, base, &mut ignored)) {
                (Ok(before), Some(Ok(now))) if now.starts_with(&before) => Ok((before.len(), now)),
                (before, _) => before.map(|b| (b.len(), b)),
            }
        });
        // A running broker creates a segment's `.txnindex` with its first ABORT marker's entry:
        // one made after the folder was listed names markers this scan found, unchecked.
        if !files.txn_indexes.contains_key(&base) && log_path.with_extension("txnindex").is_file() {
            report.notes.push(problem(
                &log_path.with_extension("txnindex"),
                None,
                TXN_INDEX_CREATED_WHILE_VERIFYING,
            ));
        } else {
            check_txn_index(
                &files,
                base,
                txn_entries.as_ref(),
                log_path,
                &expected,
                problems,
                &mut unless_compacted,
            );
        }
        // A segment replaced or removed meanwhile (a running broker's cleaner swapping it, its
        // retention deleting it) may have been read half from each file: what was found in it
        // says nothing of either.
        if segment_identity(log_path) != identity {
            problems.truncate(found_before.0);
            unless_compacted.truncate(found_before.1);
            report.notes.truncate(found_before.2);
            report
                .notes
                .push(problem(log_path, None, CHANGED_WHILE_VERIFYING));
        }
        progress(size)?;
    }

    let log_end = prev_last.map_or(empty_log_end.unwrap_or(0), |l| l + 1);
    let log_start = first_offset.unwrap_or(log_end);

    if let Some((topic, partition)) = &topic_partition {
        for (name, offset) in checkpoints {
            if offset > log_end {
                let path = log_dir.join(name);
                let pos = checkpoint_line_position(&path, topic, *partition);
                problems.push(problem(&path, pos, format!(
                    "{topic}-{partition} is at offset {offset}, past the log end offset {log_end} of {}",
                    dir.display())));
            }
        }
    }

    if let Some(cache) = &epochs {
        for e in cache.entries() {
            if e.start_offset > log_end {
                problems.push(problem(
                    &epoch_path,
                    None,
                    format!(
                        "epoch {} starts at offset {}, past the log end offset {log_end}",
                        e.epoch, e.start_offset
                    ),
                ));
            }
        }
    }

    for (&offset, path) in &files.snapshots {
        if offset > log_end {
            problems.push(problem(
                path,
                None,
                format!(
                    "a producer snapshot at offset {offset}, past the log end offset {log_end}"
                ),
            ));
        }
    }
    let mut missing: Vec<_> = wanted
        .into_iter()
        .filter(|((_, last), _)| *last >= log_start && *last < log_end)
        .collect();
    missing.sort_by_key(|((pid, last), _)| (*last, *pid));
    // The snapshot was taken before the cleaner ran: it keeps only each producer's latest batch.
    for ((pid, last), (path, _)) in missing {
        unless_compacted.push(problem(&path, None, format!(
            "producer {pid}'s last batch ends at offset {last}, but no batch of that producer ends there in the log")));
    }

    let metadata = PartitionMetadataFile::in_dir(dir);
    if metadata.exists() {
        if let Err(e) = metadata.read() {
            problems.push(problem_of(&e, metadata.path(), None));
        }
    }
    if !compacted {
        problems.extend(unless_compacted);
    }
    report.compacted = compacted;
    Ok(report)
}

/// Kafka's `LogLoader` rebuilds the indexes of the segments it recovers (all those from the
/// recovery point on, after an unclean shutdown) and of a segment missing its `.index`; any
/// other segment missing its `.timeindex` gets an empty one (`LogSegment.sanityCheck`), which
/// stays empty. Its ListOffsets then skips the segment's timestamps (and its retention goes by
/// the file's mtime). `Some(problem)` where that would happen to a segment with timestamps.
fn time_index_left_as_is(
    files: &Files,
    base: i64,
    next_base: Option<i64>,
    max_timestamp: Option<i64>,
    clean_shutdown: bool,
    recovery_point: Option<i64>,
) -> Option<String> {
    let max_timestamp = max_timestamp?;
    let recovered = !clean_shutdown
        && next_base.is_none_or(|next| recovery_point.is_none_or(|point| next > point));
    if recovered || !files.indexes.contains_key(&base) {
        return None;
    }
    let how = match files.time_indexes.get(&base) {
        None => "missing",
        Some(path)
            if next_base.is_some() && std::fs::metadata(path).is_ok_and(|m| m.len() == 0) =>
        {
            "empty"
        }
        Some(_) => return None,
    };
    let why = match clean_shutdown {
        true => "the broker stopped cleanly",
        false => "the segment is below the recovery point",
    };
    Some(format!(
        "{how}, though the segment's batches have timestamps up to {max_timestamp}: {why}, so a \
         broker loading the log keeps it empty rather than rebuilding it, and its ListOffsets \
         then finds no offset for these timestamps (its retention goes by the file's mtime); \
         delete the segment's .index too and the broker rebuilds both"
    ))
}

/// The batch starting at `position`, if one does.
/// Index entries listed one by one for a file before the rest are counted: one damaged batch
/// can make every later entry of its index disagree, and hundreds of lines hide the cause.
const LISTED_PER_INDEX: usize = 10;

/// One index file's problems, the first `LISTED_PER_INDEX` of them and a count of the rest.
fn push_capped(problems: &mut Vec<Problem>, mut found: Vec<Problem>) {
    if found.len() > LISTED_PER_INDEX {
        let more = found.len() - LISTED_PER_INDEX;
        found.truncate(LISTED_PER_INDEX);
        let file = found[0].file.clone();
        found.push(problem(
            &file,
            None,
            format!("and {more} more entries that disagree with the log (the first {LISTED_PER_INDEX} are listed)"),
        ));
    }
    problems.extend(found);
}

fn batch_at(batches: &[BatchPos], position: u64) -> Option<usize> {
    batches.binary_search_by_key(&position, |b| b.position).ok()
}

/// The entries `verify` checks in a segment's `.index` or `.timeindex` (opened with `open(max
/// size)`): a length that is not whole entries is reported, and the zero-filled entries
/// (`is_zero`) a running broker's pre-allocated active index has past its real ones are left
/// out. `None`, reported, when the file cannot be read.
fn index_entries<E: IndexEntry, I: Deref<Target = MmapIndex<E>>>(
    path: &Path,
    open: impl FnOnce(usize) -> Result<I>,
    is_zero: impl Fn(&E) -> bool,
    active: bool,
    problems: &mut Vec<Problem>,
) -> Option<Vec<E>> {
    let size = E::SIZE as u64;
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) => {
            problems.push(problem_of(&Error::io(path, e), path, None));
            return None;
        }
    };
    if len % size != 0 {
        problems.push(problem(
            path,
            Some(len - len % size),
            format!("{len} bytes, not a whole number of {size}-byte entries"),
        ));
    }
    let index = match open((len as usize).max(E::SIZE)) {
        Ok(i) => i,
        Err(e) => {
            problems.push(problem_of(&e, path, None));
            return None;
        }
    };
    let mut entries: Vec<E> = (0..index.entries())
        .filter_map(|n| index.entry(n).ok())
        .collect();
    // Down to the first entry: an index with no entry written yet is all zeros when its broker
    // has not trimmed it (Kafka's sanity check passes it). A real first entry that happens to be
    // zero is dropped with them, losing only a check it would pass. Only the active segment's
    // index has such room: any other's was trimmed when its segment rolled, so zeros there are
    // entries lost (a zero-filled file; Kafka's `--verify-index-only` reports them too).
    let zeros = entries.iter().rev().take_while(|e| is_zero(e)).count();
    let kept = entries.len() - zeros;
    if zeros > 0 && !active {
        problems.push(problem(
            path,
            Some(kept as u64 * size),
            format!(
                "entries {kept}..{} are zeros, in the index of a segment that is not the last \
                 (trimmed to its entries when the segment rolled): zero-filled, its entries \
                 lost (a broker's recovery rebuilds it)",
                entries.len()
            ),
        ));
    }
    entries.truncate(kept);
    Some(entries)
}

/// What a segment's `.index` holds, read before its log (see [`verify_partition`]); None
/// when it has none (a broker rebuilds it) or it cannot be read (reported).
fn read_offset_index(
    files: &Files,
    base: i64,
    active: bool,
    problems: &mut Vec<Problem>,
) -> Option<(PathBuf, Vec<OffsetPosition>)> {
    let path = files.indexes.get(&base)?;
    let open = |max_size| OffsetIndex::open(path, base, max_size, false);
    let zero = |e: &OffsetPosition| e.offset == base && e.position == 0;
    index_entries(path, open, zero, active, problems).map(|e| (path.clone(), e))
}

/// [`read_offset_index`] for the `.timeindex`.
fn read_time_index(
    files: &Files,
    base: i64,
    active: bool,
    problems: &mut Vec<Problem>,
) -> Option<(PathBuf, Vec<TimestampOffset>)> {
    let path = files.time_indexes.get(&base)?;
    let open = |max_size| TimeIndex::open(path, base, max_size, false);
    let zero = |e: &TimestampOffset| e.timestamp == 0 && e.offset == base;
    index_entries(path, open, zero, active, problems).map(|e| (path.clone(), e))
}

/// [`read_offset_index`] for the `.txnindex`: `Some(Err(()))` when it cannot be read.
fn read_txn_index(
    files: &Files,
    base: i64,
    problems: &mut Vec<Problem>,
) -> Option<std::result::Result<Vec<AbortedTxn>, ()>> {
    let path = files.txn_indexes.get(&base)?;
    Some(
        TransactionIndex::open(path, base, false)
            .and_then(|i| i.sanity_check().and_then(|()| i.all_aborted_txns()))
            .map_err(|e| problems.push(problem_of(&e, path, None))),
    )
}

/// A segment's files as the file system names them now (device and inode, or absent), to see
/// whether any was replaced or removed while it was checked.
fn segment_identity(log_path: &Path) -> [Option<(u64, u64)>; 4] {
    use std::os::unix::fs::MetadataExt;
    ["log", "index", "timeindex", "txnindex"].map(|suffix| {
        std::fs::symlink_metadata(log_path.with_extension(suffix))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    })
}

/// The note for a `.txnindex` created after verify listed its folder.
const TXN_INDEX_CREATED_WHILE_VERIFYING: &str = "created while verify read the folder (a running \
    broker's first aborted transaction in the segment), so not checked";

/// The note for a segment whose files changed while it was checked.
const CHANGED_WHILE_VERIFYING: &str = "changed while verify read it (a file replaced, removed \
    or created: a running broker's log cleaner, retention or transactions), so not checked";

fn check_offset_index(
    path: &Path,
    entries: &[OffsetPosition],
    batches: &[BatchPos],
    problems: &mut Vec<Problem>,
) {
    let segment_last = batches.last().map(|b| b.last);
    let mut prev: Option<(i64, i32)> = None;
    for (n, e) in entries.iter().enumerate() {
        let at = Some(n as u64 * 8);
        if let Some((po, pp)) = prev {
            if e.offset <= po || e.position <= pp {
                problems.push(problem(path, at, format!(
                    "entry {n} (offset {}, position {}) does not follow entry {} (offset {po}, position {pp})",
                    e.offset, e.position, n - 1)));
                prev = Some((e.offset, e.position));
                continue;
            }
        }
        prev = Some((e.offset, e.position));
        let Some(i) = batch_at(batches, e.position as u64) else {
            problems.push(problem(
                path,
                at,
                format!(
                    "entry {n} (offset {}) points at byte {} of the log, where no batch starts",
                    e.offset, e.position
                ),
            ));
            continue;
        };
        let before = i.checked_sub(1).map(|j| batches[j].last);
        if before.is_some_and(|b| b >= e.offset) || segment_last.is_some_and(|l| e.offset > l) {
            let b = batches[i];
            problems.push(problem(
                path,
                at,
                format!(
                "entry {n} gives offset {} at byte {}, but the batch there holds offsets {}..{}",
                e.offset, e.position, b.base, b.last),
            ));
        }
    }
}

fn check_time_index(
    path: &Path,
    entries: &[TimestampOffset],
    batches: &[BatchPos],
    problems: &mut Vec<Problem>,
) {
    let mut prev: Option<(i64, i64)> = None;
    for (n, e) in entries.iter().enumerate() {
        let at = Some(n as u64 * 12);
        if let Some((pt, po)) = prev {
            if e.timestamp < pt || e.offset < po {
                problems.push(problem(path, at, format!(
                    "entry {n} (timestamp {}, offset {}) goes back from entry {} (timestamp {pt}, offset {po})",
                    e.timestamp, e.offset, n - 1)));
            }
        }
        prev = Some((e.timestamp, e.offset));
        let i = batches.partition_point(|b| b.last < e.offset);
        match batches.get(i) {
            Some(b) if b.base <= e.offset => {
                if b.max_timestamp != e.timestamp {
                    problems.push(problem(path, at, format!(
                        "entry {n} gives timestamp {} for offset {}, but the batch holding it (at byte {}) has max timestamp {}",
                        e.timestamp, e.offset, b.position, b.max_timestamp)));
                }
            }
            _ => problems.push(problem(
                path,
                at,
                format!(
                "entry {n} (timestamp {}) points at offset {}, which no batch of the segment holds",
                e.timestamp, e.offset),
            )),
        }
    }
}

fn check_txn_index(
    files: &Files,
    base: i64,
    entries: Option<&std::result::Result<(usize, Vec<AbortedTxn>), ()>>,
    log_path: &Path,
    expected: &[ExpectedAbort],
    problems: &mut Vec<Problem>,
    unless_compacted: &mut Vec<Problem>,
) {
    let (Some(path), Some(entries)) = (files.txn_indexes.get(&base), entries) else {
        for x in expected.iter().filter(|x| x.entry_required) {
            problems.push(problem(log_path, Some(x.marker_position), format!(
                "ABORT marker of producer {} at offset {} has no .txnindex entry (the segment has no .txnindex)",
                x.producer_id, x.marker_offset)));
        }
        return;
    };
    // `entries` as read before the scan (`read_before` of them), then as it is after.
    let Ok((read_before, entries)) = entries else {
        return; // reported when read
    };
    let mut matched = vec![false; expected.len()];
    for (n, t) in entries.iter().enumerate() {
        let appended_meanwhile = n >= *read_before;
        let at = Some((n * AbortedTxn::SIZE) as u64);
        if t.first_offset > t.last_offset {
            problems.push(problem(
                path,
                at,
                format!(
                    "entry {n}: first offset {} is after last offset {}",
                    t.first_offset, t.last_offset
                ),
            ));
        }
        let found = expected
            .iter()
            .position(|x| x.producer_id == t.producer_id && x.marker_offset == t.last_offset);
        match found {
            // Its marker came after the scan.
            None if appended_meanwhile => {}
            None => problems.push(problem(path, at, format!(
                "entry {n}: producer {} aborted at offset {}, but there is no ABORT marker of that producer there in the segment",
                t.producer_id, t.last_offset))),
            Some(i) => {
                matched[i] = true;
                if let Some(first) = expected[i].first_offset {
                    if first != t.first_offset {
                        // The cleaner removes an aborted transaction's records and keeps its
                        // entry until the marker goes: its first records may be gone.
                        let found = match first > t.first_offset {
                            true => &mut *unless_compacted,
                            false => &mut *problems,
                        };
                        found.push(problem(path, at, format!(
                            "entry {n}: producer {}'s aborted transaction starts at offset {first} in the log, not {}",
                            t.producer_id, t.first_offset)));
                    }
                }
            }
        }
    }
    for (x, m) in expected.iter().zip(matched) {
        if !m && x.entry_required {
            problems.push(problem(
                log_path,
                Some(x.marker_position),
                format!(
                    "ABORT marker of producer {} at offset {} has no entry in {}",
                    x.producer_id,
                    x.marker_offset,
                    path.display()
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::log::{Log, LogOptions};
    use crate::record::builder::{end_txn_marker_batch, BatchBuilder, BatchOptions};
    use crate::record::control::EndTransactionMarker;

    type SegmentHook = Box<dyn FnMut(&Path)>;

    thread_local! {
        /// Called with a segment's `.log` once its indexes are read, before the log is opened.
        pub(super) static AFTER_INDEXES: std::cell::RefCell<Option<SegmentHook>> =
            const { std::cell::RefCell::new(None) };
        /// Called with a segment's `.log` once it is scanned, before its tail is judged.
        pub(super) static AFTER_SCAN: std::cell::RefCell<Option<SegmentHook>> =
            const { std::cell::RefCell::new(None) };
    }

    /// Runs `verify` with `hook` set on `stage` for this thread.
    fn verify_with(
        dir: &Path,
        stage: &'static std::thread::LocalKey<std::cell::RefCell<Option<SegmentHook>>>,
        hook: impl FnMut(&Path) + 'static,
    ) -> VerifyReport {
        stage.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
        let report = verify_partition(dir, VerifyOptions::default(), &mut |_| Ok(()));
        stage.with(|h| *h.borrow_mut() = None);
        report.unwrap()
    }

    fn batch(count: i64, ts: i64, pid: i64, seq: i32, txn: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions {
            producer_id: pid,
            producer_epoch: if pid >= 0 { 0 } else { -1 },
            base_sequence: if pid >= 0 { seq } else { -1 },
            is_transactional: txn,
            ..Default::default()
        });
        for i in 0..count {
            let v = format!("value-{ts}-{i}");
            b.append(ts + i, Some(b"k"), Some(v.as_bytes()), &[])
                .unwrap();
        }
        b.build().unwrap()
    }

    fn marker(pid: i64, control_type: ControlRecordType) -> Vec<u8> {
        let m = EndTransactionMarker {
            control_type,
            coordinator_epoch: 0,
        };
        end_txn_marker_batch(0, 5_000, 0, pid, 0, m).unwrap()
    }

    /// A data dir with `t-0`: several segments, an idempotent producer, a committed and an
    /// aborted transaction, closed cleanly (indexes trimmed, checkpoints and snapshots written).
    pub(crate) fn sound_log() -> (tempfile::TempDir, PathBuf) {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("t-0");
        let mut config = LogConfig::default();
        config.set("segment.bytes", "1024").unwrap();
        config.set("index.interval.bytes", "128").unwrap();
        let log = Log::open(
            &dir,
            LogOptions {
                config,
                read_only: false,
                create: true,
                ..Default::default()
            },
        )
        .unwrap();
        let mut seq = 0;
        for round in 0..6 {
            let ts = 1_000 + round * 100;
            log.append_as_leader(&batch(5, ts, -1, 0, false), 0)
                .unwrap();
            log.append_as_leader(&batch(3, ts + 10, 9, seq, false), 0)
                .unwrap();
            seq += 3;
            log.append_as_leader(&batch(2, ts + 20, 7, 2 * round as i32, true), 0)
                .unwrap();
            let kind = if round % 2 == 0 {
                ControlRecordType::Abort
            } else {
                ControlRecordType::Commit
            };
            log.append_txn_marker(&marker(7, kind), 0).unwrap();
        }
        log.close().unwrap();
        (data, dir)
    }

    /// A writable, empty `t-0` in a data dir of its own.
    fn new_log() -> (tempfile::TempDir, PathBuf, Log) {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("t-0");
        let options = LogOptions {
            read_only: false,
            create: true,
            ..Default::default()
        };
        let log = Log::open(&dir, options).unwrap();
        (data, dir, log)
    }

    fn verify(dir: &Path) -> VerifyReport {
        verify_partition(dir, VerifyOptions::default(), &mut |_| Ok(())).unwrap()
    }

    fn snapshot_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out: Vec<_> = walk(dir)
            .into_iter()
            .map(|p| {
                let b = std::fs::read(&p).unwrap();
                (p, b)
            })
            .collect();
        out.sort();
        out
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }

    fn segment_logs(dir: &Path) -> Vec<PathBuf> {
        let mut logs: Vec<_> = walk(dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        logs
    }

    #[test]
    fn a_sound_log_has_no_problems_and_nothing_is_written() {
        let (data, dir) = sound_log();
        let before = snapshot_of(data.path());
        let r = verify(&dir);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert!(r.segments > 2, "{} segments", r.segments);
        assert_eq!(r.batches, 24);
        assert!(!r.compacted);
        assert_eq!(before, snapshot_of(data.path()));
        // Every check had something to check.
        let p = |s| dir.join(format!("{:020}.{s}", 0));
        assert!(p("txnindex").exists() || segment_logs(&dir).len() > 1);
        assert!(dir.join(LEADER_EPOCH_CHECKPOINT_FILE).exists());
        assert!(data.path().join(RECOVERY_POINT_CHECKPOINT_FILE).exists());
    }

    /// The first segment of `dir`: its path, its bytes, and the size of its first batch.
    fn first_segment(dir: &Path) -> (PathBuf, Vec<u8>, usize) {
        let log = segment_logs(dir).swap_remove(0);
        let bytes = std::fs::read(&log).unwrap();
        let first = Batch::parse(&bytes).unwrap().size_in_bytes();
        (log, bytes, first)
    }

    #[test]
    fn a_bad_crc_is_reported_where_it_is_and_the_scan_goes_on() {
        let (_data, dir) = sound_log();
        let (log, mut bytes, first) = first_segment(&dir);
        let log = &log;
        // A value byte of the second batch.
        let second_end = first + Batch::parse(&bytes[first..]).unwrap().size_in_bytes();
        bytes[second_end - 2] ^= 0xff;
        std::fs::write(log, &bytes).unwrap();
        let r = verify(&dir);
        assert_eq!(r.batches, 24, "{:?}", r.problems);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        let p = &r.problems[0];
        assert_eq!(&p.file, log);
        assert_eq!(p.position, Some(first as u64));
        assert!(
            p.message.contains("CRC") || p.message.contains("crc"),
            "{p}"
        );
        assert!(p.to_string().contains(&format!("at byte {first}")));
    }

    /// A checkpoint with two lines for the partition (a broker takes the last: 50 records
    /// hidden behind a log start of 50) or a negative offset: reported, where verify said sound
    /// (a black-box tester).
    #[test]
    fn contradicting_or_negative_checkpoint_lines_are_reported() {
        let (data, dir) = sound_log();
        let write = |name: &str, text: &str| std::fs::write(data.path().join(name), text).unwrap();
        write(LOG_START_OFFSET_CHECKPOINT_FILE, "0\n2\nt 0 0\nt 0 3\n");
        write(RECOVERY_POINT_CHECKPOINT_FILE, "0\n1\nt 0 -5\n");
        let r = verify(&dir);
        let said = |what: &str| r.problems.iter().any(|p| p.message.contains(what));
        assert!(said("2 lines for t-0 (offsets [0, 3])"), "{:?}", r.problems);
        assert!(said("offset -5 for t-0"), "{:?}", r.problems);
    }

    /// Records whose offset deltas go back inside a batch whose header and CRC hold: readers
    /// hand them out as they are (offset 2 before 1), so verify reports them (it said sound, a
    /// black-box tester).
    #[test]
    fn record_offsets_out_of_order_in_a_batch_are_reported() {
        let (_data, dir) = sound_log();
        let (log, mut bytes, first) = first_segment(&dir);
        // The first batch's records are small: each length, timestamp delta and offset delta
        // is one varint byte, the offset delta two bytes after the length.
        let mut at = crate::record::batch::RECORD_BATCH_OVERHEAD;
        let mut delta_bytes = Vec::new();
        while at < first {
            delta_bytes.push(at + 3);
            at += 1 + (bytes[at] >> 1) as usize;
        }
        assert_eq!(delta_bytes.len(), 5);
        assert_eq!((bytes[delta_bytes[1]], bytes[delta_bytes[2]]), (2, 4));
        bytes.swap(delta_bytes[1], delta_bytes[2]);
        let crc = crate::checksum::crc32c(&bytes[21..first]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        std::fs::write(&log, &bytes).unwrap();
        let r = verify(&dir);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(
            r.problems[0]
                .message
                .contains("record offsets out of order"),
            "{}",
            r.problems[0]
        );
    }

    #[test]
    fn a_batch_whose_crc_holds_but_whose_records_do_not_decode_is_reported() {
        let (_data, dir) = sound_log();
        let (log, mut bytes, first) = first_segment(&dir);
        // The first batch marked gzip over its plain records, its CRC written anew: a producer's
        // bug no CRC check sees.
        bytes[22] |= 1;
        let crc = crate::checksum::crc32c(&bytes[21..first]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        std::fs::write(&log, &bytes).unwrap();
        let r = verify(&dir);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert_eq!(r.problems[0].position, Some(0), "{}", r.problems[0]);
    }

    /// A crash's torn tail that took batches the recovery point covers: the tail itself is a
    /// note (Kafka's recovery cuts it), what it took a problem (the checkpoints past the end).
    #[test]
    fn a_torn_tail_is_a_note_and_the_flushed_offsets_it_took_a_problem() {
        let (_data, dir) = sound_log();
        let logs = segment_logs(&dir);
        let log = logs.last().unwrap();
        let len = std::fs::metadata(log).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(log).unwrap();
        f.set_len(len - 5).unwrap();
        let r = verify(&dir);
        assert!(
            r.notes.iter().any(|n| &n.file == log
                && n.position.is_some()
                && n.message.starts_with("a torn tail, what a crash leaves")),
            "{:?}",
            r.notes
        );
        assert!(
            r.problems
                .iter()
                .any(|p| p.message.contains("past the log end offset")),
            "{:?}",
            r.problems
        );
    }

    /// A writer appending while verify reads (a running broker's active segment): Kafka writes
    /// a batch to the `.log` before its index entries, so whichever of the log and the indexes
    /// verify read first, entries past what it scanned would look like damage.
    #[test]
    fn a_writer_appending_meanwhile_is_not_damage() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("t-0");
        let mut config = LogConfig::default();
        config.set("index.interval.bytes", "1").unwrap();
        let options = LogOptions {
            config,
            read_only: false,
            create: true,
            ..Default::default()
        };
        let log = std::rc::Rc::new(Log::open(&dir, options).unwrap());
        let round = std::rc::Rc::new(std::cell::Cell::new(0i64));
        let append = {
            let (log, round) = (log.clone(), round.clone());
            move |_: &Path| {
                // Indexed batches with later timestamps, and an aborted transaction: entries in
                // all three indexes.
                let r = round.get() + 1;
                round.set(r);
                let ts = 1_000 * r;
                log.append_as_leader(&batch(3, ts, -1, 0, false), 0)
                    .unwrap();
                log.append_as_leader(&batch(2, ts + 10, 7, 2 * (r as i32 - 1), true), 0)
                    .unwrap();
                log.append_txn_marker(&marker(7, ControlRecordType::Abort), 0)
                    .unwrap();
            }
        };
        let first = append.clone();
        first(&dir);
        assert!(dir.join("00000000000000000000.txnindex").exists());
        let before = verify(&dir);
        assert!(before.problems.is_empty(), "{:?}", before.problems);

        for stage in [&AFTER_INDEXES, &AFTER_SCAN] {
            let r = verify_with(&dir, stage, append.clone());
            assert!(r.problems.is_empty(), "{:?}", r.problems);
            assert!(r.notes.is_empty(), "{:?}", r.notes);
        }
        assert_eq!(round.get(), 3, "both hooks ran");
        let after = verify(&dir);
        assert!(after.problems.is_empty(), "{:?}", after.problems);
        assert_eq!(after.batches, 9, "every batch appended was there to check");
    }

    /// A running broker's first aborted transaction in its active segment, written after verify
    /// listed the folder: the marker is in the log, its `.txnindex` made since. A note, not "no
    /// .txnindex entry" (a broker test saw it under load).
    #[test]
    fn a_txn_index_created_after_the_listing_is_a_note() {
        let (_data, dir, log) = new_log();
        let log = std::rc::Rc::new(log);
        log.append_as_leader(&batch(3, 1_000, -1, 0, false), 0)
            .unwrap();
        log.roll().unwrap();
        log.append_as_leader(&batch(3, 2_000, -1, 0, false), 0)
            .unwrap();
        let active = segment_logs(&dir).pop().unwrap();
        assert!(!active.with_extension("txnindex").exists());
        let first = segment_logs(&dir)[0].clone();
        let r = verify_with(&dir, &AFTER_SCAN, {
            let log = log.clone();
            move |at| {
                if at == first {
                    log.append_as_leader(&batch(2, 3_000, 7, 0, true), 0)
                        .unwrap();
                    log.append_txn_marker(&marker(7, ControlRecordType::Abort), 0)
                        .unwrap();
                }
            }
        });
        assert!(active.with_extension("txnindex").exists());
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert!(
            r.notes
                .iter()
                .any(|n| n.file == active.with_extension("txnindex")
                    && n.message
                        .starts_with("created while verify read the folder")),
            "{:?}",
            r.notes
        );
        assert!(verify(&dir).problems.is_empty());
    }

    /// The cleaner swapping a segment for its cleaned copy, or retention deleting it, while
    /// verify reads it: what verify found there is left out with a note.
    #[test]
    fn a_segment_replaced_or_removed_meanwhile_is_a_note_not_damage() {
        let (_data, dir) = sound_log();
        let (log, mut bytes, first) = first_segment(&dir);
        // The replacement is damaged: found, it would be a CRC problem.
        bytes[first / 2] ^= 0xff;
        let replaced = verify_with(&dir, &AFTER_INDEXES, {
            let log = log.clone();
            move |at| {
                if at == log {
                    let tmp = log.with_extension("log.cleaned");
                    std::fs::write(&tmp, &bytes).unwrap();
                    std::fs::rename(&tmp, &log).unwrap();
                }
            }
        });
        assert!(replaced.problems.is_empty(), "{:?}", replaced.problems);
        assert_eq!(replaced.notes.len(), 1, "{:?}", replaced.notes);
        assert_eq!(replaced.notes[0].file, log);
        assert!(replaced.notes[0]
            .message
            .starts_with("changed while verify read it"));
        // Found again, the damage is a problem.
        assert_eq!(verify(&dir).problems.len(), 1);

        let removed = verify_with(&dir, &AFTER_INDEXES, {
            let log = log.clone();
            move |at| {
                if at == log {
                    std::fs::rename(&log, log.with_extension("log.deleted")).unwrap();
                }
            }
        });
        assert!(removed.problems.is_empty(), "{:?}", removed.problems);
        assert_eq!(removed.notes.len(), 1, "{:?}", removed.notes);
        assert!(removed.notes[0]
            .message
            .starts_with("changed while verify read it"));
    }

    /// A batch half written when verify took the file's size: the file has grown since.
    #[test]
    fn a_tail_still_being_written_is_a_note_a_torn_one_a_problem() {
        let (_data, dir) = sound_log();
        let log = segment_logs(&dir).pop().unwrap();
        let next = batch(4, 9_000, -1, 0, false);
        let (head, rest) = next.split_at(next.len() / 2);
        let append = |path: &Path, bytes: &[u8]| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
            f.write_all(bytes).unwrap();
        };
        append(&log, head);
        // Past the recovery point, without a clean-shutdown marker: what a crash leaves.
        let torn = verify(&dir);
        assert!(torn.problems.is_empty(), "{:?}", torn.problems);
        assert_eq!(torn.notes.len(), 1, "{:?}", torn.notes);
        assert!(torn.notes[0].message.starts_with("a torn tail"));
        assert!(torn.notes[0].message.contains("exceeds the"));
        // Beside the marker a broker leaves when it stops cleanly, the same bytes are damage.
        let marker = crate::log::checkpoint::CleanShutdownFile::in_log_dir(dir.parent().unwrap());
        std::fs::write(marker.path(), b"{\"version\":0,\"brokerEpoch\":1}").unwrap();
        let stopped = verify(&dir);
        assert_eq!(stopped.problems.len(), 2, "{:?}", stopped.problems);
        assert!(stopped.problems[0].message.contains("exceeds the"));
        assert!(stopped.problems[1]
            .message
            .contains("cannot be read as batches"));
        std::fs::remove_file(marker.path()).unwrap();

        let rest = rest.to_vec();
        let growing = verify_with(&dir, &AFTER_SCAN, move |at| append(at, &rest));
        assert!(growing.problems.is_empty(), "{:?}", growing.problems);
        assert_eq!(growing.notes.len(), 1, "{:?}", growing.notes);
        assert!(growing.notes[0].message.contains("still being written"));
    }

    /// The last batch whole in length but not in content (a crash before its pages reached the
    /// disk): its CRC fails, a torn tail as the loader tells one. A whole batch whose CRC holds
    /// at the end (a magic above 2, which the CRC does not cover) was written whole: damage.
    #[test]
    fn a_last_batch_failing_its_crc_is_a_torn_tail_one_whose_crc_holds_is_damage() {
        let (_data, dir) = sound_log();
        let log = segment_logs(&dir).pop().unwrap();
        let sound = std::fs::read(&log).unwrap();
        // The next batch as a leader writes it, at the log end offset (66).
        let mut next = batch(4, 9_000, -1, 0, false);
        next[..8].copy_from_slice(&66i64.to_be_bytes());
        let mut zeroed = next.clone();
        let n = zeroed.len();
        zeroed[n - 8..].fill(0);
        std::fs::write(&log, [&sound[..], &zeroed[..]].concat()).unwrap();
        let torn = verify(&dir);
        assert!(torn.problems.is_empty(), "{:?}", torn.problems);
        assert_eq!(torn.notes.len(), 1, "{:?}", torn.notes);
        assert_eq!(torn.notes[0].position, Some(sound.len() as u64));

        let mut magic3 = next.clone();
        magic3[crate::record::batch::MAGIC_OFFSET] = 3;
        std::fs::write(&log, [&sound[..], &magic3[..]].concat()).unwrap();
        let refused = verify(&dir);
        assert!(
            refused
                .problems
                .iter()
                .any(|p| p.file == log && p.position == Some(sound.len() as u64)),
            "{:?}",
            refused.problems
        );
        assert!(refused.notes.is_empty(), "{:?}", refused.notes);
    }

    /// A torn end of a segment with data after it is no crash's leftover.
    #[test]
    fn a_torn_end_of_a_segment_before_the_last_is_damage() {
        let (_data, dir) = sound_log();
        let logs = segment_logs(&dir);
        assert!(logs.len() >= 2, "the test needs two segments");
        let len = std::fs::metadata(&logs[0]).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&logs[0])
            .unwrap();
        f.set_len(len - 5).unwrap();
        let r = verify(&dir);
        assert!(
            r.problems.iter().any(|p| p.file == logs[0]),
            "{:?}",
            r.problems
        );
        assert!(
            r.notes
                .iter()
                .all(|n| !n.message.starts_with("a torn tail")),
            "{:?}",
            r.notes
        );
    }

    /// A producer snapshot whose CRC fails (a 2.8 broker rewrote one in place without cutting
    /// it short): Kafka's loader deletes it with a WARN and rebuilds the state from the log, so
    /// verify notes it; the log itself is sound.
    #[test]
    fn a_producer_snapshot_that_does_not_load_is_a_note() {
        let (_data, dir) = sound_log();
        let snapshot = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "snapshot"))
            .expect("a closed log leaves a producer snapshot");
        let mut bytes = std::fs::read(&snapshot).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&snapshot, &bytes).unwrap();
        let r = verify(&dir);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert_eq!(r.notes[0].file, snapshot);
        assert!(r.notes[0].message.contains("CRC") && r.notes[0].message.contains("rebuilds"));
    }

    #[test]
    fn index_entries_are_checked_against_the_log() {
        let (_data, dir) = sound_log();
        let index = segment_logs(&dir)[0].with_extension("index");
        let mut bytes = std::fs::read(&index).unwrap();
        assert!(bytes.len() >= 16, "the test needs two index entries");
        // Entry 1 points one byte past a batch start.
        let pos = u32::from_be_bytes(bytes[12..16].try_into().unwrap()) + 1;
        bytes[12..16].copy_from_slice(&pos.to_be_bytes());
        std::fs::write(&index, &bytes).unwrap();
        let time_index = index.with_extension("timeindex");
        let mut t = std::fs::read(&time_index).unwrap();
        assert!(!t.is_empty());
        t[7] ^= 0x01; // the first entry's timestamp
        std::fs::write(&time_index, &t).unwrap();
        let r = verify(&dir);
        let on = |f: &Path| r.problems.iter().filter(|p| p.file == f).count();
        assert_eq!(on(&index), 1, "{:?}", r.problems);
        assert_eq!(on(&time_index), 1, "{:?}", r.problems);
        assert!(r
            .problems
            .iter()
            .any(|p| p.file == index && p.position == Some(8)));
        assert!(r
            .problems
            .iter()
            .any(|p| p.file == time_index && p.position == Some(0)));
    }

    /// A zero-filled index of a segment that is not the last is reported (its entries lost:
    /// a broker trims an index when its segment rolls), where the active segment's zeros are
    /// room not written yet (a black-box tester found the former called sound).
    #[test]
    fn zeros_in_the_index_of_a_rolled_segment_are_lost_entries() {
        let (_data, dir) = sound_log();
        let logs = segment_logs(&dir);
        assert!(logs.len() >= 2, "the test needs a rolled segment");
        let zero_fill = |path: &Path| {
            let len = std::fs::metadata(path).unwrap().len() as usize;
            assert!(len > 0, "{path:?} has entries");
            std::fs::write(path, vec![0u8; len]).unwrap();
        };
        let (index, time_index) = (
            logs[0].with_extension("index"),
            logs[0].with_extension("timeindex"),
        );
        zero_fill(&index);
        zero_fill(&time_index);
        let r = verify(&dir);
        for file in [&index, &time_index] {
            assert!(
                r.problems
                    .iter()
                    .any(|p| &p.file == file && p.message.contains("zero-filled")),
                "{file:?}: {:?}",
                r.problems
            );
        }
        // The active segment's index with room after its entries is sound.
        let (_data, dir) = sound_log();
        let last = segment_logs(&dir).last().unwrap().with_extension("index");
        let mut bytes = std::fs::read(&last).unwrap();
        bytes.extend([0u8; 64]);
        std::fs::write(&last, &bytes).unwrap();
        assert_eq!(verify(&dir).problems, vec![]);
    }

    #[test]
    fn an_index_that_disagrees_everywhere_is_listed_ten_entries_then_counted() {
        let (_data, dir) = sound_log();
        let index = segment_logs(&dir)[0].with_extension("index");
        let mut bytes = std::fs::read(&index).unwrap();
        let entries = bytes.len() / 8;
        // Every entry's position one byte off a batch start, as a shifted log would leave them.
        for e in 0..entries {
            let at = e * 8 + 4;
            let pos = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) + 1;
            bytes[at..at + 4].copy_from_slice(&pos.to_be_bytes());
        }
        // Past ten entries, so pad with more of the same.
        let last = bytes[bytes.len() - 8..].to_vec();
        for k in 1..=12u32 {
            let mut e = last.clone();
            let off = u32::from_be_bytes(e[0..4].try_into().unwrap()) + k;
            let pos = u32::from_be_bytes(e[4..8].try_into().unwrap()) + k;
            e[0..4].copy_from_slice(&off.to_be_bytes());
            e[4..8].copy_from_slice(&pos.to_be_bytes());
            bytes.extend(e);
        }
        std::fs::write(&index, &bytes).unwrap();
        let r = verify(&dir);
        let on_index: Vec<_> = r.problems.iter().filter(|p| p.file == index).collect();
        assert_eq!(on_index.len(), LISTED_PER_INDEX + 1, "{on_index:?}");
        let more = entries + 12 - LISTED_PER_INDEX;
        assert!(
            on_index[LISTED_PER_INDEX]
                .message
                .starts_with(&format!("and {more} more entries")),
            "{on_index:?}"
        );
    }

    #[test]
    fn an_untrimmed_index_with_no_entry_yet_is_sound() {
        // What a broker leaves on the active segment of a log it never closed (a KRaft
        // __cluster_metadata log after a clean stop): both indexes pre-allocated, all zeros.
        let (_data, dir) = sound_log();
        let last = segment_logs(&dir).pop().unwrap();
        // Kafka rounds the 10 MiB segment.index.bytes down to whole entries.
        for (suffix, len) in [("index", 10 << 20), ("timeindex", (10 << 20) / 12 * 12)] {
            let f = std::fs::File::create(last.with_extension(suffix)).unwrap();
            f.set_len(len).unwrap();
        }
        let r = verify(&dir);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        // Zeros after the active segment's real entries are the same pre-allocation; a real
        // entry that is wrong is not.
        let (_data, dir) = sound_log();
        let active = segment_logs(&dir)
            .pop()
            .unwrap()
            .with_extension("timeindex");
        let mut t = std::fs::read(&active).unwrap();
        assert!(!t.is_empty(), "the active segment has a time index entry");
        t.resize(t.len() + 1200, 0);
        std::fs::write(&active, &t).unwrap();
        assert!(verify(&dir).problems.is_empty());
        t[7] ^= 0x01;
        std::fs::write(&active, &t).unwrap();
        assert_eq!(verify(&dir).problems.len(), 1);
    }

    #[test]
    fn the_txn_index_must_match_the_abort_markers() {
        let (_data, dir) = sound_log();
        let txn = walk(&dir)
            .into_iter()
            .find(|p| p.extension().is_some_and(|e| e == "txnindex"))
            .expect("a .txnindex");
        let bytes = std::fs::read(&txn).unwrap();
        assert!(bytes.len() >= AbortedTxn::SIZE);
        // Drop the first entry: its ABORT marker is left unindexed.
        std::fs::write(&txn, &bytes[AbortedTxn::SIZE..]).unwrap();
        let r = verify(&dir);
        assert!(
            r.problems
                .iter()
                .any(|p| p.message.contains("has no entry in") && p.position.is_some()),
            "{:?}",
            r.problems
        );
        // An entry for a marker that is not there.
        let mut wrong = bytes.clone();
        wrong[2..10].copy_from_slice(&1234i64.to_be_bytes()); // producer id
        std::fs::write(&txn, &wrong).unwrap();
        let r = verify(&dir);
        assert!(
            r.problems
                .iter()
                .any(|p| p.file == txn && p.position == Some(0)),
            "{:?}",
            r.problems
        );
        // An entry of a version Kafka refuses (its other fields right), and a torn entry at the
        // end (a black-box tester found both called sound).
        let mut negative = bytes.clone();
        negative[..2].copy_from_slice(&(-45i16).to_be_bytes());
        let mut torn = bytes.clone();
        torn.extend_from_slice(&bytes[..AbortedTxn::SIZE / 2]);
        for (damaged, what) in [(negative, "version -45"), (torn, "multiple")] {
            std::fs::write(&txn, &damaged).unwrap();
            let r = verify(&dir);
            assert!(
                r.problems
                    .iter()
                    .any(|p| p.file == txn && p.message.contains(what)),
                "{what}: {:?}",
                r.problems
            );
        }
    }

    /// What the cleaner leaves of an aborted transaction before its delete horizon: the data
    /// batch gone, the ABORT marker and the `.txnindex` entry kept, and the producer snapshot
    /// naming the batch it removed. Kafka serves it; a black-box tester saw verify call a
    /// 4.4 broker's compacted partitions damaged.
    #[test]
    fn an_aborted_transaction_the_cleaner_emptied_is_sound_in_a_compacted_log() {
        let (_data, dir, log) = new_log();
        log.append_as_leader(&batch(5, 1_000, 9, 0, false), 0)
            .unwrap();
        log.append_as_leader(&batch(2, 1_100, 7, 0, true), 0)
            .unwrap();
        log.append_txn_marker(&marker(7, ControlRecordType::Abort), 0)
            .unwrap();
        log.append_as_leader(&batch(3, 1_200, 9, 5, false), 0)
            .unwrap();
        log.close().unwrap();
        // The cleaner's copy of the segment: offsets 5..6 removed, new indexes left out.
        let segment = &segment_logs(&dir)[0];
        let bytes = std::fs::read(segment).unwrap();
        let first = Batch::parse(&bytes).unwrap().size_in_bytes();
        let aborted = Batch::parse(&bytes[first..]).unwrap().size_in_bytes();
        let mut cleaned = bytes[..first].to_vec();
        cleaned.extend_from_slice(&bytes[first + aborted..]);
        std::fs::write(segment, cleaned).unwrap();
        for suffix in ["index", "timeindex"] {
            std::fs::remove_file(segment.with_extension(suffix)).unwrap();
        }
        let r = verify(&dir);
        let messages: Vec<_> = r.problems.iter().map(|p| p.message.as_str()).collect();
        for expected in [
            "offsets 5..6 are missing",
            "aborted transaction starts at offset 7 in the log, not 5",
            "producer 7's last batch ends at offset 6",
        ] {
            assert!(
                messages.iter().any(|m| m.contains(expected)),
                "{expected}: {messages:?}"
            );
        }
        let c = verify_partition(&dir, VerifyOptions { compacted: true }, &mut |_| Ok(())).unwrap();
        assert!(c.problems.is_empty(), "{:?}", c.problems);
    }

    /// A broker loading a log rebuilds the indexes only of segments it recovers; another
    /// segment missing its `.timeindex` gets an empty one for good, and its ListOffsets answers
    /// -1 for the segment's timestamps (4.4 and 3.9; a black-box tester's verify said "a broker
    /// rebuilds it").
    #[test]
    fn a_time_index_a_broker_would_leave_empty_is_a_problem() {
        let (data, dir) = sound_log();
        let mut logs = segment_logs(&dir);
        logs.sort();
        assert!(logs.len() >= 3);
        let (first, second) = (&logs[0], &logs[1]);
        std::fs::remove_file(first.with_extension("timeindex")).unwrap();
        std::fs::write(second.with_extension("timeindex"), b"").unwrap();
        let time_index_problems = |r: &VerifyReport| -> Vec<String> {
            r.problems
                .iter()
                .filter(|p| p.file.extension().is_some_and(|e| e == "timeindex"))
                .map(|p| p.message.clone())
                .collect()
        };
        // No marker, no recovery point: the broker recovers every segment.
        let marker = data.path().join(".kafka_cleanshutdown");
        let _ = std::fs::remove_file(&marker);
        let checkpoint = data.path().join(RECOVERY_POINT_CHECKPOINT_FILE);
        let _ = std::fs::remove_file(&checkpoint);
        assert!(time_index_problems(&verify(&dir)).is_empty());
        // Stopped cleanly: both are kept as they are.
        std::fs::write(&marker, b"").unwrap();
        let found = time_index_problems(&verify(&dir));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("missing, though") && found[1].starts_with("empty, though"));
        assert!(found[0].contains("the broker stopped cleanly"), "{found:?}");
        // Below the recovery point after a crash: the same.
        std::fs::remove_file(&marker).unwrap();
        std::fs::write(&checkpoint, "0\n1\nt 0 1000000\n").unwrap();
        let found = time_index_problems(&verify(&dir));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("below the recovery point"), "{found:?}");
        // Without its .index too, the first segment is recovered, both indexes rebuilt.
        std::fs::remove_file(first.with_extension("index")).unwrap();
        let found = time_index_problems(&verify(&dir));
        assert!(
            found.len() == 1 && found[0].starts_with("empty"),
            "{found:?}"
        );
    }

    #[test]
    fn an_abort_marker_without_data_needs_no_txn_index_entry() {
        // Kafka indexes only aborted transactions with data: a producer aborting before any of
        // its batches reached this partition leaves a marker alone and no .txnindex.
        let (_data, dir, log) = new_log();
        log.append_as_leader(&batch(5, 1_000, -1, 0, false), 0)
            .unwrap();
        log.append_txn_marker(&marker(7, ControlRecordType::Abort), 0)
            .unwrap();
        log.append_as_leader(&batch(2, 1_100, 8, 0, true), 0)
            .unwrap();
        log.append_txn_marker(&marker(8, ControlRecordType::Abort), 0)
            .unwrap();
        log.close().unwrap();
        let r = verify(&dir);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        // The transaction with data still needs its entry.
        for txn in walk(&dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        {
            std::fs::remove_file(txn).unwrap();
        }
        let r = verify(&dir);
        assert!(
            r.problems.len() == 1 && r.problems[0].message.contains("producer 8"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn checkpoints_past_the_log_end_are_reported() {
        let (data, dir) = sound_log();
        let path = data.path().join(RECOVERY_POINT_CHECKPOINT_FILE);
        std::fs::write(&path, "0\n2\nother 0 5\nt 0 999\n").unwrap();
        let hw = data.path().join(REPLICATION_OFFSET_CHECKPOINT_FILE);
        std::fs::write(&hw, "0\n1\nt 0 1000\n").unwrap();
        let r = verify(&dir);
        let rp = r
            .problems
            .iter()
            .find(|p| p.file == path)
            .expect("recovery point");
        assert_eq!(rp.position, Some(14));
        assert!(rp.message.contains("999"));
        assert!(r.problems.iter().any(|p| p.file == hw));
        // A leader epoch past the end, and a producer snapshot whose producer is not in the log.
        std::fs::write(dir.join(LEADER_EPOCH_CHECKPOINT_FILE), "0\n1\n3 5000\n").unwrap();
        let r = verify(&dir);
        assert!(r
            .problems
            .iter()
            .any(|p| p.message.contains("epoch 3 starts at offset 5000")));
    }

    #[test]
    fn gaps_are_problems_unless_the_log_is_compacted() {
        let (data, dir) = sound_log();
        let log = &segment_logs(&dir)[0];
        let mut bytes = std::fs::read(log).unwrap();
        // Move the second batch's base offset up by 3 (its CRC does not cover the offset).
        let first = Batch::parse(&bytes).unwrap().size_in_bytes();
        let base = i64::from_be_bytes(bytes[first..first + 8].try_into().unwrap());
        crate::record::batch::set_base_offset(&mut bytes[first..], base + 3);
        std::fs::write(log, &bytes).unwrap();
        let r = verify(&dir);
        assert!(
            r.problems
                .iter()
                .any(|p| p.message.contains("missing") && p.position == Some(first as u64)),
            "{:?}",
            r.problems
        );
        let c = verify_partition(&dir, VerifyOptions { compacted: true }, &mut |_| Ok(())).unwrap();
        assert!(!c.problems.iter().any(|p| p.message.contains("missing")));
        // The log dir's cleaner checkpoint says the same as --compacted.
        std::fs::write(
            data.path().join(CLEANER_OFFSET_CHECKPOINT_FILE),
            "0\n1\nt 0 0\n",
        )
        .unwrap();
        assert!(verify(&dir).compacted);
    }

    #[test]
    fn a_batch_the_cleaner_rewrote_says_the_log_is_compacted() {
        // A copied partition folder: no cleaner checkpoint beside it, no --compacted.
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("users-0");
        std::fs::create_dir_all(&dir).unwrap();
        let mut whole = BatchBuilder::new(BatchOptions::default());
        for _ in 0..5 {
            whole.append(1_000, Some(b"k"), Some(b"v"), &[]).unwrap();
        }
        // Offsets 10..14 with two records left in them, as the cleaner leaves a batch.
        let mut cleaned = BatchBuilder::new(BatchOptions {
            base_offset: 10,
            ..Default::default()
        });
        for delta in [1, 4] {
            cleaned
                .append_with_offset_delta(delta, 1_000, Some(b"k"), Some(b"v"), &[])
                .unwrap();
        }
        let first = whole.build().unwrap();
        let mut bytes = first.clone();
        bytes.extend(cleaned.build().unwrap());
        std::fs::write(dir.join(format!("{:020}.log", 0)), &bytes).unwrap();
        let r = verify(&dir);
        assert!(r.compacted && r.problems.is_empty(), "{:?}", r.problems);
        // The same gap before a whole batch is a problem.
        let mut later = first.clone();
        crate::record::batch::set_base_offset(&mut later, 10);
        let mut bytes = first;
        bytes.extend(later);
        std::fs::write(dir.join(format!("{:020}.log", 0)), &bytes).unwrap();
        let r = verify(&dir);
        assert!(!r.compacted);
        assert!(
            r.problems
                .iter()
                .any(|p| p.message.contains("offsets 5..9 are missing")),
            "{:?}",
            r.problems
        );
    }

    /// A `*.log` not named as a segment (an application's `server.log` dropped in the folder)
    /// fails a broker's load of the log, as it fails kafkalog's: verify says so.
    #[test]
    fn a_log_file_not_named_as_a_segment_is_a_problem() {
        let (_data, dir) = sound_log();
        for name in ["server.log", "42.log", "00000000000000000000x.log"] {
            let stray = dir.join(name);
            std::fs::write(&stray, b"not a segment").unwrap();
            let r = verify(&dir);
            assert!(
                r.problems
                    .iter()
                    .any(|p| p.file == stray && p.message.contains("not named as a segment")),
                "{name}: {:?}",
                r.problems
            );
            std::fs::remove_file(&stray).unwrap();
        }
        assert!(verify(&dir).problems.is_empty());
    }

    #[test]
    fn a_folder_or_fifo_under_a_segment_name_is_a_problem_not_a_hang() {
        let (_data, dir) = sound_log();
        let index = segment_logs(&dir)[0].with_extension("timeindex");
        std::fs::remove_file(&index).unwrap();
        std::fs::create_dir(&index).unwrap();
        let fifo = dir.join(format!("{:020}.log", 999_999));
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let r = verify(&dir);
        for p in [&index, &fifo] {
            assert!(
                r.problems
                    .iter()
                    .any(|x| &x.file == p && x.message.contains("not a regular file")),
                "{:?}",
                r.problems
            );
        }
    }

    #[test]
    fn progress_hears_every_segment_and_can_stop_the_work() {
        let (_data, dir) = sound_log();
        let mut seen = 0;
        verify_partition(&dir, VerifyOptions::default(), &mut |b| {
            seen += b;
            Ok(())
        })
        .unwrap();
        let total: u64 = segment_logs(&dir)
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert_eq!(seen, total);
        let err = verify_partition(&dir, VerifyOptions::default(), &mut |_| {
            Err(Error::IllegalState("interrupted".into()))
        })
        .unwrap_err();
        assert!(err.to_string().contains("interrupted"));
    }

    #[test]
    fn stats_sum_the_batches() {
        let (_data, dir) = sound_log();
        let s = crate::tools::stats::partition_stats(&dir, Default::default(), &mut |_| Ok(()))
            .unwrap();
        assert_eq!(s.log_start_offset, 0);
        assert_eq!(s.log_end_offset, 6 * 11);
        assert_eq!(s.high_watermark, 66);
        // Written by the log's clean close.
        assert_eq!(s.checkpointed_high_watermark, Some(66));
        assert_eq!(s.last_stable_offset, 66);
        assert_eq!(s.batches, 24);
        assert_eq!(s.control_batches, 6);
        assert_eq!(s.records, 6 * 10);
        assert_eq!(s.transactional_records, 12);
        assert_eq!(s.committed_transactions, 3);
        assert_eq!(s.aborted_transactions, 3);
        assert_eq!(s.producers, 2);
        assert_eq!(s.first_timestamp, Some(1_000));
        assert_eq!(s.last_timestamp, Some(5_000));
        assert_eq!(s.codecs.get("none"), Some(&24));
        assert_eq!(s.segments, segment_logs(&dir).len());
    }
}
