//! Opening a partition directory (Kafka's `LogLoader.load`), in Kafka's steps:
//! `check_partition_folder` (what the path is), `remove_temp_files_and_complete_swaps` (stray
//! `.deleted`/`.cleaned` files removed and `.swap` segments completed, writable only),
//! `load_segment_files` (segments opened, missing or corrupt indexes rebuilt), `recover_log`
//! (the tail after an unclean shutdown validated; damage told from a torn tail and handled as
//! `OnCorruption` says) and `complete_load` (offsets from Kafka's checkpoint files). A read-only
//! open changes nothing on disk: a torn tail is hidden in memory.
//!
//! Damage: Kafka's recovery stops at the first invalid batch and deletes everything after it.
//! A torn tail of the last segment is what a crash leaves and is recovered silently, as Kafka
//! does; anything else (an invalid batch with valid batches after it, an emptied or missing
//! segment between others, offsets going backwards, a gap a non-compacted log cannot have) is
//! damage: refused by default (`LogDamaged`), stepped over by a read-only `Skip`, or recovered
//! Kafka's way with `Truncate`, and reported either way (`Log::damaged_ranges`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::index::txn::AbortedTxn;
use crate::log::checkpoint::{self, OffsetCheckpointFile};
use crate::log::epoch::LeaderEpochFileCache;
use crate::log::producer_state::ProducerStateManager;
use crate::log::segments::LogSegments;
use crate::log::{Log, LogOptions, LogState};
use crate::record::batch::{Batch, MAGIC_V2};
use crate::segment::{
    offset_from_file_name, segment_file, BatchVerdict, LogOffsetMetadata, LogSegment, SegmentScan,
    CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
};

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// What an open does with damage beyond a torn tail of the last segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnCorruption {
    /// Refuse to open with `Error::LogDamaged`, naming files, positions and offsets.
    #[default]
    Error,
    /// Read-only: step over damaged bytes and read every valid batch after them.
    Skip,
    /// Kafka's recovery: the log ends at the first invalid batch; a writable open truncates
    /// there and deletes every later segment, a read-only one shows that view.
    Truncate,
}

impl OnCorruption {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "error" => Ok(OnCorruption::Error),
            "skip" => Ok(OnCorruption::Skip),
            "truncate" => Ok(OnCorruption::Truncate),
            other => Err(Error::InvalidArgument(format!(
                "on_corruption '{other}': 'error' (refuse, the default), 'skip' (read-only: read \
                 around the damage) or 'truncate' (Kafka's recovery: end the log at the damage)"
            ))),
        }
    }
}

/// What the loader did about a damaged stretch of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamageAction {
    /// The open was refused (`OnCorruption::Error`).
    Refused,
    /// Reads step over the bytes (`OnCorruption::Skip`).
    Skipped,
    /// Truncated or deleted on disk, or left out of a read-only view (`OnCorruption::Truncate`).
    Removed,
    /// Offsets missing with no bytes to act on (a gap, a missing or emptied segment).
    Missing,
}

impl DamageAction {
    pub fn name(&self) -> &'static str {
        match self {
            DamageAction::Refused => "refused",
            DamageAction::Skipped => "skipped",
            DamageAction::Removed => "removed",
            DamageAction::Missing => "missing",
        }
    }
}

/// One damaged stretch of a log: where, how many bytes, which offsets, why, what was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRange {
    pub file: PathBuf,
    pub position: u64,
    pub bytes: u64,
    /// First and last offsets lost, where the batches around the damage tell them (on a
    /// compacted log, the range they were in).
    pub offsets: Option<(i64, i64)>,
    pub reason: String,
    pub action: DamageAction,
}

impl std::fmt::Display for DamagedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at position {} ({} bytes): {}; ",
            self.file.display(),
            self.position,
            self.bytes,
            self.reason
        )?;
        match self.offsets {
            Some((a, b)) if a == b => write!(f, "offset {a} lost"),
            Some((a, b)) => write!(f, "offsets {a}..{b} lost"),
            None => write!(f, "the offsets lost are unknown"),
        }
    }
}

/// The broker-level checkpoint entries for this partition, when the directory is named
/// `<topic>-<partition>` inside a log dir that has them.
#[derive(Debug, Default)]
struct Checkpoints {
    recovery_point: Option<i64>,
    log_start_offset: Option<i64>,
    high_watermark: Option<i64>,
    clean_shutdown: bool,
    /// The log cleaner has compacted this partition (it has a `cleaner-offset-checkpoint` entry):
    /// gaps between offsets are normal.
    cleaned: bool,
}

fn read_checkpoints(dir: &Path) -> Result<Checkpoints> {
    let mut out = Checkpoints::default();
    let Some(parent) = dir.parent() else {
        return Ok(out);
    };
    out.clean_shutdown = checkpoint::CleanShutdownFile::in_log_dir(parent)
        .read()?
        .is_some();
    let Some(tp) = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(checkpoint::parse_topic_partition)
    else {
        return Ok(out);
    };
    let read = |name: &str| -> Result<Option<i64>> {
        let path = parent.join(name);
        if !path.exists() {
            return Ok(None);
        }
        Ok(OffsetCheckpointFile::new(&path).read()?.get(&tp).copied())
    };
    // Kafka's LogManager reads these two inside a try: an unreadable file means "recover
    // everything from the first segment", never a refused start.
    out.recovery_point = read(RECOVERY_POINT_CHECKPOINT).unwrap_or(None);
    out.log_start_offset = read(LOG_START_OFFSET_CHECKPOINT).unwrap_or(None);
    out.high_watermark = read(REPLICATION_OFFSET_CHECKPOINT)?;
    out.cleaned = read(CLEANER_OFFSET_CHECKPOINT).unwrap_or(None).is_some();
    Ok(out)
}

/// Writes these partitions' entries into their log dirs' checkpoint files, keeping other
/// partitions': each file of a dir is read and replaced once for all of them (a producer closing
/// 500 partitions writes three files, not 1,500), under the dir's lock.
pub(crate) fn write_checkpoints(logs: &[(&Path, &LogState)]) -> Result<()> {
    type Entries = Vec<((String, i32), [i64; 3])>;
    let mut by_dir: std::collections::BTreeMap<PathBuf, Entries> = Default::default();
    for (dir, st) in logs {
        let (Some(parent), Some(tp)) = (
            dir.parent(),
            dir.file_name()
                .and_then(|n| n.to_str())
                .and_then(checkpoint::parse_topic_partition),
        ) else {
            continue;
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let offsets = [
            st.recovery_point,
            st.log_start_offset,
            st.high_watermark.message_offset,
        ];
        by_dir
            .entry(parent.to_path_buf())
            .or_default()
            .push((tp, offsets));
    }
    for (parent, entries) in by_dir {
        let _exclusive = checkpoint::LogDirLock::acquire(&parent)?;
        for (i, name) in [
            RECOVERY_POINT_CHECKPOINT,
            LOG_START_OFFSET_CHECKPOINT,
            REPLICATION_OFFSET_CHECKPOINT,
        ]
        .into_iter()
        .enumerate()
        {
            let file = OffsetCheckpointFile::new(parent.join(name));
            let mut offsets = match file.read() {
                Ok(offsets) => offsets,
                // Unreadable recovery points and log start offsets read as none (as
                // `read_checkpoints` and Kafka's LogManager do): written again from these entries.
                Err(Error::CorruptRecord { .. }) if name != REPLICATION_OFFSET_CHECKPOINT => {
                    Default::default()
                }
                Err(e) => return Err(e),
            };
            for (tp, values) in &entries {
                offsets.insert(tp.clone(), values[i]);
            }
            file.write(&offsets)?;
        }
    }
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string()
}

/// Kafka's `removeTempFilesAndCollectSwapFiles` + swap completion: `.deleted`, `.cleaned` and
/// `.tmp` files go; a `.swap` log replaces the segments it covers; swap indexes are dropped (rebuilt).
fn remove_temp_files_and_complete_swaps(
    dir: &Path,
    config: &crate::config::LogConfig,
    now: i64,
) -> Result<()> {
    let mut swap_logs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = file_name(&path);
        // `.tmp`: a checkpoint or producer snapshot a crash left before its rename (Kafka
        // writes over its own next time; kafkalog's snapshots are named by offset, so they
        // piled up).
        if name.ends_with(DELETED_FILE_SUFFIX)
            || name.ends_with(CLEANED_FILE_SUFFIX)
            || name.ends_with(checkpoint::TEMP_FILE_SUFFIX)
        {
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        } else if let Some(base) = name.strip_suffix(SWAP_FILE_SUFFIX) {
            if base.ends_with(LOG_FILE_SUFFIX) {
                swap_logs.push(path);
            } else {
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            }
        }
    }
    swap_logs.sort();
    for swap in swap_logs {
        let Some(base) = offset_from_file_name(&file_name(&swap)) else {
            continue;
        };
        let mut segment = LogSegment::open(dir, base, config, true, SWAP_FILE_SUFFIX, now)?;
        segment.recover(&mut |_| Ok(()))?;
        let next = segment.read_next_offset()?;
        // Segments the swap replaces: those whose base falls in [base, next).
        for existing in list_log_bases(dir)? {
            if existing >= base && existing < next.max(base + 1) {
                for suffix in [
                    LOG_FILE_SUFFIX,
                    INDEX_FILE_SUFFIX,
                    TIME_INDEX_FILE_SUFFIX,
                    TXN_INDEX_FILE_SUFFIX,
                ] {
                    let p = segment_file(dir, existing, suffix, "");
                    if p.exists() {
                        std::fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
                    }
                }
            }
        }
        segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")?;
        segment.close()?;
    }
    Ok(())
}

fn list_log_bases(dir: &Path) -> Result<Vec<i64>> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = file_name(&path);
        if !name.ends_with(LOG_FILE_SUFFIX) {
            continue;
        }
        match offset_from_file_name(&name).filter(|_| !is_misnamed_log_file(&name)) {
            Some(base) => {
                out.insert(base);
            }
            // Kafka's loader parses any `*.log` name as a base offset: it loads a short number
            // at that offset and fails on the rest. Left out here, its records would be
            // missing with nothing said.
            None => {
                return Err(Error::LogDamaged {
                    message: format!("{} {MISNAMED_LOG_FILE}", path.display()),
                    damage: Vec::new(),
                })
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// Whether a file named `name` in a partition folder is one a broker's loader parses as a
/// segment (any `*.log`) though its name is not a segment's (`<20-digit base offset>.log`).
pub(crate) fn is_misnamed_log_file(name: &str) -> bool {
    name.ends_with(LOG_FILE_SUFFIX)
        && !(name.len() == 20 + LOG_FILE_SUFFIX.len() && offset_from_file_name(name).is_some())
}

/// What is wrong with such a file (see [`is_misnamed_log_file`]), said after its path.
pub(crate) const MISNAMED_LOG_FILE: &str = "ends in .log but is not named as a segment is \
     (<20-digit base offset>.log): a broker would not load this log as it is (or load the file \
     at another offset); rename it to its base offset or move it out";

/// Index files whose `.log` is gone are deleted when writable (Kafka does the same).
fn delete_orphan_indexes(dir: &Path, bases: &[i64]) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = file_name(&path);
        let is_index = [
            INDEX_FILE_SUFFIX,
            TIME_INDEX_FILE_SUFFIX,
            TXN_INDEX_FILE_SUFFIX,
        ]
        .iter()
        .any(|s| name.ends_with(s));
        if is_index {
            if let Some(base) = offset_from_file_name(&name) {
                if bases.binary_search(&base).is_err() {
                    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                }
            }
        }
    }
    Ok(())
}

/// Whether the folder holds any segment `.log` (also mid-swap, mid-clean or mid-delete).
fn has_segment_files(dir: &Path) -> Result<bool> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let name = file_name(&entry.map_err(|e| Error::io(dir, e))?.path());
        if offset_from_file_name(&name).is_some() && name.contains(LOG_FILE_SUFFIX) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The error for a folder without segment files, saying what is there.
fn not_a_partition_folder(dir: &Path, partitions: &[String]) -> Error {
    let found = if !partitions.is_empty() {
        let shown: Vec<&str> = partitions.iter().take(5).map(String::as_str).collect();
        format!(
            "a Kafka data dir holding {} partition folders ({}{}); open one of them, or read the \
             whole dir with kafkalog.spark",
            partitions.len(),
            shown.join(", "),
            if partitions.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        )
    } else {
        "no Kafka segment files (<20-digit base offset>.log) in it; read_only=False, create=True \
         starts a new log"
            .to_string()
    };
    Error::InvalidArgument(format!(
        "{} is not a Kafka partition folder: {found}",
        dir.display()
    ))
}

/// What the path is, before anything is locked or written: a partition folder, a folder to
/// create a log in (`create`, writable), or an error that says what was found instead.
fn check_partition_folder(dir: &Path, options: &LogOptions) -> Result<()> {
    let writable = !options.read_only;
    if dir.exists() && !dir.is_dir() {
        let what = if offset_from_file_name(&file_name(dir)).is_some() {
            format!(
                "a segment file, not a partition folder: open its folder {}",
                dir.parent().unwrap_or(Path::new(".")).display()
            )
        } else {
            "a file, not a Kafka partition folder (<topic>-<partition>)".to_string()
        };
        // Nothing failed to read: a path that is not a folder is a bad argument, as a folder of
        // partition folders is.
        return Err(Error::InvalidArgument(format!(
            "{} is {what}",
            dir.display()
        )));
    }
    if !dir.is_dir() {
        if options.create && writable {
            // A broker would take a partition folder it did not make for a stray and delete
            // it, with what was written there, as for a topic created beside it.
            if let (Some(data_dir), Some((topic, _))) = (
                dir.parent(),
                dir.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(checkpoint::parse_topic_partition),
            ) {
                crate::datadir::refuse_new_partitions_beside_a_broker(data_dir, &topic)?;
            }
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            return Ok(());
        }
        if options.create {
            return Err(create_needs_writable(dir));
        }
        return Err(Error::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such log directory"),
        ));
    }
    if has_segment_files(dir)? {
        return Ok(());
    }
    // A broker's partition folder whose segments are gone still says what it is: a writable
    // open starts its log again.
    if writable && dir.join(checkpoint::PARTITION_METADATA_FILE).is_file() {
        return Ok(());
    }
    let partitions: Vec<String> = crate::datadir::partition_folders(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    // A folder of partition folders is never a log, even with create=True.
    if !(partitions.is_empty() && options.create) {
        return Err(not_a_partition_folder(dir, &partitions));
    }
    if !writable {
        return Err(create_needs_writable(dir));
    }
    Ok(())
}

/// `create=True` where a log would have to be started, in a read-only open (the default): said
/// as such rather than as a missing or empty folder.
fn create_needs_writable(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{} holds no log yet, and create=True starts one only in a writable open: pass \
         read_only=False as well",
        dir.display()
    ))
}

/// Opens of a read-only log that retry when a file went while the folder was read.
const READ_ONLY_OPEN_ATTEMPTS: usize = 10;

pub(crate) fn load(dir: &Path, options: LogOptions) -> Result<Log> {
    let mut attempt = 1;
    loop {
        match load_once(dir, &options) {
            // A writer deleting segments (retention renames them `.deleted`, as Kafka's does)
            // can take a file between the folder's listing and its open: a read-only open lists
            // the folder again, as one starting after the deletion would.
            Err(Error::Io {
                path: Some(file),
                source,
            }) if options.read_only
                && source.kind() == std::io::ErrorKind::NotFound
                && file.parent() == Some(dir)
                && dir.is_dir()
                && attempt < READ_ONLY_OPEN_ATTEMPTS =>
            {
                attempt += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
pub(crate) type ListingHook = Box<dyn FnMut(&Path)>;

#[cfg(test)]
thread_local! {
    /// Called between a load's listing of the folder and its opening of the segments (tests
    /// race a deletion there).
    pub(crate) static AFTER_LISTING: std::cell::RefCell<Option<ListingHook>> =
        const { std::cell::RefCell::new(None) };
}

fn load_once(dir: &Path, options: &LogOptions) -> Result<Log> {
    let config = &options.config;
    config.validate()?;
    let writable = !options.read_only;
    if writable && options.on_corruption == OnCorruption::Skip {
        return Err(Error::InvalidArgument(
            "on_corruption='skip' is for read-only opens: a writable log cannot keep damaged \
             bytes between the batches it appends after; open read-only to read around the \
             damage, or writable with on_corruption='truncate' to recover as Kafka does"
                .into(),
        ));
    }
    let now = (options.clock)();
    check_partition_folder(dir, options)?;
    // Before anything on disk changes: one writer per log, and none beside a running broker.
    let writer_lock = if writable {
        Some(crate::datadir::lock_partition_dir(dir)?)
    } else {
        None
    };
    let checkpoints = read_checkpoints(dir)?;
    if writable {
        remove_temp_files_and_complete_swaps(dir, config, now)?;
    }
    let (mut segments, needs_recovery) = load_segment_files(dir, options, now)?;
    let mut producer_state = ProducerStateManager::new(dir, options.read_only)?;
    // Recovery drops the snapshots past where it starts before it knows whether the log opens:
    // their files go only once it does.
    producer_state.defer_deletes();
    // A leader-epoch checkpoint that does not parse stops a broker's load of the log, and a
    // default open's; a read-only view that skips damage reads the records without it.
    let (epoch_cache, epoch_damage) = match LeaderEpochFileCache::open(dir, options.read_only) {
        Err(Error::CorruptRecord { message, location })
            if options.read_only && options.on_corruption == OnCorruption::Skip =>
        {
            let cache = LeaderEpochFileCache::empty_read_only(dir);
            let bytes = std::fs::metadata(cache.path()).map_or(0, |m| m.len());
            let damage = DamagedRange {
                file: cache.path().to_path_buf(),
                position: location.position.unwrap_or(0),
                bytes,
                offsets: None,
                reason: format!("{message} (read without leader epochs)"),
                action: DamageAction::Skipped,
            };
            (cache, Some(damage))
        }
        other => (other?, None),
    };
    let mut recovery = recover_log(
        dir,
        &mut segments,
        &needs_recovery,
        &checkpoints,
        &mut producer_state,
        options,
        now,
    )?;
    recovery.damage.extend(epoch_damage);
    let clean_shutdown = checkpoints.clean_shutdown;
    let log = complete_load(
        dir,
        options,
        segments,
        &checkpoints,
        producer_state,
        epoch_cache,
        writer_lock,
        recovery,
        now,
    )?;
    if writable {
        log.write_state()?.producer_state.delete_deferred()?;
    }
    if writable && clean_shutdown {
        // As Kafka's LogManager once a log dir is loaded: the marker vouches for files this
        // writer is about to change, so a crash from here on must not read as a clean shutdown.
        // (Only once loaded: an open that fails leaves the marker, and the folder, as they were.)
        if let Some(log_dir) = dir.parent() {
            checkpoint::CleanShutdownFile::in_log_dir(log_dir).remove()?;
        }
    }
    Ok(log)
}

/// Kafka's `loadSegmentFiles`: every segment opened; those with a missing or corrupt index are
/// listed for recovery (writable) or get private rebuilt indexes (read-only).
fn load_segment_files(
    dir: &Path,
    options: &LogOptions,
    now: i64,
) -> Result<(LogSegments, Vec<i64>)> {
    let writable = !options.read_only;
    let config = &options.config;
    let bases = list_log_bases(dir)?;
    if writable {
        delete_orphan_indexes(dir, &bases)?;
    }
    make_room_for_open_files(bases.len());
    #[cfg(test)]
    AFTER_LISTING.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook(dir)
        }
    });
    let mut segments = LogSegments::new();
    let mut needs_recovery = Vec::new();
    for &base in &bases {
        let index_missing = !segment_file(dir, base, INDEX_FILE_SUFFIX, "").exists()
            || !segment_file(dir, base, TIME_INDEX_FILE_SUFFIX, "").exists();
        let mut segment = LogSegment::open(dir, base, config, writable, "", now)?;
        let corrupt = segment.sanity_check().is_err() || segment.indexes_zero_filled();
        if writable && (index_missing || corrupt) {
            needs_recovery.push(base);
        } else if corrupt {
            segment.rebuild_indexes_privately(config)?;
            // A transaction index Kafka would rebuild (zero-filled, entries below the segment)
            // cannot tell read_committed readers what was aborted: the recovery walk replays the
            // segment instead and keeps its aborted transactions in memory.
            if segment.txn_index().sanity_check().is_err() {
                segment.ignore_txn_index_privately()?;
                needs_recovery.push(base);
            }
        }
        segments.add(segment);
    }
    // A writable open of an empty folder (create=True) starts an empty log.
    Ok((segments, needs_recovery))
}

/// An open log holds a descriptor per segment file, as a broker does: the first open raises the
/// process's soft open-file limit to the hard one (at most `nr_open`'s default, 1,048,576), as the
/// JVM running Kafka and its tools does at start (`-XX:+MaxFDLimit`). Only raised as far as each
/// log needed, the limit stopped many small logs (a producer over 600 partitions) that each fit.
/// Where the hard limit is too low, the open's "Too many open files" error says what to do.
fn make_room_for_open_files(files: usize) {
    static RAISED: std::sync::Once = std::sync::Once::new();
    RAISED.call_once(|| raise_soft_open_file_limit(1 << 20));
    // Small logs fit whatever the limit: no look at the process's descriptors for them.
    const SMALL: usize = 64;
    if files < SMALL {
        return;
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    let needed = (open_now + files + SMALL) as libc::rlim_t;
    if needed <= limit.rlim_cur {
        return;
    }
    raise_soft_open_file_limit(needed.saturating_mul(2));
}

/// Raises the soft open-file limit to `to`, or to the hard limit when that is lower; never lowers
/// it. A failure leaves it as it was.
fn raise_soft_open_file_limit(to: libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: to.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    if raised.rlim_cur > limit.rlim_cur {
        // SAFETY: setrlimit reads the struct it is given; a failure leaves the limit as it was.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
}

/// What `recover_log` did: bytes cut from torn tails (and, with `Truncate`, at the damage), and
/// the damage it found.
struct Recovery {
    bytes_truncated: u64,
    damage: Vec<DamagedRange>,
}

/// One segment's findings in `recover_log`'s walk.
struct Checked {
    base: i64,
    /// The offset after its last valid batch.
    end_offset: Option<i64>,
    scan: SegmentScan,
    /// The offset the previous segment ended at (what this one's lost offsets start from).
    expected_at_start: Option<i64>,
    aborted: Vec<AbortedTxn>,
    /// Its last invalid range is a torn tail, let go silently as Kafka's recovery does.
    torn_tail: bool,
}

/// Segments whose first batch starts below the segment's own base offset, right where the
/// segment before ends (a file named one past its first offset, by hand or by an old broker):
/// Kafka's loader takes them, as its recovery checks only that a batch's last offset fits the
/// segment, and its fetches read on into them; so do kafkalog's. Anything else below a base
/// offset stays damage.
fn take_first_batches_below_base(segments: &mut LogSegments) {
    let bases = segments.base_offsets();
    for pair in bases.windows(2) {
        let (previous, base) = (pair[0], pair[1]);
        let Some(segment) = segments.get(base) else {
            continue;
        };
        let Some(first) = segment
            .log()
            .read_header(0, usize::MAX)
            .ok()
            .flatten()
            .filter(|h| h.magic >= MAGIC_V2 && h.base_offset < base && h.last_offset >= base)
            .map(|h| h.base_offset)
        else {
            continue;
        };
        let previous_end = segments.get(previous).map(LogSegment::read_next_offset);
        if matches!(previous_end, Some(Ok(end)) if end == first) {
            if let Some(segment) = segments.get_mut(base) {
                segment.set_first_batch_below_base(first);
            }
        }
    }
}

/// Kafka's `recoverLog`: after an unclean shutdown, the segments from the recovery point on are
/// validated batch by batch (with `Skip`, every segment); offsets are checked across batches and
/// segments; damage is told from a torn tail and handled as `options.on_corruption` says.
fn recover_log(
    dir: &Path,
    segments: &mut LogSegments,
    needs_recovery: &[i64],
    checkpoints: &Checkpoints,
    producer_state: &mut ProducerStateManager,
    options: &LogOptions,
    now: i64,
) -> Result<Recovery> {
    let writable = !options.read_only;
    let mode = options.on_corruption;
    let bases = segments.base_offsets();
    // Beside the clean-shutdown marker Kafka checks nothing more; `Truncate` asks for Kafka's
    // recovery, so it checks from the recovery point all the same.
    let to_check: BTreeSet<i64> = if mode == OnCorruption::Skip {
        bases.iter().copied().collect()
    } else if mode == OnCorruption::Error
        && (checkpoints.clean_shutdown
            || (!writable && flushed_to_the_end(dir, segments, checkpoints)))
    {
        needs_recovery.iter().copied().collect()
    } else {
        let floor = segments
            .floor(checkpoints.recovery_point.unwrap_or(0))
            .map_or(i64::MIN, LogSegment::base_offset);
        bases
            .iter()
            .copied()
            .filter(|b| *b >= floor || needs_recovery.contains(b))
            .collect()
    };
    take_first_batches_below_base(segments);
    let log_start_hint = checkpoints
        .log_start_offset
        .unwrap_or(i64::MIN)
        .max(segments.first().map_or(0, LogSegment::base_offset));
    if let Some(&first) = to_check.first() {
        producer_state.truncate_and_reload(log_start_hint, first, now)?;
        let from = producer_state.map_end_offset();
        replay(segments, producer_state, from, first)?;
    }

    // 1. Find damage, changing nothing: a validating walk over the checked segments, offsets
    //    followed across every batch and segment boundary.
    let log_path = |base: i64| segment_file(dir, base, LOG_FILE_SUFFIX, "");
    let sizes: Vec<u64> = bases
        .iter()
        .map(|b| segments.get(*b).map_or(0, LogSegment::size))
        .collect();
    let mut damage: Vec<DamagedRange> = Vec::new();
    // Offset gaps are damage only in a log that is not compacted. Besides its config and the
    // log dir's cleaner checkpoint (gone when a partition folder is copied alone), a batch the
    // cleaner rewrote says so (`was_compacted`, in bytes its CRC covers, unlike a gap: a base
    // offset is not covered). So gaps are reported once the scan is done.
    let mut compacted = options.config.cleanup_policy_compact
        || checkpoints.cleaned
        || is_compacted_internal_topic(dir);
    let mut gap_damage: Vec<DamagedRange> = Vec::new();
    let mut checked: Vec<Checked> = Vec::new();
    let mut expected: Option<i64> = None;
    // Replaying producer state goes on past damage only when reads will (Skip).
    let mut replaying = !writable;
    for (i, &base) in bases.iter().enumerate() {
        let segment = segments.get(base).expect("listed segment");
        let next_data_base = bases[i + 1..]
            .iter()
            .zip(&sizes[i + 1..])
            .find(|(_, size)| **size > 0)
            .map(|(b, _)| *b);
        let start = segment.lowest_offset();
        // The segment boundary: where its offsets start against where the previous one ended.
        if let Some(e) = expected {
            if start > e {
                gap_damage.push(gap(dir, &bases, &sizes, i, e, base));
            } else if start < e {
                damage.push(DamagedRange {
                    file: log_path(base),
                    position: 0,
                    bytes: 0,
                    offsets: None,
                    reason: format!(
                        "offsets going backwards: the segment's base offset {base} is below \
                         offset {e}, where the segment before it ends"
                    ),
                    action: DamageAction::Missing,
                });
            }
        }
        let expected_at_start = Some(expected.map_or(base, |e| e.max(start)));
        if !to_check.contains(&base) {
            // A damaged unchecked segment is reported when read; its end is then unknown here.
            expected = segment.read_next_offset().ok();
            continue;
        }
        let mut next = expected_at_start;
        let mut prev_end_position = 0u64;
        let mut aborted = Vec::new();
        let mut gaps = Vec::new();
        let scan = segment.scan(&mut |position, batch, after_damage| {
            let (first, last) = match batch {
                Batch::V2(b) => {
                    compacted |= b.was_compacted();
                    (Some(b.base_offset()), b.last_offset())
                }
                Batch::Legacy(_) => (None, batch.last_offset()),
            };
            if let Some(n) = next {
                if first.unwrap_or(last) < n {
                    return Ok(BatchVerdict::Reject(format!(
                        "offsets going backwards: a batch of offsets {}..{last} after offset {}",
                        first.unwrap_or(last),
                        n - 1
                    )));
                }
                // A gap between adjacent valid batches (not the offsets of damage between them).
                if let Some(f) = first {
                    if f > n && position == prev_end_position {
                        gaps.push((position, n, f - 1));
                    }
                }
            }
            next = Some(last + 1);
            prev_end_position = position + batch.size_in_bytes() as u64;
            if replaying && (mode == OnCorruption::Skip || !after_damage) {
                // A marker that does not parse is named where it is.
                let replayed = producer_state
                    .replay_batch(batch)
                    .map_err(|e| e.at(Some(&log_path(base)), position))?;
                if let Some((done, lso)) = replayed {
                    aborted.extend(done.to_aborted_txn(lso));
                }
            }
            Ok(BatchVerdict::Accept)
        })?;
        for (position, a, b) in gaps {
            gap_damage.push(DamagedRange {
                file: log_path(base),
                position,
                bytes: 0,
                offsets: Some((a, b)),
                reason: format!(
                    "offsets {a}..{b} are missing before the batch at this position, a gap a \
                     log that is not compacted cannot have (pass cleanup.policy=compact in \
                     config if the topic is compacted)"
                ),
                action: DamageAction::Missing,
            });
        }
        let last_with_data = next_data_base.is_none();
        // A segment wholly below the log dir's recovery point was flushed before the crash:
        // Kafka's recovery does not even read it, and a crash cannot have torn it.
        let flushed = checkpoints
            .recovery_point
            .is_some_and(|point| bases.get(i + 1).is_some_and(|next| *next <= point));
        let mut torn_tail = false;
        for (k, range) in scan.invalid.iter().enumerate() {
            let runs_to_end = range.end == segment.size();
            // A whole valid batch refused (offsets going backwards) is not what a crash leaves.
            let tail = runs_to_end
                && last_with_data
                && k == scan.invalid.len() - 1
                && !range.whole_batch_refused;
            if tail && !checkpoints.clean_shutdown && !flushed {
                torn_tail = true;
                break; // a torn tail, what a crash leaves: Kafka's recovery, silently
            }
            let first = range
                .last_offset_before
                .map(|o| o + 1)
                .or(expected_at_start);
            // A torn tail beside the clean-shutdown marker ends where the broker's last
            // recovery point says the log ended (a clean shutdown flushes to the log end).
            let last = range.next_offset_after.or(if runs_to_end {
                next_data_base.or(checkpoints.recovery_point.filter(|_| tail))
            } else {
                None
            });
            let offsets = match (first, last) {
                (Some(a), Some(b)) if b > a => Some((a, b - 1)),
                _ => None,
            };
            damage.push(DamagedRange {
                file: log_path(base),
                position: range.start,
                bytes: range.end - range.start,
                offsets,
                reason: if tail && flushed {
                    format!(
                        "{} (in a segment the log dir's recovery point says was flushed before \
                         any crash, so not the torn tail a crash leaves: bytes were lost or \
                         damaged since)",
                        range.reason
                    )
                } else if tail {
                    format!(
                        "{} (at the end of the log, beside the log dir's clean-shutdown marker: \
                         a broker that stopped cleanly leaves no torn tail, so bytes were lost \
                         or damaged since)",
                        range.reason
                    )
                } else if runs_to_end && last_with_data {
                    format!(
                        "{} (at the end of the log: a whole batch whose CRC holds, not the torn \
                         tail a crash leaves)",
                        range.reason
                    )
                } else if runs_to_end {
                    format!(
                        "{} (nothing valid after it in this file, but later segments hold data)",
                        range.reason
                    )
                } else {
                    format!("{} (valid batches follow it)", range.reason)
                },
                action: DamageAction::Refused,
            });
        }
        if !scan.invalid.is_empty() && mode != OnCorruption::Skip {
            replaying = false;
        }
        // Damage to the end of the file: where this segment really ended is unknown.
        expected = if scan.invalid.last().is_some_and(|r| r.end == segment.size()) {
            None
        } else {
            next
        };
        checked.push(Checked {
            base,
            end_offset: next,
            scan,
            expected_at_start,
            aborted,
            torn_tail,
        });
    }
    if !compacted {
        damage.extend(gap_damage);
    }
    damage.sort_by(|a, b| (&a.file, a.position).cmp(&(&b.file, b.position)));

    // 2. Decide: refuse, or act on the damage as asked.
    if mode == OnCorruption::Error && !damage.is_empty() {
        return Err(damaged_error(dir, damage, writable));
    }
    let mut bytes_truncated = 0u64;
    if mode == OnCorruption::Skip {
        // The empty segments after a torn tail go, as Kafka's recovery deletes them, so the log
        // ends where a default open's does.
        let torn_at = checked.iter().find(|c| c.torn_tail).map(|c| c.base);
        for c in checked {
            let segment = segments.get_mut(c.base).expect("listed segment");
            let size = segment.size();
            let has_later_data = bases.iter().zip(&sizes).any(|(b, s)| *b > c.base && *s > 0);
            let mut ranges: Vec<(u64, u64)> =
                c.scan.invalid.iter().map(|r| (r.start, r.end)).collect();
            if let Some(&(start, end)) = ranges.last() {
                if end == size && !has_later_data {
                    ranges.pop();
                    bytes_truncated += size - start;
                    segment.limit_to(start);
                }
            }
            if !ranges.is_empty() {
                segment.skip_damaged(ranges, &options.config)?;
            }
            for txn in c.aborted {
                segment.add_in_memory_aborted_txn(txn)?;
            }
        }
        if let Some(torn_at) = torn_at {
            for base in bases.iter().copied().filter(|b| *b > torn_at) {
                segments.remove(base);
            }
        }
        for d in &mut damage {
            if d.action == DamageAction::Refused {
                d.action = DamageAction::Skipped;
            }
        }
        return Ok(Recovery {
            bytes_truncated,
            damage,
        });
    }

    // 3. Kafka's recovery (`Truncate`, or `Error` with nothing worse than a torn tail): the log
    //    ends at the first invalid batch; the segments after it go.
    let cut = checked
        .iter()
        .find(|c| !c.scan.invalid.is_empty())
        .map(|c| (c.base, c.scan.valid_prefix));
    let mut removed = Vec::new();
    if let Some((cut_base, position)) = cut {
        let c = checked.iter().find(|c| c.base == cut_base).expect("cut");
        let size = segments.get(cut_base).map_or(0, LogSegment::size);
        let first = c.scan.invalid[0]
            .last_offset_before
            .map(|o| o + 1)
            .or(c.expected_at_start);
        // Past the last valid batch: up to where the clean shutdown's recovery point says the
        // log ended, when the damage runs to the end of the log.
        let at_tail = checkpoints.clean_shutdown
            && c.scan.invalid.last().is_some_and(|r| r.end == size)
            && bases
                .iter()
                .zip(&sizes)
                .all(|(b, s)| *b <= cut_base || *s == 0);
        let end = c
            .end_offset
            .filter(|e| first.is_some_and(|a| *e > a))
            .or(checkpoints.recovery_point.filter(|_| at_tail));
        let offsets = match (first, end) {
            (Some(a), Some(b)) if b > a => Some((a, b - 1)),
            _ => None,
        };
        removed.push(DamagedRange {
            file: log_path(cut_base),
            position,
            bytes: size - position,
            offsets,
            reason: if c.scan.invalid[0].whole_batch_refused {
                format!(
                    "truncated at the first invalid batch: {} (its CRC holds, so Kafka's recovery, \
                     which checks sizes and CRCs only, would keep it and what follows, and its \
                     consumers would fail or misread there; read around it read-only with \
                     on_corruption='skip')",
                    c.scan.invalid[0].reason
                )
            } else {
                format!(
                    "truncated at the first invalid batch, as Kafka's recovery does: {}",
                    c.scan.invalid[0].reason
                )
            },
            action: DamageAction::Removed,
        });
        for &base in bases.iter().filter(|b| **b > cut_base) {
            let segment = segments.get(base).expect("listed segment");
            if segment.size() == 0 {
                continue;
            }
            let end = checked
                .iter()
                .find(|c| c.base == base)
                .map_or_else(|| segment.read_next_offset().ok(), |c| c.end_offset);
            removed.push(DamagedRange {
                file: log_path(base),
                position: 0,
                bytes: segment.size(),
                offsets: end.filter(|e| *e > base).map(|e| (base, e - 1)),
                reason: "deleted: a segment after the damage, as Kafka's recovery does".into(),
                action: DamageAction::Removed,
            });
        }
    }
    if writable {
        for c in &checked {
            if cut.is_some_and(|(cut_base, _)| c.base > cut_base) {
                break;
            }
            let limit = match cut {
                Some((cut_base, position)) if cut_base == c.base => position,
                _ => u64::MAX,
            };
            let seg = segments.get_mut(c.base).expect("listed segment");
            let mut aborted = Vec::new();
            bytes_truncated += seg.recover_to(limit, &mut |batch| {
                if let Some((done, lso)) = producer_state.replay_batch(batch)? {
                    aborted.extend(done.to_aborted_txn(lso));
                }
                Ok(())
            })?;
            for txn in aborted {
                seg.append_aborted_txn(txn)?;
            }
        }
    } else {
        for c in checked {
            if cut.is_some_and(|(cut_base, _)| c.base > cut_base) {
                break;
            }
            let seg = segments.get_mut(c.base).expect("listed segment");
            for txn in c.aborted {
                seg.add_in_memory_aborted_txn(txn)?;
            }
            if let Some((_, position)) = cut.filter(|(b, _)| *b == c.base) {
                bytes_truncated += seg.size() - position;
                seg.limit_to(position);
            }
        }
    }
    if let Some((cut_base, _)) = cut {
        for base in bases.iter().copied().filter(|b| *b > cut_base) {
            let seg = segments.remove(base).expect("listed segment");
            if writable {
                let mut seg = seg;
                seg.change_file_suffixes("", DELETED_FILE_SUFFIX)?;
                seg.delete()?;
            }
        }
    }
    if mode == OnCorruption::Truncate {
        // What was removed, and the gaps Kafka keeps as they are.
        damage.retain(|d| d.action == DamageAction::Missing);
        damage.extend(removed);
        damage.sort_by(|a, b| (&a.file, a.position).cmp(&(&b.file, b.position)));
    }
    Ok(Recovery {
        bytes_truncated,
        damage,
    })
}

/// Whether the recovery-point checkpoint covers the whole log, as after its writer closed it (or
/// a broker flushed and checkpointed it since its last append): nothing lies past the point a
/// crash could have torn, so a read-only open needs Kafka's recovery no more than beside the
/// clean-shutdown marker, and reads report any damage they meet. The active segment must hold
/// whole batches, no transaction marker among them, whose offsets follow on to the recovery
/// point, where the file ends, the last of them (from its last index entry, where Kafka's
/// `readNextOffset` reads the end from) CRC-valid. A log a writer may be appending to (a
/// running broker, a writable `Log`) is checked in full as before.
fn flushed_to_the_end(dir: &Path, segments: &LogSegments, checkpoints: &Checkpoints) -> bool {
    let (Some(recovery_point), Some(active)) = (checkpoints.recovery_point, segments.active())
    else {
        return false;
    };
    !crate::datadir::partition_has_writer(dir) && active.ends_whole_at(recovery_point)
}

/// `__consumer_offsets` and `__transaction_state` are always compacted (Kafka creates them so);
/// `__cluster_metadata` is not a compacted log.
pub(crate) fn is_compacted_internal_topic(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .and_then(checkpoint::parse_topic_partition)
        .is_some_and(|(topic, _)| topic.starts_with("__") && topic != "__cluster_metadata")
}

/// A gap at segment `i`'s boundary: offsets `from..base` missing, blamed on the emptied
/// segments right before it, or on a segment file gone.
fn gap(dir: &Path, bases: &[i64], sizes: &[u64], i: usize, from: i64, base: i64) -> DamagedRange {
    let emptied = (0..i).rev().take_while(|&k| sizes[k] == 0).last();
    let (file, reason) = match emptied {
        Some(k) => (
            segment_file(dir, bases[k], LOG_FILE_SUFFIX, ""),
            format!(
                "the segment is empty but later segments hold data: offsets {from}..{} are \
                 missing",
                base - 1
            ),
        ),
        None => (
            segment_file(dir, base, LOG_FILE_SUFFIX, ""),
            format!(
                "offsets {from}..{} are missing before this segment (a segment file deleted?), \
                 a gap a log that is not compacted cannot have (pass cleanup.policy=compact in \
                 config if the topic is compacted)",
                base - 1
            ),
        ),
    };
    DamagedRange {
        file,
        position: 0,
        bytes: 0,
        offsets: Some((from, base - 1)),
        reason,
        action: DamageAction::Missing,
    }
}

/// `Error::LogDamaged` for the damage found: the first range in full, how many more, and the
/// options that open the log anyway.
fn damaged_error(dir: &Path, mut damage: Vec<DamagedRange>, writable: bool) -> Error {
    for d in &mut damage {
        if d.action == DamageAction::Refused {
            d.action = DamageAction::Missing;
        }
    }
    let more = match damage.len() {
        1 => String::new(),
        n => format!(" (and {} more damaged ranges)", n - 1),
    };
    let how = if writable {
        "open it read-only with on_corruption='skip' to read every valid batch, or writable \
         with on_corruption='truncate' for Kafka's recovery, which deletes everything from the \
         first invalid batch on"
    } else {
        "open it with on_corruption='skip' to read every valid batch around the damage, or \
         on_corruption='truncate' to see it as Kafka's recovery would leave it"
    };
    Error::LogDamaged {
        message: format!(
            "log {} is damaged (not a torn tail a crash leaves): {}{more}; {how}",
            dir.display(),
            damage[0]
        ),
        damage,
    }
}

/// The end of Kafka's `load`: log start and end offsets, the high watermark, leader epochs and
/// producer state as the checkpoints and the recovered segments say.
#[allow(clippy::too_many_arguments)]
fn complete_load(
    dir: &Path,
    options: &LogOptions,
    mut segments: LogSegments,
    checkpoints: &Checkpoints,
    producer_state: ProducerStateManager,
    mut epoch_cache: LeaderEpochFileCache,
    writer_lock: Option<crate::datadir::WriterLock>,
    mut recovery: Recovery,
    now: i64,
) -> Result<Log> {
    let writable = !options.read_only;
    let config = &options.config;
    // Read before anything is written: an open that fails here changes nothing.
    let log_end = match segments.active() {
        Some(active) => active.read_next_offset().map_err(|e| match e {
            // Only beside the marker is a damaged tail left unchecked until here: refused as
            // any damage an open refuses (`LogDamaged`, with its range).
            Error::CorruptRecord { message, location } if checkpoints.clean_shutdown => {
                let file = location
                    .file
                    .clone()
                    .unwrap_or_else(|| active.log().path().to_path_buf());
                let position = location.position.unwrap_or(0);
                let range = DamagedRange {
                    file,
                    position,
                    bytes: active.size().saturating_sub(position),
                    offsets: None,
                    reason: message,
                    action: DamageAction::Refused,
                };
                Error::LogDamaged {
                    message: format!(
                        "log {} is damaged: {range}; the log dir's clean-shutdown marker says \
                         the log needs no recovery, so the damage is not recovered: open it \
                         with on_corruption='truncate' to recover it as Kafka's recovery would, \
                         or read-only with on_corruption='skip' to read every valid batch",
                        dir.display()
                    ),
                    damage: vec![range],
                }
            }
            e => e,
        })?,
        None => checkpoints.log_start_offset.unwrap_or(0).max(0),
    };
    let mut checkpointed_start = checkpoints.log_start_offset;
    let log_end = match checkpointed_start {
        Some(start) if start > log_end && !segments.is_empty() => {
            let kept = start_past_end(
                dir,
                options,
                &mut segments,
                &mut epoch_cache,
                &mut recovery.damage,
                (start, log_end),
                now,
            )?;
            if kept == log_end {
                checkpointed_start = None; // read around it: the log starts where its files do
            }
            kept
        }
        _ => log_end,
    };
    if writable {
        if let Some(active) = segments.active_mut() {
            // Recovery trims indexes; the active segment's need room for appends again (Kafka
            // resizes them once loading is done).
            active.offset_index_resize(config.max_index_size)?;
        }
    }
    // An empty directory (create=True) becomes an empty log at the checkpointed start offset.
    if segments.is_empty() && writable {
        segments.add(LogSegment::open(dir, log_end, config, true, "", now)?);
    }
    let first_base = segments.first().map_or(log_end, LogSegment::base_offset);
    let mut log_start_offset = checkpointed_start.unwrap_or(first_base).max(first_base);
    if log_start_offset > log_end {
        log_start_offset = log_end;
    }
    let log_end_offset = match segments.active() {
        Some(a) => LogOffsetMetadata {
            message_offset: log_end,
            segment_base_offset: a.base_offset(),
            relative_position_in_segment: a.size() as i64,
        },
        None => LogOffsetMetadata::offset_only(log_end),
    };
    let mut state = LogState {
        segments,
        log_start_offset,
        log_end_offset,
        high_watermark: LogOffsetMetadata::offset_only(log_start_offset),
        recovery_point: log_end,
        producer_state,
        leader_epoch_cache: epoch_cache,
        unflushed_messages: 0,
        closed: false,
        closed_segments: None,
        writer_lock,
    };
    if writable {
        state.leader_epoch_cache.truncate_from_end(log_end)?;
        state
            .leader_epoch_cache
            .truncate_from_start(log_start_offset)?;
    }
    rebuild_producer_state(&mut state, log_start_offset, log_end, now, false)?;
    let hw = match checkpoints.high_watermark {
        // A lone leader's acknowledged appends are committed: Kafka moves its HW to the LEO when
        // it becomes leader again, so a read-only view of a crashed single-node broker's folder
        // answers what the restarted broker serves, not its last (seconds old) checkpoint.
        Some(_) if options.single_replica => log_end,
        Some(hw) => hw,
        None => log_end,
    };
    state.high_watermark = LogOffsetMetadata::offset_only(hw.clamp(log_start_offset, log_end));
    if state.high_watermark.message_offset == log_end {
        state.high_watermark = state.log_end_offset;
    }
    let hw = state.high_watermark.message_offset;
    state.producer_state.on_high_watermark_updated(hw);
    Ok(Log::from_parts(
        dir.to_path_buf(),
        options,
        state,
        recovery.bytes_truncated,
        recovery.damage,
        checkpoints.high_watermark,
        checkpoints.recovery_point,
    ))
}

/// A log-start-offset checkpoint past the log end: segment files deleted from the file system.
/// Kafka's `LogLoader` then deletes every segment and starts the log empty at the checkpoint;
/// here that is `on_corruption='truncate'` (a read-only open shows that view and deletes
/// nothing), 'skip' reads the files as they are, and the default refuses. Returns the log end.
fn start_past_end(
    dir: &Path,
    options: &LogOptions,
    segments: &mut LogSegments,
    epoch_cache: &mut LeaderEpochFileCache,
    damage: &mut Vec<DamagedRange>,
    (start, log_end): (i64, i64),
    now: i64,
) -> Result<i64> {
    let writable = !options.read_only;
    let mut range = DamagedRange {
        file: dir
            .parent()
            .unwrap_or(Path::new(""))
            .join(LOG_START_OFFSET_CHECKPOINT),
        position: 0,
        bytes: 0,
        offsets: Some((log_end, start - 1)),
        reason: format!(
            "the log dir's {LOG_START_OFFSET_CHECKPOINT} starts {} at offset {start}, past its \
             end {log_end} (segment files deleted from the file system?); Kafka deletes every \
             segment and starts the log empty at {start}",
            dir.display()
        ),
        action: DamageAction::Missing,
    };
    match options.on_corruption {
        OnCorruption::Error => Err(damaged_error(dir, vec![range], writable)),
        OnCorruption::Skip => {
            damage.push(range);
            Ok(log_end)
        }
        OnCorruption::Truncate => {
            for base in segments.base_offsets() {
                let mut segment = segments.remove(base).expect("listed segment");
                if writable {
                    segment.change_file_suffixes("", DELETED_FILE_SUFFIX)?;
                    segment.delete()?;
                }
            }
            if writable {
                epoch_cache.clear_and_flush()?;
                segments.add(LogSegment::open(
                    dir,
                    start,
                    &options.config,
                    true,
                    "",
                    now,
                )?);
            } else {
                epoch_cache.clear();
            }
            range.action = DamageAction::Removed;
            damage.push(range);
            Ok(start)
        }
    }
}

/// Replays the batches in [from, to) into the producer state (Kafka's `rebuildProducerState`
/// after loading the latest snapshot).
fn replay(
    segments: &LogSegments,
    producer_state: &mut ProducerStateManager,
    from: i64,
    to: i64,
) -> Result<()> {
    if from >= to {
        return Ok(());
    }
    for segment in segments.from_offset(from) {
        if segment.base_offset() >= to {
            break;
        }
        let start = segment
            .translate_offset(from, 0)?
            .map_or(segment.size(), |p| p.position);
        let log = segment.log();
        let mut reader = log.batches(start, log.size_in_bytes(), segment.max_batch_size());
        while let Some((position, bytes)) = reader.next_batch()? {
            let at = |e: Error| e.at(Some(log.path()), position);
            let batch = Batch::parse(bytes).map_err(at)?;
            if batch.last_offset() < from {
                continue;
            }
            if batch.last_offset() >= to {
                return Ok(());
            }
            producer_state.replay_batch(&batch).map_err(at)?;
        }
    }
    Ok(())
}

/// Loads the newest producer snapshot at or below `log_end` and replays the batches after it.
pub(crate) fn rebuild_producer_state(
    st: &mut LogState,
    log_start: i64,
    log_end: i64,
    now: i64,
    take_snapshot: bool,
) -> Result<()> {
    st.producer_state
        .truncate_and_reload(log_start, log_end, now)?;
    let from = st.producer_state.map_end_offset().max(log_start);
    replay(&st.segments, &mut st.producer_state, from, log_end)?;
    st.producer_state.update_map_end_offset(log_end);
    if take_snapshot {
        st.producer_state.take_snapshot()?;
    }
    Ok(())
}
