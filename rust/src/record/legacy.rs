//! Legacy message sets, magic v0 and v1, mirroring Kafka's `LegacyRecord` (one message) and
//! `AbstractLegacyRecordBatch` (an on-disk entry and the deep iteration of compressed wrappers).
//! Reading, plus a builder (for tests and tools) that lays entries out as 0.8–0.10 brokers did.
//!
//! Entry layout: offset i64, size i32, then the message: crc u32 (CRC32 of the rest), magic i8,
//! attributes i8, timestamp i64 (v1 only), key (i32 length, -1 = null), value (likewise).

use crate::error::{Error, Result};
use crate::record::codec::{self, Compression};
use crate::record::record::{Record, TimestampType};

pub const OFFSET_LENGTH: usize = 8;
pub const SIZE_LENGTH: usize = 4;
/// Offset and size fields in front of every message (Kafka's `Records.LOG_OVERHEAD`).
pub const LOG_OVERHEAD: usize = OFFSET_LENGTH + SIZE_LENGTH;
pub const MAGIC_VALUE_V0: u8 = 0;
pub const MAGIC_VALUE_V1: u8 = 1;
/// crc + magic + attributes + key length + value length.
pub const RECORD_OVERHEAD_V0: usize = 14;
/// `RECORD_OVERHEAD_V0` plus the timestamp.
pub const RECORD_OVERHEAD_V1: usize = 22;
pub const COMPRESSION_CODEC_MASK: u8 = 0x07;
pub const TIMESTAMP_TYPE_MASK: u8 = 0x08;
pub const NO_TIMESTAMP: i64 = -1;

/// `(timestamp, key, value)` of one record handed to [`build_message_set`].
pub type RecordFields<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>);

/// Offset of the magic byte within a message (after the crc); the CRC covers from here on.
const MAGIC_OFFSET: usize = 4;

/// Kafka's `LegacyRecord.recordOverhead(magic)`.
pub fn record_overhead(magic: u8) -> usize {
    if magic == MAGIC_VALUE_V0 {
        RECORD_OVERHEAD_V0
    } else {
        RECORD_OVERHEAD_V1
    }
}

/// One shallow entry of a legacy message set: an uncompressed message, or a compressed wrapper
/// whose value holds an inner message set. Borrows key, value and bytes from the parsed buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyEntry<'a> {
    pub offset: i64,
    /// The CRC stored in the message (what `compute_crc` must equal).
    pub crc: u32,
    pub magic: u8,
    pub attributes: u8,
    /// The stored timestamp; `NO_TIMESTAMP` for v0, which has no timestamp field.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// Bytes of the whole entry, `LOG_OVERHEAD` included.
    pub size_in_bytes: usize,
    /// The whole entry, `LOG_OVERHEAD` included.
    pub bytes: &'a [u8],
}

impl<'a> LegacyEntry<'a> {
    /// The codec in the attributes; ids 5-7 are corruption.
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id(self.attributes & COMPRESSION_CODEC_MASK)
    }

    /// Whether this is a wrapper (any codec bits set, even invalid ones).
    pub fn is_compressed(&self) -> bool {
        self.attributes & COMPRESSION_CODEC_MASK != 0
    }

    /// v0 has none; v1 takes it from attribute bit 3 (Kafka's `LegacyRecord.timestampType`).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.magic == MAGIC_VALUE_V0 {
            TimestampType::NoTimestamp
        } else if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// The message's size field: bytes after `LOG_OVERHEAD`.
    pub fn message_size(&self) -> usize {
        self.size_in_bytes - LOG_OVERHEAD
    }

    /// CRC32 over the message from the magic byte to the end, as the stored CRC should be.
    pub fn compute_crc(&self) -> u32 {
        crc32fast::hash(&self.bytes[LOG_OVERHEAD + MAGIC_OFFSET..])
    }

    pub fn is_valid(&self) -> bool {
        self.compute_crc() == self.crc
    }

    /// This entry as a single record (its shallow view; a wrapper's value is compressed bytes).
    pub fn to_record(&self) -> Record<'a> {
        Record {
            offset: self.offset,
            timestamp: self.timestamp,
            timestamp_type: self.timestamp_type(),
            key: self.key,
            value: self.value,
            headers: Vec::new(),
        }
    }
}

/// Parses the entry at the start of `buf` and verifies its CRC. Checks the size against what is
/// left and against the minimum message size of its magic, the magic (0 or 1), and that key and
/// value fill the message exactly.
pub fn parse_entry(buf: &[u8]) -> Result<LegacyEntry<'_>> {
    parse(buf, true)
}

/// [`parse_entry`] without the CRC check, for tools that report invalid entries rather than stop
/// at them (use [`LegacyEntry::is_valid`]).
pub fn parse_entry_unverified(buf: &[u8]) -> Result<LegacyEntry<'_>> {
    parse(buf, false)
}

fn parse(buf: &[u8], verify_crc: bool) -> Result<LegacyEntry<'_>> {
    if buf.len() < LOG_OVERHEAD {
        return Err(Error::corrupt(format!(
            "legacy entry truncated: {} bytes left, {LOG_OVERHEAD} needed for offset and size",
            buf.len()
        )));
    }
    let offset = i64::from_be_bytes(buf[0..8].try_into().unwrap());
    let size = i32::from_be_bytes(buf[8..12].try_into().unwrap());
    if size < RECORD_OVERHEAD_V0 as i32 {
        return Err(Error::corrupt(format!(
            "message at offset {offset} has size {size}, less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
        )));
    }
    let size = size as usize;
    if size > buf.len() - LOG_OVERHEAD {
        return Err(Error::corrupt(format!(
            "message at offset {offset} has size {size} but only {} bytes are left",
            buf.len() - LOG_OVERHEAD
        )));
    }
    let bytes = &buf[..LOG_OVERHEAD + size];
    let msg = &bytes[LOG_OVERHEAD..];
    let crc = u32::from_be_bytes(msg[0..4].try_into().unwrap());
    // CRC first, like Kafka's ensureValid: on a damaged message it names the real problem.
    if verify_crc {
        let computed = crc32fast::hash(&msg[MAGIC_OFFSET..]);
        if computed != crc {
            return Err(Error::corrupt(format!(
                "message at offset {offset} is corrupt: stored crc {crc:#010x}, computed crc {computed:#010x}"
            )));
        }
    }
    let magic = msg[MAGIC_OFFSET];
    if magic > MAGIC_VALUE_V1 {
        return Err(Error::corrupt(format!(
            "message at offset {offset} has invalid magic {magic} for a legacy message"
        )));
    }
    if size < record_overhead(magic) {
        return Err(Error::corrupt(format!(
            "message at offset {offset} has size {size}, less than the v{magic} record overhead ({})",
            record_overhead(magic)
        )));
    }
    let attributes = msg[MAGIC_OFFSET + 1];
    let mut pos = MAGIC_OFFSET + 2;
    let timestamp = if magic == MAGIC_VALUE_V1 {
        pos += 8;
        i64::from_be_bytes(msg[pos - 8..pos].try_into().unwrap())
    } else {
        NO_TIMESTAMP
    };
    let key = read_sized_bytes(msg, &mut pos, offset, "key")?;
    let value = read_sized_bytes(msg, &mut pos, offset, "value")?;
    if pos != msg.len() {
        return Err(Error::corrupt(format!(
            "message at offset {offset} has {} bytes after its value (size {size})",
            msg.len() - pos
        )));
    }
    Ok(LegacyEntry {
        offset,
        crc,
        magic,
        attributes,
        timestamp,
        key,
        value,
        size_in_bytes: bytes.len(),
        bytes,
    })
}

/// An i32 length (negative = null) and that many bytes, checked against the end of the message.
fn read_sized_bytes<'a>(
    msg: &'a [u8],
    pos: &mut usize,
    offset: i64,
    what: &str,
) -> Result<Option<&'a [u8]>> {
    let len_bytes = msg.get(*pos..*pos + 4).ok_or_else(|| {
        Error::corrupt(format!(
            "message at offset {offset} ends before its {what} length"
        ))
    })?;
    let len = i32::from_be_bytes(len_bytes.try_into().unwrap());
    *pos += 4;
    // Any negative length is null, as Kafka's `Utils.sizeDelimited` reads it (-1 is what
    // writers put).
    if len < 0 {
        return Ok(None);
    }
    if len as usize > msg.len() - *pos {
        return Err(Error::corrupt(format!(
            "message at offset {offset} has {what} length {len} with {} bytes left in the message",
            msg.len() - *pos
        )));
    }
    let out = &msg[*pos..*pos + len as usize];
    *pos += len as usize;
    Ok(Some(out))
}

/// Iterator over the shallow entries of a legacy message set; yields an error and stops at the
/// first entry that does not parse (a partial entry at the end included).
#[derive(Debug, Clone)]
pub struct LegacyEntries<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

/// Shallow entries of `buf`, each CRC-verified.
pub fn entries(buf: &[u8]) -> LegacyEntries<'_> {
    LegacyEntries {
        buf,
        pos: 0,
        failed: false,
    }
}

impl LegacyEntries<'_> {
    /// Position in the buffer of the next entry.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for LegacyEntries<'a> {
    type Item = Result<LegacyEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        match parse_entry(&self.buf[self.pos..]) {
            Ok(entry) => {
                self.pos += entry.size_in_bytes;
                Some(Ok(entry))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e.at(None, self.pos as u64)))
            }
        }
    }
}

/// Decompresses a wrapper's value (its inner message set), bounded by `max_decompressed`.
/// Rejects what Kafka's deep iterator rejects: a null value and zstd (v2 only).
pub fn decompress_wrapper(wrapper: &LegacyEntry<'_>, max_decompressed: usize) -> Result<Vec<u8>> {
    let codec = wrapper.compression()?;
    let at = wrapper.offset;
    match codec {
        Compression::None => {
            return Err(Error::InvalidArgument(format!(
                "message at offset {at} is not a compressed wrapper"
            )))
        }
        Compression::Zstd => {
            return Err(Error::corrupt(format!(
                "wrapper at offset {at} uses zstd, which magic v{} messages cannot",
                wrapper.magic
            )))
        }
        _ => {}
    }
    let value = wrapper.value.ok_or_else(|| {
        Error::corrupt(format!(
            "compressed wrapper at offset {at} has a null value (magic {})",
            wrapper.magic
        ))
    })?;
    codec::decompress(codec, value, max_decompressed, wrapper.magic).map_err(|e| match e {
        Error::CorruptRecord { message, location } => Error::CorruptRecord {
            message: format!("wrapper at offset {at}: {message}"),
            location,
        },
        other => other,
    })
}

/// Records of a wrapper's decompressed inner message set, with absolute offsets and the
/// timestamps Kafka's `DeepRecordsIterator` gives them: a v1 wrapper's inner offsets are relative
/// (its own offset is the last inner one's), and a LogAppendTime v1 wrapper's timestamp replaces
/// its inner records'. Empty inner sets and nested wrappers are corruption; so is an inner
/// message whose CRC fails or that is cut short.
pub fn inner_records<'b>(wrapper: &LegacyEntry<'_>, inner: &'b [u8]) -> Result<Vec<Record<'b>>> {
    let at = wrapper.offset;
    let entries = entries(inner)
        .map(|entry| {
            entry.map_err(|e| match e {
                Error::CorruptRecord { message, .. } => Error::corrupt(format!(
                    "inside compressed wrapper at offset {at}: {message}"
                )),
                other => other,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    records_of_inner_entries(wrapper, &entries)
}

/// A wrapper's inner messages as Kafka's `DeepRecordsIterator` reads them, for the dump tool:
/// CRCs unchecked (the dump prints `isValid`), and a message cut short by the end of the inner
/// set ends it (Kafka's reader meets EOF there and stops, printing no error).
pub fn inner_entries_as_kafka_reads<'b>(
    wrapper: &LegacyEntry<'_>,
    inner: &'b [u8],
) -> Result<Vec<LegacyEntry<'b>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while inner.len() - pos >= LOG_OVERHEAD {
        let size = i32::from_be_bytes(inner[pos + 8..pos + 12].try_into().unwrap());
        if size >= RECORD_OVERHEAD_V0 as i32 && size as usize > inner.len() - pos - LOG_OVERHEAD {
            break;
        }
        let entry = parse_entry_unverified(&inner[pos..]).map_err(|e| match e {
            Error::CorruptRecord { message, .. } => Error::corrupt(format!(
                "inside compressed wrapper at offset {}: {message}",
                wrapper.offset
            )),
            other => other,
        })?;
        pos += entry.size_in_bytes;
        out.push(entry);
    }
    Ok(out)
}

/// [`inner_records`] of inner messages already parsed.
pub fn records_of_inner_entries<'b>(
    wrapper: &LegacyEntry<'_>,
    entries: &[LegacyEntry<'b>],
) -> Result<Vec<Record<'b>>> {
    let at = wrapper.offset;
    let mut records = Vec::with_capacity(entries.len());
    for entry in entries {
        if entry.is_compressed() {
            return Err(Error::corrupt(format!(
                "compressed wrapper at offset {at} contains another compressed message (inner offset {}); \
                 inner messages must not be compressed",
                entry.offset
            )));
        }
        let mut record = entry.to_record();
        // The wrapper's timestamp type, as a consumer takes it from the batch (a v0 message
        // inside a v1 wrapper too); its timestamp too when that type is LogAppendTime, as
        // LegacyRecord gives a v1 message under such a wrapper (a v0 message has none).
        record.timestamp_type = wrapper.timestamp_type();
        if entry.magic == MAGIC_VALUE_V1 && record.timestamp_type == TimestampType::LogAppendTime {
            record.timestamp = wrapper.timestamp;
        }
        records.push(record);
    }
    let Some(last) = records.last() else {
        return Err(Error::corrupt(format!(
            "compressed wrapper at offset {at} has no inner messages"
        )));
    };
    if wrapper.magic == MAGIC_VALUE_V1 {
        let last_inner = last.offset;
        // Some librdkafka versions wrote wrapper offset 0; Kafka then takes inner offsets as absolute.
        let base = if at == 0 {
            0
        } else if at < last_inner {
            return Err(Error::corrupt(format!(
                "wrapper offset {at} is less than the last inner offset {last_inner} in a compressed v1 message set"
            )));
        } else {
            at - last_inner
        };
        for r in &mut records {
            r.offset = base.checked_add(r.offset).ok_or_else(|| {
                Error::corrupt(format!(
                    "inner offset {} of wrapper at offset {at} overflows",
                    r.offset
                ))
            })?;
        }
    }
    Ok(records)
}

/// Records of one shallow entry ("deep iteration"): an uncompressed entry yields itself, borrowing
/// from the entry's buffer; a wrapper is decompressed (at most `max_decompressed` bytes) into
/// `scratch` and yields its inner records (see [`inner_records`]).
pub fn deep_records<'a>(
    entry: &LegacyEntry<'a>,
    scratch: &'a mut Vec<u8>,
    max_decompressed: usize,
) -> Result<Vec<Record<'a>>> {
    if !entry.is_compressed() {
        return Ok(vec![entry.to_record()]);
    }
    *scratch = decompress_wrapper(entry, max_decompressed)?;
    let inner: &'a Vec<u8> = scratch;
    let records = inner_records(entry, inner)?;
    check_inner_offsets(entry, &records)?;
    Ok(records)
}

/// A wrapper's inner offsets as a broker assigns them: increasing, and for v0 (absolute inner
/// offsets) the last one the wrapper's own unless that is 0 (a v1 wrapper's last is its own by
/// construction). Otherwise a reader handed out offsets twice or backwards (a consumer skips
/// those below its position, losing them unsaid), so it is damage for readers; the dump tool
/// prints such a wrapper as Kafka's does (`inner_records` alone).
fn check_inner_offsets(wrapper: &LegacyEntry<'_>, records: &[Record<'_>]) -> Result<()> {
    let at = wrapper.offset;
    for pair in records.windows(2) {
        if pair[1].offset <= pair[0].offset {
            return Err(Error::corrupt(format!(
                "compressed wrapper at offset {at}: inner offset {} follows {}, offsets must \
                 increase",
                pair[1].offset, pair[0].offset
            )));
        }
    }
    let last = records.last().map_or(at, |r| r.offset);
    // Wrapper offset 0 is a producer's set as it sent it (kafka-python writes v0 so), before a
    // broker gave it offsets; its inner offsets are read as they are.
    if wrapper.magic == MAGIC_VALUE_V0 && at != 0 && last != at {
        return Err(Error::corrupt(format!(
            "compressed v0 wrapper at offset {at}: its last inner offset is {last}, not the \
             wrapper's own"
        )));
    }
    Ok(())
}

// ---- builder ----

/// Attributes byte: codec in the low bits, LogAppendTime in bit 3 (v1 only).
fn attributes(magic: u8, compression: Compression, timestamp_type: TimestampType) -> u8 {
    let ts_bit = if magic == MAGIC_VALUE_V1 && timestamp_type == TimestampType::LogAppendTime {
        TIMESTAMP_TYPE_MASK
    } else {
        0
    };
    compression.id() | ts_bit
}

fn write_entry(
    out: &mut Vec<u8>,
    magic: u8,
    offset: i64,
    timestamp: i64,
    attributes: u8,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<()> {
    if magic > MAGIC_VALUE_V1 {
        return Err(Error::InvalidArgument(format!(
            "legacy messages have magic 0 or 1, not {magic}"
        )));
    }
    let size = record_overhead(magic) + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    let size = i32::try_from(size).map_err(|_| {
        Error::InvalidArgument(format!(
            "message of {size} bytes is too large for a legacy entry"
        ))
    })?;
    out.reserve(LOG_OVERHEAD + size as usize);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&size.to_be_bytes());
    let crc_pos = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(magic);
    out.push(attributes);
    if magic == MAGIC_VALUE_V1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    let crc = crc32fast::hash(&out[crc_pos + 4..]);
    out[crc_pos..crc_pos + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// One entry (offset, size, message) with the given fields; `compression` only sets the codec
/// bits (the value must already be the compressed inner set for a wrapper). v0 ignores the
/// timestamp and its type.
pub fn build_entry(
    magic: u8,
    offset: i64,
    timestamp: i64,
    timestamp_type: TimestampType,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    compression: Compression,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_entry(
        &mut out,
        magic,
        offset,
        timestamp,
        attributes(magic, compression, timestamp_type),
        key,
        value,
    )?;
    Ok(out)
}

/// A message set as brokers wrote it: one entry per `(timestamp, key, value)` at offsets
/// `base_offset..` when uncompressed; otherwise a single wrapper, laid out as 0.10 (v1) or
/// 0.8–0.9 (v0) brokers stored them: inner offsets relative (v1) or absolute (v0), wrapper offset =
/// last absolute offset, v1 wrapper timestamp = the largest inner timestamp, v0 LZ4 with the
/// broken header checksum. For LogAppendTime pass the append time as every record's timestamp, as
/// a broker does. v0 ignores timestamps. Zstd is not allowed (it needs magic v2).
pub fn build_message_set(
    magic: u8,
    base_offset: i64,
    records: &[RecordFields<'_>],
    compression: Compression,
    timestamp_type: TimestampType,
) -> Result<Vec<u8>> {
    build_message_set_at(
        magic,
        base_offset,
        records,
        compression,
        timestamp_type,
        None,
    )
}

/// [`build_message_set`] as a broker's `LogValidator` leaves a v1 set under LogAppendTime:
/// `log_append_time` stamps each uncompressed message, or a compressed set's wrapper (its inner
/// messages keep their own times, which readers then ignore).
pub fn build_message_set_at(
    magic: u8,
    base_offset: i64,
    records: &[RecordFields<'_>],
    compression: Compression,
    timestamp_type: TimestampType,
    log_append_time: Option<i64>,
) -> Result<Vec<u8>> {
    let appended_at = log_append_time
        .filter(|_| magic == MAGIC_VALUE_V1 && timestamp_type == TimestampType::LogAppendTime);
    if magic > MAGIC_VALUE_V1 {
        return Err(Error::InvalidArgument(format!(
            "legacy messages have magic 0 or 1, not {magic}"
        )));
    }
    if compression == Compression::Zstd {
        return Err(Error::InvalidArgument(
            "zstd compression requires magic v2".into(),
        ));
    }
    // Kafka's `LegacyRecord.write`: v0 has no timestamps; v1's are never negative but -1.
    if let Some(&(ts, _, _)) = records
        .iter()
        .find(|r| magic == MAGIC_VALUE_V1 && r.0 < 0 && r.0 != NO_TIMESTAMP)
    {
        return Err(Error::InvalidArgument(format!(
            "invalid negative timestamp {ts}: a v1 message's timestamp is milliseconds since \
             the epoch, or -1 (Kafka's NO_TIMESTAMP) for none"
        )));
    }
    let absolute = |i: usize| {
        base_offset
            .checked_add(i as i64)
            .ok_or_else(|| Error::InvalidArgument(format!("offset {base_offset} + {i} overflows")))
    };
    let inner_attributes = attributes(magic, Compression::None, timestamp_type);
    let mut set = Vec::new();
    if compression == Compression::None {
        for (i, &(ts, key, value)) in records.iter().enumerate() {
            write_entry(
                &mut set,
                magic,
                absolute(i)?,
                appended_at.unwrap_or(ts),
                inner_attributes,
                key,
                value,
            )?;
        }
        return Ok(set);
    }
    if records.is_empty() {
        return Err(Error::InvalidArgument(
            "a compressed message set needs at least one record".into(),
        ));
    }
    for (i, &(ts, key, value)) in records.iter().enumerate() {
        let offset = if magic == MAGIC_VALUE_V1 {
            i as i64
        } else {
            absolute(i)?
        };
        write_entry(&mut set, magic, offset, ts, inner_attributes, key, value)?;
    }
    let compressed = codec::compress_for_magic(compression, &set, magic)?;
    let max_timestamp =
        appended_at.unwrap_or_else(|| records.iter().map(|r| r.0).max().unwrap_or(NO_TIMESTAMP));
    build_entry(
        magic,
        absolute(records.len() - 1)?,
        max_timestamp,
        timestamp_type,
        None,
        Some(&compressed),
        compression,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore, SeedableRng};

    const CODECS: [Compression; 4] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ];
    const MAX: usize = 1 << 24;

    /// Bitwise CRC32 (IEEE, reflected), independent of crc32fast.
    fn crc32_reference(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    type OwnedFields = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn sample_records() -> Vec<OwnedFields> {
        let mut r = rand::rngs::StdRng::seed_from_u64(42);
        let mut out = vec![
            (1_000, None, Some(b"first".to_vec())),
            (1_005, Some(b"key".to_vec()), None),
            (990, Some(Vec::new()), Some(Vec::new())),
        ];
        for i in 0..50 {
            let mut v = vec![0u8; r.gen_range(0..3000)];
            if i % 2 == 0 {
                r.fill_bytes(&mut v);
            }
            out.push((2_000 + i, Some(format!("k{i}").into_bytes()), Some(v)));
        }
        out
    }

    fn as_refs(v: &[OwnedFields]) -> Vec<RecordFields<'_>> {
        v.iter()
            .map(|(t, k, v)| (*t, k.as_deref(), v.as_deref()))
            .collect()
    }

    fn deep_all(set: &[u8]) -> Result<Vec<crate::record::record::OwnedRecord>> {
        let mut out = Vec::new();
        for entry in entries(set) {
            let entry = entry?;
            let mut scratch = Vec::new();
            out.extend(
                deep_records(&entry, &mut scratch, MAX)?
                    .iter()
                    .map(Record::to_owned_record),
            );
        }
        Ok(out)
    }

    #[test]
    fn v0_bytes_by_hand() {
        let got = build_entry(
            0,
            5,
            123,
            TimestampType::CreateTime,
            Some(b"k"),
            Some(b"v"),
            Compression::None,
        )
        .unwrap();
        let body = [0u8, 0, 0, 0, 0, 1, b'k', 0, 0, 0, 1, b'v'];
        let crc = crc32_reference(&body);
        assert_eq!(crc, 0x1fec_d70a); // from Python's zlib.crc32 over the same bytes
        let mut expected = vec![0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 16];
        expected.extend_from_slice(&crc.to_be_bytes());
        expected.extend_from_slice(&body);
        assert_eq!(got, expected);

        let e = parse_entry(&got).unwrap();
        assert_eq!(
            (e.offset, e.crc, e.magic, e.attributes, e.timestamp),
            (5, crc, 0, 0, -1)
        );
        assert_eq!(
            (e.key, e.value, e.size_in_bytes, e.message_size()),
            (Some(&b"k"[..]), Some(&b"v"[..]), 28, 16)
        );
        assert_eq!(e.timestamp_type(), TimestampType::NoTimestamp);
        assert!(e.is_valid());
    }

    #[test]
    fn v1_bytes_by_hand() {
        let got = build_entry(
            1,
            7,
            1_600_000_000_000,
            TimestampType::CreateTime,
            None,
            Some(b"hello"),
            Compression::None,
        )
        .unwrap();
        let mut body = vec![1u8, 0];
        body.extend_from_slice(&1_600_000_000_000i64.to_be_bytes());
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 5]);
        body.extend_from_slice(b"hello");
        let crc = crc32_reference(&body);
        assert_eq!(crc, 0x61df_48e7);
        let mut expected = vec![0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 27];
        expected.extend_from_slice(&crc.to_be_bytes());
        expected.extend_from_slice(&body);
        assert_eq!(got, expected);

        let e = parse_entry(&got).unwrap();
        assert_eq!(
            (e.offset, e.magic, e.timestamp, e.key, e.value),
            (7, 1, 1_600_000_000_000, None, Some(&b"hello"[..]))
        );
        assert_eq!(e.timestamp_type(), TimestampType::CreateTime);
        let lat = build_entry(
            1,
            7,
            5,
            TimestampType::LogAppendTime,
            None,
            None,
            Compression::None,
        )
        .unwrap();
        assert_eq!(lat[17], TIMESTAMP_TYPE_MASK);
        assert_eq!(
            parse_entry(&lat).unwrap().timestamp_type(),
            TimestampType::LogAppendTime
        );
    }

    #[test]
    fn round_trip_every_magic_and_codec() {
        let data = sample_records();
        let refs = as_refs(&data);
        for magic in [0u8, 1] {
            for codec in CODECS {
                for ts_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
                    let what = format!("v{magic} {} {}", codec.name(), ts_type.name());
                    let set = build_message_set(magic, 100, &refs, codec, ts_type).unwrap();
                    let shallow: Vec<_> = entries(&set).collect::<Result<_>>().unwrap();
                    let expected_shallow = if codec == Compression::None {
                        refs.len()
                    } else {
                        1
                    };
                    assert_eq!(shallow.len(), expected_shallow, "{what}");
                    if codec != Compression::None {
                        let w = &shallow[0];
                        assert_eq!(w.offset, 100 + refs.len() as i64 - 1, "{what}");
                        assert_eq!(w.compression().unwrap(), codec);
                        assert_eq!(w.key, None);
                        if magic == 1 {
                            assert_eq!(
                                w.timestamp, 2_049,
                                "{what}: wrapper takes the max timestamp"
                            );
                        }
                    }
                    let records = deep_all(&set).expect(&what);
                    assert_eq!(records.len(), refs.len(), "{what}");
                    for (i, (r, (ts, k, v))) in records.iter().zip(&data).enumerate() {
                        assert_eq!(r.offset, 100 + i as i64, "{what}");
                        assert_eq!((&r.key, &r.value), (k, v), "{what}");
                        assert!(r.headers.is_empty());
                        let (exp_ts, exp_type) = match (magic, ts_type, codec) {
                            (0, _, _) => (NO_TIMESTAMP, TimestampType::NoTimestamp),
                            (_, TimestampType::LogAppendTime, Compression::None) => {
                                (*ts, TimestampType::LogAppendTime)
                            }
                            (_, TimestampType::LogAppendTime, _) => {
                                (2_049, TimestampType::LogAppendTime)
                            }
                            _ => (*ts, TimestampType::CreateTime),
                        };
                        assert_eq!(
                            (r.timestamp, r.timestamp_type),
                            (exp_ts, exp_type),
                            "{what} record {i}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn uncompressed_records_borrow_the_buffer() {
        let set = build_message_set(
            1,
            0,
            &[(1, Some(b"k"), Some(b"v"))],
            Compression::None,
            TimestampType::CreateTime,
        )
        .unwrap();
        let e = parse_entry(&set).unwrap();
        let mut scratch = Vec::new();
        let recs = deep_records(&e, &mut scratch, MAX).unwrap();
        assert!(std::ptr::eq(
            recs[0].value.unwrap().as_ptr(),
            set[set.len() - 1..].as_ptr()
        ));
        assert!(scratch.is_empty());
    }

    #[test]
    fn v1_wrapper_relative_offsets() {
        let set = build_message_set(
            1,
            500,
            &[
                (1, None, Some(b"a")),
                (2, None, Some(b"b")),
                (3, None, Some(b"c")),
            ],
            Compression::Gzip,
            TimestampType::CreateTime,
        )
        .unwrap();
        let w = parse_entry(&set).unwrap();
        assert_eq!(w.offset, 502);
        let inner = decompress_wrapper(&w, MAX).unwrap();
        let inner_offsets: Vec<i64> = entries(&inner).map(|e| e.unwrap().offset).collect();
        assert_eq!(inner_offsets, vec![0, 1, 2]);
        let recs = inner_records(&w, &inner).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![500, 501, 502]
        );

        // Wrapper offset 0 (some librdkafka versions): inner offsets taken as they are.
        let zero = rewrap(&w, 0, None, w.attributes);
        let z = parse_entry(&zero).unwrap();
        let mut scratch = Vec::new();
        assert_eq!(
            deep_records(&z, &mut scratch, MAX)
                .unwrap()
                .iter()
                .map(|r| r.offset)
                .collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        // Wrapper offset below the last inner offset is invalid.
        let low = rewrap(&w, 1, None, w.attributes);
        let mut scratch = Vec::new();
        let err = deep_records(&parse_entry(&low).unwrap(), &mut scratch, MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("less than the last inner offset"), "{err}");
    }

    /// A gzip wrapper at `offset` around inner messages at `inner` offsets, as given.
    fn wrapper_around(magic: u8, offset: i64, inner: &[i64]) -> Vec<u8> {
        let mut set = Vec::new();
        for (i, &o) in inner.iter().enumerate() {
            write_entry(&mut set, magic, o, 5, 0, None, Some(&[b'a' + i as u8])).unwrap();
        }
        let value =
            crate::record::codec::compress_for_magic(Compression::Gzip, &set, magic).unwrap();
        let mut out = Vec::new();
        write_entry(
            &mut out,
            magic,
            offset,
            5,
            Compression::Gzip.id(),
            None,
            Some(&value),
        )
        .unwrap();
        out
    }

    /// Inner offsets that repeat or go backwards, or a v0 wrapper whose inner offsets end
    /// elsewhere than its own, are damage for readers (they handed out offsets twice or
    /// backwards, and `verify` said sound; a black-box tester); the dump still prints them as
    /// Kafka's tool does. Inner sets as brokers write them read as before.
    #[test]
    fn readers_refuse_inner_offsets_a_broker_never_assigns() {
        let deep = |set: &[u8]| {
            let mut scratch = Vec::new();
            deep_records(&parse_entry(set).unwrap(), &mut scratch, MAX)
                .map(|r| r.iter().map(|r| r.offset).collect::<Vec<_>>())
        };
        for (magic, offset, inner, problem) in [
            (1, 4, &[0, 0, 1][..], "inner offset 3 follows 3"),
            (1, 6, &[2, 1, 0], "inner offset 7 follows 8"),
            (0, 9, &[0, 1, 2], "its last inner offset is 2"),
            (0, 9, &[7, 9, 8], "inner offset 8 follows 9"),
        ] {
            let set = wrapper_around(magic, offset, inner);
            let err = deep(&set).unwrap_err().to_string();
            assert!(err.contains(problem), "{magic} {inner:?}: {err}");
            // The dump's view, as Kafka's tool prints it.
            let w = parse_entry(&set).unwrap();
            let inflated = decompress_wrapper(&w, MAX).unwrap();
            assert_eq!(inner_records(&w, &inflated).unwrap().len(), inner.len());
        }
        assert_eq!(
            deep(&wrapper_around(1, 12, &[0, 1, 2])).unwrap(),
            [10, 11, 12]
        );
        assert_eq!(deep(&wrapper_around(1, 12, &[0, 2])).unwrap(), [10, 12]);
        assert_eq!(deep(&wrapper_around(0, 9, &[7, 9])).unwrap(), [7, 9]);
        // A producer's v0 set (wrapper offset 0, inner offsets from 0), as kafka-python sends it.
        assert_eq!(deep(&wrapper_around(0, 0, &[0, 1, 2])).unwrap(), [0, 1, 2]);
    }

    /// The same wrapper with another offset/value/attributes (CRC recomputed).
    fn rewrap(w: &LegacyEntry<'_>, offset: i64, value: Option<&[u8]>, attributes: u8) -> Vec<u8> {
        let mut out = Vec::new();
        write_entry(
            &mut out,
            w.magic,
            offset,
            w.timestamp,
            attributes,
            w.key,
            value.or(w.value),
        )
        .unwrap();
        out
    }

    #[test]
    fn v0_wrapper_absolute_offsets_and_broken_lz4_checksum() {
        let set = build_message_set(
            0,
            40,
            &[(0, None, Some(b"x")), (0, None, Some(b"y"))],
            Compression::Lz4,
            TimestampType::NoTimestamp,
        )
        .unwrap();
        let w = parse_entry(&set).unwrap();
        assert_eq!(w.offset, 41);
        let frame = w.value.unwrap();
        // Header checksum as Kafka 0.8-0.10 wrote it for v0: over magic, FLG and BD.
        assert_eq!(
            frame[6],
            (xxhash_rust::xxh32::xxh32(&frame[..6], 0) >> 8) as u8
        );
        let inner = decompress_wrapper(&w, MAX).unwrap();
        assert_eq!(
            entries(&inner)
                .map(|e| e.unwrap().offset)
                .collect::<Vec<_>>(),
            vec![40, 41]
        );
        // The same frame inside a v1 wrapper is rejected: only v0 tolerates the broken checksum.
        let mut v1 = Vec::new();
        write_entry(&mut v1, 1, 41, 0, w.attributes, None, w.value).unwrap();
        let err = decompress_wrapper(&parse_entry(&v1).unwrap(), MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("header checksum"), "{err}");
    }

    #[test]
    fn a_v1_set_built_under_log_append_time_carries_it_as_a_broker_leaves_it() {
        let recs = [(10, None, Some(&b"a"[..])), (20, None, Some(&b"b"[..]))];
        for compression in CODECS {
            let set = build_message_set_at(
                1,
                5,
                &recs,
                compression,
                TimestampType::LogAppendTime,
                Some(999),
            )
            .unwrap();
            let read = deep_all(&set).unwrap();
            assert_eq!(read.len(), 2);
            assert!(
                read.iter().all(|r| r.timestamp == 999
                    && r.timestamp_type == TimestampType::LogAppendTime),
                "{compression:?}: {read:?}"
            );
            assert_eq!(parse_entry(&set).unwrap().timestamp, 999);
        }
    }

    #[test]
    fn log_append_time_wrapper_overrides_inner_timestamps() {
        // Inner records written as CreateTime by the producer; the broker set LogAppendTime on the
        // wrapper only (in-place assignment).
        let set = build_message_set(
            1,
            0,
            &[(10, None, Some(b"a")), (20, None, Some(b"b"))],
            Compression::Snappy,
            TimestampType::CreateTime,
        )
        .unwrap();
        let w = parse_entry(&set).unwrap();
        let mut lat = Vec::new();
        write_entry(
            &mut lat,
            1,
            w.offset,
            999,
            w.attributes | TIMESTAMP_TYPE_MASK,
            None,
            w.value,
        )
        .unwrap();
        let recs = deep_all(&lat).unwrap();
        assert!(recs
            .iter()
            .all(|r| r.timestamp == 999 && r.timestamp_type == TimestampType::LogAppendTime));
        let recs = deep_all(&set).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.timestamp).collect::<Vec<_>>(),
            vec![10, 20]
        );
    }

    #[test]
    fn crc_mismatch_detected() {
        let mut e = build_entry(
            1,
            3,
            4,
            TimestampType::CreateTime,
            Some(b"key"),
            Some(b"value"),
            Compression::None,
        )
        .unwrap();
        let n = e.len();
        e[n - 1] ^= 1;
        let err = parse_entry(&e).unwrap_err().to_string();
        assert!(
            err.contains("stored crc") && err.contains("computed crc"),
            "{err}"
        );
        let unverified = parse_entry_unverified(&e).unwrap();
        assert!(!unverified.is_valid());
        assert_eq!(unverified.value, Some(&b"valud"[..]));
    }

    #[test]
    fn truncated_and_oversized_entries_rejected() {
        let e = build_entry(
            1,
            3,
            4,
            TimestampType::CreateTime,
            Some(b"key"),
            Some(b"value"),
            Compression::None,
        )
        .unwrap();
        for cut in 0..e.len() {
            assert!(parse_entry(&e[..cut]).is_err(), "cut {cut}");
        }
        // Size field larger than the buffer / smaller than the minimum / negative.
        for size in [i32::MAX, e.len() as i32, 13, 0, -1, i32::MIN] {
            let mut bad = e.clone();
            bad[8..12].copy_from_slice(&size.to_be_bytes());
            assert!(parse_entry(&bad).is_err(), "size {size}");
            assert!(parse_entry_unverified(&bad).is_err(), "size {size}");
        }
        // v1 message sized as a v0 minimum (14 < 22).
        let mut short = build_entry(
            0,
            0,
            0,
            TimestampType::NoTimestamp,
            None,
            None,
            Compression::None,
        )
        .unwrap();
        short[16] = 1;
        assert!(parse_entry_unverified(&short)
            .unwrap_err()
            .to_string()
            .contains("v1 record overhead"));
        // Bad magic.
        let mut m2 = e.clone();
        m2[16] = 2;
        assert!(parse_entry_unverified(&m2)
            .unwrap_err()
            .to_string()
            .contains("magic"));
    }

    #[test]
    fn garbage_key_value_lengths_rejected() {
        let e = build_entry(
            0,
            0,
            0,
            TimestampType::NoTimestamp,
            Some(b"kk"),
            Some(b"vv"),
            Compression::None,
        )
        .unwrap();
        // key length at 18..22, value length at 24..28 (v0).
        for (pos, len) in [
            (18, -2),
            (18, 3),
            (18, 100),
            (18, i32::MAX),
            (18, i32::MIN),
            (24, -2),
            (24, 3),
            (24, i32::MAX),
            (24, 1i32),
        ] {
            let mut bad = e.clone();
            bad[pos..pos + 4].copy_from_slice(&len.to_be_bytes());
            let crc = crc32fast::hash(&bad[16..]);
            bad[12..16].copy_from_slice(&crc.to_be_bytes());
            let err = parse_entry(&bad).unwrap_err().to_string();
            assert!(
                err.contains("length") || err.contains("after its value"),
                "{pos} {len}: {err}"
            );
        }
    }

    #[test]
    fn nested_wrapper_rejected() {
        let inner = build_message_set(
            1,
            0,
            &[(1, None, Some(b"a"))],
            Compression::Gzip,
            TimestampType::CreateTime,
        )
        .unwrap();
        let outer_value = codec::compress(Compression::Gzip, &inner).unwrap();
        let outer = build_entry(
            1,
            0,
            1,
            TimestampType::CreateTime,
            None,
            Some(&outer_value),
            Compression::Gzip,
        )
        .unwrap();
        let err = deep_all(&outer).unwrap_err().to_string();
        assert!(err.contains("must not be compressed"), "{err}");
    }

    #[test]
    fn bad_wrappers_rejected() {
        // Null value.
        let null = build_entry(
            1,
            0,
            0,
            TimestampType::CreateTime,
            None,
            None,
            Compression::Gzip,
        )
        .unwrap();
        assert!(deep_all(&null)
            .unwrap_err()
            .to_string()
            .contains("null value"));
        // Empty inner set.
        let empty = codec::compress(Compression::Gzip, b"").unwrap();
        let e = build_entry(
            1,
            0,
            0,
            TimestampType::CreateTime,
            None,
            Some(&empty),
            Compression::Gzip,
        )
        .unwrap();
        assert!(deep_all(&e)
            .unwrap_err()
            .to_string()
            .contains("no inner messages"));
        // Zstd and unknown codec ids.
        let z = codec::compress(Compression::Zstd, b"x").unwrap();
        let e = build_entry(
            1,
            0,
            0,
            TimestampType::CreateTime,
            None,
            Some(&z),
            Compression::Zstd,
        )
        .unwrap();
        assert!(deep_all(&e).unwrap_err().to_string().contains("zstd"));
        let mut e6 = Vec::new();
        write_entry(&mut e6, 1, 0, 0, 6, None, Some(b"x")).unwrap();
        assert!(deep_all(&e6)
            .unwrap_err()
            .to_string()
            .contains("codec id 6"));
        // Inner data that is not a message set, and a decompression budget too small.
        let junk = codec::compress(Compression::Snappy, b"not a message set").unwrap();
        let e = build_entry(
            1,
            0,
            0,
            TimestampType::CreateTime,
            None,
            Some(&junk),
            Compression::Snappy,
        )
        .unwrap();
        assert!(deep_all(&e)
            .unwrap_err()
            .to_string()
            .contains("inside compressed wrapper"));
        let set = build_message_set(
            1,
            0,
            &[(1, None, Some(&[0u8; 5000][..]))],
            Compression::Lz4,
            TimestampType::CreateTime,
        )
        .unwrap();
        let w = parse_entry(&set).unwrap();
        let mut scratch = Vec::new();
        assert!(deep_records(&w, &mut scratch, 1000)
            .unwrap_err()
            .to_string()
            .contains("decompresses to more than"));
        // Builder refusals.
        assert!(
            build_message_set(1, 0, &[], Compression::Gzip, TimestampType::CreateTime).is_err()
        );
        assert!(build_message_set(
            1,
            0,
            &[(0, None, None)],
            Compression::Zstd,
            TimestampType::CreateTime
        )
        .is_err());
        assert!(build_message_set(
            2,
            0,
            &[(0, None, None)],
            Compression::None,
            TimestampType::CreateTime
        )
        .is_err());
        assert!(build_message_set(
            1,
            i64::MAX,
            &[(0, None, None), (0, None, None)],
            Compression::None,
            TimestampType::CreateTime
        )
        .is_err());
        assert!(
            build_message_set(1, 0, &[], Compression::None, TimestampType::CreateTime)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn entries_iterator_stops_at_partial_entry() {
        let set = build_message_set(
            0,
            0,
            &[(0, None, Some(b"a")), (0, None, Some(b"b"))],
            Compression::None,
            TimestampType::NoTimestamp,
        )
        .unwrap();
        let cut = &set[..set.len() - 3];
        let mut it = entries(cut);
        assert!(it.next().unwrap().is_ok());
        let err = it.next().unwrap().unwrap_err();
        assert!(err.to_string().contains("at position 27"), "{err}");
        assert!(it.next().is_none());
    }

    /// Random bytes and random corruptions of valid sets: errors, never panics.
    #[test]
    fn fuzz_legacy_parsing() {
        let mut r = rand::rngs::StdRng::seed_from_u64(7);
        let data = sample_records();
        let refs = as_refs(&data[..10]);
        for magic in [0u8, 1] {
            for codec in CODECS {
                let set =
                    build_message_set(magic, 1, &refs, codec, TimestampType::CreateTime).unwrap();
                for _ in 0..300 {
                    let mut bad = set.clone();
                    for _ in 0..r.gen_range(1..4) {
                        let i = r.gen_range(0..bad.len());
                        bad[i] = r.gen();
                    }
                    let cut = r.gen_range(0..=bad.len());
                    let _ = deep_all(&bad[..cut]);
                    // Corrupt with the CRC patched, so the parser past the CRC check is exercised.
                    if bad.len() > 16 {
                        let end = (bad.len()).min(
                            12 + i32::from_be_bytes(bad[8..12].try_into().unwrap()).max(0) as usize,
                        );
                        if end > 16 {
                            let crc = crc32fast::hash(&bad[16..end]);
                            bad[12..16].copy_from_slice(&crc.to_be_bytes());
                        }
                        let _ = deep_all(&bad);
                    }
                }
            }
        }
        for _ in 0..2000 {
            let mut junk = vec![0u8; r.gen_range(0..100)];
            r.fill_bytes(&mut junk);
            let _ = deep_all(&junk);
        }
    }
}
