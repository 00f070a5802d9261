//! `.txnindex` files (`TransactionIndex`): open, sanity check, every aborted transaction, the
//! fetch-range search, and (writable) appends and truncation. Input: start offset (8), fetch
//! offset (8), the file.
#![no_main]
use kafkalog::index::txn::{AbortedTxn, TransactionIndex};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let start = i64::from_le_bytes(data[0..8].try_into().unwrap());
    let fetch = i64::from_le_bytes(data[8..16].try_into().unwrap());
    let dir = DIR.get_or_init(kafkalog_fuzz::scratch_dir);
    let path = dir.path().join("00000000000000000000.txnindex");
    std::fs::write(&path, &data[16..]).unwrap();
    for writable in [false, true] {
        let Ok(mut idx) = TransactionIndex::open(&path, start, writable) else {
            continue;
        };
        let _ = idx.sanity_check();
        let _ = idx.all_aborted_txns();
        let _ = idx.collect_aborted_txns(fetch, fetch.saturating_add(100));
        let _ = idx.collect_aborted_txns(i64::MIN, i64::MAX);
        if writable {
            if let Ok(txn) =
                AbortedTxn::from_bytes(&data[data.len().saturating_sub(AbortedTxn::SIZE)..])
            {
                let _ = idx.append(txn);
            }
            let _ = idx.truncate_to(fetch);
            let _ = idx.all_aborted_txns();
            let _ = idx.close();
        }
    }
});
