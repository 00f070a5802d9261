//! Kafka's `TimeIndex`. (Being written.)
