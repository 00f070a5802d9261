//! `__consumer_offsets` records: Kafka's `GroupCoordinatorRecordSerde` (the record type in the
//! key's version field, the value's own version) and `DumpLogSegments.OffsetsMessageParser`'s
//! output (`key: {"type":...,"data":...} payload: {"version":...,"data":...}`, `<DELETE>` for a
//! tombstone, consumer-protocol subscriptions and assignments decoded inside group metadata).

use serde_json::{json, Value};

use super::message::{
    coordinator_record_for_dump, find, find_by_name, missing_key_error, read_message, Family, Kind,
    Reader,
};
use super::{DecodeError, ParsedRecord};

/// The group coordinator's record types (`CoordinatorRecordType`).
pub const LEGACY_OFFSET_COMMIT: i16 = 0;
pub const OFFSET_COMMIT: i16 = 1;
pub const GROUP_METADATA: i16 = 2;

/// One decoded `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRecord {
    pub record_type: i16,
    /// The key message as Kafka's converter writes it.
    pub key: Value,
    /// The value's version and message; `None` for a tombstone.
    pub value: Option<(i16, Value)>,
}

/// Whether `record_type` is one `kafka_major`'s group coordinator knows (3.9 stops at the
/// consumer group records, 4.x adds share and streams groups).
fn known_type(record_type: i16, kafka_major: u8) -> bool {
    if kafka_major < 4 {
        (0..=8).contains(&record_type)
    } else {
        find(Family::Group, Kind::CoordinatorKey, record_type).is_some()
    }
}

/// Decodes a `__consumer_offsets` record's key and value.
pub fn decode(
    key: &[u8],
    value: Option<&[u8]>,
    kafka_major: u8,
) -> Result<GroupRecord, DecodeError> {
    let mut k = Reader::new(key);
    let record_type = k
        .i16()
        .map_err(|_| DecodeError::Other("Could not read version from key's buffer.".into()))?;
    if !known_type(record_type, kafka_major) {
        return Err(DecodeError::UnknownRecordType(record_type));
    }
    // 3.9 reads both offset commit types as OffsetCommitKey/Value; the layouts are the same.
    let key_spec = find(Family::Group, Kind::CoordinatorKey, record_type)
        .ok_or(DecodeError::UnknownRecordType(record_type))?;
    let key_json =
        read_message(key_spec, 0, &mut k).map_err(|e| read_error(record_type, "key", e))?;
    let Some(value) = value else {
        return Ok(GroupRecord {
            record_type,
            key: key_json,
            value: None,
        });
    };
    let value_spec = find(Family::Group, Kind::CoordinatorValue, record_type)
        .ok_or(DecodeError::UnknownRecordType(record_type))?;
    let value_spec = if kafka_major < 4 && record_type == LEGACY_OFFSET_COMMIT {
        find_by_name("OffsetCommitValue").expect("OffsetCommitValue")
    } else {
        value_spec
    };
    let mut v = Reader::new(value);
    let version = v
        .i16()
        .map_err(|_| DecodeError::Other("Could not read version from value's buffer.".into()))?;
    if kafka_major >= 4 && !value_spec.valid.contains(version) {
        return Err(DecodeError::Other(format!(
            "Found an unknown record version {version} for {record_type} type"
        )));
    }
    let mut value_json =
        read_message(value_spec, version, &mut v).map_err(|e| read_error(version, "value", e))?;
    if record_type == GROUP_METADATA {
        decode_consumer_protocol(&mut value_json);
    }
    Ok(GroupRecord {
        record_type,
        key: key_json,
        value: Some((version, value_json)),
    })
}

fn read_error(version: i16, what: &str, e: crate::error::Error) -> DecodeError {
    DecodeError::Other(format!(
        "Could not read record with version {version} from {what}'s buffer due to: {e}."
    ))
}

/// A classic group of the consumer protocol: each member's subscription and assignment bytes
/// replaced by the decoded `ConsumerProtocolSubscription`/`Assignment` (kept as bytes when they
/// do not decode, as Kafka's tool does).
fn decode_consumer_protocol(value: &mut Value) {
    if value.get("protocolType").and_then(Value::as_str) != Some("consumer") {
        return;
    }
    let Some(members) = value.get_mut("members").and_then(Value::as_array_mut) else {
        return;
    };
    for member in members {
        for (field, message) in [
            ("subscription", "ConsumerProtocolSubscription"),
            ("assignment", "ConsumerProtocolAssignment"),
        ] {
            let Some(Value::String(b64)) = member.get(field) else {
                continue;
            };
            use base64::Engine;
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64) else {
                continue;
            };
            let spec = find_by_name(message).expect("consumer protocol schema");
            let mut r = Reader::new(&bytes);
            let decoded = r
                .i16()
                .and_then(|version| read_message(spec, version, &mut r));
            if let Ok(decoded) = decoded {
                member[field] = decoded;
            }
        }
    }
}

/// `OffsetsMessageParser.parse`: the key and payload `DumpLogSegments --offsets-decoder` prints.
pub fn parse_for_dump(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    offset: i64,
    kafka_major: u8,
) -> crate::error::Result<ParsedRecord> {
    // Kafka's tool stops with this exception.
    let key = key.ok_or_else(|| missing_key_error(offset))?;
    Ok(match decode(key, value, kafka_major) {
        Ok(r) => coordinator_record_for_dump(r.record_type, r.key, r.value),
        Err(e) => error_record(e, offset),
    })
}

/// Kafka's tool prints a record it cannot decode as a key saying so, and no payload.
pub(crate) fn error_record(e: DecodeError, offset: i64) -> ParsedRecord {
    let text = match &e {
        DecodeError::UnknownRecordType(t) => {
            format!("Unknown record type {t} at offset {offset}, skipping.")
        }
        DecodeError::Other(m) => format!("Error at offset {offset}, skipping. {m}"),
    };
    ParsedRecord {
        key: Some(text.clone()),
        payload: None,
        key_json: json!({ "error": text }),
        payload_json: Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_commit(group: &str, topic: &str, partition: i32) -> Vec<u8> {
        let mut k = OFFSET_COMMIT.to_be_bytes().to_vec();
        for s in [group, topic] {
            k.extend_from_slice(&(s.len() as i16).to_be_bytes());
            k.extend_from_slice(s.as_bytes());
        }
        k.extend_from_slice(&partition.to_be_bytes());
        k
    }

    #[test]
    fn offset_commit_v3_and_tombstone() {
        let key = offset_commit("g", "t", 2);
        let mut v = 3i16.to_be_bytes().to_vec();
        v.extend_from_slice(&17i64.to_be_bytes());
        v.extend_from_slice(&5i32.to_be_bytes());
        v.extend_from_slice(&[0, 2, b'm', b'd']);
        v.extend_from_slice(&99i64.to_be_bytes());
        let p = parse_for_dump(Some(&key), Some(&v), 0, 4).unwrap();
        assert_eq!(
            p.key.as_deref(),
            Some(r#"{"type":"1","data":{"group":"g","topic":"t","partition":2}}"#)
        );
        assert_eq!(
            p.payload.as_deref(),
            Some(
                r#"{"version":"3","data":{"offset":17,"leaderEpoch":5,"metadata":"md","commitTimestamp":99}}"#
            )
        );
        let t = parse_for_dump(Some(&key), None, 0, 4).unwrap();
        assert_eq!(t.payload.as_deref(), Some("<DELETE>"));
        // Version 1 carries the expire timestamp and no leader epoch.
        let mut v1 = 1i16.to_be_bytes().to_vec();
        v1.extend_from_slice(&17i64.to_be_bytes());
        v1.extend_from_slice(&[0, 0]);
        v1.extend_from_slice(&99i64.to_be_bytes());
        v1.extend_from_slice(&(-1i64).to_be_bytes());
        let r = decode(&key, Some(&v1), 4).unwrap();
        assert_eq!(
            r.value.unwrap().1,
            json!({"offset":17,"metadata":"","commitTimestamp":99,"expireTimestamp":-1})
        );
    }

    #[test]
    fn unknown_types_and_damage_are_reported_in_place() {
        let p = parse_for_dump(Some(&42i16.to_be_bytes()), None, 7, 4).unwrap();
        assert_eq!(
            p.key.as_deref(),
            Some("Unknown record type 42 at offset 7, skipping.")
        );
        assert_eq!(p.payload, None);
        // Share group records are unknown to 3.9's tool.
        let p = parse_for_dump(Some(&[0, 10, 0, 0]), None, 8, 3).unwrap();
        assert_eq!(
            p.key.as_deref(),
            Some("Unknown record type 10 at offset 8, skipping.")
        );
        let key = offset_commit("g", "t", 0);
        let p = parse_for_dump(Some(&key), Some(&[0, 3, 1]), 9, 4).unwrap();
        assert!(p.key.unwrap().starts_with(
            "Error at offset 9, skipping. Could not read record with version 3 from value's buffer"
        ));
        assert!(parse_for_dump(None, None, 1, 4).is_err());
    }
}
