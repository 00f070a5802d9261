//! One log segment (Kafka's `LogSegment`): a `.log` file of batches with its sparse offset index,
//! time index and aborted-transaction index, all named by the segment's 20-digit base offset.
//! Appends add index entries every `index_interval_bytes`; reads translate an offset to a file
//! position through the offset index and a short header scan; recovery re-validates every batch
//! and rebuilds the indexes.

use std::path::{Path, PathBuf};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::index::offset::OffsetIndex;
use crate::index::time::{TimeIndex, TimestampOffset};
use crate::index::txn::{AbortedTxn, TransactionIndex, TxnIndexSearchResult};
use crate::record::batch::{Batch, MAGIC_V2, NO_TIMESTAMP};
use crate::record::file_records::{
    headers_in, FileRecords, LogOffsetPosition, TimestampAndOffset, DEFAULT_MAX_BATCH_SIZE,
};

pub const LOG_FILE_SUFFIX: &str = ".log";
pub const INDEX_FILE_SUFFIX: &str = ".index";
pub const TIME_INDEX_FILE_SUFFIX: &str = ".timeindex";
pub const TXN_INDEX_FILE_SUFFIX: &str = ".txnindex";
pub const DELETED_FILE_SUFFIX: &str = ".deleted";
pub const CLEANED_FILE_SUFFIX: &str = ".cleaned";
pub const SWAP_FILE_SUFFIX: &str = ".swap";

/// Kafka's `filenamePrefixFromOffset`: the offset as 20 zero-padded digits.
pub fn filename_prefix_from_offset(offset: i64) -> String {
    format!("{offset:020}")
}

pub fn segment_file(dir: &Path, base_offset: i64, suffix: &str, extra_suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}{suffix}{extra_suffix}",
        filename_prefix_from_offset(base_offset)
    ))
}

/// The base offset a segment file's name encodes (`00000000000000000042.log.swap` -> 42).
pub fn offset_from_file_name(name: &str) -> Option<i64> {
    let digits = name.split('.').next()?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Kafka's `LogOffsetMetadata`: an offset with the segment and byte position that hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsetMetadata {
    pub message_offset: i64,
    /// -1 when unknown (Kafka's UNKNOWN_OFFSET).
    pub segment_base_offset: i64,
    /// -1 when unknown.
    pub relative_position_in_segment: i64,
}

impl LogOffsetMetadata {
    pub fn offset_only(offset: i64) -> Self {
        LogOffsetMetadata {
            message_offset: offset,
            segment_base_offset: -1,
            relative_position_in_segment: -1,
        }
    }
    pub fn message_offset_only(&self) -> bool {
        self.segment_base_offset == -1 && self.relative_position_in_segment == -1
    }
}

/// Kafka's `FetchDataInfo`: the bytes of whole batches starting at the batch that holds the
/// fetch offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchDataInfo {
    pub fetch_offset_metadata: LogOffsetMetadata,
    pub records: Vec<u8>,
    pub first_entry_incomplete: bool,
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

/// What `LogSegment::scan`'s caller says of a batch that passed its CRC check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchVerdict {
    Accept,
    /// Damage a CRC does not show (offsets going backwards): the reason.
    Reject(String),
}

/// A stretch of a `.log` holding no valid batch, found by `LogSegment::scan`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBytes {
    pub start: u64,
    /// Where valid batches resume; the file's size when none follows.
    pub end: u64,
    /// Why the batch at `start` was refused.
    pub reason: String,
    /// Last offset of the valid batch before it in this file.
    pub last_offset_before: Option<i64>,
    /// Base offset of the valid batch at `end`, if any.
    pub next_offset_after: Option<i64>,
    /// Whether a whole batch, its CRC valid, was refused at `start` (offsets going backwards, a
    /// magic above 2): not what a crash leaves, so never a torn tail; Kafka's recovery, which
    /// checks sizes and CRCs, keeps it.
    pub whole_batch_refused: bool,
}

/// What `LogSegment::scan` found in one `.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScan {
    /// End of the last valid batch before the first invalid byte: where Kafka's recovery cuts.
    pub valid_prefix: u64,
    /// Invalid stretches in file order; the last may run to the end of the file.
    pub invalid: Vec<InvalidBytes>,
}

/// Kafka's `ensureOffsetInRange` for a batch of this segment: the reason it does not belong.
fn offset_out_of_segment(base_offset: i64, last_offset: i64) -> Option<String> {
    if last_offset < base_offset || last_offset - base_offset > i64::from(i32::MAX) {
        Some(format!(
            "offset {last_offset} does not belong in the segment with base offset {base_offset}"
        ))
    } else {
        None
    }
}

/// Kafka's `RollParams`.
#[derive(Debug, Clone, Copy)]
pub struct RollParams {
    pub max_segment_ms: i64,
    pub max_segment_bytes: u64,
    pub max_timestamp_in_messages: i64,
    pub max_offset_in_messages: i64,
    pub messages_size: usize,
    pub now: i64,
}

#[derive(Debug)]
pub struct LogSegment {
    base_offset: i64,
    log: FileRecords,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    index_interval_bytes: usize,
    max_batch_size: usize,
    max_decompressed: usize,
    max_index_size: usize,
    rolling_jitter_ms: i64,
    bytes_since_last_index_entry: usize,
    /// Largest batch max timestamp and the last offset of that batch (Kafka's
    /// `maxTimestampAndOffsetSoFar`); loaded lazily from the time index when unknown.
    max_timestamp_and_offset_so_far: Option<TimestampOffset>,
    /// Timestamp of the first batch, what time-based rolling measures from.
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
    /// Indexes rebuilt for a read-only segment live in this private directory, never next to the log.
    _scratch_dir: Option<tempfile::TempDir>,
    /// Aborted transactions a read-only view found by replaying an unverified tail whose
    /// `.txnindex` entries are missing (written after the last flush and lost with the OS).
    in_memory_aborted: Vec<AbortedTxn>,
    /// The base offset of the segment's first batch where it is below the segment's own (a file
    /// named one past it, as Kafka's loader takes it), once the loader found the segment before
    /// ending right there; `None` otherwise.
    first_batch_below_base: Option<i64>,
}

/// Empty writable indexes in a private temp folder, for a read-only segment whose own indexes
/// are missing or fail their check, sized for the entries a rebuild of a `log_size` log can add
/// (one per batch at most) rather than the configured maximum.
fn private_indexes(
    base_offset: i64,
    log_size: u64,
    config: &LogConfig,
) -> Result<(tempfile::TempDir, OffsetIndex, TimeIndex)> {
    let dir = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    // The smallest entry a log holds: a v0 message (12 bytes of offset and size, 14 of record).
    let batches = log_size / 26 + 2;
    let size =
        |entry: u64| (batches.saturating_mul(entry)).min(config.max_index_size as u64) as usize;
    let offset_index = OffsetIndex::open(
        segment_file(dir.path(), base_offset, INDEX_FILE_SUFFIX, ""),
        base_offset,
        size(8),
        true,
    )?;
    let time_index = TimeIndex::open(
        segment_file(dir.path(), base_offset, TIME_INDEX_FILE_SUFFIX, ""),
        base_offset,
        size(12),
        true,
    )?;
    Ok((dir, offset_index, time_index))
}

impl LogSegment {
    /// Kafka's `LogSegment.open`: the four files of the segment at `base_offset` in `dir`, with
    /// `suffix` appended to each name (`""`, `.cleaned`, `.swap`). A read-only segment maps its
    /// indexes read-only; if one is missing or fails its sanity check it is rebuilt privately.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        writable: bool,
        suffix: &str,
        now_ms: i64,
    ) -> Result<Self> {
        let log_path = segment_file(dir, base_offset, LOG_FILE_SUFFIX, suffix);
        let index_path = segment_file(dir, base_offset, INDEX_FILE_SUFFIX, suffix);
        let time_path = segment_file(dir, base_offset, TIME_INDEX_FILE_SUFFIX, suffix);
        let txn_path = segment_file(dir, base_offset, TXN_INDEX_FILE_SUFFIX, suffix);
        let log = FileRecords::open(&log_path, writable)?;
        let mut scratch_dir = None;
        let (offset_index, time_index) = if writable || (index_path.exists() && time_path.exists())
        {
            (
                OffsetIndex::open(&index_path, base_offset, config.max_index_size, writable)?,
                TimeIndex::open(&time_path, base_offset, config.max_index_size, writable)?,
            )
        } else {
            let (dir, offset_index, time_index) =
                private_indexes(base_offset, log.size_in_bytes(), config)?;
            scratch_dir = Some(dir);
            (offset_index, time_index)
        };
        let txn_index = TransactionIndex::open(&txn_path, base_offset, writable)?;
        let mut segment = LogSegment {
            base_offset,
            log,
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes: config.index_interval_bytes,
            max_batch_size: DEFAULT_MAX_BATCH_SIZE.max(config.max_message_bytes),
            max_decompressed: config.max_decompressed_batch_bytes,
            max_index_size: config.max_index_size,
            rolling_jitter_ms: 0,
            bytes_since_last_index_entry: 0,
            max_timestamp_and_offset_so_far: None,
            rolling_based_timestamp: None,
            created_ms: now_ms,
            _scratch_dir: scratch_dir,
            in_memory_aborted: Vec::new(),
            first_batch_below_base: None,
        };
        if segment._scratch_dir.is_some() {
            segment.rebuild_private_indexes()?;
        } else if !writable && segment.indexes_zero_filled() {
            segment.rebuild_indexes_privately(config)?;
        } else {
            segment.load_largest_timestamp()?;
        }
        Ok(segment)
    }

    /// True when the indexes cannot be trusted as they are: they end in the zeros of their
    /// pre-allocation, or point past the end of the log. Zeros are what the active segment of a
    /// running or crashed broker has: the active segment of a running
    /// or crashed broker (a clean shutdown trims them). Such entries pass Kafka's sanity check but
    /// break the sorted order lookups rely on.
    pub fn indexes_zero_filled(&self) -> bool {
        self.indexes_zero_filled_tail() || self.index_points_past_log()
    }

    /// An offset index entry at or past the end of the `.log` (the log was cut after it was indexed).
    fn index_points_past_log(&self) -> bool {
        self.offset_index
            .last_entry()
            .is_some_and(|e| e.position as u64 >= self.log.size_in_bytes() && e.position > 0)
    }

    fn indexes_zero_filled_tail(&self) -> bool {
        let offset_tail = self.offset_index.entries() >= 2
            && self
                .offset_index
                .last_entry()
                .is_some_and(|e| e.offset == self.base_offset && e.position == 0);
        let time_tail = self.time_index.entries() >= 2 && {
            let last = self.time_index.last_entry();
            last.timestamp == 0 && last.offset == self.base_offset
        };
        offset_tail || time_tail
    }

    /// Replaces a read-only segment's indexes that fail their sanity check with private rebuilt
    /// ones, leaving the files on disk untouched.
    pub fn rebuild_indexes_privately(&mut self, config: &LogConfig) -> Result<()> {
        let (dir, offset_index, time_index) =
            private_indexes(self.base_offset, self.log.size_in_bytes(), config)?;
        (self.offset_index, self.time_index) = (offset_index, time_index);
        self._scratch_dir = Some(dir);
        self.rebuild_private_indexes()
    }

    /// Replaces a read-only segment's transaction index that fails its sanity check with an empty
    /// private one, leaving the file on disk untouched: the loader then replays the segment and
    /// keeps its aborted transactions in memory, as Kafka's recovery rebuilds the file.
    pub fn ignore_txn_index_privately(&mut self) -> Result<()> {
        if self._scratch_dir.is_none() {
            self._scratch_dir =
                Some(tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?);
        }
        let dir = self._scratch_dir.as_ref().expect("set above").path();
        // The private path is never created: a read-only index of a missing file is empty.
        let path = segment_file(dir, self.base_offset, TXN_INDEX_FILE_SUFFIX, "");
        self.txn_index = TransactionIndex::open(path, self.base_offset, false)?;
        Ok(())
    }

    /// Fills the private indexes, then trims them to their entries: a read-only view never
    /// appends to them, and a reader of a live broker's dir holds one pair per active segment.
    fn rebuild_private_indexes(&mut self) -> Result<()> {
        self.rebuild_indexes()?;
        self.offset_index.trim_to_valid_size()?;
        self.time_index.trim_to_valid_size()
    }

    /// Fills empty indexes from the log without validating or truncating it (a read-only view).
    fn rebuild_indexes(&mut self) -> Result<()> {
        self.offset_index.reset()?;
        self.time_index.reset()?;
        let mut last_index_entry = 0u64;
        let mut max_ts = TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        };
        for header in self.log.headers_from(0, self.max_batch_size) {
            // The index covers the readable prefix; a torn tail is the loader's to judge.
            let h = match header {
                Ok(h) => h,
                Err(Error::CorruptRecord { .. }) => break,
                Err(e) => return Err(e),
            };
            // So is a batch whose offsets this segment cannot hold (the index could not take
            // them either): the loader's scan names its file and position.
            if offset_out_of_segment(self.base_offset, h.last_offset).is_some() {
                break;
            }
            if h.max_timestamp > max_ts.timestamp {
                max_ts = TimestampOffset {
                    timestamp: h.max_timestamp,
                    offset: h.last_offset,
                };
            }
            if h.position - last_index_entry > self.index_interval_bytes as u64 {
                self.offset_index.append(h.last_offset, h.position as i32)?;
                self.time_index
                    .maybe_append(max_ts.timestamp, max_ts.offset, false)?;
                last_index_entry = h.position;
            }
        }
        self.time_index
            .maybe_append(max_ts.timestamp, max_ts.offset, true)?;
        self.max_timestamp_and_offset_so_far = Some(max_ts);
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.log.size_in_bytes()
    }
    pub fn log(&self) -> &FileRecords {
        &self.log
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    pub fn is_writable(&self) -> bool {
        self.log.is_writable()
    }
    pub fn max_batch_size(&self) -> usize {
        self.max_batch_size
    }
    pub fn max_decompressed(&self) -> usize {
        self.max_decompressed
    }
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }
    pub fn set_rolling_jitter_ms(&mut self, jitter: i64) {
        self.rolling_jitter_ms = jitter;
    }
    /// Treat only the first `size` bytes as this segment (a read-only log ending before a torn tail).
    pub fn limit_to(&mut self, size: u64) {
        self.log.limit_to(size);
    }

    fn max_timestamp_and_offset(&mut self) -> TimestampOffset {
        if self.max_timestamp_and_offset_so_far.is_none() {
            self.max_timestamp_and_offset_so_far = Some(self.time_index.last_entry());
        }
        self.max_timestamp_and_offset_so_far.unwrap()
    }

    /// The cached largest batch timestamp (loaded when the segment opened).
    pub fn max_timestamp_so_far_ro(&self) -> i64 {
        self.max_timestamp_and_offset_so_far
            .map_or_else(|| self.time_index.last_entry().timestamp, |t| t.timestamp)
    }

    /// `largest_timestamp` without refreshing the cache.
    pub fn largest_timestamp_ro(&self) -> Result<i64> {
        let ts = self.max_timestamp_so_far_ro();
        if ts >= 0 {
            return Ok(ts);
        }
        self.last_modified_ms()
    }

    /// Gives both mapped indexes room up to the configured size again (the active segment).
    pub fn offset_index_resize(&mut self, max_index_size: usize) -> Result<()> {
        self.offset_index.resize(max_index_size)?;
        self.time_index.resize(max_index_size)?;
        Ok(())
    }

    /// Largest timestamp of any batch in the segment (scans from the last time index entry).
    pub fn max_timestamp_so_far(&mut self) -> i64 {
        self.max_timestamp_and_offset().timestamp
    }

    pub fn shallow_offset_of_max_timestamp_so_far(&mut self) -> i64 {
        self.max_timestamp_and_offset().offset
    }

    /// Kafka's `largestTimestamp`: the max timestamp, or the file's mtime for a segment without one.
    pub fn largest_timestamp(&mut self) -> Result<i64> {
        let ts = self.max_timestamp_so_far();
        if ts >= 0 {
            return Ok(ts);
        }
        self.last_modified_ms()
    }

    pub fn last_modified_ms(&self) -> Result<i64> {
        let meta = std::fs::metadata(self.log.path()).map_err(|e| Error::io(self.log.path(), e))?;
        let mtime = meta.modified().map_err(|e| Error::io(self.log.path(), e))?;
        Ok(mtime
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64))
    }

    /// Loads the largest timestamp from the last time index entry on, as Kafka's
    /// `loadLargestTimestamp` does when a segment is reopened.
    pub fn load_largest_timestamp(&mut self) -> Result<()> {
        let last = self.time_index.last_entry();
        let mut best = last;
        let position = self.index_position(last.offset);
        let found = self
            .log
            .largest_timestamp_after(position, self.max_batch_size)?;
        if found.timestamp > best.timestamp {
            best = TimestampOffset {
                timestamp: found.timestamp,
                offset: found.offset,
            };
        }
        self.max_timestamp_and_offset_so_far = Some(best);
        Ok(())
    }

    /// Kafka's `relativeOffset` check: can `offset` be stored as 4 bytes relative to the base?
    pub fn can_convert_to_relative_offset(&self, offset: i64) -> bool {
        offset >= self.base_offset && offset - self.base_offset <= i64::from(i32::MAX)
    }

    /// Appends whole batches whose offsets are already assigned. Indexes get an entry (the batch's
    /// last offset and its position) each time more than `index_interval_bytes` were written since
    /// the last one, as Kafka's `LogSegment.append` does batch by batch.
    pub fn append(&mut self, largest_offset: i64, records: &[u8]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if !self.can_convert_to_relative_offset(largest_offset) {
            return Err(Error::OffsetOverflow(format!(
                "offset {largest_offset} cannot be stored relative to the base offset {} of segment {}",
                self.base_offset,
                self.log.path().display()
            )));
        }
        let headers: Vec<_> = headers_in(records).collect::<Result<_>>()?;
        let mut physical_position = self.log.size_in_bytes();
        if physical_position == 0 {
            // Kafka measures time-based rolling from the first append's largest timestamp.
            self.rolling_based_timestamp = headers.iter().map(|h| h.max_timestamp).max();
        }
        self.log.append(records)?;
        let mut max_ts = self.max_timestamp_and_offset();
        for h in &headers {
            if h.max_timestamp > max_ts.timestamp {
                max_ts = TimestampOffset {
                    timestamp: h.max_timestamp,
                    offset: h.last_offset,
                };
            }
            if self.bytes_since_last_index_entry > self.index_interval_bytes {
                self.offset_index
                    .append(h.last_offset, physical_position as i32)?;
                self.time_index
                    .maybe_append(max_ts.timestamp, max_ts.offset, false)?;
                self.bytes_since_last_index_entry = 0;
            }
            physical_position += h.size as u64;
            self.bytes_since_last_index_entry += h.size;
        }
        self.max_timestamp_and_offset_so_far = Some(max_ts);
        Ok(())
    }

    /// The offset index's floor entry for `offset` as a position to scan from, checked against
    /// the log: the batch there must start at that position and end at or before the entry's
    /// offset. An entry that fails (an index damaged in a way Kafka's sanity check cannot see)
    /// costs a scan from the start of the segment, never a wrong answer.
    fn index_position(&self, offset: i64) -> u64 {
        let entry = self.offset_index.lookup(offset);
        let position = entry.position.max(0) as u64;
        if position == 0 {
            return 0;
        }
        let header_fits = |h: &crate::record::file_records::BatchHeader| {
            h.position == position
                && h.base_offset >= self.base_offset
                && h.last_offset >= h.base_offset
                && h.last_offset <= entry.offset
        };
        match self.log.read_header(position, self.max_batch_size) {
            // The whole batch is read and its CRC checked: a header-like run of bytes inside
            // another batch must not pass for a batch start.
            Ok(Some(h)) if header_fits(&h) => match self.log.read_range(position, h.size) {
                Ok(bytes) if Batch::parse(&bytes).and_then(|b| b.ensure_valid()).is_ok() => {
                    position
                }
                _ => 0,
            },
            _ => 0,
        }
    }

    /// Lets the segment's first batch start at `offset`, below the segment's base offset: the
    /// loader found the segment before it ending right there (see `first_batch_below_base`).
    pub fn set_first_batch_below_base(&mut self, offset: i64) {
        self.first_batch_below_base = Some(offset);
    }

    /// The lowest offset the segment's batches may hold: its base offset, or its first batch's
    /// below it (see `first_batch_below_base`).
    pub fn lowest_offset(&self) -> i64 {
        self.first_batch_below_base.unwrap_or(self.base_offset)
    }

    /// Kafka's `translateOffset`: the first batch whose last offset is >= `offset`, searching from
    /// the offset index's floor entry (or `starting_position`, if later).
    /// The batches the search steps over must hold offsets that rise from the segment's base
    /// offset: a base offset lies outside a batch's CRC, and one rewritten below the target
    /// would otherwise have its batch stepped over, unseen, as an earlier one (Kafka's search
    /// trusts it); such damage is a corruption error naming the batch's position.
    pub fn translate_offset(
        &self,
        offset: i64,
        starting_position: u64,
    ) -> Result<Option<LogOffsetPosition>> {
        let start = self.index_position(offset).max(starting_position);
        let mut previous_last: Option<i64> = None;
        for header in self.log.headers_from(start, self.max_batch_size) {
            let h = header?;
            let first = if h.magic == MAGIC_V2 {
                h.base_offset
            } else {
                h.last_offset
            };
            let lowest = match self.first_batch_below_base {
                Some(first_batch) if h.position == 0 => first_batch,
                _ => self.base_offset,
            };
            if first < lowest || h.last_offset < first || previous_last.is_some_and(|p| first <= p)
            {
                return Err(Error::corrupt(format!(
                    "batch of offsets {first}..{} is out of place in the segment of base offset {}{}",
                    h.last_offset,
                    self.base_offset,
                    previous_last.map_or(String::new(), |p| format!(", after offset {p}"))
                ))
                .at(Some(self.log.path()), h.position));
            }
            previous_last = Some(h.last_offset);
            if h.last_offset >= offset {
                return Ok(Some(LogOffsetPosition {
                    offset: h.last_offset,
                    position: h.position,
                    size: h.size,
                }));
            }
        }
        Ok(None)
    }

    /// Kafka's `LogSegment.read`: whole batches from the one holding `start_offset`, at most
    /// `max_size` bytes (at least one batch when `min_one_message`), never past `max_position`.
    pub fn read(
        &self,
        start_offset: i64,
        max_size: usize,
        max_position: Option<u64>,
        min_one_message: bool,
    ) -> Result<Option<FetchDataInfo>> {
        let Some(start) = self.translate_offset(start_offset, 0)? else {
            return Ok(None);
        };
        let max_position = max_position.unwrap_or_else(|| self.log.size_in_bytes());
        let metadata = LogOffsetMetadata {
            message_offset: start_offset,
            segment_base_offset: self.base_offset,
            relative_position_in_segment: start.position as i64,
        };
        let adjusted_max_size = if min_one_message {
            max_size.max(start.size)
        } else {
            max_size
        };
        if adjusted_max_size == 0 {
            return Ok(Some(FetchDataInfo {
                fetch_offset_metadata: metadata,
                records: Vec::new(),
                first_entry_incomplete: false,
                aborted_transactions: None,
            }));
        }
        let fetch_size =
            (max_position.saturating_sub(start.position) as usize).min(adjusted_max_size);
        let records = self.log.read_range(start.position, fetch_size)?;
        Ok(Some(FetchDataInfo {
            fetch_offset_metadata: metadata,
            records,
            first_entry_incomplete: adjusted_max_size < start.size,
            aborted_transactions: None,
        }))
    }

    /// Kafka's `readNextOffset`: the offset after the last batch (the base offset when empty).
    pub fn read_next_offset(&self) -> Result<i64> {
        let mut start = self.index_position(self.offset_index.last_offset());
        if start >= self.log.size_in_bytes() {
            start = 0;
        }
        let mut next = self.base_offset;
        for header in self.log.headers_from(start, self.max_batch_size) {
            next = header?.last_offset + 1;
        }
        Ok(next)
    }

    /// Whether the segment holds whole v2 batches whose offsets follow on from its base offset
    /// without a gap up to `next_offset`, where the file ends (a base offset lies outside a
    /// batch's CRC, so every header is read), and those from the last offset-index entry on are
    /// valid (each CRC checked). An empty segment: its base offset is `next_offset`. Any doubt
    /// is `false`, and so is a transaction marker: the aborted transactions a read_committed
    /// read leaves out are then found by the recovery scan, not taken on the `.txnindex`'s word.
    pub fn ends_whole_at(&self, next_offset: i64) -> bool {
        let size = self.log.size_in_bytes();
        let mut expected = self.base_offset;
        let mut follows_on = true;
        let walked = self.log.for_each_header(0, self.max_batch_size, &mut |h| {
            follows_on = h.magic == MAGIC_V2 && !h.is_control && h.base_offset == expected;
            expected = h.last_offset + 1;
            follows_on
        });
        if walked.is_err() || !follows_on || expected != next_offset {
            return false;
        }
        if size == 0 {
            return true;
        }
        let mut start = self.index_position(self.offset_index.last_offset());
        if start >= size {
            start = 0;
        }
        let (mut next, mut end) = (self.base_offset, start);
        let walked =
            self.log
                .for_each_batch(start, size, self.max_batch_size, &mut |position, batch| {
                    next = batch.last_offset() + 1;
                    end = position + batch.size_in_bytes() as u64;
                    Ok(true)
                });
        walked.is_ok() && end == size && next == next_offset
    }

    /// Kafka's `findOffsetByTimestamp`: the first record with timestamp >= `timestamp` and offset
    /// >= `starting_offset`, via the time index, then the offset index, then a scan.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: i64,
    ) -> Result<Option<TimestampAndOffset>> {
        let ts_offset = self.time_index.lookup(timestamp);
        let position = self.index_position(ts_offset.offset.max(starting_offset));
        self.log.search_for_timestamp(
            timestamp,
            position,
            starting_offset,
            self.max_batch_size,
            self.max_decompressed,
        )
    }

    /// Kafka's `recover`: validates every batch, rebuilds the offset and time indexes (the
    /// transaction index is rebuilt by the caller's `on_batch`, which also replays producer state
    /// and leader epochs), truncates an invalid tail. Returns the bytes truncated.
    pub fn recover(&mut self, on_batch: &mut dyn FnMut(&Batch<'_>) -> Result<()>) -> Result<u64> {
        self.recover_to(u64::MAX, on_batch)
    }

    /// `recover` that also cuts the log at `limit` (where the loader found damage a CRC does
    /// not show, such as offsets going backwards): only batches wholly before it are kept.
    pub fn recover_to(
        &mut self,
        limit: u64,
        on_batch: &mut dyn FnMut(&Batch<'_>) -> Result<()>,
    ) -> Result<u64> {
        self.offset_index.reset()?;
        self.time_index.reset()?;
        self.txn_index.reset()?;
        let mut valid_bytes = 0u64;
        let mut last_index_entry = 0u64;
        let mut max_ts = TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        };
        let size = self.log.size_in_bytes().min(limit);
        let (log, offset_index, time_index) =
            (&self.log, &mut self.offset_index, &mut self.time_index);
        let base_offset = self.base_offset;
        let mut reader = log.batches(0, size, self.max_batch_size);
        loop {
            let step: Result<bool> = (|| {
                let Some((position, bytes)) = reader.next_batch()? else {
                    return Ok(false);
                };
                let batch = Batch::parse(bytes).map_err(|e| e.at(Some(log.path()), position))?;
                batch
                    .ensure_valid()
                    .map_err(|e| e.at(Some(log.path()), position))?;
                let last_offset = batch.last_offset();
                if let Some(reason) = offset_out_of_segment(base_offset, last_offset) {
                    return Err(Error::corrupt(reason).at(Some(log.path()), position));
                }
                if batch.max_timestamp() > max_ts.timestamp {
                    max_ts = TimestampOffset {
                        timestamp: batch.max_timestamp(),
                        offset: last_offset,
                    };
                }
                if position - last_index_entry > self.index_interval_bytes as u64 {
                    offset_index.append(last_offset, position as i32)?;
                    time_index.maybe_append(max_ts.timestamp, max_ts.offset, false)?;
                    last_index_entry = position;
                }
                on_batch(&batch)?;
                valid_bytes = position + bytes.len() as u64;
                Ok(true)
            })();
            match step {
                Ok(true) => {}
                Ok(false) => break,
                // A torn or corrupt tail: keep what validated, as Kafka does; the index entries
                // made so far all point below `valid_bytes`.
                Err(Error::CorruptRecord { .. }) => break,
                Err(e) => return Err(e),
            }
        }
        let truncated = self.log.size_in_bytes() - valid_bytes;
        if truncated > 0 {
            self.log.truncate_to(valid_bytes)?;
        }
        self.offset_index.trim_to_valid_size()?;
        self.time_index
            .maybe_append(max_ts.timestamp, max_ts.offset, true)?;
        self.time_index.trim_to_valid_size()?;
        self.max_timestamp_and_offset_so_far = Some(max_ts);
        self.bytes_since_last_index_entry =
            (valid_bytes - last_index_entry.min(valid_bytes)) as usize;
        Ok(truncated)
    }

    /// A validating walk over the whole `.log` that changes nothing: every batch is parsed and
    /// CRC-checked, handed to `on_batch` (with whether damage came before it in this file), which
    /// may still reject it (offsets going backwards); after an invalid or rejected batch the walk
    /// resumes at the next valid batch (`FileRecords::find_next_valid_batch`). The loader tells
    /// damage from a torn tail with it.
    pub fn scan(
        &self,
        on_batch: &mut dyn FnMut(u64, &Batch<'_>, bool) -> Result<BatchVerdict>,
    ) -> Result<SegmentScan> {
        let size = self.log.size_in_bytes();
        let mut out = SegmentScan {
            valid_prefix: 0,
            invalid: Vec::new(),
        };
        let mut last_offset: Option<i64> = None;
        let mut reader = self.log.batches(0, size, self.max_batch_size);
        loop {
            let position = reader.position();
            let refused: (u64, String, bool) = match reader.next_batch() {
                Ok(None) => break,
                Ok(Some((pos, bytes))) => {
                    let len = bytes.len() as u64;
                    let parsed = Batch::parse(bytes);
                    // A whole batch whose CRC holds is not what a torn write leaves.
                    let crc_holds = matches!(&parsed, Ok(Batch::V2(b)) if b.is_valid());
                    let checked = parsed.and_then(|b| {
                        b.ensure_valid()?;
                        match offset_out_of_segment(self.base_offset, b.last_offset()) {
                            Some(reason) => Err(Error::corrupt(reason)),
                            None => Ok(b),
                        }
                    });
                    match checked {
                        Ok(batch) => match on_batch(pos, &batch, !out.invalid.is_empty())? {
                            BatchVerdict::Accept => {
                                last_offset = Some(batch.last_offset());
                                if out.invalid.is_empty() {
                                    out.valid_prefix = pos + len;
                                }
                                continue;
                            }
                            BatchVerdict::Reject(reason) => (pos, reason, true),
                        },
                        Err(Error::CorruptRecord { message, .. }) => (pos, message, crc_holds),
                        Err(e) => return Err(e),
                    }
                }
                Err(Error::CorruptRecord { message, .. }) => (
                    position,
                    message,
                    self.log
                        .is_v2_batch_of_unknown_magic(position, self.max_batch_size),
                ),
                Err(e) => return Err(e),
            };
            let (start, reason, whole_batch_refused) = refused;
            let resume =
                self.log
                    .find_next_valid_batch(start + 1, self.base_offset, self.max_batch_size)?;
            let next_offset_after = match resume {
                Some(q) => self
                    .log
                    .read_header(q, self.max_batch_size)?
                    .map(|h| h.base_offset),
                None => None,
            };
            let end = resume.unwrap_or(size);
            match out.invalid.last_mut() {
                // A batch refused right where the walk resumed extends the same damage.
                Some(prev) if prev.end == start => {
                    prev.end = end;
                    prev.next_offset_after = next_offset_after;
                }
                _ => out.invalid.push(InvalidBytes {
                    start,
                    end,
                    reason,
                    last_offset_before: last_offset,
                    next_offset_after,
                    whole_batch_refused,
                }),
            }
            match resume {
                Some(q) => reader = self.log.batches(q, size, self.max_batch_size),
                None => break,
            }
        }
        if out.invalid.is_empty() {
            out.valid_prefix = size;
        }
        Ok(out)
    }

    /// Makes reads step over these damaged `[start, end)` ranges and rebuilds the indexes
    /// privately around them (a read-only view that skips damage).
    pub fn skip_damaged(&mut self, ranges: Vec<(u64, u64)>, config: &LogConfig) -> Result<()> {
        self.log.skip_ranges(ranges);
        self.rebuild_indexes_privately(config)
    }

    /// Checks the indexes against Kafka's invariants; `Err(CorruptIndex)` says which.
    pub fn sanity_check(&self) -> Result<()> {
        self.offset_index.sanity_check()?;
        self.time_index.sanity_check()?;
        self.txn_index.sanity_check()
    }

    /// Kafka's `truncateTo`: removes every record with offset >= `offset`; returns bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64> {
        let mapping = self.translate_offset(offset, 0)?;
        self.offset_index.truncate_to(offset)?;
        self.time_index.truncate_to(offset)?;
        self.txn_index.truncate_to(offset)?;
        // A full index may have been truncated: give it room again.
        self.offset_index.resize(self.max_index_size)?;
        self.time_index.resize(self.max_index_size)?;
        let Some(mapping) = mapping else { return Ok(0) };
        let truncated = self.log.truncate_to(mapping.position)?;
        if self.log.size_in_bytes() == 0 {
            self.rolling_based_timestamp = None;
        }
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp_and_offset_so_far = None;
        self.load_largest_timestamp()?;
        Ok(truncated)
    }

    /// Time since the segment's first batch (or its creation) for time-based rolling.
    pub fn time_waited_for_roll(
        &mut self,
        now: i64,
        max_timestamp_in_messages: i64,
    ) -> Result<i64> {
        if self.rolling_based_timestamp.is_none() && self.log.size_in_bytes() > 0 {
            self.rolling_based_timestamp = self
                .log
                .read_header(0, self.max_batch_size)?
                .map(|h| h.max_timestamp);
        }
        Ok(match self.rolling_based_timestamp {
            Some(t) if t >= 0 => max_timestamp_in_messages - t,
            _ => now - self.created_ms,
        })
    }

    /// Kafka's `shouldRoll`: size, time, a full index, or an offset beyond 32 bits relative.
    pub fn should_roll(&mut self, params: &RollParams) -> Result<bool> {
        let reached_roll_ms = self
            .time_waited_for_roll(params.now, params.max_timestamp_in_messages)?
            > params.max_segment_ms - self.rolling_jitter_ms;
        let size = self.log.size_in_bytes();
        Ok(size
            > params
                .max_segment_bytes
                .saturating_sub(params.messages_size as u64)
            || (size > 0 && reached_roll_ms)
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || !self.can_convert_to_relative_offset(params.max_offset_in_messages))
    }

    /// The aborted transactions overlapping `[fetch_offset, upper_bound_offset)` in this segment.
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<TxnIndexSearchResult> {
        let mut result = self
            .txn_index
            .collect_aborted_txns(fetch_offset, upper_bound_offset)?;
        for txn in &self.in_memory_aborted {
            // Kafka's rule per entry: overlapping the fetch, and complete once an entry's last
            // stable offset reaches the upper bound.
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                result.aborted.push(*txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                result.is_complete = true;
            }
        }
        Ok(result)
    }

    /// Keeps an aborted transaction in memory for a read-only segment, unless its index has it.
    pub fn add_in_memory_aborted_txn(&mut self, txn: AbortedTxn) -> Result<()> {
        let known = self.txn_index.all_aborted_txns()?;
        let same =
            |t: &AbortedTxn| t.producer_id == txn.producer_id && t.first_offset == txn.first_offset;
        if !known.iter().any(same) && !self.in_memory_aborted.iter().any(same) {
            self.in_memory_aborted.push(txn);
        }
        Ok(())
    }

    /// Records an aborted transaction that completed in this segment.
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> Result<()> {
        self.txn_index.append(txn)
    }

    /// Kafka's `onBecomeInactiveSegment`: final time index entry, then trim indexes and log.
    pub fn on_become_inactive_segment(&mut self) -> Result<()> {
        let max_ts = self.max_timestamp_and_offset();
        self.time_index
            .maybe_append(max_ts.timestamp, max_ts.offset, true)?;
        self.offset_index.trim_to_valid_size()?;
        self.time_index.trim_to_valid_size()?;
        Ok(())
    }

    pub fn flush(&self) -> Result<()> {
        self.log.flush()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// Closes the segment: a writable one gets its final time index entry and trimmed indexes.
    pub fn close(&mut self) -> Result<()> {
        if self.is_writable() {
            let max_ts = self.max_timestamp_and_offset();
            // A trimmed index of an older segment has no room for it; Kafka swallows that
            // append's failure on close too (the entry only speeds up lookups).
            if !self.time_index.is_full() {
                self.time_index
                    .maybe_append(max_ts.timestamp, max_ts.offset, true)?;
            }
            self.offset_index.close()?;
            self.time_index.close()?;
            self.txn_index.close()?;
            self.log.flush()?;
        }
        Ok(())
    }

    /// Renames all four files from `old_suffix` to `new_suffix` (Kafka's `changeFileSuffixes`).
    pub fn change_file_suffixes(&mut self, old_suffix: &str, new_suffix: &str) -> Result<()> {
        fn renamed(path: &Path, old_suffix: &str, new_suffix: &str) -> PathBuf {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let stem = name.strip_suffix(old_suffix).unwrap_or(name);
            path.with_file_name(format!("{stem}{new_suffix}"))
        }
        if !self.is_writable() {
            return Err(Error::ReadOnly(format!(
                "segment {} is read-only",
                self.log.path().display()
            )));
        }
        let log_path = renamed(self.log.path(), old_suffix, new_suffix);
        self.log.rename_to(&log_path)?;
        let p = renamed(self.offset_index.file(), old_suffix, new_suffix);
        self.offset_index.rename_to(&p)?;
        let p = renamed(self.time_index.file(), old_suffix, new_suffix);
        self.time_index.rename_to(&p)?;
        let p = renamed(self.txn_index.path(), old_suffix, new_suffix);
        self.txn_index.rename_to(&p)?;
        Ok(())
    }

    pub fn has_suffix(&self, suffix: &str) -> bool {
        self.log.path().to_string_lossy().ends_with(suffix)
    }

    /// Deletes all four files (missing ones are fine, as in Kafka's `deleteIfExists`).
    pub fn delete(mut self) -> Result<()> {
        self.log.delete()?;
        self.offset_index.delete()?;
        self.time_index.delete()?;
        self.txn_index.delete()?;
        Ok(())
    }
}

/// Kafka's `LogSegmentTest`: append, read, translate, truncate, recover and roll on one segment.
#[cfg(test)]
mod log_segment_test {
    use super::*;
    use crate::record::file_records::headers_in;
    use crate::testutil::{batch_at, offsets_of, values_of};

    fn config(index_interval_bytes: usize) -> LogConfig {
        LogConfig {
            index_interval_bytes,
            max_index_size: 1024,
            ..LogConfig::default()
        }
    }

    fn create(dir: &Path, base_offset: i64, index_interval_bytes: usize) -> LogSegment {
        LogSegment::open(dir, base_offset, &config(index_interval_bytes), true, "", 0).unwrap()
    }

    /// Appends a batch of `n` records at `offset` with timestamps `ts, ts+1, ...`.
    fn append(seg: &mut LogSegment, offset: i64, n: i64, ts: i64) {
        let stamps: Vec<i64> = (0..n).map(|i| ts + i).collect();
        seg.append(offset + n - 1, &batch_at(offset, &stamps))
            .unwrap();
    }

    #[test]
    fn indexes_rebuilt_for_a_read_only_view_are_private_and_only_as_large_as_their_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = create(dir.path(), 0, 1);
        for i in 0..20 {
            append(&mut live, i * 2, 2, 1_000 + i);
        }
        live.flush().unwrap();
        // The writer still holds its pre-allocated indexes (a running broker's active segment),
        // and, for the second view, they are gone altogether.
        for missing in [false, true] {
            if missing {
                std::fs::remove_file(dir.path().join("00000000000000000000.index")).unwrap();
            }
            let view = LogSegment::open(dir.path(), 0, &config(1), false, "", 0).unwrap();
            for (file, length, entries) in [
                (
                    view.offset_index().file(),
                    view.offset_index().length(),
                    view.offset_index().entries() * 8,
                ),
                (
                    view.time_index().file(),
                    view.time_index().length(),
                    view.time_index().entries() * 12,
                ),
            ] {
                assert!(!file.starts_with(dir.path()), "{file:?} is private");
                assert!(
                    entries > 0 && length == entries as u64,
                    "{file:?}: {length} bytes, {entries} of entries"
                );
                assert_eq!(std::fs::metadata(file).unwrap().len(), length);
            }
            assert_eq!(view.translate_offset(25, 0).unwrap().unwrap().offset, 25);
            assert_eq!(
                view.find_offset_by_timestamp(1_010, 0)
                    .unwrap()
                    .unwrap()
                    .offset,
                19
            );
        }
    }

    #[test]
    fn read_on_empty_segment_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let seg = create(dir.path(), 40, 10);
        assert!(seg.read(40, 300, None, false).unwrap().is_none());
        assert_eq!(seg.read_next_offset().unwrap(), 40);
    }

    #[test]
    fn read_before_first_offset_returns_the_first_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 40, 10);
        append(&mut seg, 50, 3, 1_000);
        let read = seg.read(41, 300, None, false).unwrap().unwrap();
        assert_eq!(offsets_of(&read.records), vec![(50, 52)]);
        assert_eq!(read.fetch_offset_metadata.relative_position_in_segment, 0);
    }

    #[test]
    fn read_after_last_offset_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 40, 10);
        append(&mut seg, 50, 3, 1_000);
        assert!(seg.read(53, 200, None, false).unwrap().is_none());
    }

    #[test]
    fn read_from_the_middle_of_a_batch_returns_the_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 40, 10);
        append(&mut seg, 50, 2, 1_000);
        append(&mut seg, 60, 2, 2_000);
        let read = seg.read(61, 1_000, None, false).unwrap().unwrap();
        assert_eq!(offsets_of(&read.records), vec![(60, 61)]);
        assert_eq!(values_of(&read.records), ["v60", "v61"]);
    }

    #[test]
    fn read_respects_max_size_max_position_and_min_one_message() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 10);
        append(&mut seg, 0, 2, 1_000);
        let first_size = seg.size();
        append(&mut seg, 2, 2, 2_000);
        // Too small for the first batch: a cut-short slice, flagged incomplete, as Kafka's...
        let read = seg.read(0, 10, None, false).unwrap().unwrap();
        assert_eq!(read.records.len(), 10);
        assert!(read.first_entry_incomplete);
        // ... unless one message is always wanted.
        let read = seg.read(0, 10, None, true).unwrap().unwrap();
        assert_eq!(offsets_of(&read.records), vec![(0, 1)]);
        // The max position bounds what is read, as the high watermark does.
        let read = seg
            .read(0, 10_000, Some(first_size), false)
            .unwrap()
            .unwrap();
        assert_eq!(offsets_of(&read.records), vec![(0, 1)]);
        let read = seg.read(0, 10_000, None, false).unwrap().unwrap();
        assert_eq!(offsets_of(&read.records), vec![(0, 1), (2, 3)]);
    }

    #[test]
    fn translate_offset_finds_the_batch_holding_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 1);
        for i in 0..10 {
            append(&mut seg, i * 3, 3, 1_000 + i);
        }
        let positions: Vec<u64> =
            headers_in(&seg.log().read_range(0, seg.size() as usize).unwrap())
                .map(|h| h.unwrap().position)
                .collect();
        for offset in 0..30 {
            let found = seg.translate_offset(offset, 0).unwrap().unwrap();
            assert_eq!(
                found.offset,
                (offset / 3) * 3 + 2,
                "last offset of its batch"
            );
            assert_eq!(found.position, positions[(offset / 3) as usize]);
        }
        assert!(seg.translate_offset(30, 0).unwrap().is_none());
    }

    #[test]
    fn append_beyond_relative_offset_range_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 10);
        let far = i64::from(i32::MAX) + 1;
        let err = seg.append(far, &batch_at(far, &[1])).unwrap_err();
        assert!(matches!(err, Error::OffsetOverflow(_)), "{err}");
        assert_eq!(seg.size(), 0, "nothing written");
        assert!(!seg.can_convert_to_relative_offset(-1));
    }

    #[test]
    fn truncate_removes_the_batches_from_an_offset_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 40, 1);
        for i in 0..10 {
            append(&mut seg, 40 + i * 2, 2, 1_000 + i * 10);
        }
        let removed = seg.truncate_to(50).unwrap();
        assert!(removed > 0);
        assert_eq!(seg.read_next_offset().unwrap(), 50);
        assert!(seg.read(50, 1_000, None, false).unwrap().is_none());
        let read = seg.read(40, 10_000, None, false).unwrap().unwrap();
        assert_eq!(offsets_of(&read.records).last(), Some(&(48, 49)));
        assert!(seg.offset_index().last_offset() < 50);
        assert!(seg.time_index().last_entry().offset < 50);
        // The largest timestamp is recomputed from what is left.
        assert_eq!(seg.largest_timestamp().unwrap(), 1_041);
        // Appending after a truncation continues where it was cut.
        append(&mut seg, 50, 1, 5_000);
        assert_eq!(seg.read_next_offset().unwrap(), 51);
    }

    #[test]
    fn truncate_to_the_base_offset_empties_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 40, 1);
        append(&mut seg, 40, 2, 1_000);
        append(&mut seg, 42, 2, 2_000);
        seg.truncate_to(0).unwrap();
        assert_eq!(seg.size(), 0);
        assert_eq!(seg.offset_index().entries(), 0);
        assert_eq!(seg.time_index().entries(), 0);
        assert_eq!(seg.read_next_offset().unwrap(), 40);
        // An empty segment measures time-based rolling from its creation again.
        assert_eq!(seg.time_waited_for_roll(500, 10_000).unwrap(), 500);
    }

    #[test]
    fn find_offset_by_timestamp_uses_the_time_index_then_scans() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 40, 1);
        for i in 0..5 {
            append(&mut seg, 40 + i * 2, 2, 100 * (i + 1));
        }
        let found = |ts: i64| seg.find_offset_by_timestamp(ts, 40).unwrap();
        assert_eq!(found(0).map(|t| (t.timestamp, t.offset)), Some((100, 40)));
        assert_eq!(found(101).map(|t| (t.timestamp, t.offset)), Some((101, 41)));
        assert_eq!(found(150).map(|t| (t.timestamp, t.offset)), Some((200, 42)));
        assert_eq!(found(501).map(|t| (t.timestamp, t.offset)), Some((501, 49)));
        assert_eq!(found(502), None);
        // A starting offset past the first match moves the answer on.
        let later = seg.find_offset_by_timestamp(0, 45).unwrap().unwrap();
        assert_eq!((later.timestamp, later.offset), (301, 45));
    }

    #[test]
    fn recovery_rebuilds_a_corrupt_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 1);
        for i in 0..20 {
            append(&mut seg, i, 1, 1_000 + i);
        }
        let entries = seg.offset_index().entries();
        assert!(entries > 5);
        seg.flush().unwrap();
        // Garble the offset index file behind the segment's back, then reopen it.
        let index = seg.offset_index().file().to_path_buf();
        drop(seg);
        let mut bytes = std::fs::read(&index).unwrap();
        for b in bytes.iter_mut().take(8 * entries) {
            *b = 0xff;
        }
        std::fs::write(&index, bytes).unwrap();
        let mut seg = create(dir.path(), 0, 1);
        assert!(seg.sanity_check().is_err());
        let mut seen = 0;
        let mut count = |_: &Batch<'_>| {
            seen += 1;
            Ok(())
        };
        assert_eq!(seg.recover(&mut count).unwrap(), 0);
        assert_eq!(seen, 20);
        seg.sanity_check().unwrap();
        for i in 0..20 {
            assert_eq!(seg.translate_offset(i, 0).unwrap().unwrap().offset, i);
        }
        assert_eq!(seg.offset_index().entries(), entries);
    }

    #[test]
    fn recovery_truncates_a_corrupt_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 1);
        for i in 0..10 {
            append(&mut seg, i * 2, 2, 1_000 + i);
        }
        let valid = seg.size();
        // A torn write: the start of a batch, then garbage.
        let mut torn = batch_at(20, &[5_000, 5_001]);
        let n = torn.len();
        torn[n - 3..].copy_from_slice(&[1, 2, 3]);
        seg.append(21, &torn).unwrap();
        let truncated = seg.recover(&mut |_| Ok(())).unwrap();
        assert_eq!(truncated, n as u64);
        assert_eq!(seg.size(), valid);
        assert_eq!(seg.read_next_offset().unwrap(), 20);
        assert_eq!(seg.largest_timestamp().unwrap(), 1_010);
    }

    #[test]
    fn recovery_refuses_a_batch_outside_the_segment_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 100, 1);
        // Written below the base offset (as a bad copy would); recover keeps nothing of it.
        seg.log.append(&batch_at(10, &[1])).unwrap();
        assert!(seg.recover(&mut |_| Ok(())).unwrap() > 0);
        assert_eq!(seg.size(), 0);
    }

    #[test]
    fn should_roll_on_size_time_and_offset_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 10);
        let params = |bytes: u64, now: i64, max_ts: i64, max_offset: i64| RollParams {
            max_segment_ms: 1_000,
            max_segment_bytes: bytes,
            max_timestamp_in_messages: max_ts,
            max_offset_in_messages: max_offset,
            messages_size: 100,
            now,
        };
        // An empty segment rolls on neither size nor time.
        assert!(!seg
            .should_roll(&params(1 << 20, 10_000, 10_000, 0))
            .unwrap());
        append(&mut seg, 0, 2, 5_000);
        assert!(!seg.should_roll(&params(1 << 20, 5_000, 5_500, 2)).unwrap());
        // Time: measured from the first batch's timestamp, not the clock.
        assert!(!seg.should_roll(&params(1 << 20, 0, 6_001, 2)).unwrap());
        assert!(seg.should_roll(&params(1 << 20, 0, 6_002, 2)).unwrap());
        // Size: the next append would pass segment.bytes.
        assert!(seg
            .should_roll(&params(seg.size() + 99, 5_000, 5_500, 2))
            .unwrap());
        // Offsets that no longer fit 32 bits relative to the base offset.
        assert!(seg
            .should_roll(&params(1 << 20, 5_000, 5_500, i64::from(i32::MAX) + 1))
            .unwrap());
        // Jitter shortens the time limit.
        seg.set_rolling_jitter_ms(600);
        assert!(seg.should_roll(&params(1 << 20, 0, 5_500, 2)).unwrap());
    }

    #[test]
    fn reopen_finds_the_same_next_offset_and_largest_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 0, 1);
        for i in 0..5 {
            append(&mut seg, i * 3, 3, 1_000 * (i + 1));
        }
        seg.close().unwrap();
        drop(seg);
        let mut seg = create(dir.path(), 0, 1);
        assert_eq!(seg.read_next_offset().unwrap(), 15);
        assert_eq!(seg.largest_timestamp().unwrap(), 5_002);
        // Read-only, the same answers without writing anything.
        let ro = LogSegment::open(dir.path(), 0, &config(1), false, "", 0).unwrap();
        assert_eq!(ro.read_next_offset().unwrap(), 15);
        assert_eq!(ro.largest_timestamp_ro().unwrap(), 5_002);
    }

    #[test]
    fn change_file_suffixes_renames_all_four_files_and_delete_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = create(dir.path(), 7, 10);
        append(&mut seg, 7, 1, 1);
        seg.change_file_suffixes("", ".deleted").unwrap();
        assert!(seg.has_suffix(".deleted"));
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let stem = filename_prefix_from_offset(7);
        let expected = [".index", ".log", ".timeindex"]
            .map(|s| format!("{stem}{s}.deleted"))
            .to_vec();
        assert!(names.iter().all(|n| n.ends_with(".deleted")), "{names:?}");
        for e in &expected {
            assert!(names.contains(e), "{names:?}");
        }
        seg.delete().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
