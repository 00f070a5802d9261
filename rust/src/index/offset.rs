//! Kafka's `OffsetIndex`. (Being written.)
