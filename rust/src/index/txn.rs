//! Kafka's `TransactionIndex` and `AbortedTxn` (`.txnindex` files): the aborted transactions whose
//! abort markers are in a segment, used to answer READ_COMMITTED fetches. Unlike the offset and time
//! indexes it is a plain append-only file of 34-byte entries, never memory-mapped or pre-allocated.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use super::be_i64;
use crate::error::{Error, Result};

/// One aborted transaction (Kafka's `AbortedTxn`). On disk: version i16 (0), producer id i64,
/// first offset i64, last offset i64, last stable offset i64, all big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The partition's last stable offset when the abort was written.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub const SIZE: usize = 34;
    pub const CURRENT_VERSION: i16 = 0;

    pub fn new(
        producer_id: i64,
        first_offset: i64,
        last_offset: i64,
        last_stable_offset: i64,
    ) -> Self {
        AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
            last_stable_offset,
        }
    }

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..2].copy_from_slice(&Self::CURRENT_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    /// Decode one entry. A version other than 0 is `CorruptIndex`, as in Kafka 4 (3.x read only
    /// the version's first byte and refused it above 0).
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        if b.len() < Self::SIZE {
            return Err(Error::corrupt_index(format!(
                "aborted transaction entry needs {} bytes, found {}",
                Self::SIZE,
                b.len()
            )));
        }
        let version = i16::from_be_bytes([b[0], b[1]]);
        if version != Self::CURRENT_VERSION {
            return Err(Error::corrupt_index(format!(
                "unexpected aborted transaction version {version}, supported version range is {0} \
                 to {0}",
                Self::CURRENT_VERSION
            )));
        }
        Ok(AbortedTxn {
            producer_id: be_i64(b, 2),
            first_offset: be_i64(b, 10),
            last_offset: be_i64(b, 18),
            last_stable_offset: be_i64(b, 26),
        })
    }
}

/// The aborted transactions overlapping a fetch, and whether the search can stop at this segment
/// (Kafka's `TxnIndexSearchResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnIndexSearchResult {
    pub aborted: Vec<AbortedTxn>,
    /// True when an entry's last stable offset reached the fetch's upper bound, so no later segment
    /// can hold an aborted transaction overlapping the fetch.
    pub is_complete: bool,
}

/// The transaction index of one segment.
///
/// The file is created lazily by the first append, as in Kafka, so segments without aborted
/// transactions have no `.txnindex`. Opened read-only it never writes, and a missing file is simply
/// empty. Reads use positional I/O and take `&self`; writes take `&mut self`.
#[derive(Debug)]
pub struct TransactionIndex {
    start_offset: i64,
    path: PathBuf,
    writable: bool,
    /// Open handle once the file exists (append mode when writable, so writes land at the end even
    /// after a truncation). Reopened on demand after `close`.
    file: Option<File>,
    /// Last offset appended through this handle. Like Kafka it starts unknown on open, so ordering is
    /// checked only between appends made since (recovery resets the index before rebuilding it).
    last_offset: Option<i64>,
}

#[cfg(unix)]
fn read_exact_at(f: &File, buf: &mut [u8], pos: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, pos)
}

#[cfg(windows)]
fn read_exact_at(f: &File, mut buf: &mut [u8], mut pos: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match f.seek_read(buf, pos) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                pos += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Entries read per positional read while scanning.
const ENTRIES_PER_READ: usize = 128;

impl TransactionIndex {
    /// Open the index of the segment starting at `start_offset`. Nothing is created here.
    /// Arguments in the order of the other indexes' `open` (file, base offset, ..., writable).
    pub fn open(path: impl AsRef<Path>, start_offset: i64, writable: bool) -> Result<Self> {
        let mut idx = TransactionIndex {
            start_offset,
            path: path.as_ref().to_path_buf(),
            writable,
            file: None,
            last_offset: None,
        };
        if idx.path.exists() {
            idx.file = Some(idx.open_handle(false)?);
        }
        Ok(idx)
    }

    fn open_handle(&self, create: bool) -> Result<File> {
        let f = if self.writable {
            crate::files::open_regular_with(
                OpenOptions::new().read(true).append(true).create(create),
                &self.path,
            )
        } else {
            crate::files::open_regular(&self.path)
        };
        f.map_err(|e| Error::io(&self.path, e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    fn check_writable(&self, what: &str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::ReadOnly(format!(
                "cannot {what} transaction index {}: opened read-only",
                self.path.display()
            )))
        }
    }

    /// Append an aborted transaction. Its last offset must be larger than that of the previous append
    /// (`InvalidArgument`, Kafka's IllegalArgumentException). Creates the file if needed.
    pub fn append(&mut self, txn: AbortedTxn) -> Result<()> {
        self.check_writable("append to")?;
        if let Some(last) = self.last_offset {
            if last >= txn.last_offset {
                return Err(Error::InvalidArgument(format!(
                    "the last offset of appended transactions must increase sequentially, but {} is not greater than current last offset {last} of index {}",
                    txn.last_offset,
                    self.path.display()
                )));
            }
        }
        if self.file.is_none() {
            self.file = Some(self.open_handle(true)?);
        }
        if let Some(f) = self.file.as_mut() {
            f.write_all(&txn.to_bytes())
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.last_offset = Some(txn.last_offset);
        Ok(())
    }

    /// Visit every whole entry with its byte position, stopping when `visit` breaks. A trailing partial
    /// entry (a torn append) is not visited, as in Kafka; `sanity_check` reports it.
    fn scan(
        &self,
        mut visit: impl FnMut(AbortedTxn, u64) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let temp;
        let f = match &self.file {
            Some(f) => f,
            None => match crate::files::open_regular(&self.path) {
                Ok(f) => {
                    temp = f;
                    &temp
                }
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(Error::io(&self.path, e)),
            },
        };
        let len = f.metadata().map_err(|e| Error::io(&self.path, e))?.len();
        let whole = len - len % AbortedTxn::SIZE as u64;
        let mut buf = vec![0u8; AbortedTxn::SIZE * ENTRIES_PER_READ];
        let mut pos = 0u64;
        while pos < whole {
            let n = ((whole - pos) as usize).min(buf.len());
            read_exact_at(f, &mut buf[..n], pos).map_err(|e| Error::io(&self.path, e))?;
            for chunk in buf[..n].chunks_exact(AbortedTxn::SIZE) {
                let txn = AbortedTxn::from_bytes(chunk).map_err(|e| e.at(Some(&self.path), pos))?;
                if visit(txn, pos)?.is_break() {
                    return Ok(());
                }
                pos += AbortedTxn::SIZE as u64;
            }
        }
        Ok(())
    }

    /// Every aborted transaction in the index, in file order.
    pub fn all_aborted_txns(&self) -> Result<Vec<AbortedTxn>> {
        let mut all = Vec::new();
        self.scan(|txn, _| {
            all.push(txn);
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(all)
    }

    /// The aborted transactions overlapping the fetch range `[fetch_offset, upper_bound_offset)`:
    /// those with `last_offset >= fetch_offset` and `first_offset < upper_bound_offset`. The scan stops
    /// (complete) at the first entry whose last stable offset is `>= upper_bound_offset`: every
    /// transaction aborted after it started after the fetched range.
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<TxnIndexSearchResult> {
        let mut result = TxnIndexSearchResult::default();
        self.scan(|txn, _| {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                result.aborted.push(txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                result.is_complete = true;
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(result)
    }

    /// Remove the first entry whose last offset is `>= offset` and everything after it.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.check_writable("truncate")?;
        let mut cut = None;
        let mut new_last = None;
        self.scan(|txn, pos| {
            if txn.last_offset >= offset {
                cut = Some(pos);
                return Ok(ControlFlow::Break(()));
            }
            new_last = Some(txn.last_offset);
            Ok(ControlFlow::Continue(()))
        })?;
        if let Some(pos) = cut {
            if let Some(f) = &self.file {
                f.set_len(pos).map_err(|e| Error::io(&self.path, e))?;
            }
            self.last_offset = new_last;
        }
        Ok(())
    }

    /// Remove all entries (the file stays, empty).
    pub fn reset(&mut self) -> Result<()> {
        self.check_writable("reset")?;
        if let Some(f) = &self.file {
            f.set_len(0).map_err(|e| Error::io(&self.path, e))?;
        }
        self.last_offset = None;
        Ok(())
    }

    /// Checks: whole entries only, known versions, and no entry's last offset below the segment's
    /// start offset (Kafka checks the last; the other two are what a torn or foreign file looks like).
    pub fn sanity_check(&self) -> Result<()> {
        let start = self.start_offset;
        self.scan(|txn, pos| {
            if txn.last_offset < start {
                return Err(Error::corrupt_index(format!(
                    "last offset of aborted transaction {txn:?} is less than start offset {start}"
                ))
                .at(Some(&self.path), pos));
            }
            Ok(ControlFlow::Continue(()))
        })?;
        let len = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == ErrorKind::NotFound => 0,
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        if len % AbortedTxn::SIZE as u64 != 0 {
            return Err(Error::corrupt_index(format!(
                "transaction index is {len} bytes, not a multiple of the {}-byte entry size",
                AbortedTxn::SIZE
            ))
            .in_file(&self.path));
        }
        Ok(())
    }

    /// fsync the file if it is open.
    pub fn flush(&self) -> Result<()> {
        if let (Some(f), true) = (&self.file, self.writable) {
            f.sync_all().map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Always `Ok`: a closed transaction index stays usable (it reopens its file).
    pub fn ensure_open(&self) -> Result<()> {
        Ok(())
    }

    /// Release the file handle. The index stays usable: later reads and appends reopen the file.
    pub fn close(&mut self) -> Result<()> {
        self.file = None;
        Ok(())
    }

    /// Close and delete the file; `Ok(false)` if it did not exist.
    pub fn delete(&mut self) -> Result<bool> {
        self.check_writable("delete")?;
        self.file = None;
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }

    /// Rename the file if it exists (it may not yet) and use the new path from now on. An open handle
    /// keeps working across the rename.
    pub fn rename_to(&mut self, new_path: impl AsRef<Path>) -> Result<()> {
        self.check_writable("rename")?;
        let new_path = new_path.as_ref();
        match std::fs::rename(&self.path, new_path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound && !self.path.exists() => {}
            Err(e) => return Err(Error::io(&self.path, e)),
        }
        self.path = new_path.to_path_buf();
        Ok(())
    }

    /// Point at the same file name in another directory (after the log dir was moved).
    pub fn update_parent_dir(&mut self, parent: impl AsRef<Path>) {
        if let Some(name) = self.path.file_name() {
            self.path = parent.as_ref().join(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    fn txns() -> [AbortedTxn; 4] {
        [
            AbortedTxn::new(0, 0, 10, 11),
            AbortedTxn::new(1, 5, 15, 13),
            AbortedTxn::new(2, 18, 35, 25),
            AbortedTxn::new(3, 21, 40, 29),
        ]
    }

    fn filled(dir: &tempfile::TempDir) -> TransactionIndex {
        let mut idx =
            TransactionIndex::open(dir.path().join("00000000000000000000.txnindex"), 0, true)
                .unwrap();
        for t in txns() {
            idx.append(t).unwrap();
        }
        idx
    }

    #[test]
    fn byte_layout() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TransactionIndex::open(dir.path().join("0.txnindex"), 0, true).unwrap();
        let t = AbortedTxn::new(0x0102030405060708, 0x10, 0x20, 0x30);
        idx.append(t).unwrap();
        idx.flush().unwrap();
        let bytes = std::fs::read(idx.path()).unwrap();
        let mut expected = vec![0u8, 0];
        for v in [0x0102030405060708i64, 0x10, 0x20, 0x30] {
            expected.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(bytes, expected);
        assert_eq!(AbortedTxn::from_bytes(&bytes).unwrap(), t);
    }

    #[test]
    fn file_is_created_lazily_and_read_only_never_creates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("5.txnindex");
        let ro = TransactionIndex::open(&path, 5, false).unwrap();
        assert_eq!(ro.all_aborted_txns().unwrap(), vec![]);
        assert_eq!(
            ro.collect_aborted_txns(0, 100).unwrap(),
            TxnIndexSearchResult::default()
        );
        ro.sanity_check().unwrap();
        let mut idx = TransactionIndex::open(&path, 5, true).unwrap();
        idx.truncate_to(0).unwrap();
        idx.reset().unwrap();
        idx.flush().unwrap();
        assert!(!path.exists());
        idx.append(AbortedTxn::new(1, 5, 6, 7)).unwrap();
        assert!(path.exists());
        // The earlier read-only handle now sees the file too.
        assert_eq!(ro.all_aborted_txns().unwrap().len(), 1);
    }

    #[test]
    fn last_offsets_must_increase() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = filled(&dir);
        assert!(matches!(
            idx.append(AbortedTxn::new(9, 30, 40, 41)),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            idx.append(AbortedTxn::new(9, 30, 39, 41)),
            Err(Error::InvalidArgument(_))
        ));
        idx.append(AbortedTxn::new(9, 30, 41, 42)).unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap().len(), 5);
    }

    #[test]
    fn collect_aborted_txns_over_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let idx = filled(&dir);
        let [t0, t1, t2, t3] = txns();
        let r = |aborted: Vec<AbortedTxn>, is_complete| TxnIndexSearchResult {
            aborted,
            is_complete,
        };
        // Overlaps all, no LSO reaches 32: the next segment must be searched too.
        assert_eq!(
            idx.collect_aborted_txns(0, 32).unwrap(),
            r(vec![t0, t1, t2, t3], false)
        );
        // t1's LSO 13 >= 12: complete after t1.
        assert_eq!(
            idx.collect_aborted_txns(0, 12).unwrap(),
            r(vec![t0, t1], true)
        );
        // t0 ended before 11; t2 starts inside and its LSO 25 >= 20 ends the search.
        assert_eq!(
            idx.collect_aborted_txns(11, 20).unwrap(),
            r(vec![t1, t2], true)
        );
        // Only t3 still open at 36.
        assert_eq!(
            idx.collect_aborted_txns(36, 50).unwrap(),
            r(vec![t3], false)
        );
        // Nothing overlaps [16, 18) (t2 starts at 18), but t2's LSO proves completeness.
        assert_eq!(idx.collect_aborted_txns(16, 18).unwrap(), r(vec![], true));
        assert_eq!(idx.all_aborted_txns().unwrap(), txns().to_vec());
    }

    #[test]
    fn truncate_to_cuts_at_first_txn_ending_at_or_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = filled(&dir);
        idx.truncate_to(35).unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap(), txns()[..2].to_vec());
        assert_eq!(std::fs::metadata(idx.path()).unwrap().len(), 68);
        // The last offset is now t1's: 15 is rejected, 16 accepted and written at the new end.
        assert!(idx.append(AbortedTxn::new(7, 14, 15, 16)).is_err());
        idx.append(AbortedTxn::new(7, 14, 16, 17)).unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap().len(), 3);
        idx.truncate_to(1000).unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap().len(), 3);
        idx.truncate_to(0).unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap(), vec![]);
        idx.append(AbortedTxn::new(1, 0, 1, 2)).unwrap();
        idx.reset().unwrap();
        assert_eq!(std::fs::metadata(idx.path()).unwrap().len(), 0);
        idx.append(AbortedTxn::new(1, 0, 1, 2)).unwrap();
    }

    #[test]
    fn close_rename_delete() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = filled(&dir);
        let new_path = dir.path().join("00000000000000000000.txnindex.deleted");
        idx.rename_to(&new_path).unwrap();
        idx.append(AbortedTxn::new(5, 41, 42, 43)).unwrap();
        idx.close().unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap().len(), 5);
        idx.append(AbortedTxn::new(5, 43, 44, 45)).unwrap();
        assert_eq!(std::fs::metadata(&new_path).unwrap().len(), 6 * 34);
        assert!(idx.delete().unwrap());
        assert!(!new_path.exists());
        assert!(!idx.delete().unwrap());
        // Renaming an index whose file was never created just moves the path.
        let mut lazy = TransactionIndex::open(dir.path().join("a.txnindex"), 0, true).unwrap();
        lazy.rename_to(dir.path().join("b.txnindex")).unwrap();
        lazy.append(AbortedTxn::new(1, 1, 1, 1)).unwrap();
        assert!(dir.path().join("b.txnindex").exists());
    }

    #[test]
    fn read_only_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = filled(&dir);
        let path = idx.path().to_path_buf();
        idx.close().unwrap();
        make_read_only(&path);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let before = snapshot(&path);
        {
            let mut ro = TransactionIndex::open(&path, 0, false).unwrap();
            assert_eq!(ro.all_aborted_txns().unwrap(), txns().to_vec());
            assert_eq!(ro.collect_aborted_txns(0, 12).unwrap().aborted.len(), 2);
            ro.sanity_check().unwrap();
            assert!(matches!(
                ro.append(AbortedTxn::new(1, 50, 60, 70)),
                Err(Error::ReadOnly(_))
            ));
            assert!(matches!(ro.truncate_to(0), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.reset(), Err(Error::ReadOnly(_))));
            assert!(matches!(ro.delete(), Err(Error::ReadOnly(_))));
            assert!(matches!(
                ro.rename_to(dir.path().join("x")),
                Err(Error::ReadOnly(_))
            ));
            ro.flush().unwrap();
            ro.close().unwrap();
        }
        assert_eq!(snapshot(&path), before);
    }

    #[test]
    fn corrupt_files_give_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.txnindex");
        let good = AbortedTxn::new(1, 100, 110, 111).to_bytes();

        // A torn trailing entry: reads skip it (as Kafka does), sanity check reports it.
        std::fs::write(&path, [&good[..], &good[..20]].concat()).unwrap();
        let idx = TransactionIndex::open(&path, 100, false).unwrap();
        assert_eq!(idx.all_aborted_txns().unwrap().len(), 1);
        let err = idx.sanity_check().unwrap_err();
        assert!(
            matches!(err, Error::CorruptIndex { .. }) && err.to_string().contains("not a multiple"),
            "{err}"
        );
        assert!(
            err.to_string().contains("00000000000000000100.txnindex"),
            "{err}"
        );

        // An unknown version: every read fails with the file and position.
        let mut bad = good;
        bad[1] = 1;
        std::fs::write(&path, [&good[..], &bad[..]].concat()).unwrap();
        let err = idx.collect_aborted_txns(0, 1000).unwrap_err();
        assert!(
            err.to_string().contains("version 1") && err.to_string().contains("position 34"),
            "{err}"
        );
        assert!(idx.sanity_check().is_err());

        // A last offset below the segment's start offset.
        std::fs::write(&path, AbortedTxn::new(1, 90, 99, 100).to_bytes()).unwrap();
        let err = idx.sanity_check().unwrap_err();
        assert!(
            err.to_string().contains("less than start offset 100"),
            "{err}"
        );

        assert!(AbortedTxn::from_bytes(&good[..33]).is_err());
    }
}
