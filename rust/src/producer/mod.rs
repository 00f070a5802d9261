//! The producer's side above one partition: which partition a record goes to (Kafka's
//! `BuiltInPartitioner` and `Utils.murmur2`) and how records reach the partitions' logs
//! (`KafkaProducer`, `RecordAccumulator`, `TransactionManager`).

pub mod accumulator;
pub mod partitioner;

pub use partitioner::{
    estimated_record_bytes, murmur2, partition_for_key, to_positive, StickyPartitioner,
};
