//! Legacy message sets, magic v0 and v1. Placeholder until the real reader lands.
use crate::error::{Error, Result};
use crate::record::codec::Compression;
use crate::record::record::{Record, TimestampType};

#[derive(Debug, Clone)]
pub struct LegacyEntry<'a> {
    pub offset: i64,
    pub crc: u32,
    pub magic: u8,
    pub attributes: u8,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub size_in_bytes: usize,
}
impl LegacyEntry<'_> {
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id(self.attributes & 7)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        TimestampType::CreateTime
    }
}
pub fn parse_entry(_buf: &[u8]) -> Result<LegacyEntry<'_>> {
    Err(Error::Unsupported("legacy".into()))
}
pub fn deep_records<'a>(_e: &LegacyEntry<'a>, _s: &'a mut Vec<u8>, _m: usize) -> Result<Vec<Record<'a>>> {
    Err(Error::Unsupported("legacy".into()))
}
pub fn build_message_set(_m: u8, _b: i64, _r: &[(i64, Option<&[u8]>, Option<&[u8]>)], _c: Compression, _t: TimestampType) -> Result<Vec<u8>> {
    Err(Error::Unsupported("legacy".into()))
}
