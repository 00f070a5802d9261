//! Zig-zag varints as Kafka's `ByteUtils` writes them (protobuf encoding). Decoding is bounded:
//! a varint longer than its type allows, or one running past the buffer, is a corruption error.

use crate::error::{Error, Result};

/// Decodes an unsigned LEB128 value of at most `MAX_BYTES` (5 or 10) bytes from `buf[*pos..]`;
/// `None` when it runs past the buffer, is too long, or (5 bytes) exceeds 32 bits. Kept free of
/// `Error` so the hot path stays in registers. One- and two-byte values (record lengths, deltas
/// and sizes of most records) take a straight path; longer ones a call that takes the position
/// by value, so `pos` is never spilled to memory for it.
#[inline(always)]
fn decode_unsigned<const MAX_BYTES: usize>(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let p = *pos;
    let b0 = *buf.get(p)?;
    if b0 < 0x80 {
        *pos = p + 1;
        return Some(u64::from(b0));
    }
    let b1 = *buf.get(p + 1)?;
    if b1 < 0x80 {
        *pos = p + 2;
        return Some(u64::from(b0 & 0x7f) | (u64::from(b1) << 7));
    }
    let (value, len) = decode_unsigned_long::<MAX_BYTES>(buf, p)?;
    *pos = p + len;
    Some(value)
}

/// [`decode_unsigned`] without bounds checks on its first two bytes, for a decoder that knows
/// the buffer holds them (longer values go through the checked [`decode_unsigned_long`]).
/// Saves a compare and branch per byte on the decode loop, where most varints are one or two
/// bytes.
///
/// # Safety
/// `*pos + UNCHECKED_VARINT_BYTES <= buf.len()`.
#[inline(always)]
unsafe fn decode_unsigned_unchecked<const MAX_BYTES: usize>(
    buf: &[u8],
    pos: &mut usize,
) -> Option<u64> {
    let p = *pos;
    debug_assert!(p + UNCHECKED_VARINT_BYTES <= buf.len());
    // SAFETY: `p + 1 < p + UNCHECKED_VARINT_BYTES <= buf.len()` (the caller's promise).
    let (b0, b1) = unsafe { (*buf.get_unchecked(p), *buf.get_unchecked(p + 1)) };
    if b0 < 0x80 {
        *pos = p + 1;
        return Some(u64::from(b0));
    }
    if b1 < 0x80 {
        *pos = p + 2;
        return Some(u64::from(b0 & 0x7f) | (u64::from(b1) << 7));
    }
    let (value, len) = decode_unsigned_long::<MAX_BYTES>(buf, p)?;
    *pos = p + len;
    Some(value)
}

/// Bytes the `*_unchecked` decoders read without a bounds check: a varint's first two.
pub(crate) const UNCHECKED_VARINT_BYTES: usize = 2;

/// [`decode_varint`] where `buf` holds [`UNCHECKED_VARINT_BYTES`] bytes from `*pos`.
///
/// # Safety
/// `*pos + UNCHECKED_VARINT_BYTES <= buf.len()`.
#[inline(always)]
pub(crate) unsafe fn decode_varint_unchecked(buf: &[u8], pos: &mut usize) -> Option<i32> {
    // SAFETY: the caller's promise, passed on.
    let raw = unsafe { decode_unsigned_unchecked::<5>(buf, pos) }? as u32;
    Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// [`decode_varint_length`] where `buf` holds [`UNCHECKED_VARINT_BYTES`] bytes from `*pos`.
///
/// # Safety
/// `*pos + UNCHECKED_VARINT_BYTES <= buf.len()`.
#[inline(always)]
pub(crate) unsafe fn decode_varint_length_unchecked(
    buf: &[u8],
    pos: &mut usize,
) -> Option<std::result::Result<usize, i32>> {
    // SAFETY: the caller's promise, passed on.
    let raw = unsafe { decode_unsigned_unchecked::<5>(buf, pos) }?;
    Some(if raw & 1 == 0 {
        Ok((raw >> 1) as usize)
    } else {
        Err(-((raw >> 1) as i64) as i32 - 1)
    })
}

/// [`decode_varlong`] where `buf` holds [`UNCHECKED_VARINT_BYTES`] bytes from `*pos`.
///
/// # Safety
/// `*pos + UNCHECKED_VARINT_BYTES <= buf.len()`.
#[inline(always)]
pub(crate) unsafe fn decode_varlong_unchecked(buf: &[u8], pos: &mut usize) -> Option<i64> {
    // SAFETY: the caller's promise, passed on.
    let raw = unsafe { decode_unsigned_unchecked::<10>(buf, pos) }?;
    Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// [`decode_unsigned`] of a value of three bytes or more at `start`: the value and its length.
#[inline(never)]
fn decode_unsigned_long<const MAX_BYTES: usize>(buf: &[u8], start: usize) -> Option<(u64, usize)> {
    let rest = buf.get(start..)?;
    let mut value = 0u64;
    for (i, &byte) in rest.iter().take(MAX_BYTES).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (MAX_BYTES > 5 || value <= u64::from(u32::MAX)).then_some((value, i + 1));
        }
    }
    None
}

#[cold]
#[inline(never)]
fn varint_error(pos: usize, max_bytes: usize) -> Error {
    Error::corrupt(format!("invalid varint at {pos}: runs past the end of the buffer or is longer than {max_bytes} bytes"))
}

/// Kafka's `readVarint`: a zig-zag encoded i32 in at most 5 bytes. On error `pos` is unchanged.
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32> {
    let start = *pos;
    decode_varint(buf, pos).ok_or_else(|| varint_error(start, 5))
}

/// [`read_varint`] of a length field: `Ok(Ok(len))` when it is zero or more, `Ok(Err(value))`
/// when negative. The sign is the zig-zag encoding's low bit, so a length is one shift from its
/// bytes instead of the full decode: a record's fields each wait on the length before them.
#[inline(always)]
pub fn read_varint_length(buf: &[u8], pos: &mut usize) -> Result<std::result::Result<usize, i32>> {
    let start = *pos;
    decode_varint_length(buf, pos).ok_or_else(|| varint_error(start, 5))
}

/// Kafka's `readVarlong`: a zig-zag encoded i64 in at most 10 bytes.
#[inline(always)]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64> {
    let start = *pos;
    decode_varlong(buf, pos).ok_or_else(|| varint_error(start, 10))
}

/// [`read_varint`] without the error, for decoders that say what failed elsewhere.
#[inline(always)]
pub(crate) fn decode_varint(buf: &[u8], pos: &mut usize) -> Option<i32> {
    let raw = decode_unsigned::<5>(buf, pos)? as u32;
    Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// [`read_varint_length`] without the error.
#[inline(always)]
pub(crate) fn decode_varint_length(
    buf: &[u8],
    pos: &mut usize,
) -> Option<std::result::Result<usize, i32>> {
    let raw = decode_unsigned::<5>(buf, pos)?;
    Some(if raw & 1 == 0 {
        Ok((raw >> 1) as usize)
    } else {
        Err(-((raw >> 1) as i64) as i32 - 1)
    })
}

/// [`read_varlong`] without the error.
#[inline(always)]
pub(crate) fn decode_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let raw = decode_unsigned::<10>(buf, pos)?;
    Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
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
    fn lengths_read_as_varints_do() {
        for v in [0, 1, -1, 63, -64, 64, 300, -300, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            let mut pos = 0;
            let expected = if v < 0 { Err(v) } else { Ok(v as usize) };
            assert_eq!(read_varint_length(&out, &mut pos).unwrap(), expected, "{v}");
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert!(read_varint_length(&[0x80, 0x80], &mut pos).is_err());
        assert_eq!(pos, 0);
    }

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
        // Five bytes carry 35 bits: past 32 is refused, and a refused varint leaves `pos` as it was.
        let mut pos = 1;
        assert!(read_varint(&[0, 0xff, 0xff, 0xff, 0xff, 0x1f], &mut pos).is_err());
        assert_eq!(pos, 1);
        assert_eq!(
            read_varint(&[0, 0xff, 0xff, 0xff, 0xff, 0x0f], &mut pos).unwrap(),
            i32::MIN
        );
        assert_eq!(pos, 6);
    }

    /// Kafka's `ByteUtils.readVarlong` rule, byte by byte, as the reference: every 1-, 2- and
    /// 3-byte input, at every offset, gives the same value, position and failure.
    #[test]
    fn fast_paths_decode_as_the_byte_by_byte_rule() {
        fn reference(buf: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
            let mut value = 0u64;
            for i in 0..max_bytes {
                let byte = *buf.get(i)?;
                value |= u64::from(byte & 0x7f) << (7 * i);
                if byte & 0x80 == 0 {
                    return Some((value, i + 1));
                }
            }
            None
        }
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for a in 0..=255u8 {
            inputs.push(vec![a]);
            for b in 0..=255u8 {
                inputs.push(vec![a, b]);
            }
        }
        for a in (0..=255u8).step_by(7) {
            for b in (0..=255u8).step_by(5) {
                for c in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                    inputs.push(vec![a, b, c]);
                    inputs.push(vec![0x33, a, b, c]);
                }
            }
        }
        for input in &inputs {
            for start in 0..input.len() {
                for max_bytes in [5, 10] {
                    let mut pos = start;
                    let got = if max_bytes == 5 {
                        decode_unsigned::<5>(input, &mut pos)
                    } else {
                        decode_unsigned::<10>(input, &mut pos)
                    };
                    let want = reference(&input[start..], max_bytes);
                    assert_eq!(
                        got.map(|v| (v, pos - start)),
                        want,
                        "{input:02x?} at {start}"
                    );
                }
            }
        }
    }
}
