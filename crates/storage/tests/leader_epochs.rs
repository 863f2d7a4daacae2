//! The leader epoch cache (`weir_storage::epochs`) and how the log keeps
//! it: Kafka's `assign`/`endOffsetFor`/truncation rules as tables, the
//! exact bytes of `leader-epoch-checkpoint`, the log start and truncations
//! trimming it, and a missing or malformed file rebuilt from the batches.

use crate::common;

use common::{data_dir, make_batch, segment_dir, tp};
use std::sync::Arc;
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::epochs::{
    EpochEntry, LEADER_EPOCH_CHECKPOINT, LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET,
};
use weir_storage::{Log, LogConfig, LogManager, LogManagerConfig};

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs
        .iter()
        .map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        })
        .collect()
}

fn cache(pairs: &[(i32, i64)]) -> LeaderEpochCache {
    let c = LeaderEpochCache::from_entries(entries(pairs));
    assert_eq!(c.entries(), entries(pairs), "a well-formed table");
    c
}

/// Kafka's `LeaderEpochFileCache.assign`, case by case: (entries before,
/// assigned, changed, entries after).
#[test]
fn assign_follows_kafka() {
    #[allow(clippy::type_complexity)]
    let table: &[(&[(i32, i64)], (i32, i64), bool, &[(i32, i64)])] = &[
        // A first entry.
        (&[], (0, 0), true, &[(0, 0)]),
        // A newer epoch after the latest.
        (&[(0, 0)], (3, 120), true, &[(0, 0), (3, 120)]),
        // The latest epoch again, later: nothing (its start is known).
        (&[(0, 0), (3, 120)], (3, 130), false, &[(0, 0), (3, 120)]),
        // The latest epoch again, at the same offset: nothing.
        (&[(0, 0), (3, 120)], (3, 120), false, &[(0, 0), (3, 120)]),
        // The latest epoch at an earlier offset: replaces it.
        (&[(0, 0), (3, 120)], (3, 100), true, &[(0, 0), (3, 100)]),
        // An older epoch: the newer ones go.
        (&[(0, 0), (3, 120)], (2, 150), true, &[(0, 0), (2, 150)]),
        // A newer epoch starting below existing entries: they go.
        (&[(0, 0), (3, 120)], (4, 50), true, &[(0, 0), (4, 50)]),
        (&[(1, 10), (3, 120)], (4, 5), true, &[(4, 5)]),
        // Negative values are not entries.
        (&[(0, 0)], (-1, 10), false, &[(0, 0)]),
        (&[(0, 0)], (1, -1), false, &[(0, 0)]),
    ];
    for (before, (epoch, start), changed, after) in table {
        let mut c = cache(before);
        assert_eq!(
            c.assign(*epoch, *start),
            *changed,
            "{before:?} assign ({epoch}, {start})"
        );
        assert_eq!(
            c.entries(),
            entries(after),
            "{before:?} assign ({epoch}, {start})"
        );
    }
}

/// Kafka's `endOffsetFor` (the cases of its `LeaderEpochFileCacheTest`):
/// (entries, requested epoch, LEO, answer).
#[test]
fn end_offset_for_follows_kafka() {
    const UNDEFINED: (i32, i64) = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
    #[allow(clippy::type_complexity)]
    let table: &[(&[(i32, i64)], i32, i64, (i32, i64))] = &[
        // Nothing known.
        (&[], 0, 10, UNDEFINED),
        (&[], UNDEFINED_EPOCH, 10, UNDEFINED),
        // The undefined epoch is never answered.
        (&[(2, 5), (3, 6), (4, 7)], UNDEFINED_EPOCH, 10, UNDEFINED),
        // The latest epoch ends at the LEO.
        (&[(2, 5), (3, 6), (4, 7)], 4, 10, (4, 10)),
        // An epoch ends where the next one starts.
        (&[(2, 5), (3, 6), (4, 7)], 2, 10, (2, 6)),
        (&[(2, 5), (3, 6), (4, 7)], 3, 10, (3, 7)),
        // No entry for the requested epoch: the largest below it, and the
        // start of the first above it.
        (&[(0, 10), (2, 13), (4, 17)], 1, 20, (0, 13)),
        (&[(0, 10), (2, 13), (4, 17)], 3, 20, (2, 17)),
        // Below every known epoch (its records are gone): the requested
        // epoch, ending where the earliest known one starts.
        (&[(5, 11), (6, 12), (7, 13)], 4, 20, (4, 11)),
        (&[(5, 11), (6, 12), (7, 13)], 0, 20, (0, 11)),
        // Above the latest: unknown.
        (&[(2, 5), (3, 6), (4, 7)], 5, 10, UNDEFINED),
    ];
    for (pairs, requested, leo, want) in table {
        assert_eq!(
            cache(pairs).end_offset_for(*requested, *leo),
            *want,
            "{pairs:?}, epoch {requested}, LEO {leo}"
        );
    }
}

/// Truncations from the end (the log was cut) and from the start (the log
/// start moved up): (entries, operation, offset, changed, entries after).
#[test]
fn truncations_follow_kafka() {
    let base: &[(i32, i64)] = &[(0, 0), (1, 10), (2, 20)];
    #[allow(clippy::type_complexity)]
    let table: &[(&str, i64, bool, &[(i32, i64)])] = &[
        ("end", 21, false, base),
        ("end", 20, true, &[(0, 0), (1, 10)]),
        ("end", 11, true, &[(0, 0), (1, 10)]),
        ("end", 10, true, &[(0, 0)]),
        ("end", 0, true, &[]),
        // The entry holding the new log start starts there.
        ("start", 0, false, base),
        ("start", 5, true, &[(0, 5), (1, 10), (2, 20)]),
        ("start", 10, true, &[(1, 10), (2, 20)]),
        ("start", 15, true, &[(1, 15), (2, 20)]),
        ("start", 25, true, &[(2, 25)]),
    ];
    for (what, offset, changed, after) in table {
        let mut c = cache(base);
        let got = match *what {
            "end" => c.truncate_from_end(*offset),
            _ => c.truncate_from_start(*offset),
        };
        assert_eq!(got, *changed, "truncate from {what} at {offset}");
        assert_eq!(
            c.entries(),
            entries(after),
            "truncate from {what} at {offset}"
        );
    }
}

#[test]
fn the_checkpoint_text_is_kafkas() {
    let mut c = LeaderEpochCache::default();
    assert_eq!(c.encode(), "0\n0\n");
    c.assign(0, 0);
    c.assign(3, 120);
    assert_eq!(c.encode(), "0\n2\n0 0\n3 120\n");
    assert_eq!(LeaderEpochCache::decode("0\n2\n0 0\n3 120\n").unwrap(), c);
    // Kafka separates the fields by any whitespace.
    assert_eq!(LeaderEpochCache::decode("0\n2\n0  0\n3\t120\n").unwrap(), c);
    for bad in [
        "",
        "1\n0\n",
        "0\n2\n0 0\n",
        "0\n1\n0 0\n3 120\n",
        "0\n1\n0\n",
        "0\n1\n0 0 0\n",
        "0\n1\nx 0\n",
        "0\n1\n-1 0\n",
        "0\nmany\n",
    ] {
        assert!(LeaderEpochCache::decode(bad).is_err(), "{bad:?}");
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

fn open(m: &MemStorage) -> LogManager {
    let mut cfg = LogManagerConfig::with_storage(vec![data_dir()], Arc::new(m.clone()));
    cfg.default_log_config = config();
    cfg.checkpoint_interval_ms = i64::MAX;
    LogManager::open(cfg, 0).unwrap()
}

fn checkpoint_text(m: &MemStorage) -> String {
    String::from_utf8(
        m.read_all(&segment_dir().join(LEADER_EPOCH_CHECKPOINT))
            .unwrap(),
    )
    .unwrap()
}

/// Appends `n` one-record batches as the leader in `epoch`.
fn lead(log: &Log, epoch: i32, n: usize) {
    for i in 0..n {
        log.append_as_leader(&mut make_batch(1, 40, 1_000 + i as i64, 1), 1_000, epoch)
            .unwrap();
    }
}

/// The file's bytes follow the log: an empty checkpoint at creation, an
/// entry per new epoch (from a leader's appends or its becoming leader),
/// trimmed by DeleteRecords and by truncation.
#[test]
fn the_log_writes_its_epochs_as_they_change() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    assert_eq!(checkpoint_text(&m), "0\n0\n");
    assert_eq!(log.latest_epoch(), None);

    lead(&log, 0, 3);
    assert_eq!(checkpoint_text(&m), "0\n1\n0 0\n");
    // Becoming leader in epoch 3 at the LEO, before appending.
    log.assign_epoch_start(3, log.log_end_offset()).unwrap();
    assert_eq!(checkpoint_text(&m), "0\n2\n0 0\n3 3\n");
    lead(&log, 3, 4);
    lead(&log, 5, 2);
    assert_eq!(checkpoint_text(&m), "0\n3\n0 0\n3 3\n5 7\n");
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(log.end_offset_for_epoch(0), (0, 3));
    assert_eq!(log.end_offset_for_epoch(4), (3, 7));
    assert_eq!(log.end_offset_for_epoch(5), (5, 9));
    // Plain appends store the producer's field and assign nothing.
    log.append(&mut make_batch(1, 40, 2_000, 2), 2_000).unwrap();
    assert_eq!(checkpoint_text(&m), "0\n3\n0 0\n3 3\n5 7\n");
    assert!(log.assign_epoch_start(6, log.log_end_offset() + 1).is_err());
    assert!(log.assign_epoch_start(-1, log.log_end_offset()).is_err());

    log.set_high_watermark(log.log_end_offset());
    log.delete_records_before(4).unwrap();
    assert_eq!(checkpoint_text(&m), "0\n2\n3 4\n5 7\n");
    log.truncate_to(7).unwrap();
    assert_eq!(checkpoint_text(&m), "0\n1\n3 4\n");
    assert_eq!(log.end_offset_for_epoch(5), (UNDEFINED_EPOCH, -1));
    log.truncate_fully_and_start_at(40).unwrap();
    assert_eq!(checkpoint_text(&m), "0\n0\n");
    assert_eq!(log.epoch_entries(), vec![]);
}

/// A broker that became leader (an epoch entry at its log end) and lost
/// the leadership before appending has nothing to cut, but the empty
/// epoch goes when it is told to cut at its end: else it would name that
/// epoch in every fetch and be told to cut back again, forever.
#[test]
fn a_cut_at_the_log_end_drops_an_epoch_without_records() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    lead(&log, 1, 3);
    log.assign_epoch_start(9, log.log_end_offset()).unwrap();
    assert_eq!(log.latest_epoch(), Some(9));
    log.truncate_to(log.log_end_offset()).unwrap();
    assert_eq!(log.latest_epoch(), Some(1));
    assert_eq!(checkpoint_text(&m), "0\n1\n1 0\n");
    assert_eq!(log.log_end_offset(), 3);
}

/// A missing, malformed or stale file is rebuilt from the batches'
/// partitionLeaderEpoch at the next start (the log opens in every case)
/// and written back; entries at or above the LEO or below the log start
/// are trimmed.
#[test]
fn a_missing_or_malformed_checkpoint_is_rebuilt_from_the_batches() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    lead(&log, 1, 3);
    lead(&log, 4, 2);
    lead(&log, 7, 2);
    log.set_high_watermark(log.log_end_offset());
    log.delete_records_before(1).unwrap();
    mgr.shutdown().unwrap();
    let want = "0\n3\n1 1\n4 3\n7 5\n";
    assert_eq!(checkpoint_text(&m), want);
    let path = segment_dir().join(LEADER_EPOCH_CHECKPOINT);

    for (case, damage) in [
        ("missing", None),
        ("garbage", Some(&b"kafka"[..])),
        ("a wrong count", Some(&b"0\n5\n1 1\n"[..])),
        ("empty", Some(&b""[..])),
    ] {
        let image = m.crash(CrashMode::KeepWritten);
        match damage {
            None => image.remove_file(&path).unwrap(),
            Some(bytes) => image.write_all(&path, bytes).unwrap(),
        }
        let mgr = open(&image);
        assert!(mgr.failed_logs().is_empty(), "{case}");
        let log = mgr.get(&tp()).unwrap();
        assert_eq!(
            log.epoch_entries(),
            entries(&[(1, 1), (4, 3), (7, 5)]),
            "{case}"
        );
        assert_eq!(checkpoint_text(&image), want, "{case}: written back");
    }

    // A file ahead of the log (entries the log no longer has).
    let image = m.crash(CrashMode::KeepWritten);
    image
        .write_all(&path, b"0\n4\n0 0\n1 1\n7 5\n9 40\n")
        .unwrap();
    let log = open(&image).get(&tp()).unwrap();
    assert_eq!(log.epoch_entries(), entries(&[(1, 1), (7, 5)]));
    assert_eq!(checkpoint_text(&image), "0\n2\n1 1\n7 5\n");
}

/// An epoch's entry is on disk before any batch of that epoch: whatever a
/// crash keeps of the appends, every epoch of a surviving batch is known
/// after the restart, and no entry starts past the log end.
#[test]
fn epochs_survive_a_crash_with_their_batches() {
    let m = MemStorage::new();
    let mgr = open(&m);
    let log = mgr.create_log(&tp(), [1; 16], config()).unwrap();
    lead(&log, 2, 3);
    log.flush().unwrap();
    mgr.checkpoint().unwrap();
    lead(&log, 5, 3);
    let mut modes = vec![CrashMode::LoseUnsynced, CrashMode::KeepWritten];
    modes.extend((0..8).map(|seed| CrashMode::Torn { seed }));
    for mode in modes {
        let log = open(&m.crash(mode)).get(&tp()).unwrap();
        let leo = log.log_end_offset();
        assert!(leo >= 3, "{mode:?}: LEO {leo}");
        let want = if leo > 3 {
            entries(&[(2, 0), (5, 3)])
        } else {
            entries(&[(2, 0)])
        };
        assert_eq!(log.epoch_entries(), want, "{mode:?}: LEO {leo}");
    }
}
