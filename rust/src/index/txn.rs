//! Kafka's `TransactionIndex`. (Being written.)
