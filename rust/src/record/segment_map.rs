//! A read-only memory map of a segment file, and where it is unmapped.
//!
//! Unmapping a segment takes a while: its page tables are torn down and every core that ran the
//! process has its TLB flushed, about 0.3 ms for 8 MiB on 2 cores and more with more threads.
//! Arrow arrays of a zero-copy read keep the map alive, so the unmap happens wherever the last of
//! them is freed. In Python that is pyarrow freeing a table, holding the GIL: every other thread
//! of the process waits for it, and readers on many threads stop scaling. With
//! [`unmap_in_background`] on (the Python extension turns it on), the last owner hands the map to
//! a thread of its own instead.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Mutex;

use memmap2::Mmap;

/// Maps waiting for the background thread; past this many, the dropping thread unmaps its own
/// (a bound on address space held, should the thread fall behind).
const PENDING_UNMAPS: usize = 64;

static IN_BACKGROUND: AtomicBool = AtomicBool::new(false);

/// Unmaps segment maps dropped from now on in a background thread (`true`), or where they are
/// dropped (`false`, the default).
pub fn unmap_in_background(on: bool) {
    IN_BACKGROUND.store(on, Ordering::Relaxed);
}

/// A read-only map of a segment file; dropped, it is unmapped as [`unmap_in_background`] says.
#[derive(Debug)]
pub(crate) struct SegmentMap(Option<Mmap>);

impl SegmentMap {
    pub(crate) fn new(map: Mmap) -> Self {
        Self(Some(map))
    }
}

impl Deref for SegmentMap {
    type Target = Mmap;

    fn deref(&self) -> &Mmap {
        self.0
            .as_ref()
            .expect("a SegmentMap holds its map until dropped")
    }
}

impl Drop for SegmentMap {
    fn drop(&mut self) {
        if let Some(map) = self.0.take() {
            if IN_BACKGROUND.load(Ordering::Relaxed) {
                unmap_later(map);
            }
        }
    }
}

/// Sends `map` to the unmapping thread, or unmaps it here when that thread is behind or cannot
/// be started.
pub(crate) fn unmap_later(map: Mmap) {
    // The process id with the sender: a forked child has the parent's sender but not its thread.
    static UNMAPPER: Mutex<Option<(u32, SyncSender<Mmap>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut unmapper = UNMAPPER.lock().unwrap_or_else(|p| p.into_inner());
    if unmapper.as_ref().is_none_or(|(owner, _)| *owner != pid) {
        let (send, receive) = sync_channel::<Mmap>(PENDING_UNMAPS);
        let started = std::thread::Builder::new()
            .name("kafkalog-unmap".into())
            .spawn(move || receive.into_iter().for_each(drop));
        if started.is_err() {
            return; // `map` is unmapped here, on return
        }
        *unmapper = Some((pid, send));
    }
    let Some((_, send)) = unmapper.as_ref() else {
        return;
    };
    match send.try_send(map) {
        Ok(()) => {}
        Err(TrySendError::Full(map) | TrySendError::Disconnected(map)) => {
            drop(unmapper);
            drop(map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    fn mapped(len: usize) -> (tempfile::TempDir, String, Mmap) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&vec![7u8; len])
            .unwrap();
        // SAFETY: a file of this test's own, not written while mapped.
        let map = unsafe { Mmap::map(&std::fs::File::open(&path).unwrap()).unwrap() };
        (dir, path.to_string_lossy().into_owned(), map)
    }

    fn is_mapped(path: &str) -> bool {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .contains(path)
    }

    #[test]
    fn a_map_sent_to_the_background_thread_is_unmapped_there() {
        let (_dir, path, map) = mapped(1 << 20);
        let mut segment = SegmentMap::new(map);
        assert_eq!(segment[12345], 7);
        assert!(is_mapped(&path));
        unmap_later(segment.0.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_mapped(&path) {
            assert!(Instant::now() < deadline, "{path} still mapped");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_dropped_map_is_unmapped_at_once_by_default() {
        let (_dir, path, map) = mapped(4096);
        drop(SegmentMap::new(map));
        assert!(!is_mapped(&path));
    }
}
