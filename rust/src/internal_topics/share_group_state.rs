//! `__share_group_state` records (Kafka 4.x): the share coordinator's `ShareSnapshotKey/Value`
//! and `ShareUpdateKey/Value`, as `DumpLogSegments --share-group-state-decoder` prints them
//! (`ShareGroupStateMessageParser`, a coordinator-record parser like the other 4.x ones).

use super::group_metadata::error_record;
use super::message::{
    coordinator_record_for_dump, decode_coordinator_record, missing_key_error, Family,
};
use super::ParsedRecord;

/// The share coordinator's record types (`CoordinatorRecordType` of its serde).
pub const SHARE_SNAPSHOT: i16 = 0;
pub const SHARE_UPDATE: i16 = 1;

/// `ShareGroupStateMessageParser.parse`: a record without a key stops the tool; one it cannot
/// decode prints as a key saying so.
pub fn parse_for_dump(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    offset: i64,
) -> crate::error::Result<ParsedRecord> {
    let key = key.ok_or_else(|| missing_key_error(offset))?;
    Ok(match decode_coordinator_record(Family::Share, key, value) {
        Ok((record_type, key, value)) => coordinator_record_for_dump(record_type, key, value),
        Err(e) => error_record(e, offset),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(record_type: i16) -> Vec<u8> {
        let mut k = record_type.to_be_bytes().to_vec();
        k.extend_from_slice(&2i16.to_be_bytes());
        k.extend_from_slice(b"sg");
        k.extend_from_slice(&[7u8; 16]); // topic id
        k.extend_from_slice(&3i32.to_be_bytes());
        k
    }

    #[test]
    fn snapshots_and_updates_print_as_coordinator_records() {
        // ShareUpdateValue v0 (flexible): snapshot epoch, leader epoch, start offset, one state
        // batch (compact array), tagged fields: DeliveryCompleteCount (tag 0) = 5.
        let mut v = 0i16.to_be_bytes().to_vec();
        v.extend_from_slice(&1i32.to_be_bytes());
        v.extend_from_slice(&4i32.to_be_bytes());
        v.extend_from_slice(&10i64.to_be_bytes());
        v.push(2); // one batch
        v.extend_from_slice(&10i64.to_be_bytes());
        v.extend_from_slice(&12i64.to_be_bytes());
        v.push(2); // Acked
        v.extend_from_slice(&1i16.to_be_bytes());
        v.push(0); // the batch's tagged fields
        v.extend_from_slice(&[1, 0, 4]); // one tagged field: tag 0, 4 bytes
        v.extend_from_slice(&5i32.to_be_bytes());
        let r = parse_for_dump(Some(&key(SHARE_UPDATE)), Some(&v), 9).unwrap();
        assert_eq!(
            r.key.unwrap(),
            r#"{"type":"1","data":{"groupId":"sg","topicId":"BwcHBwcHBwcHBwcHBwcHBw","partition":3}}"#
        );
        assert_eq!(
            r.payload.unwrap(),
            r#"{"version":"0","data":{"snapshotEpoch":1,"leaderEpoch":4,"startOffset":10,"deliveryCompleteCount":5,"stateBatches":[{"firstOffset":10,"lastOffset":12,"deliveryState":2,"deliveryCount":1}]}}"#
        );
        let tombstone = parse_for_dump(Some(&key(SHARE_SNAPSHOT)), None, 9).unwrap();
        assert_eq!(tombstone.payload.unwrap(), "<DELETE>");
        let unknown = parse_for_dump(Some(&key(9)), None, 9).unwrap();
        assert_eq!(
            unknown.key.unwrap(),
            "Unknown record type 9 at offset 9, skipping."
        );
        assert!(parse_for_dump(None, Some(&v), 9).is_err());
    }
}
