//! Kafka's small text state files, one file per class: the generic `CheckpointFile`
//! (checkpoint_file.rs: version line, count line, one entry per line) with `OffsetCheckpointFile`
//! (offset_checkpoint.rs), `PartitionMetadataFile` (partition_metadata.rs, `partition.metadata`),
//! the `.kafka_cleanshutdown` marker (clean_shutdown.rs, `CleanShutdownFileHandler`) and partition
//! directory names (partition_dir.rs); the atomic write they share is here.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod checkpoint_file;
mod clean_shutdown;
mod offset_checkpoint;
mod partition_dir;
mod partition_metadata;
#[cfg(test)]
mod tests;

pub use checkpoint_file::{CheckpointEntry, CheckpointFile};
pub use clean_shutdown::{CleanShutdown, CleanShutdownFile};
pub use offset_checkpoint::{OffsetCheckpointFile, OffsetMap, TopicPartitionOffset};
pub use partition_dir::{
    parse_partition_dir, parse_topic_partition, PartitionDir, PartitionDirKind,
};
pub use partition_metadata::{PartitionMetadataFile, Uuid};

/// The version every checkpoint file kind Kafka writes today carries.
pub const CHECKPOINT_VERSION: i32 = 0;

pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

pub const DELETE_DIR_SUFFIX: &str = "-delete";
pub const FUTURE_DIR_SUFFIX: &str = "-future";
pub const STRAY_DIR_SUFFIX: &str = "-stray";

/// What [`atomic_write`] writes before its rename (Kafka's `CheckpointFile` and
/// `PartitionMetadataFile` name their temporary files so too): left by a crash, a writable load
/// removes them.
pub const TEMP_FILE_SUFFIX: &str = ".tmp";

/// Writes `bytes` to `path` so that a crash leaves either the old or the new file, never a torn one:
/// `<path>.tmp`, fsync, rename over `path`, fsync the directory (Kafka's `atomicMoveWithFallback`).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(TEMP_FILE_SUFFIX);
    let tmp = PathBuf::from(tmp_name);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| Error::io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    }
    fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    sync_parent_dir(path)
}

/// Makes a rename or file creation in `path`'s directory durable.
pub(crate) fn sync_parent_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Directories cannot be opened for fsync on every platform; where they can't, the rename is
    // as durable as the OS makes it.
    if let Ok(d) = File::open(dir) {
        d.sync_all().map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}

/// An exclusive `flock` on a log dir, held while a log updates its entries in the dir's shared
/// checkpoint files: those are read, changed and replaced whole, so two logs closing at once
/// (threads, or processes writing different partitions) would otherwise drop each other's entries
/// or rename each other's temp file away. The directory itself is locked: no file is added, and a
/// broker's own `.lock` (a POSIX lock on another file) is untouched.
pub(crate) struct LogDirLock {
    /// Held for its descriptor: closing it releases the lock.
    _dir: File,
}

impl LogDirLock {
    pub(crate) fn acquire(dir: &Path) -> Result<LogDirLock> {
        let f = File::open(dir).map_err(|e| Error::io(dir, e))?;
        loop {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a descriptor this File owns; released when the File closes.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(LogDirLock { _dir: f });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(Error::io(dir, e));
            }
        }
    }
}

/// A checkpoint line per partition of a log dir: a million partitions take some 50 MB.
const MAX_CHECKPOINT_BYTES: u64 = 256 << 20;

/// Reads a file as UTF-8, `None` when it does not exist.
fn read_text(path: &Path) -> Result<Option<String>> {
    match crate::files::read_regular(path, MAX_CHECKPOINT_BYTES) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            Error::corrupt(format!("{} is not valid UTF-8", path.display())).in_file(path)
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}
