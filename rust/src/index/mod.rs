//! Kafka's segment indexes. This module mirrors `AbstractIndex` (the memory-mapped, pre-allocated,
//! fixed-entry-size index file and its cache-friendly warm/cold binary search); `offset`, `time` and
//! `txn` mirror `OffsetIndex`, `TimeIndex` and `TransactionIndex`/`AbortedTxn`.
//!
//! Concurrency: lookups take `&self` and never remap; anything that writes, truncates or remaps takes
//! `&mut self`. A caller that wraps an index in an `RwLock` therefore gets Kafka's
//! `lock` + `remapLock` discipline (many readers, one writer, no lookup during a remap) for free.
//! What no lock can prevent: another process truncating a mapped file makes later reads fault (SIGBUS),
//! as it would in Kafka; the files are owned by this process by contract.

/// `OffsetIndex` and `TimeIndex` are an `MmapIndex` (Kafka's subclasses of `AbstractIndex`): both
/// deref to it for what every index shares.
macro_rules! deref_to_mmap_index {
    ($index:ty, $entry:ty) => {
        impl std::ops::Deref for $index {
            type Target = super::MmapIndex<$entry>;
            fn deref(&self) -> &Self::Target {
                &self.index
            }
        }

        impl std::ops::DerefMut for $index {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.index
            }
        }
    };
}

pub mod offset;
pub mod time;
pub mod txn;

use std::cmp::Ordering;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use crate::error::{Error, Result};

pub use offset::{OffsetIndex, OffsetPosition};
pub use time::{TimeIndex, TimestampOffset};
pub use txn::{AbortedTxn, TransactionIndex, TxnIndexSearchResult};

/// Kafka's default `segment.index.bytes` (10 MiB).
pub const DEFAULT_MAX_INDEX_SIZE: usize = 10 * 1024 * 1024;

/// Bytes at the end of the index that make up the "warm" section (see [`MmapIndex::search_slot`]).
pub const WARM_SECTION_BYTES: usize = 8192;

/// One fixed-size entry of a memory-mapped index, and how the search compares it (Kafka's `IndexEntry`).
pub trait IndexEntry: Copy {
    /// Bytes per entry on disk.
    const SIZE: usize;
    /// Decode one entry; `bytes` is exactly `SIZE` long.
    fn parse(bytes: &[u8], base_offset: i64) -> Self;
    /// What `IndexSearchType::Key` compares (offset or timestamp).
    fn key(&self) -> i64;
    /// What `IndexSearchType::Value` compares (file position or offset).
    fn value(&self) -> i64;
    /// Which half holds the offset, what truncation searches on (the key of an offset index
    /// entry, the value of a time index entry).
    const OFFSET_IN: IndexSearchType;
    /// Slots kept free at the end: the time index keeps one for the entry written on roll/close.
    const SPARE_SLOTS: usize = 0;
    /// What an empty index answers as its last entry (Kafka's `lastEntry` on an empty index).
    fn empty(base_offset: i64) -> Self;
}

/// Which half of an entry a search compares (Kafka's `IndexSearchType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexSearchType {
    Key,
    Value,
}

/// Which slot a search returns (Kafka's `SearchResultType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchBound {
    /// The largest entry `<=` target (floor).
    LargestLowerBound,
    /// The smallest entry `>=` target (ceiling).
    SmallestUpperBound,
}

/// Sees every slot a search reads, so tests can count the pages a run of lookups touches.
/// The `()` observer compiles away, so the normal lookup path pays nothing for it.
pub trait SlotObserver {
    fn on_read(&mut self, slot: usize);
}

impl SlotObserver for () {
    #[inline(always)]
    fn on_read(&mut self, _slot: usize) {}
}

/// Records the slots read, in order.
impl SlotObserver for Vec<usize> {
    fn on_read(&mut self, slot: usize) {
        self.push(slot);
    }
}

/// The live mapping. `None` stands for a zero-length file and for a closed index.
enum Mapping {
    None,
    /// A read-only index is a private snapshot taken at open, not a shared mapping: a writer in
    /// another process (a broker, another kafkalog) trims or truncates index files, and a shared
    /// mapping of the cut pages would kill the reader with SIGBUS. The log a read-only view reads
    /// is fixed at open too, so the snapshot answers for exactly that view.
    ReadOnly(Vec<u8>),
    Writable(MmapMut),
}

impl Mapping {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Mapping::None => &[],
            Mapping::ReadOnly(m) => m,
            Mapping::Writable(m) => m,
        }
    }
}

/// Reads an index file into memory for a read-only view. A pre-allocated index (a broker's
/// active segment: 10 MB, mostly a hole) costs only its written part: the buffer starts as
/// zero pages the allocator never touches, and the file is read up to its first hole. Memory
/// that cannot be had is an error, not an abort.
fn snapshot(f: &File, path: &Path, len: usize) -> Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let mut buf = zeroed(len).ok_or_else(|| {
        Error::out_of_memory(
            Some(path),
            format!("no memory for a {len}-byte copy of the index"),
        )
    })?;
    // SAFETY: lseek on a valid fd; SEEK_HOLE only reports where the file's first hole starts.
    let hole = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_HOLE) };
    let data = if hole < 0 {
        len
    } else {
        (hole as usize).min(len)
    };
    let mut read = 0;
    while read < data {
        match f.read_at(&mut buf[read..data], read as u64) {
            // The file shrank under us (a writer trimmed it): what is gone reads as zeros,
            // as the unwritten part of a pre-allocated index does.
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(buf)
}

/// `len` zero bytes, or `None` when the allocator has no room (where `vec![0; len]` aborts).
fn zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: the layout's size is non-zero; a non-null pointer holds `len` zeroed bytes from
    // the global allocator, which the Vec frees with this same layout (u8, capacity `len`).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout);
        (!ptr.is_null()).then(|| Vec::from_raw_parts(ptr, len, len))
    }
}

/// Kafka's `AbstractIndex`: a file of fixed-size entries, memory-mapped, pre-allocated when created
/// writable and trimmed to its valid entries on close.
///
/// Invariant: `entries <= max_entries` and `max_entries * E::SIZE <= mapped length`, so slot reads
/// below `entries` are always in bounds.
///
/// Dropping an index only unmaps it. Trimming happens in [`Self::close`], as in Kafka: a writable
/// index dropped without `close` keeps its pre-allocated zeros, and a later open counts them as
/// entries (Kafka's unclean-shutdown state, which recovery rebuilds).
pub struct MmapIndex<E: IndexEntry> {
    file: PathBuf,
    base_offset: i64,
    max_index_size: usize,
    writable: bool,
    map: Mapping,
    /// File length as mapped (Kafka's `length`); may exceed `entries * SIZE` when pre-allocated.
    length: u64,
    /// The file's leading bytes whose blocks are allocated: the pre-allocated length is sparse,
    /// and appends allocate ahead of themselves a step at a time ([`reserve`]).
    allocated: u64,
    entries: usize,
    max_entries: usize,
    closed: bool,
    /// The last entry, or `E::empty(base_offset)`; kept current by every append and truncation
    /// (Kafka's cached `lastOffset` / `lastEntry`).
    last: E,
    _entry: PhantomData<E>,
}

impl<E: IndexEntry> std::fmt::Debug for MmapIndex<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmapIndex")
            .field("file", &self.file)
            .field("base_offset", &self.base_offset)
            .field("writable", &self.writable)
            .field("length", &self.length)
            .field("entries", &self.entries)
            .field("max_entries", &self.max_entries)
            .finish()
    }
}

#[inline]
fn round_down(n: usize, factor: usize) -> usize {
    factor * (n / factor)
}

impl<E: IndexEntry> MmapIndex<E> {
    /// Open (or, when `writable`, create) an index file, as Kafka's `AbstractIndex` constructor does.
    ///
    /// * A newly created file is pre-allocated to `max_index_size` rounded down to a multiple of the
    ///   entry size; it has no entries.
    /// * An existing file is taken as it is: every whole entry in it counts (`entries = len / SIZE`)
    ///   and it is not resized. Like Kafka, the caller resizes the active segment's indexes
    ///   (`resize(max_index_size)`) after loading; until then such an index is full.
    /// * Read-only: the file is opened with read access only (KAFKA-5104), never created, resized,
    ///   trimmed or written.
    pub fn open(
        file: impl AsRef<Path>,
        base_offset: i64,
        max_index_size: usize,
        writable: bool,
    ) -> Result<Self> {
        let path = file.as_ref().to_path_buf();
        if max_index_size > i32::MAX as usize {
            // Kafka's index sizes, positions and entry counts are Java ints.
            return Err(Error::InvalidArgument(format!(
                "max index size {max_index_size} for {} exceeds {}",
                path.display(),
                i32::MAX
            )));
        }
        let (f, newly_created) = if writable {
            match crate::files::open_regular_with(
                OpenOptions::new().read(true).write(true).create_new(true),
                &path,
            ) {
                Ok(f) => (f, true),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let f = crate::files::open_regular_with(
                        OpenOptions::new().read(true).write(true),
                        &path,
                    )
                    .map_err(|e| Error::io(&path, e))?;
                    (f, false)
                }
                Err(e) => return Err(Error::io(&path, e)),
            }
        } else {
            (
                crate::files::open_regular(&path).map_err(|e| Error::io(&path, e))?,
                false,
            )
        };

        if newly_created {
            if max_index_size < E::SIZE {
                // Don't leave an unusable empty file behind.
                let _ = std::fs::remove_file(&path);
                return Err(Error::InvalidArgument(format!(
                    "invalid max index size {max_index_size} for {} (entry size {})",
                    path.display(),
                    E::SIZE
                )));
            }
            if let Err(e) = reserve(&f, round_down(max_index_size, E::SIZE) as u64, 0) {
                let _ = std::fs::remove_file(&path);
                return Err(Error::io(&path, e));
            }
        }

        let length = f.metadata().map_err(|e| Error::io(&path, e))?.len();
        if length > i32::MAX as u64 {
            // Kafka's index sizes are Java ints: no broker writes a larger one, and reading it
            // whole would ask for that much memory.
            return Err(Error::corrupt_index(format!(
                "an index file of {length} bytes, larger than any Kafka writes ({} bytes at most)",
                i32::MAX
            ))
            .in_file(&path));
        }
        // An existing file's bytes are taken as allocated (they may hold entries).
        let allocated = if newly_created {
            length.min(RESERVE_STEP)
        } else {
            length
        };
        let map = Self::map_file(&f, &path, length, writable)?;
        // A new file's pre-allocated zeros are not entries; an existing file's whole entries are.
        let max_entries = length as usize / E::SIZE;
        let entries = if newly_created { 0 } else { max_entries };
        let mut index = MmapIndex {
            file: path,
            base_offset,
            max_index_size,
            writable,
            map,
            length,
            allocated,
            entries,
            max_entries,
            closed: false,
            last: E::empty(base_offset),
            _entry: PhantomData,
        };
        index.refresh_last();
        Ok(index)
    }

    fn map_file(f: &File, path: &Path, length: u64, writable: bool) -> Result<Mapping> {
        if length == 0 {
            return Ok(Mapping::None);
        }
        let len = usize::try_from(length).map_err(|_| {
            Error::corrupt_index(format!("index file too large to map: {length} bytes"))
                .in_file(path)
        })?;
        // SAFETY: a writable mapping belongs to the log's one writer (the folder's lock), so no
        // one else truncates or rewrites the file, as Kafka's MappedByteBuffer assumes.
        let map = if writable {
            Mapping::Writable(
                unsafe { MmapOptions::new().len(len).map_mut(f) }
                    .map_err(|e| Error::io(path, e))?,
            )
        } else {
            Mapping::ReadOnly(snapshot(f, path, len)?)
        };
        Ok(map)
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn max_index_size(&self) -> usize {
        self.max_index_size
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    pub fn entry_size(&self) -> usize {
        E::SIZE
    }

    pub fn entries(&self) -> usize {
        self.entries
    }

    /// An error once the index is closed: its entries are gone with its map, and a lookup then
    /// answered as if the index were empty (a black-box tester).
    pub fn ensure_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::IllegalState(format!(
                "index {} is closed",
                self.file.display()
            )));
        }
        Ok(())
    }

    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The file length as currently mapped (pre-allocated size while the index is active).
    pub fn length(&self) -> u64 {
        self.length
    }

    /// The entries as stored in the file (big-endian, `entry_size()` bytes each), read from the
    /// mapping (writable) or the snapshot (read-only) the lookups search.
    pub fn entry_bytes(&self) -> &[u8] {
        &self.map.bytes()[..self.entries * E::SIZE]
    }

    /// Bytes actually used by entries.
    pub fn size_in_bytes(&self) -> usize {
        self.entries * E::SIZE
    }

    /// No room for another entry (the time index keeps its last slot spare: full one slot early).
    pub fn is_full(&self) -> bool {
        self.entries + E::SPARE_SLOTS >= self.max_entries
    }

    /// Entries in the warm section: the last 8 KiB (see [`Self::search_slot`]).
    pub fn warm_entries(&self) -> usize {
        WARM_SECTION_BYTES / E::SIZE
    }

    /// Offset relative to the base offset, or `OffsetOverflow` if it does not fit in 0..=i32::MAX.
    pub fn relative_offset(&self, offset: i64) -> Result<i32> {
        self.to_relative(offset).ok_or_else(|| {
            Error::OffsetOverflow(format!(
                "integer overflow for offset {offset} relative to base offset {} ({})",
                self.base_offset,
                self.file.display()
            ))
        })
    }

    /// Whether `offset` can be stored relative to this index's base offset.
    pub fn can_append_offset(&self, offset: i64) -> bool {
        self.to_relative(offset).is_some()
    }

    fn to_relative(&self, offset: i64) -> Option<i32> {
        let rel = offset.checked_sub(self.base_offset)?;
        if (0..=i32::MAX as i64).contains(&rel) {
            Some(rel as i32)
        } else {
            None
        }
    }

    /// Entry `n`, or `InvalidArgument` when `n >= entries`.
    pub fn entry(&self, n: usize) -> Result<E> {
        if n >= self.entries {
            return Err(Error::InvalidArgument(format!(
                "attempt to fetch entry {n} from index {}, which has {} entries",
                self.file.display(),
                self.entries
            )));
        }
        Ok(self.read_slot(n, &mut ()))
    }

    /// The last entry, or `E::empty(base_offset)` when there is none (cached).
    pub fn last(&self) -> E {
        self.last
    }

    fn refresh_last(&mut self) {
        self.last = self.last_entry().unwrap_or(E::empty(self.base_offset));
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<E> {
        self.entries
            .checked_sub(1)
            .map(|n| self.read_slot(n, &mut ()))
    }

    /// How many entries to keep when truncating to `offset`: those whose offset (the entry's key
    /// or value, as `by` says) is below it. Kafka's `truncateTo` for both mapped indexes.
    pub(crate) fn entries_below_offset(&self, offset: i64, by: IndexSearchType) -> usize {
        match self.largest_lower_bound_slot_for(offset, by) {
            None => 0,
            Some(slot) => {
                let e = self.read_slot(slot, &mut ());
                let entry_offset = match by {
                    IndexSearchType::Key => e.key(),
                    IndexSearchType::Value => e.value(),
                };
                if entry_offset == offset {
                    slot
                } else {
                    slot + 1
                }
            }
        }
    }

    #[inline(always)]
    fn read_slot<O: SlotObserver>(&self, n: usize, observer: &mut O) -> E {
        observer.on_read(n);
        let start = n * E::SIZE;
        E::parse(&self.map.bytes()[start..start + E::SIZE], self.base_offset)
    }

    #[inline(always)]
    fn compare(entry: &E, target: i64, by: IndexSearchType) -> Ordering {
        match by {
            IndexSearchType::Key => entry.key().cmp(&target),
            IndexSearchType::Value => entry.value().cmp(&target),
        }
    }

    /// The slot of the largest entry `<=` target, `None` when the index is empty or every entry is larger
    /// (Kafka's `largestLowerBoundSlotFor`, which answers -1 there).
    #[inline]
    pub fn largest_lower_bound_slot_for(&self, target: i64, by: IndexSearchType) -> Option<usize> {
        self.search_slot(target, by, SearchBound::LargestLowerBound, &mut ())
    }

    /// The entry with the largest key `<=` target, or `E::empty(base_offset)` when there is none:
    /// what `OffsetIndex.lookup` and `TimeIndex.lookup` answer. Every slot read goes to `observer`.
    #[inline]
    pub fn lookup_observed<O: SlotObserver>(&self, target: i64, observer: &mut O) -> E {
        match self.search_slot(
            target,
            IndexSearchType::Key,
            SearchBound::LargestLowerBound,
            observer,
        ) {
            None => E::empty(self.base_offset),
            Some(n) => self.read_slot(n, &mut ()),
        }
    }

    /// The slot of the smallest entry `>=` target, `None` when every entry is smaller
    /// (Kafka's `smallestUpperBoundSlotFor`).
    #[inline]
    pub fn smallest_upper_bound_slot_for(&self, target: i64, by: IndexSearchType) -> Option<usize> {
        self.search_slot(target, by, SearchBound::SmallestUpperBound, &mut ())
    }

    /// Kafka's cache-friendly search (KAFKA-6432, `indexSlotRangeFor`).
    ///
    /// Almost every lookup comes from caught-up followers and consumers and lands near the end of the
    /// index. A plain binary search over all entries walks a path whose pages change whenever the
    /// index grows into a new page, and the newly needed middle pages are usually cold (page faults
    /// of up to a second were seen). So the last 8 KiB of entries form a "warm" section: if the target
    /// is past its first entry, only that section is searched, and its (at most 3) pages are the same
    /// for every such lookup, so they stay in the page cache. 8 KiB is small enough that every warm
    /// lookup touches all its pages on 4 KiB-page machines, and large enough to cover a few MB of log.
    ///
    /// One deliberate difference from Kafka: for `SmallestUpperBound`, a target equal to the first entry
    /// answers slot 0. Kafka's cold search never compares its first slot and answers slot 1 there (a
    /// valid but looser upper bound); answering 0 matches a true ceiling and costs nothing.
    #[inline]
    pub fn search_slot<O: SlotObserver>(
        &self,
        target: i64,
        by: IndexSearchType,
        bound: SearchBound,
        observer: &mut O,
    ) -> Option<usize> {
        let entries = self.entries;
        if entries == 0 {
            return None;
        }
        let first_warm = (entries - 1).saturating_sub(self.warm_entries());
        let warm_first = self.read_slot(first_warm, observer);
        if Self::compare(&warm_first, target, by) == Ordering::Less {
            return self.binary_search(target, by, bound, first_warm, entries - 1, observer);
        }
        let first = self.read_slot(0, observer);
        if let Some(answer) = Self::answer_from_first_slot(&first, target, by, bound) {
            return answer;
        }
        self.binary_search(target, by, bound, 0, first_warm, observer)
    }

    /// The search's answer when the first entry already decides it (the target is below it, or
    /// equal to it for a ceiling); `None` when the search must go on.
    #[inline(always)]
    fn answer_from_first_slot(
        first: &E,
        target: i64,
        by: IndexSearchType,
        bound: SearchBound,
    ) -> Option<Option<usize>> {
        match (Self::compare(first, target, by), bound) {
            (Ordering::Greater, SearchBound::LargestLowerBound) => Some(None),
            (Ordering::Greater, SearchBound::SmallestUpperBound)
            | (Ordering::Equal, SearchBound::SmallestUpperBound) => Some(Some(0)),
            _ => None,
        }
    }

    /// Binary search over `[begin, end]`, given `entry[begin] <= target` (strictly `<` for the
    /// ceiling search).
    ///
    /// Branch-free, with both slots the next step may read prefetched. On an index larger than the
    /// caches every step waits on a memory load; a branchy search mispredicts about half its steps
    /// on random targets and discards the loads it had started, and a branch-free one alone
    /// waits for each load in turn (measured no faster than branchy). Prefetching both candidates
    /// overlaps the next step's load with this step's (Khuong and Morin, "Array layouts for
    /// comparison-based searching"). Random lookups into a nearly full 10 MiB index, interleaved
    /// with Kafka's branchy search over the same bytes (benches/index_lookup.rs, `PAIRED`), took
    /// 0.83-0.88x its time; this search written branchy, as Kafka's, took 1.05x.
    #[inline]
    fn binary_search<O: SlotObserver>(
        &self,
        target: i64,
        by: IndexSearchType,
        bound: SearchBound,
        begin: usize,
        end: usize,
        observer: &mut O,
    ) -> Option<usize> {
        // Invariant: entry[floor] <= target, and the answer lies in [floor, floor + len).
        let (mut floor, mut len) = (begin, end - begin + 1);
        while len > 1 {
            let half = len / 2;
            self.prefetch_slot(floor + half / 2);
            self.prefetch_slot(floor + half + half / 2);
            let mid = floor + half;
            let found = self.read_slot(mid, observer);
            let not_above = Self::compare(&found, target, by) != Ordering::Greater;
            floor = std::hint::select_unpredictable(not_above, mid, floor);
            len -= half;
        }
        match bound {
            SearchBound::LargestLowerBound => Some(floor),
            SearchBound::SmallestUpperBound => {
                let at_floor = self.read_slot(floor, observer);
                if Self::compare(&at_floor, target, by) == Ordering::Equal {
                    Some(floor)
                } else if floor + 1 >= self.entries {
                    None
                } else {
                    Some(floor + 1)
                }
            }
        }
    }

    /// Start loading slot `n`'s cache line; a hint only (slots past the entries load nothing
    /// wrong: a prefetch never faults).
    #[inline(always)]
    fn prefetch_slot(&self, n: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let at = self.map.bytes().as_ptr().wrapping_add(n * E::SIZE);
            // SAFETY: a prefetch reads nothing the program sees and never faults.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    at as *const i8,
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = n;
    }

    /// What `OffsetIndex.append` and `TimeIndex.maybeAppend` check before their own ordering
    /// rules: writable, and not full unless `skip_full_check`. `kind` ("offset index", "time
    /// index") names the index in the errors.
    fn check_appendable(&self, kind: &str, skip_full_check: bool) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly(format!(
                "cannot append to {kind} {}: opened read-only",
                self.file.display()
            )));
        }
        if !skip_full_check && self.is_full() {
            return Err(Error::InvalidArgument(format!(
                "attempt to append to a full {kind} {} (size = {})",
                self.file.display(),
                self.entries
            )));
        }
        Ok(())
    }

    fn check_writable(&self, what: &str) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly(format!(
                "cannot {what} index {}: opened read-only",
                self.file.display()
            )));
        }
        if self.closed {
            return Err(Error::IllegalState(format!(
                "cannot {what} index {}: it is closed",
                self.file.display()
            )));
        }
        Ok(())
    }

    /// Write one entry at slot `entries` (module-private: only the typed indexes append, after their
    /// own ordering checks).
    fn push_entry(&mut self, bytes: &[u8]) -> Result<()> {
        self.check_writable("append to")?;
        debug_assert_eq!(bytes.len(), E::SIZE);
        if self.entries >= self.max_entries {
            return Err(Error::InvalidArgument(format!(
                "attempt to append to a full index {} (size = {})",
                self.file.display(),
                self.entries
            )));
        }
        let start = self.entries * E::SIZE;
        if (start + E::SIZE) as u64 > self.allocated {
            self.allocate_more()?;
        }
        match &mut self.map {
            Mapping::Writable(m) => m[start..start + E::SIZE].copy_from_slice(bytes),
            // Unreachable while the invariant holds (max_entries > 0 implies a writable mapping).
            _ => {
                return Err(Error::IllegalState(format!(
                    "index {} has no writable mapping",
                    self.file.display()
                )))
            }
        }
        self.entries += 1;
        self.last = E::parse(bytes, self.base_offset);
        Ok(())
    }

    /// Allocates the next step of the file's blocks, so a full disk fails this append with ENOSPC
    /// instead of a SIGBUS when the mapping's next page is written.
    fn allocate_more(&mut self) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(&self.file)
            .map_err(|e| Error::io(&self.file, e))?;
        let end = (self.allocated + RESERVE_STEP).min(self.length);
        allocate(&f, self.allocated, end).map_err(|e| Error::io(&self.file, e))?;
        self.allocated = end;
        Ok(())
    }

    /// Forget entries past `entries`. The bytes stay in the file, as in Kafka; appends overwrite
    /// them and close trims them.
    fn truncate_to_entries(&mut self, entries: usize) -> Result<()> {
        self.check_writable("truncate")?;
        let kept = entries.min(self.entries);
        // The entries cut are zeroed (Kafka leaves them in its pre-allocated file): until a
        // clean close trims the file, a crash left them readable past the kept ones, and a
        // reader of the file (`verify`) took them for entries pointing past the log.
        if let Mapping::Writable(m) = &mut self.map {
            let (from, to) = (kept * E::SIZE, (self.entries * E::SIZE).min(m.len()));
            if from < to {
                m[from..to].fill(0);
            }
        }
        self.entries = kept;
        self.refresh_last();
        Ok(())
    }

    /// Kafka's `truncateTo`: removes every entry whose offset is `>= offset` (searching on the
    /// half that holds the offset); a larger offset than the last one changes nothing.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = self.entries_below_offset(offset, E::OFFSET_IN);
        self.truncate_to_entries(keep)
    }

    /// Kafka's `truncate`: removes all entries (the file keeps its size).
    pub fn truncate(&mut self) -> Result<()> {
        self.truncate_to_entries(0)
    }

    /// Kafka's `reset`: removes all entries and re-grows the file to the max index size.
    pub fn reset(&mut self) -> Result<()> {
        self.truncate()?;
        self.resize(self.max_index_size).map(|_| ())
    }

    /// Set the file and mapping to `new_size` rounded down to a whole number of entries, keeping the
    /// entries. Used to trim on close/roll and to re-grow the active segment's index to its max size.
    /// Returns whether anything changed. Shrinking below the valid entries is refused.
    pub fn resize(&mut self, new_size: usize) -> Result<bool> {
        self.check_writable("resize")?;
        let rounded = round_down(new_size, E::SIZE);
        if self.length == rounded as u64 {
            return Ok(false);
        }
        if rounded < self.entries * E::SIZE {
            return Err(Error::InvalidArgument(format!(
                "cannot resize index {} to {rounded} bytes: it holds {} entries of {} bytes",
                self.file.display(),
                self.entries,
                E::SIZE
            )));
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.file)
            .map_err(|e| Error::io(&self.file, e))?;
        // Unmap first: shrinking a file under a live mapping would make its tail fault. Written pages
        // are in the page cache already, so dropping the mapping loses nothing.
        self.map = Mapping::None;
        self.max_entries = 0;
        let grown = rounded as u64 > self.length;
        let valid = (self.entries * E::SIZE) as u64;
        let sized = if grown {
            reserve(&f, rounded as u64, valid)
        } else {
            f.set_len(rounded as u64)
        };
        if let Err(e) = sized {
            // Map what the file holds again, so the index stays usable at its old size.
            let _ = f.set_len(self.length);
            self.map = Self::map_file(&f, &self.file, self.length, true)?;
            self.max_entries = self.length as usize / E::SIZE;
            return Err(Error::io(&self.file, e));
        }
        self.allocated = if grown {
            (valid + RESERVE_STEP).min(rounded as u64)
        } else {
            self.allocated.min(rounded as u64)
        };
        self.length = rounded as u64;
        self.map = Self::map_file(&f, &self.file, self.length, true)?;
        self.max_entries = rounded / E::SIZE;
        Ok(true)
    }

    /// Shrink the file to just its valid entries (done on close and when a segment is rolled).
    pub fn trim_to_valid_size(&mut self) -> Result<()> {
        self.resize(self.entries * E::SIZE).map(|_| ())
    }

    /// Write dirty pages to disk (msync). Nothing to do for a read-only index.
    pub fn flush(&self) -> Result<()> {
        if let Mapping::Writable(m) = &self.map {
            m.flush().map_err(|e| Error::io(&self.file, e))?;
        }
        Ok(())
    }

    /// Trim (when writable) and unmap. Afterwards the index reads as empty and refuses writes.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.writable {
            self.trim_to_valid_size()?;
        }
        self.close_handler();
        Ok(())
    }

    /// Unmap without trimming (Kafka's `closeHandler`).
    fn close_handler(&mut self) {
        self.map = Mapping::None;
        self.entries = 0;
        self.max_entries = 0;
        self.closed = true;
    }

    /// Unmap and delete the file; `Ok(false)` if it did not exist (Kafka's `deleteIfExists`).
    pub fn delete(&mut self) -> Result<bool> {
        if !self.writable {
            return Err(Error::ReadOnly(format!(
                "cannot delete index {}: opened read-only",
                self.file.display()
            )));
        }
        self.close_handler();
        match std::fs::remove_file(&self.file) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(&self.file, e)),
        }
    }

    /// Rename the backing file (`.deleted`, `.swap`, `.cleaned` suffixes). The mapping survives the
    /// rename, so the index keeps working; the new path is recorded only if the rename succeeded.
    pub fn rename_to(&mut self, new_path: impl AsRef<Path>) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly(format!(
                "cannot rename index {}: opened read-only",
                self.file.display()
            )));
        }
        let new_path = new_path.as_ref();
        std::fs::rename(&self.file, new_path).map_err(|e| Error::io(&self.file, e))?;
        self.file = new_path.to_path_buf();
        Ok(())
    }

    /// Point at the same file name in another directory (after the log dir was moved).
    pub fn update_parent_dir(&mut self, parent: impl AsRef<Path>) {
        if let Some(name) = self.file.file_name() {
            self.file = parent.as_ref().join(name);
        }
    }

    /// Corruption checks shared by the offset and time indexes: the length must be whole entries.
    /// The checks `OffsetIndex.sanityCheck` and `TimeIndex.sanityCheck` share: a non-empty
    /// index's last offset (`last_offset`) is not below the base offset, and the file holds whole
    /// entries. `kind` ("offset index", "time index") names the index in the errors.
    fn check_last_offset_and_length(&self, kind: &str, last_offset: i64) -> Result<()> {
        if self.entries != 0 && last_offset < self.base_offset {
            return Err(Error::corrupt_index(format!(
                "corrupt {kind}: non-zero size but the last offset is {last_offset} which is less than the base offset {}",
                self.base_offset
            ))
            .in_file(&self.file));
        }
        self.check_length(kind)
    }

    fn check_length(&self, kind: &str) -> Result<()> {
        if !self.length.is_multiple_of(E::SIZE as u64) {
            return Err(Error::corrupt_index(format!(
                "{kind} file is corrupt: found {} bytes, which is not a multiple of {}",
                self.length,
                E::SIZE
            ))
            .in_file(&self.file));
        }
        Ok(())
    }
}

#[inline]
pub(crate) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Test helpers shared by the index modules.
/// How far ahead of its appends an index allocates its file's blocks: 8,192 offset entries.
const RESERVE_STEP: u64 = 64 << 10;

/// Sets an index file's length (sparse, as Kafka's `setLength`) and allocates the blocks of its
/// next `RESERVE_STEP` bytes from `from`: the rest is allocated as appends reach it, so an open
/// log's pre-allocated 10 MiB indexes take disk only for what they hold, and a full disk fails
/// an append with ENOSPC rather than as a SIGBUS when a page of the mapping is first written.
fn reserve(f: &File, len: u64, from: u64) -> std::io::Result<()> {
    f.set_len(len)?;
    allocate(f, from.min(len), (from + RESERVE_STEP).min(len))
}

/// `posix_fallocate` of `[start, end)`; filesystems without it keep the range sparse.
fn allocate(f: &File, start: u64, end: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if end <= start {
        return Ok(());
    }
    // SAFETY: a valid open file descriptor and a non-negative range.
    let rc = unsafe {
        libc::posix_fallocate(
            f.as_raw_fd(),
            start as libc::off_t,
            (end - start) as libc::off_t,
        )
    };
    match rc {
        0 | libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    // What every index class's tests use.
    pub use super::SearchBound;
    pub use rand::rngs::StdRng;
    pub use rand::{Rng, SeedableRng};
    pub use std::collections::BTreeSet;

    /// Kafka's search before KAFKA-6432: one binary search over all entries. Kept to compare results
    /// and the pages touched against the warm/cold search.
    pub fn plain_search_slot<E: IndexEntry, O: SlotObserver>(
        idx: &MmapIndex<E>,
        target: i64,
        by: IndexSearchType,
        bound: SearchBound,
        observer: &mut O,
    ) -> Option<usize> {
        let n = idx.entries();
        if n == 0 {
            return None;
        }
        let first = idx.read_slot(0, observer);
        if let Some(answer) = MmapIndex::answer_from_first_slot(&first, target, by, bound) {
            return answer;
        }
        idx.binary_search(target, by, bound, 0, n - 1, observer)
    }

    /// Linear-scan floor/ceiling over a sorted list of keys.
    pub fn linear_slot(keys: &[i64], target: i64, bound: SearchBound) -> Option<usize> {
        match bound {
            SearchBound::LargestLowerBound => keys.iter().rposition(|&k| k <= target),
            SearchBound::SmallestUpperBound => keys.iter().position(|&k| k >= target),
        }
    }

    /// The 4 KiB pages of the file that entry `slot` lies on.
    pub fn pages_of(slot: usize, entry_size: usize) -> [usize; 2] {
        let start = slot * entry_size;
        [start / 4096, (start + entry_size - 1) / 4096]
    }

    /// Snapshot of a file for "nothing changed" assertions: bytes, length and mtime.
    pub fn snapshot(path: &Path) -> (Vec<u8>, u64, std::time::SystemTime) {
        let meta = std::fs::metadata(path).unwrap();
        (
            std::fs::read(path).unwrap(),
            meta.len(),
            meta.modified().unwrap(),
        )
    }

    /// `<base offset, 20 digits>.<suffix>` in `dir`, as a segment names its index files.
    pub fn index_file(dir: &tempfile::TempDir, base: i64, suffix: &str) -> std::path::PathBuf {
        dir.path().join(format!("{base:020}.{suffix}"))
    }

    /// An input of the index fuzz targets, replayed: base offset and target (i64 LE each), then
    /// the file's bytes, written to `name` in a fresh folder.
    pub struct FuzzCase {
        pub _dir: tempfile::TempDir,
        pub path: std::path::PathBuf,
        pub base: i64,
        pub target: i64,
    }

    pub fn fuzz_case(input: &[u8], name: &str) -> FuzzCase {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, &input[16..]).unwrap();
        FuzzCase {
            _dir: dir,
            path,
            base: i64::from_le_bytes(input[0..8].try_into().unwrap()),
            target: i64::from_le_bytes(input[8..16].try_into().unwrap()),
        }
    }

    /// Makes `path` read-only and snapshots it, after a pause long enough that a later touch, if
    /// any happened, shows up as a different mtime.
    pub fn protect_and_snapshot(path: &Path) -> (Vec<u8>, u64, std::time::SystemTime) {
        make_read_only(path);
        std::thread::sleep(std::time::Duration::from_millis(20));
        snapshot(path)
    }

    pub fn make_read_only(path: &Path) {
        let mut perms = std::fs::metadata(path).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(path, perms).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    /// A bare 8-byte entry: key and value are two big-endian i32s (no base offset applied), so the
    /// generic machinery can be tested on its own.
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Pair(i64, i64);

    impl IndexEntry for Pair {
        const SIZE: usize = 8;
        fn parse(b: &[u8], _base: i64) -> Self {
            Pair(be_i32(b, 0) as i64, be_i32(b, 4) as i64)
        }
        fn key(&self) -> i64 {
            self.0
        }
        fn value(&self) -> i64 {
            self.1
        }
        const OFFSET_IN: IndexSearchType = IndexSearchType::Key;
        fn empty(base_offset: i64) -> Self {
            Pair(base_offset, 0)
        }
    }

    fn push(idx: &mut MmapIndex<Pair>, k: i32, v: i32) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&k.to_be_bytes());
        b[4..].copy_from_slice(&v.to_be_bytes());
        idx.push_entry(&b).unwrap();
    }

    #[test]
    fn the_preallocated_length_takes_disk_only_as_appends_reach_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let on_disk = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
        let mut idx = MmapIndex::<Pair>::open(&path, 0, 10 << 20, true).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 << 20);
        assert!(
            on_disk(&path) <= 2 * RESERVE_STEP,
            "{} bytes allocated",
            on_disk(&path)
        );
        // Past the first step, appends allocate the next one before writing into it.
        let n = 3 * RESERVE_STEP as i32 / 8 + 5;
        for i in 0..n {
            push(&mut idx, i, i * 10);
        }
        let used = n as u64 * 8;
        assert!(on_disk(&path) >= used && on_disk(&path) <= used + 2 * RESERVE_STEP);
        // Re-grown after a trim, as the loader grows the active segment's index back.
        idx.trim_to_valid_size().unwrap();
        idx.resize(10 << 20).unwrap();
        assert!(on_disk(&path) <= used + 2 * RESERVE_STEP);
        push(&mut idx, n, n * 10);
        idx.close().unwrap();
        let idx = MmapIndex::<Pair>::open(&path, 0, 10 << 20, false).unwrap();
        assert_eq!(idx.entries(), n as usize + 1);
        let mut observer = ();
        assert_eq!(
            idx.read_slot(n as usize, &mut observer),
            Pair(n as i64, n as i64 * 10)
        );
    }

    #[test]
    fn preallocates_rounded_down_and_trims_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = MmapIndex::<Pair>::open(&path, 0, 1234567, true).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1234560);
        assert_eq!(idx.max_entries(), 1234560 / 8);
        assert_eq!(idx.entries(), 0);
        push(&mut idx, 1, 10);
        push(&mut idx, 2, 20);
        idx.close().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        assert!(matches!(
            idx.push_entry(&[0; 8]),
            Err(Error::IllegalState(_))
        ));

        // Reopened: the whole entries are kept, and the index is full until resized.
        let mut idx = MmapIndex::<Pair>::open(&path, 0, 1234567, true).unwrap();
        assert_eq!((idx.entries(), idx.max_entries()), (2, 2));
        assert!(idx.is_full());
        assert!(idx.resize(1000).unwrap());
        assert_eq!(
            (idx.entries(), idx.max_entries(), idx.length()),
            (2, 125, 1000)
        );
        assert!(!idx.resize(1001).unwrap(), "same rounded size is no change");
        assert!(matches!(idx.resize(8), Err(Error::InvalidArgument(_))));
        assert_eq!(idx.entry(1).unwrap(), Pair(2, 20));
        assert!(matches!(idx.entry(2), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn indexes_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<OffsetIndex>();
        send_sync::<TimeIndex>();
        send_sync::<TransactionIndex>();
    }

    #[test]
    fn too_small_max_size_is_rejected_without_leaving_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        assert!(matches!(
            MmapIndex::<Pair>::open(&path, 0, 7, true),
            Err(Error::InvalidArgument(_))
        ));
        assert!(!path.exists());
    }

    #[test]
    fn read_only_open_never_creates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.index");
        let err = MmapIndex::<Pair>::open(&path, 0, 1024, false).unwrap_err();
        assert!(err.to_string().contains("missing.index"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn rename_keeps_working_and_delete_removes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = MmapIndex::<Pair>::open(&path, 0, 800, true).unwrap();
        push(&mut idx, 1, 1);
        let renamed = dir.path().join("0.index.deleted");
        idx.rename_to(&renamed).unwrap();
        assert_eq!(idx.file(), renamed.as_path());
        push(&mut idx, 2, 2);
        assert_eq!(
            idx.largest_lower_bound_slot_for(2, IndexSearchType::Key),
            Some(1)
        );
        idx.flush().unwrap();
        assert!(idx.delete().unwrap());
        assert!(!renamed.exists() && !path.exists());
        assert!(!idx.delete().unwrap());
    }

    /// Random indexes below and above the warm size, random targets including outside the range:
    /// the warm/cold search answers what a linear scan and a plain binary search answer.
    #[test]
    fn warm_cold_search_equals_plain_search() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(0x6432);
        for round in 0..40 {
            let n = match round % 4 {
                0 => rng.gen_range(0..8),
                1 => rng.gen_range(1000..1100), // around the 1025-entry warm section
                _ => rng.gen_range(1..5000),
            };
            let path = dir.path().join(format!("{round}.index"));
            let mut idx = MmapIndex::<Pair>::open(&path, 0, n.max(1) * 8, true).unwrap();
            let (mut keys, mut values) = (Vec::new(), Vec::new());
            let (mut k, mut v) = (rng.gen_range(-100..100i32), rng.gen_range(0..100i32));
            for _ in 0..n {
                push(&mut idx, k, v);
                keys.push(k as i64);
                values.push(v as i64);
                k += rng.gen_range(1..20);
                v += rng.gen_range(1..5000);
            }
            for _ in 0..400 {
                for (by, sorted) in [
                    (IndexSearchType::Key, &keys),
                    (IndexSearchType::Value, &values),
                ] {
                    let lo = sorted.first().copied().unwrap_or(0) - 50;
                    let hi = sorted.last().copied().unwrap_or(0) + 50;
                    // Half the targets hit existing entries exactly.
                    let target = if n > 0 && rng.gen_bool(0.5) {
                        sorted[rng.gen_range(0..n)]
                    } else {
                        rng.gen_range(lo..=hi)
                    };
                    for bound in [
                        SearchBound::LargestLowerBound,
                        SearchBound::SmallestUpperBound,
                    ] {
                        let expected = linear_slot(sorted, target, bound);
                        assert_eq!(
                            idx.search_slot(target, by, bound, &mut ()),
                            expected,
                            "n={n} {by:?} {bound:?} {target}"
                        );
                        assert_eq!(
                            plain_search_slot(&idx, target, by, bound, &mut ()),
                            expected
                        );
                    }
                }
            }
        }
    }

    /// Pages read by a run of caught-up lookups: the warm/cold search stays inside the last 8 KiB
    /// (at most 3 pages) however the index grows; a plain binary search wanders over the file.
    #[test]
    fn caught_up_lookups_touch_only_warm_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let total = 100_000;
        let mut idx = MmapIndex::<Pair>::open(&path, 0, total * 8, true).unwrap();
        let mut warm_pages_outside_tail = BTreeSet::new();
        let mut plain_pages_outside_tail = BTreeSet::new();
        let mut warm_pages_max = 0;
        for i in 0..total {
            push(&mut idx, (i * 10) as i32, (i * 100) as i32);
            // Every ~half page of growth, a consumer at the head looks up the newest offsets.
            if i < 2000 || i % 256 != 0 {
                continue;
            }
            let n = idx.entries();
            let last_key = ((n - 1) * 10) as i64;
            let first_warm = n - 1 - idx.warm_entries();
            let tail: BTreeSet<usize> = (first_warm * 8 / 4096..=(n * 8 - 1) / 4096).collect();
            let (mut warm, mut plain) = (Vec::new(), Vec::new());
            for target in [
                last_key - 35,
                last_key - 10,
                last_key,
                last_key + 1,
                last_key + 1000,
            ] {
                idx.search_slot(
                    target,
                    IndexSearchType::Key,
                    SearchBound::LargestLowerBound,
                    &mut warm,
                );
                plain_search_slot(
                    &idx,
                    target,
                    IndexSearchType::Key,
                    SearchBound::LargestLowerBound,
                    &mut plain,
                );
            }
            let warm_pages: BTreeSet<usize> = warm.iter().flat_map(|&s| pages_of(s, 8)).collect();
            let plain_pages: BTreeSet<usize> = plain.iter().flat_map(|&s| pages_of(s, 8)).collect();
            assert!(
                tail.len() <= 3,
                "8 KiB warm section spans {} pages",
                tail.len()
            );
            warm_pages_max = warm_pages_max.max(warm_pages.len());
            warm_pages_outside_tail.extend(warm_pages.difference(&tail).copied());
            plain_pages_outside_tail.extend(plain_pages.difference(&tail).copied());
        }
        assert!(warm_pages_max <= 3);
        assert!(
            warm_pages_outside_tail.is_empty(),
            "warm search read {warm_pages_outside_tail:?}"
        );
        // The plain search keeps reading page 0 and many middle pages that drift as the index grows.
        assert!(plain_pages_outside_tail.contains(&0));
        assert!(
            plain_pages_outside_tail.len() > 20,
            "{}",
            plain_pages_outside_tail.len()
        );
    }
}
