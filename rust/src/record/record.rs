//! One decoded record (Kafka's `Record`/`DefaultRecord`): a view borrowing key, value and header
//! bytes from the batch's (decompressed) payload, so decoding allocates nothing per field.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::record::java_utf8::java_utf8_lossy;
use crate::record::varint::{
    decode_varint_length, decode_varint_length_unchecked, decode_varint_unchecked,
    decode_varlong_unchecked, read_varint, read_varint_length, read_varlong,
    UNCHECKED_VARINT_BYTES,
};

/// Eight bytes wide: a `Record` then has no padding, which moving one out of the decoder's
/// `Result` copied with two overlapping 4-byte moves that stalled the load reading them back
/// (perf: a third of the Arrow loop's samples; zero-copy reads 0.94x the time, paired runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i64)]
pub enum TimestampType {
    /// Magic v0 messages carry no timestamp (Kafka's NO_TIMESTAMP_TYPE, timestamp -1).
    NoTimestamp,
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's `TimestampType.id`: -1, 0, 1.
    pub fn id(self) -> i8 {
        match self {
            TimestampType::NoTimestamp => -1,
            TimestampType::CreateTime => 0,
            TimestampType::LogAppendTime => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimestampType::NoTimestamp => "NoTimestampType",
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    /// As Kafka's `DefaultRecord.readHeaders` decodes it: malformed UTF-8 becomes U+FFFD, as
    /// Java's `new String(bytes, UTF_8)` does (brokers never check it).
    pub key: Cow<'a, str>,
    pub value: Option<&'a [u8]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<Header<'a>>,
}

/// Owned form, for callers that keep records past their batch's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record<'_> {
    pub fn to_owned_record(&self) -> OwnedRecord {
        OwnedRecord {
            offset: self.offset,
            timestamp: self.timestamp,
            timestamp_type: self.timestamp_type,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: self
                .headers
                .iter()
                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                .collect(),
        }
    }
}

impl OwnedRecord {
    /// The record borrowed, as a batch's decoder gives it.
    pub fn as_record(&self) -> Record<'_> {
        Record {
            offset: self.offset,
            timestamp: self.timestamp,
            timestamp_type: self.timestamp_type,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| Header {
                    key: Cow::Borrowed(k.as_str()),
                    value: v.as_deref(),
                })
                .collect(),
        }
    }
}

/// Records copied out of their batches into one buffer, for readers that hand them on after
/// the batches are gone (a chunk of Python's `Log.records()`, a consumer's poll): keys, values
/// and headers back to back, not a `Vec` each as in [`OwnedRecord`] (two allocations, frees
/// and copies a record, a tenth of `Log.records()`'s time).
#[derive(Debug, Clone, Default)]
pub struct RecordArena {
    bytes: Vec<u8>,
    rows: Vec<ArenaRow>,
    /// Header keys (UTF-8, as decoded) and values, as ranges of `bytes`.
    headers: Vec<(std::ops::Range<usize>, Option<std::ops::Range<usize>>)>,
}

/// A length of a [`RecordArena`] ([`RecordArena::mark`]).
#[derive(Debug, Clone, Copy)]
pub struct ArenaMark {
    bytes: usize,
    rows: usize,
    headers: usize,
}

#[derive(Debug, Clone)]
struct ArenaRow {
    offset: i64,
    timestamp: i64,
    timestamp_type: TimestampType,
    key: Option<std::ops::Range<usize>>,
    value: Option<std::ops::Range<usize>>,
    headers: std::ops::Range<usize>,
}

impl RecordArena {
    /// Empties the arena, keeping its memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.rows.clear();
        self.headers.clear();
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Bytes of keys, values and headers held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Where the arena ends now, to [`Self::truncate`] back to: the records pushed since are
    /// dropped (those of a batch that failed midway).
    pub fn mark(&self) -> ArenaMark {
        ArenaMark {
            bytes: self.bytes.len(),
            rows: self.rows.len(),
            headers: self.headers.len(),
        }
    }

    pub fn truncate(&mut self, mark: ArenaMark) {
        self.bytes.truncate(mark.bytes);
        self.rows.truncate(mark.rows);
        self.headers.truncate(mark.headers);
    }

    pub fn push(&mut self, r: &Record<'_>) {
        let key = r.key.map(|k| self.copy(k));
        let value = r.value.map(|v| self.copy(v));
        let first = self.headers.len();
        for h in &r.headers {
            let header = (self.copy(h.key.as_bytes()), h.value.map(|v| self.copy(v)));
            self.headers.push(header);
        }
        self.rows.push(ArenaRow {
            offset: r.offset,
            timestamp: r.timestamp,
            timestamp_type: r.timestamp_type,
            key,
            value,
            headers: first..self.headers.len(),
        });
    }

    fn copy(&mut self, b: &[u8]) -> std::ops::Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(b);
        start..self.bytes.len()
    }

    /// Record `i`, borrowing from the arena.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Record<'_>> {
        let row = self.rows.get(i)?;
        let at = |r: &std::ops::Range<usize>| &self.bytes[r.clone()];
        // Most records have no headers: no collecting for them (perf: a tenth of `get`).
        let headers = if row.headers.is_empty() {
            Vec::new()
        } else {
            self.headers[row.headers.clone()]
                .iter()
                // Copied from a `str`: valid UTF-8, borrowed as is.
                .map(|(k, v)| Header {
                    key: String::from_utf8_lossy(at(k)),
                    value: v.as_ref().map(at),
                })
                .collect()
        };
        Some(Record {
            offset: row.offset,
            timestamp: row.timestamp,
            timestamp_type: row.timestamp_type,
            key: row.key.as_ref().map(at),
            value: row.value.as_ref().map(at),
            headers,
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// What can be wrong with a record's framing; turned into its message only on the cold error
/// path, so the decoding loop carries no formatting code.
#[derive(Clone, Copy)]
enum RecordDamage {
    NegativeSize(i32),
    PastBatchEnd(i32),
    Empty,
    PastRecordEnd(&'static str, usize, usize),
    NegativeHeaderCount(i32),
    TooManyHeaders(i32, usize),
    NegativeHeaderKey(i32),
    HeaderKeyPastRecord,
    SizeMismatch(i32, usize),
}

#[cold]
#[inline(never)]
fn damaged(start: usize, damage: RecordDamage) -> Error {
    use RecordDamage::*;
    Error::corrupt(match damage {
        NegativeSize(size) => format!("record at {start} has negative size {size}"),
        PastBatchEnd(size) => {
            format!("record at {start} of size {size} runs past the end of the batch")
        }
        Empty => format!("record at {start} is empty"),
        PastRecordEnd(what, len, left) => {
            format!("{what} length {len} runs past the end of the record ({left} bytes left)")
        }
        NegativeHeaderCount(n) => format!("record at {start} has negative header count {n}"),
        TooManyHeaders(n, left) => {
            format!("record at {start} claims {n} headers in {left} bytes")
        }
        NegativeHeaderKey(len) => {
            format!("record at {start} has a header key of length {len}")
        }
        HeaderKeyPastRecord => format!("header key of record at {start} runs past the record"),
        SizeMismatch(size, took) => {
            format!("record at {start} declares {size} bytes but its fields take {took}")
        }
    })
}

/// Reads a varint length followed by that many bytes; a negative length means null. The length
/// is checked against what is left of `buf`, never used to allocate.
#[inline(always)]
fn read_nullable_bytes<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    start: usize,
    what: &'static str,
) -> Result<Option<&'a [u8]>> {
    // Any negative length is null, as Kafka's `Utils.readBytes` reads it (-1 is what writers
    // put), so a consumer and kafkalog read the same records.
    let Ok(len) = read_varint_length(buf, pos)? else {
        return Ok(None);
    };
    // `len` < 2^31 and `pos` <= `buf.len()`: the sum cannot overflow, one comparison bounds it.
    let end = *pos + len;
    let Some(out) = buf.get(*pos..end) else {
        let left = buf.len().saturating_sub(*pos);
        return Err(damaged(start, RecordDamage::PastRecordEnd(what, len, left)));
    };
    *pos = end;
    Ok(Some(out))
}

/// Decodes one `DefaultRecord` starting at `buf[*pos]` (its varint length first) and advances
/// `pos` past it. `base_offset`/`base_timestamp` come from the batch header. Always inlined into
/// the caller's loop, so the record's fields stay in registers instead of going through a
/// temporary copied out field by field.
///
/// A well-formed record is read by checks that carry no error: each failure leaves the block
/// alike, so the loop keeps no error's details (which field, its length) live in registers,
/// and the record is built once, in place. Anything declined is read again by
/// [`read_default_record_checked`], off the loop, which names the damage.
#[inline(always)]
pub fn read_default_record<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<Record<'a>> {
    let start = *pos;
    'well_formed: {
        let mut p = start;
        let Some(Ok(size)) = decode_varint_length(buf, &mut p) else {
            break 'well_formed;
        };
        // The fields' varints are read without bounds checks, which needs room past the
        // record for the longest reads a damaged record could make (below): a batch's last
        // record or two go through the checked reader instead.
        let Some(body_end) = p
            .checked_add(size)
            .filter(|&e| e + FIELDS_READ_PAST_RECORD <= buf.len())
        else {
            break 'well_formed;
        };
        // The attributes byte, unused since magic 2.
        if p >= body_end {
            break 'well_formed;
        }
        p += 1;
        // Each varint below starts at most 25 bytes past `body_end`: `p <= body_end` here, a
        // varint takes at most 10 bytes (a varlong) or 5, and a non-null key or value ends at
        // or before `body_end`; so timestamp +0, offset +10, key length +15, value length +20
        // (after a null key), header count +25 (after a null value). Its two unchecked bytes
        // are then within FIELDS_READ_PAST_RECORD of `body_end`, inside `buf`. A record whose
        // fields overrun `body_end` fails the last check and is read again by the checked one.
        // SAFETY: as above, each read's `p + UNCHECKED_VARINT_BYTES <= buf.len()`.
        let (timestamp_delta, offset_delta, key_length) = unsafe {
            (
                decode_varlong_unchecked(buf, &mut p),
                decode_varint_unchecked(buf, &mut p),
                decode_varint_length_unchecked(buf, &mut p),
            )
        };
        let (Some(timestamp_delta), Some(offset_delta), Some(key_length)) =
            (timestamp_delta, offset_delta, key_length)
        else {
            break 'well_formed;
        };
        let Some(key) = bytes_in_record(buf, &mut p, key_length, body_end) else {
            break 'well_formed;
        };
        // SAFETY: as above.
        let Some(value_length) = (unsafe { decode_varint_length_unchecked(buf, &mut p) }) else {
            break 'well_formed;
        };
        let Some(value) = bytes_in_record(buf, &mut p, value_length, body_end) else {
            break 'well_formed;
        };
        // SAFETY: as above.
        let Some(header_count) = (unsafe { decode_varint_unchecked(buf, &mut p) }) else {
            break 'well_formed;
        };
        // Most records have no headers; no allocator call for them.
        let headers = if header_count == 0 {
            Vec::new()
        } else if p <= body_end {
            let Ok((headers, after)) = read_headers(&buf[..body_end], p, start, header_count)
            else {
                break 'well_formed;
            };
            p = after;
            headers
        } else {
            break 'well_formed;
        };
        if p != body_end {
            break 'well_formed;
        }
        // Equal to `p` here; taken from the size, known before the fields, so the next
        // record's decode does not wait on this one's.
        *pos = body_end;
        return Ok(record_in_batch(
            (base_offset, base_timestamp, log_append_time),
            (timestamp_delta, offset_delta),
            key,
            value,
            headers,
        ));
    }
    let (record, end) =
        read_default_record_checked(buf, start, base_offset, base_timestamp, log_append_time);
    *pos = end;
    record
}

/// Bytes past a record's end [`read_default_record`]'s unchecked varint reads may reach (27,
/// for a damaged record whose varints run on past it), rounded up.
const FIELDS_READ_PAST_RECORD: usize = 32;
const _: () =
    assert!(FARTHEST_VARINT_PAST_RECORD + UNCHECKED_VARINT_BYTES <= FIELDS_READ_PAST_RECORD);

/// Where [`read_default_record`]'s last varint (the header count) may start past a record's
/// end: timestamp 10 bytes, offset, key and value lengths 5 each (null key and value).
const FARTHEST_VARINT_PAST_RECORD: usize = 10 + 5 + 5 + 5;

/// The `length` bytes at `*p` (None for a negative length: null), when they end within the
/// record; `None` otherwise.
#[inline(always)]
fn bytes_in_record<'a>(
    buf: &'a [u8],
    p: &mut usize,
    length: std::result::Result<usize, i32>,
    body_end: usize,
) -> Option<Option<&'a [u8]>> {
    let Ok(len) = length else {
        return Some(None);
    };
    let end = p.checked_add(len).filter(|&e| e <= body_end)?;
    let out = buf.get(*p..end)?;
    *p = end;
    Some(Some(out))
}

/// [`read_default_record`] with every check naming the damage it finds: the way a record the
/// hot path declined is read. Returns where the record ends (`start` on an error).
#[cold]
#[inline(never)]
fn read_default_record_checked(
    buf: &[u8],
    start: usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> (Result<Record<'_>>, usize) {
    let mut pos = start;
    let record = read_record_fields(buf, &mut pos, base_offset, base_timestamp, log_append_time);
    (record, pos)
}

/// The checked reading of [`read_default_record_checked`]; `pos` moves past the record only
/// when it is read whole.
fn read_record_fields<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<Record<'a>> {
    use RecordDamage::*;
    let start = *pos;
    let mut p = start;
    let size = match read_varint_length(buf, &mut p)? {
        Ok(size) => size,
        Err(negative) => return Err(damaged(start, NegativeSize(negative))),
    };
    // Below 2^31: a length read from a varint of at most 32 bits.
    let size_in_bytes = size as i32;
    let body_start = p;
    let Some(body_end) = body_start.checked_add(size).filter(|&e| e <= buf.len()) else {
        return Err(damaged(start, PastBatchEnd(size_in_bytes)));
    };
    let body = &buf[..body_end];
    if p >= body_end {
        return Err(damaged(start, Empty));
    }
    let _attributes = body[p];
    p += 1;
    let timestamp_delta = read_varlong(body, &mut p)?;
    let offset_delta = read_varint(body, &mut p)?;
    let key = read_nullable_bytes(body, &mut p, start, "record key")?;
    let value = read_nullable_bytes(body, &mut p, start, "record value")?;
    let header_count = read_varint(body, &mut p)?;
    // Most records have no headers; no allocator call for them.
    let headers = if header_count == 0 {
        Vec::new()
    } else {
        let (headers, after) = read_headers(body, p, start, header_count)?;
        p = after;
        headers
    };
    if p != body_end {
        return Err(damaged(start, SizeMismatch(size_in_bytes, p - body_start)));
    }
    *pos = body_end;
    Ok(record_in_batch(
        (base_offset, base_timestamp, log_append_time),
        (timestamp_delta, offset_delta),
        key,
        value,
        headers,
    ))
}

/// A record of a batch with base offset and timestamp (and LogAppendTime, when the batch is
/// stamped so) `batch`, from its `(timestamp, offset)` deltas and fields.
#[inline(always)]
fn record_in_batch<'a>(
    (base_offset, base_timestamp, log_append_time): (i64, i64, Option<i64>),
    (timestamp_delta, offset_delta): (i64, i32),
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Vec<Header<'a>>,
) -> Record<'a> {
    let (timestamp, timestamp_type) = match log_append_time {
        Some(t) => (t, TimestampType::LogAppendTime),
        None => (
            base_timestamp.wrapping_add(timestamp_delta),
            TimestampType::CreateTime,
        ),
    };
    Record {
        offset: base_offset.wrapping_add(i64::from(offset_delta)),
        timestamp,
        timestamp_type,
        key,
        value,
        headers,
    }
}

/// A record's `header_count` headers, which end at `body.len()`.
#[inline(never)]
fn read_headers<'a>(
    body: &'a [u8],
    mut p: usize,
    start: usize,
    header_count: i32,
) -> Result<(Vec<Header<'a>>, usize)> {
    use RecordDamage::*;
    let pos = &mut p;
    let body_end = body.len();
    if header_count < 0 {
        return Err(damaged(start, NegativeHeaderCount(header_count)));
    }
    // Each header takes at least two bytes, which bounds the allocation by the record's size.
    if header_count as usize > (body_end - *pos) / 2 {
        return Err(damaged(
            start,
            TooManyHeaders(header_count, body_end - *pos),
        ));
    }
    let mut headers = Vec::with_capacity(header_count as usize);
    for _ in 0..header_count {
        let key_len = read_varint(body, pos)?;
        if key_len < 0 {
            return Err(damaged(start, NegativeHeaderKey(key_len)));
        }
        let Some(key_end) = pos.checked_add(key_len as usize).filter(|&e| e <= body_end) else {
            return Err(damaged(start, HeaderKeyPastRecord));
        };
        let key = java_utf8_lossy(&body[*pos..key_end]);
        *pos = key_end;
        let value = read_nullable_bytes(body, pos, start, "header value")?;
        headers.push(Header { key, value });
    }
    Ok((headers, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's bytes as a writer lays them out, with each varint in `pad` more bytes than it
    /// needs (Kafka's readers take such over-long varints).
    fn encode(fields: &[Option<&[u8]>], deltas: (i64, i32), headers: usize) -> Vec<u8> {
        use crate::record::varint::{write_varint, write_varlong};
        let mut body = vec![0u8];
        write_varlong(&mut body, deltas.0);
        write_varint(&mut body, deltas.1);
        for field in fields {
            write_varint(&mut body, field.map_or(-1, |f| f.len() as i32));
            body.extend_from_slice(field.unwrap_or_default());
        }
        write_varint(&mut body, headers as i32);
        for i in 0..headers {
            write_varint(&mut body, 1);
            body.push(b'a' + i as u8);
            write_varint(&mut body, i as i32 - 1);
            body.extend(std::iter::repeat_n(b'h', i.saturating_sub(1)));
        }
        let mut out = Vec::new();
        write_varint(&mut out, body.len() as i32);
        out.extend(body);
        out
    }

    /// The fast reader (unchecked varints, one way out) and the checked one agree on every
    /// record and every damage: same record or same error, same position after, over random
    /// records (long and short varints, nulls, headers) with random bytes flipped, cut short
    /// and followed by other records.
    #[test]
    fn the_fast_reader_reads_what_the_checked_reader_reads() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut damaged = 0;
        for round in 0..20_000 {
            let mut buf = Vec::new();
            for _ in 0..rng.gen_range(1..4) {
                let key: Vec<u8> = (0..rng.gen_range(0..5)).map(|_| rng.gen()).collect();
                let value: Vec<u8> = (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect();
                let deltas = match rng.gen_range(0..3) {
                    0 => (rng.gen_range(-64..64), rng.gen_range(-64..64)),
                    1 => (rng.gen_range(-20_000..20_000), rng.gen_range(0..100_000)),
                    _ => (rng.gen(), rng.gen()),
                };
                let key = (rng.gen_range(0..4) > 0).then_some(key.as_slice());
                let value = (rng.gen_range(0..8) > 0).then_some(value.as_slice());
                buf.extend(encode(
                    &[key, value],
                    deltas,
                    rng.gen_range(0..3) * rng.gen_range(0..2),
                ));
            }
            if round % 2 == 1 {
                for _ in 0..rng.gen_range(1..4) {
                    let at = rng.gen_range(0..buf.len());
                    buf[at] = if rng.gen() { rng.gen() } else { buf[at] ^ 0x80 };
                }
                if rng.gen() {
                    buf.truncate(rng.gen_range(0..buf.len()));
                }
            }
            let mut pos = 0;
            while pos < buf.len() {
                let mut fast_pos = pos;
                let fast = read_default_record(&buf, &mut fast_pos, 100, 1_000, None);
                let (checked, checked_pos) =
                    read_default_record_checked(&buf, pos, 100, 1_000, None);
                match (&fast, &checked) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "round {round} at {pos}"),
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                    _ => panic!("round {round} at {pos}: {fast:?} against {checked:?}"),
                }
                assert_eq!(fast_pos, checked_pos, "round {round} at {pos}");
                if fast.is_err() {
                    damaged += 1;
                    break;
                }
                pos = fast_pos;
            }
        }
        assert!(damaged > 5_000, "{damaged} damaged reads");
        // The farthest the unchecked reads go: a record of its attributes byte alone, then the
        // longest varints (a null key and value) running on into what follows.
        let mut buf = vec![2, 0];
        buf.extend([0xff; 9]);
        buf.push(0x01);
        for _ in 0..3 {
            buf.extend([0xff; 4]);
            buf.push(0x0f);
        }
        buf.resize(2 + FIELDS_READ_PAST_RECORD, 0xff);
        let mut pos = 0;
        let err = read_default_record(&buf, &mut pos, 0, 0, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            read_default_record_checked(&buf, 0, 0, 0, None)
                .0
                .unwrap_err()
                .to_string()
        );
    }

    /// An arena hands back every record as it was pushed: null and empty keys and values,
    /// headers with and without values, record after record in one buffer.
    #[test]
    fn an_arena_gives_back_the_records_pushed() {
        let records = [
            Record {
                offset: 7,
                timestamp: 1_700_000_000_000,
                timestamp_type: TimestampType::CreateTime,
                key: None,
                value: Some(b"v"),
                headers: vec![],
            },
            Record {
                offset: 8,
                timestamp: -1,
                timestamp_type: TimestampType::LogAppendTime,
                key: Some(b""),
                value: None,
                headers: vec![
                    Header {
                        key: Cow::Borrowed("h\u{fffd}"),
                        value: Some(b"x"),
                    },
                    Header {
                        key: Cow::Borrowed(""),
                        value: None,
                    },
                ],
            },
            Record {
                offset: 9,
                timestamp: 0,
                timestamp_type: TimestampType::NoTimestamp,
                key: Some(b"key"),
                value: Some(&[0xff; 300]),
                headers: vec![Header {
                    key: Cow::Borrowed("last"),
                    value: Some(b""),
                }],
            },
        ];
        let mut arena = RecordArena::default();
        for r in &records {
            arena.push(r);
        }
        assert_eq!(arena.len(), 3);
        // "v"; "h\u{fffd}" and "x"; "key", the value and "last".
        assert_eq!(arena.bytes(), 1 + (4 + 1) + (3 + 300 + 4));
        assert_eq!(arena.iter().collect::<Vec<_>>(), records);
        assert!(arena.get(3).is_none());
        // Back to a mark: the records pushed since are gone, those before it as they were.
        arena.clear();
        arena.push(&records[0]);
        let mark = arena.mark();
        arena.push(&records[1]);
        arena.push(&records[2]);
        arena.truncate(mark);
        assert_eq!(arena.iter().collect::<Vec<_>>(), records[..1]);
        assert_eq!(arena.bytes(), 1);
        arena.push(&records[2]);
        assert_eq!(arena.get(1).as_ref(), Some(&records[2]));
        arena.clear();
        assert!(arena.is_empty() && arena.bytes() == 0);
    }
}
