//! Consumer groups over a local data dir (Kafka's `GroupCoordinator` and `OffsetCommit`, kept in
//! files instead of `__consumer_offsets`): committed offsets, the partition assignors, and the
//! membership protocol several consumers (threads or processes) use to share a topic's partitions.
//!
//! Layout: `groups/<group>/` in the data dir's kafkalog folder (`.<data dir name>.kafkalog`
//! beside the data dir: a broker refuses folders in its data dir not named `<topic>-<n>`) holds `offsets.json` (committed offsets),
//! `members.json` (members, generation, assignment, owners) and `lock` (an `flock` taken around
//! every read-modify-write of the two). Files are replaced atomically: written to a temporary
//! file, fsynced, renamed over the old one, and the folder fsynced, so a crash leaves either the
//! old or the new file, never a torn one.

pub mod assignor;
pub mod consumer;
pub mod membership;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use assignor::{assign, AssignmentStrategy, MemberSubscription, TopicPartition};

/// The folder of the data dir's kafkalog folder that holds its groups.
pub const GROUPS_DIR: &str = "groups";
const OFFSETS_FILE: &str = "offsets.json";
const LOCK_FILE: &str = "lock";
const FORMAT_VERSION: u32 = 1;
/// In a group folder whose name is shortened ([`group_folder_name`]): the group id it holds.
const GROUP_ID_FILE: &str = "group_id";
/// Escaped group ids longer than this are shortened: file systems allow 255 bytes a name.
const MAX_FOLDER_NAME: usize = 200;

/// Kafka's `OffsetAndMetadata` plus the commit time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    #[serde(default)]
    pub metadata: String,
    #[serde(default)]
    pub commit_timestamp: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct OffsetsFile {
    version: u32,
    group_id: String,
    offsets: Vec<CommittedOffset>,
}

/// A group id as a folder name: letters, digits, '.', '_' and '-' stay, any other byte is
/// `%XX` (so every group id, Kafka allows any string, has its own folder). A name past
/// `MAX_FOLDER_NAME` bytes keeps its start and ends in `~` and a 64-bit hash of the id (no
/// escaped name has a `~`); the folder then holds the id in a file of its own.
pub fn group_folder_name(group_id: &str) -> Result<String> {
    let mut out = escaped_group_id(group_id)?;
    if out.len() > MAX_FOLDER_NAME {
        let mut keep = MAX_FOLDER_NAME - 17;
        // Not inside a `%XX`.
        if let Some(p) = out[keep - 2..keep].find('%') {
            keep = keep - 2 + p;
        }
        out.truncate(keep);
        let hash = (u64::from(crate::checksum::crc32c(group_id.as_bytes())) << 32)
            | u64::from(crc32fast::hash(group_id.as_bytes()));
        out.push_str(&format!("~{hash:016x}"));
    }
    Ok(out)
}

fn escaped_group_id(group_id: &str) -> Result<String> {
    if group_id.is_empty() {
        return Err(Error::InvalidArgument("a group id cannot be empty".into()));
    }
    let mut out = String::new();
    for b in group_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && !out.is_empty()) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(out)
}

/// The group id a folder holds: decoded from its name, or read from its file when shortened.
fn group_id_of_folder(folder: &Path) -> Option<String> {
    let name = folder.file_name()?.to_str()?;
    if name.contains('~') {
        return std::fs::read_to_string(folder.join(GROUP_ID_FILE)).ok();
    }
    unescape_group_id(name)
}

fn unescape_group_id(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The kafkalog groups of a data dir (those with a folder), sorted.
pub fn list_groups(data_dir: &Path) -> Result<Vec<String>> {
    let root = crate::datadir::kafkalog_meta_dir(data_dir).join(GROUPS_DIR);
    let entries = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&root, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&root, e))?;
        if entry.path().is_dir() {
            if let Some(g) = group_id_of_folder(&entry.path()) {
                out.push(g);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Writes `bytes` to `path` atomically: temporary file, fsync, rename, fsync of the folder.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| Error::io(tmp.path(), e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// The exclusive group lock, released when dropped.
pub struct GroupLock {
    _file: File,
}

/// One kafkalog group of a data dir: its committed offsets and its folder.
#[derive(Debug, Clone)]
pub struct GroupStore {
    data_dir: PathBuf,
    group_id: String,
    dir: PathBuf,
}

impl GroupStore {
    /// The group `group_id` of `data_dir` (nothing is created until the first write).
    pub fn new(data_dir: &Path, group_id: &str) -> Result<Self> {
        let dir = crate::datadir::kafkalog_meta_dir(data_dir)
            .join(GROUPS_DIR)
            .join(group_folder_name(group_id)?);
        Ok(GroupStore {
            data_dir: data_dir.to_path_buf(),
            group_id: group_id.to_string(),
            dir,
        })
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Whether the group has a folder (anything was ever committed or joined).
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Takes the group's lock (blocking), creating the folder first.
    pub fn lock(&self) -> Result<GroupLock> {
        if !self.data_dir.is_dir() {
            return Err(Error::io(
                &self.data_dir,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such data dir"),
            ));
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let shortened = self
            .dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains('~'));
        if shortened && !self.dir.join(GROUP_ID_FILE).exists() {
            write_atomically(&self.dir.join(GROUP_ID_FILE), self.group_id.as_bytes())?;
        }
        let path = self.dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        file.lock().map_err(|e| Error::io(&path, e))?;
        Ok(GroupLock { _file: file })
    }

    /// The committed offsets, by topic and partition (empty for a group with none). Reads only.
    pub fn committed(&self) -> Result<BTreeMap<TopicPartition, CommittedOffset>> {
        let path = self.dir.join(OFFSETS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let file: OffsetsFile = serde_json::from_slice(&bytes).map_err(|e| {
            Error::corrupt(format!(
                "{} is not a kafkalog group offsets file: {e}",
                path.display()
            ))
        })?;
        if file.version != FORMAT_VERSION {
            return Err(Error::Unsupported(format!(
                "{} has format version {}; this kafkalog reads version {FORMAT_VERSION}",
                path.display(),
                file.version
            )));
        }
        Ok(file
            .offsets
            .into_iter()
            .map(|o| ((o.topic.clone(), o.partition), o))
            .collect())
    }

    /// Commits offsets (merged over the committed ones) atomically, under the group lock. A
    /// partition the data dir does not hold is refused, as Kafka's OffsetCommit answers
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn commit(&self, offsets: &[(TopicPartition, i64, String)]) -> Result<()> {
        if !offsets.is_empty() {
            let counts = crate::datadir::topic_partition_counts(&self.data_dir)?;
            for ((topic, partition), _, _) in offsets {
                if !counts
                    .get(topic)
                    .is_some_and(|&n| (0..n).contains(partition))
                {
                    return Err(Error::UnknownTopicOrPartition(format!(
                        "{topic}-{partition} is not in {}: no offset \
                         of it is committed",
                        self.data_dir.display()
                    )));
                }
            }
        }
        let lock = self.lock()?;
        self.commit_locked(&lock, offsets)
    }

    /// `commit` for a caller that already holds the group lock.
    pub fn commit_locked(
        &self,
        _lock: &GroupLock,
        offsets: &[(TopicPartition, i64, String)],
    ) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let mut all = self.committed()?;
        let now = crate::log::system_clock()();
        for ((topic, partition), offset, metadata) in offsets {
            if *offset < 0 {
                return Err(Error::InvalidArgument(format!(
                    "offset {offset} for {topic}-{partition}: a committed offset is >= 0"
                )));
            }
            all.insert(
                (topic.clone(), *partition),
                CommittedOffset {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                    metadata: metadata.clone(),
                    commit_timestamp: now,
                },
            );
        }
        let file = OffsetsFile {
            version: FORMAT_VERSION,
            group_id: self.group_id.clone(),
            offsets: all.into_values().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("plain data serializes");
        write_atomically(&self.dir.join(OFFSETS_FILE), &bytes)
    }
}

const READS_FILE: &str = "reads.json";

/// Pieces of batch reads (Spark tasks) finished so far, per read and partition.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ReadsFile {
    /// read id -> "topic/partition" -> finished pieces [start, end)
    reads: BTreeMap<String, BTreeMap<String, Vec<(i64, i64)>>>,
}

/// Records that a piece [start, end) of a batch read of `tp` (whose whole range is `range`)
/// was read, and commits the end of the pieces that now run contiguously from the range's start
/// (pieces finish in any order; a gap holds the commit back). A partition's entry is dropped once
/// its whole range is committed. Returns the offset committed by this call, if any.
pub fn read_piece_done(
    store: &GroupStore,
    read_id: &str,
    tp: &TopicPartition,
    range: (i64, i64),
    piece: (i64, i64),
) -> Result<Option<i64>> {
    if piece.0 < range.0 || piece.1 > range.1 || piece.0 > piece.1 {
        return Err(Error::InvalidArgument(format!(
            "piece {piece:?} of {}-{} is outside its read range {range:?}",
            tp.0, tp.1
        )));
    }
    let lock = store.lock()?;
    let path = store.dir().join(READS_FILE);
    let mut reads: ReadsFile = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::corrupt(format!(
                "{} is not a kafkalog reads file: {e}",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ReadsFile::default(),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let key = format!("{}/{}", tp.0, tp.1);
    let entry = reads.reads.entry(read_id.to_string()).or_default();
    let pieces = entry.entry(key.clone()).or_default();
    pieces.push(piece);
    pieces.sort_unstable();
    let mut end = range.0;
    for &(s, e) in pieces.iter() {
        if s > end {
            break;
        }
        end = end.max(e);
    }
    let committed = (end > range.0 || range.0 == range.1).then_some(end);
    if let Some(offset) = committed {
        store.commit_locked(&lock, &[(tp.clone(), offset, String::new())])?;
    }
    if end >= range.1 {
        entry.remove(&key);
        if entry.is_empty() {
            reads.reads.remove(read_id);
        }
    }
    let bytes = serde_json::to_vec_pretty(&reads).expect("plain data serializes");
    write_atomically(&path, &bytes)?;
    Ok(committed)
}

/// The refusal of a producer's or consumer's use in a child forked from the process that made
/// it (`owner_pid`): the parent goes on with the original, writing the same logs and group
/// files, so the two would overwrite each other's records and commits.
pub(crate) fn refuse_in_a_fork(owner_pid: u32, what: &str) -> Result<()> {
    if owner_pid == std::process::id() {
        return Ok(());
    }
    Err(Error::ConcurrentWriter(format!(
        "{what} was made by process {owner_pid}, and this process ({}) is a child forked from \
         it: a forked child cannot use its parent's (one writer per log, one member per \
         consumer); make one in the child",
        std::process::id()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_round_trip_through_folder_names() {
        for g in ["g", "my.group", "a/b c", "ü", ".hidden", ".."] {
            let f = group_folder_name(g).unwrap();
            assert!(!f.contains('/') && !f.starts_with('.'), "{f}");
            assert_eq!(unescape_group_id(&f).unwrap(), g);
        }
        assert!(group_folder_name("").is_err());
    }

    #[test]
    fn long_group_ids_get_short_folders_of_their_own() {
        // Kafka takes a group id of any length; a file name takes 255 bytes.
        let dir = tempfile::tempdir().unwrap();
        let ids = [
            "g".repeat(300),
            format!("{}h", "g".repeat(299)),
            "ü".repeat(150),
            format!("{}/x", "a".repeat(181)),
        ];
        crate::datadir::create_topic(dir.path(), "t", 2).unwrap();
        for (i, id) in ids.iter().enumerate() {
            let folder = group_folder_name(id).unwrap();
            assert!(folder.len() <= MAX_FOLDER_NAME, "{}", folder.len());
            assert!(!folder.contains('/'));
            let g = GroupStore::new(dir.path(), id).unwrap();
            g.commit(&[(("t".into(), 0), i as i64, String::new())])
                .unwrap();
        }
        let mut sorted = ids.to_vec();
        sorted.sort();
        assert_eq!(list_groups(dir.path()).unwrap(), sorted);
        for (i, id) in ids.iter().enumerate() {
            let g = GroupStore::new(dir.path(), id).unwrap();
            assert_eq!(g.committed().unwrap()[&("t".into(), 0)].offset, i as i64);
        }
    }

    #[test]
    fn commits_merge_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let g = GroupStore::new(dir.path(), "g").unwrap();
        assert!(g.committed().unwrap().is_empty());
        // A partition the data dir does not hold (Kafka's UNKNOWN_TOPIC_OR_PARTITION).
        let unknown = g.commit(&[(("t".into(), 0), 5, String::new())]);
        assert!(
            unknown.is_err_and(|e| e.to_string().contains("UnknownTopicOrPartition")),
            "a black-box tester's commit to a partition that is not there was taken"
        );
        crate::datadir::create_topic(dir.path(), "t", 2).unwrap();
        assert!(g.commit(&[(("t".into(), 2), 5, String::new())]).is_err());
        assert!(g.committed().unwrap().is_empty());
        g.commit(&[(("t".into(), 0), 5, "m".into())]).unwrap();
        g.commit(&[(("t".into(), 1), 7, String::new())]).unwrap();
        let c = GroupStore::new(dir.path(), "g")
            .unwrap()
            .committed()
            .unwrap();
        assert_eq!(c[&("t".to_string(), 0)].offset, 5);
        assert_eq!(c[&("t".to_string(), 0)].metadata, "m");
        assert_eq!(c[&("t".to_string(), 1)].offset, 7);
        assert_eq!(list_groups(dir.path()).unwrap(), vec!["g".to_string()]);
        assert!(g.commit(&[(("t".into(), 0), -1, String::new())]).is_err());
    }

    #[test]
    fn read_pieces_commit_only_contiguously() {
        let dir = tempfile::tempdir().unwrap();
        let g = GroupStore::new(dir.path(), "g").unwrap();
        let tp = ("t".to_string(), 0);
        assert_eq!(
            read_piece_done(&g, "r", &tp, (10, 40), (20, 30)).unwrap(),
            None
        );
        assert!(!g.committed().unwrap().contains_key(&tp));
        assert_eq!(
            read_piece_done(&g, "r", &tp, (10, 40), (10, 20)).unwrap(),
            Some(30)
        );
        assert_eq!(
            read_piece_done(&g, "r", &tp, (10, 40), (30, 40)).unwrap(),
            Some(40)
        );
        assert_eq!(g.committed().unwrap()[&tp].offset, 40);
        assert!(read_piece_done(&g, "r", &tp, (10, 40), (5, 20)).is_err());
    }
}
