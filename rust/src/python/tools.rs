//! Bindings of Kafka's offline tools (`crate::tools`): they write to the process's own stdout
//! and stderr, buffered in Rust, so a dump of gigabytes never builds Python strings.

use std::io::{BufWriter, Write};

use pyo3::prelude::*;

use crate::tools::dump_log_segments::{
    dump_log_segments as dump, Decoder, DumpOptions, MessageParser,
};

/// Kafka's DumpLogSegments over `files`, printed to stdout (reports to stderr).
/// `message_parser`: "decoders" (the key and value decoders), "offsets", "transaction-log"
/// or "cluster-metadata" (Kafka's internal topic decoders). Returns (files, batches, records,
/// problems).
#[pyfunction]
#[pyo3(signature = (files, *, print_data_log = false, deep_iteration = false,
    skip_record_metadata = false, index_sanity_check = false, verify_index_only = false,
    max_bytes = i32::MAX, max_message_size = 5 * 1024 * 1024,
    key_decoder_class = "org.apache.kafka.tools.api.StringDecoder",
    value_decoder_class = "org.apache.kafka.tools.api.StringDecoder", json = false, kafka_major = 4,
    message_parser = "decoders"))]
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
) -> PyResult<(usize, u64, u64, u64)> {
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
        parser: MessageParser::from_name(message_parser)?,
        json,
        kafka_major,
    };
    let summary = py.allow_threads(|| {
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
    Ok(())
}
