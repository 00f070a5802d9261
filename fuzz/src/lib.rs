//! Helpers shared by the fuzz targets: CRC repair (so mutations reach the decoders behind the
//! checksums), the one-input-many-files folder format of `log_folder`, and a decode-everything
//! walk over a buffer of batches through the crate's own batch and record decoders.

use kafkalog::record::batch::{Batch, DefaultBatch};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Small enough that a decompression bomb costs milliseconds, large enough for real batches.
pub const MAX_DECOMPRESSED: usize = 1 << 20;

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Rewrites the CRC of every v2 batch (CRC32C from the attributes on) and every legacy entry
/// (CRC32 from the magic on) framed in `buf`, walking the length fields as a log file is walked.
pub fn fix_crcs(buf: &mut [u8]) {
    let mut pos = 0usize;
    while pos + 17 <= buf.len() {
        let Some(len) = be_i32(buf, pos + 8) else {
            return;
        };
        if len < 0 {
            return;
        }
        let end = pos.saturating_add(12).saturating_add(len as usize);
        if end > buf.len() {
            return;
        }
        let magic = buf[pos + 16];
        if magic == 2 && end >= pos + 21 {
            let crc = crc32c::crc32c(&buf[pos + 21..end]);
            buf[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        } else if magic < 2 && end >= pos + 16 {
            let crc = crc32fast::hash(&buf[pos + 16..end]);
            buf[pos + 12..pos + 16].copy_from_slice(&crc.to_be_bytes());
        }
        pos = end;
    }
}

/// Decodes every batch of `buf` and every record in it, as a reader would: shallow parse, CRC
/// check, deep iteration, `BatchInfo` and the transaction marker. Errors are fine; panics are not.
pub fn decode_all(buf: &[u8]) {
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let _ = kafkalog::record::file_records::parse_header(rest, pos as u64, rest.len());
        let batch = match Batch::parse(rest) {
            Ok(b) => b,
            Err(_) => {
                // A v2 batch whose CRC is wrong still gets its records decoded, so the record
                // decoder sees what the CRC would have kept away.
                if let Ok(b) = DefaultBatch::new(rest) {
                    let mut scratch = Vec::new();
                    if let Ok(payload) = b.records_payload(&mut scratch, MAX_DECOMPRESSED) {
                        for r in b.records_in(payload) {
                            if r.is_err() {
                                break;
                            }
                        }
                    }
                }
                return;
            }
        };
        let _ = batch.ensure_valid();
        let _ = (
            batch.last_offset(),
            batch.max_timestamp(),
            batch.compression(),
        );
        let mut scratch = Vec::new();
        if let Ok(records) = batch.records(&mut scratch, MAX_DECOMPRESSED) {
            for r in &records {
                let _ = r.to_owned_record();
            }
            let _ = batch.info(&records);
        }
        let _ = batch.end_txn_marker();
        let size = batch.size_in_bytes();
        if size == 0 {
            return;
        }
        pos += size;
    }
}

/// The files of a fuzzed partition folder, framed in one input: repeated
/// `[kind u8][base offset u32 LE][len u16 LE][len bytes]`. `kind & 0x7f` picks the file type
/// (below), `kind & 0x80` asks for the CRCs of a `.log` to be repaired. Trailing bytes that do
/// not frame a whole file are dropped.
pub fn split_folder(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pos = 0usize;
    while pos + 7 <= data.len() {
        let kind = data[pos];
        let base = u32::from_le_bytes(data[pos + 1..pos + 5].try_into().unwrap()) as u64;
        let len = u16::from_le_bytes([data[pos + 5], data[pos + 6]]) as usize;
        pos += 7;
        let end = (pos + len).min(data.len());
        let mut bytes = data[pos..end].to_vec();
        pos = end;
        let name = match kind & 0x7f {
            0 => format!("{base:020}.log"),
            1 => format!("{base:020}.index"),
            2 => format!("{base:020}.timeindex"),
            3 => format!("{base:020}.txnindex"),
            4 => format!("{base:020}.snapshot"),
            5 => "leader-epoch-checkpoint".to_string(),
            6 => "partition.metadata".to_string(),
            7 => format!("{base:020}.log.deleted"),
            8 => format!("{base:020}.log.swap"),
            9 => format!("{base:020}.index.cleaned"),
            _ => continue,
        };
        if kind & 0x80 != 0 && name.ends_with(".log") {
            fix_crcs(&mut bytes);
        }
        files.push((name, bytes));
    }
    files
}

/// The inverse of [`split_folder`] for the seed corpus: every file of a real partition folder.
pub fn join_folder(files: &[(u8, u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, base, bytes) in files {
        let len = bytes.len().min(u16::MAX as usize);
        out.push(*kind);
        out.extend_from_slice(&base.to_le_bytes());
        out.extend_from_slice(&(len as u16).to_le_bytes());
        out.extend_from_slice(&bytes[..len]);
    }
    out
}

/// Every file of `dir` with its bytes, sorted by name: what a read-only open must leave as it is.
pub fn snapshot_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let bytes = std::fs::read(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A scratch directory for one fuzz process, on tmpfs when there is one.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("kafkalog-fuzz")
            .tempdir_in(shm)
        {
            return d;
        }
    }
    tempfile::tempdir().expect("a temporary directory")
}

/// The input of the `.index` / `.timeindex` targets: base offset (i64 LE), a lookup target
/// (i64 LE), then the file's bytes, written to `path` (named `name`) in the process's scratch
/// folder.
pub struct IndexInput {
    pub base: i64,
    pub target: i64,
    pub path: PathBuf,
}

/// Splits and writes an index target's input; `None` when it is too short to hold the two
/// numbers.
pub fn index_input(data: &[u8], name: &str) -> Option<IndexInput> {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let base = i64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    let target = i64::from_le_bytes(data.get(8..16)?.try_into().ok()?);
    let path = DIR.get_or_init(scratch_dir).path().join(name);
    std::fs::write(&path, &data[16..]).unwrap();
    Some(IndexInput { base, target, path })
}

/// Opens the index read-only, then writable, and hands each open that succeeds to `exercise`
/// with whether it is writable.
pub fn open_both_ways<I, E>(
    open: impl Fn(bool) -> Result<I, E>,
    mut exercise: impl FnMut(&mut I, bool),
) {
    for writable in [false, true] {
        if let Ok(mut index) = open(writable) {
            exercise(&mut index, writable);
        }
    }
}
