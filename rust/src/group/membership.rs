//! The group membership protocol over files (what Kafka's `GroupCoordinator` does with
//! JoinGroup/SyncGroup/Heartbeat/LeaveGroup, for consumers sharing one machine's data dir).
//!
//! `members.json` holds the generation, the members (subscribed topics, process id, host, last
//! heartbeat), the target assignment of the current generation and the owner of each partition.
//! Every change happens under the group lock:
//! - join/leave, a member found dead (its heartbeat older than its session timeout, or its
//!   process gone on this host), or a topic's partition count changing starts a new generation:
//!   the assignment is recomputed with the group's strategy (owners feed the sticky assignor);
//! - on each sync a member heartbeats, commits its position of every partition it owns but is no
//!   longer assigned and releases it (cooperative: its new owner takes it only once released, so
//!   it resumes from the committed offset and no record is read twice), then takes each assigned
//!   partition that has no live owner.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::assignor::{assign, AssignmentStrategy, MemberSubscription, TopicPartition};
use super::{write_atomically, GroupLock, GroupStore};
use crate::datadir::topic_partition_counts;
use crate::error::{Error, Result};

const MEMBERS_FILE: &str = "members.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberState {
    pub topics: Vec<String>,
    pub pid: u32,
    pub host: String,
    pub heartbeat_ms: i64,
    pub session_timeout_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GroupState {
    pub generation: i32,
    pub protocol: String,
    pub members: BTreeMap<String, MemberState>,
    /// Member -> partitions, the target of the current generation.
    pub assignment: BTreeMap<String, Vec<TopicPartition>>,
    /// (topic, partition, member) for every partition a member reads now.
    pub owners: Vec<(String, i32, String)>,
    /// Partition counts the assignment was computed for.
    pub partition_counts: BTreeMap<String, i32>,
}

/// What a sync tells a member.
#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub generation: i32,
    /// Partitions this member owns after the sync (it reads only these).
    pub owned: Vec<TopicPartition>,
    /// Partitions it just took (start them from the committed offset).
    pub taken: Vec<TopicPartition>,
    /// Partitions it just released (their positions were committed).
    pub released: Vec<TopicPartition>,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn process_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl GroupState {
    fn load(store: &GroupStore) -> Result<GroupState> {
        let path = store.dir().join(MEMBERS_FILE);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                Error::corrupt(format!(
                    "{} is not a kafkalog group members file: {e}",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(GroupState::default()),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    fn save(&self, store: &GroupStore, _lock: &GroupLock) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).expect("plain data serializes");
        write_atomically(&store.dir().join(MEMBERS_FILE), &bytes)
    }

    fn is_dead(&self, id: &str, now: i64, host: &str) -> bool {
        match self.members.get(id) {
            None => true,
            Some(m) => {
                now - m.heartbeat_ms > m.session_timeout_ms
                    || (m.host == host && !process_alive(m.pid))
            }
        }
    }

    /// Drops dead members (and their ownerships); returns whether any was dropped.
    fn expire(&mut self, now: i64, host: &str) -> bool {
        let dead: Vec<String> = self
            .members
            .keys()
            .filter(|id| self.is_dead(id, now, host))
            .cloned()
            .collect();
        for id in &dead {
            self.members.remove(id);
        }
        let before = self.owners.len();
        let members = &self.members;
        self.owners.retain(|(_, _, m)| members.contains_key(m));
        !dead.is_empty() || before != self.owners.len()
    }

    fn rebalance(&mut self, store: &GroupStore, strategy: AssignmentStrategy) -> Result<()> {
        let counts = topic_partition_counts(store.data_dir())?;
        let subscribed: BTreeSet<&String> = self.members.values().flat_map(|m| &m.topics).collect();
        let counts: BTreeMap<String, i32> = counts
            .into_iter()
            .filter(|(t, _)| subscribed.contains(t))
            .collect();
        let members: Vec<MemberSubscription> = self
            .members
            .iter()
            .map(|(id, m)| MemberSubscription {
                member_id: id.clone(),
                topics: m.topics.clone(),
                owned: self
                    .owners
                    .iter()
                    .filter(|o| &o.2 == id)
                    .map(|o| (o.0.clone(), o.1))
                    .collect(),
            })
            .collect();
        self.assignment = assign(strategy, &members, &counts)?;
        self.partition_counts = counts;
        self.generation += 1;
        self.protocol = strategy.name().to_string();
        Ok(())
    }

    fn counts_changed(&self, store: &GroupStore) -> Result<bool> {
        let counts = topic_partition_counts(store.data_dir())?;
        Ok(self
            .partition_counts
            .iter()
            .any(|(t, n)| counts.get(t).copied().unwrap_or(0) != *n)
            || self
                .members
                .values()
                .flat_map(|m| &m.topics)
                .any(|t| counts.contains_key(t) && !self.partition_counts.contains_key(t)))
    }
}

/// Joins (or rejoins) `member_id` with its subscription; starts a new generation.
pub fn join(
    store: &GroupStore,
    member_id: &str,
    topics: &[String],
    strategy: AssignmentStrategy,
    session_timeout_ms: i64,
) -> Result<i32> {
    let lock = store.lock()?;
    let mut state = GroupState::load(store)?;
    if !state.members.is_empty() && !state.protocol.is_empty() && state.protocol != strategy.name()
    {
        return Err(Error::IllegalState(format!(
            "InconsistentGroupProtocol: group '{}' uses '{}', this member asks for '{}'",
            store.group_id(),
            state.protocol,
            strategy.name()
        )));
    }
    let now = crate::log::system_clock()();
    let host = hostname();
    state.expire(now, &host);
    state.members.insert(
        member_id.to_string(),
        MemberState {
            topics: topics.to_vec(),
            pid: std::process::id(),
            host,
            heartbeat_ms: now,
            session_timeout_ms,
        },
    );
    state.rebalance(store, strategy)?;
    state.save(store, &lock)?;
    Ok(state.generation)
}

/// Kafka's OffsetCommit from a member: refused (CommitFailed) once the member is gone from the
/// group (its session expired) or a partition is no longer its own, so a member that stalled
/// cannot overwrite what the partition's new owner committed.
pub fn commit(
    store: &GroupStore,
    member_id: &str,
    offsets: &[(TopicPartition, i64, String)],
) -> Result<()> {
    let lock = store.lock()?;
    let state = GroupState::load(store)?;
    let group = store.group_id();
    if !state.members.contains_key(member_id) {
        return Err(Error::CommitFailed(format!(
            "'{member_id}' is no longer a member of group '{group}' (its session \
             expired and its partitions went to other members); poll to rejoin"
        )));
    }
    for ((topic, partition), _, _) in offsets {
        let owned = state
            .owners
            .iter()
            .any(|(t, p, m)| t == topic && p == partition && m == member_id);
        if !owned {
            return Err(Error::CommitFailed(format!(
                "{topic}-{partition} is not assigned to '{member_id}' in group \
                 '{group}' now (a rebalance moved it)"
            )));
        }
    }
    store.commit_locked(&lock, offsets)
}

/// Heartbeat, release and take (see the module comment). `positions` are the member's positions
/// of the partitions it owns, committed for those it releases. `None` when the member is no
/// longer in the group (its session expired): Kafka's UnknownMemberId, answered by joining again.
pub fn sync(
    store: &GroupStore,
    member_id: &str,
    strategy: AssignmentStrategy,
    positions: &BTreeMap<TopicPartition, i64>,
) -> Result<Option<SyncResult>> {
    let lock = store.lock()?;
    let mut state = GroupState::load(store)?;
    let now = crate::log::system_clock()();
    let host = hostname();
    let Some(me) = state.members.get_mut(member_id) else {
        return Ok(None);
    };
    me.heartbeat_ms = now;
    if state.expire(now, &host) || state.counts_changed(store)? {
        state.rebalance(store, strategy)?;
    }
    let target: BTreeSet<TopicPartition> = state
        .assignment
        .get(member_id)
        .map(|v| v.iter().cloned().collect())
        .unwrap_or_default();
    let mut released = Vec::new();
    let mut to_commit = Vec::new();
    state.owners.retain(|(t, p, m)| {
        let tp = (t.clone(), *p);
        if m == member_id && !target.contains(&tp) {
            if let Some(&pos) = positions.get(&tp) {
                to_commit.push((tp.clone(), pos, String::new()));
            }
            released.push(tp);
            false
        } else {
            true
        }
    });
    // Offsets first: a partition is free only once its position is committed.
    store.commit_locked(&lock, &to_commit)?;
    let owned_by_someone: BTreeSet<TopicPartition> = state
        .owners
        .iter()
        .map(|(t, p, _)| (t.clone(), *p))
        .collect();
    let mut taken = Vec::new();
    for tp in &target {
        if !owned_by_someone.contains(tp) {
            state
                .owners
                .push((tp.0.clone(), tp.1, member_id.to_string()));
            taken.push(tp.clone());
        }
    }
    state.owners.sort();
    state.save(store, &lock)?;
    let owned = state
        .owners
        .iter()
        .filter(|o| o.2 == member_id)
        .map(|o| (o.0.clone(), o.1))
        .collect();
    Ok(Some(SyncResult {
        generation: state.generation,
        owned,
        taken,
        released,
    }))
}

/// Leaves the group: commits `positions`, releases every partition, and starts a new generation
/// for the others.
pub fn leave(
    store: &GroupStore,
    member_id: &str,
    strategy: AssignmentStrategy,
    positions: &BTreeMap<TopicPartition, i64>,
) -> Result<()> {
    let lock = store.lock()?;
    let mut state = GroupState::load(store)?;
    // Only what it still owns: a partition a rebalance moved on has its new owner's offsets.
    let owns = |(t, p): &TopicPartition| {
        state
            .owners
            .iter()
            .any(|(ot, op, om)| ot == t && op == p && om == member_id)
    };
    let commits: Vec<_> = positions
        .iter()
        .filter(|(tp, _)| owns(tp))
        .map(|(tp, &o)| (tp.clone(), o, String::new()))
        .collect();
    store.commit_locked(&lock, &commits)?;
    state.owners.retain(|o| o.2 != member_id);
    if state.members.remove(member_id).is_some() {
        state.rebalance(store, strategy)?;
    }
    state.save(store, &lock)
}

/// The group's members file as it is now (no lock needed: it is replaced atomically).
pub fn describe(store: &GroupStore) -> Result<GroupState> {
    GroupState::load(store)
}
