//! Kafka's `BatchMetadata`: one appended batch of a producer, remembered for duplicate detection.

use super::decrement_sequence;

/// One appended batch of a producer (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    /// `last_offset - first_offset`, also `last_seq - first_seq` modulo wrapping.
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        // Wrapping: a corrupt snapshot may pair any offset with any delta.
        self.last_offset.wrapping_sub(self.offset_delta as i64)
    }
}
