//! Kafka's `ProducerAppendInfo` (with `AppendOrigin`): validates one producer's batches of an
//! append against its state.

use std::collections::VecDeque;

use super::{in_sequence, CompletedTxn, ProducerStateEntry, TxnMetadata};
use crate::error::{Error, Result};
use crate::record::batch::{Batch, DefaultBatch, NO_PRODUCER_EPOCH, NO_SEQUENCE};
use crate::record::control::{ControlRecordType, EndTransactionMarker};

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

/// Validates one producer's batches of an append against its state and accumulates the new state
/// without touching the manager (Kafka's `ProducerAppendInfo`).
#[derive(Debug, Clone)]
pub struct ProducerAppendInfo {
    pub(super) producer_id: i64,
    pub(super) origin: AppendOrigin,
    /// The state before this append.
    pub(super) current: ProducerStateEntry,
    /// The state after this append's batches; starts with no batches so validation of the first
    /// batch falls back to `current`'s.
    pub(super) updated: ProducerStateEntry,
    pub(super) started_txns: Vec<TxnMetadata>,
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
            (Some(_), false) => Err(Error::InvalidTxnState(format!(
                "expected a transactional write from producer {} at offset {first_offset}",
                self.producer_id
            ))),
            (None, true) => {
                self.updated.current_txn_first_offset = Some(first_offset);
                self.started_txns.push(TxnMetadata {
                    producer_id: self.producer_id,
                    first_offset,
                    last_offset: None,
                });
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
            return Err(Error::TransactionCoordinatorFenced(format!(
                "coordinator epoch {} of the marker for producer {} at offset {offset} \
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
            return Err(Error::InvalidProducerEpoch(format!(
                "epoch {producer_epoch} of producer {} at offset {offset} is older than the last seen epoch {current}",
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
                return Err(Error::OutOfOrderSequence(format!(
                    "sequence {first_seq} for the new epoch {producer_epoch} of producer {} at offset \
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
            return Err(Error::OutOfOrderSequence(format!(
                "sequence {first_seq} of producer {} at offset {offset} does not follow its last \
                 sequence {current_last_seq}",
                self.producer_id
            )));
        }
        Ok(())
    }
}
