//! The crate's result structs as the named tuples of `kafkalog.results` (Kafka's
//! `OffsetPosition`, `TimestampOffset`, `TimestampAndOffset`, `LogOffsetPosition`,
//! `LogOffsetMetadata`, `ProducerStateEntry`): they unpack and compare like plain tuples; and
//! `dict_of!`, a struct's fields as the dict a `TypedDict` there describes.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

use crate::index::offset::OffsetPosition;
use crate::index::time::TimestampOffset;
use crate::log::ProducerStateEntry;
use crate::record::file_records::{LogOffsetPosition, TimestampAndOffset};
use crate::segment::LogOffsetMetadata;

/// A crate struct that becomes one of `kafkalog.results`' named tuples.
pub trait IntoPyResult {
    /// The class's name in `kafkalog.results`.
    const NAME: &'static str;
    /// The class, imported once per interpreter.
    fn class() -> &'static GILOnceCell<Py<PyType>>;
    /// Converts to the named tuple.
    fn into_py_result(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>>;
}

/// Defines [`IntoPyResult`] for `$ty` as `kafkalog.results.$ty`, built from the listed fields.
macro_rules! py_result {
    ($ty:ty, $name:literal, |$v:ident| $args:expr) => {
        impl IntoPyResult for $ty {
            const NAME: &'static str = $name;
            fn class() -> &'static GILOnceCell<Py<PyType>> {
                static CLASS: GILOnceCell<Py<PyType>> = GILOnceCell::new();
                &CLASS
            }
            fn into_py_result(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
                let $v = self;
                // The named tuple's constructor is Python code, which may give the GIL up.
                $crate::python::park_on_thread_exit(|| {
                    Self::class()
                        .import(py, "kafkalog.results", Self::NAME)?
                        .call1($args)
                })
            }
        }
    };
}

py_result!(OffsetPosition, "OffsetPosition", |p| (p.offset, p.position));
py_result!(TimestampOffset, "TimestampOffset", |t| (
    t.timestamp,
    t.offset
));
py_result!(TimestampAndOffset, "TimestampAndOffset", |t| (
    t.timestamp,
    t.offset,
    t.leader_epoch
));
py_result!(LogOffsetPosition, "LogOffsetPosition", |p| (
    p.offset, p.position, p.size
));
py_result!(LogOffsetMetadata, "LogOffsetMetadata", |m| (
    m.message_offset,
    m.segment_base_offset,
    m.relative_position_in_segment
));
py_result!(&ProducerStateEntry, "ProducerStateEntry", |e| (
    e.producer_id,
    e.producer_epoch,
    e.last_seq(),
    e.last_data_offset(),
    e.last_timestamp,
    e.coordinator_epoch,
    e.current_txn_first_offset
));

/// A dict of `$value`'s fields under their own names (the crate's names are Kafka's, in snake
/// case, as the `TypedDict`s of `kafkalog.results` spell them): `dict_of!(py, info; a, b)`.
macro_rules! dict_of {
    ($py:expr, $value:expr; $($field:ident),+ $(,)?) => {{
        let d = pyo3::types::PyDict::new($py);
        $(d.set_item(stringify!($field), &$value.$field)?;)+
        d
    }};
}
pub(crate) use dict_of;

/// Converts each item (an index's entries, say) into its named tuple.
pub fn into_py_results<'py, T: IntoPyResult>(
    py: Python<'py>,
    items: impl IntoIterator<Item = crate::error::Result<T>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    items
        .into_iter()
        .map(|item| item?.into_py_result(py))
        .collect()
}
