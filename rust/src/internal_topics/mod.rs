//! Kafka's internal topics decoded: `__consumer_offsets` (the group coordinator's records),
//! `__transaction_state` (the transaction coordinator's), `__share_group_state` (the share
//! coordinator's, 4.x) and the KRaft `__cluster_metadata` log,
//! as Kafka's `DumpLogSegments` decoders print them; and a broker's committed offsets, as its
//! group coordinator would answer ListConsumerGroupOffsets after loading them.

pub mod cluster_metadata;
pub mod committed_offsets;
pub mod group_metadata;
pub mod message;
#[rustfmt::skip]
mod schemas;
pub mod share_group_state;
pub mod transaction_log;

/// How a record that cannot be decoded is reported: Kafka's tool prints these in place of the
/// record's key (or payload) and goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A key whose record type this release does not know.
    UnknownRecordType(i16),
    /// Anything else, with the message Kafka's exception would carry.
    Other(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::UnknownRecordType(t) => write!(f, "unknown record type {t}"),
            DecodeError::Other(m) => f.write_str(m),
        }
    }
}

impl From<crate::error::Error> for DecodeError {
    fn from(e: crate::error::Error) -> Self {
        DecodeError::Other(e.to_string())
    }
}

/// What `DumpLogSegments` prints for one record with a decoder: its `key: ` and `payload: `
/// parts (either may be absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRecord {
    pub key: Option<String>,
    pub payload: Option<String>,
    /// The same as JSON values, for `--json` output.
    pub key_json: serde_json::Value,
    pub payload_json: serde_json::Value,
}
