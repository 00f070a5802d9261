//! Kafka's record formats: magic v2 record batches and the legacy v0/v1 message sets.

pub mod batch;
pub mod builder;
pub mod codec;
pub mod control;
pub mod file_records;
pub mod java_utf8;
pub mod legacy;
#[allow(clippy::module_inception)]
// record::record mirrors Kafka's record.Record, as DESIGN.md maps it
pub mod record;
pub mod segment_map;
pub mod varint;

pub use codec::Compression;

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod file_records_tests;
