//! Kafka's `ProducerStateManager` with `ProducerAppendInfo`, `ProducerStateEntry`, `BatchMetadata`,
//! `TxnMetadata`, `CompletedTxn` and `SnapshotFile`: per-producer idempotence and transaction state
//! of one partition, and its `<20-digit offset>.snapshot` files (snapshot format version 1).
//!
//! Snapshot layout (big-endian): version i16 (1) | crc u32 (CRC32C of everything after it) |
//! entry count i32 | entries of 46 bytes: producer_id i64, epoch i16, last_sequence i32,
//! last_offset i64, offset_delta i32, timestamp i64, coordinator_epoch i32,
//! current_txn_first_offset i64 (-1: none). Only each producer's last batch is kept on disk.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::index::txn::AbortedTxn;
use crate::log::checkpoint::atomic_write;
use crate::record::batch::{
    Batch, DefaultBatch, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
};
use crate::record::control::{ControlRecordType, EndTransactionMarker};

/// How many of a producer's latest batches are remembered for duplicate detection (the most a
/// producer may have in flight).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
pub const SNAPSHOT_FILE_SUFFIX: &str = ".snapshot";
/// `producer.id.expiration.ms`'s default (one day).
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;

const SNAPSHOT_CRC_OFFSET: usize = 2;
const SNAPSHOT_ENTRIES_OFFSET: usize = 6;
const SNAPSHOT_HEADER_SIZE: usize = 10;
const SNAPSHOT_ENTRY_SIZE: usize = 46;

/// Who is appending, which decides how much is validated (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: epoch, sequence and duplicate checks.
    Client,
    /// The group/transaction coordinator: epoch checks only (no sequences).
    Coordinator,
    /// A follower copying the leader, or log recovery: the leader already validated, so nothing
    /// fails except a non-transactional write inside an open transaction.
    Replication,
}

/// Kafka's `DefaultRecordBatch.decrementSequence`: sequences wrap from `i32::MAX` to 0.
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    // Widened so values from a corrupt snapshot cannot overflow.
    let (sequence, decrement) = (sequence as i64, decrement as i64);
    if sequence < decrement {
        (i32::MAX as i64 - (decrement - sequence) + 1) as i32
    } else {
        (sequence - decrement) as i32
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// One appended batch of a producer (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    /// `last_offset - first_offset`, also `last_seq - first_seq` modulo wrapping.
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        // Wrapping: a corrupt snapshot may pair any offset with any delta.
        self.last_offset.wrapping_sub(self.offset_delta as i64)
    }
}

/// The state of one producer id (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch of the coordinator that wrote this producer's last transaction marker.
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction.
    pub current_txn_first_offset: Option<i64>,
    /// Oldest first; at most [`NUM_BATCHES_TO_RETAIN`].
    batch_metadata: VecDeque<BatchMetadata>,
}

impl ProducerStateEntry {
    pub fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            last_timestamp: NO_TIMESTAMP,
            current_txn_first_offset: None,
            batch_metadata: VecDeque::new(),
        }
    }

    pub fn new(
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        last_timestamp: i64,
        current_txn_first_offset: Option<i64>,
        last_batch: Option<BatchMetadata>,
    ) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            last_timestamp,
            current_txn_first_offset,
            batch_metadata: last_batch.into_iter().collect(),
        }
    }

    pub fn batch_metadata(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batch_metadata.iter()
    }
    pub fn is_empty(&self) -> bool {
        self.batch_metadata.is_empty()
    }
    pub fn first_seq(&self) -> i32 {
        self.batch_metadata
            .front()
            .map_or(NO_SEQUENCE, BatchMetadata::first_seq)
    }
    pub fn last_seq(&self) -> i32 {
        self.batch_metadata
            .back()
            .map_or(NO_SEQUENCE, |b| b.last_seq)
    }
    pub fn first_data_offset(&self) -> i64 {
        self.batch_metadata
            .front()
            .map_or(-1, BatchMetadata::first_offset)
    }
    pub fn last_data_offset(&self) -> i64 {
        self.batch_metadata.back().map_or(-1, |b| b.last_offset)
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.batch_metadata.back().map_or(0, |b| b.offset_delta)
    }

    /// The cached batch with exactly this epoch and sequence range: a retried batch.
    pub fn find_duplicate_batch(
        &self,
        producer_epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        if producer_epoch != self.producer_epoch {
            return None;
        }
        self.batch_metadata
            .iter()
            .find(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
            .copied()
    }

    fn add_batch(
        &mut self,
        producer_epoch: i16,
        last_seq: i32,
        last_offset: i64,
        offset_delta: i32,
        timestamp: i64,
    ) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.add_batch_metadata(BatchMetadata {
            last_seq,
            last_offset,
            offset_delta,
            timestamp,
        });
        self.last_timestamp = timestamp;
    }

    /// A new epoch starts a new sequence space, so the cached batches no longer apply.
    fn maybe_update_producer_epoch(&mut self, producer_epoch: i16) {
        if self.producer_epoch != producer_epoch {
            self.batch_metadata.clear();
            self.producer_epoch = producer_epoch;
        }
    }

    fn add_batch_metadata(&mut self, batch: BatchMetadata) {
        if self.batch_metadata.len() == NUM_BATCHES_TO_RETAIN {
            self.batch_metadata.pop_front();
        }
        self.batch_metadata.push_back(batch);
    }

    /// Folds the result of an append (`next`) into this entry (Kafka's `update(ProducerStateEntry)`).
    fn update_from(&mut self, next: ProducerStateEntry) {
        self.maybe_update_producer_epoch(next.producer_epoch);
        for b in next.batch_metadata {
            self.add_batch_metadata(b);
        }
        self.coordinator_epoch = next.coordinator_epoch;
        self.current_txn_first_offset = next.current_txn_first_offset;
        self.last_timestamp = next.last_timestamp;
    }

    /// What a transaction marker does to the entry: the transaction is over.
    fn update_for_marker(&mut self, producer_epoch: i16, coordinator_epoch: i32, timestamp: i64) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = None;
        self.last_timestamp = timestamp;
    }
}

/// A transaction of the partition (Kafka's `TxnMetadata`); `last_offset` is its marker's offset
/// once completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: Option<i64>,
}

/// A transaction ended by a COMMIT or ABORT marker at `last_offset` (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub is_aborted: bool,
}

impl CompletedTxn {
    /// The transaction index entry for this transaction, given the LSO from
    /// [`ProducerStateManager::last_stable_offset`]; only aborted transactions are indexed.
    pub fn to_aborted_txn(&self, last_stable_offset: i64) -> Option<AbortedTxn> {
        self.is_aborted.then(|| {
            AbortedTxn::new(
                self.producer_id,
                self.first_offset,
                self.last_offset,
                last_stable_offset,
            )
        })
    }
}

/// Validates one producer's batches of an append against its state and accumulates the new state
/// without touching the manager (Kafka's `ProducerAppendInfo`).
#[derive(Debug, Clone)]
pub struct ProducerAppendInfo {
    producer_id: i64,
    origin: AppendOrigin,
    /// The state before this append.
    current: ProducerStateEntry,
    /// The state after this append's batches; starts with no batches so validation of the first
    /// batch falls back to `current`'s.
    updated: ProducerStateEntry,
    started_txns: Vec<TxnMetadata>,
}

impl ProducerAppendInfo {
    pub fn new(producer_id: i64, current: ProducerStateEntry, origin: AppendOrigin) -> Self {
        let updated = ProducerStateEntry {
            producer_id,
            batch_metadata: VecDeque::new(),
            ..current.clone()
        };
        ProducerAppendInfo {
            producer_id,
            origin,
            current,
            updated,
            started_txns: Vec::new(),
        }
    }

    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// The producer's state once this append is applied.
    pub fn to_entry(&self) -> &ProducerStateEntry {
        &self.updated
    }

    pub fn started_transactions(&self) -> &[TxnMetadata] {
        &self.started_txns
    }

    /// Validates and records one batch, which must carry its final offsets. A control batch
    /// holding a COMMIT/ABORT marker returns the transaction it ends (if any was open).
    pub fn append(&mut self, batch: &DefaultBatch) -> Result<Option<CompletedTxn>> {
        if batch.is_control() {
            // An empty control batch is a marker whose transaction was cleaned away: nothing to do.
            let Some(marker) = Batch::V2(*batch).end_txn_marker()? else {
                return Ok(None);
            };
            // The marker record's timestamp: a single-record batch's max timestamp is that record's
            // timestamp (or the log append time, which Kafka reports for the record too).
            self.append_end_txn_marker(
                marker,
                batch.producer_epoch(),
                batch.base_offset(),
                batch.max_timestamp(),
            )
        } else {
            self.append_data_batch(
                batch.producer_epoch(),
                batch.base_sequence(),
                batch.last_sequence(),
                batch.max_timestamp(),
                batch.base_offset(),
                batch.last_offset(),
                batch.is_transactional(),
            )?;
            Ok(None)
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn append_data_batch(
        &mut self,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        last_timestamp: i64,
        first_offset: i64,
        last_offset: i64,
        is_transactional: bool,
    ) -> Result<()> {
        self.check_producer_epoch(epoch, first_offset)?;
        if self.origin == AppendOrigin::Client {
            self.check_sequence(epoch, first_seq, first_offset)?;
        }
        let delta = last_offset.checked_sub(first_offset).filter(|d| *d >= 0);
        let offset_delta = delta.and_then(|d| i32::try_from(d).ok()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "batch offsets {first_offset}..{last_offset} of producer {} are invalid",
                self.producer_id
            ))
        })?;
        self.updated
            .add_batch(epoch, last_seq, last_offset, offset_delta, last_timestamp);
        match (self.updated.current_txn_first_offset, is_transactional) {
            (Some(_), false) => Err(Error::ProducerState(format!(
                "InvalidTxnState: expected a transactional write from producer {} at offset {first_offset}",
                self.producer_id
            ))),
            (None, true) => {
                self.updated.current_txn_first_offset = Some(first_offset);
                self.started_txns.push(TxnMetadata { producer_id: self.producer_id, first_offset, last_offset: None });
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Marker epochs follow transaction versions 0/1 (a marker may carry the data's epoch); the
    /// stricter TV2 rule needs the coordinator's request, which the log does not have.
    pub fn append_end_txn_marker(
        &mut self,
        marker: EndTransactionMarker,
        producer_epoch: i16,
        offset: i64,
        timestamp: i64,
    ) -> Result<Option<CompletedTxn>> {
        self.check_producer_epoch(producer_epoch, offset)?;
        if self.updated.coordinator_epoch > marker.coordinator_epoch
            && self.origin != AppendOrigin::Replication
        {
            return Err(Error::ProducerState(format!(
                "TransactionCoordinatorFenced: coordinator epoch {} of the marker for producer {} at offset {offset} \
                 is older than the current {}",
                marker.coordinator_epoch, self.producer_id, self.updated.coordinator_epoch
            )));
        }
        // A marker without data in the transaction changes no LSO and needs no index entry.
        let completed = self
            .updated
            .current_txn_first_offset
            .map(|first_offset| CompletedTxn {
                producer_id: self.producer_id,
                first_offset,
                last_offset: offset,
                is_aborted: marker.control_type == ControlRecordType::Abort,
            });
        self.updated
            .update_for_marker(producer_epoch, marker.coordinator_epoch, timestamp);
        Ok(completed)
    }

    fn check_producer_epoch(&self, producer_epoch: i16, offset: i64) -> Result<()> {
        let current = self.updated.producer_epoch;
        // A follower must accept whatever the leader wrote (Kafka only warns).
        if producer_epoch < current && self.origin != AppendOrigin::Replication {
            return Err(Error::ProducerState(format!(
                "InvalidProducerEpoch: epoch {producer_epoch} of producer {} at offset {offset} is older than the last seen epoch {current}",
                self.producer_id
            )));
        }
        Ok(())
    }

    fn check_sequence(&self, producer_epoch: i16, first_seq: i32, offset: i64) -> Result<()> {
        if producer_epoch != self.updated.producer_epoch {
            // A bumped epoch restarts sequences at 0, unless the producer was unknown (its state
            // expired or was deleted with the log), in which case any sequence is accepted.
            if first_seq != 0 && self.updated.producer_epoch != NO_PRODUCER_EPOCH {
                return Err(Error::ProducerState(format!(
                    "OutOfOrderSequence: sequence {first_seq} for the new epoch {producer_epoch} of producer {} at offset \
                     {offset} (current epoch {}) must be 0",
                    self.producer_id, self.updated.producer_epoch
                )));
            }
            return Ok(());
        }
        let current_last_seq = if !self.updated.is_empty() {
            self.updated.last_seq()
        } else if producer_epoch == self.current.producer_epoch {
            self.current.last_seq()
        } else {
            NO_SEQUENCE
        };
        // With no known epoch (all of the producer's records are gone) any sequence is accepted.
        if !(self.current.producer_epoch == NO_PRODUCER_EPOCH
            || in_sequence(current_last_seq, first_seq))
        {
            return Err(Error::ProducerState(format!(
                "OutOfOrderSequence: sequence {first_seq} of producer {} at offset {offset} does not follow its last \
                 sequence {current_last_seq}",
                self.producer_id
            )));
        }
        Ok(())
    }
}

/// What validating a client's append found.
#[derive(Debug)]
pub enum AppendCheck {
    /// A retry of a batch already in the log: answer with its offsets and append nothing.
    Duplicate(BatchMetadata),
    /// Valid; apply with [`ProducerStateManager::apply`] once the batches are written.
    Append(PendingAppend),
}

/// The validated producer state changes of one append.
#[derive(Debug, Default)]
pub struct PendingAppend {
    infos: BTreeMap<i64, ProducerAppendInfo>,
    completed_txns: Vec<CompletedTxn>,
}

impl PendingAppend {
    /// Transactions the append's markers complete, in append order.
    pub fn completed_txns(&self) -> &[CompletedTxn] {
        &self.completed_txns
    }
    pub fn producer_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.infos.keys().copied()
    }
}

/// A `.snapshot` file that could not be loaded, and why.
#[derive(Debug)]
pub struct SkippedSnapshot {
    pub path: PathBuf,
    pub error: Error,
}

/// What loading from snapshots found (Kafka only logs these).
#[derive(Debug, Default)]
pub struct SnapshotLoad {
    /// The offset of the snapshot loaded; `None` when there was none, so all state must come from
    /// replaying the log from the log start offset.
    pub loaded_offset: Option<i64>,
    /// Corrupt snapshots passed over; deleted when writable, left in place when read-only.
    pub skipped: Vec<SkippedSnapshot>,
}

/// `<20-digit zero-padded offset>.snapshot` (Kafka's `LogFileUtils.producerSnapshotFile`).
pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}{SNAPSHOT_FILE_SUFFIX}")
}

/// The offset a snapshot file name stands for; `None` for any other file.
pub fn offset_from_snapshot_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(SNAPSHOT_FILE_SUFFIX)?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Producer state of one partition (Kafka's `ProducerStateManager`).
#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    read_only: bool,
    producer_id_expiration_ms: i64,
    producers: HashMap<i64, ProducerStateEntry>,
    /// Open transactions by first offset.
    ongoing_txns: BTreeMap<i64, TxnMetadata>,
    /// Completed transactions whose markers may still be above the high watermark; they keep the
    /// first unstable offset down until the high watermark passes them.
    unreplicated_txns: BTreeMap<i64, TxnMetadata>,
    /// Snapshot files by offset.
    snapshots: BTreeMap<i64, PathBuf>,
    /// The offset up to which (exclusive) the state reflects the log.
    last_map_offset: i64,
    last_snap_offset: i64,
}

impl ProducerStateManager {
    /// Lists the partition directory's snapshots; loads nothing yet (see
    /// [`truncate_and_reload`](Self::truncate_and_reload)). Read-only never writes or deletes.
    pub fn new(dir: impl Into<PathBuf>, read_only: bool) -> Result<Self> {
        let dir = dir.into();
        let snapshots = list_snapshot_files(&dir)?;
        Ok(ProducerStateManager {
            dir,
            read_only,
            producer_id_expiration_ms: DEFAULT_PRODUCER_ID_EXPIRATION_MS,
            producers: HashMap::new(),
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
            snapshots,
            last_map_offset: 0,
            last_snap_offset: 0,
        })
    }

    /// `producer.id.expiration.ms`: producers idle this long without an open transaction expire.
    pub fn with_producer_id_expiration_ms(mut self, ms: i64) -> Self {
        self.producer_id_expiration_ms = ms;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Follows the partition directory through a rename (Kafka's `updateParentDir`).
    pub fn update_parent_dir(&mut self, dir: impl Into<PathBuf>) {
        self.dir = dir.into();
        for (offset, path) in self.snapshots.iter_mut() {
            *path = self.dir.join(snapshot_file_name(*offset));
        }
    }

    // ---- queries ----

    /// The first offset that a READ_COMMITTED reader may not yet see: the first offset of the
    /// earliest transaction that is open, or completed but not yet known to be replicated.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let undecided = self.ongoing_txns.keys().next().copied();
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        match (undecided, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first offset of the earliest open transaction, ignoring replication.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    pub fn ongoing_txns(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.ongoing_txns.values()
    }

    /// The high watermark passed these markers: their transactions no longer hold the LSO back.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.remove_unreplicated_transactions(high_watermark);
    }

    pub fn map_end_offset(&self) -> i64 {
        self.last_map_offset
    }

    pub fn update_map_end_offset(&mut self, offset: i64) {
        self.last_map_offset = offset;
    }

    pub fn active_producers(&self) -> &HashMap<i64, ProducerStateEntry> {
        &self.producers
    }

    pub fn last_entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    pub fn producer_id_count(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.unreplicated_txns.is_empty()
    }

    // ---- appends ----

    pub fn prepare_update(&self, producer_id: i64, origin: AppendOrigin) -> ProducerAppendInfo {
        let current = self
            .producers
            .get(&producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerStateEntry::empty(producer_id));
        ProducerAppendInfo::new(producer_id, current, origin)
    }

    /// Validates the batches of one append, which must already carry their final offsets (as in
    /// Kafka, where offsets are assigned before producer state is checked). Changes nothing: on
    /// `Append`, write the batches, then [`apply`](Self::apply) the result. For a client append a
    /// batch matching one of its producer's last 5 batches (same epoch and sequence range) makes
    /// the whole append a `Duplicate`. Batches without a producer id are ignored.
    pub fn check_and_prepare(
        &self,
        batches: &[DefaultBatch],
        origin: AppendOrigin,
    ) -> Result<AppendCheck> {
        let mut pending = PendingAppend::default();
        for batch in batches {
            let producer_id = batch.producer_id();
            if producer_id == NO_PRODUCER_ID {
                continue;
            }
            if origin == AppendOrigin::Client {
                let dup = self.producers.get(&producer_id).and_then(|e| {
                    e.find_duplicate_batch(
                        batch.producer_epoch(),
                        batch.base_sequence(),
                        batch.last_sequence(),
                    )
                });
                if let Some(dup) = dup {
                    return Ok(AppendCheck::Duplicate(dup));
                }
            }
            let info = pending
                .infos
                .entry(producer_id)
                .or_insert_with(|| self.prepare_update(producer_id, origin));
            if let Some(completed) = info.append(batch)? {
                pending.completed_txns.push(completed);
            }
        }
        Ok(AppendCheck::Append(pending))
    }

    /// Applies a validated append after its batches were written. Returns the transactions it
    /// completed; for each, in order, the log computes [`last_stable_offset`](Self::last_stable_offset),
    /// appends the aborted ones to the segment's transaction index, then calls
    /// [`complete_txn`](Self::complete_txn). Finally it calls `update_map_end_offset(last + 1)`.
    pub fn apply(&mut self, pending: PendingAppend) -> Result<Vec<CompletedTxn>> {
        for info in pending.infos.into_values() {
            self.update(info)?;
        }
        Ok(pending.completed_txns)
    }

    /// Folds one producer's validated append into the map (Kafka's `update`).
    pub fn update(&mut self, info: ProducerAppendInfo) -> Result<()> {
        if info.producer_id == NO_PRODUCER_ID {
            return Err(Error::InvalidArgument(
                "producer state update for the null producer id -1".into(),
            ));
        }
        for txn in &info.started_txns {
            self.ongoing_txns.insert(txn.first_offset, *txn);
        }
        match self.producers.get_mut(&info.producer_id) {
            Some(entry) => entry.update_from(info.updated),
            None => {
                self.producers.insert(info.producer_id, info.updated);
            }
        }
        Ok(())
    }

    /// Rebuilds state from one batch of the log, as recovery and snapshot replay do (Kafka's
    /// `LogSegment.updateProducerState`): no sequence or epoch checks, any completed transaction
    /// is completed at once and returned with its LSO so the caller can index it if aborted
    /// ([`CompletedTxn::to_aborted_txn`]). Advances the map end offset past the batch.
    pub fn replay_batch(&mut self, batch: &Batch) -> Result<Option<(CompletedTxn, i64)>> {
        let mut result = None;
        if let Batch::V2(b) = batch {
            if b.producer_id() != NO_PRODUCER_ID {
                let mut info = self.prepare_update(b.producer_id(), AppendOrigin::Replication);
                let completed = info.append(b)?;
                self.update(info)?;
                if let Some(c) = completed {
                    let lso = self.last_stable_offset(&c);
                    self.complete_txn(&c)?;
                    result = Some((c, lso));
                }
            }
        }
        let end = batch
            .last_offset()
            .checked_add(1)
            .ok_or_else(|| Error::corrupt("batch last offset is i64::MAX"))?;
        self.update_map_end_offset(end);
        Ok(result)
    }

    /// The LSO to record with a completed transaction in the transaction index: the first offset
    /// of the earliest transaction still open by another producer, else just past the marker.
    /// Call before [`complete_txn`](Self::complete_txn).
    pub fn last_stable_offset(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .values()
            .find(|t| t.producer_id != completed.producer_id)
            .map_or(completed.last_offset.saturating_add(1), |t| t.first_offset)
    }

    /// Marks a transaction complete; it holds the first unstable offset until the high watermark
    /// passes its marker.
    pub fn complete_txn(&mut self, completed: &CompletedTxn) -> Result<()> {
        let Some(mut txn) = self.ongoing_txns.remove(&completed.first_offset) else {
            return Err(Error::IllegalState(format!(
                "attempted to complete transaction {completed:?} in {} which was not started",
                self.dir.display()
            )));
        };
        txn.last_offset = Some(completed.last_offset);
        self.unreplicated_txns.insert(completed.first_offset, txn);
        Ok(())
    }

    // ---- expiry and truncation ----

    fn is_producer_expired(&self, now_ms: i64, entry: &ProducerStateEntry) -> bool {
        entry.current_txn_first_offset.is_none()
            && now_ms.saturating_sub(entry.last_timestamp) >= self.producer_id_expiration_ms
    }

    pub fn remove_expired_producers(&mut self, now_ms: i64) {
        let expired: Vec<i64> = self
            .producers
            .iter()
            .filter(|(_, e)| self.is_producer_expired(now_ms, e))
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            self.producers.remove(&id);
        }
    }

    /// Adds an entry, and its open transaction (Kafka's `loadProducerEntry`).
    pub fn load_producer_entry(&mut self, entry: ProducerStateEntry) {
        if let Some(first) = entry.current_txn_first_offset {
            self.ongoing_txns.insert(
                first,
                TxnMetadata {
                    producer_id: entry.producer_id,
                    first_offset: first,
                    last_offset: None,
                },
            );
        }
        self.producers.insert(entry.producer_id, entry);
    }

    /// Loads the latest snapshot, passing over (and, when writable, deleting) corrupt ones.
    /// Expired producers are dropped. With no usable snapshot the map restarts at `log_start_offset`.
    pub fn load_from_snapshot(
        &mut self,
        log_start_offset: i64,
        now_ms: i64,
    ) -> Result<SnapshotLoad> {
        let mut report = SnapshotLoad::default();
        while let Some((&offset, path)) = self.snapshots.last_key_value() {
            let path = path.clone();
            match read_snapshot(&path) {
                Ok(entries) => {
                    for e in entries {
                        if !self.is_producer_expired(now_ms, &e) {
                            self.load_producer_entry(e);
                        }
                    }
                    self.last_snap_offset = offset;
                    self.last_map_offset = offset;
                    report.loaded_offset = Some(offset);
                    return Ok(report);
                }
                // Only a bad file is skipped; an I/O failure must surface.
                Err(error @ (Error::CorruptRecord { .. } | Error::CorruptIndex { .. })) => {
                    self.remove_and_delete_snapshot(offset)?;
                    report.skipped.push(SkippedSnapshot { path, error });
                }
                Err(e) => return Err(e),
            }
        }
        self.last_snap_offset = log_start_offset;
        self.last_map_offset = log_start_offset;
        Ok(report)
    }

    /// Brings the state to the log `[log_start_offset, log_end_offset)`: snapshots beyond the end
    /// or at/below the start are removed; if the map does not already end at `log_end_offset`, the
    /// state is dropped and reloaded from the latest remaining snapshot, after which the log
    /// replays batches from [`map_end_offset`](Self::map_end_offset) with
    /// [`replay_batch`](Self::replay_batch). Assumes `log_end_offset` <= the high watermark.
    pub fn truncate_and_reload(
        &mut self,
        log_start_offset: i64,
        log_end_offset: i64,
        now_ms: i64,
    ) -> Result<SnapshotLoad> {
        let out_of_range: Vec<i64> = self
            .snapshots
            .keys()
            .copied()
            .filter(|&o| o > log_end_offset || o <= log_start_offset)
            .collect();
        for offset in out_of_range {
            self.remove_and_delete_snapshot(offset)?;
        }
        if log_end_offset != self.map_end_offset() {
            self.producers.clear();
            self.ongoing_txns.clear();
            self.unreplicated_txns.clear();
            self.load_from_snapshot(log_start_offset, now_ms)
        } else {
            self.on_log_start_offset_incremented(log_start_offset);
            Ok(SnapshotLoad::default())
        }
    }

    /// The log start moved forward (retention, DeleteRecords): forget completed transactions below
    /// it. Producers stay until they expire, so in-memory state may outlive the snapshots.
    pub fn on_log_start_offset_incremented(&mut self, log_start_offset: i64) {
        self.remove_unreplicated_transactions(log_start_offset);
        if self.last_map_offset < log_start_offset {
            self.last_map_offset = log_start_offset;
        }
        self.last_snap_offset = self.latest_snapshot_offset().unwrap_or(log_start_offset);
    }

    fn remove_unreplicated_transactions(&mut self, offset: i64) {
        self.unreplicated_txns
            .retain(|_, t| !matches!(t.last_offset, Some(last) if last < offset));
    }

    /// Drops all state and every snapshot, restarting the map at `offset`.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        let all: Vec<i64> = self.snapshots.keys().copied().collect();
        for o in all {
            self.remove_and_delete_snapshot(o)?;
        }
        self.last_snap_offset = 0;
        self.last_map_offset = offset;
        Ok(())
    }

    /// Re-lists the snapshot files after dropping all state (Kafka's `truncateFullyAndReloadSnapshots`).
    pub fn truncate_fully_and_reload_snapshots(&mut self) -> Result<()> {
        self.truncate_fully_and_start_at(0)?;
        self.snapshots = list_snapshot_files(&self.dir)?;
        Ok(())
    }

    // ---- snapshots ----

    /// Writes a snapshot at the map end offset unless one already covers it. Returns its path;
    /// `None` when there was nothing new, or in read-only mode (which never writes).
    pub fn take_snapshot(&mut self) -> Result<Option<PathBuf>> {
        if self.read_only || self.last_map_offset <= self.last_snap_offset {
            return Ok(None);
        }
        let path = self.dir.join(snapshot_file_name(self.last_map_offset));
        let mut entries: Vec<&ProducerStateEntry> = self.producers.values().collect();
        // Kafka writes in hash order; sorted output makes the files reproducible.
        entries.sort_by_key(|e| e.producer_id);
        write_snapshot(&path, entries)?;
        self.snapshots.insert(self.last_map_offset, path.clone());
        self.last_snap_offset = self.last_map_offset;
        Ok(Some(path))
    }

    pub fn latest_snapshot_offset(&self) -> Option<i64> {
        self.snapshots.keys().next_back().copied()
    }

    pub fn oldest_snapshot_offset(&self) -> Option<i64> {
        self.snapshots.keys().next().copied()
    }

    pub fn snapshot_offsets(&self) -> Vec<i64> {
        self.snapshots.keys().copied().collect()
    }

    pub fn snapshot_file(&self, offset: i64) -> Option<&Path> {
        self.snapshots.get(&offset).map(PathBuf::as_path)
    }

    /// Deletes the snapshots below `offset` (exclusive).
    pub fn delete_snapshots_before(&mut self, offset: i64) -> Result<()> {
        let below: Vec<i64> = self.snapshots.range(..offset).map(|(&o, _)| o).collect();
        for o in below {
            self.remove_and_delete_snapshot(o)?;
        }
        Ok(())
    }

    /// Deletes snapshots that match no segment base offset, except the latest stray one when it
    /// is above every segment (the snapshot a clean shutdown leaves at the log end).
    pub fn remove_stray_snapshots(&mut self, segment_base_offsets: &[i64]) -> Result<()> {
        self.snapshots = list_snapshot_files(&self.dir)?;
        let max_base = segment_base_offsets.iter().copied().max();
        let strays: Vec<i64> = self
            .snapshots
            .keys()
            .copied()
            .filter(|o| !segment_base_offsets.contains(o))
            .collect();
        if let Some((&latest, older)) = strays.split_last() {
            for &o in older {
                self.remove_and_delete_snapshot(o)?;
            }
            if matches!(max_base, Some(m) if latest < m) {
                self.remove_and_delete_snapshot(latest)?;
            }
        }
        Ok(())
    }

    /// Forgets a snapshot and deletes its file; read-only mode only forgets it.
    pub fn remove_and_delete_snapshot(&mut self, offset: i64) -> Result<()> {
        if let Some(path) = self.snapshots.remove(&offset) {
            if !self.read_only {
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io(&path, e)),
                }
            }
        }
        Ok(())
    }
}

fn list_snapshot_files(dir: &Path) -> Result<BTreeMap<i64, PathBuf>> {
    let mut out = BTreeMap::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let Some(offset) = entry
            .file_name()
            .to_str()
            .and_then(offset_from_snapshot_name)
        else {
            continue;
        };
        if entry
            .file_type()
            .map_err(|e| Error::io(entry.path(), e))?
            .is_file()
        {
            out.insert(offset, entry.path());
        }
    }
    Ok(out)
}

/// Encodes entries in snapshot format version 1, the one current brokers write and read.
pub fn encode_snapshot<'a>(entries: impl IntoIterator<Item = &'a ProducerStateEntry>) -> Vec<u8> {
    let mut buf = Vec::with_capacity(SNAPSHOT_HEADER_SIZE);
    buf.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
    buf.extend_from_slice(&[0; 4]); // CRC, filled in below
    buf.extend_from_slice(&[0; 4]); // count, filled in below
    let mut count: i32 = 0;
    for e in entries {
        buf.extend_from_slice(&e.producer_id.to_be_bytes());
        buf.extend_from_slice(&e.producer_epoch.to_be_bytes());
        buf.extend_from_slice(&e.last_seq().to_be_bytes());
        buf.extend_from_slice(&e.last_data_offset().to_be_bytes());
        buf.extend_from_slice(&e.last_offset_delta().to_be_bytes());
        buf.extend_from_slice(&e.last_timestamp.to_be_bytes());
        buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        buf.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        count += 1;
    }
    buf[SNAPSHOT_ENTRIES_OFFSET..SNAPSHOT_HEADER_SIZE].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&buf[SNAPSHOT_ENTRIES_OFFSET..]);
    buf[SNAPSHOT_CRC_OFFSET..SNAPSHOT_ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// Decodes a version 1 snapshot. Every field is bounds-checked: the entry count is checked
/// against the bytes present before anything is allocated from it.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<ProducerStateEntry>> {
    if bytes.len() < SNAPSHOT_HEADER_SIZE {
        return Err(Error::corrupt(format!(
            "producer snapshot has {} bytes, fewer than its {SNAPSHOT_HEADER_SIZE}-byte header",
            bytes.len()
        )));
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(Error::corrupt(format!(
            "producer snapshot has unknown version {version}"
        )));
    }
    let stored = u32::from_be_bytes(
        bytes[SNAPSHOT_CRC_OFFSET..SNAPSHOT_ENTRIES_OFFSET]
            .try_into()
            .unwrap(),
    );
    let computed = crc32c::crc32c(&bytes[SNAPSHOT_ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(Error::corrupt(format!(
            "producer snapshot CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let count = i32::from_be_bytes(
        bytes[SNAPSHOT_ENTRIES_OFFSET..SNAPSHOT_HEADER_SIZE]
            .try_into()
            .unwrap(),
    );
    let body = &bytes[SNAPSHOT_HEADER_SIZE..];
    if count < 0 {
        return Err(Error::corrupt(format!(
            "producer snapshot has a negative entry count {count}"
        )));
    }
    let needed = count as u64 * SNAPSHOT_ENTRY_SIZE as u64;
    if needed != body.len() as u64 {
        return Err(Error::corrupt(format!(
            "producer snapshot claims {count} entries ({needed} bytes) but holds {} bytes of entries",
            body.len()
        )));
    }
    let i64_at = |b: &[u8], at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());
    let i32_at = |b: &[u8], at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    let mut entries = Vec::with_capacity(count as usize);
    for e in body.chunks_exact(SNAPSHOT_ENTRY_SIZE) {
        let producer_id = i64_at(e, 0);
        let producer_epoch = i16::from_be_bytes([e[8], e[9]]);
        let last_seq = i32_at(e, 10);
        let last_offset = i64_at(e, 14);
        let offset_delta = i32_at(e, 22);
        let timestamp = i64_at(e, 26);
        let coordinator_epoch = i32_at(e, 34);
        let txn_first = i64_at(e, 38);
        // Kafka writes last_offset -1 for a producer with no batch (one known only by markers).
        let last_batch = (last_offset >= 0).then_some(BatchMetadata {
            last_seq,
            last_offset,
            offset_delta,
            timestamp,
        });
        entries.push(ProducerStateEntry::new(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            timestamp,
            (txn_first >= 0).then_some(txn_first),
            last_batch,
        ));
    }
    Ok(entries)
}

/// Reads a snapshot file; corruption errors name the file.
pub fn read_snapshot(path: &Path) -> Result<Vec<ProducerStateEntry>> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    decode_snapshot(&bytes).map_err(|e| e.in_file(path))
}

pub fn write_snapshot<'a>(
    path: &Path,
    entries: impl IntoIterator<Item = &'a ProducerStateEntry>,
) -> Result<()> {
    atomic_write(path, &encode_snapshot(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::builder::{end_txn_marker_batch, BatchBuilder, BatchOptions};

    const PID: i64 = 1000;

    fn data(base_offset: i64, pid: i64, epoch: i16, base_seq: i32, n: i32, txn: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions {
            base_offset,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: base_seq,
            is_transactional: txn,
            ..Default::default()
        });
        for i in 0..n {
            b.append(1_000 + i as i64, None, Some(b"v"), &[]).unwrap();
        }
        b.build().unwrap()
    }

    fn marker(offset: i64, pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> Vec<u8> {
        let control_type = if commit {
            ControlRecordType::Commit
        } else {
            ControlRecordType::Abort
        };
        end_txn_marker_batch(
            offset,
            2_000,
            0,
            pid,
            epoch,
            EndTransactionMarker {
                control_type,
                coordinator_epoch,
            },
        )
        .unwrap()
    }

    fn manager() -> (tempfile::TempDir, ProducerStateManager) {
        let dir = tempfile::tempdir().unwrap();
        let m = ProducerStateManager::new(dir.path(), false).unwrap();
        (dir, m)
    }

    /// Client append of one batch: check, "write", apply; returns the completed txns.
    fn append(
        m: &mut ProducerStateManager,
        bytes: &[u8],
        origin: AppendOrigin,
    ) -> Result<Vec<CompletedTxn>> {
        let b = DefaultBatch::new(bytes).unwrap();
        match m.check_and_prepare(&[b], origin)? {
            AppendCheck::Duplicate(d) => panic!("unexpected duplicate {d:?}"),
            AppendCheck::Append(p) => {
                let done = m.apply(p)?;
                for c in &done {
                    m.complete_txn(c)?;
                }
                m.update_map_end_offset(b.last_offset() + 1);
                Ok(done)
            }
        }
    }

    fn check(m: &ProducerStateManager, bytes: &[u8]) -> Result<AppendCheck> {
        m.check_and_prepare(&[DefaultBatch::new(bytes).unwrap()], AppendOrigin::Client)
    }

    #[test]
    fn sequences_in_order_gaps_and_wrap() {
        let (_d, mut m) = manager();
        append(&mut m, &data(0, PID, 0, 0, 3, false), AppendOrigin::Client).unwrap();
        append(&mut m, &data(3, PID, 0, 3, 2, false), AppendOrigin::Client).unwrap();
        let e = m.last_entry(PID).unwrap();
        assert_eq!(
            (
                e.first_seq(),
                e.last_seq(),
                e.first_data_offset(),
                e.last_data_offset()
            ),
            (0, 4, 0, 4)
        );
        // A gap is an out-of-order error.
        let err = check(&m, &data(5, PID, 0, 6, 1, false)).unwrap_err();
        assert!(
            matches!(&err, Error::ProducerState(s) if s.contains("OutOfOrderSequence")),
            "{err}"
        );
        // So is going back to a sequence that is not a cached batch.
        assert!(check(&m, &data(5, PID, 0, 4, 1, false)).is_err());
        // Sequences wrap from i32::MAX to 0.
        let (_d2, mut m2) = manager();
        append(
            &mut m2,
            &data(0, PID, 0, i32::MAX - 1, 2, false),
            AppendOrigin::Client,
        )
        .unwrap();
        assert_eq!(m2.last_entry(PID).unwrap().last_seq(), i32::MAX);
        append(&mut m2, &data(2, PID, 0, 0, 1, false), AppendOrigin::Client).unwrap();
        // A batch straddling the wrap: base MAX-1, 4 records -> last seq 1.
        let (_d3, mut m3) = manager();
        append(
            &mut m3,
            &data(0, PID, 0, i32::MAX - 1, 4, false),
            AppendOrigin::Client,
        )
        .unwrap();
        let e = m3.last_entry(PID).unwrap();
        assert_eq!((e.first_seq(), e.last_seq()), (i32::MAX - 1, 1));
        append(&mut m3, &data(4, PID, 0, 2, 1, false), AppendOrigin::Client).unwrap();
        // An unknown producer may start at any sequence (its state may have expired).
        append(&mut m3, &data(5, 77, 0, 42, 1, false), AppendOrigin::Client).unwrap();
    }

    #[test]
    fn duplicates_of_the_last_five_batches() {
        let (_d, mut m) = manager();
        let batches: Vec<Vec<u8>> = (0..6)
            .map(|i| data(i * 2, PID, 0, i as i32 * 2, 2, false))
            .collect();
        for b in &batches {
            append(&mut m, b, AppendOrigin::Client).unwrap();
        }
        assert_eq!(
            m.last_entry(PID).unwrap().batch_metadata().count(),
            NUM_BATCHES_TO_RETAIN
        );
        for i in 1..6i64 {
            // The retry arrives with new offsets; the cached ones are reported.
            match check(&m, &data(100 + i, PID, 0, i as i32 * 2, 2, false)).unwrap() {
                AppendCheck::Duplicate(d) => {
                    assert_eq!((d.first_offset(), d.last_offset), (i * 2, i * 2 + 1))
                }
                AppendCheck::Append(_) => panic!("batch {i} should be a duplicate"),
            }
        }
        // The oldest batch fell out of the cache: an ordinary out-of-order error now.
        assert!(check(&m, &data(100, PID, 0, 0, 2, false)).is_err());
        // A partial overlap is not a duplicate.
        assert!(check(&m, &data(100, PID, 0, 10, 1, false)).is_err());
        // Replication never dedupes.
        let b = data(100, PID, 0, 10, 2, false);
        assert!(matches!(
            m.check_and_prepare(&[DefaultBatch::new(&b).unwrap()], AppendOrigin::Replication)
                .unwrap(),
            AppendCheck::Append(_)
        ));
    }

    #[test]
    fn epoch_fencing() {
        let (_d, mut m) = manager();
        append(&mut m, &data(0, PID, 5, 0, 2, false), AppendOrigin::Client).unwrap();
        let err = check(&m, &data(2, PID, 4, 2, 1, false)).unwrap_err();
        assert!(
            matches!(&err, Error::ProducerState(s) if s.contains("InvalidProducerEpoch")),
            "{err}"
        );
        // A new epoch must restart at sequence 0.
        let err = check(&m, &data(2, PID, 6, 2, 1, false)).unwrap_err();
        assert!(
            matches!(&err, Error::ProducerState(s) if s.contains("must be 0")),
            "{err}"
        );
        append(&mut m, &data(2, PID, 6, 0, 1, false), AppendOrigin::Client).unwrap();
        let e = m.last_entry(PID).unwrap();
        assert_eq!(
            (e.producer_epoch, e.batch_metadata().count()),
            (6, 1),
            "new epoch clears old batches"
        );
        // The coordinator is checked for epochs but not sequences.
        assert!(m
            .check_and_prepare(
                &[DefaultBatch::new(&data(3, PID, 6, 9, 1, false)).unwrap()],
                AppendOrigin::Coordinator
            )
            .is_ok());
        assert!(m
            .check_and_prepare(
                &[DefaultBatch::new(&data(3, PID, 5, 9, 1, false)).unwrap()],
                AppendOrigin::Coordinator
            )
            .is_err());
        // Replication accepts an older epoch.
        append(
            &mut m,
            &data(3, PID, 5, 9, 1, false),
            AppendOrigin::Replication,
        )
        .unwrap();
    }

    #[test]
    fn transactions_commit_abort_and_unstable_offsets() {
        let (_d, mut m) = manager();
        let (a, b) = (1, 2);
        append(&mut m, &data(0, a, 0, 0, 2, true), AppendOrigin::Client).unwrap();
        assert_eq!(m.first_unstable_offset(), Some(0));
        append(&mut m, &data(2, b, 0, 0, 1, true), AppendOrigin::Client).unwrap();
        append(&mut m, &data(3, a, 0, 2, 1, true), AppendOrigin::Client).unwrap();
        assert_eq!(m.last_entry(a).unwrap().current_txn_first_offset, Some(0));
        // A non-transactional write inside an open transaction is rejected.
        assert!(check(&m, &data(4, a, 0, 3, 1, false)).is_err());

        // Commit a's transaction at offset 4: LSO is b's first offset, which is still open.
        let mk = marker(4, a, 0, true, 3);
        let AppendCheck::Append(p) = m
            .check_and_prepare(
                &[DefaultBatch::new(&mk).unwrap()],
                AppendOrigin::Coordinator,
            )
            .unwrap()
        else {
            panic!()
        };
        let done = m.apply(p).unwrap();
        assert_eq!(
            done,
            vec![CompletedTxn {
                producer_id: a,
                first_offset: 0,
                last_offset: 4,
                is_aborted: false
            }]
        );
        assert_eq!(m.last_stable_offset(&done[0]), 2);
        assert_eq!(done[0].to_aborted_txn(2), None, "commits are not indexed");
        m.complete_txn(&done[0]).unwrap();
        assert!(m.complete_txn(&done[0]).is_err(), "completing twice");
        assert_eq!(m.last_entry(a).unwrap().current_txn_first_offset, None);
        assert_eq!(m.last_entry(a).unwrap().coordinator_epoch, 3);
        assert_eq!(m.first_undecided_offset(), Some(2));
        assert_eq!(
            m.first_unstable_offset(),
            Some(0),
            "a's marker is not yet under the high watermark"
        );
        m.on_high_watermark_updated(5);
        assert_eq!(m.first_unstable_offset(), Some(2));

        // Abort b's at 5: nothing else open, so LSO is just past the marker.
        let done = append(
            &mut m,
            &marker(5, b, 0, false, 3),
            AppendOrigin::Coordinator,
        )
        .unwrap();
        assert_eq!(
            done,
            vec![CompletedTxn {
                producer_id: b,
                first_offset: 2,
                last_offset: 5,
                is_aborted: true
            }]
        );
        assert_eq!(done[0].to_aborted_txn(6), Some(AbortedTxn::new(b, 2, 5, 6)));
        assert_eq!(m.first_undecided_offset(), None);
        m.on_high_watermark_updated(6);
        assert_eq!(m.first_unstable_offset(), None);

        // A zombie coordinator's marker is fenced; a marker with no open transaction completes nothing.
        assert!(check(&m, &marker(6, a, 0, true, 2)).is_err());
        assert_eq!(
            append(&mut m, &marker(6, a, 0, true, 3), AppendOrigin::Coordinator).unwrap(),
            vec![]
        );
    }

    #[test]
    fn replay_rebuilds_the_same_state() {
        let batches = [
            data(0, 1, 0, 0, 2, false),
            data(2, 2, 3, 0, 1, true),
            data(3, 1, 0, 2, 3, false),
            data(6, 3, 0, 0, 1, true),
            marker(7, 2, 3, false, 1),
            data(8, 2, 3, 1, 1, true),
        ];
        let (_d, mut live) = manager();
        for b in &batches {
            append(&mut live, b, AppendOrigin::Client).unwrap();
        }
        let (_d2, mut replayed) = manager();
        let mut aborted = vec![];
        for b in &batches {
            if let Some((c, lso)) = replayed.replay_batch(&Batch::parse(b).unwrap()).unwrap() {
                aborted.extend(c.to_aborted_txn(lso));
            }
        }
        assert_eq!(
            aborted,
            vec![AbortedTxn::new(2, 2, 7, 6)],
            "LSO is producer 3's open txn"
        );
        assert_eq!(live.active_producers(), replayed.active_producers());
        assert_eq!(replayed.map_end_offset(), 9);
        assert_eq!(replayed.first_undecided_offset(), Some(6));
        assert_eq!(
            replayed
                .ongoing_txns()
                .map(|t| t.first_offset)
                .collect::<Vec<_>>(),
            vec![6, 8]
        );
    }

    #[test]
    fn snapshot_round_trip_and_reload() {
        let (dir, mut m) = manager();
        append(&mut m, &data(0, 1, 2, 0, 3, false), AppendOrigin::Client).unwrap();
        append(&mut m, &data(3, 2, 0, 0, 1, true), AppendOrigin::Client).unwrap();
        let path = m.take_snapshot().unwrap().unwrap();
        assert_eq!(path, dir.path().join("00000000000000000004.snapshot"));
        assert_eq!(m.take_snapshot().unwrap(), None, "nothing new since");
        let entries = read_snapshot(&path).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].last_seq(), 2);
        assert_eq!(entries[0].last_data_offset(), 2);
        assert_eq!(entries[0].first_seq(), 0);
        assert_eq!(entries[1].current_txn_first_offset, Some(3));

        let mut fresh = ProducerStateManager::new(dir.path(), false)
            .unwrap()
            .with_producer_id_expiration_ms(i64::MAX);
        assert_eq!(fresh.latest_snapshot_offset(), Some(4));
        let load = fresh.truncate_and_reload(0, 4, 5_000).unwrap();
        assert_eq!(load.loaded_offset, Some(4));
        assert_eq!(fresh.map_end_offset(), 4);
        assert_eq!(fresh.first_unstable_offset(), Some(3));
        assert_eq!(fresh.last_entry(1).unwrap().last_seq(), 2);
        // The next in-order batch is accepted, and a retry of the snapshotted batch is a duplicate.
        assert!(matches!(
            check(&fresh, &data(4, 1, 2, 0, 3, false)).unwrap(),
            AppendCheck::Duplicate(_)
        ));
        append(
            &mut fresh,
            &data(4, 1, 2, 3, 1, false),
            AppendOrigin::Client,
        )
        .unwrap();

        // Expiry drops idle producers without open transactions when loading.
        let mut expiring = ProducerStateManager::new(dir.path(), true)
            .unwrap()
            .with_producer_id_expiration_ms(10);
        expiring.truncate_and_reload(0, 4, 1_000_000).unwrap();
        assert_eq!(
            expiring
                .active_producers()
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![2]
        );

        // Truncating below the snapshot removes it and restarts from the log start.
        let load = fresh.truncate_and_reload(0, 3, 5_000).unwrap();
        assert_eq!(load.loaded_offset, None);
        assert!(fresh.active_producers().is_empty());
        assert_eq!(fresh.map_end_offset(), 0);
        assert!(!path.exists());
    }

    #[test]
    fn snapshot_byte_layout() {
        let mut e = ProducerStateEntry::empty(0x0102030405060708);
        e.add_batch(0x0a0b, 0x11223344, 100, 4, 0x55);
        e.coordinator_epoch = 7;
        e.current_txn_first_offset = Some(96);
        let empty = ProducerStateEntry::new(9, 1, 2, 3, None, None);
        let bytes = encode_snapshot([&e, &empty]);
        assert_eq!(bytes.len(), 10 + 2 * 46);
        assert_eq!(&bytes[0..2], &[0, 1], "version 1");
        assert_eq!(
            u32::from_be_bytes(bytes[2..6].try_into().unwrap()),
            crc32c::crc32c(&bytes[6..])
        );
        assert_eq!(&bytes[6..10], &2i32.to_be_bytes(), "array count");
        let r = &bytes[10..56];
        assert_eq!(
            &r[0..8],
            &0x0102030405060708i64.to_be_bytes(),
            "producer_id"
        );
        assert_eq!(&r[8..10], &0x0a0bi16.to_be_bytes(), "epoch");
        assert_eq!(&r[10..14], &0x11223344i32.to_be_bytes(), "last_sequence");
        assert_eq!(&r[14..22], &100i64.to_be_bytes(), "last_offset");
        assert_eq!(&r[22..26], &4i32.to_be_bytes(), "offset_delta");
        assert_eq!(&r[26..34], &0x55i64.to_be_bytes(), "timestamp");
        assert_eq!(&r[34..38], &7i32.to_be_bytes(), "coordinator_epoch");
        assert_eq!(&r[38..46], &96i64.to_be_bytes(), "current_txn_first_offset");
        let r = &bytes[56..];
        assert_eq!(
            &r[10..14],
            &(-1i32).to_be_bytes(),
            "no batch: last_sequence -1"
        );
        assert_eq!(
            &r[14..22],
            &(-1i64).to_be_bytes(),
            "no batch: last_offset -1"
        );
        assert_eq!(&r[22..26], &0i32.to_be_bytes(), "no batch: offset_delta 0");
        assert_eq!(&r[38..46], &(-1i64).to_be_bytes(), "no txn: -1");
        let back = decode_snapshot(&bytes).unwrap();
        assert_eq!(back[1], empty);
        assert_eq!(back[0].last_seq(), 0x11223344);
        assert_eq!(back[0].first_data_offset(), 96);
        // An empty snapshot: header only.
        assert_eq!(decode_snapshot(&encode_snapshot([])).unwrap(), vec![]);
    }

    #[test]
    fn corrupt_snapshots_are_clear_errors() {
        let e = ProducerStateEntry::new(
            1,
            0,
            -1,
            5,
            None,
            Some(BatchMetadata {
                last_seq: 0,
                last_offset: 0,
                offset_delta: 0,
                timestamp: 5,
            }),
        );
        let good = encode_snapshot([&e]);
        let msg = |b: &[u8]| decode_snapshot(b).unwrap_err().to_string();
        assert!(msg(&good[..5]).contains("fewer than"));
        assert!(msg(&good[..good.len() - 1]).contains("CRC"), "truncated");
        let mut bad = good.clone();
        bad[20] ^= 1;
        assert!(msg(&bad).contains("CRC"));
        let mut v0 = good.clone();
        v0[1] = 0;
        assert!(msg(&v0).contains("unknown version 0"));
        // A huge count with a valid CRC: rejected against the size, nothing allocated from it.
        let mut huge = good.clone();
        huge[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&huge[6..]);
        huge[2..6].copy_from_slice(&crc.to_be_bytes());
        assert!(
            msg(&huge).contains("claims 2147483647 entries"),
            "{}",
            msg(&huge)
        );
        let mut neg = good.clone();
        neg[6..10].copy_from_slice(&(-1i32).to_be_bytes());
        let crc = crc32c::crc32c(&neg[6..]);
        neg[2..6].copy_from_slice(&crc.to_be_bytes());
        assert!(msg(&neg).contains("negative"));

        // Loading skips a corrupt latest snapshot for an older good one; errors name the file.
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(snapshot_file_name(1)), &good).unwrap();
        fs::write(dir.path().join(snapshot_file_name(5)), &bad).unwrap();
        let mut ro = ProducerStateManager::new(dir.path(), true)
            .unwrap()
            .with_producer_id_expiration_ms(i64::MAX);
        let load = ro.truncate_and_reload(0, 10, 0).unwrap();
        assert_eq!(load.loaded_offset, Some(1));
        assert_eq!(load.skipped.len(), 1);
        assert!(load.skipped[0]
            .error
            .to_string()
            .contains("00000000000000000005.snapshot"));
        assert!(
            dir.path().join(snapshot_file_name(5)).exists(),
            "read-only leaves it"
        );
        let mut rw = ProducerStateManager::new(dir.path(), false)
            .unwrap()
            .with_producer_id_expiration_ms(i64::MAX);
        assert_eq!(
            rw.truncate_and_reload(0, 10, 0).unwrap().loaded_offset,
            Some(1)
        );
        assert!(
            !dir.path().join(snapshot_file_name(5)).exists(),
            "writable deletes it, as Kafka does"
        );
    }

    #[test]
    fn snapshot_housekeeping_and_read_only() {
        let dir = tempfile::tempdir().unwrap();
        for o in [0, 10, 20, 30, 45] {
            fs::write(dir.path().join(snapshot_file_name(o)), encode_snapshot([])).unwrap();
        }
        fs::write(
            dir.path().join("00000000000000000099.snapshot.deleted"),
            b"",
        )
        .unwrap();
        fs::write(dir.path().join("junk.snapshot"), b"").unwrap();
        let mut ro = ProducerStateManager::new(dir.path(), true).unwrap();
        assert_eq!(ro.snapshot_offsets(), vec![0, 10, 20, 30, 45]);
        ro.delete_snapshots_before(20).unwrap();
        ro.update_map_end_offset(100);
        assert_eq!(ro.take_snapshot().unwrap(), None, "read-only never writes");
        assert_eq!(ro.oldest_snapshot_offset(), Some(20));
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            7,
            "read-only deleted nothing"
        );

        let mut m = ProducerStateManager::new(dir.path(), false).unwrap();
        m.delete_snapshots_before(10).unwrap();
        assert_eq!(m.oldest_snapshot_offset(), Some(10));
        // Segments at 10 and 30: 20 is stray and dropped; 45 is the clean-shutdown snapshot above
        // every segment and stays.
        m.remove_stray_snapshots(&[10, 30]).unwrap();
        assert_eq!(m.snapshot_offsets(), vec![10, 30, 45]);
        m.remove_stray_snapshots(&[10, 30, 50]).unwrap();
        assert_eq!(m.snapshot_offsets(), vec![10, 30]);
        m.truncate_fully_and_start_at(7).unwrap();
        assert_eq!(m.snapshot_offsets(), Vec::<i64>::new());
        assert_eq!(m.map_end_offset(), 7);
        assert!(!dir.path().join(snapshot_file_name(30)).exists());
    }

    #[test]
    fn random_snapshot_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let len = rng.gen_range(0..200);
            let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if len >= 10 && rng.gen_bool(0.7) {
                // Valid version and CRC so the count and entries are reached.
                b[0..2].copy_from_slice(&1i16.to_be_bytes());
                if rng.gen_bool(0.5) {
                    let n: i32 = (len - 10) / 46;
                    b[6..10].copy_from_slice(&n.to_be_bytes());
                }
                let crc = crc32c::crc32c(&b[6..]);
                b[2..6].copy_from_slice(&crc.to_be_bytes());
            }
            if let Ok(entries) = decode_snapshot(&b) {
                for e in &entries {
                    let _ = (e.first_seq(), e.first_data_offset(), e.last_seq());
                }
            }
        }
    }

    #[test]
    fn sequence_helpers() {
        assert_eq!(decrement_sequence(5, 2), 3);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(0, 1), i32::MAX);
        // Garbage from a corrupt snapshot must not panic.
        let _ = decrement_sequence(i32::MIN, i32::MAX);
        let _ = decrement_sequence(i32::MAX, -1);
        let _ = decrement_sequence(i32::MIN, i32::MIN);
        assert!(in_sequence(i32::MAX, 0) && in_sequence(4, 5) && !in_sequence(4, 4));
        assert_eq!(
            offset_from_snapshot_name("00000000000000000042.snapshot"),
            Some(42)
        );
        assert_eq!(offset_from_snapshot_name("42.snapshot.deleted"), None);
        assert_eq!(offset_from_snapshot_name("-1.snapshot"), None);
    }

    // Files from a Kafka 4.4.0 broker's `my-topic.x-0` after 20 idempotent records (producer 0),
    // three transactions of producer 1 (commit, abort, commit) and 5 more idempotent records
    // (producer 2), then a clean shutdown.
    const BROKER_SEGMENT: &[&str] = &[
        "0000000000000000000000ef000000000239970885000000000013000001a204ec568c000001a204ec568d0000000000",
        "000000000000000000000000141000000001047630001000000201047631001000000401047632001000000601047633",
        "001000000801047634001000000a01047635001000000c01047636001000020e01047637001000021001047638001000",
        "021201047639001200021401067631300012000216010676313100120002180106763132001200021a01067631330012",
        "00021c0106763134001200021e0106763135001200022001067631360012000222010676313700120002240106763138",
        "001200022601067631390000000000000000140000003a0000000002ee0c1e43001000000000000001a204ec5cb90000",
        "01a204ec5cb9000000000000000100000000000000000001100000000104743100000000000000001500000042000000",
        "00026f649854003000000000000001a204ec5d00000001a204ec5d0000000000000000010000ffffffff000000012000",
        "000008000000010c0000000000000000000000000000160000003a000000000270bbd6d5001000000000000001a204ec",
        "5cef000001a204ec5cef0000000000000001000000000001000000011000000001046131000000000000000017000000",
        "420000000002736e4c6e003000000000000001a204ec5d27000001a204ec5d2700000000000000010000ffffffff0000",
        "00012000000008000000000c0000000000000000000000000000180000003a0000000002777fc0020010000000000000",
        "01a204ec5d2a000001a204ec5d2a00000000000000010000000000020000000110000000010463310000000000000000",
        "190000004200000000024075f8d8003000000000000001a204ec5d31000001a204ec5d3100000000000000010000ffff",
        "ffff000000012000000008000000010c00000000000000000000000000001a0000005e00000000029cd2193a00000000",
        "0004000001a204ec5d37000001a204ec5d37000000000000000200000000000000000005100000000104773000100000",
        "020104773100100000040104773200100000060104773300100000080104773400",
    ];
    const BROKER_SNAPSHOT_31: &[&str] = &[
        "00015f873889000000030000000000000000000000000013000000000000001300000013000001a204ec568dffffffff",
        "ffffffffffffffff0000000000000001000000000002000000000000001800000000000001a204ec5d3100000000ffff",
        "ffffffffffff0000000000000002000000000004000000000000001e00000004000001a204ec5d37ffffffffffffffff",
        "ffffffff",
    ];

    fn unhex(parts: &[&str]) -> Vec<u8> {
        let h: String = parts.concat();
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn replaying_a_broker_segment_reproduces_its_snapshot() {
        use crate::record::batch::BatchIter;
        let segment = unhex(BROKER_SEGMENT);
        let broker_snapshot = unhex(BROKER_SNAPSHOT_31);
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), false).unwrap();
        let mut aborted = vec![];
        for batch in BatchIter::new(&segment) {
            if let Some((c, lso)) = m.replay_batch(&batch.unwrap()).unwrap() {
                aborted.extend(c.to_aborted_txn(lso));
            }
        }
        // The broker's .txnindex holds exactly this entry.
        assert_eq!(aborted, vec![AbortedTxn::new(1, 22, 23, 24)]);
        assert_eq!(m.map_end_offset(), 31);
        assert_eq!(m.first_undecided_offset(), None);
        let path = m.take_snapshot().unwrap().unwrap();
        assert!(path.ends_with("00000000000000000031.snapshot"));
        // Kafka iterates its HashMap of small producer ids in ascending order, so the bytes match.
        assert_eq!(fs::read(&path).unwrap(), broker_snapshot);

        let entries = decode_snapshot(&broker_snapshot).unwrap();
        let mut replayed: Vec<ProducerStateEntry> =
            m.active_producers().values().cloned().collect();
        replayed.sort_by_key(|e| e.producer_id);
        assert_eq!(entries.len(), 3);
        for (disk, mem) in entries.iter().zip(&replayed) {
            assert_eq!(disk.producer_id, mem.producer_id);
            assert_eq!(disk.producer_epoch, mem.producer_epoch);
            assert_eq!(disk.coordinator_epoch, mem.coordinator_epoch);
            assert_eq!(disk.last_seq(), mem.last_seq());
            assert_eq!(disk.last_data_offset(), mem.last_data_offset());
            assert_eq!(disk.current_txn_first_offset, mem.current_txn_first_offset);
        }
        assert_eq!(
            (
                entries[1].last_seq(),
                entries[1].last_data_offset(),
                entries[1].coordinator_epoch
            ),
            (2, 24, 0)
        );
    }
}
