//! A `.log` file of record batches (Kafka's `FileRecords` + `FileLogInputStream`): positional
//! reads and appends, shallow batch scans that read only headers, and a chunked reader that hands
//! out whole batches for decoding. A read-only view can be told to step over damaged byte ranges
//! (`skip_ranges`), and `find_next_valid_batch` finds where valid batches resume after damage.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use arrow_buffer::Buffer;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::record::batch::{
    Batch, BatchPrefix, ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK, HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET, MAGIC_V1, MAGIC_V2, MAX_TIMESTAMP_OFFSET, NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
};
use crate::record::codec::Compression;
use crate::record::segment_map::SegmentMap;

/// Largest batch a reader accepts from a length field unless told otherwise; bounds allocation.
pub const DEFAULT_MAX_BATCH_SIZE: usize = 256 * 1024 * 1024;

/// What a header-only scan learns about a batch without reading its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub position: u64,
    pub size: usize,
    pub magic: u8,
    /// v2: base offset; v0/v1: the entry's offset (the last inner offset of a wrapper).
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    /// A v2 control batch (a transaction marker).
    pub is_control: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsetPosition {
    pub offset: i64,
    pub position: u64,
    pub size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
}

#[derive(Debug)]
pub struct FileRecords {
    path: PathBuf,
    /// Shared with the memory map, which keeps this open (and its lock) as long as it lives
    /// without a descriptor of its own: a read of a log of thousands of segments needs no
    /// second descriptor per segment.
    file: std::sync::Arc<File>,
    size: u64,
    writable: bool,
    /// Damaged `[start, end)` byte ranges every reader steps over (a read-only view that skips
    /// damage); sorted, disjoint.
    skipped: Vec<(u64, u64)>,
    /// The file memory-mapped as one Arrow buffer, made on the first mapped read of a
    /// read-only file ([`Self::mapped`]); `None` inside when it cannot be mapped.
    mapping: std::sync::OnceLock<Option<Mapping>>,
}

impl FileRecords {
    /// Opens (and, when writable, creates) a log file. A read-only open never writes.
    pub fn open(path: &Path, writable: bool) -> Result<Self> {
        let file = if writable {
            crate::files::open_regular_with(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false),
                path,
            )
        } else {
            crate::files::open_regular(path)
        }
        .map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(FileRecords {
            path: path.to_path_buf(),
            file: std::sync::Arc::new(file),
            size,
            writable,
            skipped: Vec::new(),
            mapping: std::sync::OnceLock::new(),
        })
    }

    /// Makes every reader step over these damaged `[start, end)` ranges (read-only views only).
    pub fn skip_ranges(&mut self, mut ranges: Vec<(u64, u64)>) {
        ranges.retain(|(s, e)| e > s);
        ranges.sort_unstable();
        self.skipped = ranges;
    }

    pub fn skipped_ranges(&self) -> &[(u64, u64)] {
        &self.skipped
    }

    /// `position` moved past any skipped range it falls in.
    fn past_skipped(&self, mut position: u64) -> u64 {
        for &(start, end) in &self.skipped {
            if position >= start && position < end {
                position = end;
            }
        }
        position
    }

    /// The start of the first skipped range at or after `position` (where a raw read must stop).
    fn next_skipped_start(&self, position: u64) -> u64 {
        self.skipped
            .iter()
            .map(|&(start, _)| start)
            .find(|&start| start >= position)
            .unwrap_or(u64::MAX)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn size_in_bytes(&self) -> u64 {
        self.size
    }
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Treats only the first `size` bytes as the log (a read-only view ending before a torn tail).
    pub fn limit_to(&mut self, size: u64) {
        self.size = self.size.min(size);
    }

    fn ensure_writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::ReadOnly(format!(
                "{} is opened read-only",
                self.path.display()
            )))
        }
    }

    /// Appends whole batches at the end of the file; returns the bytes written.
    pub fn append(&mut self, data: &[u8]) -> Result<usize> {
        self.ensure_writable()?;
        let new_size = self.size + data.len() as u64;
        if new_size > i32::MAX as u64 {
            return Err(Error::IllegalState(format!(
                "appending {} bytes to {} would pass 2 GiB ({} bytes now)",
                data.len(),
                self.path.display(),
                self.size
            )));
        }
        if let Err(e) = self.file.write_all_at(data, self.size) {
            // A full disk can take part of the batch: cut it off again, so nothing half-written
            // stays past the end the log knows.
            let _ = self.file.set_len(self.size);
            return Err(Error::io(&self.path, e));
        }
        self.size = new_size;
        Ok(data.len())
    }

    pub fn flush(&self) -> Result<()> {
        if self.writable {
            self.file
                .sync_data()
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Kafka's `truncateTo`: cuts the file to `target_size` bytes; returns the bytes removed.
    pub fn truncate_to(&mut self, target_size: u64) -> Result<u64> {
        self.ensure_writable()?;
        if target_size > self.size {
            return Err(Error::InvalidArgument(format!(
                "cannot truncate {} of size {} to the larger size {target_size}",
                self.path.display(),
                self.size
            )));
        }
        let removed = self.size - target_size;
        if removed == 0 {
            return Ok(0);
        }
        if crate::files::try_flock(&self.file, libc::LOCK_EX) {
            // No read-only view maps the file (each holds LOCK_SH while it does, and none can
            // start while this lock is held): cut it in place, as Kafka does.
            let cut = self.file.set_len(target_size);
            crate::files::try_flock(&self.file, libc::LOCK_UN);
            cut.map_err(|e| Error::io(&self.path, e))?;
        } else {
            self.truncate_by_copy(target_size)?;
        }
        self.size = target_size;
        Ok(removed)
    }

    /// Truncation when a read-only view (zero-copy Arrow arrays, a mapped read) maps the file:
    /// cut in place, the pages past the cut would fault that view's reader (SIGBUS). The bytes
    /// kept go to a new file (`.cleaned`, which a load deletes should this stop half way)
    /// renamed over this one; the old file, unlinked, stays whole for the maps until they go.
    fn truncate_by_copy(&mut self, target_size: u64) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        let io = |e| Error::io(&self.path, e);
        let mut temp_name = self.path.clone().into_os_string();
        temp_name.push(crate::segment::CLEANED_FILE_SUFFIX);
        let temp = PathBuf::from(temp_name);
        let mut kept = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .map_err(|e| Error::io(&temp, e))?;
        let copied = (|| {
            let mut source = self.file.try_clone()?;
            source.seek(SeekFrom::Start(0))?;
            std::io::copy(&mut std::io::Read::take(source, target_size), &mut kept)?;
            kept.set_permissions(self.file.metadata()?.permissions())?;
            kept.sync_all()?;
            std::fs::rename(&temp, &self.path)
        })();
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&temp);
            return Err(io(e));
        }
        if let Some(dir) = self.path.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        self.file = std::sync::Arc::new(kept);
        Ok(())
    }

    pub fn rename_to(&mut self, new_path: &Path) -> Result<()> {
        std::fs::rename(&self.path, new_path).map_err(|e| Error::io(&self.path, e))?;
        self.path = new_path.to_path_buf();
        Ok(())
    }

    pub fn delete(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&self.path, e)),
            _ => Ok(()),
        }
    }

    /// Reads `len` bytes at `position`, clamped to the end of the log (and to the next skipped
    /// range, so raw fetches never hand out damaged bytes).
    pub fn read_range(&self, position: u64, len: usize) -> Result<Vec<u8>> {
        let end = (position.saturating_add(len as u64))
            .min(self.size)
            .min(self.next_skipped_start(position));
        if position >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - position) as usize];
        self.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// `buf.len()` bytes at `position`. A file cut since it was opened (another process's writer
    /// truncated it) is said as such, not as the bare "failed to fill whole buffer".
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> Result<()> {
        self.file.read_exact_at(buf, position).map_err(|e| {
            if e.kind() != std::io::ErrorKind::UnexpectedEof {
                return Error::io(&self.path, e);
            }
            let now = self.file.metadata().map(|m| m.len()).unwrap_or(0);
            Error::io(
                &self.path,
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "the file ends at byte {now}, before the {} bytes read at {position} (it \
                         held {} when the log was opened: cut since, by another writer?)",
                        buf.len(),
                        self.size
                    ),
                ),
            )
        })
    }

    /// Reads the header of the batch at `position`; `Ok(None)` at the end of the log. A batch
    /// whose length runs past the end is an error naming the file and position.
    pub fn read_header(&self, position: u64, max_batch_size: usize) -> Result<Option<BatchHeader>> {
        let position = self.past_skipped(position);
        if position >= self.size {
            return Ok(None);
        }
        let left = self.size - position;
        let mut buf = [0u8; RECORD_BATCH_OVERHEAD];
        let want = (left as usize).min(RECORD_BATCH_OVERHEAD);
        self.read_exact_at(&mut buf[..want], position)?;
        parse_header(&buf[..want], position, (left as usize).min(max_batch_size))
            .map(Some)
            .map_err(|e| e.at(Some(&self.path), position))
    }

    /// Every batch header from `start` to the end of the file, in order, through a buffer
    /// (skipped ranges are not stepped over): 4 KiB reads where batches are large, a header each,
    /// and 256 KiB reads where they are small, many headers each, so the walk pays neither a
    /// read per small batch nor the bytes of large ones. `visit` returns whether to go on; a
    /// batch that does not parse or runs past the end of the file is an error.
    pub fn for_each_header(
        &self,
        start: u64,
        max_batch_size: usize,
        visit: &mut dyn FnMut(&BatchHeader) -> bool,
    ) -> Result<()> {
        const SPARSE_READ: usize = 4 << 10;
        const DENSE_READ: usize = 256 << 10;
        let mut buf: Vec<u8> = Vec::new();
        let (mut buf_start, mut position) = (start, start);
        let mut read_size = SPARSE_READ;
        while position < self.size {
            let left = self.size - position;
            let header_len = (left as usize).min(RECORD_BATCH_OVERHEAD);
            if position + header_len as u64 > buf_start + buf.len() as u64 {
                let want = (left as usize).min(read_size.max(header_len));
                buf.resize(want, 0);
                self.read_exact_at(&mut buf, position)?;
                buf_start = position;
            }
            let at = (position - buf_start) as usize;
            let header = parse_header(
                &buf[at..at + header_len],
                position,
                (left as usize).min(max_batch_size),
            )
            .map_err(|e| e.at(Some(&self.path), position))?;
            if !visit(&header) {
                return Ok(());
            }
            read_size = if header.size < SPARSE_READ {
                DENSE_READ
            } else {
                SPARSE_READ
            };
            position += header.size as u64;
        }
        Ok(())
    }

    /// Whether the bytes at `position` are a whole batch of a magic above 2 whose CRC holds when
    /// read as a v2 batch, as Kafka's `FileLogInputStream` reads one: the CRC does not cover the
    /// magic byte, so Kafka's recovery keeps such a batch (and its consumers fail on it).
    pub(crate) fn is_v2_batch_of_unknown_magic(
        &self,
        position: u64,
        max_batch_size: usize,
    ) -> bool {
        use crate::record::batch::{
            LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD,
        };
        let Ok(prefix) = self.read_range(position, RECORD_BATCH_OVERHEAD) else {
            return false;
        };
        if prefix.len() < RECORD_BATCH_OVERHEAD || prefix[MAGIC_OFFSET] <= MAGIC_V2 {
            return false;
        }
        let length: [u8; 4] = prefix[LENGTH_OFFSET..LENGTH_OFFSET + 4]
            .try_into()
            .expect("4 bytes");
        let size = (i32::from_be_bytes(length).max(0) as u64).saturating_add(LOG_OVERHEAD as u64);
        if size < prefix.len() as u64
            || size > max_batch_size as u64
            || size > self.size_in_bytes().saturating_sub(position)
        {
            return false;
        }
        self.read_range(position, size as usize)
            .ok()
            .and_then(|bytes| {
                crate::record::batch::DefaultBatch::new_as_file_batch(&bytes)
                    .ok()
                    .map(|b| b.size_in_bytes() as u64 == size && b.is_valid())
            })
            .unwrap_or(false)
    }

    /// Whether the bytes at `position` are a whole v2 batch whose CRC holds (of a known magic or
    /// not): written whole, so not what a torn write leaves, whatever else is wrong with it.
    pub(crate) fn holds_whole_batch_with_valid_crc(
        &self,
        position: u64,
        max_batch_size: usize,
    ) -> bool {
        let mut reader = self.batches(position, self.size_in_bytes(), max_batch_size);
        let crc_holds = matches!(reader.next_batch(), Ok(Some((_, bytes)))
            if matches!(Batch::parse(bytes), Ok(Batch::V2(b)) if b.is_valid()));
        crc_holds || self.is_v2_batch_of_unknown_magic(position, max_batch_size)
    }

    /// Header-only scan of the batches from `start` to the end of the log.
    pub fn headers_from(&self, start: u64, max_batch_size: usize) -> HeaderIter<'_> {
        HeaderIter {
            records: self,
            position: start,
            max_batch_size,
            done: false,
        }
    }

    /// Kafka's `searchForOffsetWithSize`: the first batch at or after `starting_position` whose
    /// last offset is >= `target_offset`.
    pub fn search_for_offset_with_size(
        &self,
        target_offset: i64,
        starting_position: u64,
        max_batch_size: usize,
    ) -> Result<Option<LogOffsetPosition>> {
        for header in self.headers_from(starting_position, max_batch_size) {
            let h = header?;
            if h.last_offset >= target_offset {
                return Ok(Some(LogOffsetPosition {
                    offset: h.last_offset,
                    position: h.position,
                    size: h.size,
                }));
            }
        }
        Ok(None)
    }

    /// Whole batches from `start` up to `end` (exclusive), read in large chunks.
    pub fn batches(&self, start: u64, end: u64, max_batch_size: usize) -> BatchReader<'_> {
        BatchReader {
            records: self,
            next: start,
            end: end.min(self.size),
            buf: Buffer::default(),
            buf_start: start,
            max_batch_size,
            window: FIRST_WINDOW,
        }
    }

    /// The one batch loop over a `.log` file: every whole batch in [start, end), parsed once and
    /// CRC-checked, handed to `visit` with its byte position (`visit` decodes the records it
    /// wants with `Batch::records` and returns whether to go on). Any batch that does not parse
    /// or validate, a partial one at the end included, is a corruption error naming the file
    /// and position: a `Log` limits its files to what it validated on open, so a torn tail a
    /// crash left never reaches here through it.
    pub fn for_each_batch(
        &self,
        start: u64,
        end: u64,
        max_batch_size: usize,
        visit: &mut dyn FnMut(u64, &Batch<'_>) -> Result<bool>,
    ) -> Result<()> {
        self.for_each_batch_in_window(start, end, max_batch_size, &mut |pos, batch, _| {
            visit(pos, batch)
        })
    }

    /// [`Self::for_each_batch`], also handing `visit` the read window that holds the batch's
    /// bytes as an Arrow buffer, so a reader can keep slices of it without copying them
    /// (zero-copy Arrow views). A window still held that way is never refilled: the next read
    /// goes to a new one.
    pub fn for_each_batch_in_window(
        &self,
        start: u64,
        end: u64,
        max_batch_size: usize,
        visit: &mut dyn FnMut(u64, &Batch<'_>, &Buffer) -> Result<bool>,
    ) -> Result<()> {
        self.for_each_batch_mapped(start, end, max_batch_size, FileAccess::Windows, visit)
    }

    /// [`Self::for_each_batch_in_window`] through `access`: with [`FileAccess::Mapped`] the file
    /// is memory-mapped ([`Self::mapped`]) when it can be, every batch's window is then the one
    /// mapping, so zero-copy readers keep slices of the page cache itself and no byte is copied
    /// by a read. Otherwise (writable, empty, over 2 GiB, the map failed, or
    /// `windows_without_checker` and no checker thread) the same read windows as
    /// [`FileAccess::Windows`].
    pub fn for_each_batch_mapped(
        &self,
        start: u64,
        end: u64,
        max_batch_size: usize,
        access: FileAccess,
        visit: &mut dyn FnMut(u64, &Batch<'_>, &Buffer) -> Result<bool>,
    ) -> Result<()> {
        let (map, check_crcs_ahead, release_behind, windows_without_checker) = match access {
            FileAccess::Windows => (None, false, false, true),
            FileAccess::Mapped {
                check_crcs_ahead,
                release_behind,
                windows_without_checker,
            } => (
                self.whole_mapping(),
                check_crcs_ahead,
                release_behind,
                windows_without_checker,
            ),
        };
        let ahead_batches = map
            .filter(|_| {
                check_crcs_ahead
                    && end.saturating_sub(start) >= CHECK_AHEAD_MIN_BYTES
                    && cores() > 1
            })
            .and_then(|m| check_ahead_batches(m.buffer.as_slice(), start));
        let map = map.filter(|_| ahead_batches.is_some() || !windows_without_checker);
        let Some(ahead_batches) = ahead_batches else {
            return self.visit_batches(
                start,
                end,
                max_batch_size,
                map,
                release_behind,
                None,
                visit,
            );
        };
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let (checked, results) = std::sync::mpsc::sync_channel(ahead_batches);
            let stop = &stop;
            let checker = std::thread::Builder::new()
                .name("kafkalog-crc".into())
                .spawn_scoped(scope, move || {
                    self.check_ahead(start, end, max_batch_size, stop, checked)
                });
            // No thread to be had (a process at its limit): every CRC checked here.
            let results = checker.is_ok().then_some(results);
            #[cfg(test)]
            CHECKERS_STARTED.with(|n| n.set(n.get() + usize::from(results.is_some())));
            let visited = self.visit_batches(
                start,
                end,
                max_batch_size,
                map,
                release_behind,
                results.as_ref(),
                visit,
            );
            // The checker may be blocked on a full channel or still walking: stop it before
            // the scope waits for it.
            stop.store(true, Ordering::Relaxed);
            drop(results);
            visited
        })
    }

    /// The loop of [`Self::for_each_batch_mapped`], through `map` (its pages released behind
    /// the read with `release_behind`) or read windows. With `checked`, a batch whose CRC the
    /// checker thread found valid at the same position is not checked again; any other is
    /// checked here, so a damaged batch fails with the same error either way.
    #[allow(clippy::too_many_arguments)]
    fn visit_batches(
        &self,
        start: u64,
        end: u64,
        max_batch_size: usize,
        map: Option<&Mapping>,
        release_behind: bool,
        checked: Option<&Receiver<(u64, bool)>>,
        visit: &mut dyn FnMut(u64, &Batch<'_>, &Buffer) -> Result<bool>,
    ) -> Result<()> {
        let mut reader = match map {
            Some(mapping) => self.mapped_batches(mapping, start, end, max_batch_size),
            None => self.batches(start, end, max_batch_size),
        };
        // The chunks of the mapping this read is inside, left as it passes them.
        let mut in_use = map
            .filter(|_| release_behind)
            .map(|mapping| ChunksInUse::starting_at(mapping, start));
        let mut ahead: Option<(u64, bool)> = None;
        let mut stopped = false;
        loop {
            // With a checker, its CRCs fault the pages in ahead of this thread.
            if let (Some(mapping), None) = (map, checked) {
                if reader.next < reader.end {
                    mapping.populate(reader.next);
                }
            }
            let Some((position, range)) = reader.next_batch_range()? else {
                break;
            };
            if let Some(in_use) = &mut in_use {
                in_use.enter_through(reader.next);
            }
            let window = reader.window();
            let batch =
                Batch::parse(&window[range]).map_err(|e| e.at(Some(&self.path), position))?;
            let mut valid = false;
            if let Some(results) = checked {
                // The checker walks the same batches in the same order: skip its answers for
                // positions behind this one (none, unless it saw a different boundary).
                while ahead.is_none_or(|(p, _)| p < position) {
                    match results.recv() {
                        Ok(answer) => ahead = Some(answer),
                        Err(_) => break, // it stopped (end, or a batch it could not read)
                    }
                }
                valid = ahead == Some((position, true));
            }
            if !valid {
                batch
                    .ensure_valid()
                    .map_err(|e| e.at(Some(&self.path), position))?;
            }
            let go_on =
                visit(position, &batch, window).map_err(|e| e.at(Some(&self.path), position))?;
            if let Some(in_use) = &mut in_use {
                // Chunks wholly behind the next batch, and at the end of the file its last
                // (partial) one: no slice of them is held any more.
                let passed = if reader.next >= in_use.mapping.map.len() as u64 {
                    reader.next.div_ceil(POPULATE_CHUNK)
                } else {
                    reader.next / POPULATE_CHUNK
                };
                in_use.leave_before(passed, true);
            }
            if !go_on {
                stopped = reader.next < reader.end;
                break;
            }
        }
        // Read to the end of its range, the read is done with its last chunk, which a read of
        // the next range may still be in; stopped before (an Arrow batch full), it goes on in
        // that chunk at its next call, which releases it.
        if let Some(mut in_use) = in_use {
            in_use.leave_before(u64::MAX, !stopped);
        }
        Ok(())
    }

    /// [`Self::batches`] reading from `mapping` instead of read windows.
    fn mapped_batches(
        &self,
        mapping: &Mapping,
        start: u64,
        end: u64,
        max_batch_size: usize,
    ) -> BatchReader<'_> {
        let mut reader = self.batches(start, end, max_batch_size);
        reader.end = reader.end.min(mapping.buffer.len() as u64);
        reader.buf = mapping.buffer.clone();
        reader.buf_start = 0;
        reader
    }

    /// The checker thread of [`FileAccess::Mapped`]'s `check_crcs_ahead`: walks the batches of
    /// [start, end) through the mapping, checking each CRC (which faults its pages in), and sends
    /// (position, valid). It stops at the first batch it cannot read or that fails, at `stop`,
    /// or when the reader hangs up; the reader checks whatever it was not told about itself.
    fn check_ahead(
        &self,
        start: u64,
        end: u64,
        max_batch_size: usize,
        stop: &AtomicBool,
        checked: SyncSender<(u64, bool)>,
    ) {
        let Some(mapping) = self.mapping() else {
            return;
        };
        let mut reader = self.mapped_batches(mapping, start, end, max_batch_size);
        // No `populate`: the CRC's own reads fault the pages in (with the kernel's fault-around);
        // filling 4 MiB chunks here measured slower at every record size.
        while !stop.load(Ordering::Relaxed) {
            let Ok(Some((position, range))) = reader.next_batch_range() else {
                return;
            };
            let valid =
                Batch::parse(&reader.window()[range]).is_ok_and(|b| b.ensure_valid().is_ok());
            if checked.send((position, valid)).is_err() || !valid {
                return;
            }
        }
    }

    /// The file's first `size` bytes memory-mapped as an Arrow buffer that keeps the mapping
    /// alive, for read-only files of 1 byte to 2 GiB (a view's offset into it is 32 bits). A
    /// mapped file that another process truncates faults (SIGBUS) when the cut pages are read:
    /// callers map only files no writer holds ([`crate::arrow::LogArrowReader::zero_copy`]).
    pub fn mapped(&self) -> Option<Buffer> {
        self.whole_mapping().map(|m| m.buffer.clone())
    }

    /// [`Self::mapping`] while the file still holds every byte of it, checked at each read: a
    /// writer that opened the folder after this view (another process, or this one once the
    /// reader was made) may have cut the file since, and reading a cut page through the map
    /// faults the process (SIGBUS), where read windows see the file as it is now and report
    /// what is missing.
    fn whole_mapping(&self) -> Option<&Mapping> {
        let mapping = self.mapping()?;
        let len = self.file.metadata().ok()?.len();
        (len >= mapping.buffer.len() as u64).then_some(mapping)
    }

    fn mapping(&self) -> Option<&Mapping> {
        self.mapping
            .get_or_init(|| {
                if self.writable || self.size == 0 || self.size > i32::MAX as u64 {
                    return None;
                }
                // SAFETY: read-only, private to this process's reads; the length is the size
                // this view trusts (a longer file's tail is not mapped).
                // LOCK_SH while mapped, so that a writer cuts the file by copying it instead
                // (`truncate_to`); held by this open, which the map keeps.
                let lock = self.file.clone();
                if !crate::files::try_flock(&lock, libc::LOCK_SH) {
                    return None; // a writer is cutting the file now: read windows instead
                }
                let map = unsafe {
                    memmap2::MmapOptions::new()
                        .len(self.size as usize)
                        .map(&self.file)
                }
                .ok()?;
                let map = SegmentMap::new(map).holding(lock);
                let _ = map.advise(memmap2::Advice::Sequential);
                let ptr = std::ptr::NonNull::new(map.as_ptr() as *mut u8)?;
                let len = map.len();
                let map = std::sync::Arc::new(map);
                // SAFETY: `ptr` and `len` describe the mapping, which the Arc keeps mapped
                // for as long as any Buffer (or slice of it) lives.
                let buffer = unsafe { Buffer::from_custom_allocation(ptr, len, map.clone()) };
                let chunks = len.div_ceil(POPULATE_CHUNK as usize);
                Some(Mapping {
                    map,
                    buffer,
                    populated: (0..chunks.div_ceil(64))
                        .map(|_| AtomicU64::new(0))
                        .collect(),
                    releasing_reads: (0..chunks).map(|_| AtomicU32::new(0)).collect(),
                })
            })
            .as_ref()
    }

    /// Kafka's `searchForTimestamp`: the first record at or after `starting_position` and
    /// `starting_offset` whose timestamp is >= `target_timestamp`.
    pub fn search_for_timestamp(
        &self,
        target_timestamp: i64,
        starting_position: u64,
        starting_offset: i64,
        max_batch_size: usize,
        max_decompressed: usize,
    ) -> Result<Option<TimestampAndOffset>> {
        let mut reader = self.batches(starting_position, self.size, max_batch_size);
        let mut scratch = Vec::new();
        while let Some((_, bytes)) = reader.next_batch()? {
            let batch = Batch::parse(bytes)?;
            if batch.max_timestamp() >= target_timestamp {
                for record in batch.records(&mut scratch, max_decompressed)? {
                    if record.timestamp >= target_timestamp && record.offset >= starting_offset {
                        let epoch = batch.partition_leader_epoch();
                        return Ok(Some(TimestampAndOffset {
                            timestamp: record.timestamp,
                            offset: record.offset,
                            leader_epoch: (epoch >= 0).then_some(epoch),
                        }));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Kafka's `largestTimestampAfter`: the max batch timestamp from `start` on, with the last
    /// offset of the batch holding it (Kafka's shallow offset of the max timestamp).
    pub fn largest_timestamp_after(
        &self,
        start: u64,
        max_batch_size: usize,
    ) -> Result<TimestampAndOffset> {
        let mut best = TimestampAndOffset {
            timestamp: NO_TIMESTAMP,
            offset: -1,
            leader_epoch: None,
        };
        for header in self.headers_from(start, max_batch_size) {
            // A torn or corrupt tail ends the scan; recovery is what judges the tail.
            let h = match header {
                Ok(h) => h,
                Err(Error::CorruptRecord { .. }) => break,
                Err(e) => return Err(e),
            };
            if h.max_timestamp > best.timestamp {
                best = TimestampAndOffset {
                    timestamp: h.max_timestamp,
                    offset: h.last_offset,
                    leader_epoch: None,
                };
            }
        }
        Ok(best)
    }
}

impl FileRecords {
    /// The position of the first valid batch at or after `from` whose offsets are at least
    /// `min_offset`, or `None`. Kafka's recovery has no such scan (it stops at the first invalid
    /// batch); it is what tells damage (valid batches after it) from a torn tail, and where a
    /// view that skips damage resumes. Every byte is tried as a batch start: a cheap check of the
    /// header fields, then the framing and CRC of the whole batch. Reads go through a window, so
    /// a long zero-filled tail costs one pass, and a candidate's length is trusted only up to
    /// the end of the file and `max_batch_size`.
    pub fn find_next_valid_batch(
        &self,
        from: u64,
        min_offset: i64,
        max_batch_size: usize,
    ) -> Result<Option<u64>> {
        let mut window_start = from;
        let mut buf = Vec::new();
        while window_start + (HEADER_SIZE_UP_TO_MAGIC as u64) <= self.size {
            let window_end = (window_start + (CHUNK + RECORD_BATCH_OVERHEAD) as u64).min(self.size);
            buf.resize((window_end - window_start) as usize, 0);
            self.read_exact_at(&mut buf, window_start)?;
            let last_start = buf.len().min(CHUNK);
            for off in 0..last_start {
                let q = window_start + off as u64;
                let Some(size) = plausible_batch(&buf[off..], self.size - q, min_offset) else {
                    continue;
                };
                if size > max_batch_size {
                    continue;
                }
                let owned;
                let bytes = if off + size <= buf.len() {
                    &buf[off..off + size]
                } else {
                    owned = self.read_range(q, size)?;
                    &owned[..]
                };
                if bytes.len() != size {
                    continue;
                }
                let ok = Batch::parse(bytes).and_then(|b| {
                    b.ensure_valid()?;
                    Ok(b.last_offset() >= min_offset)
                });
                if matches!(ok, Ok(true)) {
                    return Ok(Some(q));
                }
            }
            window_start += last_start as u64;
        }
        Ok(None)
    }
}

/// The cheap part of `find_next_valid_batch`: the batch size if `buf` (what the window holds
/// from a candidate start, `left` bytes to the end of the file) starts like a batch.
fn plausible_batch(buf: &[u8], left: u64, min_offset: i64) -> Option<usize> {
    if buf.len() < HEADER_SIZE_UP_TO_MAGIC {
        return None;
    }
    let magic = buf[16];
    if magic > MAGIC_V2 {
        return None;
    }
    let length = i32::from_be_bytes(buf[8..12].try_into().unwrap());
    let min = if magic == MAGIC_V2 {
        RECORD_BATCH_OVERHEAD - 12
    } else {
        14
    };
    if length < min as i32 || length as u64 + 12 > left {
        return None;
    }
    let offset = i64::from_be_bytes(buf[0..8].try_into().unwrap());
    if offset < min_offset {
        return None;
    }
    if magic == MAGIC_V2 && buf.len() >= RECORD_BATCH_OVERHEAD {
        let attributes = u16::from_be_bytes(buf[21..23].try_into().unwrap());
        let delta = i32::from_be_bytes(buf[23..27].try_into().unwrap());
        if attributes & 0x7 > 4 || delta < 0 {
            return None;
        }
    }
    Some(length as usize + 12)
}

pub struct HeaderIter<'a> {
    records: &'a FileRecords,
    position: u64,
    max_batch_size: usize,
    done: bool,
}

impl Iterator for HeaderIter<'_> {
    type Item = Result<BatchHeader>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.records.read_header(self.position, self.max_batch_size) {
            Ok(Some(h)) => {
                self.position = h.position + h.size as u64;
                Some(Ok(h))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Reads whole batches sequentially through a buffer of up to `CHUNK` bytes, so decoding a
/// segment costs a few large reads rather than two small ones per batch.
pub struct BatchReader<'a> {
    records: &'a FileRecords,
    next: u64,
    end: u64,
    /// The read window: an Arrow buffer so zero-copy readers can keep slices of it.
    buf: Buffer,
    buf_start: u64,
    max_batch_size: usize,
    /// Bytes the next fill reads at least: [`FIRST_WINDOW`], doubled each fill up to [`CHUNK`].
    window: usize,
}

const CHUNK: usize = 1 << 20;
/// A reader's first window, so one that stops early (a consumer's poll of 500 records, a chunk
/// of `Log.records()`) reads little past what it uses: at a full `CHUNK` from the start, polls of
/// 500 records of 100 B read 16 times the bytes they used (perf: the kernel's copy was a fifth of
/// the time). Doubling reaches `CHUNK` after four fills, so long reads keep large reads.
const FIRST_WINDOW: usize = 64 << 10;

/// How [`FileRecords::for_each_batch_mapped`] reaches the file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAccess {
    /// Read windows (reads into a buffer, one copy): any file.
    Windows,
    /// A memory map of the file (only for files no writer can truncate meanwhile: a mapped
    /// page cut off faults).
    Mapped {
        /// A second thread checks CRCs ahead of the caller (its reads fault the pages in), which
        /// then only decodes. Used for ranges of at least [`CHECK_AHEAD_MIN_BYTES`] of
        /// uncompressed batches of records of [`CHECK_AHEAD_BYTES_PER_RECORD`] bytes on
        /// machines with more than one core; otherwise, and with `false`, each batch's CRC is
        /// checked on the caller's thread.
        check_crcs_ahead: bool,
        /// For callers that keep no slice of a window past their visit (they copy what they
        /// keep): the map's pages the read has passed are released (`MADV_DONTNEED`; the page
        /// cache keeps them), so a long read's resident memory stays flat instead of growing
        /// with the segment. Zero-copy readers, whose views point into the map, keep them.
        release_behind: bool,
        /// Read windows instead whenever no checker thread runs: for Arrow's copying builder
        /// on one thread, where one copy by the read cost less than faulting the pages in and
        /// releasing them on the same thread (1 KiB values: 1.15x the time through the map).
        /// `Log.records()` copies too but gained from the map (9% of its time at 100 B,
        /// 100,000 records), and so do a threaded `to_arrow`'s chunks.
        windows_without_checker: bool,
    },
}

/// Below this many bytes a checker thread costs more to start than it saves.
pub const CHECK_AHEAD_MIN_BYTES: u64 = 1 << 20;

/// Bytes per record (batch bytes over its record count) for which a checker thread pays. The
/// reader waits for each batch's check and the checker competes for the cache, so it gains only
/// while decoding a batch takes about as long as checking it. Measured against one thread
/// (interleaved reads of one segment, 2 cores): 100 B values (~130 B a record) 0.73-0.84x the
/// time; 10 B values 0.94-1.02x; 1 KiB values 0.93-1.04x; 100 KiB values 1.07-1.10x.
pub const CHECK_AHEAD_BYTES_PER_RECORD: std::ops::RangeInclusive<u64> = 64..=1024;

/// How many batches a checker thread may run ahead of the reader ([`CHECK_AHEAD_BYTES`] of
/// them), when the batch at `start` (later batches are assumed alike) suits
/// [`FileAccess::Mapped`]'s `check_crcs_ahead`: an uncompressed v2 batch with
/// [`CHECK_AHEAD_BYTES_PER_RECORD`] bytes a record. A compressed batch's time goes to
/// inflating it on the reader's thread, which the checker cannot take over.
fn check_ahead_batches(map: &[u8], start: u64) -> Option<usize> {
    let first = usize::try_from(start)
        .ok()
        .and_then(|at| map.get(at..))
        .and_then(|rest| Batch::parse(rest).ok());
    let Some(Batch::V2(batch)) = first else {
        return None;
    };
    let (count, size) = (batch.records_count(), batch.size_in_bytes());
    let fits = matches!(batch.compression(), Ok(Compression::None))
        && count > 0
        && CHECK_AHEAD_BYTES_PER_RECORD.contains(&(size as u64 / count as u64));
    fits.then(|| (CHECK_AHEAD_BYTES / size.max(1)).clamp(2, 64))
}

/// Bytes the checker thread may run ahead of the reader: enough to keep the reader from
/// waiting, few enough that its faulted pages add little to the resident memory of a read
/// (a copying read releases those it has passed) and little is checked past where the reader
/// stops (the end of an Arrow batch; the next read starts its own checker).
const CHECK_AHEAD_BYTES: usize = 4 << 20;

#[cfg(test)]
thread_local! {
    /// Checker threads started by this thread's reads: tests tell whether a read used one.
    pub(crate) static CHECKERS_STARTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Cores this process may run on (cached: the call reads cgroup files).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Bytes of a mapped file whose page tables a mapped read fills at a time.
pub(crate) const POPULATE_CHUNK: u64 = 4 << 20;

/// A read-only file memory-mapped ([`FileRecords::mapped`]), with the chunks whose page tables
/// were filled.
#[derive(Debug)]
struct Mapping {
    map: std::sync::Arc<SegmentMap>,
    buffer: Buffer,
    /// One bit per `POPULATE_CHUNK` of the file.
    populated: Box<[AtomicU64]>,
    /// Per `POPULATE_CHUNK`: the reads releasing pages behind them (`release_behind`) inside
    /// it now. Reads of neighbouring ranges on several threads (a threaded `to_arrow`'s chunks)
    /// share the chunk at their boundary; the last to leave it releases it, so no read has
    /// the pages ahead of it dropped and faulted in again.
    releasing_reads: Box<[AtomicU32]>,
}

/// The chunks `[from, to)` of a mapping that a read releasing pages behind it is inside,
/// counted in [`Mapping::releasing_reads`]. Dropped on an error, it leaves them unreleased.
struct ChunksInUse<'m> {
    mapping: &'m Mapping,
    from: u64,
    to: u64,
}

impl<'m> ChunksInUse<'m> {
    fn starting_at(mapping: &'m Mapping, position: u64) -> Self {
        let first = position / POPULATE_CHUNK;
        ChunksInUse {
            mapping,
            from: first,
            to: first,
        }
    }

    /// Enters the chunks up to the one holding the byte before `end`.
    fn enter_through(&mut self, end: u64) {
        let last = end.div_ceil(POPULATE_CHUNK);
        while self.to < last {
            if let Some(count) = self.mapping.releasing_reads.get(self.to as usize) {
                count.fetch_add(1, Ordering::AcqRel);
            }
            self.to += 1;
        }
    }

    /// Leaves the chunks before `chunk`; with `release`, one no other read is in is released.
    fn leave_before(&mut self, chunk: u64, release: bool) {
        while self.from < chunk.min(self.to) {
            let last_out = self
                .mapping
                .releasing_reads
                .get(self.from as usize)
                .is_some_and(|count| count.fetch_sub(1, Ordering::AcqRel) == 1);
            if last_out && release {
                self.mapping.release(self.from..self.from + 1);
            }
            self.from += 1;
        }
    }
}

impl Drop for ChunksInUse<'_> {
    fn drop(&mut self) {
        self.leave_before(u64::MAX, false);
    }
}

impl Mapping {
    /// Fills the page tables of the chunk holding `position`, once per chunk: asking again for
    /// pages already mapped walks them all (measured, perf). It reads one byte per page in a
    /// burst: each fault maps the pages around it too (the kernel's fault-around), where
    /// `MADV_POPULATE_READ` walks every page through get_user_pages (a 17 MB segment: 1.7 ms
    /// against 2.4-2.8 ms, interleaved runs).
    fn populate(&self, position: u64) {
        let chunk = (position / POPULATE_CHUNK) as usize;
        let (word, bit) = (chunk / 64, 1u64 << (chunk % 64));
        let Some(flags) = self.populated.get(word) else {
            return;
        };
        // Claimed by one reader (threads may share a file); the others read on meanwhile and
        // fault in what they reach first themselves.
        if flags.load(Ordering::Relaxed) & bit != 0
            || flags.fetch_or(bit, Ordering::Relaxed) & bit != 0
        {
            return;
        }
        let start = chunk * POPULATE_CHUNK as usize;
        let end = (start + POPULATE_CHUNK as usize).min(self.map.len());
        for page in (start..end).step_by(4096) {
            std::hint::black_box(self.map[page]);
        }
    }

    /// Drops the page tables of `chunks` (of `POPULATE_CHUNK` bytes) and marks them unfilled,
    /// so a long read keeps only the chunks around it resident. The pages stay in the page
    /// cache: touched again (a zero-copy view into them held by another reader), they fault
    /// back in with the same bytes.
    fn release(&self, chunks: std::ops::Range<u64>) {
        let start = (chunks.start * POPULATE_CHUNK) as usize;
        let end = ((chunks.end * POPULATE_CHUNK) as usize).min(self.map.len());
        if start >= end {
            return;
        }
        #[cfg(unix)]
        // SAFETY: the map is a read-only mapping of a file: MADV_DONTNEED drops page table
        // entries only, and a page touched again is read from the file as before, so every
        // slice into the range keeps seeing the same bytes. An error leaves the pages mapped.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
        for chunk in chunks {
            let (word, bit) = ((chunk / 64) as usize, 1u64 << (chunk % 64));
            if let Some(flags) = self.populated.get(word) {
                flags.fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }
}

impl BatchReader<'_> {
    pub fn position(&self) -> u64 {
        self.next
    }

    fn buffered(&self, position: u64, len: usize) -> bool {
        position >= self.buf_start
            && position + len as u64 <= self.buf_start + self.buf.len() as u64
    }

    fn fill(&mut self, position: u64, len: usize) -> Result<()> {
        let want = len.max(self.window).min((self.end - position) as usize);
        self.window = (self.window * 2).min(CHUNK);
        // Reuse the window's memory unless Arrow arrays still hold slices of it.
        let mut buf: Vec<u8> = std::mem::take(&mut self.buf).into_vec().unwrap_or_default();
        read_exact_at_into(&self.records.file, &mut buf, want, position)
            .map_err(|e| Error::io(&self.records.path, e))?;
        self.buf = Buffer::from_vec(buf);
        self.buf_start = position;
        Ok(())
    }

    /// The window the ranges of [`Self::next_batch_range`] index.
    pub fn window(&self) -> &Buffer {
        &self.buf
    }

    /// The next whole batch as `(position, bytes)`; `Ok(None)` at `end`. A batch that does not
    /// fit before the end of the log is a corruption error naming file and position.
    pub fn next_batch(&mut self) -> Result<Option<(u64, &[u8])>> {
        Ok(self
            .next_batch_range()?
            .map(|(position, range)| (position, &self.buf[range])))
    }

    /// [`Self::next_batch`] as the batch's range in [`Self::window`].
    pub fn next_batch_range(&mut self) -> Result<Option<(u64, Range<usize>)>> {
        let position = self.records.past_skipped(self.next);
        if position >= self.end {
            return Ok(None);
        }
        let left = (self.end - position) as usize;
        if left < HEADER_SIZE_UP_TO_MAGIC {
            return Err(Error::corrupt(format!(
                "{left} trailing bytes are too few for a batch header"
            ))
            .at(Some(&self.records.path), position));
        }
        if !self.buffered(position, HEADER_SIZE_UP_TO_MAGIC) {
            self.fill(position, HEADER_SIZE_UP_TO_MAGIC)?;
        }
        let off = (position - self.buf_start) as usize;
        let prefix = BatchPrefix::parse(&self.buf[off..], left.min(self.max_batch_size))
            .map_err(|e| e.at(Some(&self.records.path), position))?;
        if !self.buffered(position, prefix.size_in_bytes) {
            self.fill(position, prefix.size_in_bytes)?;
        }
        let off = (position - self.buf_start) as usize;
        self.next = position + prefix.size_in_bytes as u64;
        Ok(Some((position, off..off + prefix.size_in_bytes)))
    }
}

/// Replaces `buf`'s contents with the `len` bytes of `file` at `position`, read straight into its
/// spare capacity: zero-filling a window first (1 MiB per fill) would cost as much as the read's
/// own copy. A file that ends before is an `UnexpectedEof` error.
pub(crate) fn read_exact_at_into(
    file: &File,
    buf: &mut Vec<u8>,
    len: usize,
    position: u64,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.clear();
    buf.reserve_exact(len);
    let spare = buf.spare_capacity_mut();
    let mut done = 0usize;
    while done < len {
        let at = libc::off_t::try_from(position + done as u64)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: the destination is `len - done` bytes of `buf`'s spare capacity (at least
        // `len` after `reserve_exact`), which the kernel writes and nothing reads before
        // `set_len` below.
        let rc = unsafe {
            libc::pread(
                file.as_raw_fd(),
                spare[done..].as_mut_ptr().cast(),
                len - done,
                at,
            )
        };
        match rc {
            0 => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the file ends {done} bytes into a read of {len} at {position}"),
                ))
            }
            n if n > 0 => done += n as usize,
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    // SAFETY: the loop above initialised all `len` bytes.
    unsafe { buf.set_len(len) };
    Ok(())
}

/// Reads a batch header from the first bytes of a batch (at least 17, ideally 61); `available` is
/// how many bytes the batch may span. Shared by file scans and in-memory appends.
pub fn parse_header(buf: &[u8], position: u64, available: usize) -> Result<BatchHeader> {
    if buf.len() < HEADER_SIZE_UP_TO_MAGIC {
        return Err(Error::corrupt(format!(
            "{} trailing bytes are too few for a batch header",
            buf.len()
        )));
    }
    let prefix = BatchPrefix::parse(buf, available)?;
    let is_control = prefix.magic == MAGIC_V2
        && buf.len() >= ATTRIBUTES_OFFSET + 2
        && i16::from_be_bytes([buf[ATTRIBUTES_OFFSET], buf[ATTRIBUTES_OFFSET + 1]])
            & CONTROL_FLAG_MASK
            != 0;
    let (last_offset, max_timestamp) = match prefix.magic {
        MAGIC_V2 if buf.len() >= RECORD_BATCH_OVERHEAD => {
            let delta = i32::from_be_bytes(
                buf[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
                    .try_into()
                    .unwrap(),
            );
            let ts = i64::from_be_bytes(
                buf[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
                    .try_into()
                    .unwrap(),
            );
            (prefix.offset.wrapping_add(i64::from(delta)), ts)
        }
        MAGIC_V2 => return Err(Error::corrupt("v2 batch header is cut short")),
        MAGIC_V1 if buf.len() >= 26 => (
            prefix.offset,
            i64::from_be_bytes(buf[18..26].try_into().unwrap()),
        ),
        _ => (prefix.offset, NO_TIMESTAMP),
    };
    Ok(BatchHeader {
        position,
        size: prefix.size_in_bytes,
        magic: prefix.magic,
        base_offset: prefix.offset,
        last_offset,
        max_timestamp,
        is_control,
    })
}

/// Header-only iteration over whole batches held in memory.
pub fn headers_in(buf: &[u8]) -> impl Iterator<Item = Result<BatchHeader>> + '_ {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if pos >= buf.len() {
            return None;
        }
        let end = (pos + RECORD_BATCH_OVERHEAD).min(buf.len());
        let r = parse_header(&buf[pos..end], pos as u64, buf.len() - pos)
            .map_err(|e| e.at(None, pos as u64));
        match &r {
            Ok(h) => pos += h.size,
            Err(_) => pos = buf.len(),
        }
        Some(r)
    })
}
