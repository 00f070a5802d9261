//! Magic v2 record batches (Kafka's `DefaultRecordBatch`) and the shallow batch view shared with the
//! legacy v0/v1 formats (`RecordBatch`): header fields, CRC32C validation, record iteration.
//!
//! v2 header layout (big-endian), 61 bytes:
//! baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
//! attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32
//! The CRC covers attributes through the end of the batch, so the broker can rewrite the base
//! offset and leader epoch without recomputing it.

use arrow_buffer::Buffer;

use crate::error::{Error, Result};
use crate::record::codec::{self, Compression};
use crate::record::control::{ControlRecordType, EndTransactionMarker};
use crate::record::legacy::{self, LegacyEntry};
use crate::record::record::{read_default_record, Record, TimestampType};

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// offset + length: what precedes the batch length's worth of bytes.
pub const LOG_OVERHEAD: usize = 12;
/// offset + length + the bytes up to and including magic, enough to tell the format apart.
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
/// The smallest message any magic can hold (a v0 message with null key and value).
pub const MIN_RECORD_OVERHEAD: usize = 14;

pub const MAGIC_V0: u8 = 0;
pub const MAGIC_V1: u8 = 1;
pub const MAGIC_V2: u8 = 2;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;

const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub(crate) const CONTROL_FLAG_MASK: i16 = 0x20;
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

/// How much a decoder may inflate one batch; a compressed batch claiming more is corrupt.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 256 * 1024 * 1024;

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// What the first 17 bytes of any batch or legacy entry say: where it starts, how long it is, magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPrefix {
    /// baseOffset for v2, the (last) offset for v0/v1 entries.
    pub offset: i64,
    /// Total bytes including the 12-byte log overhead.
    pub size_in_bytes: usize,
    pub magic: u8,
}

impl BatchPrefix {
    /// Parses the 17-byte prefix; checks the length field against Kafka's minimum and `max_size`
    /// (what is left of the file, or a configured maximum), never trusting it to allocate.
    pub fn parse(buf: &[u8], max_size: usize) -> Result<BatchPrefix> {
        if buf.len() < HEADER_SIZE_UP_TO_MAGIC {
            return Err(Error::corrupt(format!(
                "{} bytes are too few for a batch header",
                buf.len()
            )));
        }
        let offset = be_i64(buf, BASE_OFFSET_OFFSET);
        let length = be_i32(buf, LENGTH_OFFSET);
        if length < MIN_RECORD_OVERHEAD as i32 {
            return Err(Error::corrupt(format!(
                "record size {length} is less than the minimum record overhead ({MIN_RECORD_OVERHEAD})"
            )));
        }
        let size_in_bytes = length as usize + LOG_OVERHEAD;
        if size_in_bytes > max_size {
            return Err(Error::corrupt(format!(
                "batch of {size_in_bytes} bytes at offset {offset} exceeds the {max_size} bytes available"
            )));
        }
        let magic = buf[MAGIC_OFFSET];
        if magic > MAGIC_V2 {
            return Err(Error::corrupt(format!(
                "unknown magic {magic} in batch at offset {offset}"
            )));
        }
        if magic == MAGIC_V2 && size_in_bytes < RECORD_BATCH_OVERHEAD {
            return Err(Error::corrupt(format!(
                "v2 batch size {size_in_bytes} is smaller than its header ({RECORD_BATCH_OVERHEAD})"
            )));
        }
        Ok(BatchPrefix {
            offset,
            size_in_bytes,
            magic,
        })
    }
}

/// A v2 batch over its bytes (exactly `size_in_bytes` long).
#[derive(Debug, Clone, Copy)]
pub struct DefaultBatch<'a> {
    bytes: &'a [u8],
}

impl<'a> DefaultBatch<'a> {
    /// Wraps a buffer holding exactly one v2 batch; checks the framing, not the CRC.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        let prefix = BatchPrefix::parse(bytes, bytes.len())?;
        if prefix.magic != MAGIC_V2 {
            return Err(Error::corrupt(format!(
                "expected magic 2, found {}",
                prefix.magic
            )));
        }
        Ok(DefaultBatch {
            bytes: &bytes[..prefix.size_in_bytes],
        })
    }

    /// A batch read as Kafka's `FileLogInputStream` reads one: any magic above 2 is laid out as
    /// a v2 batch (only DumpLogSegments sees such batches; readers refuse them).
    pub fn new_as_file_batch(bytes: &'a [u8]) -> Result<Self> {
        if bytes.len() < RECORD_BATCH_OVERHEAD || bytes[MAGIC_OFFSET] < MAGIC_V2 {
            return Err(Error::corrupt(format!(
                "a v2 batch needs at least {RECORD_BATCH_OVERHEAD} bytes and magic 2 or above"
            )));
        }
        let size = (be_i32(bytes, LENGTH_OFFSET).max(0) as usize).saturating_add(LOG_OVERHEAD);
        Ok(DefaultBatch {
            bytes: &bytes[..size.min(bytes.len())],
        })
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, BASE_OFFSET_OFFSET)
    }
    pub fn batch_length(&self) -> i32 {
        be_i32(self.bytes, LENGTH_OFFSET)
    }
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, PARTITION_LEADER_EPOCH_OFFSET)
    }
    /// 2, except in a batch [`new_as_file_batch`](Self::new_as_file_batch) took as one.
    pub fn magic(&self) -> u8 {
        self.bytes[MAGIC_OFFSET]
    }
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes(self.bytes[CRC_OFFSET..CRC_OFFSET + 4].try_into().unwrap())
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES_OFFSET)
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA_OFFSET)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(i64::from(self.last_offset_delta()))
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP_OFFSET)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP_OFFSET)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID_OFFSET)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH_OFFSET)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE_OFFSET)
    }
    /// Kafka's `lastSequence`: wraps at i32::MAX like `DefaultRecordBatch.incrementSequence`.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        // Java int arithmetic: a corrupt (negative) delta wraps as it does there, never panics.
        let delta = self.last_offset_delta();
        if base > i32::MAX.wrapping_sub(delta) {
            delta
                .wrapping_sub(i32::MAX.wrapping_sub(base))
                .wrapping_sub(1)
        } else {
            base.wrapping_add(delta)
        }
    }
    pub fn records_count(&self) -> i32 {
        be_i32(self.bytes, RECORDS_COUNT_OFFSET)
    }
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id((self.attributes() & COMPRESSION_CODEC_MASK) as u8)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_FLAG_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_FLAG_MASK != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_FLAG_MASK != 0
    }
    /// Whether Kafka's log cleaner rewrote this batch: it marked a delete horizon, or it removed
    /// records from inside the batch, which keeps its offsets (fewer records than offsets).
    /// Producers and leaders never write either, and the CRC covers both.
    pub fn was_compacted(&self) -> bool {
        self.has_delete_horizon()
            || i64::from(self.records_count()) < i64::from(self.last_offset_delta()) + 1
    }
    /// With the delete-horizon flag the base timestamp field holds the horizon (log compaction).
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.has_delete_horizon().then(|| self.base_timestamp())
    }

    pub fn compute_crc(&self) -> u32 {
        crate::checksum::crc32c(&self.bytes[ATTRIBUTES_OFFSET..])
    }

    pub fn is_valid(&self) -> bool {
        self.crc() == self.compute_crc()
    }

    /// Kafka's `ensureValid`: size and CRC32C; and the offset range and record count that
    /// Kafka's `LogValidator` holds every appended batch to, since a batch breaking them (a
    /// CRC over a writer's mistake, or over crafted bytes) would lend its records offsets
    /// that go back or that other batches hold. The log cleaner leaves fewer records than
    /// offsets, never more.
    pub fn ensure_valid(&self) -> Result<()> {
        if self.records_count() < 0 {
            return Err(Error::corrupt(format!(
                "batch at offset {} has invalid record count {}",
                self.base_offset(),
                self.records_count()
            )));
        }
        let delta = self.last_offset_delta();
        if delta < 0 || i64::from(self.records_count()) > i64::from(delta) + 1 {
            return Err(Error::corrupt(format!(
                "batch at offset {} has an invalid offset range for its {} records: last offset \
                 delta {delta}",
                self.base_offset(),
                self.records_count()
            )));
        }
        let (stored, computed) = (self.crc(), self.compute_crc());
        if stored != computed {
            return Err(Error::corrupt(format!(
                "batch at offset {} is corrupt (stored crc = {stored}, computed crc = {computed})",
                self.base_offset()
            )));
        }
        Ok(())
    }

    /// The uncompressed records section: borrowed as is, or inflated into `scratch`.
    pub fn records_payload<'s>(
        &self,
        scratch: &'s mut Vec<u8>,
        max_decompressed: usize,
    ) -> Result<&'s [u8]>
    where
        'a: 's,
    {
        match self.decompressed_records(max_decompressed)? {
            None => Ok(&self.bytes[RECORD_BATCH_OVERHEAD..]),
            Some(records) => {
                *scratch = records;
                Ok(scratch.as_slice())
            }
        }
    }

    /// The records section inflated into a buffer of its own, `None` when uncompressed.
    pub fn decompressed_records(&self, max_decompressed: usize) -> Result<Option<Vec<u8>>> {
        let raw = &self.bytes[RECORD_BATCH_OVERHEAD..];
        match self.compression()? {
            Compression::None => Ok(None),
            codec => codec::decompress(codec, raw, max_decompressed, MAGIC_V2).map(Some),
        }
    }

    /// Iterates the records over a payload from `records_payload`.
    pub fn records_in<'s>(&self, payload: &'s [u8]) -> RecordIter<'s> {
        let log_append_time =
            (self.timestamp_type() == TimestampType::LogAppendTime).then(|| self.max_timestamp());
        // With a delete horizon the base timestamp field is the horizon, not the records' base.
        let base_timestamp = self.base_timestamp();
        RecordIter {
            buf: payload,
            pos: 0,
            remaining: self.records_count().max(0) as u32,
            base_offset: self.base_offset(),
            base_timestamp,
            log_append_time,
            batch_base_offset: self.base_offset(),
        }
    }
}

/// Iterates the `DefaultRecord`s of one v2 batch, then checks that no bytes are left over
/// (Kafka's "Incorrect declared batch size").
pub struct RecordIter<'s> {
    buf: &'s [u8],
    pos: usize,
    remaining: u32,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    batch_base_offset: i64,
}

impl<'s> Iterator for RecordIter<'s> {
    type Item = Result<Record<'s>>;

    /// At most the header's count, and an error after the last record.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining as usize + 1))
    }

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            // Bytes left after the declared records: the count is wrong. Found after the last
            // declared record is handed out; a check as it is read (where Kafka's iterator makes
            // it) cost the decode loop 10-45% (paired kafka_peer runs), so DumpLogSegments'
            // output holds a record back instead (`tools::dump_log_segments`).
            if self.pos != self.buf.len() {
                return Some(Err(self.bytes_left_over()));
            }
            return None;
        }
        self.remaining -= 1;
        // Handed on as it came (no match rebuilding the `Result`), so the record is written
        // once, in place, not copied through a temporary.
        let record = read_default_record(
            self.buf,
            &mut self.pos,
            self.base_offset,
            self.base_timestamp,
            self.log_append_time,
        );
        if record.is_err() {
            self.remaining = 0;
            self.pos = self.buf.len();
        }
        Some(record)
    }
}

impl RecordIter<'_> {
    /// The error for bytes left after the declared records; the iterator ends. The message is
    /// made in a cold function, off the decode loop.
    #[inline(always)]
    fn bytes_left_over(&mut self) -> Error {
        let left = self.buf.len() - self.pos;
        self.pos = self.buf.len();
        incorrect_declared_batch_size(left, self.batch_base_offset)
    }

    /// How many records are left by the header's count, bounded by the payload there (a record
    /// takes at least 7 bytes): a capacity never trusted from the count alone.
    pub fn count_hint(&self) -> usize {
        (self.remaining as usize).min((self.buf.len() - self.pos) / 7)
    }

    /// Bytes of the (decompressed) records section: what the records' keys, values and headers
    /// take at most.
    pub fn payload_len(&self) -> usize {
        self.buf.len()
    }
}

const INCORRECT_DECLARED_BATCH_SIZE: &str = "incorrect declared batch size";

#[cold]
#[inline(never)]
fn incorrect_declared_batch_size(left: usize, batch_base_offset: i64) -> Error {
    Error::corrupt(format!(
        "{INCORRECT_DECLARED_BATCH_SIZE}: {left} bytes left after the last record of batch at offset {batch_base_offset}"
    ))
}

/// Whether `error` is [`RecordIter`]'s for bytes left after a batch's declared records.
pub fn is_incorrect_declared_batch_size(error: &Error) -> bool {
    matches!(error, Error::CorruptRecord { message, .. } if message.starts_with(INCORRECT_DECLARED_BATCH_SIZE))
}

/// The records of one batch of any magic, decoded as they are pulled ([`Batch::record_iter`]):
/// v2 records straight from the payload; legacy ones (decoded together with their wrapper).
pub enum BatchRecordIter<'s> {
    V2(RecordIter<'s>),
    Legacy(std::vec::IntoIter<Record<'s>>),
}

impl<'s> BatchRecordIter<'s> {
    /// Hands each record to `f`, choosing the kind of batch once and not per record as `next`
    /// does: the loop then keeps the decoder's position and counts in registers (callgrind: the
    /// per-record state was reloaded from the stack on every `next`).
    #[inline(always)]
    pub fn try_for_each_record(self, mut f: impl FnMut(Record<'s>) -> Result<()>) -> Result<()> {
        match self {
            BatchRecordIter::V2(records) => {
                for record in records {
                    f(record?)?;
                }
            }
            BatchRecordIter::Legacy(records) => {
                for record in records {
                    f(record)?;
                }
            }
        }
        Ok(())
    }

    /// How many records are left, bounded by the payload there.
    pub fn count_hint(&self) -> usize {
        match self {
            BatchRecordIter::V2(it) => it.count_hint(),
            BatchRecordIter::Legacy(it) => it.len(),
        }
    }

    /// An upper bound of the bytes the records' keys, values and headers take.
    pub fn payload_len(&self) -> usize {
        match self {
            BatchRecordIter::V2(it) => it.payload_len(),
            BatchRecordIter::Legacy(it) => it
                .as_slice()
                .iter()
                .map(|r| r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len))
                .sum(),
        }
    }
}

impl<'s> Iterator for BatchRecordIter<'s> {
    type Item = Result<Record<'s>>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            BatchRecordIter::V2(it) => it.next(),
            BatchRecordIter::Legacy(it) => it.next().map(Ok),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            BatchRecordIter::V2(it) => it.size_hint(),
            BatchRecordIter::Legacy(it) => it.size_hint(),
        }
    }
}

/// Inflated records sections at least this large are kept whole as the buffer zero-copy views
/// point into. Smaller ones have their values copied instead: a buffer per batch holds the
/// whole section and costs an allocation and an Arrow buffer entry, which for batches of a few
/// small records (a producer sending one record at a time) outweighed the values themselves
/// (50,000 lz4 batches of one 100-byte record: 2.8 GB resident, kept 64 KiB a batch).
pub const INFLATED_WINDOW_MIN_BYTES: usize = 16 << 10;

/// One shallow batch of any magic, as it lies in a log file.
#[derive(Debug, Clone)]
pub enum Batch<'a> {
    V2(DefaultBatch<'a>),
    Legacy(LegacyEntry<'a>),
}

impl<'a> Batch<'a> {
    /// Parses the batch at the start of `buf`, which may hold more after it.
    pub fn parse(buf: &'a [u8]) -> Result<Batch<'a>> {
        let prefix = BatchPrefix::parse(buf, buf.len())?;
        let bytes = &buf[..prefix.size_in_bytes];
        if prefix.magic == MAGIC_V2 {
            Ok(Batch::V2(DefaultBatch::new(bytes)?))
        } else {
            Ok(Batch::Legacy(legacy::parse_entry(bytes)?))
        }
    }

    pub fn magic(&self) -> u8 {
        match self {
            Batch::V2(b) => b.magic(),
            Batch::Legacy(e) => e.magic,
        }
    }
    pub fn size_in_bytes(&self) -> usize {
        match self {
            Batch::V2(b) => b.size_in_bytes(),
            Batch::Legacy(e) => e.size_in_bytes,
        }
    }
    /// For a legacy wrapper the entry's own offset is its last inner offset (what Kafka indexes).
    pub fn last_offset(&self) -> i64 {
        match self {
            Batch::V2(b) => b.last_offset(),
            Batch::Legacy(e) => e.offset,
        }
    }
    pub fn max_timestamp(&self) -> i64 {
        match self {
            Batch::V2(b) => b.max_timestamp(),
            Batch::Legacy(e) => e.timestamp,
        }
    }
    pub fn compression(&self) -> Result<Compression> {
        match self {
            Batch::V2(b) => b.compression(),
            Batch::Legacy(e) => e.compression(),
        }
    }
    pub fn timestamp_type(&self) -> TimestampType {
        match self {
            Batch::V2(b) => b.timestamp_type(),
            Batch::Legacy(e) => e.timestamp_type(),
        }
    }
    pub fn is_control(&self) -> bool {
        matches!(self, Batch::V2(b) if b.is_control())
    }
    pub fn is_transactional(&self) -> bool {
        matches!(self, Batch::V2(b) if b.is_transactional())
    }
    pub fn producer_id(&self) -> i64 {
        match self {
            Batch::V2(b) => b.producer_id(),
            Batch::Legacy(_) => NO_PRODUCER_ID,
        }
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        match self {
            Batch::V2(b) => b.partition_leader_epoch(),
            Batch::Legacy(_) => NO_PARTITION_LEADER_EPOCH,
        }
    }
    pub fn ensure_valid(&self) -> Result<()> {
        match self {
            Batch::V2(b) => b.ensure_valid(),
            // parse_entry already verified the message CRC.
            Batch::Legacy(_) => Ok(()),
        }
    }

    /// Decodes every record ("deep iteration"), inflating into `scratch` when compressed.
    pub fn records<'s>(
        &self,
        scratch: &'s mut Vec<u8>,
        max_decompressed: usize,
    ) -> Result<Vec<Record<'s>>>
    where
        'a: 's,
    {
        let iter = self.record_iter(scratch, max_decompressed)?;
        // Sized once from the header's count (a `collect` through `Result` starts at 4 and
        // regrows, copying every record so far each time); the iterator bounds the count by
        // the payload actually there.
        let mut records = Vec::with_capacity(iter.count_hint());
        for record in iter {
            records.push(record?);
        }
        Ok(records)
    }

    /// The records of [`Self::records`] decoded one at a time as they are pulled, so a reader
    /// that consumes each record at once (the Arrow builder) keeps no list of them.
    pub fn record_iter<'s>(
        &self,
        scratch: &'s mut Vec<u8>,
        max_decompressed: usize,
    ) -> Result<BatchRecordIter<'s>>
    where
        'a: 's,
    {
        match self {
            Batch::V2(b) => {
                let payload = b.records_payload(scratch, max_decompressed)?;
                Ok(BatchRecordIter::V2(b.records_in(payload)))
            }
            Batch::Legacy(e) => Ok(BatchRecordIter::Legacy(
                legacy::deep_records(e, scratch, max_decompressed)?.into_iter(),
            )),
        }
    }

    /// [`Self::record_iter`] for readers that keep views into the records' bytes (zero-copy
    /// Arrow columns), with the buffer those bytes lie in: a compressed v2 batch that inflates
    /// to [`INFLATED_WINDOW_MIN_BYTES`] or more is inflated into a buffer of its own, kept in
    /// `inflated`; a smaller one into `scratch`, outside `window`, so its values are copied;
    /// the records of any other batch lie where the batch does, in `window`.
    pub fn records_with_window<'s>(
        &'s self,
        window: &'s Buffer,
        inflated: &'s mut Option<Buffer>,
        scratch: &'s mut Vec<u8>,
        max_decompressed: usize,
    ) -> Result<(BatchRecordIter<'s>, &'s Buffer)>
    where
        'a: 's,
    {
        if let Batch::V2(b) = self {
            if let Some(mut payload) = b.decompressed_records(max_decompressed)? {
                if payload.len() < INFLATED_WINDOW_MIN_BYTES {
                    // Its values are copied out (they lie outside `window`), as a copying read
                    // does: a buffer kept per small batch cost far more than its bytes.
                    *scratch = payload;
                    return Ok((BatchRecordIter::V2(b.records_in(scratch)), window));
                }
                // Kept whole while views point into it: no room the decoder reserved past the
                // end (up to 64 KiB for an LZ4 block) kept with it.
                if payload.capacity() - payload.len() > payload.len() / 8 {
                    payload.shrink_to_fit();
                }
                let payload: &'s Buffer = inflated.insert(Buffer::from_vec(payload));
                return Ok((
                    BatchRecordIter::V2(b.records_in(payload.as_slice())),
                    payload,
                ));
            }
        }
        Ok((self.record_iter(scratch, max_decompressed)?, window))
    }

    /// The marker of a commit/abort control batch, if this is one.
    pub fn end_txn_marker(&self) -> Result<Option<EndTransactionMarker>> {
        let Batch::V2(b) = self else { return Ok(None) };
        if !b.is_control() {
            return Ok(None);
        }
        let mut scratch = Vec::new();
        let payload = b.records_payload(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
        let Some(first) = b.records_in(payload).next() else {
            return Ok(None);
        };
        let record = first?;
        let control_type = ControlRecordType::parse_key(record.key)?;
        match control_type {
            ControlRecordType::Abort | ControlRecordType::Commit => Ok(Some(
                EndTransactionMarker::parse(control_type, record.value)?,
            )),
            _ => Ok(None),
        }
    }
}

/// Every field of Kafka's `RecordBatch` interface for one batch of any magic, as
/// `DefaultRecordBatch` and `AbstractLegacyRecordBatch` answer them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub size_in_bytes: usize,
    pub partition_leader_epoch: i32,
    pub magic: u8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub records_count: i32,
    pub compression: Compression,
    pub timestamp_type: TimestampType,
    pub is_transactional: bool,
    pub is_control: bool,
    pub delete_horizon_ms: Option<i64>,
    /// The control record's type (COMMIT, ABORT, LEADER_CHANGE, ...) of a control batch.
    pub control_type: Option<ControlRecordType>,
    /// The coordinator epoch of a COMMIT/ABORT marker.
    pub coordinator_epoch: Option<i32>,
}

impl Batch<'_> {
    /// The batch's fields, given its decoded records (a legacy wrapper's base offset and count
    /// are its inner messages'; a control batch's type is its record's key).
    pub fn info(&self, records: &[Record<'_>]) -> Result<BatchInfo> {
        let (control_type, coordinator_epoch) = match records.first() {
            Some(first) if self.is_control() => {
                let t = ControlRecordType::parse_key(first.key)?;
                let epoch = match t {
                    ControlRecordType::Abort | ControlRecordType::Commit => {
                        Some(EndTransactionMarker::parse(t, first.value)?.coordinator_epoch)
                    }
                    _ => None,
                };
                (Some(t), epoch)
            }
            _ => (None, None),
        };
        Ok(match self {
            Batch::V2(b) => BatchInfo {
                base_offset: b.base_offset(),
                last_offset: b.last_offset(),
                size_in_bytes: b.size_in_bytes(),
                partition_leader_epoch: b.partition_leader_epoch(),
                magic: MAGIC_V2,
                crc: b.crc(),
                attributes: b.attributes(),
                last_offset_delta: b.last_offset_delta(),
                base_timestamp: b.base_timestamp(),
                max_timestamp: b.max_timestamp(),
                producer_id: b.producer_id(),
                producer_epoch: b.producer_epoch(),
                base_sequence: b.base_sequence(),
                last_sequence: b.last_sequence(),
                records_count: b.records_count(),
                compression: b.compression()?,
                timestamp_type: b.timestamp_type(),
                is_transactional: b.is_transactional(),
                is_control: b.is_control(),
                delete_horizon_ms: b.delete_horizon_ms(),
                control_type,
                coordinator_epoch,
            },
            Batch::Legacy(e) => {
                let base_offset = records.first().map_or(e.offset, |r| r.offset);
                BatchInfo {
                    base_offset,
                    last_offset: e.offset,
                    size_in_bytes: e.size_in_bytes,
                    partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
                    magic: e.magic,
                    crc: e.crc,
                    attributes: i16::from(e.attributes),
                    last_offset_delta: records
                        .last()
                        .map_or(0, |r| (r.offset - base_offset) as i32),
                    base_timestamp: e.timestamp,
                    max_timestamp: e.timestamp,
                    producer_id: NO_PRODUCER_ID,
                    producer_epoch: NO_PRODUCER_EPOCH,
                    base_sequence: NO_SEQUENCE,
                    last_sequence: NO_SEQUENCE,
                    records_count: records.len() as i32,
                    compression: e.compression()?,
                    timestamp_type: e.timestamp_type(),
                    is_transactional: false,
                    is_control: false,
                    delete_horizon_ms: None,
                    control_type: None,
                    coordinator_epoch: None,
                }
            }
        })
    }
}

/// Whether `rest` is the start of a batch cut short (its header or its declared length runs past
/// the buffer), as a fetch bounded by `max_bytes` may end; Kafka's consumers drop such a tail.
pub fn is_partial_batch(rest: &[u8]) -> bool {
    rest.len() < HEADER_SIZE_UP_TO_MAGIC
        || BatchPrefix::parse(rest, usize::MAX).is_ok_and(|p| p.size_in_bytes > rest.len())
}

/// Iterates the shallow batches in a buffer holding whole batches back to back.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter { buf, pos: 0 }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<Batch<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        match Batch::parse(&self.buf[start..]) {
            Ok(batch) => {
                self.pos += batch.size_in_bytes();
                Some(Ok(batch))
            }
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e.at(None, start as u64)))
            }
        }
    }
}

/// Rewrites the base offset in place (not covered by the CRC, as in Kafka's `setLastOffset`).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Stamps the partition leader epoch in place (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Kafka's `setMaxTimestamp`: sets the timestamp type and max timestamp, then recomputes the CRC.
pub fn set_max_timestamp(batch: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    let mut attributes = be_i16(batch, ATTRIBUTES_OFFSET);
    if timestamp_type == TimestampType::LogAppendTime {
        attributes |= TIMESTAMP_TYPE_MASK;
    } else {
        attributes &= !TIMESTAMP_TYPE_MASK;
    }
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crate::checksum::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Attributes word for a new batch.
pub fn attributes(
    compression: Compression,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
    delete_horizon: bool,
) -> i16 {
    let mut a = i16::from(compression.id());
    if timestamp_type == TimestampType::LogAppendTime {
        a |= TIMESTAMP_TYPE_MASK;
    }
    if transactional {
        a |= TRANSACTIONAL_FLAG_MASK;
    }
    if control {
        a |= CONTROL_FLAG_MASK;
    }
    if delete_horizon {
        a |= DELETE_HORIZON_FLAG_MASK;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `cargo fuzz` (target batch_v2): a valid batch whose last offset delta is negative
    /// made `last_sequence` overflow (a panic in debug builds, the Python extension's) in `info`.
    #[test]
    fn fuzz_negative_last_offset_delta_wraps_the_sequence_like_java() {
        let bytes = include_bytes!("../../testdata/fuzz/batch_v2-last-sequence-overflow.bin");
        let batch = Batch::parse(bytes).unwrap();
        // Its CRC holds, but no record can take an offset below its base: refused.
        let e = batch.ensure_valid().unwrap_err().to_string();
        assert!(e.contains("invalid offset range"), "{e}");
        let Batch::V2(b) = &batch else {
            panic!("a v2 batch")
        };
        assert_eq!((b.base_sequence(), b.last_offset_delta()), (6, -50_397_183));
        // DefaultRecordBatch.incrementSequence(6, -50397183) in Java's int arithmetic.
        let java = (-50_397_183i32).wrapping_sub(i32::MAX - 6).wrapping_sub(1);
        assert_eq!(b.last_sequence(), java);
        let mut scratch = Vec::new();
        let records = batch
            .records(&mut scratch, DEFAULT_MAX_DECOMPRESSED_BYTES)
            .unwrap();
        assert_eq!(batch.info(&records).unwrap().last_sequence, java);
    }

    /// Found by `cargo fuzz` (targets batch_v2 and legacy): a batch header with a negative base
    /// sequence (not -1) overflowed `last_sequence` (a panic in debug builds) in `info`, which
    /// the batch and dump views call before any record is decoded.
    #[test]
    fn fuzz_negative_base_sequence_wraps_the_sequence_like_java() {
        let bytes = include_bytes!("../../testdata/fuzz/batch_v2-negative-base-sequence.bin");
        let batch = Batch::parse(bytes).unwrap();
        let Batch::V2(b) = &batch else {
            panic!("a v2 batch")
        };
        assert_eq!(
            (b.base_sequence(), b.last_offset_delta()),
            (-8_388_609, -7_857_918)
        );
        // DefaultRecordBatch.incrementSequence(-8388609, -7857918) in Java's int arithmetic.
        assert_eq!(b.last_sequence(), 2_131_237_121);
        assert_eq!(batch.info(&[]).unwrap().last_sequence, 2_131_237_121);
    }
}
