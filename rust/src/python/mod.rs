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

/// Memory for Arrow buffers comes back to the allocator batch after batch; mimalloc reuses it
/// without returning it to the OS first (no page fault per 4 KiB of each new batch). Unit tests
/// keep their own counting allocator (`log/every_byte_tests.rs`).
#[cfg(not(test))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (not among libmimalloc-sys's named constants).
#[cfg(not(test))]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[pymodule]
fn _kafkalog(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Freed Arrow memory stays mapped for 10 s (jemalloc's default decay) instead of mimalloc's
    // 1 s, so a reader that comes back every few seconds reuses it without a page fault per
    // 4 KiB; an unset `MIMALLOC_PURGE_DELAY` only, the user's setting wins.
    #[cfg(not(test))]
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option of the allocator; no memory is touched.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
    }
    // pyarrow frees a zero-copy table's memory map holding the GIL: unmapped on a thread of
    // its own, the other threads go on meanwhile.
    crate::record::segment_map::unmap_in_background(true);
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
