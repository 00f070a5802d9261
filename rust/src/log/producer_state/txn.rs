//! Kafka's `TxnMetadata` and `CompletedTxn`: a partition's open and completed transactions.

use crate::index::txn::AbortedTxn;

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
