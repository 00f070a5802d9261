//! Kafka's `OffsetCheckpointFile`: `<topic> <partition> <offset>` lines per log dir.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint_file::fields;
use super::{CheckpointEntry, CheckpointFile, CHECKPOINT_VERSION};
use crate::error::Result;

/// One line of an offset checkpoint: `<topic> <partition> <offset>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl CheckpointEntry for TopicPartitionOffset {
    fn format(&self) -> String {
        format!("{} {} {}", self.topic, self.partition, self.offset)
    }
    fn parse(line: &str) -> Option<Self> {
        match fields(line).as_slice() {
            [topic, partition, offset] if !topic.is_empty() => Some(TopicPartitionOffset {
                topic: topic.to_string(),
                partition: partition.parse().ok()?,
                offset: offset.parse().ok()?,
            }),
            _ => None,
        }
    }
}

pub type OffsetMap = BTreeMap<(String, i32), i64>;

/// Kafka's `OffsetCheckpointFile`: the per-log-dir recovery point, log start offset and high
/// watermark checkpoints, keyed by (topic, partition).
#[derive(Debug, Clone)]
pub struct OffsetCheckpointFile {
    file: CheckpointFile,
}

impl OffsetCheckpointFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        OffsetCheckpointFile {
            file: CheckpointFile::new(path, CHECKPOINT_VERSION),
        }
    }

    /// The named checkpoint (e.g. [`RECOVERY_POINT_CHECKPOINT_FILE`]) in a broker log directory.
    pub fn in_log_dir(log_dir: &Path, name: &str) -> Self {
        Self::new(log_dir.join(name))
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Every line, in the file's order (a partition may repeat, as only a damaged file has it).
    pub fn read_lines(&self) -> Result<Vec<((String, i32), i64)>> {
        Ok(self
            .file
            .read::<TopicPartitionOffset>()?
            .into_iter()
            .map(|e| ((e.topic, e.partition), e.offset))
            .collect())
    }

    /// Later lines win on a repeated partition, as with Kafka's `HashMap.put`.
    pub fn read(&self) -> Result<OffsetMap> {
        Ok(self.read_lines()?.into_iter().collect())
    }

    pub fn write(&self, offsets: &OffsetMap) -> Result<()> {
        self.file.write(&Self::entries(offsets))
    }

    /// Sets one partition's offset (or removes it with `None`), keeping every other entry.
    pub fn update(&self, topic: &str, partition: i32, offset: Option<i64>) -> Result<()> {
        let mut map = self.read()?;
        match offset {
            Some(o) => map.insert((topic.to_string(), partition), o),
            None => map.remove(&(topic.to_string(), partition)),
        };
        self.write(&map)
    }

    fn entries(offsets: &OffsetMap) -> Vec<TopicPartitionOffset> {
        offsets
            .iter()
            .map(|((topic, partition), offset)| TopicPartitionOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
            })
            .collect()
    }
}
