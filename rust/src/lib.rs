//! kafkalog: Apache Kafka's on-disk log format (record batches, segments, offset/time/transaction
//! indexes, the partition log) in Rust, byte-compatible with a Kafka broker.

pub mod arrow;
pub mod checksum;
pub mod config;
pub mod datadir;
pub mod error;
pub mod files;
pub mod group;
pub mod index;
pub mod internal_topics;
pub mod log;
pub mod producer;
pub mod record;
pub mod segment;
pub mod tools;

#[cfg(test)]
mod testutil;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
