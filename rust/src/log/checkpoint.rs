//! Kafka's small text state files: the generic `CheckpointFile` (version line, count line, one entry
//! per line) with `OffsetCheckpointFile`, plus `PartitionMetadataFile` (`partition.metadata`), the
//! `.kafka_cleanshutdown` marker (`CleanShutdownFileHandler`) and partition directory names.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

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

/// Writes `bytes` to `path` so that a crash leaves either the old or the new file, never a torn one:
/// `<path>.tmp`, fsync, rename over `path`, fsync the directory (Kafka's `atomicMoveWithFallback`).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
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

/// Reads a file as UTF-8, `None` when it does not exist.
fn read_text(path: &Path) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            Error::corrupt(format!("{} is not valid UTF-8", path.display())).in_file(path)
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn malformed(path: &Path, line_no: usize, line: &str, why: &str) -> Error {
    Error::corrupt(format!(
        "malformed line {line_no} in checkpoint file {}: {line:?} ({why})",
        path.display()
    ))
    .in_file(path)
}

/// Splits like Java's `line.split("\\s+")`: a leading blank yields an empty first field, which
/// makes the entry malformed, as it does in Kafka.
fn fields(line: &str) -> Vec<&str> {
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

    /// Later lines win on a repeated partition, as with Kafka's `HashMap.put`.
    pub fn read(&self) -> Result<OffsetMap> {
        Ok(self
            .file
            .read::<TopicPartitionOffset>()?
            .into_iter()
            .map(|e| ((e.topic, e.partition), e.offset))
            .collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn offset_checkpoint_round_trip_and_exact_bytes() {
        let dir = tmp();
        let f = OffsetCheckpointFile::in_log_dir(dir.path(), RECOVERY_POINT_CHECKPOINT_FILE);
        assert!(f.read().unwrap().is_empty(), "missing file reads as empty");
        let mut m = OffsetMap::new();
        m.insert(("my-topic".into(), 3), 120);
        m.insert(("__consumer_offsets".into(), 0), 0);
        f.write(&m).unwrap();
        let text = fs::read_to_string(f.path()).unwrap();
        assert_eq!(text, "0\n2\n__consumer_offsets 0 0\nmy-topic 3 120\n");
        assert_eq!(f.read().unwrap(), m);
        assert!(!dir
            .path()
            .join("recovery-point-offset-checkpoint.tmp")
            .exists());

        f.update("my-topic", 3, Some(200)).unwrap();
        f.update("other", 1, Some(5)).unwrap();
        f.update("__consumer_offsets", 0, None).unwrap();
        let got = f.read().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[&("my-topic".to_string(), 3)], 200);
        assert_eq!(got[&("other".to_string(), 1)], 5);
    }

    #[test]
    fn parses_broker_written_checkpoint() {
        // Verbatim from a Kafka 4.4.0 broker's log dir (HashMap order, '\n' line ends).
        let text = "0\n3\n__transaction_state 0 10\nmy-topic.x 1 2\nmy-topic.x 0 31\n";
        let got: Vec<TopicPartitionOffset> =
            CheckpointFile::parse(Path::new("x"), 0, text).unwrap();
        assert_eq!(
            got[2],
            TopicPartitionOffset {
                topic: "my-topic.x".into(),
                partition: 0,
                offset: 31
            }
        );
        let dir = tmp();
        fs::write(dir.path().join(REPLICATION_OFFSET_CHECKPOINT_FILE), text).unwrap();
        let f = OffsetCheckpointFile::in_log_dir(dir.path(), REPLICATION_OFFSET_CHECKPOINT_FILE);
        let map = f.read().unwrap();
        assert_eq!(map[&("__transaction_state".to_string(), 0)], 10);
        // Its log-start-offset-checkpoint with no entries.
        assert!(
            CheckpointFile::parse::<TopicPartitionOffset>(Path::new("x"), 0, "0\n0\n")
                .unwrap()
                .is_empty()
        );
        // Kafka's `\s+` split accepts runs of spaces and tabs between fields.
        let got: Vec<TopicPartitionOffset> =
            CheckpointFile::parse(Path::new("x"), 0, "0\n1\nt  2\t9\n").unwrap();
        assert_eq!(got[0].offset, 9);
        // An empty file and a version-only file are empty, as Kafka reads them.
        assert!(
            CheckpointFile::parse::<TopicPartitionOffset>(Path::new("x"), 0, "")
                .unwrap()
                .is_empty()
        );
        assert!(
            CheckpointFile::parse::<TopicPartitionOffset>(Path::new("x"), 0, "0\n")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn malformed_checkpoints_name_file_and_line() {
        let p = Path::new("/logs/recovery-point-offset-checkpoint");
        let err = |text: &str| {
            CheckpointFile::parse::<TopicPartitionOffset>(p, 0, text)
                .unwrap_err()
                .to_string()
        };
        let e = err("1\n0\n");
        assert!(
            e.contains("unrecognised version 1") && e.contains("recovery-point-offset-checkpoint"),
            "{e}"
        );
        assert!(err("x\n").contains("line 1"));
        assert!(err("0\nzz\n").contains("line 2"));
        assert!(err("0\n-1\n").contains("line 2"));
        let e = err("0\n2\nt 0 1\nt 1\n");
        assert!(e.contains("line 4") && e.contains("\"t 1\""), "{e}");
        assert!(err("0\n1\n t 0 1\n").contains("line 3"));
        assert!(err("0\n1\nt x 1\n").contains("line 3"));
        assert!(err("0\n1\n\n").contains("line 3"));
        let e = err("0\n3\nt 0 1\n");
        assert!(
            e.contains("expected 3 entries") && e.contains("found 1"),
            "{e}"
        );
        // A huge count is just a mismatch, never an allocation.
        assert!(err("0\n2147483647\nt 0 1\n").contains("expected 2147483647"));
    }

    #[test]
    fn uuid_base64url() {
        // Kafka's Uuid(0x123..., ...) renders as unpadded base64url of the 16 big-endian bytes.
        let id = Uuid(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        assert_eq!(id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!(Uuid::parse("ASNFZ4mrze_-3LqYdlQyEA"), Some(id));
        assert_eq!(Uuid::parse("AAAAAAAAAAAAAAAAAAAAAA"), Some(Uuid::ZERO));
        assert_eq!(
            Uuid::parse("ASNFZ4mrze_-3LqYdlQyEB"),
            None,
            "non-zero pad bits"
        );
        assert_eq!(Uuid::parse("ASNFZ4mrze_-3LqYdlQyE"), None);
        assert_eq!(
            Uuid::parse("ASNFZ4mrze+/3LqYdlQyEA"),
            None,
            "standard alphabet"
        );
        for v in [1u128, u128::MAX, 0xdead_beef << 64] {
            assert_eq!(Uuid::parse(&Uuid(v).to_string()), Some(Uuid(v)));
        }
    }

    #[test]
    fn partition_metadata_round_trip() {
        let dir = tmp();
        let f = PartitionMetadataFile::in_dir(dir.path());
        assert_eq!(f.read().unwrap(), None);
        let id = Uuid::parse("ASNFZ4mrze_-3LqYdlQyEA").unwrap();
        f.write(id).unwrap();
        assert_eq!(
            fs::read_to_string(f.path()).unwrap(),
            "version: 0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA"
        );
        assert_eq!(f.read().unwrap(), Some(id));
        assert!(f.write(Uuid::ZERO).is_err());
        // Verbatim from a Kafka 4.4.0 broker, and with a trailing newline some tools add.
        let p = Path::new("partition.metadata");
        let real = PartitionMetadataFile::parse(p, "version: 0\ntopic_id: JwtkD3LKRbeUc4ol_YRygA")
            .unwrap();
        assert_eq!(
            PartitionMetadataFile::render(real),
            "version: 0\ntopic_id: JwtkD3LKRbeUc4ol_YRygA"
        );
        assert_eq!(
            PartitionMetadataFile::parse(p, "version: 0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA\n")
                .unwrap(),
            id
        );
        for (text, line) in [
            ("version: 1\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA", "line 1"),
            ("version:0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA", "line 1"),
            ("", "line 1"),
            ("version: 0\n", "line 2"),
            ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "line 2"),
            ("version: 0\ntopic_id: nope", "line 2"),
        ] {
            let e = PartitionMetadataFile::parse(p, text)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(line) && e.contains("partition.metadata"),
                "{text:?}: {e}"
            );
        }
    }

    #[test]
    fn clean_shutdown_marker() {
        let dir = tmp();
        let f = CleanShutdownFile::in_log_dir(dir.path());
        assert_eq!(f.read().unwrap(), None);
        f.write(42).unwrap();
        // Byte for byte what a Kafka 4.4 broker left on clean shutdown (epoch 12 there).
        assert_eq!(
            fs::read_to_string(f.path()).unwrap(),
            r#"{"version":0,"brokerEpoch":42}"#
        );
        assert_eq!(
            CleanShutdownFile::render(12),
            r#"{"version":0,"brokerEpoch":12}"#
        );
        assert_eq!(
            f.read().unwrap(),
            Some(CleanShutdown {
                broker_epoch: Some(42)
            })
        );
        // The 3.5-era string map.
        fs::write(f.path(), r#"{"broker_epoch":"9","version":"0"}"#).unwrap();
        assert_eq!(
            f.read().unwrap(),
            Some(CleanShutdown {
                broker_epoch: Some(9)
            })
        );
        // Pre-3.5 brokers leave an empty marker: still a clean shutdown, epoch unknown.
        fs::write(f.path(), "").unwrap();
        assert_eq!(
            f.read().unwrap(),
            Some(CleanShutdown { broker_epoch: None })
        );
        fs::write(f.path(), "{ \"version\" : \"0\", \"broker_epoch\": 7 }").unwrap();
        assert_eq!(
            f.read().unwrap(),
            Some(CleanShutdown {
                broker_epoch: Some(7)
            })
        );
        fs::write(f.path(), "{garbage").unwrap();
        assert_eq!(
            f.read().unwrap(),
            Some(CleanShutdown { broker_epoch: None })
        );
        f.remove().unwrap();
        assert!(!f.exists());
        f.remove().unwrap();
    }

    #[test]
    fn partition_dir_names() {
        assert_eq!(
            parse_topic_partition("my-topic-3"),
            Some(("my-topic".into(), 3))
        );
        assert_eq!(
            parse_topic_partition("a.b-c-12"),
            Some(("a.b-c".into(), 12))
        );
        assert_eq!(
            parse_topic_partition("topic--1"),
            Some(("topic-".into(), 1)),
            "a topic may end in -"
        );
        assert_eq!(
            parse_topic_partition("__consumer_offsets-49"),
            Some(("__consumer_offsets".into(), 49))
        );
        for bad in [
            "topic",
            "-3",
            "topic-",
            "topic-x",
            "topic-+1",
            "recovery-point-offset-checkpoint",
            "t-99999999999",
        ] {
            assert_eq!(parse_topic_partition(bad), None, "{bad}");
        }
        let d = parse_partition_dir("my-topic-3.0123456789abcdef0123456789abcdef-delete").unwrap();
        assert_eq!(
            (d.topic.as_str(), d.partition, d.kind),
            ("my-topic", 3, PartitionDirKind::Delete)
        );
        let d = parse_partition_dir("a.b-0.0123456789abcdef0123456789abcdef-future").unwrap();
        assert_eq!(
            (d.topic.as_str(), d.partition, d.kind),
            ("a.b", 0, PartitionDirKind::Future)
        );
        assert_eq!(
            parse_partition_dir("t-1.abc-stray").unwrap().kind,
            PartitionDirKind::Stray
        );
        assert_eq!(parse_topic_partition("t-1.abc-stray"), None);
        assert_eq!(parse_partition_dir("t-1-delete"), None, "no unique id");
    }
}
