//! Kafka's producer partitioning (`BuiltInPartitioner`, `Utils.murmur2`, `Utils.toPositive`): a
//! keyed record goes to `toPositive(murmur2(key)) % partitions`, exactly as the Java producer puts
//! it; a record without a key sticks to one partition until a batch's worth of bytes went there,
//! then draws again (KIP-794's sticky behaviour, without broker load figures).

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

/// What a record adds to its batch, as the producer counts it for the sticky choice: its key,
/// value and headers, plus a record's framing (a header's too).
pub fn estimated_record_bytes(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> usize {
    key.map_or(0, <[u8]>::len)
        + value.map_or(0, <[u8]>::len)
        + headers
            .iter()
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 10)
            .sum::<usize>()
        + 21
}

/// The sticky half of Kafka's `BuiltInPartitioner`, without broker load figures: records without
/// a key go to one partition until `batch_size` bytes went there and its batch is complete, or
/// twice that regardless; then the next partition is drawn uniformly, which may draw the same one
/// again (KIP-794's `nextPartition`; only the older `StickyPartitionCache` forced a change).
#[derive(Debug)]
pub struct StickyPartitioner {
    num_partitions: i32,
    batch_size: usize,
    current: Option<i32>,
    produced: usize,
}

impl StickyPartitioner {
    pub fn new(num_partitions: i32, batch_size: usize) -> Self {
        StickyPartitioner {
            num_partitions: num_partitions.max(1),
            batch_size: batch_size.max(1),
            current: None,
            produced: 0,
        }
    }

    /// The partition a record without a key goes to now.
    pub fn partition(&mut self) -> i32 {
        let n = self.num_partitions;
        *self
            .current
            .get_or_insert_with(|| to_positive(rand::random::<i32>()) % n)
    }

    /// The partition drawn, if one is (none before the first record and after a switch).
    pub fn current(&self) -> Option<i32> {
        self.current
    }

    /// The bytes that went to the current partition.
    #[cfg(test)]
    pub fn produced(&self) -> usize {
        self.produced
    }

    /// Kafka's `updatePartitionInfo`: `appended_bytes` went to the current partition;
    /// `batch_complete` says no batch is left filling there (the record filled its batch, or the
    /// last one was appended since), so moving on leaves no small batch behind.
    pub fn update(&mut self, appended_bytes: usize, batch_complete: bool) {
        self.produced += appended_bytes;
        if (self.produced >= self.batch_size && batch_complete)
            || self.produced >= 2 * self.batch_size
        {
            self.current = None;
            self.produced = 0;
        }
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
        let first = p.partition();
        p.update(60, true);
        assert_eq!(p.partition(), first);
        p.update(50, false);
        assert_eq!(
            p.partition(),
            first,
            "110 bytes, but its batch is still open"
        );
        p.update(50, true);
        assert_eq!(
            p.current(),
            None,
            "past 100 bytes and the batch complete: draw again"
        );
        let next = p.partition();
        assert!((0..4).contains(&next));
        p.update(150, false);
        assert_eq!(p.partition(), next);
        p.update(50, false);
        assert_eq!(p.current(), None, "twice batch_size moves on regardless");
        let mut single = StickyPartitioner::new(1, 1);
        for _ in 0..10 {
            assert_eq!(single.partition(), 0);
            single.update(5, true);
        }
    }

    #[test]
    fn sticky_partitioner_draws_uniformly_and_may_draw_the_same_partition_again() {
        // KIP-794's nextPartition draws among all partitions: over 4,000 switches between two
        // partitions, staying put happens about half the time (it never did with the old cache).
        let mut p = StickyPartitioner::new(2, 1);
        let mut counts = [0usize; 2];
        let mut stays = 0;
        let mut previous = p.partition();
        for _ in 0..4000 {
            p.update(1, true);
            let next = p.partition();
            counts[next as usize] += 1;
            stays += usize::from(next == previous);
            previous = next;
        }
        assert!((1600..2400).contains(&stays), "{stays} stays of 4000");
        assert!(
            counts.iter().all(|c| (1600..2400).contains(c)),
            "{counts:?}"
        );
    }
}
