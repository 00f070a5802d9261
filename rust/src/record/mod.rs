//! Kafka's record formats: magic v2 record batches and the legacy v0/v1 message sets.

pub mod batch;
pub mod builder;
pub mod codec;
pub mod control;
pub mod file_records;
pub mod legacy;
pub mod record;
pub mod varint;

pub use codec::Compression;
