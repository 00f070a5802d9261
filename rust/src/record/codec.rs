//! Kafka's `CompressionType` and its codecs. (Interface fixed; implementation in progress.)

use crate::error::{Error, Result};

/// The codec id in the low 3 bits of a batch's (or legacy message's) attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    pub fn from_id(id: u8) -> Result<Self> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(Error::corrupt(format!("unknown compression codec id {other}"))),
        })
    }

    pub fn id(self) -> u8 {
        self as u8
    }

    /// Kafka's names: none, gzip, snappy, lz4, zstd.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "none" | "uncompressed" | "" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            other => return Err(Error::InvalidArgument(format!("unknown compression '{other}' (none, gzip, snappy, lz4, zstd)"))),
        })
    }
}

/// Compresses `data` as a Kafka producer would for `codec`: gzip stream, xerial-framed snappy
/// (what Java producers write), Kafka's LZ4 frame, zstd frame.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>> {
    let _ = (codec, data);
    todo!()
}

/// Decompresses at most `max_size` bytes; output past that is an error, never an allocation.
/// `magic` selects Kafka's v0 LZ4 quirk (a header checksum computed over the magic too).
pub fn decompress(codec: Compression, data: &[u8], max_size: usize, magic: u8) -> Result<Vec<u8>> {
    let _ = (codec, data, max_size, magic);
    todo!()
}
