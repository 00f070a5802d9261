//! Kafka's `CleanShutdownFileHandler`: the `.kafka_cleanshutdown` marker of a broker log dir.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{atomic_write, read_text, sync_parent_dir, CLEAN_SHUTDOWN_FILE};
use crate::error::{Error, Result};

/// What a `.kafka_cleanshutdown` marker says. Before Kafka 3.5 the file was empty; the first
/// KIP-966 code wrote a string map `{"broker_epoch":"<n>","version":"0"}`; 3.9 and 4.x brokers write
/// `{"version":0,"brokerEpoch":<n>}`. Either way its presence means a clean shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanShutdown {
    /// `None` for an old empty marker or one whose content cannot be read (Kafka logs and ignores it).
    pub broker_epoch: Option<i64>,
}

/// Kafka's `CleanShutdownFileHandler` over a broker log directory.
#[derive(Debug, Clone)]
pub struct CleanShutdownFile {
    path: PathBuf,
}

impl CleanShutdownFile {
    pub const CURRENT_VERSION: i32 = 0;

    pub fn in_log_dir(log_dir: &Path) -> Self {
        CleanShutdownFile {
            path: log_dir.join(CLEAN_SHUTDOWN_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// The current broker's exact bytes (Jackson serializing its `Content` class, field order).
    pub fn render(broker_epoch: i64) -> String {
        format!(
            "{{\"version\":{},\"brokerEpoch\":{broker_epoch}}}",
            Self::CURRENT_VERSION
        )
    }

    pub fn write(&self, broker_epoch: i64) -> Result<()> {
        atomic_write(&self.path, Self::render(broker_epoch).as_bytes())
    }

    /// `None` when there is no marker (an unclean shutdown, or a fresh directory).
    pub fn read(&self) -> Result<Option<CleanShutdown>> {
        let Some(text) = read_text(&self.path)? else {
            return Ok(None);
        };
        let fields = parse_flat_json(&text);
        let epoch = |key: &str| {
            fields
                .as_ref()
                .and_then(|m| m.get(key)?.parse::<i64>().ok())
        };
        Ok(Some(CleanShutdown {
            broker_epoch: epoch("brokerEpoch").or_else(|| epoch("broker_epoch")),
        }))
    }

    /// Removes the marker; a missing one is fine.
    pub fn remove(&self) -> Result<()> {
        match fs::remove_file(&self.path) {
            Ok(()) => sync_parent_dir(&self.path),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }
}

/// A flat JSON object whose values are strings or plain numbers (all the marker ever holds);
/// anything else is `None`. Escapes other than `\"` and `\\` are not needed and not accepted.
fn parse_flat_json(text: &str) -> Option<BTreeMap<String, String>> {
    let s = text.trim();
    let mut rest = s.strip_prefix('{')?.strip_suffix('}')?.trim();
    let mut map = BTreeMap::new();
    fn string(s: &str) -> Option<(String, &str)> {
        let s = s.strip_prefix('"')?;
        let mut out = String::new();
        let mut chars = s.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Some((out, &s[i + 1..])),
                '\\' => match chars.next()?.1 {
                    c @ ('"' | '\\') => out.push(c),
                    _ => return None,
                },
                c => out.push(c),
            }
        }
        None
    }
    while !rest.is_empty() {
        let (key, r) = string(rest)?;
        let r = r.trim_start().strip_prefix(':')?.trim_start();
        let (value, r) = if r.starts_with('"') {
            string(r)?
        } else {
            let end = r
                .find(|c: char| c == ',' || c.is_whitespace())
                .unwrap_or(r.len());
            let v = &r[..end];
            if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit() || c == '-') {
                return None;
            }
            (v.to_string(), &r[end..])
        };
        map.insert(key, value);
        let r = r.trim_start();
        rest = match r.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if r.is_empty() => r,
            None => return None,
        };
    }
    Some(map)
}
