//! zstd decompression through the crate's codec API (`record::codec::decompress`), bounded
//! output. The first byte picks the magic (Kafka's v0 LZ4 header checksum quirk hangs on it).
#![no_main]
use kafkalog::record::codec::{decompress, Compression};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&magic, rest)) = data.split_first() else {
        return;
    };
    let _ = decompress(
        Compression::Zstd,
        rest,
        kafkalog_fuzz::MAX_DECOMPRESSED,
        magic % 3,
    );
});
