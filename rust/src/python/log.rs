//! `kafkalog.Log` for Python: a partition log over a `<topic>-<partition>` directory.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::config::LogConfig;
use crate::error::Result;
use crate::log::{FetchIsolation, Log as RsLog, LogOptions, OnCorruption};
use crate::python::errors::{kafka_field, non_negative_size, optional_kafka_field, positive_size};
use crate::python::records::{
    batches_to_py, build_v2, decode_batch, extract_records, now_ms, record_view_to_py, DecodedBatch,
};
use crate::python::results::{dict_of, IntoPyResult};
use crate::python::segment::{aborted_to_py, config_onto, fetch_info_to_py};
use crate::python::ReleaseGil;
use crate::record::batch::{is_partial_batch, BatchIter};
use crate::record::builder::{end_txn_marker_batch, BatchOptions};
use crate::record::codec::Compression;
use crate::record::control::{ControlRecordType, EndTransactionMarker};
use crate::record::file_records::FileAccess;
use crate::record::record::RecordArena;

/// `Log.read`'s default `max_length`: 1 MiB, Kafka's `max.partition.fetch.bytes` default.
const DEFAULT_READ_MAX_LENGTH: usize = 1024 * 1024;

fn isolation_of(name: &str) -> Result<FetchIsolation> {
    FetchIsolation::from_name(name)
}

/// Kafka's partition log (UnifiedLog): segments, offsets, append, read, retention, truncation.
///
/// `Log(path)` opens the partition folder `path` (`<topic>-<partition>`). `read_only=True` (the
/// default) never changes a byte on disk; `read_only=False` makes this the log's one writer.
/// `create=True` (with `read_only=False`) starts a new log in a missing or empty folder.
/// `config` takes Kafka topic configs (`segment.bytes`, `retention.ms`, ...); a writable log
/// starts from its topic's (a broker's `__cluster_metadata`, or `Topic.create`'s). `single_replica`
/// (the default) answers as a lone replica restarted: its high watermark is its log end.
/// `on_corruption`: what to do with damage beyond a torn tail of the last segment: "error"
/// (raise LogDamagedError, the default), "skip" (read-only: read every valid batch around it)
/// or "truncate" (Kafka's recovery: the log ends at the damage; writable opens delete what
/// follows). `damaged_ranges` reports what was skipped or removed.
#[pyclass(module = "kafkalog", frozen)]
pub struct Log {
    inner: Arc<RsLog>,
}

#[pymethods]
impl Log {
    /// Opens the log in `path` (the options: the class's docstring).
    #[new]
    #[pyo3(signature = (path, *, read_only = true, config = None, create = false, single_replica = true,
        on_corruption = "error"))]
    fn new(
        py: Python<'_>,
        path: super::FsPath,
        read_only: bool,
        config: Option<&Bound<'_, PyDict>>,
        create: bool,
        single_replica: bool,
        on_corruption: &str,
    ) -> PyResult<Self> {
        // A writer appends as its topic says (`compression.type`, `message.timestamp.type`,
        // `cleanup.policy`, `max.message.bytes`, ...), as a broker's log takes its topic's
        // configs; `config` goes over them.
        let base = if read_only {
            LogConfig::default()
        } else {
            let given = config.is_some();
            py.release_gil(|| crate::datadir::partition_log_config(&path, given))?
        };
        let options = LogOptions {
            config: config_onto(base, config)?,
            read_only,
            create,
            single_replica,
            on_corruption: OnCorruption::from_name(on_corruption)?,
            ..Default::default()
        };
        let log = py.release_gil(|| RsLog::open(&path, options))?;
        Ok(Log {
            inner: Arc::new(log),
        })
    }

    /// Same as the constructor.
    #[staticmethod]
    #[pyo3(signature = (path, *, read_only = true, config = None, create = false, single_replica = true,
        on_corruption = "error"))]
    fn open(
        py: Python<'_>,
        path: super::FsPath,
        read_only: bool,
        config: Option<&Bound<'_, PyDict>>,
        create: bool,
        single_replica: bool,
        on_corruption: &str,
    ) -> PyResult<Self> {
        Self::new(
            py,
            path,
            read_only,
            config,
            create,
            single_replica,
            on_corruption,
        )
    }

    /// The partition folder.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }
    /// Whether the log was opened read-only (nothing on disk changes).
    #[getter]
    fn read_only(&self) -> bool {
        self.inner.is_read_only()
    }
    /// Kafka's `logStartOffset`: the first offset a consumer may read.
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.inner.log_start_offset()
    }
    /// Kafka's `logEndOffset`: the offset the next record gets.
    #[getter]
    fn log_end_offset(&self) -> i64 {
        self.inner.log_end_offset()
    }
    /// (offset, segment base offset, byte position) of the log end offset.
    #[getter]
    fn log_end_offset_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.inner.log_end_offset_metadata().into_py_result(py)
    }
    /// Kafka's `highWatermark`: the end of what read_uncommitted consumers see.
    #[getter]
    fn high_watermark(&self) -> i64 {
        self.inner.high_watermark()
    }
    /// Kafka's `lastStableOffset`: the end of what read_committed consumers see.
    #[getter]
    fn last_stable_offset(&self) -> i64 {
        self.inner.last_stable_offset()
    }
    /// Kafka's `firstUnstableOffset`: the first offset of the oldest open transaction, if any.
    #[getter]
    fn first_unstable_offset(&self) -> Option<i64> {
        self.inner.first_unstable_offset()
    }
    /// Kafka's `recoveryPoint`: offsets below it are flushed to disk.
    #[getter]
    fn recovery_point(&self) -> i64 {
        self.inner.recovery_point()
    }
    /// Base offsets of the segments, oldest first (the last is the active segment).
    #[getter]
    fn segments(&self) -> Vec<i64> {
        self.inner.segment_base_offsets()
    }
    /// The size of every segment's `.log`, in bytes.
    #[getter]
    fn size_in_bytes(&self) -> u64 {
        self.inner.size_in_bytes()
    }
    /// The topic id of `partition.metadata` (base64url), if the folder has one.
    #[getter]
    fn topic_id(&self) -> PyResult<Option<String>> {
        Ok(self.inner.topic_id()?)
    }
    /// Producers the log tracks (Kafka's `activeProducers`): {producer_id: ProducerStateEntry}.
    #[getter]
    fn active_producers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for e in self.inner.active_producers() {
            out.set_item(e.producer_id, e.into_py_result(py)?)?;
        }
        Ok(out)
    }
    /// Kafka's `latestEpoch`: the last leader epoch of the `leader-epoch-checkpoint`, if any.
    #[getter]
    fn latest_epoch(&self) -> Option<i32> {
        self.inner.latest_epoch()
    }
    /// Bytes cut from a torn tail when the log was opened (recovered on disk, or hidden in memory
    /// when read-only).
    #[getter]
    fn recovered_bytes_truncated(&self) -> u64 {
        self.inner.recovered_bytes_truncated()
    }
    /// Damage found when the log was opened, one dict per range: file, position, bytes,
    /// first_offset and last_offset (None when unknown), reason, and action ("skipped",
    /// "removed" or "missing"). Empty for an undamaged log.
    #[getter]
    fn damaged_ranges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for d in self.inner.damaged_ranges() {
            let item = PyDict::new(py);
            item.set_item("file", &d.file)?;
            item.set_item("position", d.position)?;
            item.set_item("bytes", d.bytes)?;
            item.set_item("first_offset", d.offsets.map(|o| o.0))?;
            item.set_item("last_offset", d.offsets.map(|o| o.1))?;
            item.set_item("reason", &d.reason)?;
            item.set_item("action", d.action.name())?;
            item.set_item("description", d.to_string())?;
            out.append(item)?;
        }
        Ok(out)
    }

    /// Appends records as the leader: offsets are assigned, the batch is validated, the log rolls
    /// when a roll condition holds. `leader_epoch` defaults to the log's latest leader epoch (0
    /// without one), as a broker's leader never appends below it. Returns (first offset, last
    /// offset).
    #[pyo3(signature = (records, *, compression = "none", producer_id = -1, producer_epoch = -1, base_sequence = -1,
        transactional = false, leader_epoch = None),
        text_signature = "($self, records, *, compression=\"none\", producer_id=-1, producer_epoch=-1, \
            base_sequence=-1, transactional=False, leader_epoch=None)")]
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        compression: &str,
        producer_id: i64,
        producer_epoch: i64,
        base_sequence: i64,
        transactional: bool,
        leader_epoch: Option<i64>,
    ) -> PyResult<(i64, i64)> {
        let producer_epoch: i16 = kafka_field("producer_epoch", producer_epoch)?;
        let base_sequence: i32 = kafka_field("base_sequence", base_sequence)?;
        let leader_epoch: Option<i32> = optional_kafka_field("leader_epoch", leader_epoch)?;
        let input = extract_records(records, "no records to append")?;
        let compression = Compression::from_name(compression)?;
        let log = self.inner.clone();
        let info = py.release_gil(move || -> Result<_> {
            let batch = build_v2(
                &input,
                BatchOptions {
                    compression,
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    is_transactional: transactional,
                    ..Default::default()
                },
            )?;
            let epoch = leader_epoch.unwrap_or_else(|| log.current_leader_epoch());
            log.append_as_leader(&batch, epoch)
        })?;
        Ok((info.first_offset, info.last_offset))
    }

    /// Appends raw v2 batches: as the leader (offsets assigned) or as a follower (offsets kept,
    /// they must follow the log end offset; `leader_epoch` defaults to the log's latest). Returns
    /// a dict of Kafka's LogAppendInfo fields.
    #[pyo3(signature = (data, *, as_follower = false, leader_epoch = None))]
    fn append_batches<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        as_follower: bool,
        leader_epoch: Option<i64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let leader_epoch: Option<i32> = optional_kafka_field("leader_epoch", leader_epoch)?;
        let log = self.inner.clone();
        let data = data.to_vec();
        let info = py.release_gil(move || {
            if as_follower {
                log.append_as_follower(&data)
            } else {
                log.append_as_leader(
                    &data,
                    leader_epoch.unwrap_or_else(|| log.current_leader_epoch()),
                )
            }
        })?;
        Ok(
            dict_of!(py, info; first_offset, last_offset, max_timestamp, offset_of_max_timestamp,
            log_append_time, log_start_offset, record_count, valid_bytes, duplicate),
        )
    }

    /// Appends a transaction marker (a COMMIT or ABORT control batch) for a producer, as the
    /// transaction coordinator's WriteTxnMarkers does (Kafka's `appendAsLeader` with origin
    /// COORDINATOR; the crate's `Log::append_txn_marker`; `leader_epoch` defaults to the log's
    /// latest). Returns the marker's offset.
    #[pyo3(signature = (producer_id, producer_epoch, *, commit, coordinator_epoch = 0, leader_epoch = None, timestamp = None))]
    #[allow(clippy::too_many_arguments)]
    fn append_txn_marker(
        &self,
        py: Python<'_>,
        producer_id: i64,
        producer_epoch: i64,
        commit: bool,
        coordinator_epoch: i64,
        leader_epoch: Option<i64>,
        timestamp: Option<i64>,
    ) -> PyResult<i64> {
        let producer_epoch: i16 = kafka_field("producer_epoch", producer_epoch)?;
        let coordinator_epoch: i32 = kafka_field("coordinator_epoch", coordinator_epoch)?;
        let leader_epoch: Option<i32> = optional_kafka_field("leader_epoch", leader_epoch)?;
        let log = self.inner.clone();
        let control_type = if commit {
            ControlRecordType::Commit
        } else {
            ControlRecordType::Abort
        };
        let offset = py.release_gil(move || -> Result<i64> {
            let leader_epoch = leader_epoch.unwrap_or_else(|| log.current_leader_epoch());
            let batch = end_txn_marker_batch(
                0,
                timestamp.unwrap_or_else(now_ms),
                leader_epoch,
                producer_id,
                producer_epoch,
                EndTransactionMarker {
                    control_type,
                    coordinator_epoch,
                },
            )?;
            Ok(log.append_txn_marker(&batch, leader_epoch)?.first_offset)
        })?;
        Ok(offset)
    }

    /// Alias of `append_txn_marker` (its earlier name), same arguments and result.
    #[pyo3(signature = (producer_id, producer_epoch, *, commit, coordinator_epoch = 0, leader_epoch = None, timestamp = None))]
    #[allow(clippy::too_many_arguments)]
    fn write_txn_marker(
        &self,
        py: Python<'_>,
        producer_id: i64,
        producer_epoch: i64,
        commit: bool,
        coordinator_epoch: i64,
        leader_epoch: Option<i64>,
        timestamp: Option<i64>,
    ) -> PyResult<i64> {
        self.append_txn_marker(
            py,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            leader_epoch,
            timestamp,
        )
    }

    /// Kafka's `UnifiedLog.read`: whole batches from the one holding `start_offset`, at most
    /// `max_length` bytes (1 MiB when None; at least one batch when `min_one_message`), bounded
    /// by `isolation` (Kafka's FetchIsolation: "log_end", "high_watermark", "txn_committed").
    /// `max_bytes` is an alias of `max_length`. Returns a dict (`LogReadInfo`): `records` (raw
    /// bytes), `batches` (decoded whole batches), `aborted_transactions` (txn_committed
    /// isolation), `offset`, `segment_base_offset`, `position`, `first_entry_incomplete`.
    #[pyo3(signature = (start_offset, max_length = None, isolation = "high_watermark", min_one_message = true,
        *, max_bytes = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        start_offset: i64,
        max_length: Option<i64>,
        isolation: &str,
        min_one_message: bool,
        max_bytes: Option<i64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let max_length = match (max_length, max_bytes) {
            (Some(_), Some(_)) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "pass max_length or its alias max_bytes, not both",
                ))
            }
            (Some(n), None) => non_negative_size("max_length", n)?,
            (None, Some(n)) => non_negative_size("max_bytes", n)?,
            (None, None) => DEFAULT_READ_MAX_LENGTH,
        };
        let isolation = isolation_of(isolation)?;
        let log = self.inner.clone();
        let (info, decoded) = py.release_gil(move || -> Result<_> {
            let info = log.read(start_offset, max_length, isolation, min_one_message)?;
            let mut decoded: Vec<DecodedBatch> = Vec::new();
            let mut iter = BatchIter::new(&info.records);
            loop {
                let position = iter.position() as u64;
                match iter.next() {
                    Some(Ok(b)) => decoded.push(decode_batch(
                        &b,
                        position,
                        log.config().max_decompressed_batch_bytes,
                    )?),
                    // A fetch may end inside its last batch (max_length), which consumers drop;
                    // anything else that does not decode is damage and is reported.
                    Some(Err(_)) if is_partial_batch(&info.records[position as usize..]) => break,
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
            }
            Ok((info, decoded))
        })?;
        let d = fetch_info_to_py(py, &info)?;
        d.set_item("batches", batches_to_py(py, decoded)?)?;
        match &info.aborted_transactions {
            Some(a) => d.set_item("aborted_transactions", aborted_to_py(py, a)?)?,
            None => d.set_item("aborted_transactions", py.None())?,
        }
        Ok(d)
    }

    /// Iterates records in offset order across segments, as a consumer with `isolation`
    /// (read_uncommitted or read_committed) would see them; control records are never returned.
    /// A `start` before the log start offset or past the log end offset raises
    /// OffsetOutOfRangeError, as a Kafka fetch there fails; at the log end there is nothing yet.
    #[pyo3(signature = (start = None, end = None, isolation = "read_uncommitted"))]
    fn records(
        &self,
        start: Option<i64>,
        end: Option<i64>,
        isolation: &str,
    ) -> PyResult<RecordIterator> {
        let isolation = isolation_of(isolation)?;
        let start = self.inner.checked_read_start(start)?;
        Ok(RecordIterator::new(
            self.inner.clone(),
            start,
            end,
            isolation,
        ))
    }

    /// Every batch (decoded) in [start, end), control batches included, up to `isolation`.
    #[pyo3(signature = (start = None, end = None, isolation = "log_end"))]
    fn batches(
        &self,
        py: Python<'_>,
        start: Option<i64>,
        end: Option<i64>,
        isolation: &str,
    ) -> PyResult<Py<PyList>> {
        let isolation = isolation_of(isolation)?;
        let log = self.inner.clone();
        let decoded = py.release_gil(move || -> Result<Vec<DecodedBatch>> {
            let mut out = Vec::new();
            log.for_each_batch(
                start,
                end,
                isolation,
                true,
                &mut |position, batch, records, _| {
                    out.push(DecodedBatch::new(batch, position, records)?);
                    Ok(true)
                },
            )?;
            Ok(out)
        })?;
        batches_to_py(py, decoded)
    }

    /// The log's records as a `pyarrow.RecordBatchReader` with Spark's Kafka source schema
    /// (key, value, topic, partition, offset, timestamp, timestampType[, headers]). It streams:
    /// Arrow batches of about `batch_rows` rows and at most about `batch_bytes` of keys and
    /// values (64 MiB unless given; large records) are decoded one at a time, so memory stays
    /// flat. A Kafka batch is never split between two Arrow batches.
    /// `end=None` stops at what a consumer with `isolation` could read (the high watermark, or
    /// the last stable offset for read_committed); `isolation="log_end"` reads to the log end.
    /// `zero_copy=True` gives `binary_view` key and value columns whose values point into the
    /// segment instead of being copied: into memory maps of its files when the log is read-only
    /// and nothing writes it (no broker, no writable Log), else into the read buffers; a
    /// compressed batch's into its inflated buffer when that is 16 KiB or more (a smaller
    /// one's values are copied, so many small batches keep no buffer each). Such a
    /// log's uncompressed records of about 64 B to 1 KiB are read through the maps with each
    /// batch's CRC checked on a second thread running ahead of the decoder (on machines with
    /// more than one core), copying or not; `check_crcs_ahead=False` keeps the whole read on
    /// the calling thread, for callers that already keep every core busy.
    /// `threads`: a range of 2 MiB or more is cut into chunks of 1 to 4 MiB, decoded on that
    /// many threads (at most the cores) of a pool shared by the process (None: the cores, at
    /// most 8), the batches handed out in offset order; a chunk's end (after a Kafka batch)
    /// also ends an Arrow batch. At most two chunks per thread are decoded ahead of the caller,
    /// so memory stays bounded.
    /// `threads=1` decodes on the calling thread (with the CRC checker above).
    #[pyo3(signature = (start = None, end = None, isolation = "read_uncommitted", include_headers = false,
        batch_rows = 65536, zero_copy = false, batch_bytes = 67108864, check_crcs_ahead = true,
        threads = None))]
    #[allow(clippy::too_many_arguments)]
    fn to_arrow(
        &self,
        py: Python<'_>,
        start: Option<i64>,
        end: Option<i64>,
        isolation: &str,
        include_headers: bool,
        batch_rows: i64,
        zero_copy: bool,
        batch_bytes: i64,
        check_crcs_ahead: bool,
        threads: Option<i64>,
    ) -> PyResult<PyObject> {
        // None: the machine's cores (at most 8).
        let threads = threads.map_or(Ok(0), |t| positive_size("threads", t))?;
        crate::python::arrow::log_to_arrow(
            py,
            self.inner.clone(),
            start,
            end,
            isolation_of(isolation)?,
            include_headers,
            positive_size("batch_rows", batch_rows)?,
            zero_copy,
            positive_size("batch_bytes", batch_bytes)?,
            check_crcs_ahead,
            threads,
        )
    }

    /// Appends an Arrow table, batch or stream (anything with `__arrow_c_stream__` or
    /// `__arrow_c_array__`) with Spark's Kafka sink columns: `value` (binary or string),
    /// optional `key`, `headers` (list<struct<key: string, value: binary>>) and `timestamp`
    /// (timestamp or int64 ms; now when absent). `topic`/`partition` columns are ignored here.
    /// Each Arrow batch is one all-or-nothing append. Returns (first, last) offsets or None.
    #[pyo3(signature = (data, *, compression = "none", batch_bytes = 524288))]
    fn append_arrow(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        compression: &str,
        batch_bytes: i64,
    ) -> PyResult<Option<(i64, i64)>> {
        crate::python::arrow::log_append_arrow(
            py,
            self.inner.clone(),
            crate::python::arrow::arrow_input(data)?,
            compression,
            non_negative_size("batch_bytes", batch_bytes)?,
        )
    }

    /// The end offset a consumer with `isolation` gets from ListOffsets(LATEST): the high
    /// watermark (read_uncommitted), the last stable offset (read_committed) or the log end.
    #[pyo3(signature = (isolation = "read_uncommitted"))]
    fn latest_offset(&self, isolation: &str) -> PyResult<i64> {
        Ok(self.inner.fetch_upper_bound(isolation_of(isolation)?))
    }

    /// The high watermark the broker last checkpointed for this partition (None without a
    /// `replication-offset-checkpoint` entry). `high_watermark` is ahead of it for a lone replica.
    #[getter]
    fn checkpointed_high_watermark(&self) -> Option<i64> {
        self.inner.checkpointed_high_watermark()
    }

    /// The recovery point the broker last checkpointed (None without a
    /// `recovery-point-offset-checkpoint` entry): every offset below it was flushed to disk.
    #[getter]
    fn checkpointed_recovery_point(&self) -> Option<i64> {
        self.inner.checkpointed_recovery_point()
    }

    /// What the open found missing past the log end: the recovery-point checkpoint said more was
    /// flushed than the segments held (a last segment cut or emptied since, or its last bytes
    /// there but invalid, left out as Kafka's recovery leaves them); None otherwise. Kafka serves
    /// such a log silently; the command line prints this as a note.
    #[getter]
    fn tail_loss(&self) -> Option<String> {
        self.inner.tail_loss()
    }

    /// Kafka's ListOffsets: `timestamp` is a time in ms, or EARLIEST (-2), LATEST (-1),
    /// MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4), LATEST_TIERED (-5), EARLIEST_PENDING_UPLOAD
    /// (-6). Returns a `TimestampAndOffset` (with its leader epoch, as Kafka's) or None. `isolation` asks as a consumer
    /// does ("read_uncommitted" or "read_committed"): LATEST is then the high watermark or the
    /// last stable offset, and a record at or past it is not found (None); without it, as a
    /// replica asks, to the log end.
    #[pyo3(signature = (timestamp, isolation = None))]
    fn offset_for_timestamp<'py>(
        &self,
        py: Python<'py>,
        timestamp: i64,
        isolation: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let isolation = isolation.map(isolation_of).transpose()?;
        let log = self.inner.clone();
        py.release_gil(move || log.list_offsets(timestamp, isolation))?
            .map(|t| t.into_py_result(py))
            .transpose()
    }

    /// Kafka's `collectAbortedTransactions`: every aborted transaction overlapping
    /// [start_offset, upper_bound_offset), as `AbortedTxn` dicts.
    fn collect_aborted_transactions<'py>(
        &self,
        py: Python<'py>,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> PyResult<Bound<'py, PyList>> {
        aborted_to_py(
            py,
            &self
                .inner
                .collect_aborted_transactions(start_offset, upper_bound_offset)?,
        )
    }

    /// Applies retention.ms, retention.bytes and the log start offset; returns segments deleted.
    fn delete_old_segments(&self, py: Python<'_>) -> PyResult<usize> {
        let log = self.inner.clone();
        Ok(py.release_gil(move || log.delete_old_segments())?)
    }
    /// Kafka's deleteRecords: moves the log start offset (never past the high watermark; -1 is
    /// up to it, as `DeleteRecordsRequest.HIGH_WATERMARK`). Refused where `cleanup.policy` has no
    /// `delete`, as Kafka's PolicyViolation.
    fn delete_records(&self, offset: i64) -> PyResult<i64> {
        Ok(self.inner.delete_records(offset)?)
    }
    /// Kafka's `truncateTo`: removes every record at or after `offset`, and the records before it
    /// in the batch that holds it (segments lose whole batches); the log end becomes the first
    /// offset removed. Returns whether anything was removed.
    fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<bool> {
        let log = self.inner.clone();
        Ok(py.release_gil(move || log.truncate_to(offset))?)
    }
    /// Kafka's `truncateFullyAndStartAt`: deletes every segment and starts the log empty at
    /// `offset`.
    fn truncate_fully_and_start_at(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        let log = self.inner.clone();
        Ok(py.release_gil(move || log.truncate_fully_and_start_at(offset))?)
    }
    /// Kafka's `roll`: a new active segment at the log end offset; returns its base offset.
    fn roll(&self, py: Python<'_>) -> PyResult<i64> {
        let log = self.inner.clone();
        Ok(py.release_gil(move || log.roll())?)
    }
    /// Kafka's `flush`: every segment up to the log end offset to disk, and the recovery point.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let log = self.inner.clone();
        Ok(py.release_gil(move || log.flush())?)
    }
    /// Kafka's `close`: flushes, writes the producer snapshot and closes the files.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let log = self.inner.clone();
        Ok(py.release_gil(move || log.close())?)
    }
    /// Kafka's `updateHighWatermark`: sets it, clamped to [log start offset, log end offset];
    /// returns the new value.
    fn update_high_watermark(&self, hw: i64) -> PyResult<i64> {
        Ok(self.inner.update_high_watermark(hw)?)
    }
    /// Moves the high watermark forward only; returns whether it moved.
    fn maybe_increment_high_watermark(&self, hw: i64) -> PyResult<bool> {
        Ok(self.inner.maybe_increment_high_watermark(hw)?.is_some())
    }
    /// The log itself (`with Log(...) as log:` closes it at the end); a closed log cannot be
    /// entered again.
    fn __enter__(slf: Py<Self>) -> PyResult<Py<Self>> {
        slf.get().inner.ensure_open()?;
        Ok(slf)
    }
    /// Closes the log.
    #[pyo3(signature = (*exc_info))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_info: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<bool> {
        let _ = exc_info; // an exception in the block propagates (returns False)
        self.close(py)?;
        Ok(false)
    }
    fn __repr__(&self) -> String {
        format!(
            "Log(path={:?}, log_start_offset={}, log_end_offset={}, high_watermark={}, segments={})",
            self.inner.dir(),
            self.inner.log_start_offset(),
            self.inner.log_end_offset(),
            self.inner.high_watermark(),
            self.inner.number_of_segments()
        )
    }
}

/// Pulls records from the log a chunk of batches at a time (whole batches, up to
/// `RECORDS_PER_CHUNK` records or `BYTES_PER_CHUNK` of keys, values and headers, so large records
/// do not pile up); each chunk is read with the log's lock held only while it is decoded.
#[pyclass(module = "kafkalog", frozen)]
pub struct RecordIterator {
    log: Arc<RsLog>,
    state: std::sync::Mutex<RecordIteratorState>,
    end: Option<i64>,
    isolation: FetchIsolation,
}

struct RecordIteratorState {
    /// The offset the next chunk starts at.
    next: i64,
    chunk: RecordArena,
    /// The next record of `chunk` to hand out.
    at: usize,
    done: bool,
}

/// Records decoded per chunk, with the GIL released: about a megabyte of 100-byte records, so a
/// chunk's read windows grow to their full 1 MiB (at 2,048 records a chunk, each chunk's first
/// window of 1 MiB was read for 270 KB of records).
const RECORDS_PER_CHUNK: usize = 8192;
const BYTES_PER_CHUNK: usize = 8 << 20;

impl RecordIterator {
    fn new(log: Arc<RsLog>, start: i64, end: Option<i64>, isolation: FetchIsolation) -> Self {
        RecordIterator {
            state: std::sync::Mutex::new(RecordIteratorState {
                next: start,
                chunk: RecordArena::default(),
                at: 0,
                done: false,
            }),
            end,
            isolation,
            log,
        }
    }

    /// How the next chunk is read, asked again for each chunk since a writer may have opened
    /// the folder since the last: through the segments' maps while none holds it (records
    /// are copied out, so the pages are released behind the read; 9% less time than read
    /// windows over 100,000 records of 100 B), else read windows.
    fn file_access(&self) -> FileAccess {
        if self.log.segments_can_be_mapped() {
            FileAccess::Mapped {
                check_crcs_ahead: false,
                release_behind: true,
                windows_without_checker: false,
            }
        } else {
            FileAccess::Windows
        }
    }

    /// The next chunk of records from `start`, decoded into `chunk`; returns the offset after
    /// it and whether the log had nothing more.
    fn fill(&self, start: i64, chunk: &mut RecordArena) -> Result<(i64, bool)> {
        chunk.clear();
        let mut next = start;
        // Past the log end only when the log was truncated under the iterator: an error, as a
        // consumer's fetch there is, not a silent end.
        if self.log.checked_read_start(Some(start))? == self.log.log_end_offset() {
            return Ok((next, true));
        }
        // The end of the last batch read whole.
        let mut whole = chunk.mark();
        let read = self.log.for_each_batch_lazy(
            Some(start),
            self.end,
            self.isolation,
            false,
            self.file_access(),
            &mut |_pos, batch, records, offsets, _window| {
                let mut last = i64::MIN;
                records.try_for_each_record(|r| {
                    last = r.offset;
                    if offsets.contains(&r.offset) {
                        chunk.push(&r);
                    }
                    Ok(())
                })?;
                next = batch.last_offset() + 1;
                whole = chunk.mark();
                // A legacy wrapper's records may reach the end before its header says.
                Ok(last < offsets.end - 1
                    && chunk.len() < RECORDS_PER_CHUNK
                    && chunk.bytes() < BYTES_PER_CHUNK)
            },
        );
        if let Err(e) = read {
            // The records of the batches before the damage are handed out first, as a consumer
            // gets them; the next chunk starts at the damaged batch and fails there.
            chunk.truncate(whole);
            if chunk.is_empty() {
                return Err(e);
            }
        }
        Ok((next, chunk.is_empty()))
    }
}

/// Locks `lock`, waiting with the GIL released: its holder may be releasing the GIL around a
/// read and need it back before it unlocks (threads sharing one `records()` iterator hung, one
/// holding the lock waiting for the GIL, another holding the GIL waiting for the lock).
fn lock_without_holding_the_gil<'a, T: Send>(
    py: Python<'_>,
    lock: &'a std::sync::Mutex<T>,
) -> std::sync::MutexGuard<'a, T> {
    loop {
        match lock.try_lock() {
            Ok(guard) => return guard,
            Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
            // Taken and let go at once: the holder is done, but another thread may take it
            // before this one has the GIL back, so try again.
            Err(std::sync::TryLockError::WouldBlock) => py.release_gil(|| drop(lock.lock())),
        }
    }
}

#[pymethods]
impl RecordIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<crate::python::records::Record>> {
        let mut guard = lock_without_holding_the_gil(py, &self.state);
        let state = &mut *guard;
        if state.at == state.chunk.len() && !state.done {
            let (start, mut chunk) = (state.next, std::mem::take(&mut state.chunk));
            let (chunk, next, done) = py.release_gil(move || -> Result<_> {
                let (next, done) = self.fill(start, &mut chunk)?;
                Ok((chunk, next, done))
            })?;
            (state.chunk, state.next, state.done, state.at) = (chunk, next, done, 0);
        }
        if state.at == state.chunk.len() {
            return Ok(None);
        }
        state.at += 1;
        match state.chunk.get(state.at - 1) {
            Some(r) => record_view_to_py(py, &r).map(Some),
            None => Ok(None),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Log>()?;
    m.add_class::<RecordIterator>()?;
    m.add("EARLIEST_TIMESTAMP", crate::log::EARLIEST_TIMESTAMP)?;
    m.add("LATEST_TIMESTAMP", crate::log::LATEST_TIMESTAMP)?;
    m.add("MAX_TIMESTAMP", crate::log::MAX_TIMESTAMP)?;
    m.add(
        "EARLIEST_LOCAL_TIMESTAMP",
        crate::log::EARLIEST_LOCAL_TIMESTAMP,
    )?;
    m.add(
        "LATEST_TIERED_TIMESTAMP",
        crate::log::LATEST_TIERED_TIMESTAMP,
    )?;
    m.add(
        "EARLIEST_PENDING_UPLOAD_TIMESTAMP",
        crate::log::EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    )?;
    Ok(())
}
