//! Kafka's `CheckpointFile` and its `EntryFormatter`: `<version>\n<count>\n` then one entry per line.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{atomic_write, read_text, sync_parent_dir};
use crate::error::{Error, Result};

pub(super) fn malformed(path: &Path, line_no: usize, line: &str, why: &str) -> Error {
    Error::corrupt(format!(
        "malformed line {line_no} in checkpoint file {}: {line:?} ({why})",
        path.display()
    ))
    .in_file(path)
}

/// Splits like Java's `line.split("\\s+")`: a leading blank yields an empty first field, which
/// makes the entry malformed, as it does in Kafka.
pub(super) fn fields(line: &str) -> Vec<&str> {
    let mut out: Vec<&str> = line.split_whitespace().collect();
    if line.starts_with(char::is_whitespace) {
        out.insert(0, "");
    }
    out
}

/// How one entry type is written to and parsed from a checkpoint line (Kafka's `EntryFormatter`).
pub trait CheckpointEntry: Sized {
    fn format(&self) -> String;
    /// `None` when the line is not a valid entry.
    fn parse(line: &str) -> Option<Self>;
}

/// Kafka's `CheckpointFile`: `<version>\n<count>\n` then `count` entry lines, each ending in `\n`.
#[derive(Debug, Clone)]
pub struct CheckpointFile {
    path: PathBuf,
    version: i32,
}

impl CheckpointFile {
    pub fn new(path: impl Into<PathBuf>, version: i32) -> Self {
        CheckpointFile {
            path: path.into(),
            version,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// Kafka's constructor creates a missing checkpoint as an empty file; callers that may write
    /// do the same so a directory looks like a broker's.
    pub fn create_if_missing(&self) -> Result<()> {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.path)
        {
            Ok(_) => sync_parent_dir(&self.path),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }

    /// Renders the exact bytes Kafka writes (`BufferedWriter.newLine()` is `\n` on a broker's OS).
    pub fn render<T: CheckpointEntry>(version: i32, entries: &[T]) -> String {
        let mut s = format!("{version}\n{}\n", entries.len());
        for e in entries {
            s.push_str(&e.format());
            s.push('\n');
        }
        s
    }

    pub fn write<T: CheckpointEntry>(&self, entries: &[T]) -> Result<()> {
        atomic_write(&self.path, Self::render(self.version, entries).as_bytes())
    }

    /// A missing or empty file, or one holding only the version line, reads as no entries, as in
    /// Kafka (which creates the file empty). Anything else must match the format exactly.
    pub fn read<T: CheckpointEntry>(&self) -> Result<Vec<T>> {
        match read_text(&self.path)? {
            None => Ok(Vec::new()),
            Some(text) => Self::parse(&self.path, self.version, &text),
        }
    }

    /// Parses checkpoint text; `path` only names the file in errors.
    pub fn parse<T: CheckpointEntry>(path: &Path, version: i32, text: &str) -> Result<Vec<T>> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let Some((n, line)) = lines.next() else {
            return Ok(Vec::new());
        };
        let found: i32 = line
            .parse()
            .map_err(|_| malformed(path, n, line, "expected the version"))?;
        if found != version {
            return Err(Error::corrupt(format!(
                "unrecognised version {found} in checkpoint file {} (expected {version})",
                path.display()
            ))
            .in_file(path));
        }
        let Some((n, line)) = lines.next() else {
            return Ok(Vec::new());
        };
        let expected: i32 = line
            .parse()
            .map_err(|_| malformed(path, n, line, "expected the entry count"))?;
        if expected < 0 {
            return Err(malformed(path, n, line, "negative entry count"));
        }
        // The count is untrusted: grow with the lines actually present, never reserve from it.
        let mut entries = Vec::new();
        for (n, line) in lines {
            let entry =
                T::parse(line).ok_or_else(|| malformed(path, n, line, "not a valid entry"))?;
            entries.push(entry);
        }
        if entries.len() != expected as usize {
            return Err(Error::corrupt(format!(
                "expected {expected} entries in checkpoint file {}, but found {}",
                path.display(),
                entries.len()
            ))
            .in_file(path));
        }
        Ok(entries)
    }
}
