//! Kafka's `DefaultRecordBatchTest`: the v2 header fields the builder writes, the CRC, the framing
//! errors (length, magic, record count), the in-place setters, control and transactional flags,
//! compressed batches, and every field of `RecordBatch` as `BatchInfo` answers it.

use crate::error::Error;
use crate::record::batch::{
    is_partial_batch, set_base_offset, set_max_timestamp, set_partition_leader_epoch, Batch,
    BatchInfo, BatchIter, DefaultBatch, ATTRIBUTES_OFFSET, CRC_OFFSET,
    DEFAULT_MAX_DECOMPRESSED_BYTES, LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET, MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
    RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD,
};
use crate::record::builder::{end_txn_marker_batch, BatchBuilder, BatchOptions};
use crate::record::codec::Compression;
use crate::record::control::{ControlRecordType, EndTransactionMarker};
use crate::record::legacy::{build_message_set, RecordFields};
use crate::record::record::{OwnedRecord, TimestampType};
use crate::testutil::{batch_with, values_of};

const ALL_CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// A batch of `(timestamp, key, value)` records at consecutive offsets.
fn build(options: BatchOptions, records: &[(i64, &[u8], &[u8])]) -> Vec<u8> {
    let mut b = BatchBuilder::new(options);
    for &(ts, k, v) in records {
        b.append(ts, Some(k), Some(v), &[]).unwrap();
    }
    b.build().unwrap()
}

/// Kafka's `MemoryRecords.withRecords(MAGIC_VALUE_V2, 0L, codec, CREATE_TIME, a/1, b/2, c/3)`.
fn abc(compression: Compression) -> Vec<u8> {
    build(
        BatchOptions {
            compression,
            ..Default::default()
        },
        &[(1, b"a", b"1"), (2, b"b", b"2"), (3, b"c", b"3")],
    )
}

fn owned_records(bytes: &[u8]) -> crate::error::Result<Vec<OwnedRecord>> {
    let batch = Batch::parse(bytes)?;
    let mut scratch = Vec::new();
    let records = batch.records(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
    Ok(records.iter().map(|r| r.to_owned_record()).collect())
}

fn info(bytes: &[u8]) -> BatchInfo {
    let batch = Batch::parse(bytes).unwrap();
    let mut scratch = Vec::new();
    let records = batch
        .records(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)
        .unwrap();
    batch.info(&records).unwrap()
}

fn corrupt_message(err: Error) -> String {
    match err {
        Error::CorruptRecord { message, .. } => message,
        other => panic!("expected a CorruptRecord error, got {other:?}"),
    }
}

/// Kafka writes this with `writeEmptyHeader`; here the builder writes the same header fields.
#[test]
fn test_write_empty_header() {
    let (producer_id, producer_epoch, base_sequence) = (23_423i64, 145i16, 983i32);
    let (base_offset, partition_leader_epoch, timestamp) = (15i64, 15i32, 1_700_000_000_000i64);
    for timestamp_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
        for is_transactional in [true, false] {
            for is_control in [true, false] {
                let mut b = BatchBuilder::new(BatchOptions {
                    base_offset,
                    timestamp_type,
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    is_transactional,
                    is_control,
                    partition_leader_epoch,
                    log_append_time: Some(timestamp),
                    ..Default::default()
                });
                // Offsets 15..=37, as Kafka's test spans them.
                b.append(timestamp - 5, None, Some(b"x"), &[]).unwrap();
                b.append_with_offset_delta(22, timestamp, None, Some(b"y"), &[])
                    .unwrap();
                let bytes = b.build().unwrap();
                let batch = DefaultBatch::new(&bytes).unwrap();
                batch.ensure_valid().unwrap();
                assert_eq!(batch.producer_id(), producer_id);
                assert_eq!(batch.producer_epoch(), producer_epoch);
                assert_eq!(batch.base_sequence(), base_sequence);
                assert_eq!(batch.last_sequence(), base_sequence + 22);
                assert_eq!(batch.base_offset(), base_offset);
                assert_eq!(batch.last_offset(), 37);
                assert_eq!(batch.partition_leader_epoch(), partition_leader_epoch);
                assert_eq!(batch.is_transactional(), is_transactional);
                assert_eq!(batch.timestamp_type(), timestamp_type);
                assert_eq!(batch.max_timestamp(), timestamp);
                assert_eq!(batch.base_timestamp(), timestamp - 5);
                assert_eq!(batch.is_control(), is_control);
                assert_eq!(batch.records_count(), 2);
            }
        }
    }
}

#[test]
fn build_default_record_batch() {
    let bytes = build(
        BatchOptions {
            base_offset: 1_234_567,
            ..Default::default()
        },
        &[(1, b"a", b"v"), (2, b"b", b"v")],
    );
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert!(batch.is_valid());
    assert_eq!(batch.base_offset(), 1_234_567);
    assert_eq!(batch.last_offset(), 1_234_568);
    assert_eq!(batch.max_timestamp(), 2);
    assert_eq!(batch.producer_id(), NO_PRODUCER_ID);
    assert_eq!(batch.producer_epoch(), NO_PRODUCER_EPOCH);
    assert_eq!(batch.base_sequence(), NO_SEQUENCE);
    assert_eq!(batch.last_sequence(), NO_SEQUENCE);
    assert_eq!(batch.partition_leader_epoch(), NO_PARTITION_LEADER_EPOCH);
    let records = owned_records(&bytes).unwrap();
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [1_234_567, 1_234_568]);
    assert_eq!(records[1].key.as_deref(), Some(&b"b"[..]));
}

#[test]
fn build_default_record_batch_with_producer_id() {
    let bytes = build(
        BatchOptions {
            base_offset: 1_234_567,
            producer_id: 23_423,
            producer_epoch: 145,
            base_sequence: 983,
            ..Default::default()
        },
        &[(1, b"a", b"v"), (2, b"b", b"v")],
    );
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert!(batch.is_valid());
    assert_eq!(
        (batch.base_offset(), batch.last_offset()),
        (1_234_567, 1_234_568)
    );
    assert_eq!(batch.max_timestamp(), 2);
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence(),
            batch.last_sequence()
        ),
        (23_423, 145, 983, 984)
    );
}

#[test]
fn build_default_record_batch_with_sequence_wrap_around() {
    let bytes = build(
        BatchOptions {
            base_offset: 1_234_567,
            producer_id: 23_423,
            producer_epoch: 145,
            base_sequence: i32::MAX - 1,
            ..Default::default()
        },
        &[(1, b"a", b"v"), (2, b"b", b"v"), (3, b"c", b"v")],
    );
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert_eq!(batch.base_sequence(), i32::MAX - 1);
    assert_eq!(batch.last_sequence(), 0);
    assert_eq!(owned_records(&bytes).unwrap().len(), 3);
}

/// `DefaultRecordBatch.incrementSequence`, through the last sequence of a batch whose last
/// offset delta is the increment.
#[test]
fn test_increment_sequence() {
    for (base, delta, expected) in [(5, 5, 10), (i32::MAX, 1, 0), (i32::MAX - 5, 10, 4)] {
        let mut b = BatchBuilder::new(BatchOptions {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: base,
            ..Default::default()
        });
        b.append_with_offset_delta(delta, 1, None, Some(b"v"), &[])
            .unwrap();
        let bytes = b.build().unwrap();
        let batch = DefaultBatch::new(&bytes).unwrap();
        assert_eq!(batch.last_sequence(), expected, "{base} + {delta}");
    }
}

#[test]
fn test_size_in_bytes() {
    let bytes = build(
        BatchOptions::default(),
        &[(1, b"key", b"value"), (30_001, b"", b"value")],
    );
    let batch = Batch::parse(&bytes).unwrap();
    assert_eq!(batch.size_in_bytes(), bytes.len());
    let Batch::V2(b) = batch else {
        panic!("a v2 batch")
    };
    assert_eq!(b.batch_length() as usize + 12, bytes.len());
    // A batch parsed from a longer buffer covers only its own bytes.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes);
    assert_eq!(Batch::parse(&two).unwrap().size_in_bytes(), bytes.len());
}

#[test]
fn test_invalid_record_size() {
    let mut bytes = abc(Compression::None);
    bytes[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&10i32.to_be_bytes());
    let message = corrupt_message(DefaultBatch::new(&bytes).unwrap_err());
    assert_eq!(
        message,
        "record size 10 is less than the minimum record overhead (14)"
    );
    assert!(Batch::parse(&bytes).is_err());
}

#[test]
fn length_past_the_buffer_or_below_the_v2_header_is_corrupt() {
    let bytes = abc(Compression::None);
    let size = bytes.len();
    let message = corrupt_message(Batch::parse(&bytes[..size - 1]).unwrap_err());
    assert_eq!(
        message,
        format!(
            "batch of {size} bytes at offset 0 exceeds the {} bytes available",
            size - 1
        )
    );
    let mut short = bytes.clone();
    short[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&20i32.to_be_bytes());
    let message = corrupt_message(Batch::parse(&short).unwrap_err());
    assert_eq!(message, "v2 batch size 32 is smaller than its header (61)");
    let message = corrupt_message(Batch::parse(&bytes[..10]).unwrap_err());
    assert_eq!(message, "10 bytes are too few for a batch header");
}

#[test]
fn unknown_or_unexpected_magic_is_corrupt() {
    let mut bytes = abc(Compression::None);
    bytes[MAGIC_OFFSET] = 3;
    let message = corrupt_message(Batch::parse(&bytes).unwrap_err());
    assert_eq!(message, "unknown magic 3 in batch at offset 0");
    // A legacy entry is not a DefaultRecordBatch.
    let v1 = build_message_set(
        1,
        0,
        &[(5, None, Some(&b"v"[..]))],
        Compression::None,
        TimestampType::CreateTime,
    )
    .unwrap();
    let message = corrupt_message(DefaultBatch::new(&v1).unwrap_err());
    assert_eq!(message, "expected magic 2, found 1");
    assert_eq!(Batch::parse(&v1).unwrap().magic(), 1);
}

/// Kafka's `recordsWithInvalidRecordCount`: three records under a header claiming `count`.
fn records_with_invalid_record_count(compression: Compression, count: i32) -> Vec<u8> {
    let mut bytes = build(
        BatchOptions {
            compression,
            ..Default::default()
        },
        &[
            (1, b"", b"hello"),
            (1, b"", b"there"),
            (1, b"", b"beautiful"),
        ],
    );
    bytes[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
    bytes
}

/// Decodes every record of a batch whose CRC is not checked (as Kafka's iteration does not).
fn iterate_records(bytes: &[u8]) -> crate::error::Result<usize> {
    let batch = DefaultBatch::new(bytes)?;
    let mut scratch = Vec::new();
    let payload = batch.records_payload(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
    let mut n = 0;
    for record in batch.records_in(payload) {
        record?;
        n += 1;
    }
    Ok(n)
}

#[test]
fn test_invalid_record_count_too_many_non_compressed_v2() {
    let bytes = records_with_invalid_record_count(Compression::None, 5);
    assert!(matches!(
        iterate_records(&bytes),
        Err(Error::CorruptRecord { .. })
    ));
}

#[test]
fn test_invalid_record_count_too_little_non_compressed_v2() {
    let bytes = records_with_invalid_record_count(Compression::None, 2);
    let message = corrupt_message(iterate_records(&bytes).unwrap_err());
    assert!(
        message.starts_with("incorrect declared batch size"),
        "{message}"
    );
    // The declared records, then the error (DumpLogSegments' output holds the last one back).
    let batch = DefaultBatch::new(&bytes).unwrap();
    let mut scratch = Vec::new();
    let payload = batch.records_payload(&mut scratch, usize::MAX).unwrap();
    let results: Vec<bool> = batch.records_in(payload).map(|r| r.is_ok()).collect();
    assert_eq!(results, [true, true, false]);
}

#[test]
fn test_invalid_record_count_too_many_compressed_v2() {
    let bytes = records_with_invalid_record_count(Compression::Gzip, 5);
    assert!(matches!(
        iterate_records(&bytes),
        Err(Error::CorruptRecord { .. })
    ));
}

#[test]
fn test_invalid_record_count_too_little_compressed_v2() {
    let bytes = records_with_invalid_record_count(Compression::Gzip, 2);
    let message = corrupt_message(iterate_records(&bytes).unwrap_err());
    assert!(
        message.starts_with("incorrect declared batch size"),
        "{message}"
    );
}

#[test]
fn negative_record_count_fails_ensure_valid() {
    let bytes = records_with_invalid_record_count(Compression::None, -1);
    let message = corrupt_message(
        DefaultBatch::new(&bytes)
            .unwrap()
            .ensure_valid()
            .unwrap_err(),
    );
    assert_eq!(message, "batch at offset 0 has invalid record count -1");
}

#[test]
fn test_invalid_crc() {
    let mut bytes = abc(Compression::None);
    let stored = DefaultBatch::new(&bytes).unwrap().crc();
    bytes[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
        .copy_from_slice(&23i32.to_be_bytes());
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert!(!batch.is_valid());
    assert_eq!(batch.crc(), stored);
    let computed = batch.compute_crc();
    assert_ne!(computed, stored);
    let message = corrupt_message(batch.ensure_valid().unwrap_err());
    assert_eq!(
        message,
        format!("batch at offset 0 is corrupt (stored crc = {stored}, computed crc = {computed})")
    );
    assert!(Batch::parse(&bytes).unwrap().ensure_valid().is_err());
}

/// Kafka's `setLastOffset` moves the base offset so the batch ends at the given offset; the
/// crate's setter takes the base offset. Both leave the CRC valid (the base offset is outside it).
#[test]
fn test_set_last_offset() {
    let mut bytes = abc(Compression::None);
    let (last_offset, first_offset) = (500i64, 498i64);
    set_base_offset(&mut bytes, first_offset);
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert_eq!(batch.last_offset(), last_offset);
    assert_eq!(batch.base_offset(), first_offset);
    assert!(batch.is_valid());
    let offsets: Vec<i64> = owned_records(&bytes)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [498, 499, 500]);
}

#[test]
fn test_set_partition_leader_epoch() {
    let mut bytes = abc(Compression::None);
    set_partition_leader_epoch(&mut bytes, 500);
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert_eq!(batch.partition_leader_epoch(), 500);
    assert!(batch.is_valid());
    assert_eq!(Batch::parse(&bytes).unwrap().partition_leader_epoch(), 500);
}

#[test]
fn test_set_log_append_time() {
    let mut bytes = abc(Compression::None);
    set_max_timestamp(&mut bytes, TimestampType::LogAppendTime, 15);
    let batch = DefaultBatch::new(&bytes).unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp(), 15);
    assert!(batch.is_valid());
    for record in owned_records(&bytes).unwrap() {
        assert_eq!(
            (record.timestamp, record.timestamp_type),
            (15, TimestampType::LogAppendTime)
        );
    }
    // And back: CreateTime restores the records' own timestamps.
    set_max_timestamp(&mut bytes, TimestampType::CreateTime, 3);
    let stamps: Vec<i64> = owned_records(&bytes)
        .unwrap()
        .iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(stamps, [1, 2, 3]);
    assert!(DefaultBatch::new(&bytes).unwrap().is_valid());
}

#[test]
fn test_read_and_write_control_batch() {
    let marker = EndTransactionMarker {
        control_type: ControlRecordType::Commit,
        coordinator_epoch: 15,
    };
    let bytes = end_txn_marker_batch(0, 1_000, NO_PARTITION_LEADER_EPOCH, 1, 0, marker).unwrap();
    let batch = Batch::parse(&bytes).unwrap();
    batch.ensure_valid().unwrap();
    assert!(batch.is_control());
    assert!(batch.is_transactional());
    assert_eq!(owned_records(&bytes).unwrap().len(), 1);
    assert_eq!(batch.end_txn_marker().unwrap(), Some(marker));
    // A marker batch must hold COMMIT or ABORT.
    assert!(matches!(
        end_txn_marker_batch(
            0,
            1_000,
            0,
            1,
            0,
            EndTransactionMarker {
                control_type: ControlRecordType::LeaderChange,
                coordinator_epoch: 0
            }
        ),
        Err(Error::InvalidArgument(_))
    ));
    // A data batch has no marker.
    assert_eq!(
        Batch::parse(&abc(Compression::None))
            .unwrap()
            .end_txn_marker()
            .unwrap(),
        None
    );
}

/// Kafka's `testStreamingIteratorConsistency`, for every codec: a compressed batch decodes to the
/// records it was built from, headers included.
#[test]
fn test_streaming_iterator_consistency() {
    let mut expected = None;
    for compression in ALL_CODECS {
        let mut b = BatchBuilder::new(BatchOptions {
            base_offset: 100,
            compression,
            ..Default::default()
        });
        b.append(1, Some(b"a"), Some(b"1"), &[]).unwrap();
        b.append(
            2,
            None,
            Some(&[b'x'; 500]),
            &[("k1", Some(b"v1")), ("k2", None)],
        )
        .unwrap();
        b.append(3, Some(b"c"), None, &[]).unwrap();
        let bytes = b.build().unwrap();
        let batch = Batch::parse(&bytes).unwrap();
        batch.ensure_valid().unwrap();
        assert_eq!(batch.compression().unwrap(), compression);
        if compression != Compression::None {
            assert!(bytes.len() < 500, "{} did not compress", compression.name());
        }
        let records = owned_records(&bytes).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].offset, 102);
        assert_eq!(
            records[1].headers,
            vec![
                ("k1".to_string(), Some(b"v1".to_vec())),
                ("k2".to_string(), None)
            ]
        );
        match &expected {
            None => expected = Some(records),
            Some(e) => assert_eq!(&records, e, "{}", compression.name()),
        }
    }
}

#[test]
fn every_batch_info_field_of_a_v2_batch() {
    let bytes = batch_with(
        BatchOptions {
            base_offset: 40,
            compression: Compression::Lz4,
            producer_id: 9,
            producer_epoch: 2,
            base_sequence: 7,
            is_transactional: true,
            partition_leader_epoch: 4,
            ..Default::default()
        },
        &[100, 300, 200],
    );
    let crc = DefaultBatch::new(&bytes).unwrap().crc();
    assert_eq!(
        info(&bytes),
        BatchInfo {
            base_offset: 40,
            last_offset: 42,
            size_in_bytes: bytes.len(),
            partition_leader_epoch: 4,
            magic: 2,
            crc,
            // lz4 (3) | transactional (0x10)
            attributes: 0x13,
            last_offset_delta: 2,
            base_timestamp: 100,
            max_timestamp: 300,
            producer_id: 9,
            producer_epoch: 2,
            base_sequence: 7,
            last_sequence: 9,
            records_count: 3,
            compression: Compression::Lz4,
            timestamp_type: TimestampType::CreateTime,
            is_transactional: true,
            is_control: false,
            delete_horizon_ms: None,
            control_type: None,
            coordinator_epoch: None,
        }
    );
    assert_eq!(values_of(&bytes), ["v40", "v41", "v42"]);
}

#[test]
fn batch_info_of_a_control_batch_and_a_delete_horizon() {
    let marker = EndTransactionMarker {
        control_type: ControlRecordType::Abort,
        coordinator_epoch: 6,
    };
    let bytes = end_txn_marker_batch(12, 1_000, 3, 77, 1, marker).unwrap();
    let i = info(&bytes);
    assert_eq!(
        (i.is_control, i.is_transactional, i.attributes),
        (true, true, 0x30)
    );
    assert_eq!(
        (i.control_type, i.coordinator_epoch),
        (Some(ControlRecordType::Abort), Some(6))
    );
    assert_eq!((i.base_offset, i.last_offset, i.records_count), (12, 12, 1));
    assert_eq!((i.producer_id, i.producer_epoch), (77, 1));

    // With the delete-horizon flag the base timestamp field holds the horizon.
    let bytes = batch_with(
        BatchOptions {
            delete_horizon_ms: Some(5_000),
            ..Default::default()
        },
        &[10, 20],
    );
    let i = info(&bytes);
    assert_eq!(i.delete_horizon_ms, Some(5_000));
    assert_eq!(i.base_timestamp, 5_000);
    assert_eq!(i.attributes, 0x40);
}

#[test]
fn batch_info_of_a_legacy_wrapper() {
    let records: [RecordFields<'_>; 3] = [
        (10, None, Some(b"a")),
        (30, Some(b"k"), Some(b"b")),
        (20, None, Some(b"c")),
    ];
    let bytes = build_message_set(
        1,
        100,
        &records,
        Compression::Gzip,
        TimestampType::CreateTime,
    )
    .unwrap();
    let i = info(&bytes);
    assert_eq!(
        (
            i.base_offset,
            i.last_offset,
            i.last_offset_delta,
            i.records_count
        ),
        (100, 102, 2, 3)
    );
    assert_eq!((i.magic, i.compression), (1, Compression::Gzip));
    assert_eq!((i.base_timestamp, i.max_timestamp), (30, 30));
    assert_eq!(
        (
            i.producer_id,
            i.producer_epoch,
            i.base_sequence,
            i.last_sequence
        ),
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_SEQUENCE)
    );
    assert_eq!(i.partition_leader_epoch, NO_PARTITION_LEADER_EPOCH);
    assert!(!i.is_transactional && !i.is_control);
    assert_eq!(i.size_in_bytes, bytes.len());
}

#[test]
fn partial_batches_and_iteration_errors() {
    let one = abc(Compression::None);
    let mut two = one.clone();
    two.extend_from_slice(&one);
    assert!(!is_partial_batch(&two));
    assert!(is_partial_batch(&two[..10]));
    assert!(is_partial_batch(&one[..one.len() - 1]));
    assert!(is_partial_batch(&one[..RECORD_BATCH_OVERHEAD]));
    // Iteration hands out the whole batches, then an error at the position of the cut one.
    let cut = &two[..two.len() - 1];
    let items: Vec<_> = BatchIter::new(cut).collect();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].as_ref().unwrap().size_in_bytes(), one.len());
    match &items[1] {
        Err(Error::CorruptRecord { location, .. }) => {
            assert_eq!(location.position, Some(one.len() as u64))
        }
        other => panic!("expected a corrupt record, got {other:?}"),
    }
}

/// Kafka's `DefaultRecord.readHeaders` decodes keys with `new String(bytes, UTF_8)`: bytes that
/// are not UTF-8 become U+FFFD, one per malformed sequence, and the record still reads.
#[test]
fn header_keys_that_are_not_utf8_decode_as_java_decodes_them() {
    let mut b = BatchBuilder::new(BatchOptions::default());
    b.append(1, None, Some(b"v"), &[("KKK", Some(b"h")), ("ok", None)])
        .unwrap();
    let mut bytes = b.build().unwrap();
    let at = bytes.windows(3).position(|w| w == b"KKK").unwrap();
    bytes[at..at + 3].copy_from_slice(b"\xffA\xfe");
    let crc = crate::checksum::crc32c(&bytes[ATTRIBUTES_OFFSET..]);
    bytes[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    let records = owned_records(&bytes).unwrap();
    assert_eq!(
        records[0].headers,
        [
            ("\u{fffd}A\u{fffd}".to_string(), Some(b"h".to_vec())),
            ("ok".to_string(), None)
        ]
    );
}
