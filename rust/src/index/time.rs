//! Kafka's `TimeIndex` (`.timeindex` files): a sparse map from the largest timestamp seen so far to the
//! offset where it was seen. Each 12-byte entry is a big-endian i64 timestamp followed by a big-endian
//! i32 offset relative to the segment's base offset. Timestamps and offsets never decrease.

use std::path::Path;

use super::{be_i32, be_i64, IndexEntry, IndexSearchType, MmapIndex};
use crate::error::{Error, Result};

/// Kafka's `RecordBatch.NO_TIMESTAMP`.
pub const NO_TIMESTAMP: i64 = -1;

/// A timestamp and the offset of the record that carried it (Kafka's `TimestampOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

impl IndexEntry for TimestampOffset {
    const SIZE: usize = 12;

    #[inline(always)]
    fn parse(b: &[u8], base_offset: i64) -> Self {
        TimestampOffset {
            timestamp: be_i64(b, 0),
            // Java's long + int: wraps for a base offset near i64::MAX, never panics.
            offset: base_offset.wrapping_add(be_i32(b, 8) as i64),
        }
    }

    #[inline(always)]
    fn key(&self) -> i64 {
        self.timestamp
    }

    #[inline(always)]
    fn value(&self) -> i64 {
        self.offset
    }

    const OFFSET_IN: IndexSearchType = IndexSearchType::Value;
    /// Full one slot early: the last slot is kept for the entry written when the segment is rolled
    /// or closed (`maybe_append(.., skip_full_check = true)`).
    const SPARE_SLOTS: usize = 1;

    fn empty(base_offset: i64) -> Self {
        TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: base_offset,
        }
    }
}

/// The time index of one segment. Derefs to [`MmapIndex`] (Kafka's `AbstractIndex`) for sizes,
/// fullness (one spare slot), truncation, reset, resize/trim, flush, close, rename and delete.
#[derive(Debug)]
pub struct TimeIndex {
    index: MmapIndex<TimestampOffset>,
}

deref_to_mmap_index!(TimeIndex, TimestampOffset);

impl TimeIndex {
    /// Open or create the index; see [`MmapIndex::open`] for how new and existing files are treated.
    pub fn open(
        file: impl AsRef<Path>,
        base_offset: i64,
        max_index_size: usize,
        writable: bool,
    ) -> Result<Self> {
        let index = MmapIndex::open(file, base_offset, max_index_size, writable)?;
        Ok(TimeIndex { index })
    }

    /// The last entry, or `(NO_TIMESTAMP, base_offset)` when empty.
    pub fn last_entry(&self) -> TimestampOffset {
        self.index.last()
    }

    /// The entry with the largest timestamp `<=` target, or `(NO_TIMESTAMP, base_offset)` when every
    /// timestamp is larger (or the index is empty).
    #[inline]
    pub fn lookup(&self, target_timestamp: i64) -> TimestampOffset {
        self.index.lookup_observed(target_timestamp, &mut ())
    }

    /// Entry `n`; `InvalidArgument` past the last entry.
    pub fn entry(&self, n: usize) -> Result<TimestampOffset> {
        self.index.entry(n)
    }

    /// Append `(timestamp, offset)` if the timestamp is larger than the last one, with Kafka's rules:
    /// * full (one spare slot) unless `skip_full_check` → `InvalidArgument`; with the check skipped
    ///   the spare slot can be used, and a truly full file still answers `InvalidArgument`;
    /// * offset below the last entry's → `InvalidOffset` (an equal offset is allowed: a roll or close
    ///   may re-offer the last entry, which is then ignored);
    /// * timestamp below the last entry's → `IllegalState`;
    /// * timestamp equal to the last one (or, on an empty index, not above `NO_TIMESTAMP`) → nothing
    ///   is written; this is how v0 batches without timestamps leave the index empty;
    /// * offset not storable relative to the base offset → `OffsetOverflow`.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<()> {
        self.index.check_appendable("time index", skip_full_check)?;
        let entries = self.index.entries();
        if entries != 0 && offset < self.last_entry().offset {
            return Err(Error::InvalidOffset(format!(
                "attempt to append an offset ({offset}) to slot {entries} no larger than the last offset appended ({}) to {}",
                self.last_entry().offset,
                self.index.file().display()
            )));
        }
        if entries != 0 && timestamp < self.last_entry().timestamp {
            return Err(Error::IllegalState(format!(
                "attempt to append a timestamp ({timestamp}) to slot {entries} no larger than the last timestamp appended ({}) to {}",
                self.last_entry().timestamp,
                self.index.file().display()
            )));
        }
        if timestamp > self.last_entry().timestamp {
            let relative = self.index.relative_offset(offset)?;
            let mut entry = [0u8; 12];
            entry[..8].copy_from_slice(&timestamp.to_be_bytes());
            entry[8..].copy_from_slice(&relative.to_be_bytes());
            self.index.push_entry(&entry)?;
        }
        Ok(())
    }

    /// Kafka's checks: in a non-empty index the last timestamp is not below the first and the last
    /// offset is not below the base offset; the file holds whole entries.
    pub fn sanity_check(&self) -> Result<()> {
        if self.index.entries() != 0 {
            let first = self.index.read_slot(0, &mut ());
            if self.last_entry().timestamp < first.timestamp {
                return Err(Error::corrupt_index(format!(
                    "corrupt time index: non-zero size but the last timestamp is {} which is less than the first timestamp {}",
                    self.last_entry().timestamp, first.timestamp
                ))
                .in_file(self.index.file()));
            }
        }
        self.index
            .check_last_offset_and_length("time index", self.last_entry().offset)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    fn new_index(dir: &tempfile::TempDir, base: i64, max_size: usize) -> TimeIndex {
        TimeIndex::open(index_file(dir, base, "timeindex"), base, max_size, true).unwrap()
    }

    /// Found by `cargo fuzz` (target time_index: base offset, target timestamp, then the file): a
    /// base offset of i64::MIN with a negative relative offset overflowed when an entry was read
    /// (a panic in debug builds); it wraps as Java's long + int does.
    #[test]
    fn fuzz_extreme_base_offset_wraps_like_java() {
        let input = include_bytes!("../../testdata/fuzz/time_index-base-offset-overflow.bin");
        let case = fuzz_case(input, "00000000000000000000.timeindex");
        let idx = TimeIndex::open(&case.path, case.base, 4096, false).unwrap();
        let rel = i32::from_be_bytes(input[24..28].try_into().unwrap());
        let first = idx.entry(0).unwrap();
        assert_eq!(first.offset, case.base.wrapping_add(rel as i64));
        let _ = idx.lookup(case.target);
        let _ = idx.last_entry();
        let _ = idx.sanity_check();
    }

    #[test]
    fn byte_layout_and_preallocation() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 500, 10 * 1024 * 1024);
        // 10485760 rounded down to a multiple of 12, as a real broker's fresh .timeindex.
        assert_eq!(std::fs::metadata(idx.file()).unwrap().len(), 10485756);
        idx.maybe_append(0x0102030405060708, 500, false).unwrap();
        idx.maybe_append(0x0102030405060709, 500 + 0x0a0b0c0d, false)
            .unwrap();
        let path = idx.file().to_path_buf();
        idx.close().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 9, 0x0a, 0x0b, 0x0c, 0x0d]
        );
        let idx = TimeIndex::open(&path, 500, 10 * 1024 * 1024, true).unwrap();
        assert_eq!(idx.entries(), 2);
        assert_eq!(
            idx.last_entry(),
            TimestampOffset {
                timestamp: 0x0102030405060709,
                offset: 500 + 0x0a0b0c0d
            }
        );
        idx.sanity_check().unwrap();
    }

    #[test]
    fn lookup_is_a_floor_on_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 100, 4096);
        assert_eq!(
            idx.lookup(5),
            TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: 100
            }
        );
        for (t, o) in [(1000, 100), (2000, 110), (3000, 120)] {
            idx.maybe_append(t, o, false).unwrap();
        }
        assert_eq!(
            idx.lookup(999),
            TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: 100
            }
        );
        assert_eq!(
            idx.lookup(1000),
            TimestampOffset {
                timestamp: 1000,
                offset: 100
            }
        );
        assert_eq!(
            idx.lookup(2999),
            TimestampOffset {
                timestamp: 2000,
                offset: 110
            }
        );
        assert_eq!(
            idx.lookup(i64::MAX),
            TimestampOffset {
                timestamp: 3000,
                offset: 120
            }
        );
    }

    #[test]
    fn maybe_append_rules() {
        let dir = tempfile::tempdir().unwrap();
        // Four slots; the last is the spare.
        let mut idx = new_index(&dir, 100, 4 * 12 + 5);
        assert_eq!(idx.max_entries(), 4);
        // Empty: NO_TIMESTAMP (v0 batches) is never indexed; an offset below the base overflows.
        idx.maybe_append(NO_TIMESTAMP, 100, false).unwrap();
        assert_eq!(idx.entries(), 0);
        assert!(matches!(
            idx.maybe_append(10, 99, false),
            Err(Error::OffsetOverflow(_))
        ));
        // Before the first entry there is no ordering to break: any offset >= base works.
        idx.maybe_append(10, 105, false).unwrap();
        // Same timestamp: ignored, even with a larger offset.
        idx.maybe_append(10, 107, false).unwrap();
        assert_eq!(idx.entries(), 1);
        // Same offset, larger timestamp: appended (offsets may repeat, timestamps may not).
        idx.maybe_append(11, 105, false).unwrap();
        assert_eq!(idx.entries(), 2);
        assert!(matches!(
            idx.maybe_append(12, 104, false),
            Err(Error::InvalidOffset(_))
        ));
        assert!(matches!(
            idx.maybe_append(9, 106, false),
            Err(Error::IllegalState(_))
        ));
        // Offset check comes first when both are wrong, as in Kafka.
        assert!(matches!(
            idx.maybe_append(9, 104, false),
            Err(Error::InvalidOffset(_))
        ));
        assert!(matches!(
            idx.maybe_append(12, 100 + i32::MAX as i64 + 1, false),
            Err(Error::OffsetOverflow(_))
        ));
        idx.maybe_append(12, 110, false).unwrap();
        assert_eq!(idx.entries(), 3);
        // Three of four slots used: full for normal appends, the spare is for the roll.
        assert!(idx.is_full());
        assert!(matches!(
            idx.maybe_append(13, 111, false),
            Err(Error::InvalidArgument(_))
        ));
        // Re-offering the last entry on roll is a no-op even when full.
        idx.maybe_append(12, 110, true).unwrap();
        idx.maybe_append(13, 111, true).unwrap();
        assert_eq!(idx.entries(), 4);
        let err = idx.maybe_append(14, 112, true).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(
            idx.last_entry(),
            TimestampOffset {
                timestamp: 13,
                offset: 111
            }
        );
    }

    #[test]
    fn truncate_to_removes_offsets_at_or_above() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 0, 4096);
        let fill = |idx: &mut TimeIndex| {
            idx.truncate().unwrap();
            for i in 1..=5 {
                idx.maybe_append(i * 1000, i * 10, false).unwrap();
            }
        };
        fill(&mut idx);
        idx.truncate_to(30).unwrap();
        assert_eq!(
            (idx.entries(), idx.last_entry()),
            (
                2,
                TimestampOffset {
                    timestamp: 2000,
                    offset: 20
                }
            )
        );
        fill(&mut idx);
        idx.truncate_to(35).unwrap();
        assert_eq!(idx.entries(), 3);
        fill(&mut idx);
        idx.truncate_to(0).unwrap();
        assert_eq!(
            (idx.entries(), idx.last_entry()),
            (
                0,
                TimestampOffset {
                    timestamp: NO_TIMESTAMP,
                    offset: 0
                }
            )
        );
        fill(&mut idx);
        idx.truncate_to(51).unwrap();
        assert_eq!(idx.entries(), 5);
        // After truncation, timestamps below the removed ones can be appended again.
        idx.truncate_to(30).unwrap();
        idx.maybe_append(2500, 25, false).unwrap();
        assert_eq!(
            idx.lookup(4000),
            TimestampOffset {
                timestamp: 2500,
                offset: 25
            }
        );
        idx.reset().unwrap();
        assert_eq!((idx.entries(), idx.length()), (0, 4092));
    }

    #[test]
    fn sanity_check_catches_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.timeindex");
        let entry = |t: i64, rel: i32| {
            let mut b = t.to_be_bytes().to_vec();
            b.extend_from_slice(&rel.to_be_bytes());
            b
        };
        // Last timestamp below the first.
        std::fs::write(&path, [entry(50, 0), entry(40, 1)].concat()).unwrap();
        let err = TimeIndex::open(&path, 10, 4096, false)
            .unwrap()
            .sanity_check()
            .unwrap_err();
        assert!(
            err.to_string().contains("last timestamp is 40")
                && err.to_string().contains(".timeindex"),
            "{err}"
        );
        // Last offset below the base offset.
        std::fs::write(&path, [entry(50, 0), entry(60, -1)].concat()).unwrap();
        let err = TimeIndex::open(&path, 10, 4096, false)
            .unwrap()
            .sanity_check()
            .unwrap_err();
        assert!(err.to_string().contains("last offset is 9"), "{err}");
        // Not whole entries.
        std::fs::write(&path, [entry(50, 0), vec![0; 5]].concat()).unwrap();
        let idx = TimeIndex::open(&path, 10, 4096, false).unwrap();
        assert_eq!(idx.entries(), 1);
        assert!(idx
            .sanity_check()
            .unwrap_err()
            .to_string()
            .contains("multiple of 12"));
    }

    #[test]
    fn read_only_open_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 0, 1 << 16);
        for i in 0..2000 {
            idx.maybe_append(1_600_000_000_000 + i * 7, i * 2, false)
                .unwrap();
        }
        let path = idx.file().to_path_buf();
        idx.close().unwrap();
        let before = protect_and_snapshot(&path);
        {
            let mut ro = TimeIndex::open(&path, 0, 1 << 16, false).unwrap();
            assert_eq!(ro.entries(), 2000);
            assert_eq!(
                ro.lookup(1_600_000_000_000 + 700),
                TimestampOffset {
                    timestamp: 1_600_000_000_000 + 700,
                    offset: 200
                }
            );
            ro.sanity_check().unwrap();
            assert!(matches!(
                ro.maybe_append(i64::MAX, 5000, true),
                Err(Error::ReadOnly(_))
            ));
            assert!(matches!(ro.truncate_to(10), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.reset(), Err(Error::ReadOnly(_))));
            ro.close().unwrap();
        }
        assert_eq!(snapshot(&path), before);
    }

    /// 12-byte entries: warm section of 683 entries (8196 bytes), still at most 3 pages, and a run of
    /// caught-up lookups reads nothing else.
    #[test]
    fn caught_up_lookups_touch_only_the_warm_pages() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 0, 1 << 21);
        let n = 100_000i64;
        for i in 0..n {
            idx.maybe_append(1_000 + i * 10, i * 3, false).unwrap();
        }
        let last_ts = idx.last_entry().timestamp;
        let first_warm = (n as usize - 1) - idx.warm_entries();
        let warm_pages: BTreeSet<usize> =
            (first_warm * 12 / 4096..=(n as usize * 12 - 1) / 4096).collect();
        assert!(warm_pages.len() <= 3);
        let mut slots = Vec::new();
        for t in (last_ts - 5000)..=(last_ts + 100) {
            idx.lookup_observed(t, &mut slots);
        }
        let touched: BTreeSet<usize> = slots.iter().flat_map(|&s| pages_of(s, 12)).collect();
        assert!(
            touched.is_subset(&warm_pages),
            "touched {touched:?}, warm {warm_pages:?}"
        );
    }

    #[test]
    fn random_lookups_and_truncations_match_a_linear_scan() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(12);
        for round in 0..10 {
            let n = [0usize, 1, 3, 682, 683, 684, 2000, 10_000][round % 8];
            let base = rng.gen_range(0..1000i64);
            let path = dir.path().join(format!("{round}.timeindex"));
            let mut idx = TimeIndex::open(&path, base, (n + 2) * 12, true).unwrap();
            let mut entries = Vec::new();
            let (mut t, mut o) = (rng.gen_range(0..100i64), base);
            for _ in 0..n {
                idx.maybe_append(t, o, false).unwrap();
                entries.push(TimestampOffset {
                    timestamp: t,
                    offset: o,
                });
                t += rng.gen_range(1..30);
                o += rng.gen_range(1..30);
            }
            let stamps: Vec<i64> = entries.iter().map(|e| e.timestamp).collect();
            for _ in 0..2000 {
                let target = rng.gen_range(-50..t + 50);
                let expected = linear_slot(&stamps, target, SearchBound::LargestLowerBound).map_or(
                    TimestampOffset {
                        timestamp: NO_TIMESTAMP,
                        offset: base,
                    },
                    |s| entries[s],
                );
                assert_eq!(idx.lookup(target), expected);
            }
            if n > 0 {
                let cut = rng.gen_range(base..o + 5);
                idx.truncate_to(cut).unwrap();
                let kept = entries.iter().filter(|e| e.offset < cut).count();
                assert_eq!(idx.entries(), kept, "cut={cut}");
            }
        }
    }
}
