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

/// A path argument as Python's `os` functions take one: `str`, `bytes` (the file system's own
/// bytes, as `os.fsencode` gives them) or an `os.PathLike` of either (pyo3's `PathBuf` takes no
/// bytes).
pub(crate) struct FsPath(pub std::path::PathBuf);

impl<'py> FromPyObject<'py> for FsPath {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        use std::os::unix::ffi::OsStrExt;
        let path = ob.py().import("os")?.call_method1("fspath", (ob,))?;
        match path.downcast::<pyo3::types::PyBytes>() {
            Ok(bytes) => Ok(FsPath(std::ffi::OsStr::from_bytes(bytes.as_bytes()).into())),
            Err(_) => path.extract().map(FsPath),
        }
    }
}

impl AsRef<std::path::Path> for FsPath {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl std::ops::Deref for FsPath {
    type Target = std::path::PathBuf;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// `Python::allow_threads` for a thread that may come back for the GIL after the interpreter
/// began to exit (a daemon thread reading a log): CPython before 3.14 ends such a thread with
/// `pthread_exit`, whose forced unwind would reach pyo3's `catch_unwind` and abort the whole
/// process ("FATAL: exception not rethrown"). That unwind now parks the thread instead, as
/// CPython 3.14 does, and the process exits.
pub(crate) trait ReleaseGil {
    fn release_gil<T: Send, F: Send + FnOnce() -> T>(self, f: F) -> T;
}

impl ReleaseGil for Python<'_> {
    #[inline(never)]
    fn release_gil<T: Send, F: Send + FnOnce() -> T>(self, f: F) -> T {
        park_on_thread_exit(|| self.allow_threads(f))
    }
}

/// Runs `f`, parking this thread for good should `pthread_exit` unwind out of it: for code that
/// calls into Python with the GIL held (pyarrow's constructors), where the interpreter may hand
/// the GIL to another thread and, exiting, end this one on taking it back.
#[inline(never)]
pub(crate) fn park_on_thread_exit<R>(f: impl FnOnce() -> R) -> R {
    let park = ParkOnThreadExit;
    let out = f();
    std::mem::forget(park);
    out
}

/// Dropped only by an unwind: a Rust panic's, which goes on to pyo3 (a `PanicException`), or
/// `pthread_exit`'s, which parks the thread. Any other is a foreign exception (a C++ one out of
/// pyarrow when memory runs out) that nothing can catch: parked, the call would hang for good,
/// so the process ends with a message instead.
struct ParkOnThreadExit;

impl Drop for ParkOnThreadExit {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        // CPython ends a thread with `pthread_exit` only while the interpreter finalizes.
        if interpreter_finalizing() != Some(false) {
            loop {
                std::thread::park();
            }
        }
        eprintln!(
            "kafkalog: a foreign (C++) exception unwound through a call into Python, which \
             cannot go on (out of memory in pyarrow?): aborting"
        );
        std::process::abort();
    }
}

/// Whether the interpreter is finalizing: `Py_IsFinalizing` (3.13+) or `_Py_IsFinalizing`
/// (3.9-3.12), looked up at run time since the stable ABI has neither; None when neither is
/// found. Both read one field of the runtime, without the GIL.
fn interpreter_finalizing() -> Option<bool> {
    type IsFinalizing = extern "C" fn() -> std::os::raw::c_int;
    static IS_FINALIZING: std::sync::OnceLock<Option<IsFinalizing>> = std::sync::OnceLock::new();
    let f = IS_FINALIZING.get_or_init(|| {
        [c"Py_IsFinalizing", c"_Py_IsFinalizing"]
            .into_iter()
            .find_map(|name| {
                // SAFETY: dlsym on the process's global symbols with a NUL-terminated name.
                let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
                // SAFETY: both functions take nothing and return an int.
                (!symbol.is_null())
                    .then(|| unsafe { std::mem::transmute::<_, IsFinalizing>(symbol) })
            })
    });
    f.map(|f| f() != 0)
}

/// Memory for Arrow buffers comes back to the allocator batch after batch; mimalloc reuses it
/// without returning it to the OS first (no page fault per 4 KiB of each new batch). Unit tests
/// keep their own counting allocator (`log/every_byte_tests.rs`).
#[cfg(not(test))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (not among libmimalloc-sys's named constants).
#[cfg(not(test))]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

extern "C" {
    // Public C API since Python 3.4 that pyo3's abi3 bindings leave out (it is outside the
    // limited API); every CPython 3 exports it.
    fn PyGILState_Check() -> std::os::raw::c_int;
}

extern "C-unwind" {
    /// `PyEval_RestoreThread` as what it is while the interpreter exits: a call that may unwind
    /// (`pthread_exit`), so [`ParkOnThreadExit`] around it runs.
    #[link_name = "PyEval_RestoreThread"]
    fn restore_thread_or_exit(state: *mut pyo3::ffi::PyThreadState);
}

/// Unmaps a segment map with the GIL released when this thread holds it: pyarrow frees the last
/// Arrow buffer of a zero-copy table holding the GIL, and the unmap (page tables torn down, other
/// cores' TLBs flushed) would stall every other thread of the process meanwhile. Threads
/// without the GIL (a C++ consumer's) just unmap.
fn unmap_without_the_gil(map: memmap2::Mmap) {
    // SAFETY: PyGILState_Check only reads this thread's state. When it holds the GIL, Save and
    // RestoreThread pair up on this thread around code that touches no Python object.
    unsafe {
        if PyGILState_Check() == 1 {
            let state = pyo3::ffi::PyEval_SaveThread();
            drop(map);
            park_on_thread_exit(|| restore_thread_or_exit(state));
        } else {
            drop(map);
        }
    }
}

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
    crate::record::segment_map::set_unmap_hook(unmap_without_the_gil);
    // Looked up now, not first in an unwind (where memory may have run out).
    interpreter_finalizing();
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
