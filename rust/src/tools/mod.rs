//! Kafka's offline tools, reimplemented over the crate's own decode path (Kafka's `tools` module).

pub mod dump_log_segments;
pub mod stats;
pub mod verify;
