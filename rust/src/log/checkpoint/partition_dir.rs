//! Partition directory names (Kafka's `LocalLog.parseTopicPartitionName`).

use super::{DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX};

/// What kind of partition directory a name denotes (Kafka's `LocalLog.parseTopicPartitionName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionDirKind {
    /// `<topic>-<partition>`: a live log.
    Live,
    /// `<topic>-<partition>.<uuid>-delete`: renamed for asynchronous deletion.
    Delete,
    /// `<topic>-<partition>.<uuid>-future`: the target of an in-progress move between log dirs.
    Future,
    /// `<topic>-<partition>.<uuid>-stray`: a log the controller no longer assigns here.
    Stray,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDir {
    pub topic: String,
    pub partition: i32,
    pub kind: PartitionDirKind,
}

/// Parses a partition directory name. Topic names may contain `-` and `.`, so the partition is
/// what follows the last `-` (before the `.<uuid>` of a suffixed directory). `None` for anything
/// else (a checkpoint file, `__cluster_metadata-0` parses as a normal partition).
pub fn parse_partition_dir(name: &str) -> Option<PartitionDir> {
    let suffixed = [
        (DELETE_DIR_SUFFIX, PartitionDirKind::Delete),
        (FUTURE_DIR_SUFFIX, PartitionDirKind::Future),
        (STRAY_DIR_SUFFIX, PartitionDirKind::Stray),
    ];
    let (base, kind) = match suffixed
        .iter()
        .find_map(|(sfx, k)| Some((name.strip_suffix(sfx)?, *k)))
    {
        Some((stem, kind)) => {
            // `topic-partition.uniqueId`: the id holds no `.` (32 hex chars, no dashes).
            let (base, id) = stem.rsplit_once('.')?;
            if id.is_empty() || id.contains(char::is_whitespace) {
                return None;
            }
            (base, kind)
        }
        None => (name, PartitionDirKind::Live),
    };
    let (topic, partition) = base.rsplit_once('-')?;
    if topic.is_empty()
        || topic.contains(char::is_whitespace)
        || !partition.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let partition: i32 = partition.parse().ok()?;
    Some(PartitionDir {
        topic: topic.to_string(),
        partition,
        kind,
    })
}

/// `(topic, partition)` of a live partition directory name such as `my-topic-3`; `None` for
/// anything else, including `-delete`/`-future`/`-stray` directories (see [`parse_partition_dir`]).
pub fn parse_topic_partition(dir_name: &str) -> Option<(String, i32)> {
    parse_partition_dir(dir_name)
        .filter(|d| d.kind == PartitionDirKind::Live)
        .map(|d| (d.topic, d.partition))
}
