//! Kafka's `PartitionMetadataFile` (`partition.metadata`) and the `Uuid` it holds.

use std::path::{Path, PathBuf};

use super::{atomic_write, read_text, PARTITION_METADATA_FILE};
use crate::error::{Error, Result};

/// A 128-bit Kafka `Uuid`, shown as 22 characters of unpadded URL-safe base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub u128);

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl Uuid {
    pub const ZERO: Uuid = Uuid(0);

    /// Kafka's `Uuid.fromString`: exactly 22 base64url characters encoding 16 bytes.
    pub fn parse(s: &str) -> Option<Uuid> {
        let bytes = s.as_bytes();
        if bytes.len() != 22 {
            return None;
        }
        let mut acc: u128 = 0;
        for (i, &c) in bytes.iter().enumerate() {
            let v = B64URL.iter().position(|&b| b == c)? as u128;
            if i < 21 {
                acc = (acc << 6) | v;
            } else {
                // 21 * 6 = 126 bits so far; the last character carries 2 bits and 4 zero pad bits.
                if v & 0x0f != 0 {
                    return None;
                }
                acc = (acc << 2) | (v >> 4);
            }
        }
        Some(Uuid(acc))
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::with_capacity(22);
        for i in 0..21 {
            let shift = 128 - 6 * (i + 1);
            out.push(B64URL[((self.0 >> shift) & 0x3f) as usize] as char);
        }
        out.push(B64URL[((self.0 & 0x3) << 4) as usize] as char);
        f.write_str(&out)
    }
}

/// Kafka's `PartitionMetadataFile`: `partition.metadata` in a partition directory, holding
/// `version: 0\ntopic_id: <uuid>` (no trailing newline).
#[derive(Debug, Clone)]
pub struct PartitionMetadataFile {
    path: PathBuf,
}

impl PartitionMetadataFile {
    pub const CURRENT_VERSION: i32 = 0;

    pub fn in_dir(partition_dir: &Path) -> Self {
        PartitionMetadataFile {
            path: partition_dir.join(PARTITION_METADATA_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    pub fn render(topic_id: Uuid) -> String {
        format!("version: {}\ntopic_id: {}", Self::CURRENT_VERSION, topic_id)
    }

    pub fn write(&self, topic_id: Uuid) -> Result<()> {
        if topic_id == Uuid::ZERO {
            return Err(Error::InvalidArgument(
                "the zero UUID is not a valid topic id".into(),
            ));
        }
        atomic_write(&self.path, Self::render(topic_id).as_bytes())
    }

    /// The topic id, `None` when the file does not exist.
    pub fn read(&self) -> Result<Option<Uuid>> {
        let Some(text) = read_text(&self.path)? else {
            return Ok(None);
        };
        Self::parse(&self.path, &text).map(Some)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Uuid> {
        let bad = |n: usize, line: &str, why: &str| {
            Error::corrupt(format!(
                "malformed line {n} in partition metadata file {}: {line:?} ({why})",
                path.display()
            ))
            .in_file(path)
        };
        let mut lines = text.lines();
        let line = lines.next().unwrap_or("");
        let version =
            value_after(line, "version").ok_or_else(|| bad(1, line, "expected `version: <n>`"))?;
        let version: i32 = version
            .parse()
            .map_err(|_| bad(1, line, "version is not a number"))?;
        if version != Self::CURRENT_VERSION {
            return Err(bad(1, line, "unrecognized version"));
        }
        let line = lines.next().unwrap_or("");
        let id = value_after(line, "topic_id")
            .ok_or_else(|| bad(2, line, "expected `topic_id: <uuid>`"))?;
        let id = Uuid::parse(id).ok_or_else(|| bad(2, line, "not a base64url UUID"))?;
        if id == Uuid::ZERO {
            return Err(bad(2, line, "the zero UUID is not a valid topic id"));
        }
        Ok(id)
    }
}

/// `key:<whitespace>value` as Kafka splits it with `:\s+`.
fn value_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(key)?.strip_prefix(':')?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let value = rest.trim();
    (!value.is_empty() && !value.contains(char::is_whitespace)).then_some(value)
}
