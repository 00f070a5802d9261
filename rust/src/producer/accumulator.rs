//! A producer writing one topic of a local data dir (Kafka's `KafkaProducer` with its
//! `RecordAccumulator` and `TransactionManager`): records are partitioned, gathered into one open
//! v2 batch per partition, and a batch is appended to its partition's log when it is full
//! (`batch.size`), when its first record waited `linger.ms`, or on `flush`. Idempotent producers
//! stamp a producer id and per-partition sequences so the log rejects a retried batch as a
//! duplicate; transactional ones keep their id and epoch in a file per `transactional.id` and
//! end a transaction with markers in every partition it wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::partitioner::{
    estimated_record_bytes, partition_for_key, to_positive, StickyPartitioner,
};
use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::log::{Log, LogOptions};
use crate::record::batch::{
    Batch, DefaultBatch, DEFAULT_MAX_DECOMPRESSED_BYTES, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE, RECORD_BATCH_OVERHEAD,
};
use crate::record::builder::{end_txn_marker_batch, BatchBuilder, BatchOptions};
use crate::record::codec::Compression;
use crate::record::control::{ControlRecordType, EndTransactionMarker};

/// Where transactional ids keep their producer id and epoch (in the data dir's kafkalog folder).
pub const TRANSACTIONS_DIR: &str = "transactions";

/// Kafka's `acks`, read as a durability choice on a local disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// 0 and 1: the bytes are in the page cache when the append returns.
    Written,
    /// "all" / -1: each appended batch is fsynced before the call that appended it returns.
    Synced,
}

impl Acks {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "0" | "1" => Ok(Acks::Written),
            "all" | "-1" => Ok(Acks::Synced),
            other => Err(Error::InvalidArgument(format!(
                "acks '{other}' (0, 1 or all)"
            ))),
        }
    }
}

/// How records without an explicit partition are partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionerKind {
    /// Kafka's built-in partitioner: murmur2 of the key, sticky for records without one.
    Default,
    /// murmur2 of the key; records without a key go round robin.
    Murmur2,
    /// Kafka's `RoundRobinPartitioner` (keys ignored).
    RoundRobin,
    /// A uniformly random partition per record.
    Random,
}

impl PartitionerKind {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "default" | "built_in" => Ok(PartitionerKind::Default),
            "murmur2" => Ok(PartitionerKind::Murmur2),
            "round_robin" | "roundrobin" => Ok(PartitionerKind::RoundRobin),
            "random" => Ok(PartitionerKind::Random),
            other => Err(Error::InvalidArgument(format!(
                "partitioner '{other}' (default, murmur2, round_robin, random, or a callable)"
            ))),
        }
    }
}

pub struct ProducerOptions {
    pub compression: Compression,
    pub batch_size: usize,
    pub linger: Duration,
    pub acks: Acks,
    pub idempotent: bool,
    pub transactional_id: Option<String>,
    pub partitioner: PartitionerKind,
    pub config: LogConfig,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            compression: Compression::None,
            batch_size: super::partitioner::DEFAULT_BATCH_SIZE,
            // Kafka 4.0's default linger.ms.
            linger: Duration::from_millis(5),
            acks: Acks::Synced,
            idempotent: false,
            transactional_id: None,
            partitioner: PartitionerKind::Default,
            config: LogConfig::default(),
        }
    }
}

/// Where one producer batch's records went, in record order: each part's first record (its
/// offset delta in the batch) and the part's first offset, or why the part failed; a part runs
/// to the next one's first record. One part unless the batch was split to fit
/// `max.message.bytes` (`append_splitting`).
pub type BatchParts = Vec<(i32, Result<i64>)>;

/// A batch's parts, set once it is appended or has failed.
pub type BatchOutcome = Arc<OnceLock<BatchParts>>;

/// What `send` hands back: the partition now, the offset once the record's batch is appended.
#[derive(Debug, Clone)]
pub struct SendHandle {
    pub partition: i32,
    pub offset_delta: i32,
    pub outcome: BatchOutcome,
}

impl SendHandle {
    /// The record's offset, or why its part of the batch failed; `None` while the batch is open.
    pub fn offset(&self) -> Option<Result<i64>> {
        self.outcome.get().map(|parts| {
            let (first, part) = parts
                .iter()
                .rev()
                .find(|(first, _)| *first <= self.offset_delta)
                .expect("a batch's first part starts at its first record");
            part.clone()
                .map(|base| base + i64::from(self.offset_delta - first))
        })
    }
}

/// Records appended by the parts of a batch of `count` records.
fn appended_records(parts: &BatchParts, count: i32) -> i32 {
    let ends = parts.iter().skip(1).map(|(first, _)| *first).chain([count]);
    parts
        .iter()
        .zip(ends)
        .filter(|((_, part), _)| part.is_ok())
        .map(|((first, _), end)| end - first)
        .sum()
}

struct OpenBatch {
    builder: BatchBuilder,
    created: Instant,
    outcome: BatchOutcome,
}

#[derive(Default)]
struct PartitionState {
    log: Option<Log>,
    open: Option<OpenBatch>,
    next_sequence: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct TxnFile {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    /// Empty, Ongoing, PrepareCommit, PrepareAbort (Kafka's `TransactionState` names).
    state: String,
    partitions: Vec<(String, i32)>,
}

/// Appends a producer's batch; one larger than the topic's `max.message.bytes` is split in two
/// and each half appended (again split while too large), as Kafka's producer splits a batch the
/// broker refused as MESSAGE_TOO_LARGE (`RecordAccumulator.splitAndReenqueue`). The halves take
/// consecutive offsets and sequences. A single record over the limit fails alone (Kafka's
/// `RecordTooLargeException` on its future); the records after it still go in, taking its
/// sequence (`TransactionManager.adjustSequencesDueToFailedBatch`). Any other failure fails its
/// part and every record after it, which are not tried.
fn append_splitting(log: &Log, bytes: Vec<u8>) -> BatchParts {
    let mut parts = Vec::new();
    append_part(log, bytes, 0, &mut parts);
    parts
}

/// Appends `bytes`, the batch's records from `first` on, adding its parts to `parts`: how many
/// records went in, and whether the records after these are still to be tried.
fn append_part(log: &Log, bytes: Vec<u8>, first: i32, parts: &mut BatchParts) -> (i32, bool) {
    // The builder's bytes are one whole batch: their length is its size.
    if bytes.len() <= log.config().max_message_bytes {
        return append_whole(log, &bytes, first, parts);
    }
    let mut scratch = Vec::new();
    let decoded = Batch::parse(&bytes).and_then(|batch| {
        let header = DefaultBatch::new(&bytes)?;
        let options = BatchOptions {
            compression: batch.compression()?,
            producer_id: header.producer_id(),
            producer_epoch: header.producer_epoch(),
            base_sequence: header.base_sequence(),
            is_transactional: header.is_transactional(),
            ..Default::default()
        };
        Ok((
            batch.records(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?,
            options,
        ))
    });
    let (records, options) = match decoded {
        Ok(decoded) => decoded,
        Err(e) => {
            parts.push((first, Err(e)));
            return (0, false);
        }
    };
    if records.len() < 2 {
        // The log refuses it as RecordTooLarge.
        return append_whole(log, &bytes, first, parts);
    }
    let mid = records.len() / 2;
    let mut appended = 0;
    for (start, half) in [(0, &records[..mid]), (mid, &records[mid..])] {
        let start = first + start as i32;
        let mut half_options = options.clone();
        if options.base_sequence != NO_SEQUENCE {
            half_options.base_sequence = ((i64::from(options.base_sequence) + i64::from(appended))
                % (i64::from(i32::MAX) + 1)) as i32;
        }
        let mut builder = BatchBuilder::new(half_options);
        let built = half
            .iter()
            .try_for_each(|r| {
                let headers: Vec<(&str, Option<&[u8]>)> = r
                    .headers
                    .iter()
                    .map(|h| (h.key.as_ref(), h.value))
                    .collect();
                builder.append(r.timestamp, r.key, r.value, &headers)
            })
            .and_then(|()| builder.build());
        let (went_in, go_on) = match built {
            Ok(bytes) => append_part(log, bytes, start, parts),
            Err(e) => {
                parts.push((start, Err(e)));
                (0, false)
            }
        };
        appended += went_in;
        if !go_on {
            return (appended, false);
        }
    }
    (appended, true)
}

/// Appends `bytes` as they are: one part.
fn append_whole(log: &Log, bytes: &[u8], first: i32, parts: &mut BatchParts) -> (i32, bool) {
    match log.append_as_leader(bytes, log.current_leader_epoch()) {
        Ok(info) => {
            parts.push((first, Ok(info.first_offset)));
            (info.record_count as i32, true)
        }
        Err(e) => {
            let go_on = matches!(e, Error::RecordTooLarge(_));
            parts.push((first, Err(e)));
            (0, go_on)
        }
    }
}

/// A producer of one topic.
pub struct TopicProducer {
    data_dir: PathBuf,
    topic: String,
    num_partitions: i32,
    options: ProducerOptions,
    partitions: Vec<PartitionState>,
    sticky: StickyPartitioner,
    round_robin: i32,
    producer_id: i64,
    producer_epoch: i16,
    txn_lock: Option<std::fs::File>,
    in_transaction: bool,
    txn_partitions: BTreeSet<i32>,
    /// The first failure of a record of the open transaction: it can only abort (Kafka's
    /// abortable error state).
    txn_error: Option<Error>,
    closed: bool,
    /// The process that made it: a child forked since holds a copy, which it may not use (its
    /// parent goes on with the original) and which closes without a write.
    owner_pid: u32,
}

fn txn_file_path(data_dir: &Path, id: &str) -> Result<PathBuf> {
    Ok(crate::datadir::kafkalog_meta_dir(data_dir)
        .join(TRANSACTIONS_DIR)
        .join(format!("{}.json", crate::group::group_folder_name(id)?)))
}

impl TopicProducer {
    /// A producer of `topic` (which must exist in `data_dir`).
    pub fn new(data_dir: &Path, topic: &str, options: ProducerOptions) -> Result<Self> {
        crate::datadir::validate_topic_name(topic)?;
        crate::datadir::refuse_a_producer_of_an_internal_topic(topic)?;
        let num_partitions = crate::datadir::topic_partition_counts(data_dir)?
            .get(topic)
            .copied()
            .ok_or_else(|| {
                Error::UnknownTopicOrPartition(format!(
                    "topic '{topic}' is not in {}; create it first",
                    data_dir.display()
                ))
            })?;
        if options
            .transactional_id
            .as_deref()
            .is_some_and(str::is_empty)
        {
            return Err(Error::InvalidArgument(
                "transactional_id cannot be empty (None for a producer without transactions)"
                    .into(),
            ));
        }
        // A producer writes every partition of its topic; a partition its broker keeps in
        // another of its log.dirs failed only the sends that landed there, each with a bare "no
        // such log directory" (a black-box tester), leaving a keyed stream half written.
        let missing: Vec<i32> = (0..num_partitions)
            .filter(|p| !data_dir.join(format!("{topic}-{p}")).is_dir())
            .collect();
        if !missing.is_empty() {
            return Err(Error::UnknownTopicOrPartition(format!(
                "topic '{topic}' has {num_partitions} partitions, but {} of them ({}) have no \
                 folder in {} (a broker with several log.dirs keeps them in another): a producer \
                 writes every partition of its topic; write this dir's partitions with Log",
                missing.len(),
                missing
                    .iter()
                    .take(10)
                    .map(|p| format!("{topic}-{p}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                data_dir.display()
            )));
        }
        // Kafka's `ProducerConfig`: idempotence (which a transactional id implies) needs
        // acks=all; batch_size 0 is allowed and turns batching off (a batch per record).
        if (options.idempotent || options.transactional_id.is_some())
            && options.acks != Acks::Synced
        {
            return Err(Error::InvalidArgument(
                "Must set acks to all in order to use the idempotent producer (a transactional \
                 id implies it). Otherwise we cannot guarantee idempotence."
                    .into(),
            ));
        }
        let mut p = TopicProducer {
            data_dir: data_dir.to_path_buf(),
            topic: topic.to_string(),
            num_partitions,
            partitions: (0..num_partitions)
                .map(|_| PartitionState::default())
                .collect(),
            sticky: StickyPartitioner::new(num_partitions, options.batch_size),
            round_robin: 0,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            txn_lock: None,
            in_transaction: false,
            txn_partitions: BTreeSet::new(),
            txn_error: None,
            closed: false,
            owner_pid: std::process::id(),
            options,
        };
        if let Some(id) = p.options.transactional_id.clone() {
            p.init_transactions(&id)?;
        } else if p.options.idempotent {
            // No broker hands out ids: a random one, as unlikely to collide as a broker's block.
            p.producer_id = (rand::random::<u64>() >> 2) as i64;
            p.producer_epoch = 0;
        }
        Ok(p)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn num_partitions(&self) -> i32 {
        self.num_partitions
    }
    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }
    pub fn producer_epoch(&self) -> i16 {
        self.producer_epoch
    }
    fn transactional(&self) -> bool {
        self.options.transactional_id.is_some()
    }
    fn idempotent(&self) -> bool {
        self.producer_id != NO_PRODUCER_ID
    }

    /// Kafka's `initTransactions`: one live producer per transactional id (a lock file); the
    /// epoch is bumped, and a transaction its previous producer left open is completed (prepared
    /// commit) or aborted, with markers written under the new epoch.
    fn init_transactions(&mut self, id: &str) -> Result<()> {
        let path = txn_file_path(&self.data_dir, id)?;
        let dir = path.parent().expect("has a parent");
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock_path = path.with_extension("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::ConcurrentWriter(format!(
                    "transactional id '{id}' is in use by a live producer (in this or another \
                     process); close it first"
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
        }
        self.txn_lock = Some(lock);
        let previous: Option<TxnFile> = match std::fs::read(&path) {
            Ok(b) => Some(serde_json::from_slice(&b).map_err(|e| {
                Error::corrupt(format!(
                    "{} is not a transaction state file: {e}",
                    path.display()
                ))
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let (pid, epoch) = match &previous {
            Some(f) if f.producer_epoch < i16::MAX - 1 => (f.producer_id, f.producer_epoch + 1),
            _ => ((rand::random::<u64>() >> 2) as i64, 0),
        };
        self.producer_id = pid;
        self.producer_epoch = epoch;
        if let Some(f) = previous.filter(|f| f.state != "Empty" && !f.partitions.is_empty()) {
            let commit = f.state == "PrepareCommit";
            for (topic, partition) in &f.partitions {
                let log = self.open_log_of(topic, *partition)?;
                self.write_marker(&log, commit)?;
                log.close()?;
            }
        }
        self.save_txn("Empty")
    }

    fn save_txn(&self, state: &str) -> Result<()> {
        let Some(id) = &self.options.transactional_id else {
            return Ok(());
        };
        let file = TxnFile {
            transactional_id: id.clone(),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            state: state.to_string(),
            partitions: self
                .txn_partitions
                .iter()
                .map(|p| (self.topic.clone(), *p))
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("plain data serializes");
        crate::group::write_atomically(&txn_file_path(&self.data_dir, id)?, &bytes)
    }

    fn open_log_of(&self, topic: &str, partition: i32) -> Result<Log> {
        Log::open(
            self.data_dir.join(format!("{topic}-{partition}")),
            LogOptions {
                read_only: false,
                config: self.options.config.clone(),
                ..Default::default()
            },
        )
    }

    fn write_marker(&self, log: &Log, commit: bool) -> Result<i64> {
        let batch = end_txn_marker_batch(
            0,
            crate::log::system_clock()(),
            0,
            self.producer_id,
            self.producer_epoch,
            EndTransactionMarker {
                control_type: if commit {
                    ControlRecordType::Commit
                } else {
                    ControlRecordType::Abort
                },
                coordinator_epoch: 0,
            },
        )?;
        // Stamped with the log's epoch, as its other appends are: a lower one would cut the
        // epoch history back (Kafka's cache drops every entry at or above an epoch assigned).
        let offset = log
            .append_txn_marker(&batch, log.current_leader_epoch())?
            .first_offset;
        if self.options.acks == Acks::Synced {
            log.flush()?;
        }
        Ok(offset)
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::IllegalState("the producer is closed".into()));
        }
        crate::group::refuse_in_a_fork(self.owner_pid, "this producer")
    }

    /// The partition the configured partitioner picks (not for callables: the caller passes
    /// their choice to `send`). `record_bytes` feeds the sticky choice.
    pub fn choose_partition(&mut self, key: Option<&[u8]>) -> i32 {
        let n = self.num_partitions;
        match (self.options.partitioner, key) {
            (PartitionerKind::Default | PartitionerKind::Murmur2, Some(k)) => {
                partition_for_key(k, n)
            }
            (PartitionerKind::Default, None) => self.sticky.partition(),
            (PartitionerKind::Murmur2 | PartitionerKind::RoundRobin, _) => {
                let v = self.round_robin;
                self.round_robin = self.round_robin.wrapping_add(1);
                to_positive(v) % n
            }
            (PartitionerKind::Random, _) => to_positive(rand::random::<i32>()) % n,
        }
    }

    /// Kafka's `send`: the record joins its partition's open batch (a full batch is appended
    /// first); returns the partition and a handle that learns the offset once the batch is in
    /// the log. `partition=None` asks the partitioner.
    pub fn send(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> Result<SendHandle> {
        self.check_open()?;
        if self.transactional() && !self.in_transaction {
            return Err(Error::IllegalState(
                "a transactional producer sends within a transaction: call begin_transaction() \
                 first"
                    .into(),
            ));
        }
        if let Some(e) = &self.txn_error {
            return Err(Self::failed_transaction(e));
        }
        if let Some(t) = timestamp.filter(|t| *t < 0) {
            return Err(Error::InvalidArgument(format!(
                "Invalid timestamp: {t}. Timestamp should always be non-negative or null \
                 (Kafka's ProducerRecord)"
            )));
        }
        let sticky = partition.is_none()
            && key.is_none()
            && self.options.partitioner == PartitionerKind::Default;
        let timestamp = timestamp.unwrap_or_else(|| crate::log::system_clock()());
        let batch_size = self.options.batch_size;
        if sticky {
            // RecordAccumulator.append: before a record joins the sticky partition, a switch
            // held back (that partition had a batch still filling) goes ahead once no batch is
            // left filling there: its last one was appended (full, lingered or flushed), or this
            // record does not fit it (Kafka closes it and draws again, so the record opens its
            // batch in the next partition).
            if let Some(current) = self.sticky.current() {
                let takes = self.partitions[current as usize]
                    .open
                    .as_ref()
                    .is_some_and(|b| {
                        b.builder
                            .has_room_for(batch_size, timestamp, key, value, headers)
                    });
                if !takes {
                    // Kafka closes it for appends, and a closed batch is sent at once.
                    let _ = self.append_open(current);
                    self.sticky.update(0, true);
                }
            }
        }
        let partition = match partition {
            Some(p) if p < 0 || p >= self.num_partitions => {
                return Err(Error::InvalidArgument(format!(
                    "partition {p} of topic '{}', which has {} partitions",
                    self.topic, self.num_partitions
                )))
            }
            Some(p) => p,
            None => self.choose_partition(key),
        };
        let record_bytes = estimated_record_bytes(key, value, headers);
        self.check_record_fits(timestamp, key, value, headers, record_bytes)?;
        if self.in_transaction && self.txn_partitions.insert(partition) {
            // Kafka's AddPartitionsToTxn: the partition is on record before data goes there.
            self.save_txn("Ongoing")?;
        }
        // A record that does not fit the open batch starts a new one (Kafka's tryAppend).
        let full = self.partitions[partition as usize]
            .open
            .as_ref()
            .is_some_and(|b| {
                !b.builder
                    .has_room_for(batch_size, timestamp, key, value, headers)
            });
        // An append's failure goes to the futures of the records it failed (Kafka's send never
        // throws for an earlier batch); in a transaction it also stops the commit.
        if full {
            let _ = self.append_open(partition);
        }
        let options = self.batch_options(partition);
        let state = &mut self.partitions[partition as usize];
        let open = state.open.get_or_insert_with(|| OpenBatch {
            builder: BatchBuilder::new(options),
            created: Instant::now(),
            outcome: Arc::new(OnceLock::new()),
        });
        let offset_delta = open.builder.count();
        // What the partitioner counts (RecordAppendResult.appendedBytes): the batch's growth, a
        // new batch's whole size with its header.
        let size_before = if offset_delta == 0 {
            0
        } else {
            open.builder.estimated_size()
        };
        open.builder.append(timestamp, key, value, headers)?;
        let appended_bytes = open.builder.estimated_size() - size_before;
        let handle = SendHandle {
            partition,
            offset_delta,
            outcome: open.outcome.clone(),
        };
        let now_full = open.builder.estimated_size() >= batch_size;
        if now_full {
            let _ = self.append_open(partition);
        }
        if sticky {
            // Switching right after the append only where this record filled its batch (Kafka's
            // `allBatchesFull`: a batch just opened is still filling), or at twice batch_size.
            let filled = self.partitions[partition as usize].open.is_none();
            self.sticky.update(appended_bytes, filled);
        }
        let _ = self.append_lingered();
        Ok(handle)
    }

    /// An uncompressed record that alone makes a batch over the topic's `max.message.bytes` is
    /// refused at `send`, as Kafka's producer refuses one over `max.request.size`: batched, it
    /// would fail the records beside it. (Compressed, it may fit; the append splits and decides.)
    fn check_record_fits(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        estimated_bytes: usize,
    ) -> Result<()> {
        let limit = self.options.config.max_message_bytes;
        // The estimate's framing is a little short of a record's largest: measure near the limit.
        if self.options.compression != Compression::None
            || RECORD_BATCH_OVERHEAD + estimated_bytes + 64 <= limit
        {
            return Ok(());
        }
        let mut alone = BatchBuilder::new(BatchOptions::default());
        alone.append(timestamp, key, value, headers)?;
        let size = alone.estimated_size();
        if size > limit {
            return Err(Error::RecordTooLarge(format!(
                "a record that makes a batch of {size} bytes on its own is larger than topic \
                 '{}''s max.message.bytes ({limit})",
                self.topic
            )));
        }
        Ok(())
    }

    fn batch_options(&self, partition: i32) -> BatchOptions {
        BatchOptions {
            compression: self.options.compression,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: if self.idempotent() {
                self.partitions[partition as usize].next_sequence
            } else {
                NO_SEQUENCE
            },
            is_transactional: self.in_transaction,
            ..Default::default()
        }
    }

    /// Appends every open batch whose first record waited `linger.ms` or longer.
    pub fn append_lingered(&mut self) -> Result<()> {
        let linger = self.options.linger;
        for p in 0..self.num_partitions {
            let due = self.partitions[p as usize]
                .open
                .as_ref()
                .is_some_and(|b| b.created.elapsed() >= linger);
            if due {
                self.append_open(p)?;
            }
        }
        Ok(())
    }

    /// Appends `partition`'s open batch (if any) to its log; the first failure of a record of it.
    pub fn append_open(&mut self, partition: i32) -> Result<()> {
        let Some(open) = self.partitions[partition as usize].open.take() else {
            return Ok(());
        };
        let parts = self.append_batch(partition, open.builder);
        let failed = parts
            .iter()
            .find_map(|(_, part)| part.as_ref().err().cloned());
        if let Some(e) = failed.as_ref().filter(|_| self.in_transaction) {
            self.txn_error.get_or_insert_with(|| e.clone());
        }
        let _ = open.outcome.set(parts);
        failed.map_or(Ok(()), Err)
    }

    fn append_batch(&mut self, partition: i32, builder: BatchBuilder) -> BatchParts {
        let failed = |e: Error| vec![(0, Err(e))];
        if self.partitions[partition as usize].log.is_none() {
            match self.open_log_of(&self.topic.clone(), partition) {
                Ok(log) => self.partitions[partition as usize].log = Some(log),
                Err(e) => return failed(e),
            }
        }
        let (idempotent, acks) = (self.idempotent(), self.options.acks);
        let state = &mut self.partitions[partition as usize];
        let count = builder.count();
        // The base sequence was stamped when the batch opened: a partition has one open batch
        // at a time, appended before the next opens, so it is the partition's next sequence.
        let bytes = match builder.build() {
            Ok(bytes) => bytes,
            Err(e) => return failed(e),
        };
        let log = state.log.as_ref().expect("opened above");
        let mut parts = append_splitting(log, bytes);
        let appended = appended_records(&parts, count);
        if appended > 0 && acks == Acks::Synced {
            if let Err(e) = log.flush() {
                // Written but not on disk: not acknowledged, as a broker's acks=all would not.
                for (_, part) in &mut parts {
                    if part.is_ok() {
                        *part = Err(e.clone());
                    }
                }
            }
        }
        if idempotent {
            // DefaultRecordBatch.incrementSequence: wraps at i32::MAX. Records that failed
            // give their sequences to the next ones (adjustSequencesDueToFailedBatch).
            state.next_sequence = ((i64::from(state.next_sequence) + i64::from(appended))
                % (i64::from(i32::MAX) + 1)) as i32;
        }
        parts
    }

    /// Why a transaction with a failed record refuses to go on but to abort.
    fn failed_transaction(cause: &Error) -> Error {
        Error::IllegalState(format!(
            "a record of this transaction failed ({cause}): the transaction can only be \
             aborted (abort_transaction())"
        ))
    }

    /// Kafka's `flush`: appends every open batch.
    pub fn flush(&mut self) -> Result<()> {
        self.check_open()?;
        let mut first_err = None;
        for p in 0..self.num_partitions {
            if let Err(e) = self.append_open(p) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    pub fn begin_transaction(&mut self) -> Result<()> {
        self.check_open()?;
        if !self.transactional() {
            return Err(Error::IllegalState(
                "begin_transaction needs a transactional_id".into(),
            ));
        }
        if self.in_transaction {
            return Err(Error::IllegalState("a transaction is already open".into()));
        }
        self.in_transaction = true;
        self.txn_partitions.clear();
        Ok(())
    }

    fn end_transaction(&mut self, commit: bool) -> Result<()> {
        self.check_open()?;
        if !self.in_transaction {
            return Err(Error::IllegalState("no transaction is open".into()));
        }
        if commit {
            if let Some(e) = &self.txn_error {
                return Err(Self::failed_transaction(e));
            }
            self.flush()?;
        } else {
            // Unwritten batches of an aborted transaction are dropped, never written.
            for p in 0..self.num_partitions {
                if let Some(open) = self.partitions[p as usize].open.take() {
                    let _ = open.outcome.set(vec![(
                        0,
                        Err(Error::IllegalState("the transaction was aborted".into())),
                    )]);
                }
            }
        }
        self.save_txn(if commit {
            "PrepareCommit"
        } else {
            "PrepareAbort"
        })?;
        let partitions: Vec<i32> = self.txn_partitions.iter().copied().collect();
        for p in partitions {
            if self.partitions[p as usize].log.is_none() {
                let log = self.open_log_of(&self.topic.clone(), p)?;
                self.partitions[p as usize].log = Some(log);
            }
            let log = self.partitions[p as usize].log.as_ref().expect("opened");
            self.write_marker(log, commit)?;
        }
        self.in_transaction = false;
        self.txn_partitions.clear();
        self.txn_error = None;
        self.save_txn("Empty")
    }

    pub fn commit_transaction(&mut self) -> Result<()> {
        self.end_transaction(true)
    }

    pub fn abort_transaction(&mut self) -> Result<()> {
        self.end_transaction(false)
    }

    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Appends what is buffered (an open transaction is aborted) and closes the logs.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.owner_pid != std::process::id() {
            // A forked child's copy: its open batches and logs are its parent's to write.
            self.closed = true;
            self.partitions.clear();
            self.txn_lock = None;
            return Ok(());
        }
        let mut result = if self.in_transaction {
            self.abort_transaction()
        } else {
            self.flush()
        };
        self.closed = true;
        let logs: Vec<_> = self
            .partitions
            .iter_mut()
            .filter_map(|s| s.log.take())
            .collect();
        if let Err(e) = Log::close_all(&logs) {
            if result.is_ok() {
                result = Err(e);
            }
        }
        self.txn_lock = None;
        result
    }

    /// Partitions with a batch waiting to be appended.
    pub fn pending_partitions(&self) -> BTreeMap<i32, i32> {
        self.partitions
            .iter()
            .enumerate()
            .filter_map(|(p, s)| s.open.as_ref().map(|b| (p as i32, b.builder.count())))
            .collect()
    }
}

impl Drop for TopicProducer {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::FetchIsolation;

    fn producer(dir: &Path, partitions: i32, options: ProducerOptions) -> TopicProducer {
        crate::datadir::create_topic(dir, "t", partitions).unwrap();
        TopicProducer::new(dir, "t", options).unwrap()
    }

    /// A producer of topic `t` with transactional id `tx`.
    fn transactional(dir: &Path) -> Result<TopicProducer> {
        TopicProducer::new(
            dir,
            "t",
            ProducerOptions {
                transactional_id: Some("tx".into()),
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_batch_over_max_message_bytes_is_split_not_lost() {
        // Kafka's producer splits a batch the broker refuses as too large and sends the halves;
        // every record arrives, with consecutive offsets and sequences.
        let dir = tempfile::tempdir().unwrap();
        let mut config = LogConfig::default();
        config.set("max.message.bytes", "3000").unwrap();
        for compression in [Compression::None, Compression::Lz4] {
            let topic = format!("t{}", compression.name());
            crate::datadir::create_topic(dir.path(), &topic, 1).unwrap();
            let mut p = TopicProducer::new(
                dir.path(),
                &topic,
                ProducerOptions {
                    batch_size: 16384,
                    linger: Duration::from_secs(3600),
                    idempotent: true,
                    compression,
                    config: config.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
            // Values that do not compress: random bytes.
            let values: Vec<Vec<u8>> = (0..40)
                .map(|_| (0..300).map(|_| rand::random::<u8>()).collect())
                .collect();
            let handles: Vec<_> = values
                .iter()
                .map(|v| p.send(None, Some(v), &[], Some(0), None).unwrap())
                .collect();
            p.flush().unwrap();
            let offsets: Vec<i64> = handles
                .iter()
                .map(|h| h.offset().unwrap().unwrap())
                .collect();
            assert_eq!(offsets, (0..40).collect::<Vec<i64>>());
            // A single record over the limit fails alone; the records beside it go in. Uncompressed,
            // it is refused at send; compressed, it shares a batch and fails at the split.
            let small = p.send(None, Some(b"before"), &[], Some(0), None).unwrap();
            let big: Vec<u8> = (0..4000).map(|_| rand::random::<u8>()).collect();
            let sent = p.send(None, Some(&big), &[], Some(0), None);
            let after = p.send(None, Some(b"after"), &[], Some(0), None).unwrap();
            let flushed = p.flush();
            if compression == Compression::None {
                assert!(matches!(sent, Err(Error::RecordTooLarge(_))), "{sent:?}");
                flushed.unwrap();
                assert_eq!(after.offset().unwrap().unwrap(), 41);
            } else {
                assert!(
                    matches!(flushed, Err(Error::RecordTooLarge(_))),
                    "{flushed:?}"
                );
                let big = sent.unwrap().offset();
                assert!(
                    matches!(big, Some(Err(Error::RecordTooLarge(_)))),
                    "{big:?}"
                );
                // The record after the failed one takes the next offset (and its sequence).
                assert_eq!(after.offset().unwrap().unwrap(), 41);
            }
            assert_eq!(small.offset().unwrap().unwrap(), 40);
            p.close().unwrap();
            let log =
                Log::open(dir.path().join(format!("{topic}-0")), LogOptions::default()).unwrap();
            let mut read = Vec::new();
            let mut next_sequence = 0;
            log.for_each_batch(
                None,
                None,
                crate::log::FetchIsolation::LogEnd,
                true,
                &mut |_, b, _, _| {
                    assert!(b.size_in_bytes() <= 3000);
                    if let Batch::V2(v2) = b {
                        assert_eq!(v2.base_sequence(), next_sequence);
                        next_sequence += v2.records_count();
                    }
                    let mut scratch = Vec::new();
                    for r in b
                        .records(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)
                        .unwrap()
                    {
                        read.push(r.value.unwrap().to_vec());
                    }
                    Ok(true)
                },
            )
            .unwrap();
            assert_eq!(read[40..], [b"before".to_vec(), b"after".to_vec()]);
            assert_eq!(read[..40], values, "{compression:?}");
        }
    }

    #[test]
    fn batches_fill_then_append() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = producer(
            dir.path(),
            1,
            ProducerOptions {
                batch_size: 300,
                linger: Duration::from_secs(3600),
                ..Default::default()
            },
        );
        let handles: Vec<_> = (0..20)
            .map(|i| {
                p.send(
                    None,
                    Some(format!("value-{i:04}").as_bytes()),
                    &[],
                    None,
                    Some(i),
                )
                .unwrap()
            })
            .collect();
        assert!(
            handles[0].offset().is_some(),
            "the first batch filled and was appended"
        );
        assert!(
            handles[19].offset().is_none(),
            "the last batch is still open"
        );
        p.flush().unwrap();
        let offsets: Vec<i64> = handles
            .iter()
            .map(|h| h.offset().unwrap().unwrap())
            .collect();
        assert_eq!(offsets, (0..20).collect::<Vec<_>>());
        p.close().unwrap();
        let log = Log::open(dir.path().join("t-0"), LogOptions::default()).unwrap();
        let mut batches = 0;
        log.for_each_batch(
            None,
            None,
            FetchIsolation::LogEnd,
            true,
            &mut |_, b, _, _| {
                assert!(b.size_in_bytes() <= 300 + 40);
                batches += 1;
                Ok(true)
            },
        )
        .unwrap();
        assert!(batches > 1 && batches < 20, "{batches} batches");
    }

    #[test]
    fn round_robin_cycles_and_sticky_moves_once_a_batch_closed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = producer(
            dir.path(),
            3,
            ProducerOptions {
                partitioner: PartitionerKind::RoundRobin,
                ..Default::default()
            },
        );
        let chosen: Vec<i32> = (0..7).map(|_| p.choose_partition(Some(b"k"))).collect();
        assert_eq!(
            chosen,
            [0, 1, 2, 0, 1, 2, 0],
            "RoundRobinPartitioner ignores keys"
        );
        p.close().unwrap();
        let mut s = TopicProducer::new(
            dir.path(),
            "t",
            ProducerOptions {
                batch_size: 200,
                linger: Duration::from_secs(3600),
                ..Default::default()
            },
        )
        .unwrap();
        // A record of a 50-byte value (timestamps alike) is 57 bytes: a batch (61 bytes of
        // header) holds two.
        let r1 = s.send(None, Some(&[7; 50]), &[], None, Some(1000)).unwrap();
        let r2 = s.send(None, Some(&[7; 50]), &[], None, Some(1000)).unwrap();
        assert!(s.sticky.current().is_some());
        assert_eq!(s.sticky.produced(), 61 + 2 * 57);
        // r3 does not fit: the batch is appended, but only 175 bytes went there: no switch.
        let r3 = s.send(None, Some(&[7; 50]), &[], None, Some(1000)).unwrap();
        assert!(r1.offset().is_some() && r3.offset().is_none());
        let r4 = s.send(None, Some(&[7; 50]), &[], None, Some(1000)).unwrap();
        assert_eq!(
            (r2.partition, r3.partition, r4.partition),
            (r1.partition, r1.partition, r1.partition)
        );
        // 350 bytes went there, but r3's batch is still filling: Kafka holds the switch back
        // (RecordAccumulator's allBatchesFull) until the batch is done.
        assert_eq!(s.sticky.produced(), 61 + 2 * 57 + 61 + 2 * 57);
        // r5 does not fit r3's batch: it is appended and the partitioner draws before r5 joins
        // a batch (the draw may give the same partition again).
        let r5 = s.send(None, Some(&[7; 50]), &[], None, Some(1000)).unwrap();
        assert!(r3.offset().is_some() && r5.offset().is_none());
        assert_eq!(s.sticky.current(), Some(r5.partition));
        assert_eq!(
            s.sticky.produced(),
            61 + 57,
            "counted afresh in the partition drawn"
        );
        s.close().unwrap();
    }

    #[test]
    fn bad_partition_and_send_outside_a_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = producer(dir.path(), 2, ProducerOptions::default());
        assert!(p.send(None, Some(b"v"), &[], Some(2), None).is_err());
        let early = p.send(None, Some(b"v"), &[], Some(0), Some(-5));
        assert!(matches!(early, Err(Error::InvalidArgument(m)) if m.contains("non-negative")));
        p.close().unwrap();
        let mut t = transactional(dir.path()).unwrap();
        assert!(t.send(None, Some(b"v"), &[], None, None).is_err());
        assert!(
            transactional(dir.path()).is_err(),
            "one live producer per transactional id"
        );
        t.close().unwrap();
    }

    /// A transaction's marker takes the log's latest leader epoch, as its records do: stamped 0
    /// on a log at epoch 5, it cut the epoch history to `0 <offset>` and later batches followed,
    /// which a broker then truncated away (a black-box tester).
    #[test]
    fn transaction_markers_keep_the_logs_leader_epoch() {
        let dir = tempfile::tempdir().unwrap();
        crate::datadir::create_topic(dir.path(), "t", 1).unwrap();
        let path = dir.path().join("t-0");
        let log = Log::open(
            &path,
            LogOptions {
                read_only: false,
                ..Default::default()
            },
        )
        .unwrap();
        let mut b = crate::record::builder::BatchBuilder::new(Default::default());
        b.append(1_000, None, Some(b"a"), &[]).unwrap();
        log.append_as_leader(&b.build().unwrap(), 5).unwrap();
        log.close().unwrap();
        drop(log);
        let mut t = transactional(dir.path()).unwrap();
        for commit in [true, false] {
            t.begin_transaction().unwrap();
            t.send(None, Some(b"v"), &[], Some(0), None).unwrap();
            if commit {
                t.commit_transaction().unwrap();
            } else {
                t.abort_transaction().unwrap();
            }
        }
        t.close().unwrap();
        let log = Log::open(&path, LogOptions::default()).unwrap();
        let mut epochs = Vec::new();
        log.for_each_batch(
            None,
            None,
            FetchIsolation::LogEnd,
            true,
            &mut |_, b, _, _| {
                epochs.push((b.is_control(), b.partition_leader_epoch()));
                Ok(true)
            },
        )
        .unwrap();
        // The aborted transaction's record was never appended (an abort drops unsent batches).
        assert_eq!(epochs, [(false, 5), (false, 5), (true, 5), (true, 5)]);
        assert_eq!(log.latest_epoch(), Some(5));
        let checkpoint = path.join(crate::log::epoch::LEADER_EPOCH_CHECKPOINT_FILE);
        assert_eq!(std::fs::read_to_string(checkpoint).unwrap(), "0\n1\n5 0\n");
    }
}
