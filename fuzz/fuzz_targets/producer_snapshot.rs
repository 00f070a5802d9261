//! Producer `.snapshot` files: the decoder, and loading the state of a folder from its snapshots
//! (`ProducerStateManager`, read-only). The first byte asks for the snapshot's CRC32C to be
//! repaired so mutations reach the entries.
#![no_main]
use kafkalog::log::producer_state::{decode_snapshot, snapshot_file_name, ProducerStateManager};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if flags & 1 == 0 && buf.len() >= 10 {
        let crc = crc32c::crc32c(&buf[6..]);
        buf[2..6].copy_from_slice(&crc.to_be_bytes());
    }
    let _ = decode_snapshot(&buf);
    let dir = DIR.get_or_init(kafkalog_fuzz::scratch_dir).path();
    let path = dir.join(snapshot_file_name(100));
    std::fs::write(&path, &buf).unwrap();
    if let Ok(mut psm) = ProducerStateManager::new(dir, true) {
        let _ = psm.load_from_snapshot(0, 0);
        let _ = (
            psm.first_unstable_offset(),
            psm.map_end_offset(),
            psm.producer_id_count(),
        );
    }
});
