//! Legacy v0/v1 message sets (`AbstractLegacyRecordBatch`), compressed wrappers and their inner
//! messages included. The first byte asks for the outer CRCs to be repaired.
#![no_main]
use kafkalog::record::legacy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if flags & 1 == 0 {
        kafkalog_fuzz::fix_crcs(&mut buf);
    }
    for entry in legacy::entries(&buf).take(1024) {
        let Ok(entry) = entry else { break };
        let _ = (
            entry.compression(),
            entry.timestamp_type(),
            entry.is_valid(),
        );
        let mut scratch = Vec::new();
        let _ = legacy::deep_records(&entry, &mut scratch, kafkalog_fuzz::MAX_DECOMPRESSED);
    }
    let _ = legacy::parse_entry_unverified(&buf);
    kafkalog_fuzz::decode_all(&buf);
});
