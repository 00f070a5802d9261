//! Kafka's producer state of one partition: `ProducerStateManager` (manager.rs) with
//! `ProducerAppendInfo` (append_info.rs), `ProducerStateEntry` (entry.rs), `BatchMetadata`
//! (batch_metadata.rs), `TxnMetadata` and `CompletedTxn` (txn.rs), and the `<20-digit
//! offset>.snapshot` files (snapshot.rs, Kafka's `SnapshotFile`; format version 1).

mod append_info;
mod batch_metadata;
mod entry;
mod manager;
mod snapshot;
#[cfg(test)]
mod tests;
mod txn;

pub use append_info::{AppendOrigin, ProducerAppendInfo};
pub use batch_metadata::BatchMetadata;
pub use entry::{ProducerStateEntry, NUM_BATCHES_TO_RETAIN};
pub use manager::{
    AppendCheck, PendingAppend, ProducerStateManager, SkippedSnapshot, SnapshotLoad,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
};
pub use snapshot::{
    decode_snapshot, encode_snapshot, offset_from_snapshot_name, read_snapshot, snapshot_file_name,
    write_snapshot, PRODUCER_SNAPSHOT_VERSION, SNAPSHOT_FILE_SUFFIX,
};
pub use txn::{CompletedTxn, TxnMetadata};

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
