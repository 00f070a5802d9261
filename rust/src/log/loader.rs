//! Opening a partition directory (Kafka's `LogLoader`): stray `.deleted`/`.cleaned` files removed
//! and `.swap` segments completed (writable only), segments opened with missing or corrupt indexes
//! rebuilt, the tail recovered after an unclean shutdown, offsets restored from Kafka's
//! checkpoint files. A read-only open changes nothing on disk: a torn tail is hidden in memory.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};
use crate::index::txn::AbortedTxn;
use crate::log::checkpoint::{self, OffsetCheckpointFile};
use crate::log::epoch::LeaderEpochFileCache;
use crate::log::producer_state::ProducerStateManager;
use crate::log::segments::LogSegments;
use crate::log::{Log, LogOptions, LogState};
use crate::record::batch::Batch;
use crate::segment::{
    offset_from_file_name, segment_file, LogOffsetMetadata, LogSegment, CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
};

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";

/// The broker-level checkpoint entries for this partition, when the directory is named
/// `<topic>-<partition>` inside a log dir that has them.
#[derive(Debug, Default)]
struct Checkpoints {
    recovery_point: Option<i64>,
    log_start_offset: Option<i64>,
    high_watermark: Option<i64>,
    clean_shutdown: bool,
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
    out.recovery_point = read(RECOVERY_POINT_CHECKPOINT)?;
    out.log_start_offset = read(LOG_START_OFFSET_CHECKPOINT)?;
    out.high_watermark = read(REPLICATION_OFFSET_CHECKPOINT)?;
    Ok(out)
}

/// Writes this partition's entries into the log dir's checkpoint files, keeping other partitions'.
pub(crate) fn write_checkpoints(dir: &Path, st: &LogState) -> Result<()> {
    let Some(parent) = dir.parent() else {
        return Ok(());
    };
    let Some(tp) = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(checkpoint::parse_topic_partition)
    else {
        return Ok(());
    };
    let update = |name: &str, offset: i64| -> Result<()> {
        OffsetCheckpointFile::new(parent.join(name)).update(&tp.0, tp.1, Some(offset))
    };
    update(RECOVERY_POINT_CHECKPOINT, st.recovery_point)?;
    update(LOG_START_OFFSET_CHECKPOINT, st.log_start_offset)?;
    update(
        REPLICATION_OFFSET_CHECKPOINT,
        st.high_watermark.message_offset,
    )?;
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string()
}

/// Kafka's `removeTempFilesAndCollectSwapFiles` + swap completion: `.deleted` and `.cleaned`
/// files go; a `.swap` log replaces the segments it covers; swap indexes are dropped (rebuilt).
fn clean_directory(dir: &Path, config: &crate::config::LogConfig, now: i64) -> Result<()> {
    let mut swap_logs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = file_name(&path);
        if name.ends_with(DELETED_FILE_SUFFIX) || name.ends_with(CLEANED_FILE_SUFFIX) {
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
        let name = file_name(&entry.map_err(|e| Error::io(dir, e))?.path());
        if name.ends_with(LOG_FILE_SUFFIX) && name.len() == 20 + LOG_FILE_SUFFIX.len() {
            if let Some(base) = offset_from_file_name(&name) {
                out.insert(base);
            }
        }
    }
    Ok(out.into_iter().collect())
}

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

/// The error for a read-only open of a folder without segment files, saying what is there.
fn not_a_partition_folder(dir: &Path) -> Error {
    let partitions: Vec<String> = crate::datadir::partition_folders(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let found =
        if !partitions.is_empty() {
            let shown: Vec<&str> = partitions.iter().take(5).map(String::as_str).collect();
            format!(
            "a Kafka data dir holding {} partition folders ({}{}); open one of them, or read the \
             whole dir with kafkalog.spark",
            partitions.len(),
            shown.join(", "),
            if partitions.len() > shown.len() { ", ..." } else { "" }
        )
        } else {
            "no Kafka segment files (<20-digit base offset>.log) in it; create=True (writable) \
         starts a new log"
                .to_string()
        };
    Error::InvalidArgument(format!(
        "{} is not a Kafka partition folder: {found}",
        dir.display()
    ))
}

pub(crate) fn load(dir: &Path, options: LogOptions) -> Result<Log> {
    let config = &options.config;
    config.validate()?;
    let writable = !options.read_only;
    let now = (options.clock)();
    if dir.exists() && !dir.is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "a file, not a Kafka partition folder (<topic>-<partition>)",
            ),
        ));
    }
    if !dir.is_dir() {
        if options.create && writable {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        } else {
            return Err(Error::io(
                dir,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such log directory"),
            ));
        }
    }
    // Before anything on disk changes: one writer per log, and none beside a running broker.
    let writer_lock = if writable {
        Some(crate::datadir::lock_partition_dir(dir)?)
    } else {
        None
    };
    let checkpoints = read_checkpoints(dir)?;
    if writable {
        clean_directory(dir, config, now)?;
    }
    let bases = list_log_bases(dir)?;
    if bases.is_empty() && !writable {
        // A read-only view of a folder with no segment at all is a wrong path, not an empty
        // log (a broker's empty partition still has its 0-byte `.log`).
        return Err(not_a_partition_folder(dir));
    }
    if writable {
        delete_orphan_indexes(dir, &bases)?;
    }

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
        }
        segments.add(segment);
    }
    let mut producer_state = ProducerStateManager::new(dir, options.read_only)?;
    let epoch_cache = LeaderEpochFileCache::open(dir, options.read_only)?;

    // Segments to validate: after an unclean shutdown, those from the recovery point on.
    let recovery_point = checkpoints.recovery_point.unwrap_or(0);
    let mut bytes_truncated = 0u64;
    let to_check: Vec<i64> = if checkpoints.clean_shutdown {
        needs_recovery.clone()
    } else {
        let floor = segments
            .floor(recovery_point)
            .map_or(i64::MIN, LogSegment::base_offset);
        bases
            .iter()
            .copied()
            .filter(|b| *b >= floor || needs_recovery.contains(b))
            .collect()
    };
    let log_start_hint = checkpoints
        .log_start_offset
        .unwrap_or(i64::MIN)
        .max(segments.first().map_or(0, LogSegment::base_offset));
    if !to_check.is_empty() {
        let first = to_check[0];
        producer_state.truncate_and_reload(log_start_hint, first, now)?;
        let from = producer_state.map_end_offset();
        replay(&segments, &mut producer_state, from, first)?;
    }
    let mut drop_after: Option<i64> = None;
    for base in to_check {
        if drop_after.is_some_and(|d| base > d) {
            break;
        }
        let seg = segments.get_mut(base).expect("listed segment");
        if writable {
            let mut aborted = Vec::new();
            let truncated = seg.recover(&mut |batch| {
                if let Some((done, lso)) = producer_state.replay_batch(batch)? {
                    aborted.extend(done.to_aborted_txn(lso));
                }
                Ok(())
            })?;
            for txn in aborted {
                seg.append_aborted_txn(txn)?;
            }
            if truncated > 0 {
                bytes_truncated += truncated;
                drop_after = Some(base);
            }
        } else {
            let (valid, aborted) = valid_prefix(seg, &mut producer_state)?;
            for txn in aborted {
                seg.add_in_memory_aborted_txn(txn)?;
            }
            if valid < seg.size() {
                bytes_truncated += seg.size() - valid;
                seg.limit_to(valid);
                drop_after = Some(base);
            }
        }
    }
    if let Some(last_good) = drop_after {
        // Everything after a corrupt segment is unreachable garbage, as Kafka treats it.
        for base in segments
            .base_offsets()
            .into_iter()
            .filter(|b| *b > last_good)
        {
            let seg = segments.remove(base).expect("listed segment");
            if writable {
                let mut seg = seg;
                seg.change_file_suffixes("", DELETED_FILE_SUFFIX)?;
                seg.delete()?;
            }
        }
    }

    if writable {
        if let Some(active) = segments.active_mut() {
            // Recovery trims indexes; the active segment's need room for appends again (Kafka
            // resizes them once loading is done).
            active.offset_index_resize(config.max_index_size)?;
        }
    }

    // An empty directory becomes an empty log at the checkpointed start offset.
    if segments.is_empty() && writable {
        let start = checkpoints.log_start_offset.unwrap_or(0).max(0);
        segments.add(LogSegment::open(dir, start, config, true, "", now)?);
    }
    let log_end = match segments.active() {
        Some(active) => active.read_next_offset()?,
        None => checkpoints.log_start_offset.unwrap_or(0).max(0),
    };
    let first_base = segments.first().map_or(log_end, LogSegment::base_offset);
    let mut log_start_offset = checkpoints
        .log_start_offset
        .unwrap_or(first_base)
        .max(first_base);
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
    let dir = dir.to_path_buf();
    Ok(Log::from_parts(
        dir,
        &options,
        state,
        bytes_truncated,
        checkpoints.high_watermark,
    ))
}

/// A read-only segment's valid prefix: batches are validated (CRC, offsets) until the first bad
/// one, and replayed into the producer state; the aborted transactions they complete are returned
/// so the view can answer read_committed even where the `.txnindex` lost them.
fn valid_prefix(
    segment: &LogSegment,
    producer_state: &mut ProducerStateManager,
) -> Result<(u64, Vec<AbortedTxn>)> {
    let mut aborted = Vec::new();
    let log = segment.log();
    let mut reader = log.batches(0, log.size_in_bytes(), segment.max_batch_size());
    let mut valid = 0u64;
    loop {
        let next = match reader.next_batch() {
            Ok(Some(x)) => x,
            Ok(None) => break,
            Err(Error::CorruptRecord { .. }) => break,
            Err(e) => return Err(e),
        };
        let (position, bytes) = next;
        let Ok(batch) = Batch::parse(bytes) else {
            break;
        };
        if batch.ensure_valid().is_err()
            || !segment.can_convert_to_relative_offset(batch.last_offset())
        {
            break;
        }
        if let Some((done, lso)) = producer_state.replay_batch(&batch)? {
            aborted.extend(done.to_aborted_txn(lso));
        }
        valid = position + bytes.len() as u64;
    }
    Ok((valid, aborted))
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
        while let Some((_, bytes)) = reader.next_batch()? {
            let batch = Batch::parse(bytes)?;
            if batch.last_offset() < from {
                continue;
            }
            if batch.last_offset() >= to {
                return Ok(());
            }
            producer_state.replay_batch(&batch)?;
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
