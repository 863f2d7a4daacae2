//! Replication truncation (`LogManager::truncate_to`) followed by a crash:
//! recovery must never trust bytes appended after the truncation that were
//! not synced, never lose what lies below the truncation, and never bring
//! back a log start offset or a producer snapshot the truncation removed.

use crate::common;

use common::{data_dir, make_batch, seg_file, segment_dir, tp};
use std::path::PathBuf;
use std::sync::Arc;
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{CrashMode, FaultyStorage, MemStorage, Storage};
use weir_storage::checkpoint::{
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, read_checkpoint,
};
use weir_storage::{Log, LogConfig, LogManager, LogManagerConfig};

/// 1 KiB segments: seven of the test's batches (~130 bytes) fit in one.
/// No flush policy: appends are synced only by `flush()` and truncations.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_index_bytes: 8 * 1024,
        index_interval_bytes: 256,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// A log manager over `/data` on `m`; checkpoints only when asked.
fn open(m: &MemStorage) -> LogManager {
    let mut cfg = LogManagerConfig::with_storage(vec![data_dir()], Arc::new(m.clone()));
    cfg.default_log_config = config();
    cfg.checkpoint_interval_ms = i64::MAX;
    LogManager::open(cfg, 0).unwrap()
}

/// Appends `n` one-record batches tagged `tag`; returns them as stored.
fn append(log: &Log, n: usize, tag: u8) -> Vec<(i64, Vec<u8>)> {
    let from = log.log_end_offset();
    for i in 0..n {
        log.append(&mut make_batch(1, 60, 1_000 + i as i64, tag), 1_000)
            .unwrap();
    }
    read(log, from)
}

/// Every batch from `from` to the log end, as (base offset, bytes). Panics
/// on a read error or a batch whose CRC fails.
fn read(log: &Log, from: i64) -> Vec<(i64, Vec<u8>)> {
    let leo = log.log_end_offset();
    let mut out = Vec::new();
    let mut next = from;
    while next < leo {
        let r = log
            .read(next, 1 << 16, i64::MAX, true)
            .unwrap_or_else(|e| panic!("read at {next} (LEO {leo}): {e}"));
        assert!(
            !r.regions.is_empty(),
            "nothing to read at {next} (LEO {leo})"
        );
        for region in &r.regions {
            let bytes = region.read_to_vec().unwrap();
            let mut p = 0;
            while p < bytes.len() {
                let h = BatchHeader::parse(&bytes[p..]).unwrap();
                let b = bytes[p..p + h.total_size()].to_vec();
                h.verify_crc(&b)
                    .unwrap_or_else(|e| panic!("batch at {}: {e}", h.base_offset));
                next = h.last_offset() + 1;
                out.push((h.base_offset, b));
                p += h.total_size();
            }
        }
    }
    out
}

fn checkpointed(m: &MemStorage, name: &str) -> Option<i64> {
    read_checkpoint(m, &data_dir().join(name))
        .unwrap()
        .get(&tp())
        .copied()
}

/// Twenty batches, synced and checkpointed (recovery point 20), then a
/// truncation to 10 and three appends that are not synced. A crash may
/// leave any prefix of those appends' bytes, or their length with zeros
/// from any point (a torn write). After every such crash the ten batches
/// below the truncation are there, followed only by a prefix of the new
/// ones, byte for byte: no damage, no failed read, no batch of the old
/// tail.
#[test]
fn a_crash_after_a_truncation_never_trusts_unsynced_appends() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    let old = append(&log, 20, 1);
    log.flush().unwrap();
    mgr.checkpoint().unwrap();
    assert_eq!(checkpointed(&m, RECOVERY_POINT_CHECKPOINT), Some(20));
    assert_eq!(log.segment_base_offsets(), vec![0, 7, 14]);

    mgr.truncate_to(&tp(), 10).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    assert_eq!(
        checkpointed(&m, RECOVERY_POINT_CHECKPOINT),
        Some(10),
        "the checkpointed recovery point is lowered with the truncation"
    );
    let kept = read(&log, 0);
    assert_eq!(kept, old[..10]);
    let new = append(&log, 3, 2);
    assert_eq!(new.first().map(|b| b.0), Some(10));
    // The new batches are in segment 7, below the old recovery point.
    assert_eq!(log.segment_base_offsets(), vec![0, 7]);

    let active = seg_file(7, ".log");
    let synced = m.crash(CrashMode::LoseUnsynced);
    let durable = synced.read_all(&active).unwrap().len();
    let written = m.crash(CrashMode::KeepWritten).read_all(&active).unwrap();
    assert!(durable < written.len(), "the new batches are not synced");

    let mut cases = 0;
    for cut in durable..=written.len() {
        let prefix = written[..cut].to_vec();
        let mut zeroed = prefix.clone();
        zeroed.resize(written.len(), 0);
        for (what, bytes) in [("cut", prefix), ("zeroed", zeroed)] {
            let image = m.crash(CrashMode::LoseUnsynced);
            image.write_all(&active, &bytes).unwrap();
            let case = format!("{what} at byte {cut} of {}", written.len());
            let mgr = open(&image);
            assert!(
                mgr.failed_logs().is_empty(),
                "{case}: {:?}",
                mgr.failed_logs()
            );
            let log = mgr.get(&tp()).unwrap();
            assert!(log.damage().is_empty(), "{case}: damage {:?}", log.damage());
            let got = read(&log, 0);
            assert!(got.len() >= kept.len(), "{case}: {} batches", got.len());
            assert!(
                got[..kept.len()] == kept[..],
                "{case}: a batch below the truncation changed"
            );
            let after = &got[kept.len()..];
            assert!(
                after.len() <= new.len() && after == &new[..after.len()],
                "{case}: after the truncation the log holds {:?}, not a prefix of the new batches",
                after.iter().map(|b| b.0).collect::<Vec<_>>()
            );
            assert_eq!(log.log_end_offset(), 10 + after.len() as i64, "{case}");
            cases += 1;
        }
    }
    assert!(cases > 100, "{cases} crash images");
}

/// A crash at any point of a truncation (every write it makes, in turn,
/// fails and stops the storage there; then a crash of every kind): the
/// batches below the truncation offset are there, followed by a prefix of
/// the old tail (the cut may not have reached the disk), with no damage.
/// The truncation first lowers the checkpointed recovery point below every
/// byte the cut changes, so a half-made cut is a torn tail to recovery.
#[test]
fn a_crash_at_any_write_of_a_truncation_leaves_a_prefix() {
    let mut writes = 0;
    loop {
        let m = MemStorage::new();
        let faulty = FaultyStorage::new(m.clone());
        let mut cfg = LogManagerConfig::with_storage(vec![data_dir()], Arc::new(faulty.clone()));
        cfg.default_log_config = config();
        cfg.checkpoint_interval_ms = i64::MAX;
        let mgr = LogManager::open(cfg, 0).unwrap();
        let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
        let old = append(&log, 20, 1);
        log.flush().unwrap();
        mgr.checkpoint().unwrap();

        faulty.set_halt_on_fault(true);
        faulty.fail_writes_after(writes);
        let done = mgr.truncate_to(&tp(), 10).is_ok();
        let mut modes = vec![CrashMode::LoseUnsynced, CrashMode::KeepWritten];
        modes.extend((0..16).map(|seed| CrashMode::Torn { seed }));
        for mode in modes {
            let case = format!("{mode:?} after {writes} writes of the truncation");
            let mgr = open(&m.crash(mode));
            assert!(
                mgr.failed_logs().is_empty(),
                "{case}: {:?}",
                mgr.failed_logs()
            );
            let log = mgr.get(&tp()).unwrap();
            assert!(log.damage().is_empty(), "{case}: damage {:?}", log.damage());
            let got = read(&log, 0);
            assert!(
                got.len() >= 10 && got == old[..got.len()],
                "{case}: the log holds {:?}",
                got.iter().map(|b| b.0).collect::<Vec<_>>()
            );
            if done {
                assert_eq!(got.len(), 10, "{case}");
            }
        }
        if done {
            break;
        }
        writes += 1;
    }
    assert!(writes > 3, "the truncation made {writes} writes");
}

/// A truncation below the log start offset (a follower whose DeleteRecords
/// ran ahead of the leader's log) restarts the log there; the batches
/// appended and synced after it survive a crash, with the lower log start.
#[test]
fn a_truncation_below_the_log_start_survives_a_crash() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    append(&log, 20, 1);
    log.set_high_watermark(20);
    log.delete_records_before(12).unwrap();
    log.flush().unwrap();
    mgr.checkpoint().unwrap();
    assert_eq!(checkpointed(&m, LOG_START_OFFSET_CHECKPOINT), Some(12));

    mgr.truncate_to(&tp(), 5).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (5, 5));
    assert_eq!(checkpointed(&m, LOG_START_OFFSET_CHECKPOINT), Some(5));
    let new = append(&log, 3, 2);
    log.flush().unwrap();

    for mode in [
        CrashMode::LoseUnsynced,
        CrashMode::KeepWritten,
        CrashMode::Torn { seed: 1 },
    ] {
        let mgr = open(&m.crash(mode));
        assert!(mgr.failed_logs().is_empty(), "{mode:?}");
        let log = mgr.get(&tp()).unwrap();
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (5, 8),
            "{mode:?}"
        );
        assert_eq!(read(&log, 5), new, "{mode:?}");
    }
}

fn snapshot(offset: i64) -> PathBuf {
    segment_dir().join(format!("{offset:020}.snapshot"))
}

fn snapshots(m: &MemStorage) -> Vec<i64> {
    [5, 10, 15, 20, 50]
        .into_iter()
        .filter(|&o| m.exists(&snapshot(o)))
        .collect()
}

/// Producer snapshots describe the producers' state at their offset: the
/// ones above the log end offset after a truncation or a recovery are
/// removed (all of them when no batch stays), as Kafka does.
#[test]
fn producer_snapshots_above_the_log_end_are_removed() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    append(&log, 20, 1);
    for o in [5, 10, 15, 20] {
        m.write_all(&snapshot(o), b"state").unwrap();
    }
    mgr.truncate_to(&tp(), 12).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(snapshots(&m), vec![5, 10]);

    // One the broker wrote at an end offset a crash then took.
    m.write_all(&snapshot(50), b"state").unwrap();
    let image = m.crash(CrashMode::KeepWritten);
    let mgr = open(&image);
    assert_eq!(mgr.get(&tp()).unwrap().log_end_offset(), 12);
    assert_eq!(snapshots(&image), vec![5, 10]);

    mgr.truncate_to(&tp(), 0).unwrap();
    assert!(snapshots(&image).is_empty());
}
