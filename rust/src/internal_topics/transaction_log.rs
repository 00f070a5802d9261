//! `__transaction_state` records: Kafka's `TransactionLogKey`/`TransactionLogValue` (all
//! versions, tagged fields included) and what `DumpLogSegments --transaction-log-decoder` prints:
//! 4.x's `TransactionLogMessageParser` (coordinator-record JSON) and 3.9's
//! `TransactionLog.formatRecordKeyAndValue` (`transaction_metadata::transactionalId=...`).

use serde_json::{json, Value};

use super::group_metadata::error_record;
use super::message::{
    coordinator_record_for_dump, decode_coordinator_record, missing_key_error, Family, Reader,
};
use super::{DecodeError, ParsedRecord};

/// One decoded `__transaction_state` record.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnRecord {
    pub record_type: i16,
    pub transactional_id: String,
    pub key: Value,
    /// The value's version and message; `None` for a tombstone.
    pub value: Option<(i16, Value)>,
}

/// Kafka's `TransactionState` by id, as its `toString` names it.
pub fn transaction_state_name(id: i64) -> Option<&'static str> {
    Some(match id {
        0 => "Empty",
        1 => "Ongoing",
        2 => "PrepareCommit",
        3 => "PrepareAbort",
        4 => "CompleteCommit",
        5 => "CompleteAbort",
        6 => "Dead",
        7 => "PrepareEpochFence",
        _ => return None,
    })
}

pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<TxnRecord, DecodeError> {
    let (record_type, key, value) = decode_coordinator_record(Family::Txn, key, value)?;
    Ok(TxnRecord {
        record_type,
        transactional_id: key["transactionalId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        key,
        value,
    })
}

/// `TransactionLogMessageParser.parse` of `kafka_major`'s tool.
pub fn parse_for_dump(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    offset: i64,
    kafka_major: u8,
) -> crate::error::Result<ParsedRecord> {
    // Kafka's tool stops with this exception.
    let key = key.ok_or_else(|| missing_key_error(offset))?;
    if kafka_major < 4 {
        return parse_3x(key, value);
    }
    Ok(match decode(key, value) {
        Ok(r) => {
            let value = r.value.map(|(version, mut json)| {
                // 4.4's tool prints the state by name (`TransactionState.stateName`), an
                // unknown id as its number in a string.
                if let Some(status) = json.get_mut("transactionStatus") {
                    let id = status.as_i64().unwrap_or(-1);
                    *status = Value::String(
                        transaction_state_name(id).map_or_else(|| id.to_string(), str::to_string),
                    );
                }
                (version, json)
            });
            coordinator_record_for_dump(r.record_type, r.key, value)
        }
        Err(e) => error_record(e, offset),
    })
}

/// 3.9's text form; the 3.9 tool stops on a value it cannot read, so does this.
fn parse_3x(key: &[u8], value: Option<&[u8]>) -> crate::error::Result<ParsedRecord> {
    let mut k = Reader::new(key);
    let version = k.i16()?;
    if version != 0 {
        return Ok(ParsedRecord {
            key: Some(format!("unknown::version={version}")),
            payload: None,
            key_json: json!({ "unknownVersion": version }),
            payload_json: Value::Null,
        });
    }
    let r = decode(key, value).map_err(|e| crate::error::Error::corrupt(e.to_string()))?;
    let key_text = format!(
        "transaction_metadata::transactionalId={}",
        r.transactional_id
    );
    let payload = match &r.value {
        None => "<DELETE>".to_string(),
        Some((_, v)) => {
            let status = v["transactionStatus"].as_i64().unwrap_or(-1);
            let state = transaction_state_name(status).ok_or_else(|| {
                crate::error::Error::corrupt(format!(
                    "transaction log value with unknown transaction status {status}"
                ))
            })?;
            let partitions = if state == "Empty" {
                Vec::new()
            } else {
                scala_hash_set_order(&topic_partitions(v))
            };
            let partitions: Vec<String> =
                partitions.iter().map(|(t, p)| format!("{t}-{p}")).collect();
            format!(
                "producerId:{},producerEpoch:{},state={state},partitions=[{}],txnLastUpdateTimestamp={},txnTimeoutMs={}",
                v["producerId"],
                v["producerEpoch"],
                partitions.join(","),
                v["transactionLastUpdateTimestampMs"],
                v["transactionTimeoutMs"]
            )
        }
    };
    Ok(ParsedRecord {
        key: Some(key_text),
        payload: Some(payload),
        key_json: json!({"type": "0", "data": r.key}),
        payload_json: r
            .value
            .map(|(version, v)| json!({"version": version.to_string(), "data": v}))
            .unwrap_or(Value::Null),
    })
}

/// `(topic, partition)` per topic of a transaction value, in the order of the record.
pub fn topic_partitions(value: &Value) -> Vec<Vec<(String, i32)>> {
    let Some(topics) = value["transactionPartitions"].as_array() else {
        return Vec::new();
    };
    topics
        .iter()
        .map(|t| {
            let topic = t["topic"].as_str().unwrap_or_default().to_string();
            t["partitionIds"]
                .as_array()
                .map(|ids| {
                    ids.iter()
                        .map(|p| (topic.clone(), p.as_i64().unwrap_or(0) as i32))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// Java's `TopicPartition.hashCode`.
fn topic_partition_hash(topic: &str, partition: i32) -> i32 {
    let topic_hash = topic
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    31i32
        .wrapping_mul(31i32.wrapping_add(partition))
        .wrapping_add(topic_hash)
}

/// The iteration order of the `scala.collection.mutable.HashSet[TopicPartition]` 3.9's
/// `TransactionMetadata.addPartitions` fills, one `++=` per topic: buckets by the improved hash
/// masked by the table size, each bucket sorted by hash; the table grows on `add` past 3/4 full
/// and on `sizeHint` for a batch of more than 4 (Scala's `Set1`..`Set4` are added one by one).
fn scala_hash_set_order(batches: &[Vec<(String, i32)>]) -> Vec<(String, i32)> {
    let improve = |h: i32| h ^ ((h as u32) >> 16) as i32;
    let table_size_for = |cap: i64| -> usize {
        let c = (cap - 1).max(4) as u64;
        let highest = 1u64 << (63 - c.leading_zeros());
        (highest * 2).min(1 << 30) as usize
    };
    let mut len = 16usize;
    let mut elems: Vec<(i32, String, i32)> = Vec::new();
    for batch in batches {
        let mut unique: Vec<&(String, i32)> = Vec::new();
        for tp in batch {
            if !unique.contains(&tp) {
                unique.push(tp);
            }
        }
        let one_by_one = unique.len() <= 4;
        if !one_by_one {
            let target = table_size_for(((unique.len() as f64 + 1.0) / 0.75) as i64);
            len = len.max(target);
        }
        for (t, p) in unique {
            if elems.iter().any(|(_, et, ep)| et == t && ep == p) {
                continue;
            }
            if one_by_one && elems.len() + 1 >= (len as f64 * 0.75) as usize {
                len *= 2;
            }
            elems.push((improve(topic_partition_hash(t, *p)), t.clone(), *p));
        }
    }
    // Stable: equal hashes keep insertion order.
    elems.sort_by_key(|(h, _, _)| ((*h as u32 as usize) & (len - 1), *h));
    elems.into_iter().map(|(_, t, p)| (t, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> Vec<u8> {
        let mut k = vec![0, 0];
        k.extend_from_slice(&(id.len() as i16).to_be_bytes());
        k.extend_from_slice(id.as_bytes());
        k
    }

    /// A v1 (flexible) value: Ongoing over t-0 and t-1, with a tagged ClientTransactionVersion.
    fn value_v1() -> Vec<u8> {
        let mut v = 1i16.to_be_bytes().to_vec();
        v.extend_from_slice(&1000i64.to_be_bytes()); // producerId
        v.extend_from_slice(&3i16.to_be_bytes()); // producerEpoch
        v.extend_from_slice(&60000i32.to_be_bytes()); // timeout
        v.push(1); // Ongoing
        v.push(2); // one topic
        v.extend_from_slice(&[2, b't']);
        v.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 1]);
        v.push(0); // topic's tagged fields
        v.extend_from_slice(&5i64.to_be_bytes());
        v.extend_from_slice(&4i64.to_be_bytes());
        v.extend_from_slice(&[1, 2, 2, 0, 2]); // tag 2 = ClientTransactionVersion 2
        v
    }

    #[test]
    fn json_form_of_4x() {
        let p = parse_for_dump(Some(&key("tx")), Some(&value_v1()), 0, 4).unwrap();
        assert_eq!(
            p.key.as_deref(),
            Some(r#"{"type":"0","data":{"transactionalId":"tx"}}"#)
        );
        assert_eq!(
            p.payload.as_deref(),
            Some(concat!(
                r#"{"version":"1","data":{"producerId":1000,"producerEpoch":3,"transactionTimeoutMs":60000,"#,
                r#""transactionStatus":"Ongoing","transactionPartitions":[{"topic":"t","partitionIds":[0,1]}],"#,
                r#""transactionLastUpdateTimestampMs":5,"transactionStartTimestampMs":4,"clientTransactionVersion":2}}"#
            ))
        );
        // A status Kafka has no state for: its number, as a string (4.4's tool).
        let mut unknown = value_v1();
        unknown[16] = 9;
        let p = parse_for_dump(Some(&key("tx")), Some(&unknown), 0, 4).unwrap();
        assert!(
            p.payload
                .as_deref()
                .unwrap()
                .contains(r#""transactionStatus":"9","#),
            "{:?}",
            p.payload
        );
    }

    #[test]
    fn text_form_of_3x() {
        let p = parse_for_dump(Some(&key("tx")), Some(&value_v1()), 0, 3).unwrap();
        // Scala's HashSet order: t-1 (hash 1108, bucket 4) before t-0 (1077, bucket 5).
        assert_eq!(
            p.key.as_deref(),
            Some("transaction_metadata::transactionalId=tx")
        );
        assert_eq!(
            p.payload.as_deref(),
            Some("producerId:1000,producerEpoch:3,state=Ongoing,partitions=[t-1,t-0],txnLastUpdateTimestamp=5,txnTimeoutMs=60000")
        );
        let t = parse_for_dump(Some(&key("tx")), None, 0, 3).unwrap();
        assert_eq!(t.payload.as_deref(), Some("<DELETE>"));
    }
}
