//! Bindings of `crate::internal_topics`: a broker's committed offsets as Python dicts.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::internal_topics::cluster_metadata::topic_partitions;
use crate::internal_topics::committed_offsets::broker_committed_offsets as committed;
use crate::python::results::dict_of;
use crate::python::ReleaseGil;

/// The offsets a broker's groups committed, read from its data dir's `__consumer_offsets`
/// partitions (read-only): {group_id: {(topic, partition): {"offset", "leader_epoch",
/// "metadata", "commit_timestamp"}}}, what ListConsumerGroupOffsets would answer.
#[pyfunction]
#[pyo3(signature = (data_dir, group_id = None))]
fn broker_committed_offsets<'py>(
    py: Python<'py>,
    data_dir: super::FsPath,
    group_id: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let groups = py.release_gil(|| committed(&data_dir, group_id.as_deref()))?;
    let out = PyDict::new(py);
    for (group, offsets) in groups {
        let per_partition = PyDict::new(py);
        for ((topic, partition), o) in offsets {
            let entry = dict_of!(py, o; offset, leader_epoch, metadata, commit_timestamp);
            per_partition.set_item(
                PyTuple::new(
                    py,
                    [
                        topic.into_pyobject(py)?.into_any(),
                        partition.into_pyobject(py)?.into_any(),
                    ],
                )?,
                entry,
            )?;
        }
        out.set_item(group, per_partition)?;
    }
    Ok(out)
}

/// The topics a KRaft data dir's `__cluster_metadata` log knows, each with its partition
/// numbers (read-only; the latest snapshot, then the log): {topic: [partition, ...]}. None when
/// the dir has no metadata log, or one whose records before its log start are gone.
#[pyfunction]
fn metadata_topic_partitions(
    py: Python<'_>,
    data_dir: super::FsPath,
) -> PyResult<Option<std::collections::HashMap<String, Vec<i32>>>> {
    let found = py.release_gil(|| topic_partitions(&data_dir))?;
    Ok(found.map(|topics| {
        topics
            .into_iter()
            .map(|(name, partitions)| (name, partitions.into_iter().collect()))
            .collect()
    }))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(broker_committed_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(metadata_topic_partitions, m)?)?;
    Ok(())
}
