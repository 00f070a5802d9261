//! Kafka's `SnapshotFile` and the snapshot codec of `ProducerStateManager`: the
//! `<20-digit offset>.snapshot` files (format version 1).
//!
//! Snapshot layout (big-endian): version i16 (1) | crc u32 (CRC32C of everything after it) |
//! entry count i32 | entries of 46 bytes: producer_id i64, epoch i16, last_sequence i32,
//! last_offset i64, offset_delta i32, timestamp i64, coordinator_epoch i32,
//! current_txn_first_offset i64 (-1: none). Only each producer's last batch is kept on disk.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{BatchMetadata, ProducerStateEntry};
use crate::error::{Error, Result};
use crate::log::checkpoint::atomic_write;

pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
pub const SNAPSHOT_FILE_SUFFIX: &str = ".snapshot";

const SNAPSHOT_CRC_OFFSET: usize = 2;
const SNAPSHOT_ENTRIES_OFFSET: usize = 6;
const SNAPSHOT_HEADER_SIZE: usize = 10;
const SNAPSHOT_ENTRY_SIZE: usize = 46;

/// `<20-digit zero-padded offset>.snapshot` (Kafka's `LogFileUtils.producerSnapshotFile`).
pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}{SNAPSHOT_FILE_SUFFIX}")
}

/// The offset a snapshot file name stands for; `None` for any other file.
pub fn offset_from_snapshot_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(SNAPSHOT_FILE_SUFFIX)?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub(super) fn list_snapshot_files(dir: &Path) -> Result<BTreeMap<i64, PathBuf>> {
    let mut out = BTreeMap::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let Some(offset) = entry
            .file_name()
            .to_str()
            .and_then(offset_from_snapshot_name)
        else {
            continue;
        };
        if entry
            .file_type()
            .map_err(|e| Error::io(entry.path(), e))?
            .is_file()
        {
            out.insert(offset, entry.path());
        }
    }
    Ok(out)
}

/// Encodes entries in snapshot format version 1, the one current brokers write and read.
pub fn encode_snapshot<'a>(entries: impl IntoIterator<Item = &'a ProducerStateEntry>) -> Vec<u8> {
    let mut buf = Vec::with_capacity(SNAPSHOT_HEADER_SIZE);
    buf.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
    buf.extend_from_slice(&[0; 4]); // CRC, filled in below
    buf.extend_from_slice(&[0; 4]); // count, filled in below
    let mut count: i32 = 0;
    for e in entries {
        buf.extend_from_slice(&e.producer_id.to_be_bytes());
        buf.extend_from_slice(&e.producer_epoch.to_be_bytes());
        buf.extend_from_slice(&e.last_seq().to_be_bytes());
        buf.extend_from_slice(&e.last_data_offset().to_be_bytes());
        buf.extend_from_slice(&e.last_offset_delta().to_be_bytes());
        buf.extend_from_slice(&e.last_timestamp.to_be_bytes());
        buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        buf.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        count += 1;
    }
    buf[SNAPSHOT_ENTRIES_OFFSET..SNAPSHOT_HEADER_SIZE].copy_from_slice(&count.to_be_bytes());
    let crc = crate::checksum::crc32c(&buf[SNAPSHOT_ENTRIES_OFFSET..]);
    buf[SNAPSHOT_CRC_OFFSET..SNAPSHOT_ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// Decodes a version 1 snapshot. Every field is bounds-checked: the entry count is checked
/// against the bytes present before anything is allocated from it.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<ProducerStateEntry>> {
    if bytes.len() < SNAPSHOT_HEADER_SIZE {
        return Err(Error::corrupt(format!(
            "producer snapshot has {} bytes, fewer than its {SNAPSHOT_HEADER_SIZE}-byte header",
            bytes.len()
        )));
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(Error::corrupt(format!(
            "producer snapshot has unknown version {version}"
        )));
    }
    let stored = u32::from_be_bytes(
        bytes[SNAPSHOT_CRC_OFFSET..SNAPSHOT_ENTRIES_OFFSET]
            .try_into()
            .unwrap(),
    );
    let computed = crate::checksum::crc32c(&bytes[SNAPSHOT_ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(Error::corrupt(format!(
            "Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}"
        )));
    }
    let count = i32::from_be_bytes(
        bytes[SNAPSHOT_ENTRIES_OFFSET..SNAPSHOT_HEADER_SIZE]
            .try_into()
            .unwrap(),
    );
    let body = &bytes[SNAPSHOT_HEADER_SIZE..];
    if count < 0 {
        return Err(Error::corrupt(format!(
            "producer snapshot has a negative entry count {count}"
        )));
    }
    let needed = count as u64 * SNAPSHOT_ENTRY_SIZE as u64;
    if needed != body.len() as u64 {
        return Err(Error::corrupt(format!(
            "producer snapshot claims {count} entries ({needed} bytes) but holds {} bytes of entries",
            body.len()
        )));
    }
    let i64_at = |b: &[u8], at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());
    let i32_at = |b: &[u8], at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    let mut entries = Vec::with_capacity(count as usize);
    for e in body.chunks_exact(SNAPSHOT_ENTRY_SIZE) {
        let producer_id = i64_at(e, 0);
        let producer_epoch = i16::from_be_bytes([e[8], e[9]]);
        let last_seq = i32_at(e, 10);
        let last_offset = i64_at(e, 14);
        let offset_delta = i32_at(e, 22);
        let timestamp = i64_at(e, 26);
        let coordinator_epoch = i32_at(e, 34);
        let txn_first = i64_at(e, 38);
        // Kafka writes last_offset -1 for a producer with no batch (one known only by markers).
        let last_batch = (last_offset >= 0).then_some(BatchMetadata {
            last_seq,
            last_offset,
            offset_delta,
            timestamp,
        });
        entries.push(ProducerStateEntry::new(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            timestamp,
            (txn_first >= 0).then_some(txn_first),
            last_batch,
        ));
    }
    Ok(entries)
}

/// Reads a snapshot file; corruption errors name the file.
pub fn read_snapshot(path: &Path) -> Result<Vec<ProducerStateEntry>> {
    // Entries of 70-odd bytes, one per producer id the partition keeps.
    let bytes = crate::files::read_regular(path, 1 << 30).map_err(|e| Error::io(path, e))?;
    decode_snapshot(&bytes).map_err(|e| e.in_file(path))
}

pub fn write_snapshot<'a>(
    path: &Path,
    entries: impl IntoIterator<Item = &'a ProducerStateEntry>,
) -> Result<()> {
    atomic_write(path, &encode_snapshot(entries))
}
