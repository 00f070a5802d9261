//! Bindings of Kafka's offline tools (`crate::tools`): they write to the process's own stdout
//! and stderr, buffered in Rust, so a dump of gigabytes never builds Python strings.

use std::io::{BufWriter, Write};

use pyo3::prelude::*;

use pyo3::types::PyDict;

use crate::log::OnCorruption;
use crate::python::results::dict_of;
use crate::python::ReleaseGil;
use crate::tools::dump_log_segments::{
    dump_log_segments as dump, Decoder, DumpOptions, MessageParser,
};
use crate::tools::{stats, verify};

/// Runs `work` without the GIL, giving it a progress callback that takes the GIL to call
/// `progress(bytes)` and to check for Ctrl-C, whose Python exception is what `work` returns.
fn with_progress<T: Send>(
    py: Python<'_>,
    progress: Option<PyObject>,
    work: impl FnOnce(&mut dyn FnMut(u64) -> crate::Result<()>) -> crate::Result<T> + Send,
) -> PyResult<T> {
    let mut raised: Option<PyErr> = None;
    let result = py.release_gil(|| {
        work(&mut |bytes| {
            crate::python::park_on_thread_exit(|| {
                Python::with_gil(|py| {
                    let call = py.check_signals().and_then(|_| match &progress {
                        Some(cb) => cb.call1(py, (bytes,)).map(|_| ()),
                        None => Ok(()),
                    });
                    call.map_err(|e| {
                        raised = Some(e);
                        crate::Error::IllegalState("interrupted".into())
                    })
                })
            })
        })
    });
    match (result, raised) {
        (_, Some(e)) => Err(e),
        (r, None) => Ok(r?),
    }
}

/// What [`verify_partition`] returns.
type VerifyTuple = (
    usize,
    u64,
    u64,
    bool,
    Vec<(String, Option<u64>, String)>,
    Vec<(String, Option<u64>, String)>,
);

/// `kafkalog verify` over one partition folder, reading only. Returns (segments, batches,
/// bytes, compacted, problems, notes), each problem or note (file, byte position or None,
/// message); notes are not wrong (an index file missing, which a broker rebuilds).
#[pyfunction]
#[pyo3(signature = (path, *, compacted = false, progress = None))]
#[allow(clippy::type_complexity)]
fn verify_partition(
    py: Python<'_>,
    path: super::FsPath,
    compacted: bool,
    progress: Option<PyObject>,
) -> PyResult<VerifyTuple> {
    let report = with_progress(py, progress, |cb| {
        verify::verify_partition(&path, verify::VerifyOptions { compacted }, cb)
    })?;
    let listed = |found: Vec<verify::Problem>| {
        found
            .into_iter()
            .map(|p| (p.file.display().to_string(), p.position, p.message))
            .collect()
    };
    Ok((
        report.segments,
        report.batches,
        report.bytes,
        report.compacted,
        listed(report.problems),
        listed(report.notes),
    ))
}

/// `kafkalog stats` of one partition folder (opened read-only): a dict of its offsets, sizes,
/// counts, batch-level time range, codecs and producers. `on_corruption` as `Log` takes it;
/// "skip" sums the batches around damage and lists it under "damage".
#[pyfunction]
#[pyo3(signature = (path, *, on_corruption = "error", progress = None))]
fn partition_stats<'py>(
    py: Python<'py>,
    path: super::FsPath,
    on_corruption: &str,
    progress: Option<PyObject>,
) -> PyResult<Bound<'py, PyDict>> {
    let on_corruption = OnCorruption::from_name(on_corruption)?;
    let s = with_progress(py, progress, |cb| {
        stats::partition_stats(&path, on_corruption, cb)
    })?;
    Ok(
        dict_of!(py, s; log_start_offset, log_end_offset, high_watermark,
        checkpointed_high_watermark, last_stable_offset, segments, bytes, batches, records,
        control_batches, transactional_records, committed_transactions, aborted_transactions,
        producers, first_timestamp, last_timestamp, codecs, magic, damage, tail_loss),
    )
}

/// Kafka's DumpLogSegments over `files`, printed to stdout (reports to stderr).
/// `message_parser`: "decoders" (the key and value decoders), "offsets", "transaction-log"
/// or "cluster-metadata" (Kafka's internal topic decoders). `listed_from_folders`: the files
/// found by listing a folder, skipped with a note when removed meanwhile. Returns (files,
/// batches, records, problems).
#[pyfunction]
#[pyo3(signature = (files, *, print_data_log = false, deep_iteration = false,
    skip_record_metadata = false, index_sanity_check = false, verify_index_only = false,
    max_bytes = i32::MAX, max_message_size = 5 * 1024 * 1024,
    key_decoder_class = "org.apache.kafka.tools.api.StringDecoder",
    value_decoder_class = "org.apache.kafka.tools.api.StringDecoder", json = false, kafka_major = 4,
    message_parser = "decoders", listed_from_folders = Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn dump_log_segments(
    py: Python<'_>,
    files: Vec<String>,
    print_data_log: bool,
    deep_iteration: bool,
    skip_record_metadata: bool,
    index_sanity_check: bool,
    verify_index_only: bool,
    max_bytes: i32,
    max_message_size: i32,
    key_decoder_class: &str,
    value_decoder_class: &str,
    json: bool,
    kafka_major: u8,
    message_parser: &str,
    listed_from_folders: Vec<String>,
) -> PyResult<(usize, u64, u64, u64)> {
    let parser = MessageParser::from_name(message_parser)?;
    let opts = DumpOptions {
        print_data_log,
        deep_iteration,
        skip_record_metadata,
        index_sanity_check,
        verify_index_only,
        max_bytes,
        max_message_size,
        key_decoder: Decoder::from_class_name(key_decoder_class)?,
        value_decoder: Decoder::from_class_name(value_decoder_class)?,
        parser,
        json,
        kafka_major,
        // Kafka 3.x's tool warns, on stdout, of each option naming an old decoder class, as it
        // makes them: the value's decoder, then the key's; under an internal topic's decoder
        // (`--offsets-decoder`, ...) it makes none.
        decoder_notes: [value_decoder_class, key_decoder_class]
            .into_iter()
            .filter(|_| kafka_major < 4 && parser == MessageParser::Decoders)
            .filter_map(|class| {
                let short = class.strip_prefix("kafka.serializer.")?;
                Some(format!(
                    "{class} is deprecated. Please use org.apache.kafka.tools.api.{short} instead"
                ))
            })
            .collect(),
        listed_from_folders: listed_from_folders.into_iter().collect(),
    };
    let summary = py.release_gil(|| {
        let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let mut err = BufWriter::new(std::io::stderr().lock());
        let result = dump(&files, &opts, &mut out, &mut err);
        // What was printed before an error still reaches the terminal, as with Kafka's tool.
        let flushed = out.flush().and(err.flush());
        let summary = result?;
        flushed.map_err(|e| crate::Error::Io {
            path: None,
            source: e,
        })?;
        Ok::<_, crate::Error>(summary)
    })?;
    Ok((
        summary.files,
        summary.batches,
        summary.records,
        summary.problems,
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dump_log_segments, m)?)?;
    m.add_function(wrap_pyfunction!(verify_partition, m)?)?;
    m.add_function(wrap_pyfunction!(partition_stats, m)?)?;
    Ok(())
}
