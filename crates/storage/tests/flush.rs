//! `flush.messages=1` with group commit: an append acknowledged after
//! `flush_through` returned survives any crash, and the indexes recovery
//! trusts (segments before the one holding the recovery point) are durable.
//!
//! Several threads append and flush concurrently, as the broker's produce
//! handler does (append under the lock, sync after it, syncs grouped). At
//! a few points while they run, the set of acknowledged batches and the
//! recovery point are taken, then a crash image; every image must reopen
//! with all the batches acknowledged before it.

use crate::common;
use common::*;
use std::sync::{Arc, Mutex};
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::index::{parse_offset_index, parse_time_index};
use weir_storage::{Log, LogConfig};

fn config() -> LogConfig {
    LogConfig {
        flush_messages: 1,
        ..small_config()
    }
}

/// Batches as stored, with their base offsets.
type Batches = Vec<(i64, Vec<u8>)>;
/// (crash image, recovery point, acknowledged batches) at one moment.
type Image = (MemStorage, i64, Batches);

/// Four threads append 40 batches each with a sync per append; a fifth
/// takes crash images while they run.
fn run_concurrent(crash: impl Fn(&MemStorage, u64) -> MemStorage + Send + Sync) -> Vec<Image> {
    let (m, s) = mem();
    let log = Arc::new(new_log(s, config()));
    let acked: Arc<Mutex<Batches>> = Arc::default();
    let images: Arc<Mutex<Vec<Image>>> = Arc::default();
    std::thread::scope(|scope| {
        for t in 0..4u8 {
            let (log, acked) = (log.clone(), acked.clone());
            scope.spawn(move || {
                for i in 0..40usize {
                    let mut b = make_batch(1 + i % 3, 20 + (i * 7 + t as usize) % 90, 1_000, t);
                    let (info, flush) = log.append_deferring_flush(&mut b, 0).unwrap();
                    let end = flush.expect("flush.messages=1 asks for a sync per append");
                    assert_eq!(end, info.last_offset + 1);
                    log.flush_through(end, 0).unwrap();
                    assert!(log.recovery_point() >= end);
                    acked.lock().unwrap().push((info.base_offset, b));
                }
            });
        }
        let (log, acked, images, m) = (log.clone(), acked.clone(), images.clone(), m.clone());
        let crash = &crash;
        scope.spawn(move || {
            for k in 0..12u64 {
                std::thread::sleep(std::time::Duration::from_micros(300));
                // Acknowledged before the image: must survive it.
                // The recovery point as the log manager checkpoints it.
                let (rp, ack) = {
                    let a = acked.lock().unwrap();
                    (log.checkpoint_recovery_point(), a.clone())
                };
                let c = crash(&m, k);
                images.lock().unwrap().push((c, rp, ack));
            }
        });
    });
    // And one image after everything was acknowledged.
    let all = acked.lock().unwrap().clone();
    let rp = log.checkpoint_recovery_point();
    let mut images = std::mem::take(&mut *images.lock().unwrap());
    images.push((crash(&m, 99), rp, all));
    images
}

fn check_image(c: &MemStorage, rp: i64, acked: &[(i64, Vec<u8>)], what: &str) {
    for checkpoint in [0, rp] {
        let s: Arc<dyn Storage> = Arc::new(c.clone());
        let log = reopen(s, config(), checkpoint, false)
            .unwrap_or_else(|e| panic!("{what}, checkpoint {checkpoint}: {e}"));
        let got = read_all_batches(&log, 0);
        for (base, b) in acked {
            let found = got.iter().find(|(o, _)| o == base);
            assert!(
                found.is_some_and(|(_, g)| g == b),
                "{what}, checkpoint {checkpoint}: acknowledged batch at {base} lost"
            );
        }
        check_trusted_indexes(c, &log, &got, checkpoint, what);
    }
}

/// Indexes of the segments before the one holding the recovery point are
/// loaded as they are on disk: they must equal a fresh log's.
fn check_trusted_indexes(c: &MemStorage, log: &Log, got: &[(i64, Vec<u8>)], rp: i64, what: &str) {
    let (fm, fs) = mem();
    let fresh = new_log(fs, config());
    for (_, b) in got {
        fresh.append(&mut b.clone(), 0).unwrap();
    }
    let fresh_bases = fresh.segment_base_offsets();
    let holder = log
        .segment_base_offsets()
        .into_iter()
        .rfind(|&b| b <= rp)
        .unwrap_or(i64::MIN);
    // The fresh log's last segment is active (untrimmed): compare the others.
    for &base in fresh_bases.iter().rev().skip(1) {
        if base >= holder {
            continue;
        }
        let a = parse_offset_index(&c.read_all(&seg_file(base, ".index")).unwrap()).unwrap();
        let b = parse_offset_index(&fm.read_all(&seg_file(base, ".index")).unwrap()).unwrap();
        assert_eq!(a, b, "{what}: offset index of trusted segment {base}");
        let a = parse_time_index(&c.read_all(&seg_file(base, ".timeindex")).unwrap()).unwrap();
        let b = parse_time_index(&fm.read_all(&seg_file(base, ".timeindex")).unwrap()).unwrap();
        assert_eq!(a, b, "{what}: time index of trusted segment {base}");
    }
    let leo = got
        .last()
        .map_or(0, |(_, b)| BatchHeader::parse(b).unwrap().last_offset() + 1);
    assert_eq!(log.log_end_offset(), leo, "{what}");
}

#[test]
fn acknowledged_appends_survive_a_power_loss() {
    let images = run_concurrent(|m, _| m.crash(CrashMode::LoseUnsynced));
    assert!(images.iter().any(|(_, _, a)| !a.is_empty()));
    for (i, (c, rp, acked)) in images.iter().enumerate() {
        check_image(c, *rp, acked, &format!("image {i}"));
    }
}

/// The same with power losses and torn writes mixed, where a file created
/// (a rolled segment's) since its directory's last sync is gone after the
/// crash: an acknowledged batch in a new segment must not vanish with the
/// segment's directory entry.
#[test]
fn acknowledged_appends_survive_a_power_loss_that_undoes_unsynced_directory_entries() {
    let images = run_concurrent(|m, k| {
        m.crash(if k % 2 == 0 {
            CrashMode::LoseUnsynced
        } else {
            CrashMode::Torn { seed: k }
        })
    });
    assert!(images.iter().any(|(_, _, a)| !a.is_empty()));
    for (i, (c, rp, acked)) in images.iter().enumerate() {
        check_image(c, *rp, acked, &format!("image {i}"));
    }
}

/// The first segment's files are created with the log: a batch
/// acknowledged before any roll must survive a power loss, which undoes
/// directory entries not yet synced.
#[test]
fn a_batch_acknowledged_before_the_first_roll_survives_undone_directory_entries() {
    let (m, s) = mem();
    let log = new_log(s, config());
    let mut b = make_batch(2, 50, 1_000, 1);
    let (info, flush) = log.append_deferring_flush(&mut b, 0).unwrap();
    log.flush_through(flush.expect("a sync is asked for"), 0)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0], "no roll yet");
    let c = m.crash(CrashMode::LoseUnsynced);
    check_image(
        &c,
        log.checkpoint_recovery_point(),
        &[(info.base_offset, b)],
        "first segment",
    );
}

#[test]
fn acknowledged_appends_survive_torn_writes() {
    let images = run_concurrent(|m, k| m.crash(CrashMode::Torn { seed: k }));
    for (i, (c, rp, acked)) in images.iter().enumerate() {
        check_image(c, *rp, acked, &format!("torn image {i}"));
    }
}

#[test]
fn one_sync_covers_earlier_appends() {
    // Two appends, one flush through the second: both are durable and the
    // first needs no sync of its own.
    let (m, s) = mem();
    let log = new_log(s, config());
    let mut a = make_batch(2, 10, 1_000, 1);
    let mut b = make_batch(1, 10, 1_000, 2);
    let (ia, fa) = log.append_deferring_flush(&mut a, 0).unwrap();
    let (_, fb) = log.append_deferring_flush(&mut b, 0).unwrap();
    assert_eq!(fa, Some(ia.last_offset + 1));
    log.flush_through(fb.unwrap(), 0).unwrap();
    assert_eq!(log.recovery_point(), 3);
    // Nothing left to sync: the first append's flush returns at once.
    log.flush_through(fa.unwrap(), 0).unwrap();
    let c = m.crash(CrashMode::LoseUnsynced);
    let rec = reopen(Arc::new(c), config(), 0, false).unwrap();
    assert_eq!(read_all_batches(&rec, 0), vec![(0, a), (2, b)]);
}

#[test]
fn without_a_flush_policy_nothing_is_asked_for() {
    let (_m, s) = mem();
    let log = new_log(s, small_config());
    let (_, f) = log
        .append_deferring_flush(&mut make_batch(1, 10, 1_000, 1), 0)
        .unwrap();
    assert_eq!(f, None);
    assert_eq!(log.recovery_point(), 0);
}
