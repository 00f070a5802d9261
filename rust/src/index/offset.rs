//! Kafka's `OffsetIndex` (`.index` files): a sparse map from offset to byte position in the segment's
//! `.log`. Each 8-byte entry is a big-endian i32 offset relative to the segment's base offset followed
//! by a big-endian i32 file position. Lookups are floors on the offset.

use std::path::Path;

use super::{be_i32, IndexEntry, IndexSearchType, MmapIndex};
use crate::error::{Error, Result};

/// An offset and the byte position of its batch in the log file (Kafka's `OffsetPosition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: i32,
}

impl IndexEntry for OffsetPosition {
    const SIZE: usize = 8;

    #[inline(always)]
    fn parse(b: &[u8], base_offset: i64) -> Self {
        OffsetPosition {
            // Java's long + int: a base offset near i64::MAX (any i64 can be passed) wraps, never panics.
            offset: base_offset.wrapping_add(be_i32(b, 0) as i64),
            position: be_i32(b, 4),
        }
    }

    #[inline(always)]
    fn key(&self) -> i64 {
        self.offset
    }

    #[inline(always)]
    fn value(&self) -> i64 {
        self.position as i64
    }

    const OFFSET_IN: IndexSearchType = IndexSearchType::Key;

    fn empty(base_offset: i64) -> Self {
        OffsetPosition {
            offset: base_offset,
            position: 0,
        }
    }
}

/// The offset index of one segment. Derefs to [`MmapIndex`] (Kafka's `AbstractIndex`) for sizes,
/// truncation, reset, resize/trim, flush, close, rename and delete.
#[derive(Debug)]
pub struct OffsetIndex {
    index: MmapIndex<OffsetPosition>,
}

deref_to_mmap_index!(OffsetIndex, OffsetPosition);

impl OffsetIndex {
    /// Open or create the index; see [`MmapIndex::open`] for how new and existing files are treated.
    pub fn open(
        file: impl AsRef<Path>,
        base_offset: i64,
        max_index_size: usize,
        writable: bool,
    ) -> Result<Self> {
        let index = MmapIndex::open(file, base_offset, max_index_size, writable)?;
        Ok(OffsetIndex { index })
    }

    /// The last offset in the index, or the base offset when it is empty.
    pub fn last_offset(&self) -> i64 {
        self.index.last().offset
    }

    /// The entry with the largest offset `<=` target, or `(base_offset, 0)` when there is none:
    /// where to start scanning the log for `target`.
    #[inline]
    pub fn lookup(&self, target_offset: i64) -> OffsetPosition {
        self.index.lookup_observed(target_offset, &mut ())
    }

    /// Entry `n`; `InvalidArgument` past the last entry.
    pub fn entry(&self, n: usize) -> Result<OffsetPosition> {
        self.index.entry(n)
    }

    /// An entry guaranteed to lie outside a fetch of `fetch_size` bytes starting at
    /// `fetch_offset.position`: the first entry whose position is `>=` the fetch's end. Not
    /// necessarily the smallest such offset (the index is sparse); `None` when the fetch reaches past
    /// the last entry.
    pub fn fetch_upper_bound_offset(
        &self,
        fetch_offset: OffsetPosition,
        fetch_size: i32,
    ) -> Option<OffsetPosition> {
        let end = fetch_offset.position as i64 + fetch_size as i64;
        self.index
            .smallest_upper_bound_slot_for(end, IndexSearchType::Value)
            .map(|n| self.index.read_slot(n, &mut ()))
    }

    /// Append `offset -> position`. The offset must be larger than every offset already indexed
    /// (`InvalidOffset`) and fit relative to the base offset (`OffsetOverflow`); a full index
    /// answers `InvalidArgument`; a read-only one `ReadOnly`.
    pub fn append(&mut self, offset: i64, position: i32) -> Result<()> {
        self.index.check_appendable("offset index", false)?;
        if self.index.entries() != 0 && offset <= self.last_offset() {
            return Err(Error::InvalidOffset(format!(
                "attempt to append an offset {offset} to position {} no larger than the last offset appended ({}) to {}",
                self.index.entries(),
                self.last_offset(),
                self.index.file().display()
            )));
        }
        let relative = self.index.relative_offset(offset)?;
        let mut entry = [0u8; 8];
        entry[..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.index.push_entry(&entry)
    }

    /// Kafka's checks: a non-empty index's last offset is not below the base offset, and the file
    /// holds whole entries.
    pub fn sanity_check(&self) -> Result<()> {
        self.index
            .check_last_offset_and_length("offset index", self.last_offset())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    fn new_index(dir: &tempfile::TempDir, base: i64, max_size: usize) -> OffsetIndex {
        OffsetIndex::open(index_file(dir, base, "index"), base, max_size, true).unwrap()
    }

    /// Found by `cargo fuzz` (target offset_index: base offset, lookup target, then the file): a
    /// base offset of i64::MIN with a negative relative offset in the file overflowed in every
    /// lookup (a panic in debug builds); it wraps as Java's long + int does.
    #[test]
    fn fuzz_extreme_base_offset_wraps_like_java() {
        let input = include_bytes!("../../testdata/fuzz/offset_index-base-offset-overflow.bin");
        let case = fuzz_case(input, "00000000000000000000.index");
        let idx = OffsetIndex::open(&case.path, case.base, 4096, false).unwrap();
        let first = idx.entry(0).unwrap();
        let rel = i32::from_be_bytes(input[16..20].try_into().unwrap());
        assert_eq!(first.offset, case.base.wrapping_add(rel as i64));
        let _ = idx.lookup(case.target);
        let _ = idx.lookup(case.base);
        let _ = idx.sanity_check();
    }

    #[test]
    fn byte_layout_is_big_endian_relative_offset_then_position() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 1000, 10 * 1024 * 1024);
        assert_eq!(
            std::fs::metadata(idx.file()).unwrap().len(),
            10 * 1024 * 1024
        );
        idx.append(1000, 0).unwrap();
        idx.append(1005, 4096).unwrap();
        idx.append(1000 + 0x01020304, 0x0a0b0c0d).unwrap();
        let path = idx.file().to_path_buf();
        idx.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes,
            [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0x10, 0, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c,
                0x0d
            ]
        );

        let idx = OffsetIndex::open(&path, 1000, 10 * 1024 * 1024, true).unwrap();
        assert_eq!(idx.entries(), 3);
        assert_eq!(idx.last_offset(), 1000 + 0x01020304);
        assert_eq!(
            idx.entry(1).unwrap(),
            OffsetPosition {
                offset: 1005,
                position: 4096
            }
        );
        idx.sanity_check().unwrap();
    }

    #[test]
    fn lookup_is_a_floor() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 50, 4096);
        assert_eq!(
            idx.lookup(60),
            OffsetPosition {
                offset: 50,
                position: 0
            }
        );
        for (o, p) in [(52, 100), (55, 200), (60, 300)] {
            idx.append(o, p).unwrap();
        }
        assert_eq!(
            idx.lookup(51),
            OffsetPosition {
                offset: 50,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(52),
            OffsetPosition {
                offset: 52,
                position: 100
            }
        );
        assert_eq!(
            idx.lookup(59),
            OffsetPosition {
                offset: 55,
                position: 200
            }
        );
        assert_eq!(
            idx.lookup(1_000_000),
            OffsetPosition {
                offset: 60,
                position: 300
            }
        );
    }

    #[test]
    fn fetch_upper_bound_offset_is_first_entry_at_or_past_the_fetch_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 0, 4096);
        for i in 0..10 {
            idx.append(i * 10, (i * 1000) as i32).unwrap();
        }
        let start = OffsetPosition {
            offset: 20,
            position: 2000,
        };
        assert_eq!(
            idx.fetch_upper_bound_offset(start, 1500),
            Some(OffsetPosition {
                offset: 40,
                position: 4000
            })
        );
        assert_eq!(
            idx.fetch_upper_bound_offset(start, 2000),
            Some(OffsetPosition {
                offset: 40,
                position: 4000
            })
        );
        assert_eq!(idx.fetch_upper_bound_offset(start, 7001), None);
        // A fetch ending exactly at the first entry is bounded by that entry.
        let zero = OffsetPosition {
            offset: 0,
            position: 0,
        };
        assert_eq!(idx.fetch_upper_bound_offset(zero, 0), Some(zero));
        // No i32 overflow on a huge fetch.
        assert_eq!(
            idx.fetch_upper_bound_offset(
                OffsetPosition {
                    offset: 0,
                    position: i32::MAX
                },
                i32::MAX
            ),
            None
        );
    }

    #[test]
    fn append_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 100, 3 * 8 + 7);
        assert_eq!(idx.max_entries(), 3);
        assert!(matches!(idx.append(99, 0), Err(Error::OffsetOverflow(_))));
        assert!(matches!(
            idx.append(100 + i32::MAX as i64 + 1, 0),
            Err(Error::OffsetOverflow(_))
        ));
        assert!(idx.can_append_offset(100 + i32::MAX as i64));
        assert!(!idx.can_append_offset(99));
        idx.append(100, 0).unwrap();
        assert!(matches!(idx.append(100, 10), Err(Error::InvalidOffset(_))));
        assert!(matches!(idx.append(99, 10), Err(Error::InvalidOffset(_))));
        idx.append(105, 10).unwrap();
        assert!(matches!(idx.append(104, 20), Err(Error::InvalidOffset(_))));
        idx.append(100 + i32::MAX as i64, 20).unwrap();
        assert!(idx.is_full());
        let err = idx.append(i64::MAX, 30).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("full"),
            "{err}"
        );
        assert_eq!(idx.entries(), 3);
        assert_eq!(idx.last_offset(), 100 + i32::MAX as i64);
    }

    #[test]
    fn truncate_to_removes_offsets_at_or_above() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 0, 4096);
        let fill = |idx: &mut OffsetIndex| {
            idx.truncate().unwrap();
            for i in 1..=5 {
                idx.append(i * 10, (i * 100) as i32).unwrap();
            }
        };
        fill(&mut idx);
        idx.truncate_to(30).unwrap(); // exact entry: removed with everything after it
        assert_eq!((idx.entries(), idx.last_offset()), (2, 20));
        fill(&mut idx);
        idx.truncate_to(35).unwrap(); // between entries: keep the floor
        assert_eq!((idx.entries(), idx.last_offset()), (3, 30));
        fill(&mut idx);
        idx.truncate_to(5).unwrap(); // below all: empty
        assert_eq!((idx.entries(), idx.last_offset()), (0, 0));
        fill(&mut idx);
        idx.truncate_to(1000).unwrap(); // above all: unchanged
        assert_eq!((idx.entries(), idx.last_offset()), (5, 50));
        // Appends continue after the truncation point and overwrite the stale bytes.
        idx.truncate_to(30).unwrap();
        idx.append(31, 333).unwrap();
        assert_eq!(
            idx.lookup(40),
            OffsetPosition {
                offset: 31,
                position: 333
            }
        );
        // reset empties and re-grows to the max size.
        idx.trim_to_valid_size().unwrap();
        assert_eq!(idx.length(), 24);
        idx.reset().unwrap();
        assert_eq!(
            (idx.entries(), idx.length(), idx.max_entries()),
            (0, 4096, 512)
        );
    }

    #[test]
    fn sanity_check_catches_corruption() {
        let dir = tempfile::tempdir().unwrap();
        // A negative relative offset: last offset below the base offset.
        let path = dir.path().join("00000000000000000100.index");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.extend_from_slice(&0i32.to_be_bytes());
        bytes.extend_from_slice(&(-5i32).to_be_bytes());
        bytes.extend_from_slice(&10i32.to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let idx = OffsetIndex::open(&path, 100, 4096, false).unwrap();
        let err = idx.sanity_check().unwrap_err();
        assert!(matches!(err, Error::CorruptIndex { .. }), "{err}");
        assert!(
            err.to_string().contains("00000000000000000100.index"),
            "{err}"
        );

        // A length that is not whole entries.
        bytes.truncate(12);
        std::fs::write(&path, &bytes).unwrap();
        let idx = OffsetIndex::open(&path, 100, 4096, false).unwrap();
        assert_eq!(idx.entries(), 1);
        let err = idx.sanity_check().unwrap_err();
        assert!(err.to_string().contains("multiple of 8"), "{err}");

        // Empty and healthy files pass.
        std::fs::write(&path, []).unwrap();
        OffsetIndex::open(&path, 100, 4096, false)
            .unwrap()
            .sanity_check()
            .unwrap();
    }

    #[test]
    fn read_only_open_works_on_a_write_protected_file_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 0, 1 << 20);
        for i in 0..3000 {
            idx.append(i * 3, (i * 64) as i32).unwrap();
        }
        let path = idx.file().to_path_buf();
        idx.close().unwrap();
        let before = protect_and_snapshot(&path);

        {
            let mut ro = OffsetIndex::open(&path, 0, 1 << 20, false).unwrap();
            assert_eq!((ro.entries(), ro.last_offset()), (3000, 8997));
            assert_eq!(
                ro.lookup(4000),
                OffsetPosition {
                    offset: 3999,
                    position: 1333 * 64
                }
            );
            assert_eq!(
                ro.lookup(0),
                OffsetPosition {
                    offset: 0,
                    position: 0
                }
            );
            ro.sanity_check().unwrap();
            assert!(matches!(ro.append(9000, 0), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.truncate_to(10), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.truncate(), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.reset(), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.resize(1 << 20), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.trim_to_valid_size(), Err(Error::ReadOnly(_))));
            assert!(matches!(
                ro.rename_to(dir.path().join("x")),
                Err(Error::ReadOnly(_))
            ));
            assert!(matches!(ro.delete(), Err(Error::ReadOnly(_))));
            assert_eq!(
                ro.entries(),
                3000,
                "failed writes leave the index as it was"
            );
            ro.flush().unwrap();
            ro.close().unwrap();
        }
        {
            let _dropped_without_close = OffsetIndex::open(&path, 0, 1 << 20, false).unwrap();
        }
        assert_eq!(snapshot(&path), before);
    }

    /// A run of caught-up lookups on a 100k-entry index (196 pages) reads only the warm pages.
    #[test]
    fn caught_up_lookups_touch_only_the_warm_pages() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(&dir, 1_000_000, 1 << 20);
        let n = 100_000i64;
        for i in 0..n {
            idx.append(1_000_000 + i * 4, (i * 4096) as i32).unwrap();
        }
        let last = idx.last_offset();
        let first_warm = (n as usize - 1) - idx.warm_entries();
        let warm_pages: BTreeSet<usize> =
            (first_warm * 8 / 4096..=(n as usize * 8 - 1) / 4096).collect();
        assert!(warm_pages.len() <= 3);

        let mut slots = Vec::new();
        for t in (last - 2000)..=(last + 10) {
            let found = idx.lookup_observed(t, &mut slots);
            assert_eq!(found, idx.lookup(t));
        }
        let touched: BTreeSet<usize> = slots.iter().flat_map(|&s| pages_of(s, 8)).collect();
        assert!(
            touched.is_subset(&warm_pages),
            "touched {touched:?}, warm {warm_pages:?}"
        );

        let mut plain = Vec::new();
        for t in (last - 2000)..=(last + 10) {
            plain_search_slot(
                &idx,
                t,
                IndexSearchType::Key,
                SearchBound::LargestLowerBound,
                &mut plain,
            );
        }
        let plain_touched: BTreeSet<usize> = plain.iter().flat_map(|&s| pages_of(s, 8)).collect();
        assert!(
            plain_touched.contains(&0) && plain_touched.len() > warm_pages.len() + 5,
            "{plain_touched:?}"
        );
    }

    #[test]
    fn random_lookups_match_a_linear_scan() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..12 {
            let base = rng.gen_range(0..1_000_000i64);
            let n = [0usize, 1, 2, 500, 1024, 1025, 1026, 3000, 20_000][round % 9];
            let mut idx = OffsetIndex::open(
                dir.path().join(format!("{round}.index")),
                base,
                (n + 1) * 8,
                true,
            )
            .unwrap();
            let mut offsets = Vec::new();
            let (mut o, mut p) = (base + rng.gen_range(0..5), 0i32);
            for _ in 0..n {
                idx.append(o, p).unwrap();
                offsets.push(o);
                o += rng.gen_range(1..50);
                p += rng.gen_range(1..10_000);
            }
            for _ in 0..2000 {
                let target = rng.gen_range(base - 20..o + 20);
                let expected = match linear_slot(&offsets, target, SearchBound::LargestLowerBound) {
                    None => OffsetPosition {
                        offset: base,
                        position: 0,
                    },
                    Some(s) => idx.entry(s).unwrap(),
                };
                assert_eq!(idx.lookup(target), expected, "n={n} target={target}");
            }
        }
    }
}
