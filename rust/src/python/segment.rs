//! `Segment`, `OffsetIndex`, `TimeIndex`, `TransactionIndex` for Python.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::index::offset::OffsetIndex as RsOffsetIndex;
use crate::index::time::TimeIndex as RsTimeIndex;
use crate::index::txn::{AbortedTxn, TransactionIndex as RsTransactionIndex};
use crate::index::DEFAULT_MAX_INDEX_SIZE;
use crate::python::records::{batches_to_py, DecodedBatch};
use crate::python::results::{dict_of, into_py_results, IntoPyResult};
use crate::python::ReleaseGil;
use crate::record::file_records::headers_in;
use crate::segment::LogSegment;

pub fn now_ms() -> i64 {
    crate::python::records::now_ms()
}

/// Builds a `LogConfig` from Kafka topic-config names (`{"segment.bytes": 1048576, ...}`).
pub fn config_from(config: Option<&Bound<'_, PyDict>>) -> PyResult<LogConfig> {
    config_onto(LogConfig::default(), config)
}

/// `base` with the configs of `config` (Kafka names) set over it.
pub fn config_onto(base: LogConfig, config: Option<&Bound<'_, PyDict>>) -> PyResult<LogConfig> {
    let mut c = base;
    if let Some(d) = config {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            let value: String = if let Ok(b) = v.extract::<bool>() {
                b.to_string()
            } else {
                v.str()?.to_string()
            };
            c.set(&key, &value)?;
        }
    }
    Ok(c)
}

pub fn aborted_to_py<'py>(py: Python<'py>, txns: &[AbortedTxn]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for t in txns {
        out.append(dict_of!(py, t; producer_id, first_offset, last_offset, last_stable_offset))?;
    }
    Ok(out)
}

/// A Python class over one of the crate's index files, with the methods every index file has
/// (truncate, sanity check, flush, close, as Kafka's `AbstractIndex` and `TransactionIndex`
/// name them) and the class's own `$methods`.
macro_rules! py_index_file {
    ($(#[$meta:meta])* $name:ident($inner:ty) { $($methods:tt)* }) => {
        $(#[$meta])*
        #[pyclass(module = "kafkalog")]
        pub struct $name {
            inner: $inner,
        }

        #[pymethods]
        impl $name {
            $($methods)*
            /// Kafka's `truncateTo`: removes every entry for an offset at or after `offset`.
            fn truncate_to(&mut self, offset: i64) -> PyResult<()> {
                self.inner.ensure_open()?;
                Ok(self.inner.truncate_to(offset)?)
            }
            /// Kafka's `sanityCheck`: raises CorruptIndexError when the file is not a valid index.
            fn sanity_check(&self) -> PyResult<()> {
                self.inner.ensure_open()?;
                Ok(self.inner.sanity_check()?)
            }
            /// Flushes the file to disk.
            fn flush(&self) -> PyResult<()> {
                self.inner.ensure_open()?;
                Ok(self.inner.flush()?)
            }
            /// Closes the file (an offset or time index is trimmed to its entries first).
            fn close(&mut self) -> PyResult<()> {
                Ok(self.inner.close()?)
            }
        }
    };
}

/// An offset or time index (Kafka's `AbstractIndex`): [`py_index_file!`] with the memory-mapped
/// index's constructor, floor lookup, entries and fullness; `$entry` names the entry class.
macro_rules! py_mmap_index {
    (
        $(#[$meta:meta])* $name:ident($inner:ty, $entry:literal),
        $(#[$lookup_meta:meta])* lookup($target:ident),
        { $($methods:tt)* }
    ) => {
        py_index_file! {
            $(#[$meta])*
            $name($inner) {
                #[new]
                #[pyo3(signature = (path, base_offset, *, max_index_size = DEFAULT_MAX_INDEX_SIZE, writable = false))]
                fn new(
                    path: super::FsPath,
                    base_offset: i64,
                    max_index_size: usize,
                    writable: bool,
                ) -> PyResult<Self> {
                    Ok($name {
                        inner: <$inner>::open(path, base_offset, max_index_size, writable)?,
                    })
                }
                $(#[$lookup_meta])*
                fn lookup<'py>(&self, py: Python<'py>, $target: i64) -> PyResult<Bound<'py, PyAny>> {
                    self.inner.ensure_open()?;
                    self.inner.lookup($target).into_py_result(py)
                }
                #[doc = concat!("The `n`th entry, as a `", $entry, "`.")]
                fn entry<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
                    self.inner.ensure_open()?;
                    self.inner.entry(n)?.into_py_result(py)
                }
                #[doc = concat!("Every entry, oldest first, as `", $entry, "`s.")]
                fn entries_list<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
                    self.inner.ensure_open()?;
                    into_py_results(py, (0..self.inner.entries()).map(|n| self.inner.entry(n)))
                }
                /// Kafka's `entries`: the number of entries.
                #[getter]
                fn entries(&self) -> PyResult<usize> {
                    self.inner.ensure_open()?;
                    Ok(self.inner.entries())
                }
                /// Kafka's `maxEntries`: how many entries the file has room for.
                #[getter]
                fn max_entries(&self) -> PyResult<usize> {
                    self.inner.ensure_open()?;
                    Ok(self.inner.max_entries())
                }
                /// Kafka's `isFull`: whether no entry can be added.
                #[getter]
                fn is_full(&self) -> PyResult<bool> {
                    self.inner.ensure_open()?;
                    Ok(self.inner.is_full())
                }
                fn __len__(&self) -> PyResult<usize> {
                    self.inner.ensure_open()?;
                    Ok(self.inner.entries())
                }
                $($methods)*
            }
        }
    };
}

py_mmap_index! {
    /// Kafka's OffsetIndex: 8-byte entries (relative offset, file position), memory-mapped.
    OffsetIndex(RsOffsetIndex, "OffsetPosition"),
    /// Kafka's `lookup`: the last entry whose offset is at or below `target_offset`, as an
    /// `OffsetPosition` ((base offset, 0) when there is none).
    lookup(target_offset),
    {
        /// Kafka's `append`: adds (offset, position); the offset must be larger than the last one.
        fn append(&mut self, offset: i64, position: i32) -> PyResult<()> {
            self.inner.ensure_open()?;
            Ok(self.inner.append(offset, position)?)
        }
        /// Kafka's `lastOffset`: the last entry's offset (the base offset when empty).
        #[getter]
        fn last_offset(&self) -> PyResult<i64> {
            self.inner.ensure_open()?;
            Ok(self.inner.last_offset())
        }
        /// The base offset of the segment the index belongs to.
        #[getter]
        fn base_offset(&self) -> i64 {
            self.inner.base_offset()
        }
    }
}

py_mmap_index! {
    /// Kafka's TimeIndex: 12-byte entries (timestamp, relative offset), memory-mapped.
    TimeIndex(RsTimeIndex, "TimestampOffset"),
    /// Kafka's `lookup`: the last entry whose timestamp is at or below `target_timestamp`, as a
    /// `TimestampOffset` ((-1, base offset) when there is none).
    lookup(target_timestamp),
    {
        /// Kafka's `maybeAppend`: adds (timestamp, offset) when the timestamp is larger than the
        /// last entry's; raises when the index is full unless `skip_full_check`.
        #[pyo3(signature = (timestamp, offset, skip_full_check = false))]
        fn maybe_append(&mut self, timestamp: i64, offset: i64, skip_full_check: bool) -> PyResult<()> {
            self.inner.ensure_open()?;
            Ok(self
                .inner
                .maybe_append(timestamp, offset, skip_full_check)?)
        }
        /// Kafka's `lastEntry`: the last `TimestampOffset` ((-1, base offset) when empty).
        #[getter]
        fn last_entry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            self.inner.ensure_open()?;
            self.inner.last_entry().into_py_result(py)
        }
    }
}

py_index_file! {
    /// Kafka's TransactionIndex (`.txnindex`): 34-byte aborted-transaction entries.
    TransactionIndex(RsTransactionIndex) {
        #[new]
        #[pyo3(signature = (path, start_offset, *, writable = false))]
        fn new(path: super::FsPath, start_offset: i64, writable: bool) -> PyResult<Self> {
            Ok(TransactionIndex {
                inner: RsTransactionIndex::open(path, start_offset, writable)?,
            })
        }
        /// Kafka's `append`: adds an aborted transaction (an `AbortedTxn` entry).
        fn append(
            &mut self,
            producer_id: i64,
            first_offset: i64,
            last_offset: i64,
            last_stable_offset: i64,
        ) -> PyResult<()> {
            Ok(self.inner.append(AbortedTxn::new(
                producer_id,
                first_offset,
                last_offset,
                last_stable_offset,
            ))?)
        }
        /// Kafka's `allAbortedTxns`: every entry, as `AbortedTxn` dicts.
        fn all_aborted_txns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
            aborted_to_py(py, &self.inner.all_aborted_txns()?)
        }
        /// Aborted transactions overlapping [fetch_offset, upper_bound_offset): (list, is_complete).
        fn collect_aborted_txns<'py>(
            &self,
            py: Python<'py>,
            fetch_offset: i64,
            upper_bound_offset: i64,
        ) -> PyResult<(Bound<'py, PyList>, bool)> {
            let r = self
                .inner
                .collect_aborted_txns(fetch_offset, upper_bound_offset)?;
            Ok((aborted_to_py(py, &r.aborted)?, r.is_complete))
        }
    }
}

/// Kafka's LogSegment: `<base offset>.log` with its `.index`, `.timeindex` and `.txnindex`.
#[pyclass(module = "kafkalog")]
pub struct Segment {
    inner: LogSegment,
    /// A writable segment's hold on its folder, as a writable `Log`'s (one writer per log): a
    /// writable Segment beside a Log appended over the Log's records, and one in a broker's
    /// internal partition wrote what the broker may not load (a black-box tester).
    _writer: Option<crate::datadir::WriterLock>,
}

#[pymethods]
impl Segment {
    /// Opens the segment at `base_offset` in `directory` (creating its files when writable).
    /// `config` takes Kafka topic-config names: `segment.index.bytes`, `index.interval.bytes`, ...
    #[new]
    #[pyo3(signature = (directory, base_offset, *, writable = false, config = None, suffix = ""))]
    fn new(
        py: Python<'_>,
        directory: super::FsPath,
        base_offset: i64,
        writable: bool,
        config: Option<&Bound<'_, PyDict>>,
        suffix: &str,
    ) -> PyResult<Self> {
        let config = config_from(config)?;
        let suffix = suffix.to_string();
        // Taken first: opening a segment writable resizes its index files.
        let writer = if writable {
            Some(py.release_gil(|| crate::datadir::lock_partition_dir(&directory))?)
        } else {
            None
        };
        let inner = py.release_gil(|| {
            LogSegment::open(
                &directory,
                base_offset,
                &config,
                writable,
                &suffix,
                now_ms(),
            )
        })?;
        Ok(Segment {
            inner,
            _writer: writer,
        })
    }

    /// Appends batches (bytes from `encode_batch`, offsets already assigned and increasing).
    fn append(&mut self, py: Python<'_>, records: &[u8]) -> PyResult<()> {
        let inner = &mut self.inner;
        py.release_gil(|| -> Result<()> {
            let mut largest = None;
            for h in headers_in(records) {
                largest = Some(h?.last_offset);
            }
            let largest =
                largest.ok_or_else(|| Error::InvalidArgument("no batch to append".into()))?;
            inner.append(largest, records)
        })?;
        Ok(())
    }

    /// Kafka's LogSegment.read: raw bytes of whole batches from the one holding `start_offset`,
    /// or None past the end. Returns a dict with `records` (bytes), `position`,
    /// `first_entry_incomplete`.
    #[pyo3(signature = (start_offset, max_size, max_position = None, min_one_message = true))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        start_offset: i64,
        max_size: usize,
        max_position: Option<u64>,
        min_one_message: bool,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let inner = &self.inner;
        let info =
            py.release_gil(|| inner.read(start_offset, max_size, max_position, min_one_message))?;
        let Some(info) = info else { return Ok(None) };
        Ok(Some(fetch_info_to_py(py, &info)?))
    }

    /// Every batch in the segment, decoded (CRC checked).
    fn batches(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let inner = &self.inner;
        let decoded = py.release_gil(|| -> Result<Vec<DecodedBatch>> {
            let log = inner.log();
            let mut out = Vec::new();
            let mut scratch = Vec::new();
            log.for_each_batch(
                0,
                log.size_in_bytes(),
                inner.max_batch_size(),
                &mut |position, batch| {
                    let records = batch.records(&mut scratch, inner.max_decompressed())?;
                    out.push(DecodedBatch::new(batch, position, &records)?);
                    Ok(true)
                },
            )?;
            Ok(out)
        })?;
        batches_to_py(py, decoded)
    }

    /// (offset, position, size) of the first batch whose last offset is >= offset, or None.
    #[pyo3(signature = (offset, starting_position = 0))]
    fn translate_offset<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
        starting_position: u64,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .translate_offset(offset, starting_position)?
            .map(|p| p.into_py_result(py))
            .transpose()
    }

    /// (timestamp, offset) of the first record with timestamp >= `timestamp`, or None.
    #[pyo3(signature = (timestamp, starting_offset = None))]
    fn find_offset_by_timestamp<'py>(
        &self,
        py: Python<'py>,
        timestamp: i64,
        starting_offset: Option<i64>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let start = starting_offset.unwrap_or(self.inner.base_offset());
        self.inner
            .find_offset_by_timestamp(timestamp, start)?
            .map(|t| t.into_py_result(py))
            .transpose()
    }

    /// Validates every batch, rebuilds the indexes and truncates an invalid tail; returns the
    /// number of bytes truncated.
    fn recover(&mut self, py: Python<'_>) -> PyResult<u64> {
        let inner = &mut self.inner;
        Ok(py.release_gil(|| inner.recover(&mut |_| Ok(())))?)
    }

    /// Kafka's `truncateTo`: removes every batch at or after `offset` (and their index
    /// entries); returns the number of bytes removed.
    fn truncate_to(&mut self, offset: i64) -> PyResult<u64> {
        Ok(self.inner.truncate_to(offset)?)
    }

    /// Kafka's `sanityCheck`: the segment's index files are valid (CorruptIndexError if not).
    fn sanity_check(&self) -> PyResult<()> {
        Ok(self.inner.sanity_check()?)
    }

    /// Kafka's shouldRoll for a pending append.
    #[pyo3(signature = (*, messages_size, max_timestamp_in_messages, max_offset_in_messages, max_segment_bytes, max_segment_ms, now = None))]
    fn should_roll(
        &mut self,
        messages_size: usize,
        max_timestamp_in_messages: i64,
        max_offset_in_messages: i64,
        max_segment_bytes: u64,
        max_segment_ms: i64,
        now: Option<i64>,
    ) -> PyResult<bool> {
        Ok(self.inner.should_roll(&crate::segment::RollParams {
            max_segment_ms,
            max_segment_bytes,
            max_timestamp_in_messages,
            max_offset_in_messages,
            messages_size,
            now: now.unwrap_or_else(now_ms),
        })?)
    }

    /// Kafka's `changeFileSuffixes`: renames the segment's files (".deleted", ".cleaned", ...).
    fn change_file_suffixes(&mut self, old_suffix: &str, new_suffix: &str) -> PyResult<()> {
        Ok(self.inner.change_file_suffixes(old_suffix, new_suffix)?)
    }

    /// Kafka's `flush`: the `.log` and its indexes to disk.
    fn flush(&self) -> PyResult<()> {
        Ok(self.inner.flush()?)
    }

    /// Closes the segment's files (and releases a writable one's folder).
    fn close(&mut self) -> PyResult<()> {
        self.inner.close()?;
        self._writer = None;
        Ok(())
    }

    /// The offset of the segment's first record (its file name).
    #[getter]
    fn base_offset(&self) -> i64 {
        self.inner.base_offset()
    }
    /// The `.log` file's size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size()
    }
    /// The offset after the segment's last record.
    #[getter]
    fn next_offset(&self) -> PyResult<i64> {
        Ok(self.inner.read_next_offset()?)
    }
    /// Kafka's `maxTimestampSoFar`: the largest timestamp in the segment (-1 when empty).
    #[getter]
    fn max_timestamp_so_far(&mut self) -> i64 {
        self.inner.max_timestamp_so_far()
    }
    /// Alias of `max_timestamp_so_far` (its earlier name).
    #[getter]
    fn max_timestamp(&mut self) -> i64 {
        self.max_timestamp_so_far()
    }
    /// The path of the segment's `.log` file.
    #[getter]
    fn log_path(&self) -> PathBuf {
        self.inner.log().path().to_path_buf()
    }
    /// The `.index` entries, as `OffsetPosition`s.
    fn offset_index_entries<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let idx = self.inner.offset_index();
        into_py_results(py, (0..idx.entries()).map(|n| idx.entry(n)))
    }
    /// The `.timeindex` entries, as `TimestampOffset`s.
    fn time_index_entries<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let idx = self.inner.time_index();
        into_py_results(py, (0..idx.entries()).map(|n| idx.entry(n)))
    }
    /// The `.txnindex` entries, as `AbortedTxn` dicts.
    fn aborted_txns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        aborted_to_py(py, &self.inner.txn_index().all_aborted_txns()?)
    }
    fn __repr__(&self) -> String {
        format!(
            "Segment(base_offset={}, size={}, path={:?})",
            self.inner.base_offset(),
            self.inner.size(),
            self.inner.log().path()
        )
    }
}

/// Kafka's FetchDataInfo as a dict: `records` (raw bytes), `offset`, `segment_base_offset`,
/// `position`, `first_entry_incomplete`.
pub fn fetch_info_to_py<'py>(
    py: Python<'py>,
    info: &crate::segment::FetchDataInfo,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "records",
        crate::python::records::py_bytes(py, &info.records)?,
    )?;
    d.set_item("offset", info.fetch_offset_metadata.message_offset)?;
    d.set_item(
        "segment_base_offset",
        info.fetch_offset_metadata.segment_base_offset,
    )?;
    d.set_item(
        "position",
        info.fetch_offset_metadata.relative_position_in_segment,
    )?;
    d.set_item("first_entry_incomplete", info.first_entry_incomplete)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<OffsetIndex>()?;
    m.add_class::<TimeIndex>()?;
    m.add_class::<TransactionIndex>()?;
    m.add_class::<Segment>()?;
    Ok(())
}
