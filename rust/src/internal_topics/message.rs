//! Kafka's generated message classes (`ApiMessage.read` and `*JsonConverter.write`) driven by the
//! wire layouts of `schemas.rs`: a message's bytes at a version become the JSON Kafka's generated
//! converters print, with fields in schema order, tagged fields only when not at their default,
//! bytes as base64 and UUIDs as Kafka prints them.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::record::java_utf8::java_utf8_lossy;

use super::schemas::MESSAGES;

/// A version range, both ends included (Kafka's `Versions`); `NONE` is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions(pub i16, pub i16);

impl Versions {
    pub const NONE: Versions = Versions(1, 0);
    pub fn contains(self, v: i16) -> bool {
        self.0 <= v && v <= self.1
    }
}

/// A field's wire type.
#[derive(Debug)]
pub enum FieldType {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float64,
    String,
    Bytes,
    Uuid,
    Records,
    Array(&'static FieldType),
    Struct(&'static [FieldSpec]),
}

#[derive(Debug)]
pub struct FieldSpec {
    /// As Kafka's JSON converters name it (camelCase).
    pub name: &'static str,
    pub ty: FieldType,
    pub versions: Versions,
    pub nullable: Versions,
    /// The tag of a tagged field, -1 otherwise.
    pub tag: i32,
    pub tagged: Versions,
    /// The definition's `default`, as written there.
    pub default: Option<&'static str>,
}

/// Which coordinator (or log) a message belongs to: api keys are only unique within one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Group,
    Txn,
    /// The share coordinator's `__share_group_state` records (4.x).
    Share,
    Metadata,
    ConsumerProtocol,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CoordinatorKey,
    CoordinatorValue,
    Metadata,
    Data,
}

#[derive(Debug)]
pub struct MessageSpec {
    pub family: Family,
    pub name: &'static str,
    pub api_key: i16,
    pub kind: Kind,
    pub valid: Versions,
    pub flexible: Versions,
    pub fields: &'static [FieldSpec],
}

/// The message of `family` and `kind` with `api_key`.
pub fn find(family: Family, kind: Kind, api_key: i16) -> Option<&'static MessageSpec> {
    MESSAGES
        .iter()
        .find(|m| m.family == family && m.kind == kind && m.api_key == api_key)
}

pub fn find_by_name(name: &str) -> Option<&'static MessageSpec> {
    MESSAGES.iter().find(|m| m.name == name)
}

/// Kafka's wire primitives over a byte slice; every read is bounds-checked.
pub struct Reader<'b> {
    buf: &'b [u8],
    pos: usize,
}

impl<'b> Reader<'b> {
    pub fn new(buf: &'b [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    fn take(&mut self, n: usize) -> Result<&'b [u8]> {
        if n > self.remaining() {
            return Err(Error::corrupt(format!(
                "message ends after {} bytes, {n} more needed at byte {}",
                self.buf.len(),
                self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    pub fn i8(&mut self) -> Result<i8> {
        Ok(self.take(1)?[0] as i8)
    }
    pub fn i16(&mut self) -> Result<i16> {
        self.array().map(i16::from_be_bytes)
    }
    pub fn i32(&mut self) -> Result<i32> {
        self.array().map(i32::from_be_bytes)
    }
    pub fn i64(&mut self) -> Result<i64> {
        self.array().map(i64::from_be_bytes)
    }
    /// Kafka's `ByteUtils.readUnsignedVarint`.
    pub fn unsigned_varint(&mut self) -> Result<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::corrupt("unsigned varint longer than 5 bytes"))
    }
    pub fn u16(&mut self) -> Result<u16> {
        self.array().map(u16::from_be_bytes)
    }
    /// A compact array's length (the varint holds length + 1; a null array reads as empty).
    /// Every element takes at least one byte, so a length past the bytes left is corruption,
    /// never an allocation.
    pub fn compact_len(&mut self) -> Result<usize> {
        let len = self.unsigned_varint()?.saturating_sub(1) as usize;
        if len > self.remaining() {
            return Err(Error::corrupt(format!(
                "array of {len} elements in a message of {} bytes",
                self.buf.len()
            )));
        }
        Ok(len)
    }
    /// A compact string, invalid UTF-8 replaced (a null string reads as empty).
    pub fn compact_string(&mut self) -> Result<String> {
        let len = self.unsigned_varint()?.saturating_sub(1) as usize;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }
    /// A UUID as Kafka's `Uuid.toString` prints it.
    pub fn uuid(&mut self) -> Result<String> {
        Ok(uuid_string(self.take(16)?))
    }
    /// Skips a tagged-fields section (count, then tag, size and bytes of each).
    pub fn skip_tagged_fields(&mut self) -> Result<()> {
        for _ in 0..self.unsigned_varint()? {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
    /// A length (or -1 for null) in the flexible (`len + 1` varint) or classic encoding.
    fn length(&mut self, flexible: bool, classic_i32: bool) -> Result<i64> {
        Ok(if flexible {
            i64::from(self.unsigned_varint()?) - 1
        } else if classic_i32 {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        })
    }
}

/// How a read goes: the version and whether it is a flexible one.
#[derive(Clone, Copy)]
struct Ctx {
    version: i16,
    flexible: bool,
}

/// Reads `spec` at `version` from `r`, as the generated `read(Readable, short)`; returns the
/// JSON its generated converter writes.
pub fn read_message(spec: &MessageSpec, version: i16, r: &mut Reader<'_>) -> Result<Value> {
    let ctx = Ctx {
        version,
        flexible: spec.flexible.contains(version),
    };
    read_struct(spec.fields, ctx, r).map_err(|e| match e {
        Error::CorruptRecord { message, .. } => {
            Error::corrupt(format!("{} version {version}: {message}", spec.name))
        }
        other => other,
    })
}

fn read_struct(fields: &'static [FieldSpec], ctx: Ctx, r: &mut Reader<'_>) -> Result<Value> {
    let mut values: Vec<Option<Value>> = Vec::with_capacity(fields.len());
    for f in fields {
        if !f.versions.contains(ctx.version) {
            values.push(None);
            continue;
        }
        if f.tagged.contains(ctx.version) {
            // Kafka's converter writes a tagged struct even when it is absent (its non-default
            // check does not guard the write), and an absent one reads as a fresh struct.
            let absent = match f.ty {
                FieldType::Struct(fields) => Some(default_struct(fields, ctx.version)),
                _ => None,
            };
            values.push(absent);
            continue;
        }
        values.push(Some(read_field(
            &f.ty,
            f.nullable.contains(ctx.version),
            ctx,
            r,
        )?));
    }
    if ctx.flexible {
        let n = r.unsigned_varint()?;
        for _ in 0..n {
            let tag = r.unsigned_varint()? as i64;
            let size = r.unsigned_varint()? as usize;
            let bytes = r.take(size)?;
            let found = fields.iter().position(|f| {
                i64::from(f.tag) == tag
                    && f.tagged.contains(ctx.version)
                    && f.versions.contains(ctx.version)
            });
            // Unknown tags are skipped, as Kafka keeps them aside as unknown tagged fields.
            if let Some(i) = found {
                let f = &fields[i];
                let mut sub = Reader::new(bytes);
                let value = read_field(&f.ty, f.nullable.contains(ctx.version), ctx, &mut sub)?;
                // Written only when not the default, as the converter does.
                if value != default_value(f) || matches!(f.ty, FieldType::Struct(_)) {
                    values[i] = Some(value);
                }
            }
        }
    }
    let mut object = Map::new();
    for (f, v) in fields.iter().zip(values) {
        if let Some(v) = v {
            object.insert(f.name.to_string(), v);
        }
    }
    Ok(Value::Object(object))
}

fn read_field(
    ty: &'static FieldType,
    nullable: bool,
    ctx: Ctx,
    r: &mut Reader<'_>,
) -> Result<Value> {
    let null = |what: &str| -> Result<Value> {
        if nullable {
            Ok(Value::Null)
        } else {
            Err(Error::corrupt(format!("non-nullable {what} is null")))
        }
    };
    Ok(match ty {
        FieldType::Bool => Value::Bool(r.take(1)?[0] != 0),
        FieldType::Int8 => r.i8()?.into(),
        FieldType::Int16 => r.i16()?.into(),
        FieldType::Uint16 => (r.i16()? as u16).into(),
        FieldType::Int32 => r.i32()?.into(),
        FieldType::Uint32 => (r.i32()? as u32).into(),
        FieldType::Int64 => r.i64()?.into(),
        FieldType::Float64 => Value::from(f64::from_bits(r.i64()? as u64)),
        FieldType::Uuid => Value::String(uuid_string(r.take(16)?)),
        FieldType::String => {
            let len = r.length(ctx.flexible, false)?;
            if len < 0 {
                return null("string");
            }
            Value::String(java_utf8_lossy(r.take(len as usize)?).into_owned())
        }
        FieldType::Bytes | FieldType::Records => {
            let len = r.length(ctx.flexible, true)?;
            if len < 0 {
                return null("bytes");
            }
            use base64::Engine;
            Value::String(base64::engine::general_purpose::STANDARD.encode(r.take(len as usize)?))
        }
        FieldType::Array(element) => {
            let len = r.length(ctx.flexible, true)?;
            if len < 0 {
                return null("array");
            }
            // Every element takes at least a byte: a count past the bytes left is damage, and
            // never an allocation.
            if len as usize > r.remaining() {
                return Err(Error::corrupt(format!(
                    "array of {len} elements with {} bytes left",
                    r.remaining()
                )));
            }
            let mut items = Vec::with_capacity(len as usize);
            for _ in 0..len {
                items.push(read_field(element, false, ctx, r)?);
            }
            Value::Array(items)
        }
        FieldType::Struct(fields) => {
            // A nullable struct starts with a marker: an unsigned varint in flexible versions
            // (0 for null), a byte before (negative for null).
            if nullable {
                let null = if ctx.flexible {
                    r.unsigned_varint()? == 0
                } else {
                    r.i8()? < 0
                };
                if null {
                    return Ok(Value::Null);
                }
            }
            read_struct(fields, ctx, r)?
        }
    })
}

/// A struct built with its defaults (`new X()`), as its converter writes it at `version`.
fn default_struct(fields: &'static [FieldSpec], version: i16) -> Value {
    let mut object = Map::new();
    for f in fields {
        if !f.versions.contains(version) {
            continue;
        }
        let tagged = f.tagged.contains(version);
        let value = match f.ty {
            FieldType::Struct(sub) => default_struct(sub, version),
            _ if tagged => continue,
            _ => default_value(f),
        };
        object.insert(f.name.to_string(), value);
    }
    Value::Object(object)
}

/// A field's default as its converter compares it (Kafka's `FieldSpec.fieldDefault`).
fn default_value(f: &FieldSpec) -> Value {
    let d = f.default.unwrap_or("");
    if d == "null" {
        return Value::Null;
    }
    let int = || -> i64 {
        if let Some(hex) = d.strip_prefix("0x").or_else(|| d.strip_prefix("0X")) {
            i64::from_str_radix(hex, 16).unwrap_or(0)
        } else {
            d.parse().unwrap_or(0)
        }
    };
    match f.ty {
        FieldType::Bool => Value::Bool(d == "true"),
        FieldType::Int8
        | FieldType::Int16
        | FieldType::Uint16
        | FieldType::Int32
        | FieldType::Uint32
        | FieldType::Int64 => int().into(),
        FieldType::Float64 => Value::from(d.parse::<f64>().unwrap_or(0.0)),
        FieldType::String => Value::String(d.to_string()),
        FieldType::Uuid => Value::String(uuid_string(&[0; 16])),
        FieldType::Bytes | FieldType::Records => Value::String(String::new()),
        FieldType::Array(_) => Value::Array(Vec::new()),
        // Kafka compares with a fresh struct; a present tagged struct is taken as set.
        FieldType::Struct(_) => Value::Null,
    }
}

/// Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, no padding.
pub fn uuid_string(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A coordinator record: its type, key, and value's version and message (None: a tombstone).
pub(crate) type CoordinatorRecord = (i16, Value, Option<(i16, Value)>);

/// A coordinator record's key and value as 4.x's `CoordinatorRecordSerde.deserialize` reads
/// them: the record type from the key's version field, the key at version 0, the value at its own
/// version (one `family`'s record types). Returns the type, the key, and the value's version and
/// message (`None` for a tombstone); the errors carry Kafka's messages.
pub(crate) fn decode_coordinator_record(
    family: Family,
    key: &[u8],
    value: Option<&[u8]>,
) -> std::result::Result<CoordinatorRecord, super::DecodeError> {
    use super::DecodeError;
    let mut k = Reader::new(key);
    let record_type = k
        .i16()
        .map_err(|_| DecodeError::Other("Could not read version from key's buffer.".into()))?;
    let key_spec = find(family, Kind::CoordinatorKey, record_type)
        .ok_or(DecodeError::UnknownRecordType(record_type))?;
    let key_json = read_message(key_spec, 0, &mut k).map_err(|e| {
        DecodeError::Other(format!(
            "Could not read record with version {record_type} from key's buffer due to: {e}."
        ))
    })?;
    let Some(value) = value else {
        return Ok((record_type, key_json, None));
    };
    let spec = find(family, Kind::CoordinatorValue, record_type)
        .ok_or(DecodeError::UnknownRecordType(record_type))?;
    let mut v = Reader::new(value);
    let version = v
        .i16()
        .map_err(|_| DecodeError::Other("Could not read version from value's buffer.".into()))?;
    if !spec.valid.contains(version) {
        return Err(DecodeError::Other(format!(
            "Found an unknown record version {version} for {record_type} type"
        )));
    }
    let json = read_message(spec, version, &mut v).map_err(|e| {
        DecodeError::Other(format!(
            "Could not read record with version {version} from value's buffer due to: {e}."
        ))
    })?;
    Ok((record_type, key_json, Some((version, json))))
}

/// A coordinator record as `DumpLogSegments`' `OffsetsMessageParser` and
/// `TransactionLogMessageParser` print it: the key as `{"type", "data"}`, the payload as
/// `{"version", "data"}`, or `<DELETE>` for a tombstone.
pub(crate) fn coordinator_record_for_dump(
    record_type: i16,
    key: Value,
    value: Option<(i16, Value)>,
) -> super::ParsedRecord {
    let key_json = serde_json::json!({"type": record_type.to_string(), "data": key});
    let payload_json = match value {
        Some((version, v)) => serde_json::json!({"version": version.to_string(), "data": v}),
        None => Value::Null,
    };
    super::ParsedRecord {
        key: Some(to_jackson_string(&key_json)),
        payload: Some(if payload_json.is_null() {
            "<DELETE>".to_string()
        } else {
            to_jackson_string(&payload_json)
        }),
        key_json,
        payload_json,
    }
}

/// What both coordinator parsers stop with on a record without a key.
pub(crate) fn missing_key_error(offset: i64) -> Error {
    Error::corrupt(format!(
        "Failed to decode message at offset {offset} using the specified decoder (message had a missing key)"
    ))
}

/// `JsonNode.toString()` as Jackson writes it: compact, non-ASCII as is, control characters as
/// `\u00XX` with upper-case hex, doubles as Java's `Double.toString`.
pub fn to_jackson_string(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, JacksonFormatter);
    serde::Serialize::serialize(value, &mut ser).expect("a Value always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

struct JacksonFormatter;

impl serde_json::ser::Formatter for JacksonFormatter {
    fn write_char_escape<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: serde_json::ser::CharEscape,
    ) -> std::io::Result<()> {
        use serde_json::ser::CharEscape::*;
        let s: &[u8] = match char_escape {
            Quote => b"\\\"",
            ReverseSolidus => b"\\\\",
            Solidus => b"\\/",
            Backspace => b"\\b",
            FormFeed => b"\\f",
            LineFeed => b"\\n",
            CarriageReturn => b"\\r",
            Tab => b"\\t",
            AsciiControl(byte) => {
                return write!(writer, "\\u{:04X}", byte);
            }
        };
        writer.write_all(s)
    }

    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        writer.write_all(java_double_string(value).as_bytes())
    }
}

/// Java's `Double.toString`: plain notation with at least one decimal for magnitudes in
/// [1e-3, 1e7), `d.dddE±n` otherwise; the shortest digits that read back the same value.
pub fn java_double_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let abs = v.abs();
    if (1e-3..1e7).contains(&abs) {
        let s = format!("{v}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    // Rust's `{:e}` gives the shortest digits: `1.5e-7`, `1e10`.
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').expect("exponent form");
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_consistent() {
        for m in MESSAGES {
            assert!(m.valid.0 <= m.valid.1, "{}", m.name);
            for f in m.fields {
                assert!(!f.name.is_empty() && f.name.chars().next().unwrap().is_lowercase());
            }
        }
        assert!(find(Family::Group, Kind::CoordinatorValue, 1).is_some());
        assert!(find_by_name("TopicRecord").is_some());
    }

    #[test]
    fn jackson_strings_and_doubles() {
        let v = serde_json::json!({"a": "x\u{1}\n\"é/", "b": 1.0, "c": 1e10, "d": 0.001, "e": 12345678.9});
        assert_eq!(
            to_jackson_string(&v),
            r#"{"a":"x\u0001\n\"é/","b":1.0,"c":1.0E10,"d":0.001,"e":1.23456789E7}"#
        );
        assert_eq!(java_double_string(1.5e-7), "1.5E-7");
    }

    #[test]
    fn flexible_message_with_tagged_fields() {
        // OffsetCommitValue v4: offset, leaderEpoch, metadata (compact), commitTimestamp, tags.
        let spec = find(Family::Group, Kind::CoordinatorValue, 1).unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(&42i64.to_be_bytes());
        b.extend_from_slice(&7i32.to_be_bytes());
        b.extend_from_slice(&[3, b'h', b'i']);
        b.extend_from_slice(&1000i64.to_be_bytes());
        b.extend_from_slice(&[1, 0, 16]); // one tagged field: tag 0 (topicId), 16 bytes
        b.extend_from_slice(&[0xfb; 16]);
        let v = read_message(spec, 4, &mut Reader::new(&b)).unwrap();
        assert_eq!(
            to_jackson_string(&v),
            r#"{"offset":42,"leaderEpoch":7,"metadata":"hi","commitTimestamp":1000,"topicId":"-_v7-_v7-_v7-_v7-_v7-w"}"#
        );
        // A truncated message is an error, not a panic.
        assert!(read_message(spec, 4, &mut Reader::new(&b[..10])).is_err());
        // A huge array count is refused before any allocation.
        let spec = find_by_name("ConsumerGroupPartitionMetadataValue").unwrap();
        assert!(read_message(spec, 0, &mut Reader::new(&[0xff, 0xff, 0xff, 0x0f])).is_err());
    }
}
