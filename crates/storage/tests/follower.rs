//! A follower's log: `Log::append_as_follower` stores the leader's batches
//! byte for byte and refuses anything that would overwrite or reorder
//! offsets; truncation (`truncate_to`, `truncate_fully_and_start_at`)
//! called on the log rewrites the checkpoints, so a crash afterwards
//! recovers the truncated log without damage.

use crate::common;

use common::{data_dir, make_batch, read_all_batches, tp};
use std::sync::Arc;
use weir_protocol::records::header;
use weir_storage::backend::{CrashMode, FaultyStorage, MemStorage};
use weir_storage::checkpoint::{
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, read_checkpoint,
};
use weir_storage::epochs::EpochEntry;
use weir_storage::{Log, LogConfig, LogManager, LogManagerConfig, StorageError, TopicPartition};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_index_bytes: 8 * 1024,
        index_interval_bytes: 256,
        // The leader's timestamps are old to the follower; it keeps them.
        message_timestamp_before_max_ms: 1,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

fn manager(storage: Arc<dyn weir_storage::backend::Storage>) -> LogManager {
    let mut cfg = LogManagerConfig::with_storage(vec![data_dir()], storage);
    cfg.default_log_config = config();
    cfg.checkpoint_interval_ms = i64::MAX;
    LogManager::open(cfg, 0).unwrap()
}

fn open(m: &MemStorage) -> LogManager {
    manager(Arc::new(m.clone()))
}

/// A leader's log (its own manager) with batches of epochs 1 and 3, one of
/// them from a producer with an id, epoch and sequence.
fn leader_batches() -> Vec<(i64, Vec<u8>)> {
    let mgr = open(&MemStorage::new());
    let leader_config = LogConfig {
        message_timestamp_after_max_ms: i64::MAX,
        ..config()
    };
    let leader_config = LogConfig {
        message_timestamp_before_max_ms: LogConfig::default().message_timestamp_before_max_ms,
        ..leader_config
    };
    let log = mgr
        .create_log(&TopicPartition::new("leader", 0), [1; 16], leader_config)
        .unwrap();
    for i in 0..4 {
        let mut b = make_batch(1 + i % 3, 50, 1_000 + i as i64, i as u8);
        if i == 2 {
            b[header::PRODUCER_ID_OFFSET..header::PRODUCER_ID_OFFSET + 8]
                .copy_from_slice(&77i64.to_be_bytes());
            b[header::PRODUCER_EPOCH_OFFSET..header::PRODUCER_EPOCH_OFFSET + 2]
                .copy_from_slice(&2i16.to_be_bytes());
            b[header::BASE_SEQUENCE_OFFSET..header::BASE_SEQUENCE_OFFSET + 4]
                .copy_from_slice(&5i32.to_be_bytes());
            header::write_crc(&mut b);
        }
        let epoch = if i < 2 { 1 } else { 3 };
        log.append_as_leader(&mut b, 1_000_000, epoch).unwrap();
    }
    read_all_batches(&log, 0)
}

fn concat(batches: &[(i64, Vec<u8>)]) -> Vec<u8> {
    batches.iter().flat_map(|(_, b)| b.clone()).collect()
}

/// The follower stores the leader's batches as they are (offsets,
/// timestamps, leader epochs, producer fields), learns the leader's
/// epochs from them, and leaves its high watermark to the caller.
#[test]
fn a_follower_keeps_the_leaders_batches_byte_for_byte() {
    let leader = leader_batches();
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    let info = log
        .append_as_follower(&concat(&leader[..1]), 5_000_000)
        .unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 0));
    let info = log
        .append_as_follower(&concat(&leader[1..]), 5_000_000)
        .unwrap();
    assert_eq!(info.base_offset, leader[1].0);
    assert_eq!(info.log_append_time, None);
    assert_eq!(read_all_batches(&log, 0), leader);
    assert_eq!(
        log.epoch_entries(),
        vec![
            EpochEntry {
                epoch: 1,
                start_offset: 0
            },
            EpochEntry {
                epoch: 3,
                start_offset: leader[2].0
            }
        ]
    );
    assert_eq!(
        log.high_watermark(),
        0,
        "the caller moves the follower's HW"
    );
    let last = leader.last().unwrap();
    let leo = header::BatchHeader::parse(&last.1).unwrap().last_offset() + 1;
    assert_eq!(log.log_end_offset(), leo);
}

/// What would overwrite, reorder or corrupt the log is refused as a whole:
/// nothing of the request is appended.
#[test]
fn a_follower_refuses_overlaps_and_disorder_with_nothing_appended() {
    let leader = leader_batches();
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    log.append_as_follower(&concat(&leader[..2]), 0).unwrap();
    let before = read_all_batches(&log, 0);
    let leo = log.log_end_offset();
    let entries = log.epoch_entries();

    let mut corrupt = concat(&leader[2..]);
    let n = corrupt.len();
    corrupt[n - 1] ^= 1;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("again from 0", concat(&leader)),
        ("the last batch again", concat(&leader[1..])),
        (
            "batches out of order",
            concat(&[leader[3].clone(), leader[2].clone()]),
        ),
        (
            "a batch twice",
            concat(&[leader[2].clone(), leader[2].clone()]),
        ),
        ("a corrupt batch", corrupt),
        ("half a batch", concat(&leader[2..3])[..40].to_vec()),
    ];
    for (case, bytes) in cases {
        let err = log.append_as_follower(&bytes, 0).unwrap_err();
        match case {
            "again from 0" | "the last batch again" => assert!(
                matches!(err, StorageError::UnexpectedAppendOffset { log_end_offset, .. } if log_end_offset == leo),
                "{case}: {err}"
            ),
            "batches out of order" | "a batch twice" => assert!(
                matches!(err, StorageError::OffsetsOutOfOrder { .. }),
                "{case}: {err}"
            ),
            _ => assert!(
                matches!(err, StorageError::CorruptRecord { .. }),
                "{case}: {err}"
            ),
        }
        assert_eq!(log.log_end_offset(), leo, "{case}");
        assert_eq!(read_all_batches(&log, 0), before, "{case}");
        assert_eq!(log.epoch_entries(), entries, "{case}");
    }
    // The right continuation still goes in.
    log.append_as_follower(&concat(&leader[2..]), 0).unwrap();
    assert_eq!(read_all_batches(&log, 0), leader);
}

/// Compaction removes whole batches from the leader's log: a follower
/// takes the batches after such a gap at their offsets, as Kafka does.
#[test]
fn a_follower_keeps_the_gaps_compaction_leaves() {
    let log_dir = MemStorage::new();
    let mgr = open(&log_dir);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    let mut a = make_batch(2, 30, 1_000, 1);
    header::set_base_offset(&mut a, 0);
    let mut b = make_batch(1, 30, 1_000, 2);
    header::set_base_offset(&mut b, 7);
    let mut bytes = a.clone();
    bytes.extend_from_slice(&b);
    log.append_as_follower(&bytes, 0).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(read_all_batches(&log, 0), vec![(0, a), (7, b.clone())]);
    assert_eq!(read_all_batches(&log, 3), vec![(7, b)]);
}

/// The epoch file is written before a batch of a new epoch: when that
/// write fails, the append fails and nothing is appended.
#[test]
fn a_failed_epoch_write_appends_nothing() {
    let leader = leader_batches();
    let m = MemStorage::new();
    let faulty = FaultyStorage::new(m.clone());
    let mgr = manager(Arc::new(faulty.clone()));
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    log.append_as_follower(&concat(&leader[..2]), 0).unwrap();
    faulty.fail_writes_after(0);
    assert!(log.append_as_follower(&concat(&leader[2..]), 0).is_err());
    faulty.heal();
    assert_eq!(read_all_batches(&log, 0), leader[..2]);
    assert_eq!(log.latest_epoch(), Some(1));
    log.append_as_follower(&concat(&leader[2..]), 0).unwrap();
    assert_eq!(read_all_batches(&log, 0), leader);
    assert_eq!(log.latest_epoch(), Some(3));
}

/// A batch of an epoch older than the latest entry (this replica led
/// epoch 5 at 3 and wrote nothing, and its next leader has epoch 3 records
/// from 3) replaces the entries from there, as Kafka's `assign` does: the
/// file must not name epoch 5 from 3 above records of epoch 3, or every
/// fetch of a follower would be told to cut them again.
#[test]
fn an_older_epochs_batch_replaces_a_later_entry_without_records() {
    let leader = leader_batches();
    let m = MemStorage::new();
    let log = open(&m).create_log(&tp(), [1; 16], config()).unwrap();
    log.append_as_follower(&concat(&leader[..2]), 0).unwrap();
    log.assign_epoch_start(5, 3).unwrap();
    log.append_as_follower(&concat(&leader[2..]), 0).unwrap();
    let entry = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_entries(), vec![entry(1, 0), entry(3, 3)]);
    assert_eq!(log.end_offset_for_epoch(3), (3, 7));
    // Epoch 5 is unknown again (above the latest).
    assert_eq!(log.end_offset_for_epoch(5), (-1, -1));
}

fn checkpointed(m: &MemStorage, name: &str) -> Option<i64> {
    read_checkpoint(m, &data_dir().join(name))
        .unwrap()
        .get(&tp())
        .copied()
}

fn crash_modes() -> Vec<CrashMode> {
    let mut modes = vec![CrashMode::LoseUnsynced, CrashMode::KeepWritten];
    modes.extend((0..16).map(|seed| CrashMode::Torn { seed }));
    modes
}

/// Appends `n` one-record batches as leader in `epoch` (unsynced).
fn lead(log: &Log, epoch: i32, n: usize, tag: u8) {
    for i in 0..n {
        log.append_as_leader(&mut make_batch(1, 60, 1_000 + i as i64, tag), 1_000, epoch)
            .unwrap();
    }
}

/// `Log::truncate_to` itself (the replica fetcher's call) lowers the
/// checkpointed recovery point with the cut. Twenty batches synced and
/// checkpointed, a truncation to 10, then appends of a new epoch that are
/// not synced: after every kind of crash the log holds the ten batches
/// below the cut followed by a prefix of the new ones, with no damage
/// (with the old recovery point, 20, recovery would take the torn new
/// tail for damage of synced data), and epochs that match its batches.
#[test]
fn a_crash_after_a_follower_truncation_recovers_the_truncated_log() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    lead(&log, 1, 12, 1);
    lead(&log, 2, 8, 1);
    log.flush().unwrap();
    mgr.checkpoint().unwrap();
    assert_eq!(checkpointed(&m, RECOVERY_POINT_CHECKPOINT), Some(20));

    log.truncate_to(10).unwrap();
    assert_eq!(checkpointed(&m, RECOVERY_POINT_CHECKPOINT), Some(10));
    assert_eq!(
        log.epoch_entries(),
        vec![EpochEntry {
            epoch: 1,
            start_offset: 0
        }]
    );
    let kept = read_all_batches(&log, 0);
    lead(&log, 4, 4, 2);
    let new = read_all_batches(&log, 10);

    for mode in crash_modes() {
        let mgr = open(&m.crash(mode));
        assert!(mgr.failed_logs().is_empty(), "{mode:?}");
        let log = mgr.get(&tp()).unwrap();
        assert!(
            log.damage().is_empty(),
            "{mode:?}: damage {:?}",
            log.damage()
        );
        let got = read_all_batches(&log, 0);
        assert!(got.len() >= 10 && got[..10] == kept[..], "{mode:?}");
        let after = &got[10..];
        assert!(
            after.len() <= new.len() && after == &new[..after.len()],
            "{mode:?}: {} batches after the cut",
            after.len()
        );
        let mut want = vec![EpochEntry {
            epoch: 1,
            start_offset: 0,
        }];
        if !after.is_empty() {
            want.push(EpochEntry {
                epoch: 4,
                start_offset: 10,
            });
        }
        assert_eq!(log.epoch_entries(), want, "{mode:?}");
    }
}

/// A follower below the leader's log start starts over there: no segment,
/// epoch or checkpointed offset of the old log stays, and what it then
/// fetches survives a crash above the new start.
#[test]
fn a_full_truncation_starts_the_log_over_durably() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    lead(&log, 1, 20, 1);
    log.set_high_watermark(15);
    log.flush().unwrap();
    mgr.checkpoint().unwrap();

    log.truncate_fully_and_start_at(50).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark(),
            log.recovery_point()
        ),
        (50, 50, 50, 50)
    );
    assert_eq!(log.segment_base_offsets(), vec![50]);
    assert!(log.epoch_entries().is_empty());
    assert_eq!(checkpointed(&m, RECOVERY_POINT_CHECKPOINT), Some(50));
    assert_eq!(checkpointed(&m, LOG_START_OFFSET_CHECKPOINT), Some(50));

    let mut fetched = make_batch(2, 60, 1_000, 3);
    header::set_base_offset(&mut fetched, 50);
    header::set_partition_leader_epoch(&mut fetched, 6);
    log.append_as_follower(&fetched, 0).unwrap();
    log.flush().unwrap();
    for mode in crash_modes() {
        let mgr = open(&m.crash(mode));
        let log = mgr.get(&tp()).unwrap();
        assert!(log.damage().is_empty(), "{mode:?}");
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (50, 52),
            "{mode:?}"
        );
        assert_eq!(read_all_batches(&log, 50), vec![(50, fetched.clone())]);
        assert_eq!(
            log.epoch_entries(),
            vec![EpochEntry {
                epoch: 6,
                start_offset: 50
            }]
        );
    }
}
