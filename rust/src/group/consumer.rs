//! A group's consumer over a local data dir (Kafka's `KafkaConsumer` with its `Fetcher`): the
//! member's partitions come from the group protocol (`membership.rs`), positions start at the
//! committed offsets (else `auto.offset.reset`), and `poll` reads records from the partitions'
//! logs in turn, one partition after another so none starves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arrow_array::{Array, Int64Array, RecordBatch};

use super::assignor::{AssignmentStrategy, TopicPartition};
use super::membership;
use super::GroupStore;
use crate::arrow::LogArrowReader;
use crate::error::{Error, Result};
use crate::log::{FetchIsolation, Log, LogOptions};
use crate::record::record::{OwnedRecord, Record};

/// Kafka's `auto.offset.reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    None,
}

impl OffsetReset {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "earliest" => Ok(OffsetReset::Earliest),
            "latest" => Ok(OffsetReset::Latest),
            "none" => Ok(OffsetReset::None),
            other => Err(Error::InvalidArgument(format!(
                "auto_offset_reset '{other}' (earliest, latest or none)"
            ))),
        }
    }
}

pub struct ConsumerOptions {
    pub strategy: AssignmentStrategy,
    pub isolation: FetchIsolation,
    pub auto_offset_reset: OffsetReset,
    pub session_timeout_ms: i64,
    /// How often `poll` syncs with the group (heartbeat, releases and takes).
    pub sync_interval: Duration,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            strategy: AssignmentStrategy::Range,
            isolation: FetchIsolation::HighWatermark,
            auto_offset_reset: OffsetReset::Earliest,
            session_timeout_ms: 45_000,
            sync_interval: Duration::from_millis(100),
        }
    }
}

struct PartitionFetch {
    log: Option<Arc<Log>>,
    /// The files `log` was opened from, where none changed in the second before the open:
    /// while they stand so, a log the position caught up with is not opened again to look for
    /// more.
    opened_from: Option<FolderStamp>,
    /// `UNKNOWN` until the first poll resets it (no committed offset), as Kafka's consumer
    /// resolves `auto.offset.reset` lazily and raises NoOffsetForPartition from `poll`.
    position: i64,
}

/// What a read-only open of a partition's log reads that a writer changes: the folder (segments
/// rolled or deleted, checkpoints replaced), the active segment (appends), and the data dir's
/// high-watermark and log-start checkpoints. Equal stamps mean the same log; opening it again to
/// find records past a caught-up position cost about 1 ms a partition on every poll, so a group
/// of 2,000 partitions took seconds a poll (a black-box tester's drain of it went quadratic).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FolderStamp {
    folder: SystemTime,
    active_segment: (u64, SystemTime),
    checkpoints: [Option<SystemTime>; 2],
}

impl FolderStamp {
    /// A file's mtime moves in steps of the kernel's coarse clock, a little behind the clock an
    /// open is timed by: a stamp whose times come this close to the start of the open it was
    /// taken after could hide a change made during the open, and is not kept (that log is
    /// opened again each time, as without stamps). The times are taken to be this host's: a
    /// writer on another host (a network file system) whose clock lags by more than this could
    /// change the files during an open unseen until they next change.
    const SETTLED: Duration = Duration::from_secs(1);

    /// Taken after an open that started at `opened`: kept where every time is at least
    /// [`Self::SETTLED`] older, so whatever changes it later gets a later time.
    fn after_open(folder: &Path, log: &Log, opened: SystemTime) -> Option<FolderStamp> {
        let stamp = Self::take(folder, &active_segment_path(log))?;
        let settled = opened.checked_sub(Self::SETTLED)?;
        let times = [stamp.folder, stamp.active_segment.1]
            .into_iter()
            .chain(stamp.checkpoints.into_iter().flatten());
        times.into_iter().all(|t| t <= settled).then_some(stamp)
    }

    /// `None` when a file cannot be read.
    fn take(folder: &Path, active_segment: &Path) -> Option<FolderStamp> {
        let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified());
        let segment = std::fs::metadata(active_segment).ok()?;
        let data_dir = folder.parent()?;
        let checkpoint = |name: &str| match mtime(&data_dir.join(name)) {
            Ok(t) => Some(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
            Err(_) => None,
        };
        Some(FolderStamp {
            folder: mtime(folder).ok()?,
            active_segment: (segment.len(), segment.modified().ok()?),
            checkpoints: [
                checkpoint(crate::log::loader::REPLICATION_OFFSET_CHECKPOINT)?,
                checkpoint(crate::log::loader::LOG_START_OFFSET_CHECKPOINT)?,
            ],
        })
    }
}

const UNKNOWN: i64 = -1;

/// One member of a group.
pub struct GroupConsumer {
    store: GroupStore,
    member_id: String,
    topics: Vec<String>,
    options: ConsumerOptions,
    owned: BTreeMap<TopicPartition, PartitionFetch>,
    generation: i32,
    last_sync: Option<Instant>,
    next_index: usize,
    closed: bool,
    /// The process that made it: a child forked since holds a copy, which it may not use (its
    /// parent goes on with the original) and which closes without a write.
    owner_pid: u32,
}

fn partition_path(data_dir: &Path, tp: &TopicPartition) -> PathBuf {
    data_dir.join(format!("{}-{}", tp.0, tp.1))
}

fn active_segment_path(log: &Log) -> PathBuf {
    let base = log.segment_base_offsets().last().copied().unwrap_or(0);
    crate::segment::segment_file(log.dir(), base, crate::segment::LOG_FILE_SUFFIX, "")
}

/// A partition to read this turn: itself, its log, its position and its fetch upper bound.
type Readable<'t> = (&'t TopicPartition, Arc<Log>, i64, i64);

impl GroupConsumer {
    /// Joins `group_id` as a new member subscribed to `topics`.
    pub fn join(
        data_dir: &Path,
        group_id: &str,
        topics: &[String],
        options: ConsumerOptions,
    ) -> Result<Self> {
        if topics.is_empty() {
            return Err(Error::InvalidArgument(
                "a consumer subscribes to at least one topic".into(),
            ));
        }
        for t in topics {
            crate::datadir::validate_topic_name(t)?;
        }
        // A member heartbeats every sync interval; at or under it, members would drop one
        // another between heartbeats and read the same partitions (Kafka's consumer refuses
        // heartbeat.interval.ms at or above session.timeout.ms).
        let interval_ms = i64::try_from(options.sync_interval.as_millis()).unwrap_or(i64::MAX);
        if options.session_timeout_ms <= interval_ms {
            return Err(Error::InvalidArgument(format!(
                "session_timeout_ms ({}) must be above sync_interval_ms ({interval_ms}): a member \
                 heartbeats every sync_interval_ms and is dropped when silent for \
                 session_timeout_ms",
                options.session_timeout_ms
            )));
        }
        let store = GroupStore::new(data_dir, group_id)?;
        let member_id = new_member_id();
        let generation = membership::join(
            &store,
            &member_id,
            topics,
            options.strategy,
            options.session_timeout_ms,
        )?;
        let mut c = GroupConsumer {
            store,
            member_id,
            topics: topics.to_vec(),
            options,
            owned: BTreeMap::new(),
            generation,
            last_sync: None,
            next_index: 0,
            closed: false,
            owner_pid: std::process::id(),
        };
        c.sync()?;
        Ok(c)
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }
    pub fn generation(&self) -> i32 {
        self.generation
    }
    pub fn topics(&self) -> &[String] {
        &self.topics
    }
    pub fn group(&self) -> &GroupStore {
        &self.store
    }

    /// The partitions this member reads now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.owned.keys().cloned().collect()
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::IllegalState("the consumer is closed".into()));
        }
        crate::group::refuse_in_a_fork(self.owner_pid, "this consumer")
    }

    fn positions(&self) -> BTreeMap<TopicPartition, i64> {
        self.owned
            .iter()
            .filter(|(_, f)| f.position != UNKNOWN)
            .map(|(tp, f)| (tp.clone(), f.position))
            .collect()
    }

    fn open_log(&self, tp: &TopicPartition) -> Result<Arc<Log>> {
        Ok(self.open_stamped(tp)?.0)
    }

    /// The partition's log, with the stamp of the files it was opened from where they had
    /// settled.
    fn open_stamped(&self, tp: &TopicPartition) -> Result<(Arc<Log>, Option<FolderStamp>)> {
        #[cfg(test)]
        tests::LOG_OPENS.with(|n| n.set(n.get() + 1));
        let folder = partition_path(self.store.data_dir(), tp);
        let opened = SystemTime::now();
        let log = Log::open(&folder, LogOptions::default())?;
        let stamp = FolderStamp::after_open(&folder, &log, opened);
        Ok((Arc::new(log), stamp))
    }

    /// Heartbeats, releases and takes partitions (see `membership`). A member whose session
    /// expired joins again, as Kafka's consumer does from `poll`: its partitions are lost (what
    /// it read past its last commit is read again by their next owner), and it gets a new member
    /// id and its share of a new generation.
    pub fn sync(&mut self) -> Result<()> {
        self.check_open()?;
        let strategy = self.options.strategy;
        let result =
            match membership::sync(&self.store, &self.member_id, strategy, &self.positions())? {
                Some(result) => result,
                None => {
                    self.owned.clear();
                    self.member_id = new_member_id();
                    self.generation = membership::join(
                        &self.store,
                        &self.member_id,
                        &self.topics,
                        strategy,
                        self.options.session_timeout_ms,
                    )?;
                    membership::sync(&self.store, &self.member_id, strategy, &BTreeMap::new())?
                        .ok_or_else(|| {
                            Error::IllegalState(format!(
                                "member '{}' left group '{}' as it joined",
                                self.member_id,
                                self.store.group_id()
                            ))
                        })?
                }
            };
        self.last_sync = Some(Instant::now());
        self.generation = result.generation;
        for tp in &result.released {
            self.owned.remove(tp);
        }
        self.owned
            .retain(|tp, _| result.owned.iter().any(|o| o == tp));
        if !result.taken.is_empty() {
            let committed = self.store.committed()?;
            for tp in result.taken {
                let (log, opened_from) = self.open_stamped(&tp)?;
                let position = committed.get(&tp).map_or(UNKNOWN, |c| c.offset);
                self.owned.insert(
                    tp,
                    PartitionFetch {
                        log: Some(log),
                        opened_from,
                        position,
                    },
                );
            }
        }
        Ok(())
    }

    fn reset_position(&self, tp: &TopicPartition, log: &Log) -> Result<i64> {
        match self.options.auto_offset_reset {
            OffsetReset::Earliest => Ok(log.log_start_offset()),
            OffsetReset::Latest => Ok(log.fetch_upper_bound(self.options.isolation)),
            OffsetReset::None => Err(Error::NoOffsetForPartition(format!(
                "group '{}' has no committed offset for {}-{} and \
                 auto_offset_reset is 'none'",
                self.store.group_id(),
                tp.0,
                tp.1
            ))),
        }
    }

    /// Syncs when `sync_interval` passed, then resolves positions still unknown (before any
    /// record is read, so a NoOffsetForPartition error loses no record of another partition).
    fn maybe_sync(&mut self) -> Result<()> {
        if self
            .last_sync
            .is_none_or(|t| t.elapsed() >= self.options.sync_interval)
        {
            self.sync()?;
        }
        let unknown: Vec<TopicPartition> = self
            .owned
            .iter()
            .filter(|(_, f)| f.position == UNKNOWN)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in unknown {
            self.position(&tp)?;
        }
        Ok(())
    }

    /// The log of an owned partition, reopened when the position reached what the open one holds
    /// (a read-only log sees the files as they were when opened; writers append beside it) and
    /// its files changed since it was opened.
    fn fresh_log(&mut self, tp: &TopicPartition) -> Result<Arc<Log>> {
        let isolation = self.options.isolation;
        let f = &self.owned[tp];
        match (&f.log, &f.opened_from) {
            (Some(l), _) if f.position < l.fetch_upper_bound(isolation) => return Ok(l.clone()),
            (Some(l), Some(opened_from))
                if FolderStamp::take(l.dir(), &active_segment_path(l)).as_ref()
                    == Some(opened_from) =>
            {
                return Ok(l.clone());
            }
            _ => {}
        }
        let (log, opened_from) = self.open_stamped(tp)?;
        let f = self.owned.get_mut(tp).expect("owned");
        (f.log, f.opened_from) = (Some(log.clone()), opened_from);
        Ok(log)
    }

    /// The `i`-th owned partition of this turn (round robin from `next_index`) with its fresh log,
    /// position and fetch upper bound; `None` when nothing is there to read at the isolation level.
    fn readable_partition<'t>(
        &mut self,
        tps: &'t [TopicPartition],
        i: usize,
    ) -> Result<Option<Readable<'t>>> {
        let tp = &tps[(self.next_index + i) % tps.len()];
        #[cfg(test)]
        tests::PARTITIONS_VISITED.with(|n| n.set(n.get() + 1));
        let log = self.fresh_log(tp)?;
        let start = self.checked_position(tp, &log)?;
        let bound = log.fetch_upper_bound(self.options.isolation);
        Ok((start < bound).then_some((tp, log, start, bound)))
    }

    /// A position outside the log (retention moved its start, or a seek past its end) is reset
    /// with `auto_offset_reset`, as Kafka's fetcher does on OFFSET_OUT_OF_RANGE.
    fn checked_position(&mut self, tp: &TopicPartition, log: &Log) -> Result<i64> {
        let pos = self.owned[tp].position;
        if pos == UNKNOWN {
            let reset = self.reset_position(tp, log)?;
            self.owned.get_mut(tp).expect("owned").position = reset;
            return Ok(reset);
        }
        if pos < log.log_start_offset() || pos > log.log_end_offset() {
            let reset = self
                .reset_position(tp, log)
                .map_err(|_| Error::OffsetOutOfRange {
                    offset: pos,
                    start: log.log_start_offset(),
                    end: log.log_end_offset(),
                })?;
            self.owned.get_mut(tp).expect("owned").position = reset;
            return Ok(reset);
        }
        Ok(pos)
    }

    /// Up to `max_records` records from the owned partitions, taken in turn; each partition's
    /// position moves past what was returned (and past aborted or control batches).
    pub fn poll(&mut self, max_records: usize) -> Result<Vec<(TopicPartition, OwnedRecord)>> {
        let mut out = Vec::new();
        self.poll_with(max_records, &mut |tp, r| {
            out.push((tp.clone(), r.to_owned_record()))
        })?;
        Ok(out)
    }

    /// [`Self::poll`], handing each record to `visit` as it is read (borrowed from its batch)
    /// instead of collecting owned copies.
    pub fn poll_with(
        &mut self,
        max_records: usize,
        visit: &mut dyn FnMut(&TopicPartition, &Record<'_>),
    ) -> Result<()> {
        self.check_open()?;
        self.maybe_sync()?;
        let tps: Vec<TopicPartition> = self.owned.keys().cloned().collect();
        if tps.is_empty() || max_records == 0 {
            return Ok(());
        }
        let isolation = self.options.isolation;
        let mut taken = 0usize;
        // The last partition records came from, and whether it was left holding more.
        let mut last_read = None;
        for i in 0..tps.len() {
            if taken >= max_records {
                break;
            }
            let Some((tp, log, start, bound)) = self.readable_partition(&tps, i)? else {
                continue;
            };
            let want = max_records - taken;
            let mut got = 0usize;
            let mut next = start;
            let mut full = false;
            log.for_each_batch(
                Some(start),
                None,
                isolation,
                false,
                &mut |_pos, batch, records, in_range| {
                    for r in &records[in_range] {
                        if got == want {
                            full = true;
                            return Ok(false);
                        }
                        visit(tp, r);
                        got += 1;
                        next = r.offset + 1;
                    }
                    next = next.max(batch.last_offset() + 1);
                    Ok(got < want)
                },
            )?;
            if !full && got < want {
                // Everything up to the bound was read (what is left is aborted or control).
                next = next.max(bound);
            }
            taken += got;
            self.owned.get_mut(tp).expect("owned").position = next;
            if got > 0 {
                last_read = Some((i, full));
            }
        }
        // The next poll starts where this one stopped, as Kafka's fetcher moves the partitions it
        // returned to the end: started one partition on, a drain walked every partition it had
        // emptied before reaching new records (2,000 partitions: 40 polls over 50 to 2,000 each).
        self.next_index = match last_read {
            Some((i, more)) => (self.next_index + i + usize::from(!more)) % tps.len(),
            None => (self.next_index + 1) % tps.len(),
        };
        Ok(())
    }

    /// Up to `max_records` records of one owned partition (the next in turn that has any) as an
    /// Arrow batch with Spark's Kafka source schema; `None` when nothing is there.
    pub fn poll_arrow(
        &mut self,
        max_records: usize,
        include_headers: bool,
    ) -> Result<Option<RecordBatch>> {
        self.check_open()?;
        self.maybe_sync()?;
        if max_records == 0 {
            return Ok(None);
        }
        let tps: Vec<TopicPartition> = self.owned.keys().cloned().collect();
        let isolation = self.options.isolation;
        for i in 0..tps.len() {
            let Some((tp, log, start, bound)) = self.readable_partition(&tps, i)? else {
                continue;
            };
            let mut reader = LogArrowReader::new(
                log,
                Some(start),
                None,
                isolation,
                include_headers,
                max_records,
            )?;
            let mut batch = reader.next_batch()?;
            let mut next = if batch.is_none() {
                bound
            } else {
                reader.position()
            };
            // Whole Kafka batches come back; at most `max_records` go out, as Kafka's
            // max.poll.records, and the next poll starts after the last one.
            if let Some(b) = batch.as_ref().filter(|b| b.num_rows() > max_records) {
                let offsets = b
                    .column_by_name("offset")
                    .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                    .ok_or_else(|| Error::IllegalState("an Arrow batch without offsets".into()))?;
                next = offsets.value(max_records - 1) + 1;
                batch = Some(b.slice(0, max_records));
            }
            self.owned.get_mut(tp).expect("owned").position = next;
            if batch.is_some() {
                self.next_index = (self.next_index + i + 1) % tps.len();
                return Ok(batch);
            }
        }
        Ok(None)
    }

    fn owned_mut(&mut self, tp: &TopicPartition) -> Result<&mut PartitionFetch> {
        let group = self.store.group_id().to_string();
        self.owned.get_mut(tp).ok_or_else(|| {
            Error::IllegalState(format!(
                "{}-{} is not assigned to this member of group '{group}'",
                tp.0, tp.1
            ))
        })
    }

    pub fn position(&mut self, tp: &TopicPartition) -> Result<i64> {
        let f = self.owned_mut(tp)?;
        if f.position == UNKNOWN {
            let log = match f.log.clone() {
                Some(l) => l,
                None => self.open_log(tp)?,
            };
            return self.checked_position(tp, &log);
        }
        Ok(f.position)
    }

    /// Kafka's `seek`: the next poll of `tp` starts at `offset` (reset if out of range then).
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "seek offset must be >= 0, not {offset}"
            )));
        }
        self.owned_mut(tp)?.position = offset;
        Ok(())
    }

    pub fn seek_to_beginning(&mut self, tps: &[TopicPartition]) -> Result<()> {
        for tp in tps {
            let (log, opened_from) = self.open_stamped(tp)?;
            let f = self.owned_mut(tp)?;
            f.position = log.log_start_offset();
            (f.log, f.opened_from) = (Some(log), opened_from);
        }
        Ok(())
    }

    pub fn seek_to_end(&mut self, tps: &[TopicPartition]) -> Result<()> {
        let isolation = self.options.isolation;
        for tp in tps {
            let (log, opened_from) = self.open_stamped(tp)?;
            let f = self.owned_mut(tp)?;
            f.position = log.fetch_upper_bound(isolation);
            (f.log, f.opened_from) = (Some(log), opened_from);
        }
        Ok(())
    }

    /// Commits the positions of every owned partition (or the given offsets).
    pub fn commit(&mut self, offsets: Option<&[(TopicPartition, i64)]>) -> Result<()> {
        self.check_open()?;
        let list: Vec<(TopicPartition, i64, String)> = match offsets {
            Some(o) => {
                // Kafka's coordinator refuses such a commit as one from a stale generation.
                for (tp, _) in o {
                    if !self.owned.contains_key(tp) {
                        return Err(Error::CommitFailed(format!(
                            "{}-{} is not assigned to this member of group '{}' (a rebalance \
                             moved it, or it never was)",
                            tp.0,
                            tp.1,
                            self.store.group_id()
                        )));
                    }
                }
                o.iter()
                    .map(|(tp, off)| (tp.clone(), *off, String::new()))
                    .collect()
            }
            None => self
                .positions()
                .into_iter()
                .map(|(tp, o)| (tp, o, String::new()))
                .collect(),
        };
        membership::commit(&self.store, &self.member_id, &list)
    }

    /// Leaves the group: commits positions when `commit`, then releases every partition.
    pub fn close(&mut self, commit: bool) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.owner_pid != std::process::id() {
            // A forked child's copy leaves the group to its parent's member (leaving would drop
            // the parent's membership and partitions).
            self.closed = true;
            self.owned.clear();
            return Ok(());
        }
        let positions = if commit {
            self.positions()
        } else {
            BTreeMap::new()
        };
        self.closed = true;
        self.owned.clear();
        membership::leave(
            &self.store,
            &self.member_id,
            self.options.strategy,
            &positions,
        )
    }
}

fn new_member_id() -> String {
    format!(
        "kafkalog-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    )
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        // Leave without committing: what was not committed is read again by the next owner.
        let _ = self.close(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::builder::{BatchBuilder, BatchOptions};

    thread_local! {
        pub(super) static LOG_OPENS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        pub(super) static PARTITIONS_VISITED: std::cell::Cell<usize> =
            const { std::cell::Cell::new(0) };
    }

    /// Each poll starts where the last one stopped: a drain visits each partition about once,
    /// not every partition it emptied before on every poll (quadratic in partitions).
    #[test]
    fn a_drain_visits_each_partition_about_once() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t", 40, 10);
        let mut c = GroupConsumer::join(
            dir.path(),
            "g",
            &["t".to_string()],
            ConsumerOptions::default(),
        )
        .unwrap();
        let visited = PARTITIONS_VISITED.with(|n| n.get());
        let (mut seen, mut polls) = (Vec::new(), 0);
        while seen.len() < 400 && polls < 100 {
            let got = c.poll(45).unwrap();
            seen.extend(got.into_iter().map(|(tp, r)| (tp, r.offset)));
            polls += 1;
        }
        let visits = PARTITIONS_VISITED.with(|n| n.get()) - visited;
        assert_eq!(seen.len(), 400);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 400, "a record read twice");
        assert_eq!(polls, 9);
        // 40 partitions, the one each poll stops in visited again by the next, and one pass over
        // all of them by the last poll, which finds fewer records than it asks for (176 when each
        // poll started one partition on).
        assert!(
            visits <= 2 * 40 + polls,
            "{visits} partitions visited over {polls} polls"
        );
        c.close(true).unwrap();
    }

    /// Every file and folder under `dir` last modified a minute ago, as a data dir's files stand
    /// between a writer's appends.
    fn age(dir: &Path) {
        let then = SystemTime::now() - Duration::from_secs(60);
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                age(&path);
            }
            std::fs::File::open(&path)
                .unwrap()
                .set_modified(then)
                .unwrap();
        }
        std::fs::File::open(dir)
            .unwrap()
            .set_modified(then)
            .unwrap();
    }

    fn append(data_dir: &Path, folder: &str, values: &[&str], roll: bool) {
        let log = Log::open(
            data_dir.join(folder),
            LogOptions {
                read_only: false,
                ..Default::default()
            },
        )
        .unwrap();
        if roll {
            log.roll().unwrap();
        }
        let mut b = BatchBuilder::new(BatchOptions::default());
        for (i, v) in values.iter().enumerate() {
            b.append(i as i64, None, Some(v.as_bytes()), &[]).unwrap();
        }
        log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        log.close().unwrap();
    }

    /// A caught-up partition's log is opened again only when its files changed: each poll opened
    /// every caught-up partition's log again (about 1 ms each), so a black-box tester's drain of
    /// 2,000 partitions went quadratic and an idle poll took 2 s. What is appended, in the
    /// active segment or a new one, is still read by the next poll.
    #[test]
    fn a_caught_up_partition_is_reopened_only_when_its_files_changed() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t", 3, 10);
        age(dir.path());
        let mut c = GroupConsumer::join(
            dir.path(),
            "g",
            &["t".to_string()],
            ConsumerOptions {
                sync_interval: Duration::ZERO,
                ..Default::default()
            },
        )
        .unwrap();
        // Opened as the group gave them (files settled): stamped then, so not opened again
        // once caught up.
        let opens = LOG_OPENS.with(|n| n.get());
        assert_eq!(c.poll(500).unwrap().len(), 30);
        for _ in 0..20 {
            assert!(c.poll(500).unwrap().is_empty());
        }
        assert_eq!(LOG_OPENS.with(|n| n.get()), opens, "idle polls opened logs");
        // Appends of just now (their mtimes within a tick of the stamp's) are seen.
        append(dir.path(), "t-1", &["a", "b"], false);
        let values = |got: Vec<(TopicPartition, OwnedRecord)>| -> Vec<String> {
            got.into_iter()
                .map(|(_, r)| String::from_utf8(r.value.unwrap()).unwrap())
                .collect()
        };
        assert_eq!(values(c.poll(500).unwrap()), ["a", "b"]);
        age(dir.path());
        assert!(c.poll(500).unwrap().is_empty());
        assert!(c.poll(500).unwrap().is_empty());
        let opens = LOG_OPENS.with(|n| n.get());
        assert!(c.poll(500).unwrap().is_empty());
        assert_eq!(LOG_OPENS.with(|n| n.get()), opens);
        // A settled change too: an append into a segment rolled since, its files aged at once.
        append(dir.path(), "t-2", &["c"], true);
        age(dir.path());
        assert_eq!(values(c.poll(500).unwrap()), ["c"]);
        c.close(true).unwrap();
    }

    fn write(data_dir: &Path, topic: &str, partitions: i32, per_partition: i64) {
        crate::datadir::create_topic(data_dir, topic, partitions).unwrap();
        for p in 0..partitions {
            let values: Vec<String> = (0..per_partition).map(|i| format!("{p}:{i}")).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            append(data_dir, &format!("{topic}-{p}"), &values, false);
        }
    }

    /// A session no longer than the heartbeat interval is refused: members would drop one
    /// another between heartbeats and read the same partitions (a black-box tester's
    /// `session_timeout_ms=0`: two members each held both partitions, every record read
    /// several times).
    #[test]
    fn a_session_timeout_at_or_under_the_sync_interval_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t", 2, 10);
        let topics = vec!["t".to_string()];
        for (session, interval) in [(0, 0), (100, 100), (50, 100), (-1, 0)] {
            let joined = GroupConsumer::join(
                dir.path(),
                "g",
                &topics,
                ConsumerOptions {
                    session_timeout_ms: session,
                    sync_interval: Duration::from_millis(interval),
                    ..Default::default()
                },
            );
            let Err(Error::InvalidArgument(message)) = joined else {
                panic!("{session} ms over {interval} ms joined");
            };
            assert!(message.contains("session_timeout_ms"), "{message}");
        }
        let joined = GroupConsumer::join(
            dir.path(),
            "g",
            &topics,
            ConsumerOptions {
                session_timeout_ms: 101,
                sync_interval: Duration::from_millis(100),
                ..Default::default()
            },
        );
        assert!(joined.is_ok());
    }

    #[test]
    fn two_members_share_and_resume_from_commits() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t", 4, 10);
        let topics = vec!["t".to_string()];
        let opts = || ConsumerOptions {
            sync_interval: Duration::ZERO,
            ..Default::default()
        };
        let mut a = GroupConsumer::join(dir.path(), "g", &topics, opts()).unwrap();
        assert_eq!(a.assignment().len(), 4);
        let first = a.poll(15).unwrap();
        assert_eq!(first.len(), 15);
        let mut b = GroupConsumer::join(dir.path(), "g", &topics, opts()).unwrap();
        // b gets its share only once a released it (a's next sync commits a's positions).
        assert!(b.assignment().is_empty());
        let mut seen: Vec<(TopicPartition, i64)> =
            first.iter().map(|(tp, r)| (tp.clone(), r.offset)).collect();
        for _ in 0..20 {
            for c in [&mut a, &mut b] {
                seen.extend(c.poll(7).unwrap().into_iter().map(|(tp, r)| (tp, r.offset)));
            }
        }
        assert_eq!(a.assignment().len(), 2);
        assert_eq!(b.assignment().len(), 2);
        let n = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n, "no record read twice");
        assert_eq!(n, 40, "every record read");
        a.close(true).unwrap();
        b.close(true).unwrap();
        let committed = GroupStore::new(dir.path(), "g")
            .unwrap()
            .committed()
            .unwrap();
        assert!((0..4).all(|p| committed[&("t".to_string(), p)].offset == 10));
    }

    #[test]
    fn a_member_whose_session_expired_cannot_commit_and_rejoins_on_poll() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "t", 2, 10);
        let topics = vec!["t".to_string()];
        let mut a = GroupConsumer::join(
            dir.path(),
            "g",
            &topics,
            ConsumerOptions {
                sync_interval: Duration::ZERO,
                session_timeout_ms: 50,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(a.poll(4).unwrap().len(), 4);
        let first_id = a.member_id().to_string();
        // a stalls past its session; b's join finds it gone and takes both partitions.
        std::thread::sleep(Duration::from_millis(120));
        let mut b = GroupConsumer::join(
            dir.path(),
            "g",
            &topics,
            ConsumerOptions {
                sync_interval: Duration::ZERO,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(b.assignment().len(), 2);
        let read_by_b = b.poll(100).unwrap().len();
        assert_eq!(read_by_b, 20, "a committed nothing: b reads every record");
        b.commit(None).unwrap();
        // a's positions are stale: committing them would rewind b's offsets.
        let err = a.commit(None).unwrap_err().to_string();
        assert!(err.contains("CommitFailed"), "{err}");
        let committed = || {
            GroupStore::new(dir.path(), "g")
                .unwrap()
                .committed()
                .unwrap()
        };
        assert!((0..2).all(|p| committed()[&("t".to_string(), p)].offset == 10));
        // a's next poll joins again, as a new member, and reads nothing b has committed.
        let again = a.poll(100).unwrap();
        assert_ne!(a.member_id(), first_id);
        assert!(again.is_empty(), "{again:?}");
        for _ in 0..5 {
            b.poll(10).unwrap();
            a.poll(10).unwrap();
        }
        assert_eq!(a.assignment().len() + b.assignment().len(), 2);
        assert_eq!(
            a.assignment().len(),
            1,
            "a got its share of the new generation"
        );
        a.close(true).unwrap();
        assert!((0..2).all(|p| committed()[&("t".to_string(), p)].offset == 10));
    }
}
