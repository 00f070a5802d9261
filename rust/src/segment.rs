//! Kafka's `LogSegment`.
