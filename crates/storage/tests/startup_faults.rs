//! Start-up and creation under faults: a topic creation that fails part way
//! (the Nth file creation fails, and the process dies there) never leaves a
//! partial topic after a restart; malformed offset checkpoints do not
//! refuse the start; a full disk does not stop logs from opening; a dir
//! whose clean-shutdown marker cannot be removed goes offline instead of
//! failing the start.

use crate::common;
use common::{make_batch, read_all_batches};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_storage::backend::{CrashMode, FaultyStorage, MemStorage, Storage};
use weir_storage::checkpoint::{
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use weir_storage::{
    CREATING_SUFFIX, KnownTopic, LogConfig, LogManager, LogManagerConfig, StorageError,
    TopicPartition,
};

const TOPIC: &str = "__consumer_offsets";
const ID: [u8; 16] = [0x5a; 16];

fn dirs() -> Vec<PathBuf> {
    vec![PathBuf::from("/d1"), PathBuf::from("/d2")]
}

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        segment_index_bytes: 4096,
        index_interval_bytes: 256,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

fn config(
    storage: Arc<dyn Storage>,
    table: Option<HashMap<String, KnownTopic>>,
) -> LogManagerConfig {
    let mut c = LogManagerConfig::with_storage(dirs(), storage);
    c.default_log_config = log_config();
    c.topic_table = table;
    c
}

fn table(entries: &[(&str, [u8; 16], i32)]) -> Option<HashMap<String, KnownTopic>> {
    Some(
        entries
            .iter()
            .map(|&(n, topic_id, partitions)| {
                (
                    n.to_string(),
                    KnownTopic {
                        topic_id,
                        partitions,
                    },
                )
            })
            .collect(),
    )
}

/// Partitions of `topic` the manager has open, sorted.
fn partitions(mgr: &LogManager, topic: &str) -> Vec<i32> {
    let mut v: Vec<i32> = mgr
        .logs()
        .iter()
        .map(|l| l.topic_partition().clone())
        .filter(|tp| tp.topic == topic)
        .map(|tp| tp.partition)
        .collect();
    v.sort();
    v
}

/// Names in the data dirs that belong to `topic` (partition dirs, intents).
fn leftovers(m: &MemStorage, topic: &str) -> Vec<String> {
    let mut out = Vec::new();
    for d in dirs() {
        for (name, _) in m.list_dir(&d).unwrap_or_default() {
            if name.starts_with(&format!("{topic}-")) || name.starts_with(&format!("{topic}.")) {
                out.push(format!("{}/{name}", d.display()));
            }
        }
    }
    out
}

/// Every file under `dir` with its length.
fn file_sizes(m: &MemStorage, dir: &Path) -> BTreeMap<PathBuf, usize> {
    let mut out = BTreeMap::new();
    for (name, is_dir) in m.list_dir(dir).unwrap() {
        let p = dir.join(&name);
        if is_dir {
            out.extend(file_sizes(m, &p));
        } else {
            out.insert(p.clone(), m.read_all(&p).unwrap().len());
        }
    }
    out
}

#[test]
fn a_creation_failing_at_the_nth_file_is_all_or_nothing_after_a_restart() {
    // 50 partitions of 4 new files each (partition.metadata via its .tmp,
    // .log, .index, .timeindex) after one intent per dir: fail early, in the
    // middle of a partition, at partition boundaries and near the end.
    for n in [0u64, 1, 2, 3, 5, 7, 9, 13, 22, 29, 101, 150, 201] {
        let m = MemStorage::new();
        let f = FaultyStorage::new(m.clone());
        let mgr = LogManager::open(config(Arc::new(f.clone()), table(&[])), 0).unwrap();
        f.set_halt_on_fault(true);
        f.fail_creates_after(n);
        let r = mgr.prepare_logs(TOPIC, ID, 0..50, log_config());
        assert!(r.is_err(), "n={n}: the creation must fail");
        assert!(f.is_halted(), "n={n}: the fault must have happened");
        drop(r);
        drop(mgr);
        // The process died at the fault: whatever it had written is there.
        let made = leftovers(&m, TOPIC);
        for (label, tbl) in [("with a table", table(&[])), ("without a table", None)] {
            let with_table = tbl.is_some();
            let c = m.crash(CrashMode::KeepWritten);
            let mgr = LogManager::open(config(Arc::new(c.clone()), tbl), 0).unwrap();
            let found = partitions(&mgr, TOPIC);
            // With a table that lacks the topic, the creation is undone;
            // without one, it stands only if every partition was made.
            assert!(
                found.is_empty() || (!with_table && found == (0..50).collect::<Vec<_>>()),
                "n={n}, {label}: a partial creation survived the restart: {found:?} (on disk before: {made:?})"
            );
            assert!(
                mgr.failed_logs().is_empty(),
                "n={n}: {:?}",
                mgr.failed_logs()
            );
            let left = leftovers(&c, TOPIC);
            assert!(
                left.iter().all(|n| !n.ends_with(CREATING_SUFFIX)) && left.len() == found.len(),
                "n={n}, {label}: {left:?}"
            );
            if !found.is_empty() {
                continue;
            }
            // A retried creation succeeds and is complete after a restart.
            let pending = mgr.prepare_logs(TOPIC, ID, 0..50, log_config()).unwrap();
            assert_eq!(pending.logs().len(), 50);
            pending.commit();
            drop(mgr);
            let again = LogManager::open(
                config(
                    Arc::new(c.crash(CrashMode::LoseUnsynced)),
                    table(&[(TOPIC, ID, 50)]),
                ),
                0,
            )
            .unwrap();
            assert_eq!(partitions(&again, TOPIC), (0..50).collect::<Vec<_>>());
        }
    }
}

#[test]
fn a_failed_creation_cleans_up_at_once_when_the_process_lives() {
    let m = MemStorage::new();
    let f = FaultyStorage::new(m.clone());
    let mgr = LogManager::open(config(Arc::new(f.clone()), table(&[])), 0).unwrap();
    f.fail_creates_after(30);
    match mgr.prepare_logs(TOPIC, ID, 0..50, log_config()) {
        Err(StorageError::Io { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc_enospc()), "{source}")
        }
        other => panic!("expected an ENOSPC I/O error, got {other:?}"),
    }
    assert_eq!(partitions(&mgr, TOPIC), Vec::<i32>::new());
    assert_eq!(leftovers(&m, TOPIC), Vec::<String>::new());
    f.heal();
    let pending = mgr.prepare_logs(TOPIC, ID, 0..50, log_config()).unwrap();
    pending.commit();
    assert_eq!(partitions(&mgr, TOPIC), (0..50).collect::<Vec<_>>());
    assert_eq!(
        leftovers(&m, TOPIC).len(),
        50,
        "only partition dirs, no intent"
    );
}

fn libc_enospc() -> i32 {
    28
}

#[test]
fn a_crash_before_the_commit_is_undone_unless_the_table_has_the_topic() {
    let m = MemStorage::new();
    let mgr = LogManager::open(config(Arc::new(m.clone()), table(&[])), 0).unwrap();
    // An existing topic with 3 partitions, then 3 more being added.
    mgr.prepare_logs("t", ID, 0..3, log_config())
        .unwrap()
        .commit();
    let pending = mgr.prepare_logs("t", ID, 3..6, log_config()).unwrap();
    let crashed = m.crash(CrashMode::KeepWritten);
    pending.commit();
    let open = |tbl| {
        let c = crashed.crash(CrashMode::KeepWritten);
        (
            LogManager::open(config(Arc::new(c.clone()), tbl), 0).unwrap(),
            c,
        )
    };
    // The table was not rewritten yet: the addition is undone.
    let (old, c) = open(table(&[("t", ID, 3)]));
    assert_eq!(partitions(&old, "t"), vec![0, 1, 2]);
    assert!(
        leftovers(&c, "t")
            .iter()
            .all(|n| !n.ends_with(CREATING_SUFFIX))
    );
    // The table was rewritten: the addition stands.
    let (new, c) = open(table(&[("t", ID, 6)]));
    assert_eq!(partitions(&new, "t"), (0..6).collect::<Vec<_>>());
    assert!(
        leftovers(&c, "t")
            .iter()
            .all(|n| !n.ends_with(CREATING_SUFFIX))
    );
    // No table: complete, so it stands.
    let (none, _) = open(None);
    assert_eq!(partitions(&none, "t"), (0..6).collect::<Vec<_>>());
    // A table entry with another id is another topic: undone.
    let (other, _) = open(table(&[("t", [1; 16], 6)]));
    assert_eq!(partitions(&other, "t"), vec![0, 1, 2]);
}

#[test]
fn a_creation_never_starts_over_an_existing_partition() {
    let m = MemStorage::new();
    let mgr = LogManager::open(config(Arc::new(m.clone()), table(&[])), 0).unwrap();
    mgr.prepare_logs("t", ID, 0..2, log_config())
        .unwrap()
        .commit();
    let log = mgr.get(&TopicPartition::new("t", 1)).unwrap();
    log.append(&mut make_batch(3, 10, 1000, 1), 0).unwrap();
    assert!(matches!(
        mgr.prepare_logs("t", ID, 1..4, log_config()),
        Err(StorageError::LogExists(_))
    ));
    // Nothing was undone: partition 1 keeps its records.
    assert_eq!(partitions(&mgr, "t"), vec![0, 1]);
    assert_eq!(
        mgr.get(&TopicPartition::new("t", 1))
            .unwrap()
            .log_end_offset(),
        3
    );
}

/// Two partitions with records in several segments, the first with its log
/// start moved past its first segment.
fn fill(mgr: &LogManager) {
    mgr.prepare_logs("t", ID, 0..2, log_config())
        .unwrap()
        .commit();
    for p in 0..2 {
        let log = mgr.get(&TopicPartition::new("t", p)).unwrap();
        for i in 0..40 {
            log.append(&mut make_batch(2, 120, 1000 + i, p as u8), 0)
                .unwrap();
        }
        log.set_high_watermark(log.log_end_offset());
        log.flush().unwrap();
    }
    let log = mgr.get(&TopicPartition::new("t", 0)).unwrap();
    let second = log.segment_base_offsets()[1];
    log.delete_records_before(second + 1).unwrap();
}

#[test]
fn malformed_checkpoints_are_ignored_and_every_log_recovered() {
    let m = MemStorage::new();
    let mgr = LogManager::open(config(Arc::new(m.clone()), table(&[])), 0).unwrap();
    fill(&mgr);
    mgr.checkpoint().unwrap();
    let want: Vec<_> = (0..2)
        .map(|p| {
            let log = mgr.get(&TopicPartition::new("t", p)).unwrap();
            let start = log.log_start_offset();
            let first = log.segment_base_offsets()[0];
            let batches = read_all_batches(&log, start);
            (start, batches, log.log_end_offset(), first)
        })
        .collect();
    // A crash (no clean-shutdown marker), then broken checkpoints in every dir.
    let c = m.crash(CrashMode::LoseUnsynced);
    for d in dirs() {
        c.write_all(&d.join(RECOVERY_POINT_CHECKPOINT), b"0\n7\nt 0 12\n")
            .unwrap();
        c.write_all(
            &d.join(LOG_START_OFFSET_CHECKPOINT),
            b"\xff\xfe not a checkpoint",
        )
        .unwrap();
    }
    let mgr = LogManager::open(config(Arc::new(c.clone()), table(&[("t", ID, 2)])), 0)
        .expect("a malformed checkpoint must not refuse the start");
    assert!(mgr.failed_logs().is_empty(), "{:?}", mgr.failed_logs());
    assert!(
        want[0].0 > want[0].3,
        "partition 0's log start is inside a segment"
    );
    for (p, (start, batches, leo, first)) in want.into_iter().enumerate() {
        let log = mgr.get(&TopicPartition::new("t", p as i32)).unwrap();
        assert_eq!(log.log_end_offset(), leo);
        assert_eq!(log.recovery_point(), leo, "recovered fully");
        // Without a log start checkpoint: the first segment's base offset.
        assert_eq!(log.log_start_offset(), first);
        assert_eq!(read_all_batches(&log, start), batches);
    }
    // The next checkpoint rewrites both files in the right format.
    mgr.checkpoint().unwrap();
    for d in dirs() {
        let text =
            String::from_utf8(c.read_all(&d.join(RECOVERY_POINT_CHECKPOINT)).unwrap()).unwrap();
        assert!(text.starts_with("0\n"), "{text:?}");
    }
}

#[test]
fn a_clean_restart_on_a_full_disk_opens_every_log_and_serves_reads() {
    let m = MemStorage::new();
    let mgr = LogManager::open(config(Arc::new(m.clone()), table(&[])), 0).unwrap();
    fill(&mgr);
    let want: Vec<_> = mgr
        .logs()
        .iter()
        .map(|l| {
            (
                l.topic_partition().clone(),
                read_all_batches(l, l.log_start_offset()),
            )
        })
        .collect();
    mgr.shutdown().unwrap();
    drop(mgr);
    let c = m.crash(CrashMode::LoseUnsynced);
    let sizes: Vec<_> = dirs().iter().map(|d| file_sizes(&c, d)).collect();
    let f = FaultyStorage::new(c.clone());
    f.set_disk_full(true);
    let mgr = LogManager::open(config(Arc::new(f.clone()), table(&[("t", ID, 2)])), 0)
        .expect("a full disk must not refuse the start");
    assert!(mgr.failed_logs().is_empty(), "{:?}", mgr.failed_logs());
    assert!(mgr.offline_dirs().is_empty(), "{:?}", mgr.offline_dirs());
    for (tp, batches) in &want {
        let log = mgr.get(tp).unwrap();
        assert_eq!(&read_all_batches(&log, log.log_start_offset()), batches);
    }
    // Opening grew no file (the marker is gone, nothing else changed size).
    for (d, before) in dirs().iter().zip(&sizes) {
        let mut before = before.clone();
        before.remove(&d.join(CLEAN_SHUTDOWN_FILE));
        assert_eq!(&file_sizes(&c, d), &before);
    }
    // Writing needs space: an append fails with ENOSPC and changes nothing.
    let log = mgr.get(&TopicPartition::new("t", 1)).unwrap();
    let leo = log.log_end_offset();
    match log.append(&mut make_batch(1, 10, 5000, 9), 0) {
        Err(StorageError::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(28)),
        other => panic!("expected ENOSPC, got {other:?}"),
    }
    assert_eq!(log.log_end_offset(), leo);
    // Space again: appends work, indexes included.
    f.heal();
    for i in 0..40 {
        log.append(&mut make_batch(2, 120, 6000 + i, 7), 0).unwrap();
    }
    assert_eq!(log.log_end_offset(), leo + 80);
    mgr.shutdown().unwrap();
    let again = LogManager::open(config(Arc::new(c.clone()), None), 0).unwrap();
    assert!(again.failed_logs().is_empty());
    assert_eq!(
        again
            .get(&TopicPartition::new("t", 1))
            .unwrap()
            .log_end_offset(),
        leo + 80
    );
}

#[test]
fn a_marker_that_cannot_be_removed_takes_its_dir_offline() {
    let m = MemStorage::new();
    let mgr = LogManager::open(config(Arc::new(m.clone()), table(&[])), 0).unwrap();
    fill(&mgr);
    mgr.shutdown().unwrap();
    drop(mgr);
    let f = FaultyStorage::new(m.clone());
    f.set_fail_dir_ops(true);
    let mgr = LogManager::open(config(Arc::new(f.clone()), None), 0)
        .expect("an undeletable marker must not refuse the start");
    let offline: Vec<_> = mgr.offline_dirs().keys().cloned().collect();
    assert_eq!(offline, dirs());
    assert!(mgr.logs().is_empty());
    let failed = mgr.failed_logs();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed.values().all(|r| r.contains("offline")), "{failed:?}");
    assert!(
        mgr.create_log(&TopicPartition::new("u", 0), ID, log_config())
            .is_err()
    );
    // Nothing is written to an offline dir; the marker stays true, so the
    // next start with a working disk opens everything cleanly.
    mgr.shutdown().unwrap();
    f.heal();
    let mgr = LogManager::open(config(Arc::new(f), None), 0).unwrap();
    assert!(mgr.offline_dirs().is_empty());
    assert_eq!(partitions(&mgr, "t"), vec![0, 1]);
}
