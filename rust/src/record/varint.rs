//! Zig-zag varints as Kafka's `ByteUtils` writes them (protobuf encoding). Decoding is bounded:
//! a varint longer than its type allows, or one running past the buffer, is a corruption error.

use crate::error::{Error, Result};

/// Reads an unsigned LEB128 value of at most `max_bytes` bytes from `buf[*pos..]`.
#[inline]
fn read_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    for i in 0..max_bytes {
        let Some(&byte) = buf.get(*pos + i) else {
            return Err(Error::corrupt(format!(
                "varint runs past the end of the buffer at {}",
                *pos
            )));
        };
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            *pos += i + 1;
            return Ok(value);
        }
        shift += 7;
    }
    Err(Error::corrupt(format!(
        "varint longer than {max_bytes} bytes at {}",
        *pos
    )))
}

/// Kafka's `readVarint`: a zig-zag encoded i32 in at most 5 bytes.
#[inline]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32> {
    let raw = read_unsigned(buf, pos, 5)?;
    if raw > u64::from(u32::MAX) {
        return Err(Error::corrupt("varint does not fit in 32 bits"));
    }
    let raw = raw as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Kafka's `readVarlong`: a zig-zag encoded i64 in at most 10 bytes.
#[inline]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64> {
    let raw = read_unsigned(buf, pos, 10)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

#[inline]
fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

#[inline]
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Bytes `write_varint(value)` takes.
#[inline]
pub fn size_of_varint(value: i32) -> usize {
    let v = ((value << 1) ^ (value >> 31)) as u32;
    let bits = 32 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[inline]
pub fn size_of_varlong(value: i64) -> usize {
    let v = ((value << 1) ^ (value >> 63)) as u64;
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN, 300, -300] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out.len(), size_of_varint(v), "{v}");
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, out.len());
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            assert_eq!(out.len(), size_of_varlong(v));
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos).unwrap(), v);
        }
    }

    #[test]
    fn known_encodings() {
        // Zig-zag: 0->0, -1->1, 1->2, -2->3 (Kafka's ByteUtilsTest vectors).
        let mut out = Vec::new();
        write_varint(&mut out, -1);
        write_varint(&mut out, 1);
        write_varint(&mut out, 150);
        assert_eq!(out, vec![0x01, 0x02, 0xac, 0x02]);
    }

    #[test]
    fn rejects_truncated_and_overlong() {
        let mut pos = 0;
        assert!(read_varint(&[0x80, 0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varlong(&[0xff; 11], &mut pos).is_err());
    }
}
