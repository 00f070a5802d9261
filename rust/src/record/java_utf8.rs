//! Java's `new String(bytes, UTF_8)`: how Kafka's Java code turns bytes that should be UTF-8
//! (header keys, string payloads in the dump tool) into text, never failing on bad bytes.

use std::borrow::Cow;

/// `new String(bytes, UTF_8)` as Java decodes it: valid UTF-8 as is; each malformed sequence one
/// U+FFFD. Java's idea of one malformed sequence differs from Rust's `from_utf8_lossy` (an
/// encoded surrogate is one replacement, not three), so printed payloads follow Java's rules.
#[inline]
pub fn java_utf8_lossy(bytes: &[u8]) -> Cow<'_, str> {
    // Header keys are ASCII names almost always: a word-at-a-time check instead of UTF-8
    // validation's byte-by-byte state machine, which took a fifth of a read of records with
    // three headers each (perf).
    if bytes.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    java_utf8_lossy_slow(bytes)
}

/// [`java_utf8_lossy`] of bytes that are not all ASCII.
#[inline(never)]
fn java_utf8_lossy_slow(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(s);
    }
    const REPL: char = '\u{FFFD}';
    let cont = |b: u8| b & 0xc0 == 0x80;
    let mut out = String::with_capacity(bytes.len() + 8);
    let (mut sp, sl) = (0usize, bytes.len());
    while sp < sl {
        let b1 = bytes[sp];
        sp += 1;
        if b1 < 0x80 {
            out.push(b1 as char);
        } else if b1 & 0xe0 == 0xc0 && b1 & 0x1e != 0 {
            // Two bytes, C2..DF.
            if sp < sl {
                let b2 = bytes[sp];
                if !cont(b2) {
                    out.push(REPL);
                } else {
                    sp += 1;
                    let c = (u32::from(b1 & 0x1f) << 6) | u32::from(b2 & 0x3f);
                    out.push(char::from_u32(c).unwrap_or(REPL));
                }
                continue;
            }
            out.push(REPL);
            break;
        } else if b1 & 0xf0 == 0xe0 {
            // Three bytes.
            let overlong = |b2: u8| b1 == 0xe0 && b2 & 0xe0 == 0x80;
            if sp + 1 < sl {
                let (b2, b3) = (bytes[sp], bytes[sp + 1]);
                if overlong(b2) || !cont(b2) || !cont(b3) {
                    out.push(REPL);
                    // Java's malformed3: skip the lead alone, or the lead and its one good byte.
                    sp += if overlong(b2) || !cont(b2) { 0 } else { 1 };
                } else {
                    sp += 2;
                    let c = (u32::from(b1 & 0x0f) << 12)
                        | (u32::from(b2 & 0x3f) << 6)
                        | u32::from(b3 & 0x3f);
                    // An encoded surrogate is one malformed sequence of three bytes.
                    out.push(char::from_u32(c).unwrap_or(REPL));
                }
                continue;
            }
            if sp < sl && (overlong(bytes[sp]) || !cont(bytes[sp])) {
                out.push(REPL);
                continue;
            }
            out.push(REPL);
            break;
        } else if b1 & 0xf8 == 0xf0 {
            // Four bytes.
            let bad_second = |b2: u8| {
                b1 > 0xf4
                    || (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2))
                    || (b1 == 0xf4 && b2 & 0xf0 != 0x80)
                    || !cont(b2)
            };
            if sp + 2 < sl {
                let (b2, b3, b4) = (bytes[sp], bytes[sp + 1], bytes[sp + 2]);
                let c = (u32::from(b1 & 0x07) << 18)
                    | (u32::from(b2 & 0x3f) << 12)
                    | (u32::from(b3 & 0x3f) << 6)
                    | u32::from(b4 & 0x3f);
                if !cont(b2) || !cont(b3) || !cont(b4) || !(0x10000..=0x10ffff).contains(&c) {
                    out.push(REPL);
                    // Java's malformed4: how many bytes of the bad sequence to skip.
                    sp += if bad_second(b2) {
                        0
                    } else if !cont(b3) {
                        1
                    } else {
                        2
                    };
                } else {
                    sp += 3;
                    out.push(char::from_u32(c).unwrap_or(REPL));
                }
                continue;
            }
            if b1 > 0xf4 || (sp < sl && bad_second(bytes[sp])) {
                out.push(REPL);
                continue;
            }
            sp += 1;
            out.push(REPL);
            if sp < sl && !cont(bytes[sp]) {
                continue;
            }
            break;
        } else {
            out.push(REPL);
        }
    }
    Cow::Owned(out)
}
