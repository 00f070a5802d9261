//! A read-only memory map of a segment file, and how it is unmapped.
//!
//! Unmapping a segment takes a while: its page tables are torn down and the other cores that ran
//! the process have their TLBs flushed, about 0.1-0.3 ms for 8 MiB. Arrow arrays of a zero-copy
//! read keep the map alive, so the unmap happens wherever the last of them is freed. In Python
//! that is pyarrow freeing a table, holding the GIL: every other thread of the process would wait
//! for it, and readers on many threads would stop scaling. An embedding can install an
//! [`UnmapHook`] (the Python extension's releases the GIL around the unmap).

use std::ops::Deref;
use std::sync::OnceLock;

use memmap2::Mmap;

/// Unmaps a segment map, by dropping it, in whatever state the embedding needs.
pub type UnmapHook = fn(Mmap);

static UNMAP_HOOK: OnceLock<UnmapHook> = OnceLock::new();

/// Installs `hook` for every segment map dropped from now on; the first hook installed stays.
pub fn set_unmap_hook(hook: UnmapHook) {
    let _ = UNMAP_HOOK.set(hook);
}

/// A read-only map of a segment file; dropped, it is unmapped through the [`UnmapHook`], if any,
/// and then the file it holds (the descriptor of its `flock`, [`Self::holding`]) is closed.
#[derive(Debug)]
pub(crate) struct SegmentMap(Option<Mmap>, Option<std::sync::Arc<std::fs::File>>);

impl SegmentMap {
    pub(crate) fn new(map: Mmap) -> Self {
        Self(Some(map), None)
    }

    /// Keeps `file` open as long as the map: its shared lock tells writers the file is mapped.
    pub(crate) fn holding(mut self, file: std::sync::Arc<std::fs::File>) -> Self {
        self.1 = Some(file);
        self
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
        if let (Some(map), Some(hook)) = (self.0.take(), UNMAP_HOOK.get()) {
            hook(map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn is_mapped(path: &str) -> bool {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .contains(path)
    }

    #[test]
    fn a_dropped_map_is_unmapped_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&[7u8; 8192])
            .unwrap();
        // SAFETY: a file of this test's own, not written while mapped.
        let map = unsafe { Mmap::map(&std::fs::File::open(&path).unwrap()).unwrap() };
        let segment = SegmentMap::new(map);
        assert_eq!(segment[4321], 7);
        let path = path.to_string_lossy().into_owned();
        assert!(is_mapped(&path));
        drop(segment);
        assert!(!is_mapped(&path));
    }
}
