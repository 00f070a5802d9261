//! Opening the files Kafka keeps in a partition folder and its log dir: regular files only.
//! A FIFO, socket or device under a segment's or checkpoint's name would block a reader forever
//! (a FIFO's open waits for a writer) or read as endless bytes (`/dev/zero`), so such a file is
//! an error naming it, found without blocking: the open itself does not wait
//! (`O_NONBLOCK`), and the type is checked on the opened descriptor.

use std::fs::{File, OpenOptions};
use std::io::{Error, ErrorKind, Read, Result};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for reading, refusing anything but a regular file (a symlink to one is one).
pub fn open_regular(path: &Path) -> Result<File> {
    checked(
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?,
    )
}

/// [`open_regular`] with `options` (write, create, ...) as well.
pub fn open_regular_with(options: &mut OpenOptions, path: &Path) -> Result<File> {
    checked(options.custom_flags(libc::O_NONBLOCK).open(path)?)
}

/// The whole of a small regular file (a checkpoint, a producer snapshot), refused past
/// `max_bytes` rather than read into memory whole.
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let f = open_regular(path)?;
    let len = f.metadata()?.len();
    if len > max_bytes {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("{len} bytes, more than the {max_bytes} this kind of file can hold"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(max_bytes + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn checked(f: File) -> Result<File> {
    let kind = f.metadata()?.file_type();
    if kind.is_file() {
        return Ok(f);
    }
    let what = if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(Error::new(
        ErrorKind::InvalidInput,
        format!("{what} where Kafka keeps a regular file"),
    ))
}

/// Takes `flock`'s `operation` (`LOCK_SH`, `LOCK_EX` or `LOCK_UN`) on `file`'s open file
/// description without waiting: whether it was taken. Read-only views hold `LOCK_SH` on a
/// segment file they memory-map; a writer about to cut the file tries `LOCK_EX` to learn that no
/// map of it is alive (cutting a mapped file faults its readers with SIGBUS).
pub fn try_flock(file: &File, operation: libc::c_int) -> bool {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: a valid descriptor, owned by `file` for the call.
        if unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) } == 0 {
            return true;
        }
        if Error::last_os_error().kind() != ErrorKind::Interrupted {
            return false;
        }
    }
}
