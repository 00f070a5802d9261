//! Kafka's producer partitioning (`BuiltInPartitioner`, `Utils.murmur2`, `Utils.toPositive`): a
//! keyed record goes to `toPositive(murmur2(key)) % partitions`, exactly as the Java producer puts
//! it; a record without a key sticks to one partition until a batch's worth of bytes went there,
//! then moves to another (KIP-480/KIP-794's sticky behaviour, without broker load figures).

use rand::Rng;

/// Kafka's `Utils.murmur2` (MurmurHash2, seed 0x9747b28c), over signed 32-bit arithmetic.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if tail.len() == 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on i32::MIN).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition Kafka's producer picks for a keyed record.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    to_positive(murmur2(key)) % num_partitions
}

/// Kafka's producer default `batch.size`: how many bytes a sticky partition takes before the
/// producer moves to another.
pub const DEFAULT_BATCH_SIZE: usize = 16384;

/// The built-in partitioner's choice for records without a key: one partition until `batch_size`
/// bytes were produced to it, then another picked at random.
pub struct StickyPartitioner {
    num_partitions: i32,
    batch_size: usize,
    current: Option<i32>,
    produced: usize,
}

impl StickyPartitioner {
    pub fn new(num_partitions: i32, batch_size: usize) -> Self {
        StickyPartitioner {
            num_partitions,
            batch_size: batch_size.max(1),
            current: None,
            produced: 0,
        }
    }

    /// The partition for a record of `record_bytes` without a key.
    pub fn partition(&mut self, record_bytes: usize) -> i32 {
        let current = match self.current {
            Some(p) if self.produced < self.batch_size => p,
            previous => {
                let mut rng = rand::thread_rng();
                let mut next = rng.gen_range(0..self.num_partitions);
                // Kafka moves to a different partition when there is one to move to.
                if self.num_partitions > 1 && Some(next) == previous {
                    next = (next + 1 + rng.gen_range(0..self.num_partitions - 1))
                        % self.num_partitions;
                }
                self.produced = 0;
                next
            }
        };
        self.current = Some(current);
        self.produced += record_bytes;
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_utils_test_vectors() {
        // Expected values from Kafka's UtilsTest.testMurmur2.
        let cases: [(&str, i32); 6] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()), expected, "murmur2({input:?})");
        }
    }

    #[test]
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(5), 5);
    }

    #[test]
    fn sticky_partitioner_moves_after_a_batch() {
        let mut p = StickyPartitioner::new(4, 100);
        let first = p.partition(60);
        assert_eq!(p.partition(30), first);
        assert_eq!(
            p.partition(20),
            first,
            "moves only once 100 bytes went there"
        );
        let next = p.partition(1);
        assert_ne!(next, first);
        assert!((0..4).contains(&next));
        let mut single = StickyPartitioner::new(1, 1);
        assert!((0..10).all(|_| single.partition(5) == 0));
    }
}
