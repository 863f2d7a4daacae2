//! Log manager: many partitions, checkpoints, clean shutdown, deletes.

use crate::common;
use common::make_batch;
use std::path::PathBuf;
use std::sync::Arc;
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::checkpoint::{CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, read_checkpoint};
use weir_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};

fn cfg(storage: &MemStorage) -> LogManagerConfig {
    let mut c = LogManagerConfig::with_storage(
        vec![PathBuf::from("/d1"), PathBuf::from("/d2")],
        Arc::new(storage.clone()),
    );
    c.recovery_threads_per_data_dir = 2;
    c.default_log_config = LogConfig {
        segment_bytes: 4096,
        segment_index_bytes: 4096,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    };
    c
}

fn fill(mgr: &LogManager, parts: i32) {
    for p in 0..parts {
        let tp = TopicPartition::new("topic-x", p);
        let log = mgr
            .create_log(
                &tp,
                [p as u8; 16],
                cfg(&MemStorage::new()).default_log_config,
            )
            .unwrap();
        for i in 0..(p + 3) {
            log.append(&mut make_batch(2, 300, 1000 + i as i64, p as u8), 0)
                .unwrap();
        }
    }
}

#[test]
fn clean_shutdown_round_trip() {
    let m = MemStorage::new();
    let mgr = LogManager::open(cfg(&m), 0).unwrap();
    fill(&mgr, 6);
    assert!(
        mgr.create_log(
            &TopicPartition::new("topic-x", 0),
            [0; 16],
            LogConfig::default()
        )
        .is_err()
    );
    // Partitions are spread over both dirs.
    let in_d1 = m.list_dir(&PathBuf::from("/d1")).unwrap().len();
    assert!((2..=4).contains(&in_d1), "{in_d1}");
    mgr.shutdown().unwrap();
    assert!(
        mgr.get(&TopicPartition::new("topic-x", 0))
            .unwrap()
            .append(&mut make_batch(1, 1, 0, 0), 0)
            .is_err()
    );
    assert!(m.exists(&PathBuf::from("/d1").join(CLEAN_SHUTDOWN_FILE)));
    let rps = read_checkpoint(&m, &PathBuf::from("/d1").join(RECOVERY_POINT_CHECKPOINT)).unwrap();
    assert!(!rps.is_empty());
    // Everything was synced: a power loss now loses nothing.
    let after = m.crash(CrashMode::LoseUnsynced);
    let mgr2 = LogManager::open(cfg(&after), 0).unwrap();
    assert!(!after.exists(&PathBuf::from("/d1").join(CLEAN_SHUTDOWN_FILE)));
    assert_eq!(mgr2.logs().len(), 6);
    for p in 0..6 {
        let log = mgr2.get(&TopicPartition::new("topic-x", p)).unwrap();
        assert_eq!(log.log_end_offset(), 2 * (p as i64 + 3));
        assert_eq!(log.recovery_point(), log.log_end_offset());
        assert_eq!(log.topic_id(), [p as u8; 16]);
    }
}

#[test]
fn unclean_restart_recovers_flushed_data_and_checkpoints_advance() {
    let m = MemStorage::new();
    let mgr = LogManager::open(cfg(&m), 0).unwrap();
    fill(&mgr, 3);
    for log in mgr.logs() {
        log.flush().unwrap();
    }
    mgr.checkpoint().unwrap();
    let tp = TopicPartition::new("topic-x", 1);
    mgr.get(&tp)
        .unwrap()
        .append(&mut make_batch(1, 10, 5, 9), 0)
        .unwrap();
    let after = m.crash(CrashMode::LoseUnsynced);
    let mgr2 = LogManager::open(cfg(&after), 0).unwrap();
    assert!(mgr2.failed_logs().is_empty());
    assert_eq!(mgr2.get(&tp).unwrap().log_end_offset(), 8);
    let kept = m.crash(CrashMode::KeepWritten);
    let mgr3 = LogManager::open(cfg(&kept), 0).unwrap();
    assert_eq!(mgr3.get(&tp).unwrap().log_end_offset(), 9);
}

#[test]
fn corruption_below_recovery_point_damages_only_that_partition() {
    let m = MemStorage::new();
    let mgr = LogManager::open(cfg(&m), 0).unwrap();
    fill(&mgr, 3);
    for log in mgr.logs() {
        log.flush().unwrap();
    }
    mgr.checkpoint().unwrap();
    let bad = TopicPartition::new("topic-x", 2);
    let dir = mgr.get(&bad).unwrap().dir();
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = m.read_all(&seg).unwrap();
    bytes[100] ^= 0x10;
    m.write_all(&seg, &bytes).unwrap();
    let crashed = m.crash(CrashMode::KeepWritten);
    let mut c = cfg(&crashed);
    c.verify_flushed_on_recovery = true;
    let mgr2 = LogManager::open(c, 0).unwrap();
    assert!(mgr2.failed_logs().is_empty());
    assert_eq!(mgr2.logs().len(), 3);
    // Only that partition is damaged, and it says where.
    let damaged: Vec<_> = mgr2
        .logs()
        .iter()
        .filter(|l| !l.damage().is_empty())
        .map(|l| l.topic_partition().clone())
        .collect();
    assert_eq!(damaged, vec![bad.clone()]);
    let log = mgr2.get(&bad).unwrap();
    assert!(log.read(0, 1 << 20, i64::MAX, true).is_err());
    // The bytes are still there: nothing was silently truncated.
    assert_eq!(crashed.read_all(&seg).unwrap(), bytes);
}

#[test]
fn delete_log_removes_the_directory() {
    let m = MemStorage::new();
    let mgr = LogManager::open(cfg(&m), 0).unwrap();
    fill(&mgr, 2);
    let tp = TopicPartition::new("topic-x", 0);
    let dir = mgr.get(&tp).unwrap().dir();
    mgr.delete_log(&tp).unwrap();
    assert!(!m.exists(&dir));
    assert!(mgr.get(&tp).is_none());
    // A leftover "-delete" dir from a crash is removed on start.
    let leftover = PathBuf::from("/d1/topic-x-7.0123456789abcdef0123456789abcdef-delete");
    m.create_dir_all(&leftover).unwrap();
    let mgr2 = LogManager::open(cfg(&m), 0).unwrap();
    assert!(!m.exists(&leftover));
    assert_eq!(mgr2.logs().len(), 1);
}

#[test]
fn tick_flushes_per_flush_ms() {
    let m = MemStorage::new();
    let mgr = LogManager::open(cfg(&m), 0).unwrap();
    let tp = TopicPartition::new("a", 0);
    let conf = LogConfig {
        flush_ms: 1000,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    };
    let log = mgr.create_log(&tp, [1; 16], conf).unwrap();
    log.append(&mut make_batch(1, 10, 0, 0), 0).unwrap();
    mgr.tick(500).unwrap();
    assert_eq!(log.recovery_point(), 0);
    mgr.tick(1000).unwrap();
    assert_eq!(log.recovery_point(), 1);
    let msgs = LogConfig {
        flush_messages: 3,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    };
    log.set_config(msgs);
    log.append(&mut make_batch(2, 10, 0, 0), 0).unwrap();
    assert_eq!(log.recovery_point(), 1);
    log.append(&mut make_batch(1, 10, 0, 0), 0).unwrap();
    assert_eq!(log.recovery_point(), 4);
    // The periodic checkpoint (every 60 s by default) records it.
    let ckpt = PathBuf::from("/d1").join(RECOVERY_POINT_CHECKPOINT);
    let ckpt2 = PathBuf::from("/d2").join(RECOVERY_POINT_CHECKPOINT);
    let read = || {
        let mut all = read_checkpoint(&m, &ckpt).unwrap();
        all.extend(read_checkpoint(&m, &ckpt2).unwrap());
        all.get(&tp).copied()
    };
    mgr.tick(59_000).unwrap();
    assert_eq!(read(), None);
    mgr.tick(60_000).unwrap();
    assert_eq!(read(), Some(4));
}

/// Files of Kafka's that the storage layer does not own (the log owns
/// `leader-epoch-checkpoint`, see `leader_epochs`, and `.txnindex`, see
/// `txn_index`: a damaged one is rebuilt from the log).
#[test]
fn kafka_side_files_are_left_alone() {
    let m = MemStorage::new();
    let mgr = LogManager::open(cfg(&m), 0).unwrap();
    fill(&mgr, 2);
    let dir = mgr.get(&TopicPartition::new("topic-x", 1)).unwrap().dir();
    mgr.shutdown().unwrap();
    let extra = [
        PathBuf::from("/d1/meta.properties"),
        PathBuf::from("/d1/replication-offset-checkpoint"),
        PathBuf::from("/d1/cleaner-offset-checkpoint"),
        dir.join("00000000000000000000.snapshot"),
    ];
    for p in &extra {
        m.write_all(p, b"kafka").unwrap();
    }
    let txn_index = dir.join("00000000000000000000.txnindex");
    m.write_all(&txn_index, b"kafka").unwrap();
    let mgr2 = LogManager::open(cfg(&m), 0).unwrap();
    assert!(mgr2.failed_logs().is_empty());
    assert_eq!(mgr2.logs().len(), 2);
    for p in &extra {
        assert_eq!(m.read_all(p).unwrap(), b"kafka", "{}", p.display());
    }
    // The batches hold no aborted transaction: rebuilt empty.
    assert_eq!(m.read_all(&txn_index).unwrap(), b"");
}
