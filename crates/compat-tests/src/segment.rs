//! A minimal, independent reader of the batch headers in a partition's
//! `.log` segment files (SPEC S1), so tests can check what the broker
//! actually stored, e.g. that a gzip batch was written as gzip.

use std::path::Path;

/// Size of the fixed RecordBatch header (magic 2) up to and including the
/// record count.
pub const BATCH_HEADER_LEN: usize = 61;

/// The header fields of one stored record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBatch {
    pub base_offset: i64,
    pub batch_length: i32,
    pub magic: i8,
    /// `attributes & 0x7`: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub compression: i16,
    pub last_offset_delta: i32,
    pub producer_id: i64,
    pub base_sequence: i32,
    pub record_count: i32,
}

/// Errors reading segment files.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: batch at position {position} declares length {length}, beyond the {available} bytes left"
    )]
    Truncated {
        path: String,
        position: usize,
        length: i64,
        available: usize,
    },
}

/// All batches in `<data_dir>/<topic>-<partition>/*.log`, in file-name
/// (= base offset) order.
pub fn stored_batches(
    data_dir: &Path,
    topic: &str,
    partition: i32,
) -> Result<Vec<StoredBatch>, SegmentError> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let io_err = |source| SegmentError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .map_err(io_err)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for path in logs {
        let bytes = std::fs::read(&path).map_err(|source| SegmentError::Io {
            path: path.display().to_string(),
            source,
        })?;
        parse_batches(&bytes, &path.display().to_string(), &mut out)?;
    }
    Ok(out)
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// Parse consecutive batches; stops at trailing zero padding (a batch
/// length of 0), fails on a batch that runs past the end of the data.
pub fn parse_batches(
    bytes: &[u8],
    path: &str,
    out: &mut Vec<StoredBatch>,
) -> Result<(), SegmentError> {
    let mut pos = 0usize;
    while bytes.len() - pos >= 12 {
        let batch_length = be_i32(bytes, pos + 8);
        if batch_length == 0 {
            break;
        }
        let total = 12i64 + i64::from(batch_length);
        let available = bytes.len() - pos;
        if batch_length < 0 || total > available as i64 || (total as usize) < BATCH_HEADER_LEN {
            return Err(SegmentError::Truncated {
                path: path.to_string(),
                position: pos,
                length: total,
                available,
            });
        }
        let b = &bytes[pos..pos + total as usize];
        out.push(StoredBatch {
            base_offset: be_i64(b, 0),
            batch_length,
            magic: b[16] as i8,
            compression: be_i16(b, 21) & 0x7,
            last_offset_delta: be_i32(b, 23),
            producer_id: be_i64(b, 43),
            base_sequence: be_i32(b, 53),
            record_count: be_i32(b, 57),
        });
        pos += total as usize;
    }
    Ok(())
}

/// Kafka's compression attribute for a codec name (`none`, `gzip`, ...).
pub fn codec_id(name: &str) -> Option<i16> {
    match name {
        "none" => Some(0),
        "gzip" => Some(1),
        "snappy" => Some(2),
        "lz4" => Some(3),
        "zstd" => Some(4),
        _ => None,
    }
}

/// For every `TOPIC <codec> <topic> <partitions>` line a client script
/// printed, check that each batch stored for that topic carries the codec
/// the client was told to use, or none: clients send a batch uncompressed
/// when compression would not shrink it (kafka-python does, e.g. for a
/// one-record batch). At least one batch of a compressed topic must carry
/// the codec. Returns how many topics were checked.
pub fn verify_reported_topics(data_dir: &Path, script_output: &str) -> Result<usize, String> {
    let mut checked = 0;
    for line in script_output.lines() {
        let Some(rest) = line.strip_prefix("TOPIC ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let [codec, topic, partitions] = fields[..] else {
            return Err(format!("malformed line {line:?}"));
        };
        let code = codec_id(codec).ok_or_else(|| format!("unknown codec in {line:?}"))?;
        let partitions: i32 = partitions
            .parse()
            .map_err(|_| format!("bad partition count in {line:?}"))?;
        let mut batches = 0;
        let mut with_codec = 0;
        for p in 0..partitions {
            let stored = stored_batches(data_dir, topic, p).map_err(|e| e.to_string())?;
            for b in &stored {
                if b.magic != 2 || (b.compression != code && b.compression != 0) {
                    return Err(format!(
                        "{topic}-{p}: the client sent {codec} (attribute {code}) but the stored batch has magic {} codec {}: {b:?}",
                        b.magic, b.compression
                    ));
                }
            }
            batches += stored.len();
            with_codec += stored.iter().filter(|b| b.compression == code).count();
        }
        if batches == 0 {
            return Err(format!("{topic}: no batches stored"));
        }
        if with_codec == 0 {
            return Err(format!(
                "{topic}: the client sent {codec} but none of the {batches} stored batches carries it"
            ));
        }
        checked += 1;
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base_offset: i64, compression: i16, records: i32, body: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&base_offset.to_be_bytes());
        b.extend_from_slice(&((49 + body) as i32).to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        b.push(2); // magic
        b.extend_from_slice(&0u32.to_be_bytes()); // crc (not checked here)
        b.extend_from_slice(&compression.to_be_bytes());
        b.extend_from_slice(&(records - 1).to_be_bytes());
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&7i64.to_be_bytes()); // producer id
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&3i32.to_be_bytes()); // base sequence
        b.extend_from_slice(&records.to_be_bytes());
        b.extend(std::iter::repeat_n(0xAB, body));
        b
    }

    #[test]
    fn parses_consecutive_batches_and_stops_at_padding() {
        let mut bytes = batch(0, 1, 3, 10);
        bytes.extend(batch(3, 4, 2, 5));
        bytes.extend([0u8; 32]);
        let mut out = Vec::new();
        parse_batches(&bytes, "t", &mut out).expect("valid");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].compression, 1);
        assert_eq!(out[0].record_count, 3);
        assert_eq!(out[0].last_offset_delta, 2);
        assert_eq!(out[1].base_offset, 3);
        assert_eq!(out[1].compression, 4);
        assert_eq!(out[1].producer_id, 7);
        assert_eq!(out[1].base_sequence, 3);
        assert_eq!(out[1].magic, 2);
    }

    #[test]
    fn rejects_a_length_past_the_end() {
        let mut bytes = batch(0, 0, 1, 10);
        bytes.truncate(bytes.len() - 1);
        let mut out = Vec::new();
        assert!(matches!(
            parse_batches(&bytes, "t", &mut out),
            Err(SegmentError::Truncated { .. })
        ));
    }

    #[test]
    fn reported_topics_are_checked_against_the_stored_codec() {
        let dir = tempfile::tempdir().expect("tempdir");
        let part = dir.path().join("t-0");
        std::fs::create_dir(&part).expect("mkdir");
        std::fs::write(part.join("00000000000000000000.log"), batch(0, 1, 3, 10)).expect("write");
        let ok = verify_reported_topics(dir.path(), "PASS x\nTOPIC gzip t 1\n");
        assert_eq!(ok, Ok(1));
        assert!(verify_reported_topics(dir.path(), "TOPIC zstd t 1").is_err());
        assert!(verify_reported_topics(dir.path(), "TOPIC none t 1").is_err());
        // Uncompressed batches may sit beside compressed ones, not replace them all.
        let plain = dir.path().join("p-0");
        std::fs::create_dir(&plain).expect("mkdir");
        std::fs::write(plain.join("00000000000000000000.log"), batch(0, 0, 1, 10)).expect("write");
        assert!(verify_reported_topics(dir.path(), "TOPIC gzip p 1").is_err());
        let mut mixed = batch(0, 0, 1, 10);
        mixed.extend(batch(1, 1, 2, 10));
        std::fs::write(plain.join("00000000000000000000.log"), mixed).expect("write");
        assert_eq!(verify_reported_topics(dir.path(), "TOPIC gzip p 1"), Ok(1));
        assert!(verify_reported_topics(dir.path(), "TOPIC gzip missing 1").is_err());
        assert!(verify_reported_topics(dir.path(), "TOPIC gzip t").is_err());
        assert_eq!(verify_reported_topics(dir.path(), "no topics here"), Ok(0));
    }
}
