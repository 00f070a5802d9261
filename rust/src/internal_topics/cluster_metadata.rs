//! KRaft `__cluster_metadata` records: Kafka's `MetadataRecordSerde` framing (frame version,
//! record type and version as unsigned varints, then the record) over the metadata record
//! definitions, and what `DumpLogSegments --cluster-metadata-decoder` prints
//! (`payload: {"type":"TOPIC_RECORD","version":0,"data":{...}}`). Control records (leader
//! changes, snapshot headers, voters) are the dump's own.

use serde_json::{json, Value};

use super::message::{find, read_message, to_jackson_string, Family, Kind, Reader};
use super::{DecodeError, ParsedRecord};

/// `ApiMessageAndVersion`'s frame version.
const FRAME_VERSION: u32 = 1;

/// One decoded metadata record.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataRecord {
    pub api_key: i16,
    /// `MetadataRecordType`'s name, e.g. `TOPIC_RECORD`.
    pub type_name: String,
    pub version: i16,
    pub data: Value,
}

/// Kafka's `MessageGenerator.toSnakeCase(name).toUpperCase()`.
fn enum_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut prev_capital = true;
    for c in name.chars() {
        if c.is_uppercase() {
            if !prev_capital {
                out.push('_');
            }
            prev_capital = true;
        } else {
            prev_capital = false;
        }
        out.extend(c.to_uppercase());
    }
    out
}

pub fn decode(value: &[u8]) -> Result<MetadataRecord, DecodeError> {
    let mut r = Reader::new(value);
    let short = |r: &mut Reader<'_>, what: &str| -> Result<i16, DecodeError> {
        let v = r.unsigned_varint()?;
        i16::try_from(v).map_err(|_| DecodeError::Other(format!("Value for {what} was too large.")))
    };
    let frame = r.unsigned_varint()?;
    if frame == 0 {
        return Err(DecodeError::Other("Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.".into()));
    } else if frame != FRAME_VERSION {
        return Err(DecodeError::Other(format!("Could not deserialize metadata record due to unknown frame version {frame}(only frame version {FRAME_VERSION} is supported)")));
    }
    let api_key = short(&mut r, "type")?;
    let version = short(&mut r, "version")?;
    let spec = find(Family::Metadata, Kind::Metadata, api_key)
        .ok_or_else(|| DecodeError::Other(format!("Unknown metadata id {api_key}")))?;
    let data = read_message(spec, version, &mut r).map_err(|e| {
        DecodeError::Other(format!(
            "Failed to deserialize record with type {api_key}: {e}"
        ))
    })?;
    if r.remaining() > 0 {
        return Err(DecodeError::Other(format!(
            "Found {} byte(s) of garbage after {api_key}",
            r.remaining()
        )));
    }
    Ok(MetadataRecord {
        api_key,
        type_name: enum_name(spec.name),
        version,
        data,
    })
}

/// `ClusterMetadataLogMessageParser.parse`: no key, the record as the payload.
pub fn parse_for_dump(value: Option<&[u8]>, offset: i64) -> ParsedRecord {
    let result = value
        .ok_or_else(|| DecodeError::Other("the record has no value".into()))
        .and_then(decode);
    let payload_json = match result {
        Ok(m) => json!({"type": m.type_name, "version": m.version, "data": m.data}),
        Err(e) => {
            let text = format!("Error at {offset}, skipping. {e}");
            return ParsedRecord {
                key: None,
                payload: Some(text.clone()),
                key_json: Value::Null,
                payload_json: json!({ "error": text }),
            };
        }
    };
    ParsedRecord {
        key: None,
        payload: Some(to_jackson_string(&payload_json)),
        key_json: Value::Null,
        payload_json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_record() {
        // frame 1, TopicRecord (2), version 0, name "t", topicId, no tags.
        let mut v = vec![1, 2, 0, 2, b't'];
        v.extend_from_slice(&[0u8; 15]);
        v.push(1);
        v.push(0);
        let p = parse_for_dump(Some(&v), 3);
        assert_eq!(
            p.payload.as_deref(),
            Some(
                r#"{"type":"TOPIC_RECORD","version":0,"data":{"name":"t","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}"#
            )
        );
        assert_eq!(
            enum_name("ZkMigrationStateRecord"),
            "ZK_MIGRATION_STATE_RECORD"
        );
        let bad = parse_for_dump(Some(&[1, 2, 0, 9]), 4);
        assert!(bad
            .payload
            .unwrap()
            .starts_with("Error at 4, skipping. Failed to deserialize record with type 2"));
        let garbage = [v.clone(), vec![0]].concat();
        assert_eq!(
            parse_for_dump(Some(&garbage), 5).payload.as_deref(),
            Some("Error at 5, skipping. Found 1 byte(s) of garbage after 2")
        );
    }
}
