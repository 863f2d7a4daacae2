//! Compression codecs of the records section, both ways, with a bounded
//! decompressor.
//!
//! The whole records section (everything after the 61-byte header) is
//! compressed as one stream:
//!
//! - gzip: RFC 1952 stream(s); concatenated members are accepted.
//! - snappy: the xerial `SnappyOutputStream` framing that the Java client
//!   writes: 8-byte magic `\x82SNAPPY\x00`, int32 version (1), int32
//!   minimum compatible version (1), then blocks of `[int32 length][raw
//!   snappy block]`, each block holding at most 32 KiB of input. On decode a
//!   section without that magic is read as one raw (unframed) snappy block,
//!   which is what librdkafka produces and what snappy-java also falls back
//!   to.
//! - lz4: the standard LZ4 frame format (magic `0x184D2204`), 64 KiB
//!   independent blocks, no checksums when writing.
//! - zstd: a standard zstd frame.
//!
//! Decompression never trusts a declared size: streaming decoders are read
//! through a limit, snappy's declared block lengths are checked against the
//! remaining budget before any allocation. A section that would inflate past
//! [`DecompressLimits::max_bytes`] fails with
//! [`RecordsError::DecompressedTooLarge`] (a "zip bomb", cf. CVE-2023-34455).

use std::io::{Read, Write};

use super::error::RecordsError;

/// The compression codec in bits 0–2 of a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Compression {
    #[default]
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// All codecs, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec with wire id `id` (0–4).
    pub fn from_id(id: u8) -> Result<Self, RecordsError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            _ => Err(RecordsError::UnknownCompression { id }),
        }
    }

    /// The wire id (0–4).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The name Kafka uses in `compression.type`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Default bound on a decompressed records section: 64 MiB.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Bounds applied while decompressing a records section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressLimits {
    /// Largest decompressed records section accepted, in bytes.
    pub max_bytes: usize,
}

impl Default for DecompressLimits {
    fn default() -> Self {
        DecompressLimits {
            max_bytes: DEFAULT_MAX_DECOMPRESSED_BYTES,
        }
    }
}

/// Magic that starts a xerial-framed snappy stream.
pub const XERIAL_MAGIC: [u8; 8] = *b"\x82SNAPPY\x00";
/// Full xerial header as snappy-java writes it: magic, version 1,
/// minimum compatible version 1.
const XERIAL_HEADER: [u8; 16] = *b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per xerial block (snappy-java's default).
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;
/// Read granularity of the streaming decoders.
pub(crate) const READ_CHUNK: usize = 32 * 1024;

/// Compresses `input` with `codec` and appends the result to `out`.
pub fn compress(codec: Compression, input: &[u8], out: &mut Vec<u8>) -> Result<(), RecordsError> {
    let fail = |e: &dyn std::fmt::Display| RecordsError::Compress {
        codec,
        message: e.to_string(),
    };
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            enc.write_all(input).map_err(|e| fail(&e))?;
            enc.finish().map_err(|e| fail(&e))?;
        }
        Compression::Snappy => {
            out.extend_from_slice(&XERIAL_HEADER);
            let mut enc = snap::raw::Encoder::new();
            let mut block = Vec::new();
            for chunk in input.chunks(XERIAL_BLOCK_SIZE) {
                block.resize(snap::raw::max_compress_len(chunk.len()), 0);
                let n = enc.compress(chunk, &mut block).map_err(|e| fail(&e))?;
                let compressed = block
                    .get(..n)
                    .ok_or_else(|| fail(&"snappy wrote past its buffer"))?;
                out.extend_from_slice(&(n as u32).to_be_bytes());
                out.extend_from_slice(compressed);
            }
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            enc.write_all(input).map_err(|e| fail(&e))?;
            enc.finish().map_err(|e| fail(&e))?;
        }
        Compression::Zstd => {
            // Level 3 is zstd's (and the Java client's) default.
            let mut enc = zstd::stream::write::Encoder::new(out, 3).map_err(|e| fail(&e))?;
            enc.write_all(input).map_err(|e| fail(&e))?;
            enc.finish().map_err(|e| fail(&e))?;
        }
    }
    Ok(())
}

/// Decompresses a records section, failing once the output would exceed
/// `limits.max_bytes`. `Compression::None` returns a copy of `input`
/// (subject to the same limit).
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limits: &DecompressLimits,
) -> Result<Vec<u8>, RecordsError> {
    let max = limits.max_bytes;
    let too_large = || RecordsError::DecompressedTooLarge { codec, limit: max };
    let fail = |e: &dyn std::fmt::Display| RecordsError::Decompress {
        codec,
        message: e.to_string(),
    };
    match codec {
        Compression::None => {
            if input.len() > max {
                return Err(too_large());
            }
            Ok(input.to_vec())
        }
        Compression::Gzip | Compression::Lz4 | Compression::Zstd => {
            let reader = stream_decoder(codec, input, limits)?
                .ok_or_else(|| fail(&"no streaming decoder"))?;
            read_bounded(codec, reader, max)
        }
        Compression::Snappy => {
            if input.starts_with(&XERIAL_MAGIC) {
                decompress_xerial(input, max)
            } else {
                let mut out = Vec::new();
                snappy_block(input, &mut out, max)?;
                Ok(out)
            }
        }
    }
}

/// A streaming decoder of `input` for the codecs that have one (gzip, lz4,
/// zstd); `None` for none and snappy. The reader itself is not bounded: the
/// caller counts what it reads against `limits.max_bytes`. Only zstd's
/// window (memory the decoder allocates up front) is capped here.
pub(crate) fn stream_decoder<'a>(
    codec: Compression,
    input: &'a [u8],
    limits: &DecompressLimits,
) -> Result<Option<Box<dyn Read + 'a>>, RecordsError> {
    let fail = |e: &dyn std::fmt::Display| RecordsError::Decompress {
        codec,
        message: e.to_string(),
    };
    Ok(match codec {
        Compression::None | Compression::Snappy => None,
        Compression::Gzip => Some(Box::new(flate2::read::MultiGzDecoder::new(input))),
        Compression::Lz4 => Some(Box::new(lz4_flex::frame::FrameDecoder::new(input))),
        Compression::Zstd => {
            let mut dec = zstd::stream::read::Decoder::with_buffer(input).map_err(|e| fail(&e))?;
            // The decoder allocates a window of the size the frame asks for;
            // refuse windows larger than the whole output may be.
            dec.window_log_max(window_log_for(limits.max_bytes))
                .map_err(|e| fail(&e))?;
            Some(Box::new(dec))
        }
    })
}

/// Largest zstd window (as a log) accepted for output bounded by `max`:
/// enough to cover `max`, at least 16 MiB (streaming encoders pick their
/// level's window without knowing the input size: 2 MiB at the default
/// level, up to 8 MiB at level 19), at most zstd's own default cap of
/// 128 MiB.
pub(crate) fn window_log_for(max: usize) -> u32 {
    let bits = usize::BITS - max.saturating_sub(1).leading_zeros();
    bits.clamp(24, 27)
}

/// Reads a streaming decoder to the end, never holding more than
/// `max + READ_CHUNK` bytes of output.
fn read_bounded(
    codec: Compression,
    reader: impl Read,
    max: usize,
) -> Result<Vec<u8>, RecordsError> {
    let mut limited = reader.take((max as u64).saturating_add(1));
    let mut out = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(RecordsError::Decompress {
                    codec,
                    message: e.to_string(),
                });
            }
        };
        if out.len() + n > max {
            return Err(RecordsError::DecompressedTooLarge { codec, limit: max });
        }
        let Some(read) = chunk.get(..n) else {
            return Err(RecordsError::Decompress {
                codec,
                message: format!("decoder read {n} bytes into a {READ_CHUNK}-byte buffer"),
            });
        };
        out.extend_from_slice(read);
    }
    Ok(out)
}

/// Decodes a xerial-framed snappy stream.
fn decompress_xerial(input: &[u8], max: usize) -> Result<Vec<u8>, RecordsError> {
    let fail = |message: &str| RecordsError::Decompress {
        codec: Compression::Snappy,
        message: message.to_string(),
    };
    // Version and minimum compatible version (bytes 8..16) are not checked:
    // snappy-java itself only rejects a compat version it does not know, and
    // every writer uses 1.
    let Some(mut rest) = input.get(XERIAL_HEADER.len()..) else {
        return Err(fail("xerial header truncated"));
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((len_bytes, tail)) = rest.split_first_chunk::<4>() else {
            return Err(fail("xerial block length truncated"));
        };
        let len = u32::from_be_bytes(*len_bytes) as usize;
        let Some((block, tail)) = tail.split_at_checked(len) else {
            return Err(fail("xerial block longer than the remaining input"));
        };
        snappy_block(block, &mut out, max)?;
        rest = tail;
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, checking its declared size
/// against what is left of `max` before allocating.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), RecordsError> {
    let fail = |e: snap::Error| RecordsError::Decompress {
        codec: Compression::Snappy,
        message: e.to_string(),
    };
    let declared = snap::raw::decompress_len(block).map_err(fail)?;
    if declared > max.saturating_sub(out.len()) {
        return Err(RecordsError::DecompressedTooLarge {
            codec: Compression::Snappy,
            limit: max,
        });
    }
    let start = out.len();
    out.resize(start + declared, 0);
    // Just resized to hold `declared` bytes past `start`.
    let dst = out.get_mut(start..).unwrap_or_default();
    let n = snap::raw::Decoder::new()
        .decompress(block, dst)
        .map_err(fail)?;
    out.truncate(start + n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn roundtrip_every_codec() {
        let data = sample();
        for codec in Compression::ALL {
            let mut c = Vec::new();
            compress(codec, &data, &mut c).unwrap();
            let d = decompress(codec, &c, &DecompressLimits::default()).unwrap();
            assert_eq!(d, data, "{codec:?}");
            let empty_c = {
                let mut v = Vec::new();
                compress(codec, &[], &mut v).unwrap();
                v
            };
            assert!(
                decompress(codec, &empty_c, &DecompressLimits::default())
                    .unwrap()
                    .is_empty()
            );
        }
    }

    #[test]
    fn limit_is_exact() {
        let data = sample();
        for codec in Compression::ALL {
            let mut c = Vec::new();
            compress(codec, &data, &mut c).unwrap();
            let exact = DecompressLimits {
                max_bytes: data.len(),
            };
            assert_eq!(decompress(codec, &c, &exact).unwrap().len(), data.len());
            let short = DecompressLimits {
                max_bytes: data.len() - 1,
            };
            assert_eq!(
                decompress(codec, &c, &short),
                Err(RecordsError::DecompressedTooLarge {
                    codec,
                    limit: data.len() - 1
                }),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn xerial_layout_and_raw_fallback() {
        let data = sample();
        let mut c = Vec::new();
        compress(Compression::Snappy, &data, &mut c).unwrap();
        assert_eq!(&c[..16], &XERIAL_HEADER);
        // First block holds exactly 32 KiB of input.
        let len = u32::from_be_bytes(c[16..20].try_into().unwrap()) as usize;
        let first = snap::raw::Decoder::new()
            .decompress_vec(&c[20..20 + len])
            .unwrap();
        assert_eq!(first, &data[..XERIAL_BLOCK_SIZE]);
        // Unframed snappy, as librdkafka writes it.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, &DecompressLimits::default()).unwrap(),
            data
        );
    }

    #[test]
    fn window_log() {
        assert_eq!(window_log_for(0), 24);
        assert_eq!(window_log_for(1 << 20), 24);
        assert_eq!(window_log_for(1 << 25), 25);
        assert_eq!(window_log_for((1 << 25) + 1), 26);
        assert_eq!(window_log_for(usize::MAX), 27);
    }

    #[test]
    fn unknown_ids() {
        for id in 5..=7 {
            assert_eq!(
                Compression::from_id(id),
                Err(RecordsError::UnknownCompression { id })
            );
        }
        for c in Compression::ALL {
            assert_eq!(Compression::from_id(c.id()), Ok(c));
        }
    }
}
