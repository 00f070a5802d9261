//! Kafka's memory-mapped segment indexes (`AbstractIndex`): offset, time and transaction indexes.

pub mod offset;
pub mod time;
pub mod txn;
