//! PyO3 bindings (cargo feature `python`): translation of types and errors only; every rule
//! lives in the crate. The GIL is released around file I/O and decoding.

mod arrow;
mod errors;
mod groups;
mod internal_topics;
mod log;
mod records;
mod segment;
mod tools;

use pyo3::prelude::*;

/// Memory for Arrow buffers comes back to the allocator batch after batch; mimalloc reuses it
/// without returning it to the OS first (no page fault per 4 KiB of each new batch). Unit tests
/// keep their own counting allocator (`log/every_byte_tests.rs`).
#[cfg(not(test))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
