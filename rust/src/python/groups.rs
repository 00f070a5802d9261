//! Topics, producers, consumer groups and consumers for Python: `_Producer`, `_Consumer`,
//! `ConsumerRecord`, `RecordMetadata` and the group/topic functions. Types and errors only; the
//! rules live in `crate::producer`, `crate::group` and `crate::datadir`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use pyo3_arrow::PyRecordBatch;

use crate::datadir;
use crate::error::{Error, Result};
use crate::group::consumer::{ConsumerOptions, GroupConsumer, OffsetReset};
use crate::group::{
    self, membership, AssignmentStrategy, GroupStore, MemberSubscription, TopicPartition,
};
use crate::log::FetchIsolation;
use crate::producer::accumulator::{
    Acks, PartitionerKind, ProducerOptions, SendHandle, TopicProducer,
};
use crate::python::errors::{non_negative, non_negative_size};
use crate::python::records::{py_record_class, timestamp_type_name};
use crate::python::{park_on_thread_exit, ReleaseGil};
use crate::record::codec::Compression;
use crate::record::record::{OwnedRecord, RecordArena};

fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Option<Cow<'a, [u8]>>> {
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Some(Cow::Borrowed(b.as_bytes())));
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(Some(Cow::Owned(s.to_cow()?.as_bytes().to_vec())));
    }
    obj.extract::<Vec<u8>>()
        .map(|v| Some(Cow::Owned(v)))
        .map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "{what} must be bytes, str or None, not {}",
                obj.get_type()
            ))
        })
}

/// Runs `f` on what `lock` guards; a panic in another thread does not lock Python out of it.
fn with_locked<T, R>(lock: &Mutex<T>, f: impl FnOnce(&mut T) -> Result<R>) -> PyResult<R> {
    let mut guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    Ok(f(&mut guard)?)
}

fn closed_error() -> PyErr {
    Error::IllegalState("the producer is closed".into()).into()
}

/// The Rust side of `kafkalog.Producer`.
#[pyclass(module = "kafkalog", frozen, name = "_Producer")]
pub struct PyProducer {
    inner: Mutex<TopicProducer>,
}

impl PyProducer {
    fn with<T>(&self, f: impl FnOnce(&mut TopicProducer) -> Result<T>) -> PyResult<T> {
        with_locked(&self.inner, f)
    }
}

#[pymethods]
impl PyProducer {
    #[new]
    #[pyo3(signature = (data_dir, topic, *, partitioner = "default", compression = "none", linger_ms = 5,
        batch_size = 16384, acks = "all", idempotent = false, transactional_id = None, config = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        data_dir: super::FsPath,
        topic: &str,
        partitioner: &str,
        compression: &str,
        linger_ms: i64,
        batch_size: i64,
        acks: &str,
        idempotent: bool,
        transactional_id: Option<String>,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        datadir::refuse_a_producer_of_an_internal_topic(topic)?;
        // The topic's configs, with the caller's over them (a broker's server.properties
        // defaults, which the data dir does not hold), as a writable `Log` takes `config`.
        let given = config.is_some();
        let base = py.release_gil(|| datadir::topic_writer_config(&data_dir, topic, given))?;
        let config = super::segment::config_onto(base, config)?;
        let options = ProducerOptions {
            compression: Compression::from_name(compression)?,
            batch_size: non_negative_size("batch_size", batch_size)?,
            linger: Duration::from_millis(non_negative("linger_ms", linger_ms)?),
            acks: Acks::from_name(acks)?,
            idempotent: idempotent || transactional_id.is_some(),
            transactional_id,
            partitioner: PartitionerKind::from_name(partitioner)?,
            config,
        };
        let topic = topic.to_string();
        let producer = py.release_gil(move || TopicProducer::new(&data_dir, &topic, options))?;
        Ok(PyProducer {
            inner: Mutex::new(producer),
        })
    }

    /// The topic's number of partitions.
    #[getter]
    fn num_partitions(&self) -> PyResult<i32> {
        self.with(|p| Ok(p.num_partitions()))
    }
    /// The producer id (-1 unless idempotent or transactional).
    #[getter]
    fn producer_id(&self) -> PyResult<i64> {
        self.with(|p| Ok(p.producer_id()))
    }
    /// The producer epoch (-1 unless idempotent or transactional).
    #[getter]
    fn producer_epoch(&self) -> PyResult<i16> {
        self.with(|p| Ok(p.producer_epoch()))
    }

    /// The partition the configured partitioner picks for `key` (advances round robin and
    /// sticky state as a send would).
    fn choose_partition(&self, key: &Bound<'_, PyAny>) -> PyResult<i32> {
        let key = bytes_arg(key, "key")?;
        self.with(|p| Ok(p.choose_partition(key.as_deref())))
    }

    /// Kafka's `send`: adds the record to its partition's open batch; returns its
    /// `RecordMetadata`.
    #[pyo3(signature = (value, key = None, headers = None, partition = None, timestamp = None))]
    fn send(
        slf: &Bound<'_, Self>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<RecordMetadata> {
        let value = bytes_arg(value, "value")?;
        let key = match key {
            Some(k) => bytes_arg(k, "key")?,
            None => None,
        };
        let mut owned_headers: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        if let Some(h) = headers.filter(|h| !h.is_none()) {
            let pairs: Bound<'_, PyAny> = match h.downcast::<PyDict>() {
                Ok(d) => d.items().into_any(),
                Err(_) => h.clone(),
            };
            for pair in pairs.try_iter()? {
                let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                    pair?.extract().map_err(|_| {
                        pyo3::exceptions::PyTypeError::new_err(
                            "headers are (key, value) pairs or a dict of them",
                        )
                    })?;
                let k: String = k.extract().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "a header key is a str (Kafka's header keys are strings), not {}",
                        k.get_type()
                    ))
                })?;
                owned_headers.push((k, bytes_arg(&v, "header value")?.map(Cow::into_owned)));
            }
        }
        let hs: Vec<(&str, Option<&[u8]>)> = owned_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        let this = slf.get();
        let handle = slf.py().release_gil(|| {
            this.with(|p| p.send(key.as_deref(), value.as_deref(), &hs, partition, timestamp))
        })?;
        Ok(RecordMetadata {
            handle,
            producer: slf.clone().unbind(),
        })
    }

    /// Appends open batches that waited `linger_ms` (a long-lived program calls this, or
    /// `send`, which does it too).
    fn poll(&self, py: Python<'_>) -> PyResult<()> {
        py.release_gil(|| self.with(|p| p.append_lingered()))
    }
    /// Kafka's `flush`: appends every open batch to its log.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.release_gil(|| self.with(|p| p.flush()))
    }
    /// Appends `partition`'s open batch to its log.
    fn flush_partition(&self, py: Python<'_>, partition: i32) -> PyResult<()> {
        py.release_gil(|| self.with(|p| p.append_open(partition)))
    }
    /// Kafka's `beginTransaction` (transactional producers).
    fn begin_transaction(&self) -> PyResult<()> {
        self.with(|p| p.begin_transaction())
    }
    /// Kafka's `commitTransaction`: flushes, then writes COMMIT markers.
    fn commit_transaction(&self, py: Python<'_>) -> PyResult<()> {
        py.release_gil(|| self.with(|p| p.commit_transaction()))
    }
    /// Kafka's `abortTransaction`: drops open batches, then writes ABORT markers.
    fn abort_transaction(&self, py: Python<'_>) -> PyResult<()> {
        py.release_gil(|| self.with(|p| p.abort_transaction()))
    }
    /// Whether a transaction is open.
    #[getter]
    fn in_transaction(&self) -> PyResult<bool> {
        self.with(|p| Ok(p.in_transaction()))
    }
    /// {partition: records waiting in its open batch}
    fn pending(&self) -> PyResult<BTreeMap<i32, i32>> {
        self.with(|p| Ok(p.pending_partitions()))
    }
    /// Kafka's `close`: flushes and releases the topic's logs.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.release_gil(|| self.with(|p| p.close()))
    }
}

/// What `Producer.send` returns (Kafka's `Future<RecordMetadata>`): `partition` at once; `get()`
/// returns (partition, offset), appending the record's batch first if it is still open.
#[pyclass(module = "kafkalog", frozen)]
pub struct RecordMetadata {
    handle: SendHandle,
    producer: Py<PyProducer>,
}

#[pymethods]
impl RecordMetadata {
    /// The partition the record went to.
    #[getter]
    fn partition(&self) -> i32 {
        self.handle.partition
    }
    /// Whether the record's batch is in the log (or failed).
    fn done(&self) -> bool {
        self.handle.outcome.get().is_some()
    }
    /// The record's offset, None while its batch is open; once the record failed (a batch
    /// refused, a transaction aborted), raises its error as `get()` does.
    #[getter]
    fn offset(&self) -> PyResult<Option<i64>> {
        match self.handle.offset() {
            None => Ok(None),
            Some(Ok(o)) => Ok(Some(o)),
            Some(Err(e)) => Err(e.into()),
        }
    }
    /// (partition, offset) once written: appends the record's open batch first.
    fn get(&self, py: Python<'_>) -> PyResult<(i32, i64)> {
        if self.handle.outcome.get().is_none() {
            let producer = self.producer.get();
            let partition = self.handle.partition;
            py.release_gil(|| producer.with(|p| p.append_open(partition)))?;
        }
        match self.handle.offset() {
            Some(Ok(o)) => Ok((self.handle.partition, o)),
            Some(Err(e)) => Err(e.into()),
            None => Err(closed_error()),
        }
    }
    fn __repr__(&self) -> String {
        match self.handle.offset() {
            Some(Ok(o)) => format!(
                "RecordMetadata(partition={}, offset={o})",
                self.handle.partition
            ),
            Some(Err(e)) => format!(
                "RecordMetadata(partition={}, error={:?})",
                self.handle.partition,
                e.to_string()
            ),
            None => format!(
                "RecordMetadata(partition={}, pending)",
                self.handle.partition
            ),
        }
    }
}

py_record_class! {
    /// A record as a consumer returns it (Kafka's `ConsumerRecord`).
    ConsumerRecord {
        /// The record's topic.
        topic: Py<PyString>,
        /// The record's partition.
        partition: i32,
    }
    {
        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            Ok(format!(
                "ConsumerRecord(topic={}, partition={}, {})",
                self.topic.bind(py).repr()?,
                self.partition,
                self.fields_repr(py)?
            ))
        }
    }
}

/// The Rust side of `kafkalog.Consumer`.
#[pyclass(module = "kafkalog", frozen, name = "_Consumer")]
pub struct PyConsumer {
    inner: Mutex<GroupConsumer>,
}

impl PyConsumer {
    fn with<T>(&self, f: impl FnOnce(&mut GroupConsumer) -> Result<T>) -> PyResult<T> {
        with_locked(&self.inner, f)
    }
}

#[pymethods]
impl PyConsumer {
    #[new]
    #[pyo3(signature = (data_dir, group_id, topics, *, isolation = "read_uncommitted", strategy = "range",
        auto_offset_reset = "earliest", session_timeout_ms = 45000, sync_interval_ms = 100))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        data_dir: super::FsPath,
        group_id: &str,
        topics: Vec<String>,
        isolation: &str,
        strategy: &str,
        auto_offset_reset: &str,
        session_timeout_ms: i64,
        sync_interval_ms: i64,
    ) -> PyResult<Self> {
        let options = ConsumerOptions {
            strategy: AssignmentStrategy::from_name(strategy)?,
            isolation: FetchIsolation::from_consumer_level(isolation)?,
            auto_offset_reset: OffsetReset::from_name(auto_offset_reset)?,
            session_timeout_ms,
            sync_interval: Duration::from_millis(non_negative(
                "sync_interval_ms",
                sync_interval_ms,
            )?),
        };
        let group_id = group_id.to_string();
        let c =
            py.release_gil(move || GroupConsumer::join(&data_dir, &group_id, &topics, options))?;
        Ok(PyConsumer {
            inner: Mutex::new(c),
        })
    }

    /// The member id the group gave this consumer.
    #[getter]
    fn member_id(&self) -> PyResult<String> {
        self.with(|c| Ok(c.member_id().to_string()))
    }
    /// The group generation of the current assignment.
    #[getter]
    fn generation(&self) -> PyResult<i32> {
        self.with(|c| Ok(c.generation()))
    }
    /// Kafka's `assignment`: the (topic, partition)s this member owns.
    fn assignment(&self) -> PyResult<Vec<(String, i32)>> {
        self.with(|c| Ok(c.assignment()))
    }
    /// Syncs with the group now (heartbeat, release, take).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        py.release_gil(|| self.with(|c| c.sync()))
    }

    /// Kafka's `poll`: up to `max_records` `ConsumerRecord`s from the assigned partitions.
    #[pyo3(signature = (max_records = 500))]
    fn poll<'py>(&self, py: Python<'py>, max_records: i64) -> PyResult<Bound<'py, PyList>> {
        let max_records = non_negative_size("max_records", max_records)?;
        // Each partition's records copied into one arena with the GIL released, then made
        // Python objects sharing one topic string.
        let parts = py.release_gil(|| {
            self.with(|c| {
                let mut parts: Vec<(TopicPartition, RecordArena)> = Vec::new();
                c.poll_with(max_records, &mut |tp, r| match parts.last_mut() {
                    Some((last, arena)) if last == tp => arena.push(r),
                    _ => {
                        let mut arena = RecordArena::default();
                        arena.push(r);
                        parts.push((tp.clone(), arena));
                    }
                })?;
                Ok(parts)
            })
        })?;
        let out = PyList::empty(py);
        for ((topic, partition), arena) in &parts {
            let topic = PyString::new(py, topic).unbind();
            for r in arena.iter() {
                out.append(ConsumerRecord::from_view(
                    py,
                    &r,
                    topic.clone_ref(py),
                    *partition,
                )?)?;
            }
        }
        Ok(out)
    }

    /// `poll` as one `pyarrow.RecordBatch` (Spark's Kafka source schema), None when there is
    /// nothing new.
    #[pyo3(signature = (max_records = 10000, include_headers = false))]
    fn poll_arrow(
        &self,
        py: Python<'_>,
        max_records: i64,
        include_headers: bool,
    ) -> PyResult<Option<PyObject>> {
        let max_records = non_negative_size("max_records", max_records)?;
        let batch = py.release_gil(|| self.with(|c| c.poll_arrow(max_records, include_headers)))?;
        // pyarrow's import runs Python code, which may give the GIL up.
        park_on_thread_exit(|| {
            batch
                .map(|b| PyRecordBatch::new(b).to_pyarrow(py))
                .transpose()
        })
    }

    /// Kafka's `commitSync`: commits `offsets` [(topic, partition, offset)], or every position.
    #[pyo3(signature = (offsets = None))]
    fn commit(&self, py: Python<'_>, offsets: Option<Vec<(String, i32, i64)>>) -> PyResult<()> {
        let list: Option<Vec<((String, i32), i64)>> =
            offsets.map(|o| o.into_iter().map(|(t, p, off)| ((t, p), off)).collect());
        py.release_gil(|| self.with(|c| c.commit(list.as_deref())))
    }
    /// Kafka's `seek`: the next poll of (topic, partition) starts at `offset`.
    fn seek(&self, topic: String, partition: i32, offset: i64) -> PyResult<()> {
        self.with(|c| c.seek(&(topic, partition), offset))
    }
    /// Kafka's `seekToBeginning`: the partitions start at their log start offsets.
    fn seek_to_beginning(&self, py: Python<'_>, partitions: Vec<(String, i32)>) -> PyResult<()> {
        py.release_gil(|| self.with(|c| c.seek_to_beginning(&partitions)))
    }
    /// Kafka's `seekToEnd`: the partitions start at their end (per isolation).
    fn seek_to_end(&self, py: Python<'_>, partitions: Vec<(String, i32)>) -> PyResult<()> {
        py.release_gil(|| self.with(|c| c.seek_to_end(&partitions)))
    }
    /// Kafka's `position`: the offset the next poll of (topic, partition) starts at.
    fn position(&self, topic: String, partition: i32) -> PyResult<i64> {
        self.with(|c| c.position(&(topic, partition)))
    }
    /// Kafka's `close`: commits positions when `commit`, then leaves the group.
    #[pyo3(signature = (commit = true))]
    fn close(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        py.release_gil(|| self.with(|c| c.close(commit)))
    }
}

/// (offset, metadata, commit timestamp ms)
type CommittedTuple = (i64, String, i64);

/// {(topic, partition): (offset, metadata, commit_timestamp)} of a kafkalog group.
#[pyfunction]
fn group_committed(
    py: Python<'_>,
    data_dir: super::FsPath,
    group_id: &str,
) -> PyResult<BTreeMap<(String, i32), CommittedTuple>> {
    let store = GroupStore::new(&data_dir, group_id)?;
    let c = py.release_gil(|| store.committed())?;
    Ok(c.into_iter()
        .map(|(tp, o)| (tp, (o.offset, o.metadata, o.commit_timestamp)))
        .collect())
}

/// Commits [(topic, partition, offset, metadata)] to a kafkalog group, atomically.
#[pyfunction]
fn group_commit(
    py: Python<'_>,
    data_dir: super::FsPath,
    group_id: &str,
    offsets: Vec<(String, i32, i64, String)>,
) -> PyResult<()> {
    let store = GroupStore::new(&data_dir, group_id)?;
    let list: Vec<_> = offsets
        .into_iter()
        .map(|(t, p, o, m)| ((t, p), o, m))
        .collect();
    py.release_gil(|| store.commit(&list))?;
    Ok(())
}

/// A finished piece [start, end) of a batch read `read_id` of (topic, partition), whose whole
/// range is [range_start, range_end): commits the end of the pieces finished contiguously from
/// `range_start` to the group. Returns the offset committed now, if any.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn group_read_done(
    py: Python<'_>,
    data_dir: super::FsPath,
    group_id: &str,
    read_id: &str,
    topic: String,
    partition: i32,
    range: (i64, i64),
    piece: (i64, i64),
) -> PyResult<Option<i64>> {
    let store = GroupStore::new(&data_dir, group_id)?;
    Ok(py.release_gil(|| {
        group::read_piece_done(&store, read_id, &(topic, partition), range, piece)
    })?)
}

/// Whether the kafkalog group `group_id` has a folder in `data_dir`.
#[pyfunction]
fn group_exists(data_dir: super::FsPath, group_id: &str) -> PyResult<bool> {
    Ok(GroupStore::new(&data_dir, group_id)?.exists())
}

/// The kafkalog groups of `data_dir`.
#[pyfunction]
fn list_groups(data_dir: super::FsPath) -> PyResult<Vec<String>> {
    Ok(group::list_groups(&data_dir)?)
}

/// The group's members file as JSON text (generation, protocol, members, assignment, owners).
#[pyfunction]
fn group_describe(data_dir: super::FsPath, group_id: &str) -> PyResult<String> {
    let state = membership::describe(&GroupStore::new(&data_dir, group_id)?)?;
    Ok(serde_json::to_string(&state).expect("plain data serializes"))
}

/// Kafka's assignors: `subscriptions` {member: [topics]}, `partitions` {topic: count}, `owned`
/// {member: [(topic, partition)]} for the sticky ones. Returns {member: [(topic, partition)]}:
/// for cooperative-sticky, as Kafka's `CooperativeStickyAssignor` answers one rebalance (the
/// partitions changing owner left out until their previous owners revoke them).
#[pyfunction]
#[pyo3(signature = (subscriptions, partitions, strategy = "range", owned = None))]
fn assign_partitions(
    subscriptions: &Bound<'_, PyDict>,
    partitions: BTreeMap<String, i32>,
    strategy: &str,
    owned: Option<BTreeMap<String, Vec<(String, i32)>>>,
) -> PyResult<BTreeMap<String, Vec<(String, i32)>>> {
    let strategy = AssignmentStrategy::from_name(strategy)?;
    // In the order given, as a group coordinator lists its members: the sticky assignors meet
    // them in the order of Java's HashMap, whose ties keep it.
    let subscriptions: Vec<(String, Vec<String>)> = subscriptions
        .iter()
        .map(|(m, topics)| Ok((m.extract()?, topics.extract()?)))
        .collect::<PyResult<_>>()?;
    // What members that have left owned (the last generation's assignment, as a caller keeps
    // it) is theirs no longer: Kafka's assignors only ever see the members that rejoined.
    let mut owned = owned.unwrap_or_default();
    let members: Vec<MemberSubscription> = subscriptions
        .into_iter()
        .map(|(member_id, topics)| MemberSubscription {
            owned: owned.remove(&member_id).unwrap_or_default(),
            member_id,
            topics,
        })
        .collect();
    let assignment = group::assign(strategy, &members, &partitions)?;
    Ok(match strategy {
        AssignmentStrategy::CooperativeSticky => {
            crate::group::assignor::without_transfers(assignment, &members)
        }
        _ => assignment,
    })
}

/// Creates a topic's partition folders with its topic configs (Kafka names, kept beside them).
#[pyfunction]
#[pyo3(signature = (data_dir, topic, partitions, configs = None))]
fn create_topic_with_config(
    py: Python<'_>,
    data_dir: super::FsPath,
    topic: &str,
    partitions: i32,
    configs: Option<BTreeMap<String, String>>,
) -> PyResult<()> {
    let configs = configs.unwrap_or_default();
    py.release_gil(|| datadir::create_topic_with_config(&data_dir, topic, partitions, &configs))?;
    Ok(())
}

/// Stores `topic`'s configs (Kafka names) for kafkalog's writers, replacing those stored before:
/// for a topic kafkalog created, or in a broker's log dir that does not hold them.
#[pyfunction]
fn set_topic_config(
    py: Python<'_>,
    data_dir: super::FsPath,
    topic: &str,
    configs: BTreeMap<String, String>,
) -> PyResult<()> {
    py.release_gil(|| datadir::set_topic_config(&data_dir, topic, &configs))?;
    Ok(())
}

/// The topics of `data_dir` that keep segments in tiered storage (`remote.storage.enable`): their
/// folders hold the local logs only.
#[pyfunction]
fn remote_storage_topics(py: Python<'_>, data_dir: super::FsPath) -> PyResult<BTreeSet<String>> {
    Ok(py.release_gil(|| datadir::remote_storage_topics(&data_dir))?)
}

/// Whether `data_dir` is a broker's log dir without its cluster metadata (a ZooKeeper-mode
/// broker's, or one of several `log.dirs`): its topics' configs and partition counts are not
/// all on disk there.
#[pyfunction]
fn broker_dir_without_metadata(data_dir: super::FsPath) -> bool {
    datadir::broker_dir_without_metadata(&data_dir)
}

/// Kafka's CreatePartitions: grows `topic` to `total` partitions; returns the new count.
#[pyfunction]
fn add_partitions(
    py: Python<'_>,
    data_dir: super::FsPath,
    topic: &str,
    total: i32,
) -> PyResult<i32> {
    Ok(py.release_gil(|| datadir::add_partitions(&data_dir, topic, total))?)
}

/// The topic configs kept for `topic` (Kafka names): a broker's (its `__cluster_metadata` log)
/// and those `Topic.create` stored.
#[pyfunction]
fn topic_config(
    py: Python<'_>,
    data_dir: super::FsPath,
    topic: &str,
) -> PyResult<BTreeMap<String, String>> {
    Ok(py.release_gil(|| datadir::read_topic_config(&data_dir, topic))?)
}

/// Refuses a partition folder given as a data dir.
#[pyfunction]
fn check_not_a_partition_folder(py: Python<'_>, data_dir: super::FsPath) -> PyResult<()> {
    Ok(py.release_gil(|| datadir::check_not_a_partition_folder(&data_dir))?)
}

/// {topic: partitions} of the data dir.
#[pyfunction]
fn topic_partition_counts(
    py: Python<'_>,
    data_dir: super::FsPath,
) -> PyResult<BTreeMap<String, i32>> {
    Ok(py.release_gil(|| datadir::topic_partition_counts(&data_dir))?)
}

/// (has '.' or '_', the existing topic of `data_dir` it collides with)
#[pyfunction]
fn topic_collision(data_dir: super::FsPath, topic: &str) -> PyResult<(bool, Option<String>)> {
    let other = if data_dir.is_dir() {
        datadir::colliding_topic(&data_dir, topic)?
    } else {
        None
    };
    Ok((datadir::has_collision_chars(topic), other))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProducer>()?;
    m.add_class::<RecordMetadata>()?;
    m.add_class::<ConsumerRecord>()?;
    m.add_class::<PyConsumer>()?;
    m.add_function(wrap_pyfunction!(group_committed, m)?)?;
    m.add_function(wrap_pyfunction!(group_commit, m)?)?;
    m.add_function(wrap_pyfunction!(group_exists, m)?)?;
    m.add_function(wrap_pyfunction!(group_read_done, m)?)?;
    m.add_function(wrap_pyfunction!(list_groups, m)?)?;
    m.add_function(wrap_pyfunction!(group_describe, m)?)?;
    m.add_function(wrap_pyfunction!(assign_partitions, m)?)?;
    m.add_function(wrap_pyfunction!(create_topic_with_config, m)?)?;
    m.add_function(wrap_pyfunction!(set_topic_config, m)?)?;
    m.add_function(wrap_pyfunction!(broker_dir_without_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(remote_storage_topics, m)?)?;
    m.add_function(wrap_pyfunction!(add_partitions, m)?)?;
    m.add_function(wrap_pyfunction!(topic_config, m)?)?;
    m.add_function(wrap_pyfunction!(topic_partition_counts, m)?)?;
    m.add_function(wrap_pyfunction!(check_not_a_partition_folder, m)?)?;
    m.add_function(wrap_pyfunction!(topic_collision, m)?)?;
    Ok(())
}
