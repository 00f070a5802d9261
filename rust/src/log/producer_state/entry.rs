//! Kafka's `ProducerStateEntry`: the state of one producer id.

use std::collections::VecDeque;

use super::BatchMetadata;
use crate::record::batch::{NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP};

/// How many of a producer's latest batches are remembered for duplicate detection (the most a
/// producer may have in flight).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

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
    pub(super) batch_metadata: VecDeque<BatchMetadata>,
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

    pub(super) fn add_batch(
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
    pub(super) fn maybe_update_producer_epoch(&mut self, producer_epoch: i16) {
        if self.producer_epoch != producer_epoch {
            self.batch_metadata.clear();
            self.producer_epoch = producer_epoch;
        }
    }

    pub(super) fn add_batch_metadata(&mut self, batch: BatchMetadata) {
        if self.batch_metadata.len() == NUM_BATCHES_TO_RETAIN {
            self.batch_metadata.pop_front();
        }
        self.batch_metadata.push_back(batch);
    }

    /// Folds the result of an append (`next`) into this entry (Kafka's `update(ProducerStateEntry)`).
    pub(super) fn update_from(&mut self, next: ProducerStateEntry) {
        self.maybe_update_producer_epoch(next.producer_epoch);
        for b in next.batch_metadata {
            self.add_batch_metadata(b);
        }
        self.coordinator_epoch = next.coordinator_epoch;
        self.current_txn_first_offset = next.current_txn_first_offset;
        self.last_timestamp = next.last_timestamp;
    }

    /// What a transaction marker does to the entry: the transaction is over.
    pub(super) fn update_for_marker(
        &mut self,
        producer_epoch: i16,
        coordinator_epoch: i32,
        timestamp: i64,
    ) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = None;
        self.last_timestamp = timestamp;
    }
}
