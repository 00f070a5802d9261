//! The partition log (Kafka's `UnifiedLog` with `LogLoader`): an ordered set of segments with the
//! log start offset, log end offset, high watermark and last stable offset; leader and follower
//! appends, isolation-aware reads, rolling, retention, truncation and recovery.

pub mod loader;
pub mod reader;
pub mod retention;
pub mod segments;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::index::txn::AbortedTxn;
use crate::index::OffsetPosition;
use crate::record::batch::{
    set_base_offset, set_max_timestamp, set_partition_leader_epoch, Batch, DefaultBatch,
    LAST_OFFSET_DELTA_OFFSET, MAGIC_V2, NO_TIMESTAMP,
};
use crate::record::builder::{BatchBuilder, BatchOptions};
use crate::record::codec::Compression;
use crate::record::file_records::TimestampAndOffset;
use crate::record::record::TimestampType;
use crate::segment::{FetchDataInfo, LogOffsetMetadata, LogSegment, RollParams};
use segments::LogSegments;

/// Batches written anew for an append, and each one's (position, size) in them.
type RebuiltBatches = (Vec<u8>, Vec<(usize, usize)>);

/// Kafka's `FetchIsolation`: how far a read may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchIsolation {
    LogEnd,
    HighWatermark,
    TxnCommitted,
}

impl FetchIsolation {
    /// Kafka's `FetchIsolation` names and its consumers' `isolation.level` values, in any case
    /// (Kafka's `IsolationLevel` is spelt `READ_COMMITTED` too).
    pub fn from_name(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "log_end" => Ok(FetchIsolation::LogEnd),
            "high_watermark" | "read_uncommitted" => Ok(FetchIsolation::HighWatermark),
            "committed" | "txn_committed" | "read_committed" => Ok(FetchIsolation::TxnCommitted),
            _ => Err(Error::InvalidArgument(format!(
                "isolation '{name}': one of log_end, high_watermark (or read_uncommitted), \
                 txn_committed (or read_committed, committed)"
            ))),
        }
    }

    /// A consumer's `isolation.level` (Kafka's `IsolationLevel`): read_uncommitted or
    /// read_committed; only a replica's fetch reads to the log end.
    pub fn from_consumer_level(name: &str) -> Result<Self> {
        match Self::from_name(name)? {
            FetchIsolation::LogEnd => Err(Error::InvalidArgument(format!(
                "isolation '{name}': a consumer's is read_uncommitted or read_committed (Kafka's \
                 isolation.level)"
            ))),
            isolation => Ok(isolation),
        }
    }
}

pub use loader::{DamageAction, DamagedRange, OnCorruption};
pub use producer_state::{AppendOrigin, ProducerStateEntry};

/// Kafka's `LogAppendInfo`, trimmed to what a caller of this library uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// -1 unless the topic stamps LogAppendTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    pub record_count: usize,
    pub valid_bytes: usize,
    /// True when an idempotent producer retried a batch the log already has: nothing was written
    /// and the offsets are those of the original append.
    pub duplicate: bool,
}

/// What the stamped batches of one append span (the offsets and timestamps of `LogAppendInfo`).
#[derive(Debug, Clone, Copy)]
struct AppendSummary {
    first_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    record_count: usize,
}

/// Kafka's ListOffsets special timestamps.
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// The last offset in tiered (remote) storage; a log without it has none (offset -1).
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;
/// The first offset not yet copied to tiered storage; a log without it has none (offset -1).
pub const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;

/// How the log learns the time; tests and simulations substitute their own clock.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    })
}

/// Options of `Log::open` beyond the topic config.
#[derive(Clone)]
pub struct LogOptions {
    pub config: LogConfig,
    pub read_only: bool,
    /// Create the directory and an empty log when it does not exist.
    pub create: bool,
    /// A lone leader's high watermark follows its log end offset, as Kafka's does with a
    /// replication factor of 1; turn off to drive the high watermark by hand.
    pub single_replica: bool,
    /// What the open does with damage beyond a torn tail of the last segment (see `loader`).
    pub on_corruption: OnCorruption,
    pub clock: Clock,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            config: LogConfig::default(),
            read_only: true,
            create: false,
            single_replica: true,
            on_corruption: OnCorruption::Error,
            clock: system_clock(),
        }
    }
}

/// Everything behind the log's lock.
#[derive(Debug)]
pub(crate) struct LogState {
    pub(crate) segments: LogSegments,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: LogOffsetMetadata,
    pub(crate) high_watermark: LogOffsetMetadata,
    pub(crate) recovery_point: i64,
    pub(crate) producer_state: producer_state::ProducerStateManager,
    pub(crate) leader_epoch_cache: epoch::LeaderEpochFileCache,
    pub(crate) unflushed_messages: i64,
    pub(crate) closed: bool,
    /// What a closed log still answers about its segments (base offsets, bytes): closing drops
    /// the segments, and with them their file descriptors and maps.
    pub(crate) closed_segments: Option<(Vec<i64>, u64)>,
    /// The one-writer lock of a writable log's folder; dropped (released) on close.
    pub(crate) writer_lock: Option<crate::datadir::WriterLock>,
}

pub mod checkpoint;
pub mod epoch;
pub mod producer_state;

#[cfg(test)]
mod damage_tests;
#[cfg(test)]
mod disk_full_tests;
#[cfg(test)]
mod every_byte_tests;
#[cfg(test)]
mod loader_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unified_log_tests;

/// A partition log over one `<topic>-<partition>` directory.
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    read_only: bool,
    single_replica: bool,
    clock: Clock,
    state: RwLock<LogState>,
    /// Bytes truncated from torn tails when the log was opened (recovery or the read-only view).
    recovered_bytes_truncated: u64,
    /// Damage the open skipped, removed or found missing (`LogOptions::on_corruption`).
    damaged_ranges: Vec<DamagedRange>,
    /// This partition's entry in the log dir's `replication-offset-checkpoint` when opened.
    checkpointed_high_watermark: Option<i64>,
    /// This partition's entry in the log dir's `recovery-point-offset-checkpoint` when opened.
    checkpointed_recovery_point: Option<i64>,
    /// The log end when opened (what `tail_loss` compares the recovery point with).
    log_end_when_opened: i64,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Log {
    /// Opens the log in `dir` (see `loader`): read-only opens change nothing on disk.
    pub fn open(dir: impl AsRef<Path>, options: LogOptions) -> Result<Log> {
        loader::load(dir.as_ref(), options)
    }

    pub(crate) fn from_parts(
        dir: PathBuf,
        options: &LogOptions,
        state: LogState,
        recovered_bytes_truncated: u64,
        damaged_ranges: Vec<DamagedRange>,
        checkpointed_high_watermark: Option<i64>,
        checkpointed_recovery_point: Option<i64>,
    ) -> Log {
        let log_end_when_opened = state.log_end_offset.message_offset;
        Log {
            dir,
            config: options.config.clone(),
            read_only: options.read_only,
            single_replica: options.single_replica,
            clock: options.clock.clone(),
            state: RwLock::new(state),
            recovered_bytes_truncated,
            damaged_ranges,
            checkpointed_high_watermark,
            checkpointed_recovery_point,
            log_end_when_opened,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
    /// Whether this log's segments can be read through memory maps: opened read-only, and no
    /// writer (a running broker, a writable `Log` anywhere) holds its folder now, so none can
    /// truncate a segment under a map of it (a mapped page cut off faults the process).
    pub fn segments_can_be_mapped(&self) -> bool {
        self.read_only && !crate::datadir::partition_has_writer(self.dir())
    }
    pub fn now(&self) -> i64 {
        (self.clock)()
    }
    pub fn recovered_bytes_truncated(&self) -> u64 {
        self.recovered_bytes_truncated
    }
    /// What the open found beyond a torn tail and did about it: ranges skipped (`Skip`),
    /// removed (`Truncate`), or offsets missing. Empty for an undamaged log.
    pub fn damaged_ranges(&self) -> &[DamagedRange] {
        &self.damaged_ranges
    }
    /// The high watermark the broker last checkpointed for this partition, if its log dir has
    /// one; `high_watermark` may be ahead of it (a lone replica's, see `LogOptions`).
    pub fn checkpointed_high_watermark(&self) -> Option<i64> {
        self.checkpointed_high_watermark
    }
    /// The recovery point the broker last checkpointed for this partition, if its log dir has
    /// one: the offset below which it had flushed every record to disk.
    pub fn checkpointed_recovery_point(&self) -> Option<i64> {
        self.checkpointed_recovery_point
    }
    /// Records lost past the log end the open found, when the recovery-point checkpoint says
    /// more were flushed to disk than the segments held: a last segment emptied or cut on a
    /// batch boundary since, which reads as a shorter, healthy log. Kafka serves it silently; it
    /// is not refused here either (a follower's truncation before its next checkpoint leaves the
    /// same), only told.
    pub fn tail_loss(&self) -> Option<String> {
        let recovery_point = self.checkpointed_recovery_point?;
        let log_end = self.log_end_when_opened;
        (recovery_point > log_end).then(|| {
            // Bytes there that did not validate are not a cut file: say which it is.
            let why = match self.recovered_bytes_truncated {
                0 => "(cut or emptied since?)".to_string(),
                n => format!(
                    "(its last {n} bytes are there but do not validate: left out, as Kafka's \
                     recovery leaves them)"
                ),
            };
            let missing = match recovery_point - log_end {
                1 => format!("offset {log_end} is"),
                n => format!("{n} offsets, {log_end} to {}, are", recovery_point - 1),
            };
            let last_flushed = recovery_point - 1;
            format!(
                "the log ends before offset {log_end}, but its log dir's \
                 recovery-point-offset-checkpoint says offsets up to {last_flushed} were flushed \
                 to disk: {missing} missing from the end of the last segment {why}",
            )
        })
    }

    pub(crate) fn read_state(&self) -> RwLockReadGuard<'_, LogState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The state for a read of the log's data: a closed log's files may be gone (a writable
    /// close trims and releases them), so reading one is an error, not whatever is left.
    pub(crate) fn readable_state(&self) -> Result<RwLockReadGuard<'_, LogState>> {
        let st = self.read_state();
        if st.closed {
            return Err(Error::IllegalState(format!(
                "log {} is closed",
                self.dir.display()
            )));
        }
        Ok(st)
    }

    /// An error once the log is closed (as entering a closed file in Python is).
    pub fn ensure_open(&self) -> Result<()> {
        self.readable_state().map(drop)
    }

    pub(crate) fn write_state(&self) -> Result<RwLockWriteGuard<'_, LogState>> {
        if self.read_only {
            return Err(Error::ReadOnly(format!(
                "log {} is opened read-only",
                self.dir.display()
            )));
        }
        let st = self.state.write().unwrap_or_else(|p| p.into_inner());
        if st.closed {
            return Err(Error::IllegalState(format!(
                "log {} is closed",
                self.dir.display()
            )));
        }
        if let Some(lock) = &st.writer_lock {
            lock.refuse_in_a_fork(&format!("log {}", self.dir.display()))?;
        }
        Ok(st)
    }

    // ----- offsets -----

    pub fn log_start_offset(&self) -> i64 {
        self.read_state().log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.read_state().log_end_offset.message_offset
    }
    pub fn log_end_offset_metadata(&self) -> LogOffsetMetadata {
        self.read_state().log_end_offset
    }
    pub fn high_watermark(&self) -> i64 {
        self.read_state().high_watermark.message_offset
    }
    pub fn high_watermark_metadata(&self) -> LogOffsetMetadata {
        self.read_state().high_watermark
    }
    pub fn recovery_point(&self) -> i64 {
        self.read_state().recovery_point
    }
    /// Kafka's `lastStableOffset`: the first offset of the earliest open transaction if it is
    /// below the high watermark, else the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        let st = self.read_state();
        Self::last_stable_offset_of(&st)
    }
    fn last_stable_offset_of(st: &LogState) -> i64 {
        let hw = st.high_watermark.message_offset;
        match Self::first_unstable_offset_of(st) {
            Some(first) if first < hw => first,
            _ => hw,
        }
    }
    /// Kafka's `firstUnstableOffset` (`maybeIncrementFirstUnstableOffset`): the first offset of
    /// the earliest open transaction; one whose start DeleteRecords or retention removed is
    /// raised to the log start offset, and turned into offset metadata as Kafka does, by a read
    /// there, which lands on the base offset of the batch holding it (a transaction left open
    /// below a log start of 5 inside a batch of offsets 3..12: 3, as 4.4 and 3.9 brokers answer).
    fn first_unstable_offset_of(st: &LogState) -> Option<i64> {
        let first = st.producer_state.first_unstable_offset()?;
        let start = st.log_start_offset;
        if first >= start {
            return Some(first);
        }
        if start >= st.log_end_offset.message_offset {
            return Some(st.log_end_offset.message_offset);
        }
        let batch_base = st.segments.from_offset(start).find_map(|segment| {
            let found = segment.translate_offset(start, 0).ok().flatten()?;
            let header = segment
                .log()
                .read_header(found.position, segment.max_batch_size())
                .ok()
                .flatten()?;
            Some(if header.magic >= crate::record::batch::MAGIC_V2 {
                header.base_offset
            } else {
                start
            })
        });
        Some(batch_base.unwrap_or(start))
    }
    /// The last offset (exclusive) a consumer with `isolation` may read: the log end, the high
    /// watermark, or the last stable offset.
    pub fn fetch_upper_bound(&self, isolation: FetchIsolation) -> i64 {
        let st = self.read_state();
        Self::max_offset_metadata(&st, isolation).message_offset
    }
    pub fn first_unstable_offset(&self) -> Option<i64> {
        Self::first_unstable_offset_of(&self.read_state())
    }
    /// Kafka's check on where a read starts (`Log.read`): from the log start offset to the log
    /// end offset, where a read gets nothing; past either it is out of range. `None` is the log
    /// start offset.
    pub fn checked_read_start(&self, start: Option<i64>) -> Result<i64> {
        Self::read_start_in(&self.read_state(), start)
    }
    pub(crate) fn read_start_in(st: &LogState, start: Option<i64>) -> Result<i64> {
        let (log_start, log_end) = (st.log_start_offset, st.log_end_offset.message_offset);
        let start = start.unwrap_or(log_start);
        if start < log_start || start > log_end {
            return Err(Error::OffsetOutOfRange {
                offset: start,
                start: log_start,
                end: log_end,
            });
        }
        Ok(start)
    }
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        let st = self.read_state();
        match &st.closed_segments {
            Some((bases, _)) => bases.clone(),
            None => st.segments.base_offsets(),
        }
    }
    pub fn number_of_segments(&self) -> usize {
        let st = self.read_state();
        match &st.closed_segments {
            Some((bases, _)) => bases.len(),
            None => st.segments.len(),
        }
    }
    pub fn size_in_bytes(&self) -> u64 {
        let st = self.read_state();
        match &st.closed_segments {
            Some((_, size)) => *size,
            None => st.segments.size_in_bytes(),
        }
    }
    /// The topic id from `partition.metadata`, as a broker writes it (base64url).
    pub fn topic_id(&self) -> Result<Option<String>> {
        Ok(checkpoint::PartitionMetadataFile::in_dir(&self.dir)
            .read()?
            .map(|u| u.to_string()))
    }

    /// Kafka's `ProducerStateManager.activeProducers`: the state of each producer the log
    /// remembers, by producer id.
    pub fn active_producers(&self) -> Vec<ProducerStateEntry> {
        let st = self.read_state();
        let mut out: Vec<_> = st
            .producer_state
            .active_producers()
            .values()
            .cloned()
            .collect();
        out.sort_by_key(|e| e.producer_id);
        out
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.read_state().leader_epoch_cache.latest_epoch()
    }

    /// Kafka's `updateHighWatermark`: sets it, clamped to [log start offset, log end offset].
    pub fn update_high_watermark(&self, hw: i64) -> Result<i64> {
        let mut st = self.write_state()?;
        Ok(Self::update_high_watermark_in(&mut st, hw))
    }

    fn update_high_watermark_in(st: &mut LogState, hw: i64) -> i64 {
        let leo = st.log_end_offset;
        let new = if hw >= leo.message_offset {
            leo
        } else if hw <= st.log_start_offset {
            LogOffsetMetadata::offset_only(st.log_start_offset)
        } else {
            Self::offset_metadata_in(st, hw)
        };
        st.high_watermark = new;
        st.producer_state
            .on_high_watermark_updated(new.message_offset);
        new.message_offset
    }

    /// Kafka's `maybeIncrementHighWatermark`: moves it forward only; returns the old value when it
    /// moved. A new value beyond the log end offset is an error, as in Kafka.
    pub fn maybe_increment_high_watermark(&self, hw: i64) -> Result<Option<i64>> {
        let mut st = self.write_state()?;
        Self::maybe_increment_high_watermark_in(&mut st, hw)
    }

    fn maybe_increment_high_watermark_in(st: &mut LogState, hw: i64) -> Result<Option<i64>> {
        if hw > st.log_end_offset.message_offset {
            return Err(Error::IllegalState(format!(
                "high watermark {hw} update exceeds the log end offset {}",
                st.log_end_offset.message_offset
            )));
        }
        let old = st.high_watermark;
        if hw > old.message_offset || (hw == old.message_offset && old.message_offset_only()) {
            st.high_watermark = Self::offset_metadata_in(st, hw);
            st.producer_state.on_high_watermark_updated(hw);
            Ok(Some(old.message_offset))
        } else {
            Ok(None)
        }
    }

    /// Kafka's `convertToOffsetMetadataOrThrow`: the segment and byte position of `offset`.
    fn offset_metadata_in(st: &LogState, offset: i64) -> LogOffsetMetadata {
        if offset == st.log_end_offset.message_offset {
            return st.log_end_offset;
        }
        match st
            .segments
            .floor(offset)
            .map(|s| (s.base_offset(), s.translate_offset(offset, 0)))
        {
            Some((base, Ok(Some(pos)))) => LogOffsetMetadata {
                message_offset: offset,
                segment_base_offset: base,
                relative_position_in_segment: pos.position as i64,
            },
            _ => LogOffsetMetadata::offset_only(offset),
        }
    }

    // ----- append -----

    /// The leader epoch an append as the leader stamps unless told otherwise: the latest epoch
    /// of the log's leader epoch cache (its `leader-epoch-checkpoint`), 0 for a log without one.
    /// A broker's leader never appends below an epoch its log holds: a lower one makes Kafka's
    /// `LeaderEpochFileCache` drop every entry from that epoch up, the history that
    /// OffsetsForLeaderEpoch and replica truncation rely on.
    pub fn current_leader_epoch(&self) -> i32 {
        self.read_state()
            .leader_epoch_cache
            .latest_epoch()
            .unwrap_or(0)
    }

    /// Kafka's `appendAsLeader`: validates the batches, assigns offsets (and LogAppendTime),
    /// checks idempotent/transactional producer state, rolls if needed, writes, moves the log
    /// end offset. `records` holds whole v2 batches back to back.
    pub fn append_as_leader(&self, records: &[u8], leader_epoch: i32) -> Result<LogAppendInfo> {
        self.append(records, AppendOrigin::Client, Some(leader_epoch), true)
    }

    /// Kafka's `appendAsFollower`: batches keep their offsets, which must follow the log end offset.
    pub fn append_as_follower(&self, records: &[u8]) -> Result<LogAppendInfo> {
        self.append(records, AppendOrigin::Replication, None, false)
    }

    /// A COMMIT/ABORT control batch written as the transaction coordinator does.
    pub fn append_txn_marker(&self, records: &[u8], leader_epoch: i32) -> Result<LogAppendInfo> {
        self.append(records, AppendOrigin::Coordinator, Some(leader_epoch), true)
    }

    /// Kafka's `UnifiedLog.append`, as its named steps: validate the batches as received, stamp
    /// offsets (and the leader epoch, LogAppendTime) into a copy, check producer state, roll if
    /// needed, write, then update leader epochs, producer state, the transaction index and the
    /// log end offset. The stamped batches are parsed once and that view serves every later step.
    fn append(
        &self,
        records: &[u8],
        origin: AppendOrigin,
        leader_epoch: Option<i32>,
        assign_offsets: bool,
    ) -> Result<LogAppendInfo> {
        // Kafka's epochs are 0 and up; -1 (RecordBatch.NO_PARTITION_LEADER_EPOCH) is "none".
        // Anything else would be stamped into the batches and read back as damage.
        if let Some(epoch) = leader_epoch.filter(|e| *e < -1) {
            return Err(Error::InvalidArgument(format!(
                "leader epoch {epoch}: a leader epoch is 0 or more, or -1 for none"
            )));
        }
        let mut st = self.write_state()?;
        let now = self.now();
        let config = &self.config;
        let bounds = self.analyze_and_validate_records(records, origin, now)?;
        let stamp_log_append_time = config.message_timestamp_type == TimestampType::LogAppendTime;
        // A follower keeps the leader's bytes; a leader may rewrite them in the topic's codec.
        let rebuilt = match assign_offsets {
            true => self.recompressed(records, &bounds)?,
            false => None,
        };
        let (mut buf, bounds) = rebuilt.unwrap_or_else(|| (records.to_vec(), bounds));
        if assign_offsets {
            Self::assign_offsets(
                &mut buf,
                &bounds,
                st.log_end_offset.message_offset,
                leader_epoch,
                stamp_log_append_time.then_some(now),
            )?;
        }
        let batches = bounds
            .iter()
            .map(|&(pos, size)| DefaultBatch::new(&buf[pos..pos + size]))
            .collect::<Result<Vec<_>>>()?;
        let summary = Self::summarize(&batches, st.log_end_offset.message_offset, assign_offsets)?;

        let pending = match st.producer_state.check_and_prepare(&batches, origin)? {
            // A retried batch is answered with its original offsets and nothing is written.
            producer_state::AppendCheck::Duplicate(meta) => {
                return Ok(LogAppendInfo {
                    first_offset: meta.first_offset(),
                    last_offset: meta.last_offset,
                    max_timestamp: meta.timestamp,
                    offset_of_max_timestamp: meta.last_offset,
                    log_append_time: -1,
                    log_start_offset: st.log_start_offset,
                    record_count: (meta.offset_delta + 1) as usize,
                    valid_bytes: 0,
                    duplicate: true,
                });
            }
            producer_state::AppendCheck::Append(pending) => pending,
        };

        self.maybe_roll(
            &mut st,
            buf.len(),
            summary.max_timestamp,
            summary.first_offset,
            summary.last_offset,
            now,
        )?;
        Self::assign_leader_epochs(&mut st, &batches, leader_epoch)?;
        let active = st
            .segments
            .active_mut()
            .ok_or_else(|| Error::IllegalState("log has no active segment".into()))?;
        active.append(summary.last_offset, &buf)?;
        let (active_base, active_size) = (active.base_offset(), active.size());
        Self::update_producer_state(&mut st, pending, summary.last_offset)?;
        self.update_log_end_offset(&mut st, summary.last_offset + 1, active_base, active_size)?;
        st.unflushed_messages += summary.record_count as i64;
        if st.unflushed_messages >= config.flush_messages {
            Self::flush_in(&mut st, summary.last_offset + 1)?;
        }
        Ok(LogAppendInfo {
            first_offset: summary.first_offset,
            last_offset: summary.last_offset,
            max_timestamp: summary.max_timestamp,
            offset_of_max_timestamp: summary.offset_of_max_timestamp,
            log_append_time: if stamp_log_append_time { now } else { -1 },
            log_start_offset: st.log_start_offset,
            record_count: summary.record_count,
            valid_bytes: buf.len(),
            duplicate: false,
        })
    }

    /// Kafka's `analyzeAndValidateRecords`: every batch whole, magic 2, within
    /// `max.message.bytes`, its CRC valid and its records valid (see
    /// [`validate_records`](Self::validate_records)). Returns each batch's (position, size).
    fn analyze_and_validate_records(
        &self,
        records: &[u8],
        origin: AppendOrigin,
        now: i64,
    ) -> Result<Vec<(usize, usize)>> {
        let config = &self.config;
        let mut bounds = Vec::new();
        let mut pos = 0usize;
        while pos < records.len() {
            let batch = Batch::parse(&records[pos..]).map_err(|e| e.at(None, pos as u64))?;
            let size = batch.size_in_bytes();
            if batch.magic() != MAGIC_V2 {
                return Err(Error::InvalidRecord(format!(
                    "batch at {pos} has magic {}; only magic 2 can be appended",
                    batch.magic()
                )));
            }
            if size > config.max_message_bytes {
                return Err(Error::RecordTooLarge(format!(
                    "batch of {size} bytes at {pos} is larger than max.message.bytes ({})",
                    config.max_message_bytes
                )));
            }
            batch.ensure_valid().map_err(|e| e.at(None, pos as u64))?;
            self.validate_records(&batch, pos, origin, now)
                .map_err(|e| match e {
                    Error::CorruptRecord { .. } => e.at(None, pos as u64),
                    other => other,
                })?;
            bounds.push((pos, size));
            pos += size;
        }
        if bounds.is_empty() {
            return Err(Error::InvalidArgument("nothing to append".into()));
        }
        Ok(bounds)
    }

    /// Kafka's `LogValidator` for a leader under a `compression.type` other than `producer`:
    /// a batch in another codec is rebuilt in the topic's, with its producer fields and its
    /// records (timestamps, keys, values, headers; offsets consecutive from 0), as Kafka's
    /// `buildRecordsAndAssignOffsets` does; a control batch written uncompressed stays so. `None`
    /// when every batch already is in the topic's codec. The rebuilt batches are held to
    /// `max.message.bytes` again, since they may have grown.
    fn recompressed(
        &self,
        records: &[u8],
        bounds: &[(usize, usize)],
    ) -> Result<Option<RebuiltBatches>> {
        let Some(target) = self.config.compression_type else {
            return Ok(None);
        };
        // Each batch with whether it is rebuilt, decided once.
        let batches = bounds
            .iter()
            .map(|&(pos, size)| {
                let batch = DefaultBatch::new(&records[pos..pos + size])?;
                let source = batch.compression()?;
                let rebuild =
                    source != target && !(source == Compression::None && batch.is_control());
                Ok((batch, rebuild))
            })
            .collect::<Result<Vec<_>>>()?;
        if !batches.iter().any(|(_, rebuild)| *rebuild) {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(records.len());
        let mut rebuilt_bounds = Vec::with_capacity(batches.len());
        for (batch, rebuild) in &batches {
            let start = out.len();
            if *rebuild {
                out.extend_from_slice(&self.rebuild_batch(batch, target)?);
            } else {
                out.extend_from_slice(batch.bytes());
            }
            let size = out.len() - start;
            if size > self.config.max_message_bytes {
                return Err(Error::RecordTooLarge(format!(
                    "batch of {size} bytes once compressed as the topic's compression.type \
                     ({}) is larger than max.message.bytes ({})",
                    target.name(),
                    self.config.max_message_bytes
                )));
            }
            rebuilt_bounds.push((start, size));
        }
        Ok(Some((out, rebuilt_bounds)))
    }

    /// One batch's records built again in `codec`, its header fields kept.
    fn rebuild_batch(&self, batch: &DefaultBatch<'_>, codec: Compression) -> Result<Vec<u8>> {
        let mut builder = BatchBuilder::new(BatchOptions {
            base_offset: batch.base_offset(),
            compression: codec,
            timestamp_type: TimestampType::CreateTime,
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            base_sequence: batch.base_sequence(),
            is_transactional: batch.is_transactional(),
            is_control: batch.is_control(),
            partition_leader_epoch: batch.partition_leader_epoch(),
            delete_horizon_ms: None,
            log_append_time: None,
        })
        .compression_level(self.config.compression_level(codec));
        let mut scratch = Vec::new();
        let payload =
            batch.records_payload(&mut scratch, self.config.max_decompressed_batch_bytes)?;
        for record in batch.records_in(payload) {
            let record = record?;
            let headers: Vec<(&str, Option<&[u8]>)> = record
                .headers
                .iter()
                .map(|h| (h.key.as_ref(), h.value))
                .collect();
            builder.append(record.timestamp, record.key, record.value, &headers)?;
        }
        builder.build()
    }

    /// Kafka's `LogValidator.assignOffsetsNonCompressed` for a leader: consecutive offsets from
    /// the log end offset, the leader epoch, and LogAppendTime as the max timestamp. The fields
    /// written are outside the CRC (offsets, epoch) or stamped as Kafka does (LogAppendTime).
    fn assign_offsets(
        buf: &mut [u8],
        bounds: &[(usize, usize)],
        log_end_offset: i64,
        leader_epoch: Option<i32>,
        log_append_time: Option<i64>,
    ) -> Result<()> {
        let mut next_offset = log_end_offset;
        for &(pos, size) in bounds {
            let bytes = &buf[pos..pos + size];
            let delta = &bytes[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4];
            let last_offset_delta = i32::from_be_bytes(delta.try_into().expect("4 bytes"));
            // The offsets must fit below i64::MAX (a log restarted near it with
            // truncate_fully_and_start_at); checked before any batch is stamped.
            next_offset = next_offset
                .checked_add(i64::from(last_offset_delta) + 1)
                .ok_or_else(|| {
                    Error::InvalidOffset(format!(
                        "appending at offset {log_end_offset} would run past the largest \
                         offset {}",
                        i64::MAX
                    ))
                })?;
        }
        let mut next_offset = log_end_offset;
        for &(pos, size) in bounds {
            let bytes = &mut buf[pos..pos + size];
            set_base_offset(bytes, next_offset);
            if let Some(epoch) = leader_epoch {
                set_partition_leader_epoch(bytes, epoch);
            }
            if let Some(now) = log_append_time {
                set_max_timestamp(bytes, TimestampType::LogAppendTime, now);
            }
            let delta = &bytes[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4];
            let last_offset_delta = i32::from_be_bytes(delta.try_into().expect("4 bytes"));
            next_offset += i64::from(last_offset_delta) + 1;
        }
        Ok(())
    }

    /// The offsets and timestamps of the stamped batches (Kafka's `LogAppendInfo` fields); a
    /// follower's batches must start after the log end offset.
    fn summarize(
        batches: &[DefaultBatch<'_>],
        log_end_offset: i64,
        assigned: bool,
    ) -> Result<AppendSummary> {
        let mut next_offset = log_end_offset;
        let mut summary = AppendSummary {
            first_offset: -1,
            last_offset: -1,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            record_count: 0,
        };
        for b in batches {
            if !assigned && b.base_offset() < next_offset {
                return Err(Error::InvalidOffset(format!(
                    "follower append at offset {} is not after the log end offset {next_offset}",
                    b.base_offset()
                )));
            }
            if summary.first_offset < 0 {
                summary.first_offset = b.base_offset();
            }
            if b.max_timestamp() > summary.max_timestamp {
                summary.max_timestamp = b.max_timestamp();
                summary.offset_of_max_timestamp = b.last_offset();
            }
            summary.record_count += b.records_count() as usize;
            next_offset = b.last_offset() + 1;
        }
        summary.last_offset = next_offset - 1;
        Ok(summary)
    }

    /// Kafka's `maybeAssignEpochStartOffset` per batch: the leader's epoch (or, for a follower,
    /// the batch's own) starts at the batch's base offset.
    fn assign_leader_epochs(
        st: &mut LogState,
        batches: &[DefaultBatch<'_>],
        leader_epoch: Option<i32>,
    ) -> Result<()> {
        for b in batches {
            let epoch = leader_epoch
                .filter(|e| *e >= 0)
                .unwrap_or(b.partition_leader_epoch());
            if epoch >= 0 {
                st.leader_epoch_cache.assign(epoch, b.base_offset())?;
            }
        }
        Ok(())
    }

    /// Applies the validated producer state once the batches are written; transactions the
    /// append's markers completed get their aborted entries in the active segment's `.txnindex`.
    fn update_producer_state(
        st: &mut LogState,
        pending: producer_state::PendingAppend,
        last_offset: i64,
    ) -> Result<()> {
        let mut aborted = Vec::new();
        for completed in st.producer_state.apply(pending)? {
            let lso = st.producer_state.last_stable_offset(&completed);
            aborted.extend(completed.to_aborted_txn(lso));
            st.producer_state.complete_txn(&completed)?;
        }
        st.producer_state.update_map_end_offset(last_offset + 1);
        if !aborted.is_empty() {
            let active = st
                .segments
                .active_mut()
                .ok_or_else(|| Error::IllegalState("log has no active segment".into()))?;
            for txn in aborted {
                active.append_aborted_txn(txn)?;
            }
        }
        Ok(())
    }

    /// Kafka's `updateLogEndOffset`: publishes the new log end offset; a lone leader's high
    /// watermark follows it.
    fn update_log_end_offset(
        &self,
        st: &mut LogState,
        log_end_offset: i64,
        segment_base_offset: i64,
        segment_size: u64,
    ) -> Result<()> {
        st.log_end_offset = LogOffsetMetadata {
            message_offset: log_end_offset,
            segment_base_offset,
            relative_position_in_segment: segment_size as i64,
        };
        if self.single_replica {
            Self::maybe_increment_high_watermark_in(st, log_end_offset)?;
        }
        Ok(())
    }

    /// Kafka's `LogValidator` checks that need the records: sequential offset deltas, record
    /// count, and CreateTime timestamps within the allowed skew of the broker's clock.
    fn validate_records(
        &self,
        batch: &Batch<'_>,
        position: usize,
        origin: AppendOrigin,
        now: i64,
    ) -> Result<()> {
        let Batch::V2(b) = batch else { return Ok(()) };
        // A producer's batch has offsets from 0 until the leader assigns them: named by where
        // it is in what was appended (its own base offset said "offset 0" of any append).
        let which = if origin == AppendOrigin::Client {
            format!("the batch at byte {position} of the append")
        } else {
            format!("the batch at offset {}", b.base_offset())
        };
        if origin == AppendOrigin::Client {
            if b.producer_id() >= 0 && b.base_sequence() < 0 {
                return Err(Error::InvalidRecord(format!(
                    "Invalid sequence number {} in record batch with producerId {}",
                    b.base_sequence(),
                    b.producer_id()
                )));
            }
            if self.config.message_timestamp_type == TimestampType::CreateTime
                && b.timestamp_type() == TimestampType::LogAppendTime
            {
                return Err(Error::InvalidRecord(format!(
                    "{which} has timestamp type LogAppendTime: a producer's batch carries \
                     CreateTime (the topic's message.timestamp.type is CreateTime)"
                )));
            }
        }
        let mut scratch = Vec::new();
        let payload = b.records_payload(&mut scratch, self.config.max_decompressed_batch_bytes)?;
        let mut count = 0i64;
        let check_timestamps = origin == AppendOrigin::Client
            && self.config.message_timestamp_type == TimestampType::CreateTime
            && !b.is_control();
        // Kafka's `validateKey`, for every leader append.
        let keys_required =
            self.config.cleanup_policy_compact && origin != AppendOrigin::Replication;
        for record in b.records_in(payload) {
            let record = record?;
            if keys_required && record.key.is_none() {
                return Err(Error::InvalidRecord(format!(
                    "Compacted topic cannot accept message without key (record {count} of \
                     {which}; cleanup.policy=compact)"
                )));
            }
            if origin == AppendOrigin::Client && record.offset - b.base_offset() != count {
                return Err(Error::InvalidRecord(format!(
                    "record {} of {which} has offset delta {}; deltas must be consecutive from 0",
                    count,
                    record.offset - b.base_offset()
                )));
            }
            // A record without a timestamp (-1) is not held to the range, as in Kafka.
            if check_timestamps && record.timestamp != NO_TIMESTAMP {
                let ts = record.timestamp;
                if ts < now.saturating_sub(self.config.timestamp_before_max_ms())
                    || ts > now.saturating_add(self.config.timestamp_after_max_ms())
                {
                    return Err(Error::InvalidRecord(format!(
                        "timestamp {ts} of record at offset delta {count} is out of the allowed range \
                         [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] (now = {now})"
                    )));
                }
            }
            count += 1;
        }
        if count == 0 {
            return Err(Error::InvalidRecord(format!("{which} holds no records")));
        }
        if origin == AppendOrigin::Client && b.last_offset_delta() as i64 != count - 1 {
            return Err(Error::InvalidRecord(format!(
                "{which} declares last offset delta {} for {count} records",
                b.last_offset_delta()
            )));
        }
        if b.is_control() && origin == AppendOrigin::Client {
            return Err(Error::InvalidRecord(
                "clients cannot append control batches; use append_txn_marker".into(),
            ));
        }
        Ok(())
    }

    fn maybe_roll(
        &self,
        st: &mut LogState,
        messages_size: usize,
        max_timestamp: i64,
        first_offset: i64,
        max_offset: i64,
        now: i64,
    ) -> Result<()> {
        let params = RollParams {
            max_segment_ms: self.config.segment_ms,
            max_segment_bytes: self.config.segment_bytes,
            max_timestamp_in_messages: max_timestamp,
            max_offset_in_messages: max_offset,
            messages_size,
            now,
        };
        let active = st
            .segments
            .active_mut()
            .ok_or_else(|| Error::IllegalState("log has no active segment".into()))?;
        if active.should_roll(&params)? {
            // Kafka rolls at the append's first offset (the log end offset for a leader; a
            // follower's batch may start later, e.g. past the 32-bit relative range).
            self.roll_in(st, Some(first_offset))?;
        }
        Ok(())
    }

    /// Kafka's `roll`: a new active segment starting at the log end offset.
    pub fn roll(&self) -> Result<i64> {
        let mut st = self.write_state()?;
        self.roll_in(&mut st, None)
    }

    pub(crate) fn roll_in(&self, st: &mut LogState, expected_base: Option<i64>) -> Result<i64> {
        let new_base = expected_base
            .unwrap_or(0)
            .max(st.log_end_offset.message_offset);
        if let Some(active) = st.segments.active() {
            if active.base_offset() == new_base && active.size() == 0 {
                // The empty active segment already starts here (Kafka replaces it the same way).
                return Ok(new_base);
            }
            if active.base_offset() >= new_base {
                return Err(Error::IllegalState(format!(
                    "cannot roll to offset {new_base}: the active segment starts at {}",
                    active.base_offset()
                )));
            }
        }
        if let Some(active) = st.segments.active_mut() {
            active.on_become_inactive_segment()?;
        }
        let mut segment =
            LogSegment::open(&self.dir, new_base, &self.config, true, "", self.now())?;
        segment.set_rolling_jitter_ms(self.config.segment_jitter_ms);
        st.segments.add(segment);
        st.producer_state.update_map_end_offset(new_base);
        st.producer_state.take_snapshot()?;
        // Kafka flushes the finished segment in the background; this library does it in line.
        Self::flush_in(st, new_base)?;
        Ok(new_base)
    }

    // ----- read -----

    pub(crate) fn max_offset_metadata(
        st: &LogState,
        isolation: FetchIsolation,
    ) -> LogOffsetMetadata {
        match isolation {
            FetchIsolation::LogEnd => st.log_end_offset,
            FetchIsolation::HighWatermark => st.high_watermark,
            FetchIsolation::TxnCommitted => {
                let lso = Self::last_stable_offset_of(st);
                if lso == st.high_watermark.message_offset {
                    st.high_watermark
                } else {
                    Self::offset_metadata_in(st, lso)
                }
            }
        }
    }

    /// Kafka's `UnifiedLog.read`: whole batches from the one holding `start_offset`, up to
    /// `max_length` bytes (at least one batch when `min_one_message`), bounded by the isolation's
    /// offset; with `TxnCommitted` also the aborted transactions the fetch overlaps.
    pub fn read(
        &self,
        start_offset: i64,
        max_length: usize,
        isolation: FetchIsolation,
        min_one_message: bool,
    ) -> Result<FetchDataInfo> {
        let st = self.readable_state()?;
        let leo = st.log_end_offset;
        Self::read_start_in(&st, Some(start_offset))?;
        let max_offset = Self::max_offset_metadata(&st, isolation);
        let empty = |offset: LogOffsetMetadata| FetchDataInfo {
            fetch_offset_metadata: offset,
            records: Vec::new(),
            first_entry_incomplete: false,
            aborted_transactions: (isolation == FetchIsolation::TxnCommitted).then(Vec::new),
        };
        if start_offset >= max_offset.message_offset {
            return Ok(empty(Self::offset_metadata_in(&st, start_offset)));
        }
        for segment in st.segments.from_offset(start_offset) {
            let max_position = if segment.base_offset() == max_offset.segment_base_offset {
                Some(max_offset.relative_position_in_segment as u64)
            } else if segment.base_offset() > max_offset.message_offset {
                break;
            } else if max_offset.message_offset_only() {
                // Unknown position (e.g. a high watermark loaded from a checkpoint): cut by offset below.
                None
            } else {
                Some(segment.size())
            };
            if let Some(mut info) =
                segment.read(start_offset, max_length, max_position, min_one_message)?
            {
                if max_offset.message_offset_only() {
                    info.records = cut_at_offset(&info.records, max_offset.message_offset)?;
                }
                if info.records.is_empty() && !info.first_entry_incomplete {
                    continue;
                }
                if isolation == FetchIsolation::TxnCommitted {
                    // Kafka's `addAbortedTransactions`: up to the first index entry past the
                    // bytes read, else the next segment or the log end; an aborted transaction
                    // just past the fetch is listed too (the consumer's next fetch may need it).
                    let fetch_start = OffsetPosition {
                        offset: info.fetch_offset_metadata.message_offset,
                        position: info.fetch_offset_metadata.relative_position_in_segment as i32,
                    };
                    let fetch_size = i32::try_from(info.records.len()).unwrap_or(i32::MAX);
                    let upper = segment
                        .offset_index()
                        .fetch_upper_bound_offset(fetch_start, fetch_size)
                        .map(|entry| entry.offset)
                        .or_else(|| {
                            st.segments
                                .higher(segment.base_offset())
                                .map(LogSegment::base_offset)
                        })
                        .unwrap_or(leo.message_offset);
                    info.aborted_transactions =
                        Some(Self::collect_aborted(&st, start_offset, upper)?);
                }
                return Ok(info);
            }
        }
        Ok(empty(Self::offset_metadata_in(&st, start_offset)))
    }

    /// Kafka's `collectAbortedTransactions`: every aborted transaction overlapping
    /// [start_offset, upper_bound_offset), from the segment holding `start_offset` on.
    pub(crate) fn collect_aborted(
        st: &LogState,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<Vec<AbortedTxn>> {
        let mut out = Vec::new();
        // An aborted transaction's entry lives in the segment of its ABORT marker, which can be
        // past the fetch's upper bound, so the walk stops only when a search is complete.
        for segment in st.segments.from_offset(start_offset) {
            let result = segment.collect_aborted_txns(start_offset, upper_bound_offset)?;
            out.extend(result.aborted);
            if result.is_complete {
                break;
            }
        }
        Ok(out)
    }

    pub fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<Vec<AbortedTxn>> {
        let st = self.readable_state()?;
        Self::collect_aborted(&st, start_offset, upper_bound_offset)
    }

    /// Kafka's `fetchOffsetByTimestamp` (ListOffsets): EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP
    /// (-3), EARLIEST_LOCAL (-4), LATEST_TIERED (-5) and EARLIEST_PENDING_UPLOAD (-6) (offset -1
    /// and leader epoch -1, as Kafka answers for a log without tiered storage), or the first
    /// offset whose timestamp is >= `timestamp`.
    /// Returns Kafka's `TimestampAndOffset` (timestamp -1 for EARLIEST/LATEST); None when no
    /// record is that late.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>> {
        let st = self.readable_state()?;
        let epoch_at = |offset: i64| st.leader_epoch_cache.epoch_for_offset(offset);
        match timestamp {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
                let o = st.log_start_offset;
                Ok(Some(TimestampAndOffset {
                    timestamp: -1,
                    offset: o,
                    leader_epoch: epoch_at(o),
                }))
            }
            LATEST_TIMESTAMP => {
                let o = st.log_end_offset.message_offset;
                Ok(Some(TimestampAndOffset {
                    timestamp: -1,
                    offset: o,
                    leader_epoch: st.leader_epoch_cache.latest_epoch(),
                }))
            }
            LATEST_TIERED_TIMESTAMP | EARLIEST_PENDING_UPLOAD_TIMESTAMP => {
                Ok(Some(TimestampAndOffset {
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: Some(-1),
                }))
            }
            MAX_TIMESTAMP => {
                let mut best: Option<(i64, i64)> = None; // (max timestamp, segment base)
                for s in st.segments.iter() {
                    let ts = s.max_timestamp_so_far_ro();
                    if ts >= 0 && best.is_none_or(|(b, _)| ts > b) {
                        best = Some((ts, s.base_offset()));
                    }
                }
                let Some((ts, base)) = best else {
                    return Ok(None);
                };
                let seg = st.segments.get(base).expect("segment just seen");
                // Kafka answers with the record that has it even below the log start (after
                // deleteRecords): its search starts at the segment's max-timestamp entry.
                let found = seg.find_offset_by_timestamp(ts, i64::MIN)?;
                Ok(found.map(|t| TimestampAndOffset {
                    leader_epoch: t.leader_epoch.or_else(|| epoch_at(t.offset)),
                    ..t
                }))
            }
            ts if ts < 0 => Err(Error::InvalidArgument(format!(
                "unknown special timestamp {ts}"
            ))),
            ts => {
                for s in st.segments.iter() {
                    if s.base_offset() < st.log_start_offset
                        && st
                            .segments
                            .higher(s.base_offset())
                            .is_some_and(|n| n.base_offset() <= st.log_start_offset)
                    {
                        continue;
                    }
                    // Kafka searches the first segment whose `largestTimestamp` reaches the
                    // target, and only it: an empty segment (one the cleaner emptied) stands for
                    // its file's mtime, and answers nothing even when later segments would.
                    if s.largest_timestamp_ro()? < ts {
                        continue;
                    }
                    let found = s.find_offset_by_timestamp(ts, st.log_start_offset)?;
                    return Ok(found.map(|t| TimestampAndOffset {
                        leader_epoch: t.leader_epoch.or_else(|| epoch_at(t.offset)),
                        ..t
                    }));
                }
                Ok(None)
            }
        }
    }

    /// Kafka's `Partition.fetchOffsetForTimestamp`: ListOffsets as a consumer reading with
    /// `isolation` asks it. LATEST is the last offset it can fetch (the high watermark, or the
    /// last stable offset for read_committed); a record found at or past that offset is not
    /// fetchable yet, so None. `None` answers as [`Self::offset_for_timestamp`] (to the log end,
    /// as a replica asks).
    pub fn list_offsets(
        &self,
        timestamp: i64,
        isolation: Option<FetchIsolation>,
    ) -> Result<Option<TimestampAndOffset>> {
        let found = self.offset_for_timestamp(timestamp)?;
        let Some(isolation) = isolation else {
            return Ok(found);
        };
        let last_fetchable = self.fetch_upper_bound(isolation);
        Ok(match timestamp {
            LATEST_TIMESTAMP => found.map(|t| TimestampAndOffset {
                offset: last_fetchable,
                ..t
            }),
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => found,
            _ => found.filter(|t| t.offset < last_fetchable),
        })
    }

    // ----- truncation -----

    /// Kafka's `truncateTo`: removes every record at or after `target_offset`, and the records
    /// before it in the batch that holds it. Returns whether anything was removed.
    pub fn truncate_to(&self, target_offset: i64) -> Result<bool> {
        if target_offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot truncate to a negative offset ({target_offset})"
            )));
        }
        let mut st = self.write_state()?;
        if target_offset >= st.log_end_offset.message_offset {
            return Ok(false);
        }
        let first_base = st.segments.first().map_or(0, LogSegment::base_offset);
        if first_base > target_offset {
            drop(st);
            self.truncate_fully_and_start_at(target_offset)?;
            return Ok(true);
        }
        for base in st
            .segments
            .base_offsets()
            .into_iter()
            .filter(|b| *b > target_offset)
        {
            if let Some(seg) = st.segments.remove(base) {
                self.delete_segment_files(seg, true)?;
            }
        }
        let active = st
            .segments
            .active_mut()
            .expect("a segment at or below the target offset");
        active.truncate_to(target_offset)?;
        active.offset_index_resize(self.config.max_index_size)?;
        // Segments lose whole batches, so a target inside a batch takes the records before it
        // too. Kafka then sets the log end to the target all the same, leaving offsets no record
        // has below it; here the log end is the first offset really gone, so the log stays
        // without gaps (which its loader checks) and the next append fills from there.
        let next = active.read_next_offset()?;
        let (base, size) = (active.base_offset(), active.size());
        st.log_end_offset = LogOffsetMetadata {
            message_offset: next,
            segment_base_offset: base,
            relative_position_in_segment: size as i64,
        };
        st.recovery_point = st.recovery_point.min(next);
        // Kafka's `min(targetOffset, logStartOffset)`, with the target the log really ends at:
        // cut inside a batch, the log ends below the target, and a log start left above that
        // end (after `delete_records` into the batch) made a log that no longer opened.
        st.log_start_offset = st.log_start_offset.min(next);
        if st.high_watermark.message_offset > next {
            Self::update_high_watermark_in(&mut st, next);
        }
        st.leader_epoch_cache.truncate_from_end(next)?;
        let start = st.log_start_offset;
        let now = self.now();
        loader::rebuild_producer_state(&mut st, start, next, now, false)?;
        // Written now, as Kafka's `LogManager.truncateTo` checkpoints the dir's recovery points
        // once it truncated: a crash before close left checkpoints past the log end (the
        // recovery point, a log start lowered here), which a load and `verify` report as flushed
        // offsets lost, though they were only truncated (a black-box tester's SIGKILL).
        loader::write_checkpoints(&[(self.dir(), &st)])?;
        Ok(true)
    }

    /// Kafka's `truncateFullyAndStartAt`: deletes every segment and starts empty at `new_offset`.
    pub fn truncate_fully_and_start_at(&self, new_offset: i64) -> Result<()> {
        // Checked before anything is deleted: a segment's name is its base offset, never negative.
        if new_offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot start the log at a negative offset ({new_offset})"
            )));
        }
        let mut st = self.write_state()?;
        for base in st.segments.base_offsets() {
            if let Some(seg) = st.segments.remove(base) {
                self.delete_segment_files(seg, true)?;
            }
        }
        let segment = LogSegment::open(&self.dir, new_offset, &self.config, true, "", self.now())?;
        st.segments.add(segment);
        st.log_start_offset = new_offset;
        st.log_end_offset = LogOffsetMetadata {
            message_offset: new_offset,
            segment_base_offset: new_offset,
            relative_position_in_segment: 0,
        };
        st.high_watermark = st.log_end_offset;
        st.recovery_point = new_offset;
        st.leader_epoch_cache.clear_and_flush()?;
        st.producer_state.truncate_fully_and_start_at(new_offset)?;
        // As in `truncate_to`: checkpoints past the new end read as loss after a crash.
        loader::write_checkpoints(&[(self.dir(), &st)])?;
        Ok(())
    }

    // ----- flush and close -----

    /// Kafka's `flush`: fsyncs segments up to the log end offset and moves the recovery point.
    pub fn flush(&self) -> Result<()> {
        let mut st = self.write_state()?;
        let leo = st.log_end_offset.message_offset;
        Self::flush_in(&mut st, leo)
    }

    fn flush_in(st: &mut LogState, offset: i64) -> Result<()> {
        if offset <= st.recovery_point {
            return Ok(());
        }
        let from = st.recovery_point;
        for segment in st.segments.from_offset(from) {
            if segment.base_offset() >= offset {
                break;
            }
            segment.flush()?;
        }
        st.leader_epoch_cache.flush()?;
        st.recovery_point = offset;
        st.unflushed_messages = 0;
        Ok(())
    }

    /// Flushes everything, writes the producer snapshot, the checkpoints and trims the indexes.
    pub fn close(&self) -> Result<()> {
        Self::close_all([self])
    }

    /// [`Self::close`] for several logs, writing their log dirs' shared checkpoint files once
    /// for all of them. A log whose files fail to close stays open; the first error is returned
    /// once the others are closed (a failed checkpoint write closes them all the same).
    pub fn close_all<'a>(logs: impl IntoIterator<Item = &'a Log>) -> Result<()> {
        let mut outcome = Ok(());
        let mut closing: Vec<(&Log, RwLockWriteGuard<'_, LogState>)> = Vec::new();
        for log in logs {
            if closing.iter().any(|(l, _)| std::ptr::eq(*l, log)) {
                continue; // listed twice: its lock is held already
            }
            let mut st = log.state.write().unwrap_or_else(|p| p.into_inner());
            if st.closed {
                continue;
            }
            let forked = st
                .writer_lock
                .as_ref()
                .is_some_and(|lock| !lock.taken_by_this_process());
            if log.read_only || forked {
                // A child's copy of its parent's writer closes without a write: the files are
                // the parent's, which goes on writing them.
                Self::release_segments(&mut st);
                st.writer_lock = None;
                continue;
            }
            match Self::close_files(&mut st) {
                Ok(()) => closing.push((log, st)),
                Err(e) => {
                    if outcome.is_ok() {
                        outcome = Err(e);
                    }
                }
            }
        }
        let entries: Vec<(&Path, &LogState)> = closing
            .iter()
            .map(|(l, st)| (l.dir.as_path(), &**st))
            .collect();
        let written = loader::write_checkpoints(&entries);
        drop(entries);
        // Released even when the checkpoints fail (no descriptor left for them, a full disk):
        // the segments are flushed and closed, and a checkpoint left behind only means the next
        // open recovers from an earlier point. Held, the log could never close, nor another
        // writer open it.
        for (_, st) in &mut closing {
            Self::release_segments(st);
            st.writer_lock = None;
        }
        outcome.and(written)
    }

    /// A writable log's closing writes: everything flushed, the producer snapshot, the segments'
    /// indexes trimmed.
    fn close_files(st: &mut LogState) -> Result<()> {
        let leo = st.log_end_offset.message_offset;
        Self::flush_in(st, leo)?;
        st.producer_state.update_map_end_offset(leo);
        st.producer_state.take_snapshot()?;
        for segment in st.segments.iter_mut() {
            segment.close()?;
        }
        Ok(())
    }

    /// Marks the log closed and drops its segments (their files' descriptors and maps), keeping
    /// only what the segment accessors answer. Arrow buffers that point into a segment's map keep
    /// that map alive on their own.
    fn release_segments(st: &mut LogState) {
        st.closed_segments = Some((st.segments.base_offsets(), st.segments.size_in_bytes()));
        st.segments = LogSegments::new();
        st.closed = true;
    }

    /// Removes a segment's files: renamed `.deleted` first, then deleted now or after
    /// `file.delete.delay.ms` in the background, as Kafka's `deleteSegmentFiles`.
    pub(crate) fn delete_segment_files(
        &self,
        mut segment: LogSegment,
        immediately: bool,
    ) -> Result<()> {
        segment.change_file_suffixes("", crate::segment::DELETED_FILE_SUFFIX)?;
        let delay = self.config.file_delete_delay_ms;
        if immediately || delay <= 0 {
            return segment.delete();
        }
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(delay as u64));
            let _ = segment.delete();
        });
        Ok(())
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Keeps only the whole batches of `records` whose offsets are below `end_offset`.
fn cut_at_offset(records: &[u8], end_offset: i64) -> Result<Vec<u8>> {
    let mut keep = 0usize;
    for h in crate::record::file_records::headers_in(records) {
        let h = match h {
            Ok(h) => h,
            // A fetch may end in a partial batch; it is dropped like everything past the limit.
            Err(_) => break,
        };
        if h.last_offset >= end_offset {
            break;
        }
        keep = h.position as usize + h.size;
    }
    Ok(records[..keep].to_vec())
}
