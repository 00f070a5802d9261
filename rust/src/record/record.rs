//! One decoded record (Kafka's `Record`/`DefaultRecord`): a view borrowing key, value and header
//! bytes from the batch's (decompressed) payload, so decoding allocates nothing per field.

use crate::error::{Error, Result};
use crate::record::varint::{read_varint, read_varlong};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    pub key: &'a str,
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

/// Reads a varint length followed by that many bytes; -1 means null. The length is checked against
/// what is left of `buf`, never used to allocate.
#[inline(always)]
fn read_nullable_bytes<'a>(buf: &'a [u8], pos: &mut usize, what: &str) -> Result<Option<&'a [u8]>> {
    let len = read_varint(buf, pos)?;
    if len < 0 {
        if len != -1 {
            return Err(Error::corrupt(format!("{what} has invalid length {len}")));
        }
        return Ok(None);
    }
    let len = len as usize;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| {
            Error::corrupt(format!(
                "{what} length {len} runs past the end of the record ({} bytes left)",
                buf.len() - *pos
            ))
        })?;
    let out = &buf[*pos..end];
    *pos = end;
    Ok(Some(out))
}

/// Decodes one `DefaultRecord` starting at `buf[*pos]` (its varint length first) and advances
/// `pos` past it. `base_offset`/`base_timestamp` come from the batch header.
pub fn read_default_record<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<Record<'a>> {
    let start = *pos;
    let size_in_bytes = read_varint(buf, pos)?;
    if size_in_bytes < 0 {
        return Err(Error::corrupt(format!(
            "record at {start} has negative size {size_in_bytes}"
        )));
    }
    let body_start = *pos;
    let body_end = body_start
        .checked_add(size_in_bytes as usize)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| {
            Error::corrupt(format!(
                "record at {start} of size {size_in_bytes} runs past the end of the batch"
            ))
        })?;
    let body = &buf[..body_end];
    if *pos >= body_end {
        return Err(Error::corrupt(format!("record at {start} is empty")));
    }
    let _attributes = body[*pos];
    *pos += 1;
    let timestamp_delta = read_varlong(body, pos)?;
    let offset_delta = read_varint(body, pos)?;
    let key = read_nullable_bytes(body, pos, "record key")?;
    let value = read_nullable_bytes(body, pos, "record value")?;
    let header_count = read_varint(body, pos)?;
    if header_count < 0 {
        return Err(Error::corrupt(format!(
            "record at {start} has negative header count {header_count}"
        )));
    }
    // Each header takes at least two bytes, which bounds the allocation by the record's size.
    if header_count as usize > (body_end - *pos) / 2 {
        return Err(Error::corrupt(format!(
            "record at {start} claims {header_count} headers in {} bytes",
            body_end - *pos
        )));
    }
    // Most records have no headers; skip the allocator call entirely for them.
    let mut headers = if header_count == 0 {
        Vec::new()
    } else {
        Vec::with_capacity(header_count as usize)
    };
    for _ in 0..header_count {
        let key_len = read_varint(body, pos)?;
        if key_len < 0 {
            return Err(Error::corrupt(format!(
                "record at {start} has a header key of length {key_len}"
            )));
        }
        let key_end = pos
            .checked_add(key_len as usize)
            .filter(|&e| e <= body_end)
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "header key of record at {start} runs past the record"
                ))
            })?;
        let key = std::str::from_utf8(&body[*pos..key_end])
            .map_err(|_| Error::corrupt(format!("header key of record at {start} is not UTF-8")))?;
        *pos = key_end;
        let value = read_nullable_bytes(body, pos, "header value")?;
        headers.push(Header { key, value });
    }
    if *pos != body_end {
        return Err(Error::corrupt(format!(
            "record at {start} declares {size_in_bytes} bytes but its fields take {}",
            *pos - body_start
        )));
    }
    let (timestamp, timestamp_type) = match log_append_time {
        Some(t) => (t, TimestampType::LogAppendTime),
        None => (
            base_timestamp.wrapping_add(timestamp_delta),
            TimestampType::CreateTime,
        ),
    };
    Ok(Record {
        offset: base_offset.wrapping_add(i64::from(offset_delta)),
        timestamp,
        timestamp_type,
        key,
        value,
        headers,
    })
}
