//! Kafka's `LogConfig`: the per-log settings segments and the log obey.
