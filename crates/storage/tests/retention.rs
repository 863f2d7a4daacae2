//! Retention by time and size in virtual time, through the log manager.

use std::path::PathBuf;
use std::sync::Arc;
use weir_storage::backend::{MemStorage, Storage};
use weir_storage::checkpoint::{LOG_START_OFFSET_CHECKPOINT, read_checkpoint};
use weir_storage::retention::Retention;
use weir_storage::testing::batch_with;
use weir_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_index_bytes: 8 * 1024,
        index_interval_bytes: 256,
        message_timestamp_after_max_ms: i64::MAX,
        message_timestamp_before_max_ms: i64::MAX,
        file_delete_delay_ms: 1_000,
        ..LogConfig::default()
    }
}

/// One 300-byte-value batch with timestamp `ts`.
fn batch(ts: i64) -> Vec<u8> {
    let v = vec![7u8; 300];
    batch_with(&[(None, v.as_slice(), ts)])
}

fn setup(cfg: LogConfig) -> (MemStorage, LogManager, Arc<weir_storage::Log>) {
    let mem = MemStorage::new();
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let mc = LogManagerConfig::with_storage(vec![PathBuf::from("/data")], storage);
    let mgr = LogManager::open(mc, 0).unwrap();
    let log = mgr
        .create_log(&TopicPartition::new("r", 0), [1; 16], cfg)
        .unwrap();
    (mem, mgr, log)
}

fn deleted_files(mem: &MemStorage) -> usize {
    mem.list_dir(&PathBuf::from("/data/r-0"))
        .unwrap()
        .iter()
        .filter(|(n, _)| n.ends_with(".deleted"))
        .count()
}

#[test]
fn time_retention_moves_log_start_first_and_keeps_active() {
    let cfg = LogConfig {
        retention_ms: 10_000,
        ..config()
    };
    let (mem, mgr, log) = setup(cfg);
    // Segments of three batches (3 × ~370 bytes > 1024 rolls before the 3rd).
    for i in 0..9 {
        log.append(&mut batch(i * 1_000), i * 1_000).unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3, "{bases:?}");
    let region = log.read(0, 1 << 20, log.high_watermark(), true).unwrap();
    let before = region.regions[0].read_to_vec().unwrap();

    let retention = Retention::new();
    // Nothing has expired yet.
    let r = retention.run(&mgr, 10_000).unwrap();
    assert_eq!(r.segments_deleted, 0);

    // Far in the future every segment has expired, but the active one stays.
    let r = retention.run(&mgr, 1_000_000).unwrap();
    assert_eq!(r.segments_deleted, bases.len() - 1);
    assert_eq!(log.segment_count(), 1);
    let active = *bases.last().unwrap();
    assert_eq!(log.log_start_offset(), active);
    // The log start offset is checkpointed.
    let ck = read_checkpoint(
        &mem,
        &PathBuf::from("/data").join(LOG_START_OFFSET_CHECKPOINT),
    )
    .unwrap();
    assert_eq!(ck.get(&TopicPartition::new("r", 0)), Some(&active));
    // Files are renamed, not yet unlinked; the reader keeps reading.
    assert_eq!(deleted_files(&mem), 3 * (bases.len() - 1));
    assert_eq!(region.regions[0].read_to_vec().unwrap(), before);
    assert!(log.read(0, 1 << 20, log.high_watermark(), true).is_err());

    // After file.delete.delay.ms the files go; the reader still holds its file.
    let r = retention.run(&mgr, 1_000_999).unwrap();
    assert_eq!(r.files_unlinked, 0);
    let r = retention.run(&mgr, 1_001_000).unwrap();
    assert_eq!(r.files_unlinked, 3 * (bases.len() - 1));
    assert_eq!(deleted_files(&mem), 0);
    assert_eq!(region.regions[0].read_to_vec().unwrap(), before);
}

#[test]
fn size_retention_deletes_oldest_only_while_over_limit() {
    let cfg = LogConfig {
        retention_ms: -1,
        retention_bytes: 1500,
        ..config()
    };
    let (_mem, mgr, log) = setup(cfg);
    for i in 0..12 {
        log.append(&mut batch(i), i).unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    let before = log.segment_base_offsets();
    let size_before = log.size_bytes();
    let r = Retention::new().run(&mgr, 100).unwrap();
    assert!(r.segments_deleted > 0);
    // As Kafka: a segment goes only if the log stays at or above
    // retention.bytes without it; the next one would take it below.
    assert!(log.size_bytes() >= 1500);
    let first = log.segment_summaries()[0].size;
    assert!(log.segment_count() == 1 || log.size_bytes() - first < 1500);
    // Only the oldest went.
    let after = log.segment_base_offsets();
    assert_eq!(&before[before.len() - after.len()..], after.as_slice());
    assert_eq!(size_before - r.bytes_deleted, log.size_bytes());
    assert_eq!(log.log_start_offset(), after[0]);
}

#[test]
fn restart_after_rename_recovers_to_new_start() {
    let cfg = LogConfig {
        retention_ms: 10,
        ..config()
    };
    let (mem, mgr, log) = setup(cfg.clone());
    for i in 0..6 {
        log.append(&mut batch(i), i).unwrap();
    }
    log.flush().unwrap();
    log.set_high_watermark(log.log_end_offset());
    let leo = log.log_end_offset();
    Retention::new().run(&mgr, 1_000).unwrap();
    let start = log.log_start_offset();
    assert!(start > 0);
    // Crash with the `.deleted` files still there.
    let crashed = mem.crash(weir_storage::backend::CrashMode::LoseUnsynced);
    let mut mc =
        LogManagerConfig::with_storage(vec![PathBuf::from("/data")], Arc::new(crashed.clone()));
    mc.default_log_config = cfg;
    let mgr2 = LogManager::open(mc, 2_000).unwrap();
    let log2 = mgr2.get(&TopicPartition::new("r", 0)).unwrap();
    assert_eq!(log2.log_start_offset(), start);
    assert_eq!(log2.log_end_offset(), leo);
    assert_eq!(deleted_files(&crashed), 0);
}
