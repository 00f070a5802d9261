//! Kafka's `CleanShutdownFileHandler`: the `.kafka_cleanshutdown` marker of a broker log dir.

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
        // Kafka goes by the marker being there: one that is not UTF-8 still means a clean
        // shutdown, epoch unknown (it made every read of the log dir fail).
        let text = match read_text(&self.path) {
            Ok(None) => return Ok(None),
            Ok(Some(text)) => text,
            Err(Error::CorruptRecord { .. }) => String::new(),
            Err(e) => return Err(e),
        };
        // Either marker form: the epoch is a JSON number (current) or a string (the 3.5-era map);
        // a marker that is not a JSON object still means a clean shutdown, epoch unknown.
        let fields = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text).ok();
        let epoch = |key: &str| match fields.as_ref()?.get(key)? {
            serde_json::Value::Number(n) => n.as_i64(),
            serde_json::Value::String(s) => s.parse::<i64>().ok(),
            _ => None,
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
