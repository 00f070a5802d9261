//! v2 record batches (`DefaultRecordBatch`) and their records and headers: shallow parse, CRC,
//! deep iteration. The first byte asks for the CRCs to be repaired so mutations get past them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if flags & 1 == 0 {
        kafkalog_fuzz::fix_crcs(&mut buf);
    }
    kafkalog_fuzz::decode_all(&buf);
    for h in kafkalog::record::file_records::headers_in(&buf).take(64) {
        if h.is_err() {
            break;
        }
    }
});
