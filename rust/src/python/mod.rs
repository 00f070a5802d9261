//! PyO3 bindings (cargo feature `python`): translation of types and errors only; every rule
//! lives in the crate. The GIL is released around file I/O and decoding.

mod arrow;
mod errors;
mod groups;
mod internal_topics;
mod log;
mod records;
mod results;
mod segment;
mod tools;

use pyo3::prelude::*;

#[pymodule]
fn _kafkalog(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    records::register(m)?;
    segment::register(m)?;
    log::register(m)?;
    arrow::register(m)?;
    tools::register(m)?;
    internal_topics::register(m)?;
    groups::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
