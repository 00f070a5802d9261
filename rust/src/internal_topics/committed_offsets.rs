//! A broker's committed offsets, read from its data dir's `__consumer_offsets` partitions as its
//! group coordinator loads them (Kafka's `GroupMetadataManager.loadGroupsAndOffsets` / the 4.x
//! `OffsetMetadataManager` replay): records applied in offset order, the latest commit winning,
//! tombstones deleting, transactional commits held per producer until their marker (applied on
//! COMMIT unless a later plain commit of the same partition is already there, dropped on ABORT),
//! so the result is what ListConsumerGroupOffsets would answer.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::datadir::partition_folders;
use crate::error::{Error, Result};
use crate::log::{FetchIsolation, Log, LogOptions};
use crate::record::control::ControlRecordType;

use super::group_metadata::{decode, LEGACY_OFFSET_COMMIT, OFFSET_COMMIT};
use super::DecodeError;

pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// One committed offset (Kafka's `OffsetAndMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// `None` where the commit carried no leader epoch (-1, or a value version below 3).
    pub leader_epoch: Option<i32>,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Where the commit's record lies in its `__consumer_offsets` partition.
    pub record_offset: i64,
}

/// group id → (topic, partition) → committed offset.
pub type GroupOffsets = BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>;

type Key = (String, String, i32);

#[derive(Default)]
struct Replay {
    committed: HashMap<Key, CommittedOffset>,
    /// Transactional commits not yet decided, per producer id (a tombstone is `None`).
    pending: HashMap<i64, Vec<(Key, Option<CommittedOffset>)>>,
}

impl Replay {
    fn commit_marker(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (key, offset) in pending {
            match offset {
                // The one appended last wins, transactional or not.
                Some(o) => {
                    let newer = self
                        .committed
                        .get(&key)
                        .is_none_or(|c| c.record_offset < o.record_offset);
                    if newer {
                        self.committed.insert(key, o);
                    }
                }
                None => {
                    self.committed.remove(&key);
                }
            }
        }
    }
}

/// The committed offsets of every group (or of `group_id` alone) in the broker data dir
/// `data_dir`, opened read-only. Records that do not decode are an error naming the partition
/// and offset; record types other than offset commits (group metadata, consumer group records)
/// carry no offsets and are passed over.
pub fn broker_committed_offsets(data_dir: &Path, group_id: Option<&str>) -> Result<GroupOffsets> {
    let folders: Vec<_> = partition_folders(data_dir)?
        .into_iter()
        .filter(|f| f.topic == CONSUMER_OFFSETS_TOPIC)
        .collect();
    if folders.is_empty() && !data_dir.join("meta.properties").is_file() {
        return Err(Error::InvalidArgument(format!(
            "{}: not a broker's data dir (no meta.properties and no {CONSUMER_OFFSETS_TOPIC} partitions)",
            data_dir.display()
        )));
    }
    let mut out = GroupOffsets::new();
    for folder in folders {
        let log = Log::open(&folder.path, LogOptions::default())?;
        let mut replay = Replay::default();
        let mut failure: Option<Error> = None;
        log.for_each_batch(
            None,
            None,
            FetchIsolation::LogEnd,
            true,
            &mut |_, batch, records, range| {
                if batch.is_control() {
                    for r in &records[range] {
                        match ControlRecordType::parse_key(r.key)? {
                            ControlRecordType::Commit => {
                                replay.commit_marker(batch.producer_id(), true)
                            }
                            ControlRecordType::Abort => {
                                replay.commit_marker(batch.producer_id(), false)
                            }
                            _ => {}
                        }
                    }
                    return Ok(true);
                }
                for r in &records[range] {
                    let Some(key) = r.key else {
                        failure = Some(Error::corrupt(format!(
                            "{}: the record at offset {} has no key",
                            folder.path.display(),
                            r.offset
                        )));
                        return Ok(false);
                    };
                    // Only offset commits hold offsets: other record types (group metadata,
                    // the consumer, share and streams group records) are passed over undecoded.
                    let record_type = key.get(..2).map(|t| i16::from_be_bytes([t[0], t[1]]));
                    if !matches!(record_type, Some(OFFSET_COMMIT | LEGACY_OFFSET_COMMIT)) {
                        continue;
                    }
                    // Read as 3.x reads them: a type-0 commit takes any OffsetCommitValue
                    // version (brokers before 2.1 wrote those).
                    let record = match decode(key, r.value, 3) {
                        Ok(rec) => rec,
                        Err(DecodeError::UnknownRecordType(_)) => continue,
                        Err(DecodeError::Other(m)) => {
                            failure = Some(Error::corrupt(format!(
                                "{}: the record at offset {}: {m}",
                                folder.path.display(),
                                r.offset
                            )));
                            return Ok(false);
                        }
                    };
                    let k = &record.key;
                    let group = k["group"].as_str().unwrap_or_default();
                    if group_id.is_some_and(|g| g != group) {
                        continue;
                    }
                    let key: Key = (
                        group.to_string(),
                        k["topic"].as_str().unwrap_or_default().to_string(),
                        k["partition"].as_i64().unwrap_or(-1) as i32,
                    );
                    let value = record.value.map(|(_, v)| CommittedOffset {
                        offset: v["offset"].as_i64().unwrap_or(-1),
                        leader_epoch: v
                            .get("leaderEpoch")
                            .and_then(|e| e.as_i64())
                            .filter(|&e| e >= 0)
                            .map(|e| e as i32),
                        metadata: v["metadata"].as_str().unwrap_or_default().to_string(),
                        commit_timestamp: v["commitTimestamp"].as_i64().unwrap_or(-1),
                        record_offset: r.offset,
                    });
                    if batch.is_transactional() {
                        replay
                            .pending
                            .entry(batch.producer_id())
                            .or_default()
                            .push((key, value));
                    } else {
                        match value {
                            Some(v) => {
                                replay.committed.insert(key, v);
                            }
                            None => {
                                replay.committed.remove(&key);
                            }
                        }
                    }
                }
                Ok(true)
            },
        )?;
        if let Some(e) = failure {
            return Err(e);
        }
        // A group lives in one partition; merging keeps each commit as it is.
        for ((group, topic, partition), offset) in replay.committed {
            out.entry(group)
                .or_default()
                .insert((topic, partition), offset);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::builder::{end_txn_marker_batch, BatchBuilder, BatchOptions};
    use crate::record::control::EndTransactionMarker;

    fn key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
        let mut k = OFFSET_COMMIT.to_be_bytes().to_vec();
        for s in [group, topic] {
            k.extend_from_slice(&(s.len() as i16).to_be_bytes());
            k.extend_from_slice(s.as_bytes());
        }
        k.extend_from_slice(&partition.to_be_bytes());
        k
    }

    /// An OffsetCommitValue v3.
    fn value(offset: i64, epoch: i32) -> Vec<u8> {
        let mut v = 3i16.to_be_bytes().to_vec();
        v.extend_from_slice(&offset.to_be_bytes());
        v.extend_from_slice(&epoch.to_be_bytes());
        v.extend_from_slice(&[0, 1, b'm']);
        v.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        v
    }

    fn batch(records: &[(Vec<u8>, Option<Vec<u8>>)], producer_id: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions {
            producer_id,
            producer_epoch: if producer_id >= 0 { 0 } else { -1 },
            base_sequence: if producer_id >= 0 { 0 } else { -1 },
            is_transactional: producer_id >= 0,
            ..Default::default()
        });
        for (k, v) in records {
            b.append(1000, Some(k), v.as_deref(), &[]).unwrap();
        }
        b.build().unwrap()
    }

    fn marker(producer_id: i64, control_type: ControlRecordType) -> Vec<u8> {
        let m = EndTransactionMarker {
            control_type,
            coordinator_epoch: 0,
        };
        end_txn_marker_batch(0, 1000, 0, producer_id, 0, m).unwrap()
    }

    #[test]
    fn replays_commits_tombstones_and_transactions_as_the_coordinator() {
        let dir = tempfile::tempdir().unwrap();
        let options = LogOptions {
            read_only: false,
            create: true,
            ..Default::default()
        };
        // The broker makes its partition folders; kafkalog refuses to make one beside it.
        let log = Log::open(dir.path().join("__consumer_offsets-0"), options).unwrap();
        std::fs::write(dir.path().join("meta.properties"), "node.id=1\n").unwrap();
        let plain = |records: &[(Vec<u8>, Option<Vec<u8>>)]| {
            log.append_as_leader(&batch(records, -1), 0).unwrap();
        };
        plain(&[(key("g", "t", 0), Some(value(5, 1)))]);
        // Two transactions: producer 7 commits t-0 at 9, producer 8 commits t-1 at 4.
        log.append_as_leader(&batch(&[(key("g", "t", 0), Some(value(9, 1)))], 7), 0)
            .unwrap();
        log.append_as_leader(&batch(&[(key("g", "t", 1), Some(value(4, -1)))], 8), 0)
            .unwrap();
        // A plain commit appended after producer 7's: it wins over the transaction's.
        plain(&[(key("g", "t", 0), Some(value(6, 2)))]);
        log.append_txn_marker(&marker(7, ControlRecordType::Commit), 0)
            .unwrap();
        log.append_txn_marker(&marker(8, ControlRecordType::Abort), 0)
            .unwrap();
        // A group whose offsets were deleted, and an open transaction no one sees yet.
        plain(&[(key("gone", "t", 0), Some(value(1, 0)))]);
        plain(&[(key("gone", "t", 0), None)]);
        log.append_as_leader(&batch(&[(key("open", "t", 0), Some(value(3, 0)))], 9), 0)
            .unwrap();
        // What a broker before 2.1 wrote: a type-0 key and a version-1 value (no leader epoch).
        let mut legacy_key = key("old", "t", 0);
        legacy_key[..2].copy_from_slice(&LEGACY_OFFSET_COMMIT.to_be_bytes());
        let mut v1 = 1i16.to_be_bytes().to_vec();
        v1.extend_from_slice(&11i64.to_be_bytes());
        v1.extend_from_slice(&[0, 0]);
        v1.extend_from_slice(&5i64.to_be_bytes());
        v1.extend_from_slice(&(-1i64).to_be_bytes());
        plain(&[(legacy_key, Some(v1))]);
        drop(log);

        let all = broker_committed_offsets(dir.path(), None).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["g", "old"]);
        let old = &all["old"][&("t".to_string(), 0)];
        assert_eq!(
            (old.offset, old.leader_epoch, old.commit_timestamp),
            (11, None, 5)
        );
        let g = &all["g"];
        assert_eq!(g.len(), 1, "{g:?}");
        let o = &g[&("t".to_string(), 0)];
        assert_eq!(
            (o.offset, o.leader_epoch, o.metadata.as_str()),
            (6, Some(2), "m")
        );
        assert!(broker_committed_offsets(dir.path(), Some("other"))
            .unwrap()
            .is_empty());
        assert!(broker_committed_offsets(&dir.path().join("nope"), None).is_err());
    }
}
