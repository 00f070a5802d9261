//! Kafka's `ProducerStateManager`: per-producer idempotence and transaction state of one
//! partition, its snapshots, and the first unstable offset.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::snapshot::{list_snapshot_files, read_snapshot, snapshot_file_name, write_snapshot};
use super::{
    AppendOrigin, BatchMetadata, CompletedTxn, ProducerAppendInfo, ProducerStateEntry, TxnMetadata,
};
use crate::error::{Error, Result};
use crate::record::batch::{Batch, DefaultBatch, NO_PRODUCER_ID};

/// `producer.id.expiration.ms`'s default (one day).
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;

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
    /// While a log loads ([`Self::defer_deletes`]), the snapshot files it removed: deleted once
    /// the load succeeds ([`Self::delete_deferred`]), so an open that fails leaves them.
    deferred_deletes: Option<Vec<PathBuf>>,
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
            deferred_deletes: None,
        })
    }

    /// From here on, snapshots removed from the state keep their files until
    /// [`Self::delete_deferred`]: a log's load removes those past its recovery point before it
    /// has found whether the log opens at all.
    pub fn defer_deletes(&mut self) {
        self.deferred_deletes.get_or_insert_with(Vec::new);
    }

    /// Deletes the files of the snapshots removed since [`Self::defer_deletes`], and deletes
    /// at once again from here on.
    pub fn delete_deferred(&mut self) -> Result<()> {
        for path in self.deferred_deletes.take().unwrap_or_default() {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Ok(())
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
                // Gone since the folder was listed: a writer in another process took a newer
                // snapshot and deleted this one. An older one, or the log, gives the same state.
                Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
                    self.snapshots.remove(&offset);
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
        if let Some(deferred) = &mut self.deferred_deletes {
            deferred.retain(|p| p != &path); // written anew: the old file is replaced, not gone
        }
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

    /// Forgets a snapshot and deletes its file (later, while deletes are deferred); read-only
    /// mode only forgets it.
    pub fn remove_and_delete_snapshot(&mut self, offset: i64) -> Result<()> {
        if let Some(path) = self.snapshots.remove(&offset) {
            if let (false, Some(deferred)) = (self.read_only, &mut self.deferred_deletes) {
                deferred.push(path);
            } else if !self.read_only {
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
