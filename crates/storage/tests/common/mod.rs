#![allow(dead_code)]
//! Shared helpers for the storage integration tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_storage::backend::{MemStorage, Storage};
use weir_storage::testing::batch_with;
use weir_storage::{Log, LogConfig, OpenOptions, TopicPartition};

pub fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

pub fn data_dir() -> PathBuf {
    PathBuf::from("/data")
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        segment_index_bytes: 8 * 1024,
        index_interval_bytes: 256,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// A batch with `n` records of `size`-byte values, timestamps `ts, ts+1, …`.
pub fn make_batch(n: usize, size: usize, ts: i64, tag: u8) -> Vec<u8> {
    let value = vec![tag; size];
    let recs: Vec<weir_storage::testing::TestRecord<'_>> = (0..n)
        .map(|i| (None, value.as_slice(), ts + i as i64))
        .collect();
    batch_with(&recs)
}

pub fn new_log(storage: Arc<dyn Storage>, config: LogConfig) -> Log {
    storage.create_dir_all(&data_dir()).unwrap();
    Log::create(storage, &data_dir(), &tp(), [9; 16], config, 0).unwrap()
}

pub fn reopen(
    storage: Arc<dyn Storage>,
    config: LogConfig,
    rp: i64,
    clean: bool,
) -> Result<Log, weir_storage::StorageError> {
    Log::open(
        storage,
        &data_dir().join(tp().to_string()),
        tp(),
        config,
        OpenOptions {
            recovery_point: rp,
            log_start: 0,
            clean_shutdown: clean,
            verify_flushed: false,
            now_ms: 0,
        },
    )
}

pub fn mem() -> (MemStorage, Arc<dyn Storage>) {
    let m = MemStorage::new();
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    (m, s)
}

/// Every batch of the log from `from`, as (base offset, bytes), read through the public API.
pub fn read_all_batches(log: &Log, from: i64) -> Vec<(i64, Vec<u8>)> {
    let leo = log.log_end_offset();
    let mut out = Vec::new();
    let mut next = from;
    while next < leo {
        let r = log.read(next, 1 << 16, i64::MAX, true).unwrap();
        assert!(!r.regions.is_empty(), "no progress at {next} (leo {leo})");
        for region in &r.regions {
            let bytes = region.read_to_vec().unwrap();
            let mut p = 0;
            while p < bytes.len() {
                let h = weir_protocol::records::BatchHeader::parse(&bytes[p..]).unwrap();
                let b = bytes[p..p + h.total_size()].to_vec();
                h.verify_crc(&b).unwrap();
                next = h.last_offset() + 1;
                out.push((h.base_offset, b));
                p += h.total_size();
            }
        }
    }
    out
}

pub fn segment_dir() -> PathBuf {
    data_dir().join(tp().to_string())
}

pub fn seg_file(base: i64, suffix: &str) -> PathBuf {
    segment_dir().join(format!("{base:020}{suffix}"))
}

pub fn exists(s: &dyn Storage, p: &Path) -> bool {
    s.exists(p)
}
