//! `encode_batch`, `decode_batches`, and the `RecordBatch`/`Record` classes.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::error::{Error, Result};
use crate::python::errors::kafka_field;
use crate::python::ReleaseGil;
use crate::record::batch::{Batch, BatchInfo, BatchIter, DEFAULT_MAX_DECOMPRESSED_BYTES};
use crate::record::builder::{BatchBuilder, BatchOptions};
use crate::record::codec::Compression;
use crate::record::control::ControlRecordType;
use crate::record::legacy;
use crate::record::record::{OwnedRecord, Record as RsRecord, TimestampType};

/// A Python record class: the fields of one Kafka record (offset, timestamp and its type, key,
/// value, headers) with their getters, the class's own `#[pyo3(get)]` fields before them, and
/// `from_record`, which builds it from an `OwnedRecord` and those fields.
macro_rules! py_record_class {
    (
        $(#[$meta:meta])* $name:ident {
            $($(#[$field_meta:meta])* $field:ident: $field_ty:ty,)*
        }
        { $($methods:tt)* }
    ) => {
        $(#[$meta])*
        #[pyclass(module = "kafkalog", frozen)]
        pub struct $name {
            $($(#[$field_meta])* #[pyo3(get)] $field: $field_ty,)*
            /// The record's offset.
            #[pyo3(get)]
            offset: i64,
            /// The record's timestamp (ms); the batch's LogAppendTime under that timestamp type.
            #[pyo3(get)]
            timestamp: i64,
            /// Kafka's `TimestampType`: "create_time", "log_append_time" or "no_timestamp" (magic 0).
            #[pyo3(get)]
            timestamp_type: &'static str,
            // Plain `Py` fields of a frozen class: pyo3 makes them struct members, which Python
            // reads without a call into the extension (perf: a getter call per `r.value`).
            /// The record's key, None when it has none.
            #[pyo3(get)]
            key: Py<PyAny>,
            /// The record's value, None for a tombstone.
            #[pyo3(get)]
            value: Py<PyAny>,
            /// Made on first use for a record without headers (most records): an empty list
            /// made and freed per record was a twentieth of iterating `Log.records()`.
            headers: pyo3::sync::GILOnceCell<Py<PyList>>,
        }

        impl $name {
            /// The Python object of `r`, with the class's own fields.
            pub fn from_record(
                py: Python<'_>,
                r: &OwnedRecord,
                $($field: $field_ty,)*
            ) -> PyResult<Self> {
                Self::from_view(py, &r.as_record(), $($field,)*)
            }

            /// The Python object of a record borrowed from its batch or an arena.
            pub fn from_view(
                py: Python<'_>,
                r: &$crate::record::record::Record<'_>,
                $($field: $field_ty,)*
            ) -> PyResult<Self> {
                let headers = pyo3::sync::GILOnceCell::new();
                if !r.headers.is_empty() {
                    let _ = headers.set(py, $crate::python::records::headers_list(py, &r.headers)?);
                }
                Ok($name {
                    $($field,)*
                    offset: r.offset,
                    timestamp: r.timestamp,
                    timestamp_type: timestamp_type_name(r.timestamp_type),
                    key: $crate::python::records::optional_bytes(py, r.key)?,
                    value: $crate::python::records::optional_bytes(py, r.value)?,
                    headers,
                })
            }
        }

        impl $name {
            /// `offset=.., timestamp=.., key=.., value=..` and the headers when there are any,
            /// as Python writes the values ([`short_repr`]), for the classes' `__repr__`.
            fn fields_repr(&self, py: Python<'_>) -> PyResult<String> {
                let mut out = format!(
                    "offset={}, timestamp={}, key={}, value={}",
                    self.offset,
                    self.timestamp,
                    $crate::python::records::short_repr(self.key.bind(py), "bytes")?,
                    $crate::python::records::short_repr(self.value.bind(py), "bytes")?,
                );
                if let Some(headers) = self.headers.get(py).filter(|h| !h.bind(py).is_empty()) {
                    let headers = $crate::python::records::short_repr(headers.bind(py), "headers")?;
                    out.push_str(&format!(", headers={headers}"));
                }
                Ok(out)
            }
        }

        #[pymethods]
        impl $name {
            /// Records are values, as aiokafka's and kafka-python's are: equal when every field
            /// is (so unhashable, their headers being a list); not ordered.
            fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyObject> {
                let Ok(other) = other.downcast::<Self>() else {
                    return Ok(py.NotImplemented());
                };
                let other = other.get();
                let same = self.offset == other.offset
                    && self.timestamp == other.timestamp
                    && self.timestamp_type == other.timestamp_type
                    $(&& $crate::python::records::py_eq(py, &self.$field, &other.$field)?)*
                    && self.key.bind(py).eq(&other.key)?
                    && self.value.bind(py).eq(&other.value)?
                    && self.headers(py).bind(py).eq(other.headers(py))?;
                Ok(same.into_pyobject(py)?.to_owned().into_any().unbind())
            }

            /// Pickled as its fields, rebuilt by `_from_state`.
            fn __reduce__<'py>(
                slf: &Bound<'py, Self>,
            ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, pyo3::types::PyTuple>,))> {
                let (py, me) = (slf.py(), slf.get());
                let state = pyo3::types::PyTuple::new(
                    py,
                    [
                        $(pyo3::IntoPyObjectExt::into_bound_py_any(&me.$field, py)?,)*
                        me.offset.into_pyobject(py)?.into_any(),
                        me.timestamp.into_pyobject(py)?.into_any(),
                        me.timestamp_type.into_pyobject(py)?.into_any(),
                        me.key.bind(py).clone(),
                        me.value.bind(py).clone(),
                        me.headers(py).into_bound(py).into_any(),
                    ],
                )?;
                Ok((slf.get_type().getattr("_from_state")?, (state,)))
            }

            /// A record from its pickled fields ([`Self::__reduce__`]).
            #[classmethod]
            fn _from_state(
                cls: &Bound<'_, pyo3::types::PyType>,
                state: ($($field_ty,)* i64, i64, String, Py<PyAny>, Py<PyAny>, Py<PyList>),
            ) -> PyResult<Self> {
                let ($($field,)* offset, timestamp, timestamp_type, key, value, headers) = state;
                let timestamp_type = $crate::python::records::timestamp_type_named(&timestamp_type)?;
                for (what, b) in [("key", &key), ("value", &value)] {
                    let b = b.bind(cls.py());
                    if !b.is_none() && !b.is_instance_of::<PyBytes>() {
                        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                            "a record's {what} is bytes or None, not {}",
                            b.get_type()
                        )));
                    }
                }
                let cell = pyo3::sync::GILOnceCell::new();
                let _ = cell.set(cls.py(), headers);
                Ok($name {
                    $($field,)*
                    offset,
                    timestamp,
                    timestamp_type,
                    key,
                    value,
                    headers: cell,
                })
            }

            /// The record's headers, a list of (key, value) with value bytes or None.
            #[getter]
            fn headers(&self, py: Python<'_>) -> Py<PyList> {
                self.headers.get_or_init(py, || PyList::empty(py).unbind()).clone_ref(py)
            }
            $($methods)*
        }
    };
}
pub(crate) use py_record_class;

/// Python's `repr` of `obj`, or `<N what>` (its length) when that is longer than 80 characters:
/// a record's repr stays one line whatever its value (and a large value is never written out).
pub fn short_repr(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    const WIDTH: usize = 80;
    let len = obj.len().ok();
    if len.is_none_or(|n| n <= WIDTH) {
        let repr = obj.repr()?.to_string();
        if repr.len() <= WIDTH {
            return Ok(repr);
        }
    }
    Ok(format!("<{} {what}>", len.unwrap_or_default()))
}

/// A record's headers as Python's list of (key, value) tuples.
pub fn headers_list(
    py: Python<'_>,
    headers: &[crate::record::record::Header<'_>],
) -> PyResult<Py<PyList>> {
    let list = PyList::empty(py);
    for h in headers {
        let v = h.value.map(|v| py_bytes(py, v)).transpose()?;
        list.append(PyTuple::new(
            py,
            [
                h.key.as_ref().into_pyobject(py)?.into_any(),
                v.into_pyobject(py)?.into_any(),
            ],
        )?)?;
    }
    Ok(list.unbind())
}

py_record_class! {
    /// One record as Python sees it.
    Record {}
    {
        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            Ok(format!("Record({})", self.fields_repr(py)?))
        }
    }
}

/// Bytes as Python `bytes`, `None` as Python's None.
pub fn optional_bytes(py: Python<'_>, b: Option<&[u8]>) -> PyResult<Py<PyAny>> {
    Ok(match b {
        Some(b) => py_bytes(py, b)?.into_any().unbind(),
        None => py.None(),
    })
}

/// Bytes as Python `bytes`; memory running out is Python's `MemoryError` (pyo3's `PyBytes::new`
/// panics then, which `except Exception` does not catch).
pub fn py_bytes<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    // SAFETY: CPython copies `b.len()` bytes from `b` into a new object it returns owned, or
    // returns NULL with an exception set; a slice's length always fits Py_ssize_t.
    unsafe {
        let ptr = pyo3::ffi::PyBytes_FromStringAndSize(b.as_ptr().cast(), b.len() as _);
        Ok(Bound::from_owned_ptr_or_err(py, ptr)?.downcast_into_unchecked())
    }
}

/// Python's `a == b`.
pub fn py_eq<'py>(
    py: Python<'py>,
    a: impl pyo3::IntoPyObject<'py>,
    b: impl pyo3::IntoPyObject<'py>,
) -> PyResult<bool> {
    use pyo3::IntoPyObjectExt;
    a.into_bound_py_any(py)?.eq(b.into_bound_py_any(py)?)
}

/// The `&'static` name of a timestamp type from its name (a pickled record's).
pub fn timestamp_type_named(name: &str) -> PyResult<&'static str> {
    [
        TimestampType::NoTimestamp,
        TimestampType::CreateTime,
        TimestampType::LogAppendTime,
    ]
    .into_iter()
    .map(timestamp_type_name)
    .find(|n| *n == name)
    .ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("unknown timestamp type {name:?}"))
    })
}

pub fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::NoTimestamp => "no_timestamp",
        TimestampType::CreateTime => "create_time",
        TimestampType::LogAppendTime => "log_append_time",
    }
}

pub fn record_to_py(py: Python<'_>, r: &OwnedRecord) -> PyResult<Record> {
    Record::from_record(py, r)
}

/// A borrowed record (from a `RecordArena`, a batch) as a Python `Record`.
pub fn record_view_to_py(py: Python<'_>, r: &RsRecord<'_>) -> PyResult<Record> {
    Record::from_view(py, r)
}

/// A batch decoded in Rust (GIL released) before it becomes Python objects.
pub struct DecodedBatch {
    pub info: BatchInfo,
    pub position: u64,
    pub records: Vec<OwnedRecord>,
}

impl DecodedBatch {
    /// From a batch and the records already decoded from it.
    pub fn new(batch: &Batch<'_>, position: u64, records: &[RsRecord<'_>]) -> Result<Self> {
        Ok(DecodedBatch {
            info: batch.info(records)?,
            position,
            records: records.iter().map(RsRecord::to_owned_record).collect(),
        })
    }
}

/// Decodes one batch fully (CRC checked, records inflated) into owned data.
pub fn decode_batch(
    batch: &Batch<'_>,
    position: u64,
    max_decompressed: usize,
) -> Result<DecodedBatch> {
    batch.ensure_valid()?;
    let mut scratch = Vec::new();
    let records = batch.records(&mut scratch, max_decompressed)?;
    DecodedBatch::new(batch, position, &records)
}

/// A record batch (any magic) with its header fields by Kafka's names, in snake case.
#[pyclass(module = "kafkalog", frozen, get_all)]
pub struct RecordBatch {
    /// Kafka's `baseOffset`: the offset of the batch's first record.
    base_offset: i64,
    /// Kafka's `lastOffset`: the offset of the batch's last record.
    last_offset: i64,
    /// Kafka's `sizeInBytes`: the batch's size with its log overhead.
    size_in_bytes: usize,
    /// Kafka's `partitionLeaderEpoch` (-1 before magic 2).
    partition_leader_epoch: i32,
    /// The record format: 0, 1 or 2.
    magic: u8,
    /// The stored CRC (CRC32C of magic 2, CRC32 of magic 0 and 1).
    crc: u32,
    /// Kafka's `isValid`: the CRC matches (always True: invalid batches raise).
    is_valid: bool,
    /// The batch's attributes (codec, timestamp type, transactional, control bits).
    attributes: i16,
    /// Kafka's `lastOffsetDelta`: last offset minus base offset.
    last_offset_delta: i32,
    /// Kafka's `baseTimestamp`: the first record's timestamp (ms).
    base_timestamp: i64,
    /// Kafka's `maxTimestamp`: the largest record timestamp (ms), or the LogAppendTime.
    max_timestamp: i64,
    /// Kafka's `producerId` (-1 without an idempotent producer).
    producer_id: i64,
    /// Kafka's `producerEpoch` (-1 without an idempotent producer).
    producer_epoch: i16,
    /// Kafka's `baseSequence` (-1 without an idempotent producer).
    base_sequence: i32,
    /// Kafka's `lastSequence` (-1 without an idempotent producer).
    last_sequence: i32,
    /// Kafka's `countOrNull`: the number of records in the batch (for a legacy v0/v1 entry,
    /// where Kafka's is null, the records its deep iteration yields).
    records_count: i32,
    /// Kafka's `CompressionType`: "none", "gzip", "snappy", "lz4" or "zstd".
    compression: &'static str,
    /// Kafka's `TimestampType`: "create_time", "log_append_time" or "no_timestamp".
    timestamp_type: &'static str,
    /// Kafka's `isTransactional`: part of a transaction.
    is_transactional: bool,
    /// Kafka's `isControlBatch`: a transaction marker or KRaft control batch.
    is_control: bool,
    /// Kafka's `deleteHorizonMs`, set by the log cleaner on tombstones; None when absent.
    delete_horizon_ms: Option<i64>,
    /// The control record's type ("COMMIT", "ABORT", ...) of a control batch, else None.
    control_type: Option<&'static str>,
    /// A transaction marker's coordinator epoch, else None.
    coordinator_epoch: Option<i32>,
    /// Byte position of the batch in the buffer or file it came from.
    position: u64,
    /// The batch's records (control records included), as `Record`s.
    records: Py<PyList>,
}

#[pymethods]
impl RecordBatch {
    /// Kafka's `nextOffset`: the offset after the batch's last.
    #[getter]
    fn next_offset(&self) -> i64 {
        self.last_offset + 1
    }
    fn __len__(&self, py: Python<'_>) -> usize {
        self.records.bind(py).len()
    }

    /// Batches are values, as records are: equal when every field and record is (so
    /// unhashable, their records being a list); not ordered.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let Ok(other) = other.downcast::<Self>() else {
            return Ok(py.NotImplemented());
        };
        let same = self.state(py)?.eq(other.get().state(py)?)?;
        Ok(same.into_pyobject(py)?.to_owned().into_any().unbind())
    }

    /// Pickled as its fields, rebuilt by `_from_state`.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        let state = slf.get().state(slf.py())?;
        Ok((slf.get_type().getattr("_from_state")?, (state,)))
    }

    /// A batch from its pickled fields ([`Self::__reduce__`]).
    #[classmethod]
    fn _from_state(
        _cls: &Bound<'_, pyo3::types::PyType>,
        state: &Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        fn field<'py, T: FromPyObject<'py>>(state: &Bound<'py, PyDict>, name: &str) -> PyResult<T> {
            state
                .get_item(name)?
                .ok_or_else(|| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "a pickled RecordBatch lacks {name}"
                    ))
                })?
                .extract()
        }
        let compression: String = field(state, "compression")?;
        let timestamp_type: String = field(state, "timestamp_type")?;
        let control_type: Option<String> = field(state, "control_type")?;
        let control_type = match control_type {
            None => None,
            Some(name) => Some(
                // Ids 0 to 6 are Kafka's types; -1 stands for every unknown one.
                (-1..=6)
                    .map(|id| ControlRecordType::from_id(id).name())
                    .find(|n| *n == name)
                    .ok_or_else(|| {
                        pyo3::exceptions::PyValueError::new_err(format!(
                            "unknown control record type {name:?}"
                        ))
                    })?,
            ),
        };
        Ok(RecordBatch {
            base_offset: field(state, "base_offset")?,
            last_offset: field(state, "last_offset")?,
            size_in_bytes: field(state, "size_in_bytes")?,
            partition_leader_epoch: field(state, "partition_leader_epoch")?,
            magic: field(state, "magic")?,
            crc: field(state, "crc")?,
            is_valid: field(state, "is_valid")?,
            attributes: field(state, "attributes")?,
            last_offset_delta: field(state, "last_offset_delta")?,
            base_timestamp: field(state, "base_timestamp")?,
            max_timestamp: field(state, "max_timestamp")?,
            producer_id: field(state, "producer_id")?,
            producer_epoch: field(state, "producer_epoch")?,
            base_sequence: field(state, "base_sequence")?,
            last_sequence: field(state, "last_sequence")?,
            records_count: field(state, "records_count")?,
            compression: Compression::from_name(&compression)?.name(),
            timestamp_type: timestamp_type_named(&timestamp_type)?,
            is_transactional: field(state, "is_transactional")?,
            is_control: field(state, "is_control")?,
            delete_horizon_ms: field(state, "delete_horizon_ms")?,
            control_type,
            coordinator_epoch: field(state, "coordinator_epoch")?,
            position: field(state, "position")?,
            records: field(state, "records")?,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "RecordBatch(base_offset={}, last_offset={}, magic={}, compression={}, records_count={}, is_control={}, is_transactional={})",
            self.base_offset, self.last_offset, self.magic, self.compression, self.records_count, self.is_control, self.is_transactional
        )
    }
}

impl RecordBatch {
    /// Every field, records included, by name: what pickles it and what equality compares.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(crate::python::results::dict_of!(py, self;
            base_offset, last_offset, size_in_bytes, partition_leader_epoch, magic, crc,
            is_valid, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
            producer_epoch, base_sequence, last_sequence, records_count, compression,
            timestamp_type, is_transactional, is_control, delete_horizon_ms, control_type,
            coordinator_epoch, position, records))
    }
}

pub fn batch_to_py(py: Python<'_>, b: DecodedBatch) -> PyResult<RecordBatch> {
    let records = PyList::empty(py);
    for r in &b.records {
        records.append(Py::new(py, record_to_py(py, r)?)?)?;
    }
    let i = b.info;
    Ok(RecordBatch {
        base_offset: i.base_offset,
        last_offset: i.last_offset,
        size_in_bytes: i.size_in_bytes,
        partition_leader_epoch: i.partition_leader_epoch,
        magic: i.magic,
        crc: i.crc,
        // Only batches that passed their CRC check are decoded.
        is_valid: true,
        attributes: i.attributes,
        last_offset_delta: i.last_offset_delta,
        base_timestamp: i.base_timestamp,
        max_timestamp: i.max_timestamp,
        producer_id: i.producer_id,
        producer_epoch: i.producer_epoch,
        base_sequence: i.base_sequence,
        last_sequence: i.last_sequence,
        records_count: i.records_count,
        compression: i.compression.name(),
        timestamp_type: timestamp_type_name(i.timestamp_type),
        is_transactional: i.is_transactional,
        is_control: i.is_control,
        delete_horizon_ms: i.delete_horizon_ms,
        control_type: i.control_type.map(ControlRecordType::name),
        coordinator_epoch: i.coordinator_epoch,
        position: b.position,
        records: records.unbind(),
    })
}

pub fn batches_to_py(py: Python<'_>, batches: Vec<DecodedBatch>) -> PyResult<Py<PyList>> {
    let out = PyList::empty(py);
    for b in batches {
        out.append(Py::new(py, batch_to_py(py, b)?)?)?;
    }
    Ok(out.unbind())
}

/// Decodes every batch in `data` (magic 0, 1 or 2, any codec), checking CRCs.
#[pyfunction]
#[pyo3(signature = (data, *, max_decompressed_bytes = DEFAULT_MAX_DECOMPRESSED_BYTES))]
fn decode_batches(
    py: Python<'_>,
    data: &[u8],
    max_decompressed_bytes: usize,
) -> PyResult<Py<PyList>> {
    let decoded = py.release_gil(|| -> Result<Vec<DecodedBatch>> {
        let mut iter = BatchIter::new(data);
        let mut out = Vec::new();
        loop {
            let position = iter.position() as u64;
            match iter.next() {
                None => break,
                Some(batch) => out.push(
                    decode_batch(&batch?, position, max_decompressed_bytes)
                        .map_err(|e| e.at(None, position))?,
                ),
            }
        }
        Ok(out)
    })?;
    batches_to_py(py, decoded)
}

/// A record to encode, extracted from a Python dict.
pub struct InputRecord {
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

fn bytes_like(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<u8>>> {
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return s
            .to_cow()
            .map(|c| Some(c.into_owned().into_bytes()))
            .map_err(|_| {
                Error::InvalidArgument(format!(
                    "{what} {} is not valid UTF-8 (a lone surrogate): a str is written as UTF-8",
                    obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                ))
                .into()
            });
    }
    obj.extract::<Vec<u8>>().map(Some).map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be bytes, str or None, not {}",
            obj.get_type()
        ))
    })
}

/// The fields a record dict may have.
const RECORD_FIELDS: [&str; 4] = ["value", "key", "headers", "timestamp"];

/// The error for a record dict with a field other than [`RECORD_FIELDS`], naming it.
#[cold]
fn unknown_field(dict: &Bound<'_, PyDict>) -> PyErr {
    let field = dict.keys().into_iter().find(|field| {
        !field
            .downcast::<pyo3::types::PyString>()
            .ok()
            .and_then(|f| f.to_cow().ok())
            .is_some_and(|f| RECORD_FIELDS.contains(&f.as_ref()))
    });
    let name = field
        .and_then(|f| f.repr().ok())
        .map_or_else(|| "?".to_string(), |r| r.to_string());
    Error::InvalidArgument(format!(
        "unknown record field {name}: a record is a dict with 'value' and optional 'key', \
         'headers', 'timestamp'"
    ))
    .into()
}

/// The records of `records` (an iterable of dicts); `if_empty` is the ValueError's message when
/// there are none.
pub fn extract_records(records: &Bound<'_, PyAny>, if_empty: &str) -> PyResult<Vec<InputRecord>> {
    let mut out = Vec::new();
    for item in records.try_iter()? {
        let item = item?;
        let dict = item.downcast::<PyDict>().map_err(|_| pyo3::exceptions::PyTypeError::new_err("each record must be a dict with 'value' and optional 'key', 'headers', 'timestamp'"))?;
        let get = |k: &str| dict.get_item(k);
        let value = match get("value")? {
            Some(v) => bytes_like(&v, "value")?,
            None => {
                return Err(Error::InvalidArgument(
                    "a record needs a 'value' (None for a tombstone)".into(),
                )
                .into())
            }
        };
        let key_item = get("key")?;
        let key_given = key_item.is_some();
        let key = match key_item {
            Some(k) => bytes_like(&k, "key")?,
            None => None,
        };
        let timestamp_item = get("timestamp")?;
        let timestamp_given = timestamp_item.is_some();
        let timestamp = match timestamp_item {
            Some(t) if !t.is_none() => Some(timestamp_ms(&t)?),
            _ => None,
        };
        let headers_item = get("headers")?;
        // A misspelt field ("timestmap") or one a log has no use for ("partition", "topic")
        // would otherwise be dropped without a word: more keys than the fields found means one.
        let found = [
            true, // value
            key_given,
            timestamp_given,
            headers_item.is_some(),
        ];
        if dict.len() > found.iter().filter(|f| **f).count() {
            return Err(unknown_field(dict));
        }
        let mut headers = Vec::new();
        if let Some(h) = headers_item {
            if !h.is_none() {
                let pairs: Bound<'_, PyAny> = if let Ok(d) = h.downcast::<PyDict>() {
                    d.items().into_any()
                } else {
                    h
                };
                for pair in pairs.try_iter()? {
                    let pair = pair?;
                    let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                        pair.extract().map_err(|_| {
                            PyErr::from(Error::InvalidArgument(format!(
                                "a header is a (key, value) pair, not {}",
                                pair.repr()
                                    .map_or_else(|_| "that".into(), |r| r.to_string())
                            )))
                        })?;
                    let k = header_key(&k)?;
                    headers.push((k, bytes_like(&v, "header value")?));
                }
            }
        }
        out.push(InputRecord {
            timestamp,
            key,
            value,
            headers,
        });
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument(if_empty.to_string()).into());
    }
    Ok(out)
}

/// A record's timestamp: an int of milliseconds; one past 64 bits is `InvalidArgumentError`, as
/// other bad timestamps are (a wrong type stays a `TypeError`).
fn timestamp_ms(t: &Bound<'_, PyAny>) -> PyResult<i64> {
    t.extract::<i64>().map_err(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(t.py()) {
            Error::InvalidArgument(format!(
                "timestamp {t} is out of range: milliseconds since the epoch, a 64-bit int"
            ))
            .into()
        } else {
            e
        }
    })
}

/// A header's key: a `str` Kafka stores as UTF-8.
fn header_key(k: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = k.downcast::<PyString>() {
        return s.to_cow().map(|c| c.into_owned()).map_err(|_| {
            Error::InvalidArgument(format!(
                "header key {} is not valid UTF-8 (a lone surrogate): Kafka stores header keys \
                 as UTF-8",
                k.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
            .into()
        });
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "a header key is a str (Kafka's header keys are strings), not {}",
        k.get_type()
            .name()
            .map_or_else(|_| "that".into(), |n| n.to_string())
    )))
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn parse_timestamp_type(name: &str) -> Result<TimestampType> {
    match name {
        "create_time" | "CreateTime" => Ok(TimestampType::CreateTime),
        "log_append_time" | "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        other => Err(Error::InvalidArgument(format!(
            "timestamp_type '{other}' (create_time or log_append_time)"
        ))),
    }
}

pub fn build_v2(records: &[InputRecord], options: BatchOptions) -> Result<Vec<u8>> {
    let now = now_ms();
    let mut builder = BatchBuilder::new(options);
    for r in records {
        let headers: Vec<(&str, Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        builder.append(
            r.timestamp.unwrap_or(now),
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        )?;
    }
    builder.build()
}

/// Encodes records as one batch: magic 2 (default) as a producer writes it, or a legacy v0/v1
/// message set as old brokers stored it.
#[pyfunction]
#[pyo3(signature = (records, *, base_offset = 0, compression = "none", producer_id = -1, producer_epoch = -1,
    base_sequence = -1, transactional = false, timestamp_type = "create_time", partition_leader_epoch = -1,
    log_append_time = None, magic = 2),
    text_signature = "(records, *, base_offset=0, compression=\"none\", producer_id=-1, producer_epoch=-1, \
        base_sequence=-1, transactional=False, timestamp_type=\"create_time\", partition_leader_epoch=-1, \
        log_append_time=None, magic=2)")]
#[allow(clippy::too_many_arguments)]
fn encode_batch(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    base_offset: i64,
    compression: &str,
    producer_id: i64,
    producer_epoch: i64,
    base_sequence: i64,
    transactional: bool,
    timestamp_type: &str,
    partition_leader_epoch: i64,
    log_append_time: Option<i64>,
    magic: u8,
) -> PyResult<Py<PyBytes>> {
    let producer_epoch: i16 = kafka_field("producer_epoch", producer_epoch)?;
    let base_sequence: i32 = kafka_field("base_sequence", base_sequence)?;
    let partition_leader_epoch: i32 =
        kafka_field("partition_leader_epoch", partition_leader_epoch)?;
    let input = extract_records(records, "cannot encode an empty batch")?;
    let compression = Compression::from_name(compression)?;
    let timestamp_type = parse_timestamp_type(timestamp_type)?;
    let bytes = py.release_gil(|| -> Result<Vec<u8>> {
        match magic {
            2 => {
                let log_append_time = match timestamp_type {
                    TimestampType::LogAppendTime => Some(log_append_time.unwrap_or_else(now_ms)),
                    _ => None,
                };
                build_v2(
                    &input,
                    BatchOptions {
                        base_offset,
                        compression,
                        timestamp_type,
                        producer_id,
                        producer_epoch,
                        base_sequence,
                        is_transactional: transactional,
                        partition_leader_epoch,
                        log_append_time,
                        ..Default::default()
                    },
                )
            }
            0 | 1 => {
                // Kafka's MemoryRecordsBuilder refuses them rather than drop them.
                if input.iter().any(|r| !r.headers.is_empty()) {
                    return Err(Error::InvalidArgument(format!(
                        "Magic v{magic} does not support record headers"
                    )));
                }
                if transactional {
                    return Err(Error::InvalidArgument(format!(
                        "Transactional records are not supported for magic {magic}"
                    )));
                }
                if producer_id != -1 {
                    return Err(Error::InvalidArgument(format!(
                        "Idempotent messages are not supported for magic {magic}"
                    )));
                }
                let now = now_ms();
                let recs: Vec<legacy::RecordFields<'_>> = input
                    .iter()
                    .map(|r| {
                        (
                            r.timestamp.unwrap_or(now),
                            r.key.as_deref(),
                            r.value.as_deref(),
                        )
                    })
                    .collect();
                let log_append_time = match timestamp_type {
                    TimestampType::LogAppendTime => Some(log_append_time.unwrap_or(now)),
                    _ => None,
                };
                legacy::build_message_set_at(
                    magic,
                    base_offset,
                    &recs,
                    compression,
                    timestamp_type,
                    log_append_time,
                )
            }
            other => Err(Error::InvalidArgument(format!("magic {other} (0, 1 or 2)"))),
        }
    })?;
    Ok(py_bytes(py, &bytes)?.unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Record>()?;
    m.add_class::<RecordBatch>()?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batch, m)?)?;
    Ok(())
}
