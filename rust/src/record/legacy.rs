//! Legacy message sets, magic v0 and v1 (Kafka's `LegacyRecord`, `AbstractLegacyRecordBatch`).
//! (Being written.)
