//! Checkpoint files read from disk: the log dir's offset checkpoints
//! (`recovery-point-offset-checkpoint` and friends), `leader-epoch-checkpoint` (through
//! `LeaderEpochFileCache`, read-only and writable, with its queries), `partition.metadata` and
//! `.kafka_cleanshutdown`. The first byte picks the file.
#![no_main]
use kafkalog::log::checkpoint::{CleanShutdownFile, OffsetCheckpointFile, PartitionMetadataFile};
use kafkalog::log::epoch::LeaderEpochFileCache;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let dir = DIR.get_or_init(kafkalog_fuzz::scratch_dir).path();
    match which % 4 {
        0 => {
            let f = OffsetCheckpointFile::in_log_dir(dir, "recovery-point-offset-checkpoint");
            std::fs::write(f.path(), text).unwrap();
            if let Ok(map) = f.read() {
                let _ = f.write(&map);
                assert_eq!(
                    f.read().ok(),
                    Some(map),
                    "an offset checkpoint reads back as written"
                );
            }
        }
        1 => {
            let path = dir.join("leader-epoch-checkpoint");
            for read_only in [true, false] {
                std::fs::write(&path, text).unwrap();
                let Ok(mut cache) = LeaderEpochFileCache::open_file(&path, read_only) else {
                    continue;
                };
                let entries = cache.entries();
                let probe = entries.last().map_or(0, |e| e.start_offset);
                let _ = cache.epoch_for_offset(probe);
                let _ = cache
                    .end_offset_for(cache.latest_epoch().unwrap_or(0), probe.saturating_add(1));
                let _ = cache.epoch_entries_in_range(i64::MIN, i64::MAX);
                let _ = (cache.previous_epoch(), cache.earliest_entry());
                if !read_only {
                    let _ = cache.assign(
                        cache.latest_epoch().unwrap_or(0).saturating_add(1),
                        probe.saturating_add(1),
                    );
                    let _ = cache.truncate_from_end(probe);
                    let _ = cache.truncate_from_start(probe);
                    let _ = cache.flush();
                }
            }
        }
        2 => {
            let f = PartitionMetadataFile::in_dir(dir);
            std::fs::write(f.path(), text).unwrap();
            let _ = f.read();
        }
        _ => {
            let f = CleanShutdownFile::in_log_dir(dir);
            std::fs::write(f.path(), text).unwrap();
            let _ = f.read();
        }
    }
});
