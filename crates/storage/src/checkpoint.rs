//! Small text files Kafka keeps next to the logs: offset checkpoints
//! (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`) and
//! `partition.metadata`. All are replaced atomically: written to `<name>.tmp`,
//! fsynced, renamed over the old file, directory fsynced.

use crate::backend::Storage;
use crate::config::TopicPartition;
use crate::error::{IoContext, StorageError};
use crate::segment::read_all;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use weir_protocol::Uuid;

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const PARTITION_METADATA: &str = "partition.metadata";
/// Kafka 4's clean shutdown marker in each log dir.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// Writes `bytes` to `path` atomically (tmp file, fsync, rename, dir fsync).
pub fn write_atomic(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let f = storage.open(&tmp, true).at(&tmp)?;
    f.set_len(0).at(&tmp)?;
    f.write_all_at(bytes, 0).at(&tmp)?;
    f.sync().at(&tmp)?;
    drop(f);
    storage.rename(&tmp, path).at(path)?;
    if let Some(dir) = path.parent() {
        storage.sync_dir(dir).at(dir)?;
    }
    Ok(())
}

/// Kafka's text checkpoint layout, shared by the offset checkpoints and
/// `leader-epoch-checkpoint`: `0\n<count>\n` and one line per entry.
pub(crate) fn encode_lines(lines: impl ExactSizeIterator<Item = String>) -> String {
    let mut s = format!("0\n{}\n", lines.len());
    for line in lines {
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// The entry lines of a text checkpoint ([`encode_lines`]): version 0,
/// then exactly the count of lines it announces, then only blank lines.
pub(crate) fn decode_lines(text: &str) -> Result<Vec<&str>, String> {
    let mut lines = text.lines();
    let version = lines.next().ok_or("empty file")?;
    if version.trim() != "0" {
        return Err(format!("unsupported version {version:?}"));
    }
    let count: usize = lines
        .next()
        .ok_or("missing count")?
        .trim()
        .parse()
        .map_err(|e| format!("bad count: {e}"))?;
    let mut out = Vec::new();
    for i in 0..count {
        out.push(
            lines
                .next()
                .ok_or(format!("expected {count} entries, found {i}"))?,
        );
    }
    if lines.any(|l| !l.trim().is_empty()) {
        return Err(format!("more than {count} entries"));
    }
    Ok(out)
}

/// Encodes an offset checkpoint: `0\n<count>\n<topic> <partition> <offset>\n…`.
pub fn encode_checkpoint(entries: &BTreeMap<TopicPartition, i64>) -> String {
    encode_lines(
        entries
            .iter()
            .map(|(tp, off)| format!("{} {} {}", tp.topic, tp.partition, off)),
    )
}

/// Parses an offset checkpoint file's text.
pub fn decode_checkpoint(text: &str) -> Result<BTreeMap<TopicPartition, i64>, String> {
    let mut out = BTreeMap::new();
    for line in decode_lines(text)? {
        let mut parts = line.split(' ');
        let (Some(t), Some(p), Some(o), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("malformed line {line:?}"));
        };
        let p: i32 = p
            .parse()
            .map_err(|e| format!("bad partition in {line:?}: {e}"))?;
        let o: i64 = o
            .parse()
            .map_err(|e| format!("bad offset in {line:?}: {e}"))?;
        out.insert(TopicPartition::new(t, p), o);
    }
    Ok(out)
}

pub fn read_checkpoint(
    storage: &dyn Storage,
    path: &Path,
) -> Result<BTreeMap<TopicPartition, i64>, StorageError> {
    if !storage.exists(path) {
        return Ok(BTreeMap::new());
    }
    let f = storage.open(path, false).at(path)?;
    let bytes = read_all(&*f).at(path)?;
    let text = String::from_utf8(bytes).map_err(|_| StorageError::MalformedFile {
        path: path.to_path_buf(),
        reason: "not UTF-8".into(),
    })?;
    decode_checkpoint(&text).map_err(|reason| StorageError::MalformedFile {
        path: path.to_path_buf(),
        reason,
    })
}

pub fn write_checkpoint(
    storage: &dyn Storage,
    path: &Path,
    entries: &BTreeMap<TopicPartition, i64>,
) -> Result<(), StorageError> {
    write_atomic(storage, path, encode_checkpoint(entries).as_bytes())
}

/// `partition.metadata`; the topic id is in Kafka's text form (unpadded
/// base64url, 22 characters).
pub fn encode_partition_metadata(topic_id: &[u8; 16]) -> String {
    format!("version: 0\ntopic_id: {}\n", Uuid(*topic_id))
}

pub fn decode_partition_metadata(text: &str) -> Result<[u8; 16], String> {
    let mut version = None;
    let mut id = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("version: ") {
            version = Some(v.trim());
        } else if let Some(v) = line.strip_prefix("topic_id: ") {
            id = Some(v.trim().parse::<Uuid>().map_err(|e| e.to_string())?.0);
        } else if !line.trim().is_empty() {
            return Err(format!("unexpected line {line:?}"));
        }
    }
    if version != Some("0") {
        return Err(format!("unsupported version {version:?}"));
    }
    id.ok_or_else(|| "no topic_id".into())
}

/// Fuzz entry point (cargo-fuzz target `checkpoint` and the smoke test):
/// decodes `data` as an offset checkpoint file and as `partition.metadata`;
/// whatever decodes must encode and decode back to the same value.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(entries) = decode_checkpoint(text) {
        assert_eq!(
            decode_checkpoint(&encode_checkpoint(&entries)).ok(),
            Some(entries),
            "checkpoint round trip"
        );
    }
    if let Ok(id) = decode_partition_metadata(text) {
        assert_eq!(
            decode_partition_metadata(&encode_partition_metadata(&id)).ok(),
            Some(id),
            "partition.metadata round trip"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_text_round_trip() {
        let mut m = BTreeMap::new();
        m.insert(TopicPartition::new("a-b", 0), 42);
        m.insert(TopicPartition::new("z", 12), 0);
        let text = encode_checkpoint(&m);
        assert_eq!(text, "0\n2\na-b 0 42\nz 12 0\n");
        assert_eq!(decode_checkpoint(&text).unwrap(), m);
        assert!(decode_checkpoint("0\n2\na 0 1\n").is_err());
        assert!(decode_checkpoint("1\n0\n").is_err());
        assert!(decode_checkpoint("0\n1\na x 1\n").is_err());
    }

    #[test]
    fn partition_metadata_text() {
        // Kafka: new Uuid(0L, 1L).toString() == "AAAAAAAAAAAAAAAAAAAAAQ"
        let mut id = [0u8; 16];
        id[15] = 1;
        let text = encode_partition_metadata(&id);
        assert_eq!(text, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n");
        assert_eq!(decode_partition_metadata(&text).unwrap(), id);
        assert!(
            decode_partition_metadata("version: 0\ntopic_id: _____________________x\n").is_err()
        );
    }
}
