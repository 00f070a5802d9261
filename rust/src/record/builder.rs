//! Writes magic v2 record batches (Kafka's `MemoryRecordsBuilder` for v2): records are encoded
//! uncompressed, then compressed once, and the header and CRC32C are filled in last.

use crate::error::{Error, Result};
use crate::record::batch::{
    attributes, ATTRIBUTES_OFFSET, CRC_OFFSET, MAGIC_V2, NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use crate::record::codec::{self, Compression};
use crate::record::control::{ControlRecordType, EndTransactionMarker};
use crate::record::record::TimestampType;
use crate::record::varint::{size_of_varint, size_of_varlong, write_varint, write_varlong};

/// The header fields a producer (or the log) chooses for a batch.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    pub base_offset: i64,
    pub compression: Compression,
    pub timestamp_type: TimestampType,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    pub partition_leader_epoch: i32,
    pub delete_horizon_ms: Option<i64>,
    /// For LogAppendTime: the broker's clock, stamped as the batch's max timestamp.
    pub log_append_time: Option<i64>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            base_offset: 0,
            compression: Compression::None,
            timestamp_type: TimestampType::CreateTime,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            is_transactional: false,
            is_control: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            delete_horizon_ms: None,
            log_append_time: None,
        }
    }
}

/// A v2 record's size after its length varint (Kafka's `DefaultRecord.sizeOfBodyInBytes`).
fn record_body_size(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> usize {
    let key_len = key.map_or(-1, |k| k.len() as i32);
    let value_len = value.map_or(-1, |v| v.len() as i32);
    let mut body_size = 1 + size_of_varlong(timestamp_delta) + size_of_varint(offset_delta);
    body_size += size_of_varint(key_len) + key.map_or(0, <[u8]>::len);
    body_size += size_of_varint(value_len) + value.map_or(0, <[u8]>::len);
    body_size += size_of_varint(headers.len() as i32);
    for (hk, hv) in headers {
        body_size += size_of_varint(hk.len() as i32) + hk.len();
        body_size += size_of_varint(hv.map_or(-1, |v| v.len() as i32)) + hv.map_or(0, <[u8]>::len);
    }
    body_size
}

/// Accumulates records for one v2 batch.
pub struct BatchBuilder {
    options: BatchOptions,
    records: Vec<u8>,
    count: i32,
    first_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset_delta: i32,
    /// The codec's level (Kafka's `compression.<codec>.level`); `None` is Kafka's default.
    compression_level: Option<i32>,
}

impl BatchBuilder {
    pub fn new(options: BatchOptions) -> Self {
        BatchBuilder {
            options,
            // The header is written in front of the records when the batch is built.
            records: vec![0; RECORD_BATCH_OVERHEAD],
            count: 0,
            first_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
            last_offset_delta: -1,
            compression_level: None,
        }
    }

    /// Compresses at `level` instead of the codec's Kafka default (gzip and zstd; Kafka's
    /// levels, as its topic configs `compression.gzip.level` and `compression.zstd.level` give
    /// them; snappy has none and lz4 is always LZ4's fast compressor).
    pub fn compression_level(mut self, level: Option<i32>) -> Self {
        self.compression_level = level;
        self
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn count(&self) -> i32 {
        self.count
    }

    /// Uncompressed size so far, header included (Kafka's estimate before compression).
    pub fn estimated_size(&self) -> usize {
        self.records.len()
    }

    /// Kafka's `MemoryRecordsBuilder.hasRoomFor`: whether the next record keeps the batch within
    /// `write_limit` bytes (uncompressed, header included; a compressed batch counted as its
    /// records before compression). An empty batch always takes one.
    pub fn has_room_for(
        &self,
        write_limit: usize,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> bool {
        if self.count == 0 {
            return true;
        }
        let timestamp_delta = self.timestamp_delta(timestamp);
        let offset_delta = self.last_offset_delta + 1;
        let body = record_body_size(offset_delta, timestamp_delta, key, value, headers);
        let record = size_of_varint(i32::try_from(body).unwrap_or(i32::MAX)) + body;
        self.estimated_size().saturating_add(record) <= write_limit
    }

    /// A record's timestamp as the batch holds it: from the batch's first record's (the first
    /// record's own 0). With a delete horizon the base timestamp field holds the horizon and the
    /// deltas count from it, as Kafka's `MemoryRecordsBuilder` writes a cleaned batch.
    fn timestamp_delta(&self, timestamp: i64) -> i64 {
        let base = match self.options.delete_horizon_ms {
            Some(horizon) => horizon,
            None => self.first_timestamp.unwrap_or(timestamp),
        };
        timestamp.wrapping_sub(base)
    }

    /// Appends a record at the next offset.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> Result<()> {
        let next_delta = self.last_offset_delta + 1;
        self.append_with_offset_delta(next_delta, timestamp, key, value, headers)
    }

    /// Appends a record with an explicit offset delta (must increase), as a follower or a
    /// compacted batch needs.
    pub fn append_with_offset_delta(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> Result<()> {
        if offset_delta <= self.last_offset_delta {
            return Err(Error::InvalidArgument(format!(
                "offset delta {offset_delta} is not larger than the last one ({})",
                self.last_offset_delta
            )));
        }
        if self.count == i32::MAX {
            return Err(Error::InvalidArgument(
                "a batch holds at most 2^31-1 records".into(),
            ));
        }
        // Kafka's `MemoryRecordsBuilder.appendWithOffset` (and `ProducerRecord`) refuse these.
        if timestamp < 0 && timestamp != NO_TIMESTAMP {
            return Err(Error::InvalidArgument(format!(
                "invalid negative timestamp {timestamp}: a record's timestamp is milliseconds \
                 since the epoch, or -1 (Kafka's NO_TIMESTAMP) for none"
            )));
        }
        let timestamp_delta = self.timestamp_delta(timestamp);
        self.first_timestamp.get_or_insert(timestamp);
        let key_len = key.map_or(-1, |k| k.len() as i32);
        let value_len = value.map_or(-1, |v| v.len() as i32);
        let body_size = record_body_size(offset_delta, timestamp_delta, key, value, headers);
        let body_size = i32::try_from(body_size)
            .map_err(|_| Error::RecordTooLarge(format!("record of {body_size} bytes")))?;
        let out = &mut self.records;
        out.reserve(body_size as usize + 5);
        write_varint(out, body_size);
        out.push(0); // record attributes: unused
        write_varlong(out, timestamp_delta);
        write_varint(out, offset_delta);
        write_varint(out, key_len);
        if let Some(k) = key {
            out.extend_from_slice(k);
        }
        write_varint(out, value_len);
        if let Some(v) = value {
            out.extend_from_slice(v);
        }
        write_varint(out, headers.len() as i32);
        for (hk, hv) in headers {
            write_varint(out, hk.len() as i32);
            out.extend_from_slice(hk.as_bytes());
            write_varint(out, hv.map_or(-1, |v| v.len() as i32));
            if let Some(v) = hv {
                out.extend_from_slice(v);
            }
        }
        self.count += 1;
        self.last_offset_delta = offset_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        Ok(())
    }

    /// Finishes the batch: compresses the records and writes header and CRC.
    pub fn build(self) -> Result<Vec<u8>> {
        if self.count == 0 {
            return Err(Error::InvalidArgument("cannot build an empty batch".into()));
        }
        let o = &self.options;
        // Uncompressed records are already in place behind the reserved header; compressed ones
        // go into a new buffer behind a fresh header.
        let mut out = if o.compression == Compression::None {
            self.records
        } else {
            let payload = codec::compress_at_level(
                o.compression,
                &self.records[RECORD_BATCH_OVERHEAD..],
                self.compression_level,
            )?;
            let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + payload.len());
            out.resize(RECORD_BATCH_OVERHEAD, 0);
            out.extend_from_slice(&payload);
            out
        };
        let size = out.len();
        let batch_length = i32::try_from(size - 12)
            .map_err(|_| Error::RecordTooLarge(format!("batch of {size} bytes")))?;
        let base_timestamp = match o.delete_horizon_ms {
            Some(h) => h,
            None => self.first_timestamp.unwrap_or(NO_TIMESTAMP),
        };
        let max_timestamp = match (o.timestamp_type, o.log_append_time) {
            (TimestampType::LogAppendTime, Some(t)) => t,
            _ => self.max_timestamp,
        };
        let attrs = attributes(
            o.compression,
            o.timestamp_type,
            o.is_transactional,
            o.is_control,
            o.delete_horizon_ms.is_some(),
        );
        let header = &mut out[..RECORD_BATCH_OVERHEAD];
        header[..8].copy_from_slice(&o.base_offset.to_be_bytes());
        header[8..12].copy_from_slice(&batch_length.to_be_bytes());
        header[12..16].copy_from_slice(&o.partition_leader_epoch.to_be_bytes());
        header[16] = MAGIC_V2;
        header[21..23].copy_from_slice(&attrs.to_be_bytes());
        header[23..27].copy_from_slice(&self.last_offset_delta.to_be_bytes());
        header[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
        header[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
        header[43..51].copy_from_slice(&o.producer_id.to_be_bytes());
        header[51..53].copy_from_slice(&o.producer_epoch.to_be_bytes());
        header[53..57].copy_from_slice(&o.base_sequence.to_be_bytes());
        header[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = crate::checksum::crc32c(&out[ATTRIBUTES_OFFSET..]);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(out)
    }
}

/// Kafka's `MemoryRecords.withEndTransactionMarker`: a control batch holding one commit/abort marker.
pub fn end_txn_marker_batch(
    base_offset: i64,
    timestamp: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTransactionMarker,
) -> Result<Vec<u8>> {
    if !matches!(
        marker.control_type,
        ControlRecordType::Abort | ControlRecordType::Commit
    ) {
        return Err(Error::InvalidArgument(
            "an end transaction marker is COMMIT or ABORT".into(),
        ));
    }
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset,
        producer_id,
        producer_epoch,
        is_transactional: true,
        is_control: true,
        partition_leader_epoch,
        ..Default::default()
    });
    b.append(
        timestamp,
        Some(&marker.control_type.key_bytes()),
        Some(&marker.value_bytes()),
        &[],
    )?;
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::{Batch, BatchIter, DefaultBatch};

    fn sample(options: BatchOptions) -> Vec<u8> {
        let mut b = BatchBuilder::new(options);
        b.append(
            1000,
            Some(b"k1"),
            Some(b"v1"),
            &[("h", Some(b"x")), ("n", None)],
        )
        .unwrap();
        b.append(1005, None, None, &[]).unwrap();
        b.append(999, Some(b""), Some(&[7u8; 300]), &[]).unwrap();
        b.build().unwrap()
    }

    #[test]
    fn refuses_negative_timestamps_but_no_timestamp() {
        let mut b = BatchBuilder::new(BatchOptions::default());
        let e = b.append(-5, None, Some(b"v"), &[]).unwrap_err();
        assert!(
            e.to_string().contains("invalid negative timestamp -5"),
            "{e}"
        );
        assert!(b.is_empty(), "nothing appended");
        b.append(NO_TIMESTAMP, None, Some(b"v"), &[]).unwrap();
        b.append(0, None, Some(b"v"), &[]).unwrap();
        let bytes = b.build().unwrap();
        let batch = DefaultBatch::new(&bytes).unwrap();
        let mut scratch = Vec::new();
        let payload = batch.records_payload(&mut scratch, 1 << 20).unwrap();
        let stamps: Vec<i64> = batch
            .records_in(payload)
            .map(|r| r.unwrap().timestamp)
            .collect();
        assert_eq!(stamps, [NO_TIMESTAMP, 0]);
    }

    #[test]
    fn header_fields_round_trip() {
        let bytes = sample(BatchOptions {
            base_offset: 42,
            producer_id: 7,
            producer_epoch: 3,
            base_sequence: 10,
            is_transactional: true,
            partition_leader_epoch: 5,
            ..Default::default()
        });
        let b = DefaultBatch::new(&bytes).unwrap();
        b.ensure_valid().unwrap();
        assert_eq!(b.base_offset(), 42);
        assert_eq!(b.last_offset(), 44);
        assert_eq!(b.records_count(), 3);
        assert_eq!(b.base_timestamp(), 1000);
        assert_eq!(b.max_timestamp(), 1005);
        assert_eq!(
            (
                b.producer_id(),
                b.producer_epoch(),
                b.base_sequence(),
                b.last_sequence()
            ),
            (7, 3, 10, 12)
        );
        assert!(b.is_transactional() && !b.is_control());
        assert_eq!(b.partition_leader_epoch(), 5);
        assert_eq!(b.batch_length() as usize + 12, bytes.len());
        let mut scratch = Vec::new();
        let payload = b.records_payload(&mut scratch, 1 << 20).unwrap();
        let recs: Vec<_> = b.records_in(payload).collect::<Result<_>>().unwrap();
        assert_eq!(recs[0].offset, 42);
        assert_eq!(recs[0].key, Some(&b"k1"[..]));
        assert_eq!(recs[0].headers[1].value, None);
        assert_eq!(
            (recs[1].key, recs[1].value, recs[1].timestamp),
            (None, None, 1005)
        );
        assert_eq!(
            (recs[2].offset, recs[2].timestamp, recs[2].key),
            (44, 999, Some(&b""[..]))
        );
    }

    #[test]
    fn crc_detects_any_flipped_bit_after_attributes() {
        let bytes = sample(BatchOptions::default());
        for i in [ATTRIBUTES_OFFSET + 1, 30, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            let err = DefaultBatch::new(&bad).unwrap().ensure_valid().unwrap_err();
            assert!(err.to_string().contains("crc"), "{err}");
        }
        // base offset and leader epoch are outside the CRC, as in Kafka
        let mut moved = bytes.clone();
        crate::record::batch::set_base_offset(&mut moved, 1000);
        DefaultBatch::new(&moved).unwrap().ensure_valid().unwrap();
    }

    #[test]
    fn truncated_and_oversized_lengths_are_errors() {
        let bytes = sample(BatchOptions::default());
        for cut in [0, 5, 16, 17, 40, 61, bytes.len() - 1] {
            assert!(Batch::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = bytes.clone();
        huge[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(Batch::parse(&huge).is_err());
        let mut negative = bytes.clone();
        negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(Batch::parse(&negative).is_err());
        // a record count larger than what is there fails when decoding, never allocates
        let mut count = bytes.clone();
        count[57..61].copy_from_slice(&1_000_000_000i32.to_be_bytes());
        // offsets for as many, or the batch is refused before any record is read
        let delta_at = crate::record::batch::LAST_OFFSET_DELTA_OFFSET;
        count[delta_at..delta_at + 4].copy_from_slice(&999_999_999i32.to_be_bytes());
        let crc = crate::checksum::crc32c(&count[ATTRIBUTES_OFFSET..]);
        count[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        let b = Batch::parse(&count).unwrap();
        b.ensure_valid().unwrap();
        let mut scratch = Vec::new();
        assert!(b.records(&mut scratch, 1 << 20).is_err());
    }

    #[test]
    fn random_garbage_never_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let good = sample(BatchOptions::default());
        for _ in 0..5000 {
            let mut buf = good.clone();
            for _ in 0..rng.gen_range(1..6) {
                let i = rng.gen_range(0..buf.len());
                buf[i] = rng.gen();
            }
            buf.truncate(rng.gen_range(0..=buf.len()));
            for b in BatchIter::new(&buf).flatten() {
                let mut scratch = Vec::new();
                let _ = b.records(&mut scratch, 1 << 16);
            }
        }
    }

    #[test]
    fn control_marker_batch() {
        let bytes = end_txn_marker_batch(
            10,
            5,
            0,
            99,
            1,
            EndTransactionMarker {
                control_type: ControlRecordType::Abort,
                coordinator_epoch: 4,
            },
        )
        .unwrap();
        let b = Batch::parse(&bytes).unwrap();
        assert!(b.is_control() && b.is_transactional());
        let m = b.end_txn_marker().unwrap().unwrap();
        assert_eq!(m.control_type, ControlRecordType::Abort);
        assert_eq!(m.coordinator_epoch, 4);
    }

    #[test]
    fn log_append_time_overrides_record_timestamps() {
        let bytes = sample(BatchOptions {
            timestamp_type: TimestampType::LogAppendTime,
            log_append_time: Some(77),
            ..Default::default()
        });
        let b = Batch::parse(&bytes).unwrap();
        b.ensure_valid().unwrap();
        let mut scratch = Vec::new();
        for r in b.records(&mut scratch, 1 << 20).unwrap() {
            assert_eq!(
                (r.timestamp, r.timestamp_type),
                (77, TimestampType::LogAppendTime)
            );
        }
    }
}
