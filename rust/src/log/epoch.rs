//! Kafka's `LeaderEpochFileCache` over `LeaderEpochCheckpointFile`: the start offset of every leader
//! epoch in a partition, persisted as `leader-epoch-checkpoint` (checkpoint version 0, lines
//! `<epoch> <start_offset>`), used for follower truncation (`OffsetsForLeaderEpoch`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::log::checkpoint::{CheckpointEntry, CheckpointFile, CHECKPOINT_VERSION};

pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// `OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// Kafka's `EpochEntry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

impl CheckpointEntry for EpochEntry {
    fn format(&self) -> String {
        format!("{} {}", self.epoch, self.start_offset)
    }
    fn parse(line: &str) -> Option<Self> {
        if line.starts_with(char::is_whitespace) {
            return None;
        }
        let mut it = line.split_whitespace();
        let (epoch, start_offset) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?);
        it.next().is_none().then_some(EpochEntry {
            epoch,
            start_offset,
        })
    }
}

#[derive(Debug)]
pub struct LeaderEpochFileCache {
    checkpoint: CheckpointFile,
    read_only: bool,
    /// epoch -> start offset; both strictly increase together.
    epochs: BTreeMap<i32, i64>,
}

impl LeaderEpochFileCache {
    /// Opens the cache of a partition directory. Entries are re-applied through `assign`'s rules,
    /// as Kafka's constructor does, so a non-monotonic file is repaired in memory. When writable a
    /// missing checkpoint is created empty, as a broker's `CheckpointFile` does; read-only never
    /// touches the disk beyond reading.
    pub fn open(partition_dir: &Path, read_only: bool) -> Result<Self> {
        Self::open_file(partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE), read_only)
    }

    pub fn open_file(path: impl Into<PathBuf>, read_only: bool) -> Result<Self> {
        let checkpoint = CheckpointFile::new(path, CHECKPOINT_VERSION);
        if !read_only {
            checkpoint.create_if_missing()?;
        }
        let mut cache = LeaderEpochFileCache {
            checkpoint,
            read_only,
            epochs: BTreeMap::new(),
        };
        for e in cache.checkpoint.read::<EpochEntry>()? {
            cache.assign_in_memory(e).map_err(|err| {
                Error::corrupt(format!("{err} in {}", cache.checkpoint.path().display()))
                    .in_file(cache.checkpoint.path())
            })?;
        }
        Ok(cache)
    }

    /// A read-only cache that knows no epoch, in place of a checkpoint that does not parse (a
    /// read-only view that skips damage reads on without it).
    pub fn empty_read_only(partition_dir: &Path) -> Self {
        LeaderEpochFileCache {
            checkpoint: CheckpointFile::new(
                partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
                CHECKPOINT_VERSION,
            ),
            read_only: true,
            epochs: BTreeMap::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.checkpoint.path()
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Assigns `epoch` to start at `start_offset` and writes the checkpoint when anything changed
    /// (Kafka flushes assignments synchronously so the file never misses an entry). Ignored when
    /// `epoch` is already the latest epoch and `start_offset` is not lower than its start. Entries
    /// with an epoch >= `epoch` or a start offset >= `start_offset` are dropped first. Returns
    /// whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        let changed = self.assign_in_memory(EpochEntry {
            epoch,
            start_offset,
        })?;
        if changed {
            self.write_through()?;
        }
        Ok(changed)
    }

    /// Kafka's `assign(List<EpochEntry>)`: applies all, then writes once (if any were given).
    pub fn assign_all(&mut self, entries: &[EpochEntry]) -> Result<()> {
        for e in entries {
            self.assign_in_memory(*e)?;
        }
        if !entries.is_empty() {
            self.write_through()?;
        }
        Ok(())
    }

    fn assign_in_memory(&mut self, entry: EpochEntry) -> Result<bool> {
        if entry.epoch < 0 || entry.start_offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "invalid partition leader epoch entry (epoch {}, start offset {})",
                entry.epoch, entry.start_offset
            )));
        }
        let needed = match self.latest_entry() {
            Some(latest) => entry.epoch != latest.epoch || entry.start_offset < latest.start_offset,
            None => true,
        };
        if !needed {
            return Ok(false);
        }
        // Remove from the end every entry that would break monotonicity with the new one.
        while let Some((&e, &o)) = self.epochs.last_key_value() {
            if e >= entry.epoch || o >= entry.start_offset {
                self.epochs.remove(&e);
            } else {
                break;
            }
        }
        self.epochs.insert(entry.epoch, entry.start_offset);
        Ok(true)
    }

    pub fn is_empty(&self) -> bool {
        self.epochs.is_empty()
    }

    pub fn entries(&self) -> Vec<EpochEntry> {
        self.epochs
            .iter()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.epochs
            .last_key_value()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
    }

    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.epochs
            .first_key_value()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.latest_entry().map(|e| e.epoch)
    }

    /// The epoch before the latest one.
    pub fn previous_epoch(&self) -> Option<i32> {
        let latest = self.latest_epoch()?;
        self.epochs.range(..latest).next_back().map(|(&e, _)| e)
    }

    pub fn epoch_entry(&self, epoch: i32) -> Option<EpochEntry> {
        self.epochs.get(&epoch).map(|&start_offset| EpochEntry {
            epoch,
            start_offset,
        })
    }

    /// Kafka's `endOffsetFor`: `(epoch, end offset)` for a requested epoch. The latest epoch ends
    /// at the log end offset; an older one at the start of the next higher cached epoch, reported
    /// with the largest cached epoch <= the requested one (or the requested epoch itself when it
    /// predates the cache). `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` for an undefined or
    /// unknown-future epoch.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if requested_epoch == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let higher = requested_epoch
            .checked_add(1)
            .and_then(|from| self.epochs.range(from..).next());
        let Some((_, &higher_start)) = higher else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.epochs.range(..=requested_epoch).next_back() {
            None => (requested_epoch, higher_start),
            Some((&floor_epoch, _)) => (floor_epoch, higher_start),
        }
    }

    /// Removes every entry starting at or after `end_offset` (a log truncated to `end_offset`).
    /// Returns whether anything was removed; writes the checkpoint if so.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<bool> {
        let removed = truncate_from_end(&mut self.epochs, end_offset);
        if removed {
            self.write_through()?;
        }
        Ok(removed)
    }

    /// Drops entries wholly before `start_offset`: every entry starting at or before it is removed
    /// and the last of them is kept, moved to start at `start_offset` (so `truncate_from_start(6)`
    /// keeps an entry at 6). Writes the checkpoint if anything changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<bool> {
        let removed = truncate_from_start(&mut self.epochs, start_offset);
        if removed {
            self.write_through()?;
        }
        Ok(removed)
    }

    /// The epoch of the leader that wrote `offset`: the epoch of the last entry starting at or
    /// before it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let mut previous = None;
        for (&epoch, &start) in &self.epochs {
            if start == offset {
                return Some(epoch);
            }
            if start > offset {
                return previous;
            }
            previous = Some(epoch);
        }
        previous
    }

    /// Entries covering `[start_offset, end_offset)`, as Kafka's `epochEntriesInRange`.
    pub fn epoch_entries_in_range(&self, start_offset: i64, end_offset: i64) -> Vec<EpochEntry> {
        let mut copy = self.epochs.clone();
        if start_offset >= 0 {
            truncate_from_start(&mut copy, start_offset);
        }
        truncate_from_end(&mut copy, end_offset);
        copy.into_iter()
            .map(|(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    /// Empties the cache and the checkpoint (Kafka's `clearAndFlush`).
    pub fn clear_and_flush(&mut self) -> Result<()> {
        self.epochs.clear();
        self.flush()
    }

    /// Empties the cache in memory only.
    pub fn clear(&mut self) {
        self.epochs.clear();
    }

    /// Writes the checkpoint atomically. `ReadOnly` in read-only mode.
    pub fn flush(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly(format!(
                "cannot write {}",
                self.checkpoint.path().display()
            )));
        }
        self.checkpoint.write(&self.entries())
    }

    /// Mutations persist immediately when writable; a read-only cache changes in memory only, so
    /// a read-only log load can apply the same truncations without touching the disk.
    fn write_through(&self) -> Result<()> {
        if self.read_only {
            Ok(())
        } else {
            self.flush()
        }
    }
}

fn truncate_from_end(epochs: &mut BTreeMap<i32, i64>, end_offset: i64) -> bool {
    let mut removed = false;
    if end_offset >= 0 {
        while let Some((&e, &o)) = epochs.last_key_value() {
            if o < end_offset {
                break;
            }
            epochs.remove(&e);
            removed = true;
        }
    }
    removed
}

fn truncate_from_start(epochs: &mut BTreeMap<i32, i64>, start_offset: i64) -> bool {
    let mut last_removed = None;
    while let Some((&e, &o)) = epochs.first_key_value() {
        if o > start_offset {
            break;
        }
        epochs.remove(&e);
        last_removed = Some(e);
    }
    match last_removed {
        Some(e) => {
            epochs.insert(e, start_offset);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn cache() -> (tempfile::TempDir, LeaderEpochFileCache) {
        let dir = tempfile::tempdir().unwrap();
        let c = LeaderEpochFileCache::open(dir.path(), false).unwrap();
        (dir, c)
    }

    fn pairs(c: &LeaderEpochFileCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn open_creates_empty_checkpoint_and_assign_persists() {
        let (dir, mut c) = cache();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
        assert_eq!(fs::read(&path).unwrap(), b"", "created empty like a broker");
        assert!(c.assign(0, 0).unwrap());
        assert!(c.assign(2, 10).unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\n0 0\n2 10\n");
        // A broker's file after its first leader election: "0\n1\n0 0\n".
        fs::write(&path, "0\n1\n0 0\n").unwrap();
        assert_eq!(
            pairs(&LeaderEpochFileCache::open(dir.path(), true).unwrap()),
            vec![(0, 0)]
        );
        c.flush().unwrap();
        let again = LeaderEpochFileCache::open(dir.path(), false).unwrap();
        assert_eq!(pairs(&again), vec![(0, 0), (2, 10)]);
    }

    #[test]
    fn assign_rules() {
        let (_d, mut c) = cache();
        c.assign(2, 6).unwrap();
        // Same epoch, same or later offset: nothing to do.
        assert!(!c.assign(2, 6).unwrap());
        assert!(!c.assign(2, 9).unwrap());
        // Same epoch at an earlier offset moves its start back.
        assert!(c.assign(2, 4).unwrap());
        assert_eq!(pairs(&c), vec![(2, 4)]);
        c.assign(3, 8).unwrap();
        c.assign(4, 11).unwrap();
        // A larger epoch at an offset <= existing starts truncates the conflicting entries.
        assert!(c.assign(5, 8).unwrap());
        assert_eq!(pairs(&c), vec![(2, 4), (5, 8)]);
        // A smaller epoch removes every larger-or-equal epoch.
        assert!(c.assign(3, 20).unwrap());
        assert_eq!(pairs(&c), vec![(2, 4), (3, 20)]);
        assert!(c.assign(-1, 0).is_err());
        assert!(c.assign(1, -1).is_err());
    }

    #[test]
    fn end_offset_for_rules() {
        let (_d, mut c) = cache();
        assert_eq!(
            c.end_offset_for(0, 100),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        c.assign(2, 6).unwrap();
        c.assign(4, 11).unwrap();
        c.assign(7, 20).unwrap();
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, 100),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(
            c.end_offset_for(7, 100),
            (7, 100),
            "latest epoch ends at the LEO"
        );
        assert_eq!(c.end_offset_for(4, 100), (4, 20));
        assert_eq!(
            c.end_offset_for(5, 100),
            (4, 20),
            "missing epoch reports the floor epoch"
        );
        assert_eq!(
            c.end_offset_for(1, 100),
            (1, 6),
            "epoch before the cache ends at the first start"
        );
        assert_eq!(
            c.end_offset_for(8, 100),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(
            c.end_offset_for(i32::MAX, 100),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
    }

    #[test]
    fn truncation_and_epoch_for_offset() {
        let (dir, mut c) = cache();
        c.assign_all(&[
            EpochEntry {
                epoch: 2,
                start_offset: 6,
            },
            EpochEntry {
                epoch: 3,
                start_offset: 8,
            },
            EpochEntry {
                epoch: 4,
                start_offset: 11,
            },
        ])
        .unwrap();
        assert_eq!(c.epoch_for_offset(5), None);
        assert_eq!(c.epoch_for_offset(6), Some(2));
        assert_eq!(c.epoch_for_offset(10), Some(3));
        assert_eq!(c.epoch_for_offset(1000), Some(4));
        assert_eq!(c.previous_epoch(), Some(3));
        assert_eq!(
            c.epoch_entries_in_range(7, 11),
            vec![
                EpochEntry {
                    epoch: 2,
                    start_offset: 7
                },
                EpochEntry {
                    epoch: 3,
                    start_offset: 8
                }
            ]
        );

        assert!(!c.truncate_from_end(12).unwrap());
        assert!(
            c.truncate_from_end(8).unwrap(),
            "removes entries starting at or after 8"
        );
        assert_eq!(pairs(&c), vec![(2, 6)]);
        c.assign(3, 8).unwrap();
        c.assign(4, 11).unwrap();
        assert!(!c.truncate_from_start(5).unwrap());
        assert!(c.truncate_from_start(9).unwrap());
        assert_eq!(pairs(&c), vec![(3, 9), (4, 11)]);
        assert!(c.truncate_from_start(11).unwrap());
        assert_eq!(pairs(&c), vec![(4, 11)]);
        let on_disk = fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        assert_eq!(on_disk, "0\n1\n4 11\n");
        c.clear_and_flush().unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap(),
            "0\n0\n"
        );
    }

    #[test]
    fn read_only_never_writes() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochFileCache::open(dir.path(), true).unwrap();
        assert!(!dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE).exists());
        c.assign(1, 0).unwrap();
        c.truncate_from_end(0).unwrap();
        assert!(matches!(c.flush(), Err(Error::ReadOnly(_))));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

        fs::write(
            dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE),
            "0\n1\n5 100\n",
        )
        .unwrap();
        let mut c = LeaderEpochFileCache::open(dir.path(), true).unwrap();
        c.assign(6, 200).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap(),
            "0\n1\n5 100\n"
        );
    }

    #[test]
    fn bad_checkpoints_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
        for text in [
            "0\n1\n5\n",
            "0\n1\n5 1 2\n",
            "1\n0\n",
            "0\n2\n5 100\n",
            "0\n1\n-3 0\n",
        ] {
            fs::write(&path, text).unwrap();
            let e = LeaderEpochFileCache::open(dir.path(), true)
                .unwrap_err()
                .to_string();
            assert!(e.contains("leader-epoch-checkpoint"), "{text:?}: {e}");
        }
        // A non-monotonic file is repaired through assign's rules, as Kafka loads it.
        fs::write(&path, "0\n3\n1 0\n3 50\n2 40\n").unwrap();
        let c = LeaderEpochFileCache::open(dir.path(), true).unwrap();
        assert_eq!(pairs(&c), vec![(1, 0), (2, 40)]);
    }
}
