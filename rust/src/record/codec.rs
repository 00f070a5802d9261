//! Kafka's `CompressionType` and its codecs, mirroring Kafka's `Compression` classes,
//! `KafkaLZ4BlockOutputStream`/`KafkaLZ4BlockInputStream` and xerial's `SnappyOutputStream`/
//! `SnappyInputStream` framing. The codecs come from crates; only Kafka's framing is written here.

use std::io::{Read, Write};

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
            other => {
                return Err(Error::corrupt(format!(
                    "unknown compression codec id {other}"
                )))
            }
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
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown compression '{other}' (none, gzip, snappy, lz4, zstd)"
                )))
            }
        })
    }
}

/// Kafka's default zstd level (`ZstdCompression.DEFAULT_LEVEL`).
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

/// xerial snappy-java stream header: magic, then version and compatible version (i32 BE, both 1).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_VERSION: i32 = 1;
/// `SnappyOutputStream`'s default block size, which Kafka's `SnappyFactory` uses.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;
/// FLG as Kafka writes it: version 01, independent blocks, no checksums, no content size.
const LZ4_KAFKA_FLG: u8 = 0x60;
/// BD as Kafka writes it: 64 KiB maximum block size.
const LZ4_KAFKA_BD: u8 = 0x40;
const LZ4_KAFKA_BLOCK_SIZE: usize = 64 * 1024;
const LZ4_FLG_VERSION_MASK: u8 = 0xC0;
const LZ4_FLG_VERSION_01: u8 = 0x40;
const LZ4_FLG_INDEPENDENT: u8 = 0x20;
const LZ4_FLG_BLOCK_CHECKSUM: u8 = 0x10;
const LZ4_FLG_CONTENT_SIZE: u8 = 0x08;
const LZ4_FLG_CONTENT_CHECKSUM: u8 = 0x04;
const LZ4_FLG_RESERVED: u8 = 0x02;
const LZ4_FLG_DICT_ID: u8 = 0x01;
const LZ4_BD_RESERVED: u8 = 0x8F;
const LZ4_STORED_BLOCK_BIT: u32 = 0x8000_0000;
/// Linked blocks may reference this much of the previous output.
const LZ4_WINDOW: usize = 64 * 1024;

/// Compresses `data` as a Kafka producer would for `codec`: gzip stream, xerial-framed snappy
/// (what Java producers write), Kafka's LZ4 frame, zstd frame. Same as
/// [`compress_for_magic`] with the current magic (2).
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>> {
    compress_for_magic(codec, data, 2)
}

/// [`compress`] at a level of Kafka's `compression.<codec>.level` (`None`: the codec's Kafka
/// default): gzip 1 to 9 (-1 its default, 6), zstd zstd's levels; snappy has none, and lz4 is
/// written by LZ4's fast compressor whatever the level (Kafka's above its default 9 is LZ4 HC).
pub fn compress_at_level(codec: Compression, data: &[u8], level: Option<i32>) -> Result<Vec<u8>> {
    match (codec, level) {
        (Compression::Gzip, Some(level @ 1..=9)) => {
            gzip_compress(data, flate2::Compression::new(level as u32))
        }
        (Compression::Zstd, Some(level)) => zstd::stream::encode_all(data, level)
            .map_err(|e| Error::InvalidArgument(format!("zstd compression failed: {e}"))),
        _ => compress(codec, data),
    }
}

/// Like Kafka's `wrapForOutput(buffer, magic)`: identical to [`compress`] except that for
/// magic 0 the LZ4 frame gets the broken header checksum Kafka has always written for v0.
pub fn compress_for_magic(codec: Compression, data: &[u8], magic: u8) -> Result<Vec<u8>> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => gzip_compress(data, flate2::Compression::default()),
        Compression::Snappy => Ok(xerial_snappy_compress(data)),
        Compression::Lz4 => Ok(lz4_kafka_compress(data, magic == 0)),
        Compression::Zstd => zstd::stream::encode_all(data, ZSTD_DEFAULT_LEVEL)
            .map_err(|e| Error::InvalidArgument(format!("zstd compression failed: {e}"))),
    }
}

/// Decompresses at most `max_size` bytes; output past that is an error, never an allocation.
/// `magic` selects Kafka's v0 LZ4 quirk (a header checksum computed over the magic too).
pub fn decompress(codec: Compression, data: &[u8], max_size: usize, magic: u8) -> Result<Vec<u8>> {
    if codec != Compression::None && data.is_empty() {
        // No codec's stream is empty (gzip/zstd/lz4 all have headers); Kafka fails here too.
        return Err(Error::corrupt(format!("empty {} payload", codec.name())));
    }
    match codec {
        Compression::None => {
            if data.len() > max_size {
                return Err(exceeds(codec, max_size));
            }
            Ok(data.to_vec())
        }
        // Multi-member, like Java's GZIPInputStream, which reads concatenated members.
        Compression::Gzip => read_bounded(
            codec,
            flate2::read::MultiGzDecoder::new(data),
            max_size,
            data.len(),
        ),
        Compression::Snappy => snappy_decompress(data, max_size),
        Compression::Lz4 => lz4_decompress(data, max_size, magic),
        Compression::Zstd => zstd_decompress(data, max_size),
    }
}

/// Decompresses zstd frames (one or several, one after another) through this
/// thread's decompression context, kept from batch to batch: a context made per batch, with the
/// window buffer a streamed frame needs, took about 9 us, most of the read of a batch of one
/// small record. A frame that states its size decodes in one pass into a buffer of that size.
fn zstd_decompress(data: &[u8], max_size: usize) -> Result<Vec<u8>> {
    use std::cell::RefCell;
    use zstd::zstd_safe::DCtx;
    thread_local! {
        static CONTEXT: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
    }
    /// A context grown past this (a frame asking for a large window) is not kept for the next.
    const KEEP_CONTEXT_BYTES: usize = 8 << 20;
    CONTEXT.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return zstd_frames_into(&mut DCtx::create(), data, max_size);
        };
        let context = slot.get_or_insert_with(DCtx::create);
        let out = zstd_frames_into(context, data, max_size);
        if context.sizeof() > KEEP_CONTEXT_BYTES {
            *slot = None;
        }
        out
    })
}

/// [`zstd_decompress`] with `context`: output grows as it comes, never past `max_size + 1`.
fn zstd_frames_into(
    context: &mut zstd::zstd_safe::DCtx<'_>,
    data: &[u8],
    max_size: usize,
) -> Result<Vec<u8>> {
    use zstd::zstd_safe::{get_error_name, InBuffer, OutBuffer, ResetDirective};
    let failed = |code: usize| codec_error(Compression::Zstd, get_error_name(code));
    context.reset(ResetDirective::SessionOnly).map_err(failed)?;
    let stated = zstd::zstd_safe::get_frame_content_size(data)
        .ok()
        .flatten()
        .and_then(|n| usize::try_from(n).ok());
    let budget = max_size.saturating_add(1);
    let first = match stated {
        Some(n) => n.max(1).min(budget),
        None => data.len().saturating_mul(4).min(budget),
    };
    let mut out: Vec<u8> = Vec::new();
    reserve_output(&mut out, first)?;
    let mut input = InBuffer::around(data);
    loop {
        if out.len() == out.capacity() {
            if out.len() >= budget {
                return Err(exceeds(Compression::Zstd, max_size));
            }
            let more = out.capacity().max(64 << 10).min(budget - out.len());
            reserve_output(&mut out, more)?;
        }
        let (before_in, before_out) = (input.pos(), out.len());
        let left = {
            let mut output = OutBuffer::around_pos(&mut out, before_out);
            context
                .decompress_stream(&mut output, &mut input)
                .map_err(failed)?
        };
        let consumed_all = input.pos() == data.len();
        if left == 0 && consumed_all {
            break;
        }
        let room_left = out.len() < out.capacity();
        if consumed_all && room_left && left != 0 {
            return Err(codec_error(Compression::Zstd, "incomplete frame"));
        }
        if input.pos() == before_in && out.len() == before_out && room_left {
            return Err(codec_error(
                Compression::Zstd,
                "the decoder made no progress",
            ));
        }
    }
    if out.len() > max_size {
        return Err(exceeds(Compression::Zstd, max_size));
    }
    Ok(out)
}

fn exceeds(codec: Compression, max_size: usize) -> Error {
    Error::corrupt(format!(
        "{} batch decompresses to more than {max_size} bytes, the limit set against \
         decompression bombs; if the batch is genuine, raise the log config '{}' (or the \
         max_decompressed_bytes argument of a function decoding batches held in memory)",
        codec.name(),
        crate::config::MAX_DECOMPRESSED_BATCH_BYTES
    ))
}

fn codec_error(codec: Compression, e: impl std::fmt::Display) -> Error {
    let message = e.to_string();
    // zstd's own allocations failing: memory ran out, the data is not at fault.
    if message.starts_with("Allocation error") {
        return Error::out_of_memory(None, format!("{} decompression: {message}", codec.name()));
    }
    Error::corrupt(format!("invalid {} data: {message}", codec.name()))
}

/// Room for `additional` more bytes of decompressed output, or an out-of-memory error: a batch
/// may inflate to hundreds of MiB (under the bomb limit), which a process short of memory may
/// not have; Rust's infallible growth would abort it.
fn reserve_output(out: &mut Vec<u8>, additional: usize) -> Result<()> {
    out.try_reserve_exact(additional).map_err(|_| {
        Error::out_of_memory(
            None,
            format!(
                "no memory for {} more bytes of a decompressed batch ({} so far)",
                additional,
                out.len()
            ),
        )
    })
}

/// Reads a decoder to its end, but never more than `max_size + 1` bytes, so a decompression
/// bomb costs at most `max_size` of memory. Room for a few times the `compressed` length up
/// front: grown from empty, the output was copied at every doubling.
fn read_bounded(
    codec: Compression,
    reader: impl Read,
    max_size: usize,
    compressed: usize,
) -> Result<Vec<u8>> {
    let budget = max_size.saturating_add(1);
    let mut out = Vec::new();
    reserve_output(&mut out, compressed.saturating_mul(4).min(budget))?;
    let mut reader = reader.take(budget as u64);
    loop {
        // Grown here, fallibly; `read_to_end` grows past it infallibly.
        if out.len() == out.capacity() && out.len() < budget {
            let more = out.len().max(64 << 10).min(budget - out.len());
            reserve_output(&mut out, more)?;
        }
        let room = (out.capacity() - out.len()) as u64;
        (&mut reader)
            .take(room)
            .read_to_end(&mut out)
            .map_err(|e| codec_error(codec, e))?;
        // Room left over: the decoder ended (or the budget did).
        if out.len() < out.capacity() || out.len() >= budget {
            break;
        }
    }
    if out.len() > max_size {
        return Err(exceeds(codec, max_size));
    }
    Ok(out)
}

// ---- gzip ----

fn gzip_compress(data: &[u8], level: flate2::Compression) -> Result<Vec<u8>> {
    // OS byte 0 and mtime 0, as Java's GZIPOutputStream writes the header; default level 6 is
    // Java's Deflater.DEFAULT_COMPRESSION, which Kafka uses unless configured.
    let mut enc = flate2::GzBuilder::new()
        .operating_system(0)
        .write(Vec::with_capacity(data.len() / 2 + 32), level);
    enc.write_all(data)
        .and_then(|_| enc.finish())
        .map_err(|e| Error::InvalidArgument(format!("gzip compression failed: {e}")))
}

// ---- snappy (xerial framing) ----

fn xerial_snappy_compress(data: &[u8]) -> Vec<u8> {
    let chunks = data.len().div_ceil(XERIAL_BLOCK_SIZE);
    let mut out = Vec::with_capacity(
        XERIAL_HEADER_LEN
            + chunks * (4 + snap::raw::max_compress_len(XERIAL_BLOCK_SIZE.min(data.len()))),
    );
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK_SIZE) {
        let len_pos = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(chunk.len()), 0);
        // Only fails for inputs over 4 GiB; a 32 KiB chunk is never one.
        let n = encoder
            .compress(chunk, &mut out[start..])
            .expect("32 KiB snappy chunk compresses");
        out.truncate(start + n);
        out[len_pos..start].copy_from_slice(&(n as u32).to_be_bytes());
    }
    out
}

/// Snappy as Java's `SnappyInputStream` reads it: xerial-framed when the stream starts with the
/// full 16-byte xerial header, otherwise one raw snappy block (what non-Java clients write).
fn snappy_decompress(data: &[u8], max_size: usize) -> Result<Vec<u8>> {
    if data.len() < XERIAL_HEADER_LEN || data[..XERIAL_MAGIC.len()] != XERIAL_MAGIC {
        let mut out = Vec::new();
        snappy_block_into(data, &mut out, max_size)?;
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        if data.len() - pos >= XERIAL_HEADER_LEN
            && data[pos..pos + XERIAL_MAGIC.len()] == XERIAL_MAGIC
        {
            // A header (first, or of a concatenated stream, which snappy-java also accepts).
            let version = i32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap());
            if version < XERIAL_VERSION {
                return Err(Error::corrupt(format!(
                    "xerial snappy stream has unsupported version {version}"
                )));
            }
            pos += XERIAL_HEADER_LEN;
            continue;
        }
        let Some(len_bytes) = data.get(pos..pos + 4) else {
            return Err(Error::corrupt(format!(
                "xerial snappy stream truncated in a chunk length at byte {pos}"
            )));
        };
        let chunk_len = i32::from_be_bytes(len_bytes.try_into().unwrap());
        pos += 4;
        if chunk_len < 0 || chunk_len as usize > data.len() - pos {
            return Err(Error::corrupt(format!(
                "xerial snappy chunk length {chunk_len} at byte {} exceeds the {} bytes left",
                pos - 4,
                data.len() - pos
            )));
        }
        let chunk = &data[pos..pos + chunk_len as usize];
        pos += chunk.len();
        snappy_block_into(chunk, &mut out, max_size)?;
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`. The block's length preamble is checked against the
/// remaining budget before anything is allocated.
fn snappy_block_into(block: &[u8], out: &mut Vec<u8>, max_size: usize) -> Result<()> {
    if block.is_empty() {
        return Err(Error::corrupt("empty snappy block"));
    }
    let len = snap::raw::decompress_len(block).map_err(|e| codec_error(Compression::Snappy, e))?;
    if len > max_size - out.len() {
        return Err(exceeds(Compression::Snappy, max_size));
    }
    let start = out.len();
    reserve_output(out, len)?;
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| codec_error(Compression::Snappy, e))?;
    out.truncate(start + n);
    Ok(())
}

// ---- lz4 (Kafka's LZ4 frame) ----

/// xxh32-based header checksum byte: second byte of the hash, per the LZ4 frame spec.
fn lz4_header_checksum(bytes: &[u8]) -> u8 {
    (xxhash_rust::xxh32::xxh32(bytes, 0) >> 8) as u8
}

/// The frame `KafkaLZ4BlockOutputStream` writes: 64 KiB independent blocks, each stored raw when
/// compression does not shrink it, no block or content checksum, no content size. For v0
/// (`broken_checksum`) the header checksum covers the magic bytes too, as Kafka always did for v0.
fn lz4_kafka_compress(data: &[u8], broken_checksum: bool) -> Vec<u8> {
    let blocks = data.len().div_ceil(LZ4_KAFKA_BLOCK_SIZE);
    let mut out = Vec::with_capacity(7 + 4 + blocks * 4 + data.len() + data.len() / 255 + 16);
    out.extend_from_slice(&LZ4_FRAME_MAGIC.to_le_bytes());
    out.push(LZ4_KAFKA_FLG);
    out.push(LZ4_KAFKA_BD);
    let hc = if broken_checksum {
        lz4_header_checksum(&out[0..6])
    } else {
        lz4_header_checksum(&out[4..6])
    };
    out.push(hc);
    for block in data.chunks(LZ4_KAFKA_BLOCK_SIZE) {
        let compressed = lz4_flex::block::compress(block);
        if compressed.len() < block.len() {
            out.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
            out.extend_from_slice(&compressed);
        } else {
            out.extend_from_slice(&(block.len() as u32 | LZ4_STORED_BLOCK_BIT).to_le_bytes());
            out.extend_from_slice(block);
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes()); // end mark
    out
}

/// Reads one standard LZ4 frame (any block size, compressed or stored blocks, linked or
/// independent, optional content size and block/content checksums). For magic 0 the header
/// checksum is not checked, as in `KafkaLZ4BlockInputStream`: Kafka's v0 writers computed it
/// over the magic bytes too. Bytes after the end mark are ignored, as Kafka does.
fn lz4_decompress(data: &[u8], max_size: usize, magic: u8) -> Result<Vec<u8>> {
    let mut frame = Lz4FrameReader::read_header(data, max_size, magic)?;
    while frame.read_block()? {}
    frame.verify_content()?;
    Ok(frame.out)
}

/// An error in the frame itself (as opposed to output past the budget).
fn lz4_bad(msg: String) -> Error {
    Error::corrupt(format!("invalid lz4 frame: {msg}"))
}

/// The frame descriptor's fields that the blocks and the end of the frame depend on.
struct Lz4FrameDescriptor {
    flg: u8,
    max_block: usize,
    content_size: Option<u64>,
}

impl Lz4FrameDescriptor {
    /// Blocks may reference the previous output (FLG's block independence bit clear).
    fn linked(&self) -> bool {
        self.flg & LZ4_FLG_INDEPENDENT == 0
    }

    fn block_checksums(&self) -> bool {
        self.flg & LZ4_FLG_BLOCK_CHECKSUM != 0
    }

    fn content_checksum(&self) -> bool {
        self.flg & LZ4_FLG_CONTENT_CHECKSUM != 0
    }
}

/// One frame read from memory, the steps of `KafkaLZ4BlockInputStream`: `read_header`, then
/// `read_block` until the end mark, then the frame's trailing checks (`verify_content`).
struct Lz4FrameReader<'a> {
    data: &'a [u8],
    /// Where the next unread byte of `data` is.
    pos: usize,
    max_size: usize,
    descriptor: Lz4FrameDescriptor,
    out: Vec<u8>,
}

impl<'a> Lz4FrameReader<'a> {
    /// Magic, FLG, BD, the optional content size and the header checksum (`readHeader`).
    fn read_header(data: &'a [u8], max_size: usize, magic: u8) -> Result<Self> {
        if data.len() < 7 {
            return Err(lz4_bad(format!(
                "{} bytes is shorter than a frame header",
                data.len()
            )));
        }
        let frame_magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
        if frame_magic != LZ4_FRAME_MAGIC {
            return Err(lz4_bad(format!(
                "magic number {frame_magic:#010x}, expected {LZ4_FRAME_MAGIC:#010x}"
            )));
        }
        let (flg, bd) = (data[4], data[5]);
        let max_block = Self::check_flg_bd(flg, bd)?;
        let mut pos = 6;
        let content_size = if flg & LZ4_FLG_CONTENT_SIZE != 0 {
            let bytes = data
                .get(6..14)
                .ok_or_else(|| lz4_bad("truncated in the content size".into()))?;
            pos = 14;
            Some(u64::from_le_bytes(bytes.try_into().unwrap()))
        } else {
            None
        };
        let stored_hc = *data
            .get(pos)
            .ok_or_else(|| lz4_bad("truncated before the header checksum".into()))?;
        if magic != 0 {
            Self::verify_header_checksum(data, pos, stored_hc)?;
        }
        Ok(Lz4FrameReader {
            data,
            pos: pos + 1,
            max_size,
            descriptor: Lz4FrameDescriptor {
                flg,
                max_block,
                content_size,
            },
            out: Vec::new(),
        })
    }

    /// The FLG and BD bytes as this reader supports them; returns the maximum block size.
    fn check_flg_bd(flg: u8, bd: u8) -> Result<usize> {
        if flg & LZ4_FLG_VERSION_MASK != LZ4_FLG_VERSION_01 {
            return Err(lz4_bad(format!(
                "unsupported version bits in FLG {flg:#04x}"
            )));
        }
        if flg & LZ4_FLG_RESERVED != 0 || bd & LZ4_BD_RESERVED != 0 {
            return Err(lz4_bad(format!(
                "reserved bits set in FLG {flg:#04x} / BD {bd:#04x}"
            )));
        }
        if flg & LZ4_FLG_DICT_ID != 0 {
            return Err(Error::Unsupported("lz4 frames with a dictionary id".into()));
        }
        let block_size_code = (bd >> 4) & 0x7;
        if block_size_code < 4 {
            return Err(lz4_bad(format!(
                "invalid block size code {block_size_code} in BD"
            )));
        }
        Ok(1usize << (2 * block_size_code as usize + 8))
    }

    /// The descriptor's checksum (`data[4..hc_at]`), stored at `hc_at`. A mismatch that matches
    /// Kafka's broken v0 checksum (which also covers the magic) says so.
    fn verify_header_checksum(data: &[u8], hc_at: usize, stored: u8) -> Result<()> {
        let computed = lz4_header_checksum(&data[4..hc_at]);
        if stored == computed {
            return Ok(());
        }
        let hint = if stored == lz4_header_checksum(&data[0..hc_at]) {
            " (Kafka's broken v0 checksum, only valid in magic v0 messages)"
        } else {
            ""
        };
        Err(lz4_bad(format!(
            "header checksum {stored:#04x}, computed {computed:#04x}{hint}"
        )))
    }

    /// One block into `out` (`readBlock`); false at the end mark.
    fn read_block(&mut self) -> Result<bool> {
        let word_at = self.pos;
        let word = self
            .data
            .get(word_at..word_at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .ok_or_else(|| lz4_bad(format!("truncated at byte {word_at}, before the end mark")))?;
        if word == 0 {
            self.pos = word_at + 4;
            return Ok(false);
        }
        let max_block = self.descriptor.max_block;
        let len = (word & !LZ4_STORED_BLOCK_BIT) as usize;
        if len > max_block {
            return Err(lz4_bad(format!(
                "block of {len} bytes exceeds the frame's maximum block size {max_block}"
            )));
        }
        let block_start = word_at + 4;
        let block_end = block_start + len;
        let checksum_len = if self.descriptor.block_checksums() {
            4
        } else {
            0
        };
        let next = block_end + checksum_len;
        if next > self.data.len() {
            return Err(lz4_bad(format!(
                "block of {len} bytes at byte {word_at} runs past the end of the data"
            )));
        }
        let block = &self.data[block_start..block_end];
        if checksum_len != 0 {
            verify_xxh32("block", &self.data[block_end..next], block)?;
        }
        self.pos = next;
        if word & LZ4_STORED_BLOCK_BIT != 0 {
            self.append_stored(block)?;
        } else {
            self.decompress_block(block, word_at)?;
        }
        Ok(true)
    }

    /// A block the writer stored uncompressed (its length word's high bit set).
    fn append_stored(&mut self, block: &[u8]) -> Result<()> {
        if block.len() > self.max_size - self.out.len() {
            return Err(exceeds(Compression::Lz4, self.max_size));
        }
        self.out.extend_from_slice(block);
        Ok(())
    }

    /// An LZ4 block, decoded with the previous 64 KiB of output as its dictionary when blocks are
    /// linked. `word_at` (where the block's length word is) names it in errors.
    fn decompress_block(&mut self, block: &[u8], word_at: usize) -> Result<()> {
        let max_block = self.descriptor.max_block;
        let start = self.out.len();
        // Room for a full block, but never more than one byte past the budget: a block that
        // needs more than the budget fails as "output too small", reported as oversize.
        let budget = self.max_size - start;
        let room = max_block.min(budget.saturating_add(1));
        let result = if start == 0 {
            // The first block straight into fresh memory: filling a block's room with zeros
            // first (64 KiB in Kafka's frames) took most of the read of a small batch.
            lz4_flex::block::decompress(block, room).map(|first| {
                self.out = first;
                self.out.len()
            })
        } else {
            self.decompress_block_after(block, start, room)
        };
        match result {
            Ok(n) if n > budget => Err(exceeds(Compression::Lz4, self.max_size)),
            Ok(n) => {
                self.out.truncate(start + n);
                Ok(())
            }
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) if room <= budget => {
                Err(lz4_bad(format!(
                    "block decompresses past the maximum block size {max_block}"
                )))
            }
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) => {
                Err(exceeds(Compression::Lz4, self.max_size))
            }
            Err(e) => Err(lz4_bad(format!("block at byte {word_at}: {e}"))),
        }
    }

    /// A block after the first, decoded in place after `start` bytes of output (with the
    /// previous 64 KiB as its dictionary when blocks are linked); `room` bytes past them may be
    /// written. The output's length stays `start + room` for the caller to cut.
    fn decompress_block_after(
        &mut self,
        block: &[u8],
        start: usize,
        room: usize,
    ) -> std::result::Result<usize, lz4_flex::block::DecompressError> {
        self.out.resize(start + room, 0);
        let (prev, dst) = self.out.split_at_mut(start);
        if self.descriptor.linked() {
            let dict = &prev[prev.len().saturating_sub(LZ4_WINDOW)..];
            lz4_flex::block::decompress_into_with_dict(block, dst, dict)
        } else {
            lz4_flex::block::decompress_into(block, dst)
        }
    }

    /// After the end mark: the optional content checksum and the declared content size.
    fn verify_content(&self) -> Result<()> {
        if self.descriptor.content_checksum() {
            let stored = self
                .data
                .get(self.pos..self.pos + 4)
                .ok_or_else(|| lz4_bad("truncated in the content checksum".into()))?;
            verify_xxh32("content", stored, &self.out)?;
        }
        if let Some(expected) = self.descriptor.content_size {
            if expected != self.out.len() as u64 {
                return Err(lz4_bad(format!(
                    "header declares {expected} bytes of content, blocks hold {}",
                    self.out.len()
                )));
            }
        }
        Ok(())
    }
}

/// A block or content checksum: xxh32 (seed 0) of `bytes`, stored little-endian in `stored`.
fn verify_xxh32(what: &str, stored: &[u8], bytes: &[u8]) -> Result<()> {
    let stored = u32::from_le_bytes(stored.try_into().unwrap());
    let computed = xxhash_rust::xxh32::xxh32(bytes, 0);
    if stored != computed {
        return Err(lz4_bad(format!(
            "{what} checksum {stored:#010x}, computed {computed:#010x}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory running out while a batch inflates is an out-of-memory error (a storage error in
    /// Python), not damage at a file position, nor an abort (a black-box tester under `ulimit
    /// -v`: "corrupt record: invalid zstd data: Allocation error", or the process aborted).
    #[test]
    fn memory_running_out_is_not_damage() {
        let zstd = codec_error(Compression::Zstd, "Allocation error : not enough memory");
        assert!(zstd.is_out_of_memory(), "{zstd}");
        let bad = codec_error(Compression::Zstd, "Unknown frame descriptor");
        assert!(matches!(bad, Error::CorruptRecord { .. }), "{bad}");
        let mut out = vec![0u8; 16];
        let e = reserve_output(&mut out, usize::MAX).unwrap_err();
        assert!(
            e.is_out_of_memory() && e.to_string().contains("decompressed batch"),
            "{e}"
        );
    }
    use rand::{Rng, RngCore, SeedableRng};

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(0x6b61666b61)
    }

    fn random_bytes(n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        rng().fill_bytes(&mut v);
        v
    }

    /// Compressible but not trivially: words from a small vocabulary.
    fn text(n: usize) -> Vec<u8> {
        let words: [&[u8]; 6] = [
            b"kafka ",
            b"log ",
            b"segment ",
            b"offset ",
            b"index ",
            b"batch ",
        ];
        let mut r = rng();
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(words[r.gen_range(0..words.len())]);
        }
        v.truncate(n);
        v
    }

    fn inputs() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("empty", Vec::new()),
            ("small", b"hello kafka".to_vec()),
            ("one byte", vec![7]),
            ("incompressible", random_bytes(1000)),
            ("32 KiB exactly", text(32 * 1024)),
            ("over 32 KiB", text(40_000)),
            ("64 KiB exactly", text(64 * 1024)),
            ("multi-block text", text(300_000)),
            ("multi-block random", random_bytes(150_000)),
            ("zeros", vec![0; 200_000]),
        ]
    }

    #[test]
    fn round_trip_every_codec() {
        for codec in ALL {
            for magic in [0u8, 1, 2] {
                for (name, data) in inputs() {
                    let c = compress_for_magic(codec, &data, magic).unwrap();
                    let d = decompress(codec, &c, data.len(), magic)
                        .unwrap_or_else(|e| panic!("{} magic {magic} {name}: {e}", codec.name()));
                    assert_eq!(d, data, "{} magic {magic} {name}", codec.name());
                }
            }
        }
    }

    #[test]
    fn compressed_output_actually_compresses() {
        let data = text(300_000);
        for codec in &ALL[1..] {
            let c = compress(*codec, &data).unwrap();
            assert!(
                c.len() < data.len() / 2,
                "{} gave {} bytes",
                codec.name(),
                c.len()
            );
        }
    }

    #[test]
    fn xerial_snappy_layout() {
        let data = text(70_000);
        let c = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(&c[..16], b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01");
        // Three chunks: 32 KiB, 32 KiB, rest; each a raw snappy block with its length preamble.
        let mut pos = 16;
        let mut sizes = Vec::new();
        while pos < c.len() {
            let n = u32::from_be_bytes(c[pos..pos + 4].try_into().unwrap()) as usize;
            let block = &c[pos + 4..pos + 4 + n];
            sizes.push(snap::raw::decompress_len(block).unwrap());
            pos += 4 + n;
        }
        assert_eq!(sizes, vec![32 * 1024, 32 * 1024, 70_000 - 64 * 1024]);
        // Empty input: the header alone, as snappy-java writes on close.
        assert_eq!(compress(Compression::Snappy, b"").unwrap().len(), 16);
    }

    #[test]
    fn raw_snappy_decodes() {
        for (name, data) in inputs() {
            if data.is_empty() {
                continue;
            }
            let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            assert_eq!(
                decompress(Compression::Snappy, &raw, data.len(), 2).unwrap(),
                data,
                "{name}"
            );
        }
    }

    #[test]
    fn concatenated_xerial_streams_decode() {
        let mut c = compress(Compression::Snappy, b"first ").unwrap();
        c.extend(compress(Compression::Snappy, b"second").unwrap());
        assert_eq!(
            decompress(Compression::Snappy, &c, 100, 2).unwrap(),
            b"first second"
        );
    }

    #[test]
    fn lz4_kafka_frame_layout() {
        let data = text(100_000);
        let c = compress(Compression::Lz4, &data).unwrap();
        assert_eq!(&c[..6], &[0x04, 0x22, 0x4D, 0x18, 0x60, 0x40]);
        assert_eq!(c[6], lz4_header_checksum(&[0x60, 0x40]));
        assert_eq!(&c[c.len() - 4..], &[0, 0, 0, 0]);
        // Empty input still gets a header and end mark, as KafkaLZ4BlockOutputStream writes.
        assert_eq!(compress(Compression::Lz4, b"").unwrap().len(), 11);
        // Incompressible blocks are stored with the high bit set.
        let r = compress(Compression::Lz4, &random_bytes(100)).unwrap();
        assert_eq!(
            u32::from_le_bytes(r[7..11].try_into().unwrap()),
            100 | LZ4_STORED_BLOCK_BIT
        );
        // lz4_flex's own frame decoder reads our frames.
        let mut d = Vec::new();
        lz4_flex::frame::FrameDecoder::new(&c[..])
            .read_to_end(&mut d)
            .unwrap();
        assert_eq!(d, data);
    }

    /// Frames from lz4_flex's encoder with every optional feature (a stand-in for other producers).
    #[test]
    fn lz4_standard_frames_decode() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        let data = text(600_000);
        for block_size in [
            BlockSize::Max64KB,
            BlockSize::Max256KB,
            BlockSize::Max1MB,
            BlockSize::Max4MB,
        ] {
            for mode in [BlockMode::Independent, BlockMode::Linked] {
                for (block_checksums, content_checksum, content_size) in [
                    (false, false, false),
                    (true, false, false),
                    (false, true, false),
                    (true, true, true),
                ] {
                    let info = FrameInfo::new()
                        .block_size(block_size)
                        .block_mode(mode)
                        .block_checksums(block_checksums)
                        .content_checksum(content_checksum)
                        .content_size(content_size.then_some(data.len() as u64));
                    let mut enc = FrameEncoder::with_frame_info(info, Vec::new());
                    enc.write_all(&data).unwrap();
                    let frame = enc.finish().unwrap();
                    let what = format!("{block_size:?} {mode:?} {block_checksums} {content_checksum} {content_size}");
                    assert_eq!(
                        decompress(Compression::Lz4, &frame, data.len(), 2).expect(&what),
                        data,
                        "{what}"
                    );
                    if block_checksums || content_checksum {
                        // Flip a byte near the end of the payload: some checksum must catch it
                        // (or the block decoder fails first).
                        let mut bad = frame.clone();
                        let i = bad.len() - 10;
                        bad[i] ^= 0x55;
                        assert!(
                            decompress(Compression::Lz4, &bad, data.len(), 2).is_err(),
                            "{what}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn lz4_content_size_mismatch_rejected() {
        use lz4_flex::frame::{FrameEncoder, FrameInfo};
        let mut enc =
            FrameEncoder::with_frame_info(FrameInfo::new().content_size(Some(5)), Vec::new());
        enc.write_all(b"hello").unwrap();
        let mut frame = enc.finish().unwrap();
        frame[6] = 6; // content size 6, and fix the header checksum so only the size is wrong
        frame[14] = lz4_header_checksum(&frame[4..14]);
        let err = decompress(Compression::Lz4, &frame, 100, 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("declares 6 bytes"), "{err}");
    }

    #[test]
    fn lz4_v0_broken_header_checksum() {
        let data = text(1000);
        let v0 = compress_for_magic(Compression::Lz4, &data, 0).unwrap();
        // Built independently: xxh32 over magic + FLG + BD, second byte.
        let expected_hc =
            (xxhash_rust::xxh32::xxh32(&[0x04, 0x22, 0x4D, 0x18, 0x60, 0x40], 0) >> 8) as u8;
        assert_eq!(v0[6], expected_hc);
        assert_ne!(
            v0[6],
            lz4_header_checksum(&[0x60, 0x40]),
            "test needs the two checksums to differ"
        );
        assert_eq!(
            decompress(Compression::Lz4, &v0, data.len(), 0).unwrap(),
            data
        );
        for magic in [1, 2] {
            let err = decompress(Compression::Lz4, &v0, data.len(), magic)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("header checksum") && err.contains("broken v0"),
                "{err}"
            );
        }
        // Magic 0 also reads correct checksums (Kafka ignores the byte for v0).
        let v2 = compress(Compression::Lz4, &data).unwrap();
        assert_eq!(
            decompress(Compression::Lz4, &v2, data.len(), 0).unwrap(),
            data
        );
        // Any other wrong checksum is rejected for v1/v2.
        let mut bad = v2.clone();
        bad[6] = bad[6].wrapping_add(1);
        assert!(decompress(Compression::Lz4, &bad, data.len(), 2).is_err());
    }

    #[test]
    fn lz4_rejects_bad_headers() {
        let good = compress(Compression::Lz4, b"abc").unwrap();
        let patch = |i: usize, v: u8| {
            let mut f = good.clone();
            f[i] = v;
            f[6] = lz4_header_checksum(&f[4..6]);
            f
        };
        assert!(decompress(Compression::Lz4, &patch(4, 0x20), 100, 2).is_err()); // version 00
        assert!(decompress(Compression::Lz4, &patch(4, 0x62), 100, 2).is_err()); // reserved bit
        assert!(matches!(
            decompress(Compression::Lz4, &patch(4, 0x61), 100, 2),
            Err(Error::Unsupported(_))
        ));
        assert!(decompress(Compression::Lz4, &patch(5, 0x30), 100, 2).is_err()); // block size code 3
        assert!(decompress(Compression::Lz4, &patch(5, 0x41), 100, 2).is_err()); // BD reserved bit
        let mut legacy = good.clone();
        legacy[..4].copy_from_slice(&0x184C_2102u32.to_le_bytes());
        assert!(decompress(Compression::Lz4, &legacy, 100, 2).is_err());
        // A block larger than the declared maximum block size.
        let mut f = good.clone();
        f.truncate(7);
        f.extend_from_slice(&(65_537u32 | LZ4_STORED_BLOCK_BIT).to_le_bytes());
        f.extend(vec![0; 65_537]);
        f.extend_from_slice(&[0; 4]);
        let err = decompress(Compression::Lz4, &f, 1 << 20, 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("maximum block size"), "{err}");
    }

    #[test]
    fn gzip_interoperates_with_flate2_defaults() {
        let data = text(50_000);
        // A stream from flate2's plain encoder (what most non-Java producers write).
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&data).unwrap();
        let theirs = enc.finish().unwrap();
        assert_eq!(
            decompress(Compression::Gzip, &theirs, data.len(), 2).unwrap(),
            data
        );
        // And ours reads with flate2's plain decoder; header as Java writes it.
        let ours = compress(Compression::Gzip, &data).unwrap();
        assert_eq!(&ours[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0]);
        let mut d = Vec::new();
        flate2::read::GzDecoder::new(&ours[..])
            .read_to_end(&mut d)
            .unwrap();
        assert_eq!(d, data);
        // Concatenated members read as one stream, as GZIPInputStream does.
        let mut two = compress(Compression::Gzip, b"ab").unwrap();
        two.extend(compress(Compression::Gzip, b"cd").unwrap());
        assert_eq!(decompress(Compression::Gzip, &two, 10, 2).unwrap(), b"abcd");
    }

    #[test]
    fn known_gzip_vector() {
        // `printf hello | gzip -n` (fixed bytes, independent of our encoder).
        let v = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9,
            0xc9, 0x07, 0x00, 0x86, 0xa6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00,
        ];
        assert_eq!(decompress(Compression::Gzip, &v, 5, 2).unwrap(), b"hello");
        assert!(decompress(Compression::Gzip, &v, 4, 2).is_err());
    }

    #[test]
    fn zstd_interoperates_with_bulk_frames() {
        let data = text(100_000);
        // A frame with content size (bulk API), as librdkafka writes.
        let bulk = zstd::bulk::compress(&data, 1).unwrap();
        assert_eq!(
            decompress(Compression::Zstd, &bulk, data.len(), 2).unwrap(),
            data
        );
        let ours = compress(Compression::Zstd, &data).unwrap();
        assert_eq!(&ours[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
        assert_eq!(zstd::stream::decode_all(&ours[..]).unwrap(), data);
    }

    /// The thread's kept context decodes frame after frame: concatenated frames, with and
    /// without a stated size, each budget enforced, and a damaged or cut frame failing without
    /// spoiling the next decode.
    #[test]
    fn zstd_frames_decode_through_one_kept_context() {
        let (a, b) = (text(70_000), text(3_000));
        let streamed = compress(Compression::Zstd, &a).unwrap();
        let sized = zstd::bulk::compress(&b, 3).unwrap();
        let mut both = streamed.clone();
        both.extend_from_slice(&sized);
        let whole = [a.clone(), b.clone()].concat();
        assert_eq!(
            decompress(Compression::Zstd, &both, whole.len(), 2).unwrap(),
            whole
        );
        let over = decompress(Compression::Zstd, &both, whole.len() - 1, 2).unwrap_err();
        assert!(
            over.to_string().contains("decompresses to more than"),
            "{over}"
        );
        let cut = decompress(
            Compression::Zstd,
            &streamed[..streamed.len() - 9],
            a.len(),
            2,
        )
        .unwrap_err();
        assert!(cut.to_string().contains("invalid zstd data"), "{cut}");
        let mut garbled = sized.clone();
        garbled[4] ^= 0xff;
        assert!(decompress(Compression::Zstd, &garbled, b.len(), 2).is_err());
        for _ in 0..3 {
            assert_eq!(
                decompress(Compression::Zstd, &sized, b.len(), 2).unwrap(),
                b
            );
            assert_eq!(
                decompress(Compression::Zstd, &streamed, a.len(), 2).unwrap(),
                a
            );
        }
        // A stated size past the budget is refused as such, not allocated.
        let err = decompress(Compression::Zstd, &sized, 100, 2).unwrap_err();
        assert!(
            err.to_string().contains("decompresses to more than 100"),
            "{err}"
        );
    }

    #[test]
    fn oversized_output_rejected() {
        let data = text(200_000);
        for codec in ALL {
            let c = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &c, data.len(), 2).unwrap().len(),
                data.len()
            );
            for max in [0, 1, 1000, 65_536, data.len() - 1] {
                let err = decompress(codec, &c, max, 2).unwrap_err().to_string();
                assert!(
                    err.contains("decompresses to more than"),
                    "{} max {max}: {err}",
                    codec.name()
                );
            }
        }
        // Raw snappy whose length preamble claims more than the budget: rejected before allocating.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert!(decompress(Compression::Snappy, &raw, 10, 2)
            .unwrap_err()
            .to_string()
            .contains("decompresses to more than"));
        // A preamble claiming ~4 GiB with no data behind it.
        let lie = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        assert!(decompress(Compression::Snappy, &lie, 1 << 20, 2).is_err());
    }

    #[test]
    fn empty_payload_rejected() {
        for codec in &ALL[1..] {
            assert!(decompress(*codec, b"", 100, 2).is_err(), "{}", codec.name());
        }
        assert_eq!(decompress(Compression::None, b"", 100, 2).unwrap(), b"");
    }

    /// Garbage and truncated frames must give Err, never panic or succeed on a prefix.
    #[test]
    fn fuzz_garbage_and_truncations() {
        let mut r = rng();
        let data = text(80_000);
        for codec in &ALL[1..] {
            for magic in [0u8, 2] {
                let valid = compress_for_magic(*codec, &data, magic).unwrap();
                // Every strict prefix of a valid stream fails (sampled for speed). Snappy's xerial
                // framing cannot tell a stream cut exactly at a chunk boundary from a complete one
                // (snappy-java can't either), so those cuts are allowed to decode to a prefix.
                let tail = (valid.len().saturating_sub(12)..valid.len()).collect::<Vec<_>>();
                let sampled = (0..300)
                    .map(|_| r.gen_range(0..valid.len()))
                    .collect::<Vec<_>>();
                for cut in tail.into_iter().chain(sampled) {
                    match decompress(*codec, &valid[..cut], 1 << 20, magic) {
                        Err(_) => {}
                        Ok(d) => {
                            assert!(
                                *codec == Compression::Snappy && d.len() < data.len(),
                                "{} cut {cut}",
                                codec.name()
                            );
                            assert_eq!(&data[..d.len()], &d[..]);
                        }
                    }
                }
                // Random corruptions: must not panic (may succeed when the byte is not checked).
                for _ in 0..300 {
                    let mut bad = valid.clone();
                    for _ in 0..r.gen_range(1..4) {
                        let i = r.gen_range(0..bad.len());
                        bad[i] = r.gen();
                    }
                    let _ = decompress(*codec, &bad, 1 << 20, magic);
                }
            }
            // Pure garbage, including garbage behind a valid header.
            for _ in 0..500 {
                let n = r.gen_range(0..200);
                let mut junk = vec![0u8; n];
                r.fill_bytes(&mut junk);
                let _ = decompress(*codec, &junk, 1 << 16, 2);
                let mut headed = compress(*codec, b"").unwrap();
                headed.truncate(match codec {
                    Compression::Lz4 => 7,
                    Compression::Snappy => 16,
                    _ => headed.len().min(10),
                });
                headed.extend_from_slice(&junk);
                let _ = decompress(*codec, &headed, 1 << 16, 2);
            }
        }
    }
}
