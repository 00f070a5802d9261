//! Arrow for Python: the crate's Arrow batches handed to pyarrow through the C data interface
//! (pyo3-arrow), Arrow input taken from anything with `__arrow_c_stream__`/`__arrow_c_array__`,
//! and the data-dir functions the Spark data source plans and writes with.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow_buffer::Buffer;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyRecordBatch, PySchema, PyTable};

use crate::arrow::{
    encode_sink_rows, kafka_source_schema, kafka_source_schema_with, BatchStager, LogArrowReader,
    PartitionRouter, SinkBatchOptions, SinkColumns,
};
use crate::datadir;
use crate::error::{Error, Result};
use crate::log::Log as RsLog;
use crate::python::records::now_ms;
use crate::python::{park_on_thread_exit, ReleaseGil};
use crate::record::codec::Compression;

fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(format!("Arrow input: {e}"))
}

/// Pulls Arrow batches from a log; each `__next__` decodes one batch with the GIL released.
#[pyclass(module = "kafkalog")]
pub struct ArrowBatchIterator {
    reader: Mutex<LogArrowReader>,
}

#[pymethods]
impl ArrowBatchIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let batch = py.release_gil(|| {
            self.reader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .next_batch()
        })?;
        // pyarrow's import runs Python code, which may give the GIL up.
        park_on_thread_exit(|| {
            batch
                .map(|b| PyRecordBatch::new(b).to_pyarrow(py))
                .transpose()
        })
    }
}

/// `Log.to_arrow`: a `pyarrow.RecordBatchReader` over the log's records.
#[allow(clippy::too_many_arguments)]
pub fn log_to_arrow(
    py: Python<'_>,
    log: Arc<RsLog>,
    start: Option<i64>,
    end: Option<i64>,
    isolation: crate::log::FetchIsolation,
    include_headers: bool,
    batch_rows: usize,
    zero_copy: bool,
    batch_bytes: usize,
    check_crcs_ahead: bool,
    threads: usize,
) -> PyResult<PyObject> {
    let reader = py.release_gil(|| {
        LogArrowReader::new(log, start, end, isolation, include_headers, batch_rows)?
            .zero_copy(zero_copy)
            .check_crcs_ahead(check_crcs_ahead)
            .threads(threads)
            .batch_bytes(batch_bytes)
    })?;
    park_on_thread_exit(|| {
        let schema = PySchema::new(reader.schema()).to_pyarrow(py)?;
        let batches = Py::new(
            py,
            ArrowBatchIterator {
                reader: Mutex::new(reader),
            },
        )?;
        let pyarrow = py.import("pyarrow")?;
        Ok(pyarrow
            .getattr("RecordBatchReader")?
            .call_method1("from_batches", (schema, batches))?
            .unbind())
    })
}

/// Arrow data handed in from Python (anything with `__arrow_c_stream__` or `__arrow_c_array__`);
/// anything else is a bad argument, an `InvalidArgumentError`.
pub fn arrow_input(data: &Bound<'_, PyAny>) -> PyResult<AnyRecordBatch> {
    data.extract::<AnyRecordBatch>().map_err(|e| {
        let kind = data
            .get_type()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        Error::InvalidArgument(format!(
            "data must be Arrow data (a table, record batch or stream: an object with \
             __arrow_c_stream__ or __arrow_c_array__), not {kind}: {e}"
        ))
        .into()
    })
}

/// `Log.append_arrow`: appends Arrow rows with Spark's Kafka sink columns as the leader, one
/// append (all or nothing) per Arrow batch. Returns (first offset, last offset), or None when
/// there were no rows.
pub fn log_append_arrow(
    py: Python<'_>,
    log: Arc<RsLog>,
    data: AnyRecordBatch,
    compression: &str,
    batch_bytes: usize,
) -> PyResult<Option<(i64, i64)>> {
    let options = SinkBatchOptions {
        compression: Compression::from_name(compression)?,
        batch_bytes,
    };
    let reader = data.into_reader()?;
    let range = py.release_gil(move || -> Result<Option<(i64, i64)>> {
        let mut range: Option<(i64, i64)> = None;
        let mut first_row = 0;
        for batch in reader {
            let batch = batch.map_err(arrow_error)?;
            let columns = SinkColumns::new(&batch)?.numbered_from(first_row);
            first_row += columns.num_rows();
            if columns.num_rows() == 0 {
                continue;
            }
            let bytes = encode_sink_rows(&columns, options, now_ms())?;
            let info = log.append_as_leader(&bytes, log.current_leader_epoch())?;
            range = Some((range.map_or(info.first_offset, |r| r.0), info.last_offset));
        }
        Ok(range)
    })?;
    Ok(range)
}

/// A Python `bytes` object as an Arrow buffer without a copy: the buffer holds a reference to
/// it (bytes never change). Other buffers (bytearray, memoryview, ...) may change under a view,
/// so they are copied into a `bytes` first.
fn arrow_buffer_of(data: &Bound<'_, PyAny>) -> PyResult<Buffer> {
    let bytes = match data.downcast::<PyBytes>() {
        Ok(bytes) => bytes.clone(),
        Err(_)
            if !(data.is_instance_of::<PyByteArray>() || data.is_instance_of::<PyMemoryView>()) =>
        {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "data must be bytes, bytearray or memoryview, not {}",
                data.get_type().name()?
            )));
        }
        Err(_) => data
            .py()
            .get_type::<PyBytes>()
            .call1((data,))?
            .downcast_into::<PyBytes>()?,
    };
    let slice = bytes.as_bytes();
    let Some(ptr) = std::ptr::NonNull::new(slice.as_ptr().cast_mut()) else {
        return Ok(Buffer::from_vec(Vec::<u8>::new()));
    };
    let len = slice.len();
    let owner = Arc::new(std::panic::AssertUnwindSafe(bytes.unbind()));
    // SAFETY: a bytes object's buffer never changes and lives as long as the reference the
    // buffer's owner holds (released without the GIL, pyo3 defers the decref to its pool).
    Ok(unsafe { Buffer::from_custom_allocation(ptr, len, owner) })
}

// The Python signatures spell their defaults out as literals, so `help()` shows them (pyo3
// shows an expression as `...`): these are the crate's.
const _: () = assert!(
    crate::arrow::DEFAULT_BATCH_ROWS == 65536
        && crate::arrow::DEFAULT_BATCH_BYTES == 67108864
        && crate::arrow::DEFAULT_SINK_BATCH_BYTES == 524288
        && crate::record::batch::DEFAULT_MAX_DECOMPRESSED_BYTES == 268435456
);

/// Kafka record batches held in memory, back to back (a `.log` file's bytes, a segment copied
/// from tiered storage, the records of a fetch), as a `pyarrow.Table` with Spark's Kafka source
/// schema, as a read_uncommitted consumer sees them: each batch's CRC checked, control batches
/// left out, any magic and codec. `topic`/`partition` fill their columns (null without them).
/// Arrow batches of about `batch_rows` rows (a Kafka batch is never split). `zero_copy=True`:
/// `binary_view` keys and values of uncompressed batches point into `data` (a `bytes` object is
/// kept alive by the table, others are copied once). A batch cut short or damaged raises
/// `CorruptRecordError` naming its byte position.
#[pyfunction]
#[pyo3(signature = (data, *, topic = None, partition = None, include_headers = false, zero_copy = false,
    batch_rows = 65536, max_decompressed_bytes = 268435456))]
#[allow(clippy::too_many_arguments)]
fn records_to_arrow(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    topic: Option<String>,
    partition: Option<i32>,
    include_headers: bool,
    zero_copy: bool,
    batch_rows: usize,
    max_decompressed_bytes: usize,
) -> PyResult<PyObject> {
    if batch_rows == 0 {
        return Err(Error::InvalidArgument("batch_rows must be positive".into()).into());
    }
    let buffer = arrow_buffer_of(data)?;
    let batches = py.release_gil(|| {
        crate::arrow::records_to_arrow(
            &buffer,
            topic,
            partition,
            include_headers,
            zero_copy,
            batch_rows,
            max_decompressed_bytes,
        )
    })?;
    let schema = kafka_source_schema_with(include_headers, zero_copy);
    park_on_thread_exit(|| PyTable::try_new(batches, schema)?.to_pyarrow(py))
}

/// Spark's Kafka source schema as a `pyarrow.Schema`.
#[pyfunction]
#[pyo3(signature = (include_headers = false))]
fn kafka_source_schema_arrow(py: Python<'_>, include_headers: bool) -> PyResult<PyObject> {
    PySchema::new(kafka_source_schema(include_headers)).to_pyarrow(py)
}

/// The live `<topic>-<partition>` folders of a data dir: [(topic, partition, path)].
#[pyfunction]
fn partition_folders(
    py: Python<'_>,
    data_dir: super::FsPath,
) -> PyResult<Vec<(String, i32, PathBuf)>> {
    let folders = py.release_gil(|| datadir::live_partition_folders(&data_dir))?;
    Ok(folders
        .into_iter()
        .map(|f| (f.topic, f.partition, f.path))
        .collect())
}

/// One listing of a data dir: its live folders, as `partition_folders` gives them, and those its
/// KRaft broker would set aside as strays (not in its metadata log, or an older topic of the
/// name): ([(topic, partition, path)], [(topic, partition, path, why)]).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn live_and_stray_partition_folders(
    py: Python<'_>,
    data_dir: super::FsPath,
) -> PyResult<(
    Vec<(String, i32, PathBuf)>,
    Vec<(String, i32, PathBuf, String)>,
)> {
    let (live, strays) = py.release_gil(|| datadir::live_and_stray_partition_folders(&data_dir))?;
    Ok((
        live.into_iter()
            .map(|f| (f.topic, f.partition, f.path))
            .collect(),
        strays
            .into_iter()
            .map(|(f, why)| (f.topic, f.partition, f.path, why))
            .collect(),
    ))
}

/// Raises ValueError when `name` is not a legal Kafka topic name.
#[pyfunction]
fn validate_topic_name(name: &str) -> PyResult<()> {
    Ok(datadir::validate_topic_name(name)?)
}

/// Creates a topic's partition folders in a data dir.
#[pyfunction]
fn create_topic(
    py: Python<'_>,
    data_dir: super::FsPath,
    topic: &str,
    partitions: i32,
) -> PyResult<()> {
    Ok(py.release_gil(|| datadir::create_topic(&data_dir, topic, partitions))?)
}

/// Kafka's `Utils.murmur2` of `key` (a signed 32-bit hash).
#[pyfunction]
fn murmur2(key: &[u8]) -> i32 {
    crate::producer::murmur2(key)
}

/// The partition Kafka's producer picks for a non-null `key` among `num_partitions`
/// (`BuiltInPartitioner.partitionForKey`: `toPositive(murmur2(key)) % num_partitions`).
#[pyfunction]
fn partition_for_key(key: &[u8], num_partitions: i32) -> PyResult<i32> {
    if num_partitions < 1 {
        return Err(Error::InvalidArgument("num_partitions must be at least 1".into()).into());
    }
    Ok(crate::producer::partition_for_key(key, num_partitions))
}

/// Spark's Kafka sink checks on a write's Arrow schema, before any row: column types, a topic
/// from `topic` or a `topic` column, and (with `data_dir`) that a `topic` the write would create
/// may be created there. Raises InvalidArgumentError naming what is wrong.
#[pyfunction]
#[pyo3(signature = (schema, *, topic = None, data_dir = None))]
fn check_sink_schema(
    py: Python<'_>,
    schema: PySchema,
    topic: Option<String>,
    data_dir: Option<PathBuf>,
) -> PyResult<()> {
    let schema = schema.into_inner();
    Ok(py.release_gil(|| {
        crate::arrow::check_sink_schema(schema, topic.as_deref(), data_dir.as_deref())
    })?)
}

/// Routes Arrow rows with Spark's Kafka sink columns to topic-partitions of `data_dir` and
/// writes them as Kafka batches into staging files under `staging_dir` (nothing in `data_dir`
/// changes). Returns [(topic, partition, staged file)] for `commit_staged`.
#[pyfunction]
#[pyo3(signature = (data, data_dir, staging_dir, prefix, *, topic = None, new_topic_partitions = 1,
    compression = "none", batch_bytes = 524288))]
#[allow(clippy::too_many_arguments)]
fn stage_arrow(
    py: Python<'_>,
    data: AnyRecordBatch,
    data_dir: super::FsPath,
    staging_dir: super::FsPath,
    prefix: &str,
    topic: Option<String>,
    new_topic_partitions: i32,
    compression: &str,
    batch_bytes: i64,
) -> PyResult<Vec<(String, i32, PathBuf)>> {
    let options = SinkBatchOptions {
        compression: Compression::from_name(compression)?,
        batch_bytes: crate::python::errors::non_negative_size("batch_bytes", batch_bytes)?,
    };
    let reader = data.into_reader()?;
    let prefix = prefix.to_string();
    let staged = py.release_gil(move || -> Result<_> {
        let counts = if data_dir.exists() {
            datadir::topic_partition_counts(&data_dir)?
        } else {
            Default::default()
        };
        let mut router = PartitionRouter::new(topic, counts, new_topic_partitions)?;
        let mut stager = BatchStager::new(&staging_dir, &prefix, options, Some(&data_dir))?;
        let mut row_index = 0usize;
        for batch in reader {
            let batch = batch.map_err(arrow_error)?;
            let columns =
                SinkColumns::for_write(&batch, router.has_topic_option())?.numbered_from(row_index);
            let now = now_ms();
            for i in 0..columns.num_rows() {
                let row = columns.row(i)?;
                let (t, p) = router.route(&row, row_index + i)?;
                stager.add(t, p, &row, now)?;
            }
            row_index += columns.num_rows();
        }
        stager.finish()
    })?;
    Ok(staged)
}

/// Appends staged files to their logs in `data_dir` (creating missing topics with
/// `new_topic_partitions` partitions), all or nothing. Returns [(topic, partition, first, last)].
#[pyfunction]
#[pyo3(signature = (data_dir, staged, *, new_topic_partitions = 1))]
fn commit_staged(
    py: Python<'_>,
    data_dir: super::FsPath,
    staged: Vec<(String, i32, PathBuf)>,
    new_topic_partitions: i32,
) -> PyResult<Vec<(String, i32, i64, i64)>> {
    Ok(py.release_gil(move || -> Result<_> {
        let counts = if data_dir.exists() {
            datadir::topic_partition_counts(&data_dir)?
        } else {
            Default::default()
        };
        let mut created = std::collections::BTreeSet::new();
        let result = (|| {
            for (topic, _, _) in &staged {
                if !counts.contains_key(topic) && !created.contains(topic) {
                    created.insert(topic.clone());
                    datadir::create_topic(&data_dir, topic, new_topic_partitions)?;
                }
            }
            datadir::commit_staged(&data_dir, &staged)
        })();
        if result.is_err() {
            // All or nothing: topics this commit created go too (their logs were rolled back).
            for topic in &created {
                datadir::delete_topic_folders(&data_dir, topic);
            }
        }
        result
    })?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowBatchIterator>()?;
    m.add_function(wrap_pyfunction!(kafka_source_schema_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(check_sink_schema, m)?)?;
    m.add_function(wrap_pyfunction!(records_to_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(partition_folders, m)?)?;
    m.add_function(wrap_pyfunction!(live_and_stray_partition_folders, m)?)?;
    m.add_function(wrap_pyfunction!(validate_topic_name, m)?)?;
    m.add_function(wrap_pyfunction!(create_topic, m)?)?;
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(partition_for_key, m)?)?;
    m.add_function(wrap_pyfunction!(stage_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(commit_staged, m)?)?;
    Ok(())
}
