//! A full disk: appends, rolls and checkpoint writes on a 1 MiB tmpfs fail with a clear error,
//! nothing acknowledged is lost, and the log reopens and appends again once space is freed.
//! Needs root to mount the tmpfs (CI runs as root); without it the test fails and says why.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::LogConfig;
use crate::error::Error;
use crate::log::damage_tests::batch_of;
use crate::log::{FetchIsolation, Log, LogOptions};

/// A tmpfs of `size` mounted on a fresh folder, unmounted when dropped.
struct SmallFilesystem {
    dir: PathBuf,
}

impl SmallFilesystem {
    fn mount(size: &str) -> SmallFilesystem {
        let dir = tempfile::tempdir().unwrap().keep();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => SmallFilesystem { dir },
            Ok(o) => panic!(
                "the disk-full test needs a small filesystem and could not mount one: `mount -t \
                 tmpfs -o size={size} tmpfs {}` failed: {} (run as root, as CI does)",
                dir.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!("the disk-full test could not run `mount` ({e}); it needs root"),
        }
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn options(create: bool) -> LogOptions {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "200000").unwrap();
    config.set("segment.index.bytes", "8192").unwrap();
    LogOptions {
        config,
        read_only: false,
        create,
        ..Default::default()
    }
}

/// The log opened read-only, as a reader after the disk filled up.
fn open_read_only(dir: &Path) -> Log {
    Log::open(
        dir,
        LogOptions {
            read_only: true,
            ..options(false)
        },
    )
    .unwrap()
}

fn is_disk_full(e: &Error) -> bool {
    matches!(e, Error::Io { path: Some(_), source } if source.raw_os_error() == Some(libc::ENOSPC))
}

fn values(log: &Log) -> Vec<(i64, Vec<u8>)> {
    log.records(None, None, FetchIsolation::LogEnd)
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, r.value.unwrap_or_default()))
        .collect()
}

/// Appends 8 KiB batches until the disk is full; returns what was acknowledged and the error.
fn fill(log: &Log, acked: &mut Vec<(i64, Vec<u8>)>) -> Error {
    for _ in 0..10_000 {
        let batch = batch_of(4, 2048);
        match log.append_as_leader(&batch, 0) {
            Ok(info) => {
                for o in info.first_offset..=info.last_offset {
                    let i = (o - info.first_offset) as usize;
                    acked.push((o, vec![b'a' + (i % 26) as u8; 2048]));
                }
            }
            Err(e) => return e,
        }
    }
    panic!("a 1 MiB filesystem never filled up");
}

fn filler(root: &Path, name: &str, bytes: usize) -> PathBuf {
    let p = root.join(name);
    std::fs::write(&p, vec![7u8; bytes]).unwrap();
    p
}

#[test]
fn a_full_disk_loses_nothing_acknowledged() {
    let fs = SmallFilesystem::mount("1m");
    let dir = fs.dir.join("t-0");
    let spare = filler(&fs.dir, "spare", 300_000);
    let log = Log::open(&dir, options(true)).unwrap();
    let mut acked = Vec::new();

    // Appends (and the rolls among them) until the disk is full.
    let e = fill(&log, &mut acked);
    assert!(is_disk_full(&e), "not a clear disk-full error: {e}");
    assert!(e.to_string().contains(&fs.dir.display().to_string()), "{e}");
    assert!(
        log.number_of_segments() >= 2,
        "no roll before the disk filled"
    );
    println!(
        "disk full after {} records in {} segments: {e}",
        acked.len(),
        log.number_of_segments()
    );
    // Later appends keep failing cleanly; what was acknowledged is all there.
    for _ in 0..3 {
        assert!(log.append_as_leader(&batch_of(4, 2048), 0).is_err());
    }
    assert_eq!(values(&log), acked);
    // A roll and a close (producer snapshot, checkpoints) on the full disk: clear errors or done.
    if let Err(e) = log.roll() {
        assert!(is_disk_full(&e), "roll: {e}");
    }
    if let Err(e) = log.close() {
        assert!(is_disk_full(&e), "close: {e}");
    }
    drop(log);

    // The disk full, the log still opens (read-only and writable) with everything acknowledged.
    let ro = open_read_only(&dir);
    assert_eq!(values(&ro), acked);
    drop(ro);
    if let Ok(log) = Log::open(&dir, options(false)) {
        assert_eq!(values(&log), acked);
        let _ = log.close();
    }

    // Space freed: reopen, append again, close, and read it all back.
    std::fs::remove_file(&spare).unwrap();
    let log = Log::open(&dir, options(false)).unwrap();
    assert_eq!(values(&log), acked);
    let info = log.append_as_leader(&batch_of(4, 2048), 0).unwrap();
    assert_eq!(info.first_offset, acked.len() as i64);
    for i in 0..4 {
        acked.push((info.first_offset + i, vec![b'a' + i as u8; 2048]));
    }
    log.roll().unwrap();
    log.close().unwrap();
    drop(log);

    // Checkpoint writes that meet a full disk leave the old checkpoints whole.
    let checkpoint = fs.dir.join(crate::log::loader::RECOVERY_POINT_CHECKPOINT);
    let before = std::fs::read(&checkpoint).unwrap();
    let log = Log::open(&dir, options(false)).unwrap();
    let e = fill(&log, &mut acked);
    assert!(is_disk_full(&e), "{e}");
    let _blocker = filler(&fs.dir, "blocker", 0);
    match log.close() {
        Ok(()) => {}
        Err(e) => {
            assert!(is_disk_full(&e), "close: {e}");
            let now = std::fs::read(&checkpoint).unwrap();
            assert!(
                now == before || now.starts_with(b"0\n"),
                "a torn checkpoint: {now:?}"
            );
        }
    }
    drop(log);
    let ro = open_read_only(&dir);
    assert_eq!(values(&ro), acked);
}
