//! Crash recovery tests in the style of Kafka's `LogLoaderTest`: damage the
//! files the way a crash or a bad disk would, reopen without the clean
//! shutdown marker, and check that recovery keeps every batch before the
//! damage, serves no corrupt batch, rebuilds indexes that answer like fresh
//! ones, and refuses to silently drop flushed data.

use crate::common;
use common::*;
use rand::{RngExt, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::index::{parse_offset_index, parse_time_index};
use weir_storage::{Log, StorageError};

/// Builds a log of `n` random batches; flushes after `flush_after` batches.
/// Returns the storage, the batches (as stored) and the recovery point.
fn build(seed: u64, n: usize, flush_after: usize) -> (MemStorage, Vec<(i64, Vec<u8>)>, i64) {
    let (m, s) = mem();
    let log = new_log(s, small_config());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rp = 0;
    for i in 0..n {
        let recs = rng.random_range(1..5);
        let size = rng.random_range(1..120);
        let ts = 1_000 + rng.random_range(0..500);
        log.append(&mut make_batch(recs, size, ts, i as u8), 0)
            .unwrap();
        if i + 1 == flush_after {
            log.flush().unwrap();
            rp = log.log_end_offset();
        }
    }
    let batches = read_all_batches(&log, 0);
    (m, batches, rp)
}

/// A log built from scratch with the same batches, for comparing indexes.
fn fresh(batches: &[(i64, Vec<u8>)]) -> (MemStorage, Log) {
    let (m, s) = mem();
    let log = new_log(s, small_config());
    for (_, b) in batches {
        log.append(&mut b.clone(), 0).unwrap();
    }
    // index entries of the active segment reach its file at the latest here
    log.flush().unwrap();
    (m, log)
}

/// The recovered log holds exactly `want`, and its indexes equal a fresh log's.
fn check(m: &MemStorage, log: &Log, want: &[(i64, Vec<u8>)]) {
    let got = read_all_batches(log, 0);
    assert_eq!(got.len(), want.len(), "batch count");
    assert!(got == want, "batches differ");
    let leo = want
        .last()
        .map_or(0, |(_, b)| BatchHeader::parse(b).unwrap().last_offset() + 1);
    assert_eq!(log.log_end_offset(), leo);
    let (fm, flog) = fresh(want);
    // Recovery may leave an empty active segment where a fresh log has none.
    let (rb, fb) = (log.segment_base_offsets(), flog.segment_base_offsets());
    assert!(
        rb.starts_with(&fb) && rb.len() <= fb.len() + 1,
        "{rb:?} vs {fb:?}"
    );
    if rb.len() > fb.len() {
        assert!(
            m.read_all(&seg_file(rb[rb.len() - 1], ".log"))
                .unwrap()
                .is_empty()
        );
    }
    let extra_empty = rb.len() > fb.len();
    let last_fresh = fb.last().copied();
    for base in fb {
        let a = parse_offset_index(&m.read_all(&seg_file(base, ".index")).unwrap()).unwrap();
        let b = parse_offset_index(&fm.read_all(&seg_file(base, ".index")).unwrap()).unwrap();
        assert_eq!(a, b, "offset index of segment {base}");
        let a = parse_time_index(&m.read_all(&seg_file(base, ".timeindex")).unwrap()).unwrap();
        let b = parse_time_index(&fm.read_all(&seg_file(base, ".timeindex")).unwrap()).unwrap();
        if extra_empty && Some(base) == last_fresh && a.len() == b.len() + 1 {
            // Inactive in the recovered log: it got its closing entry.
            assert_eq!(a[..b.len()], b[..], "time index of segment {base}");
        } else {
            assert_eq!(a, b, "time index of segment {base}");
        }
    }
    for off in 0..leo {
        let a = log.read(off, 1, i64::MAX, true).unwrap().regions[0]
            .read_to_vec()
            .unwrap();
        let b = flog.read(off, 1, i64::MAX, true).unwrap().regions[0]
            .read_to_vec()
            .unwrap();
        assert_eq!(a, b, "read at {off}");
    }
    for ts in (900..1_600).step_by(23) {
        assert_eq!(
            log.offset_for_timestamp(ts).unwrap(),
            flog.offset_for_timestamp(ts).unwrap()
        );
    }
    // The recovered log keeps working.
    log.append(&mut make_batch(1, 3, 2_000, 0), 0).unwrap();
}

fn open_unclean(m: &MemStorage, rp: i64) -> Result<Log, StorageError> {
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    reopen(s, small_config(), rp, false)
}

/// Positions of the batches inside the active segment file.
fn active_layout(m: &MemStorage, batches: &[(i64, Vec<u8>)]) -> (i64, Vec<(usize, usize)>) {
    let (_, s) = (m.clone(), Arc::new(m.clone()) as Arc<dyn Storage>);
    let log = reopen(s, small_config(), i64::MAX, true).unwrap();
    let active = *log.segment_base_offsets().last().unwrap();
    drop(log);
    let mut pos = 0;
    let mut out = Vec::new();
    for (base, b) in batches.iter().filter(|(base, _)| *base >= active) {
        let _ = base;
        out.push((pos, b.len()));
        pos += b.len();
    }
    (active, out)
}

#[test]
fn truncation_at_every_byte_of_the_last_three_batches() {
    let (m, batches, rp) = build(1, 40, 10);
    let (active, layout) = active_layout(&m, &batches);
    assert!(
        layout.len() >= 3,
        "active segment holds {} batches",
        layout.len()
    );
    let path = seg_file(active, ".log");
    let full = m.read_all(&path).unwrap();
    let first = layout[layout.len() - 3].0;
    let in_active = batches.len() - layout.len();
    for cut in first..full.len() {
        let c = m.crash(CrashMode::KeepWritten);
        c.write_all(&path, &full[..cut]).unwrap();
        let log = open_unclean(&c, rp).unwrap();
        let kept = layout.iter().filter(|(p, l)| p + l <= cut).count();
        check(&c, &log, &batches[..in_active + kept]);
    }
}

#[test]
fn random_bytes_after_the_active_segment_and_in_its_index() {
    for seed in 0..30 {
        let (m, batches, rp) = build(seed, 30, 12);
        let (active, _) = active_layout(&m, &batches);
        let mut rng = StdRng::seed_from_u64(seed + 1000);
        let c = m.crash(CrashMode::KeepWritten);
        let lp = seg_file(active, ".log");
        let mut log_bytes = c.read_all(&lp).unwrap();
        let junk: Vec<u8> = (0..rng.random_range(1..300))
            .map(|_| rng.random())
            .collect();
        log_bytes.extend_from_slice(&junk);
        c.write_all(&lp, &log_bytes).unwrap();
        let ip = seg_file(active, ".index");
        let mut idx = c.read_all(&ip).unwrap();
        let junk: Vec<u8> = (0..rng.random_range(1..64)).map(|_| rng.random()).collect();
        if rng.random_bool(0.5) {
            idx.extend_from_slice(&junk);
        } else {
            let at = rng.random_range(0..idx.len().saturating_sub(junk.len()).max(1));
            idx[at..at + junk.len()].copy_from_slice(&junk);
        }
        c.write_all(&ip, &idx).unwrap();
        let log = open_unclean(&c, rp).unwrap();
        check(&c, &log, &batches);
    }
}

#[test]
fn bogus_index_below_the_recovery_point_is_rebuilt() {
    let (m, batches, _) = build(7, 30, 30);
    let rp = batches.len() as i64 * 100; // everything flushed
    let c = m.crash(CrashMode::KeepWritten);
    let ip = seg_file(0, ".index");
    let mut idx = c.read_all(&ip).unwrap();
    idx.extend_from_slice(&[0xff; 8]); // oversized, decreasing entry
    c.write_all(&ip, &idx).unwrap();
    let tp = seg_file(0, ".timeindex");
    c.write_all(&tp, &[1, 2, 3]).unwrap();
    for clean in [true, false] {
        let s: Arc<dyn Storage> = Arc::new(c.crash(CrashMode::KeepWritten));
        let cc = c.crash(CrashMode::KeepWritten);
        let s2: Arc<dyn Storage> = Arc::new(cc.clone());
        let _ = s;
        let log = reopen(s2, small_config(), rp.min(1_000_000), clean).unwrap();
        check(&cc, &log, &batches);
    }
}

/// Offsets of a random CRC-covered byte (or length byte) of batch `i`.
fn damage_spot(rng: &mut StdRng, len: usize) -> usize {
    if rng.random_bool(0.1) {
        rng.random_range(8..12) // batchLength
    } else {
        rng.random_range(17..len) // crc .. end
    }
}

fn flip(c: &MemStorage, batches: &[(i64, Vec<u8>)], victim: usize, rng: &mut StdRng) {
    // Find the segment and position of the victim batch.
    let s: Arc<dyn Storage> = Arc::new(c.clone());
    let bases = {
        let log = reopen(s, small_config(), i64::MAX, true).unwrap();
        log.segment_base_offsets()
    };
    let vbase = batches[victim].0;
    let seg = *bases.iter().rev().find(|&&b| b <= vbase).unwrap();
    let pos: usize = batches
        .iter()
        .filter(|(b, _)| *b >= seg && *b < vbase)
        .map(|(_, b)| b.len())
        .sum();
    let path = seg_file(seg, ".log");
    let mut bytes = c.read_all(&path).unwrap();
    let at = pos + damage_spot(rng, batches[victim].1.len());
    bytes[at] ^= 1 << rng.random_range(0..8);
    c.write_all(&path, &bytes).unwrap();
}

#[test]
fn bit_flips_above_the_recovery_point_truncate_at_the_damage() {
    for seed in 0..60 {
        let (m, batches, rp) = build(seed, 30, 10);
        let mut rng = StdRng::seed_from_u64(seed);
        let first_unflushed = batches.iter().position(|(b, _)| *b >= rp).unwrap();
        // Batches in the segment holding the recovery point are scanned too,
        // but only damage above the recovery point may be truncated.
        let victim = rng.random_range(first_unflushed..batches.len());
        let c = m.crash(CrashMode::KeepWritten);
        flip(&c, &batches, victim, &mut rng);
        let log = open_unclean(&c, rp).unwrap();
        check(&c, &log, &batches[..victim]);
    }
}

#[test]
fn bit_flips_below_the_recovery_point_are_reported_not_dropped() {
    let mut found = 0;
    for seed in 0..40 {
        let (m, batches, rp) = build(seed, 30, 20);
        let mut rng = StdRng::seed_from_u64(seed);
        let flushed = batches.iter().position(|(b, _)| *b >= rp).unwrap();
        let victim = rng.random_range(0..flushed);
        let vbase = batches[victim].0;
        let c = m.crash(CrashMode::KeepWritten);
        flip(&c, &batches, victim, &mut rng);
        let logs_before: usize = log_files(&c).iter().map(|(_, n)| n).sum();
        // Segments before the one holding the recovery point are scanned
        // only when asked; either way the broker starts, keeps every byte
        // and never serves the damaged batch once it is found.
        for verify_flushed in [false, true] {
            let s: Arc<dyn Storage> = Arc::new(c.clone());
            let log = Log::open(
                s,
                &segment_dir(),
                tp(),
                small_config(),
                weir_storage::OpenOptions {
                    recovery_point: rp,
                    log_start: 0,
                    clean_shutdown: false,
                    verify_flushed,
                    now_ms: 0,
                },
            )
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let kept: usize = log_files(&c).iter().map(|(_, n)| n).sum();
            assert_eq!(kept, logs_before, "seed {seed}: bytes dropped");
            let damaged = !log.damage().is_empty();
            if verify_flushed {
                assert!(damaged, "seed {seed}: the damage was not found");
            }
            if damaged {
                found += 1;
                log.set_high_watermark(log.log_end_offset());
                for (base, b) in &batches[..victim] {
                    let r = log.read(*base, 1, i64::MAX, true).unwrap();
                    assert_eq!(&r.regions[0].read_to_vec().unwrap()[..b.len()], &b[..]);
                }
                assert!(
                    log.read(vbase, 1, i64::MAX, true).is_err(),
                    "seed {seed}: the damaged batch is served"
                );
                assert!(
                    log.log_end_offset() >= rp,
                    "seed {seed}: offsets handed out again"
                );
            }
        }
    }
    assert!(found > 0, "no flip was found");
}

/// (name, size) of the `.log` files in the partition dir that hold data.
fn log_files(c: &MemStorage) -> Vec<(String, usize)> {
    c.list_dir(&segment_dir())
        .unwrap()
        .into_iter()
        .filter(|(n, _)| n.ends_with(".log"))
        .map(|(n, _)| {
            let len = c.read_all(&segment_dir().join(&n)).unwrap().len();
            (n, len)
        })
        .collect()
}

#[test]
fn torn_crashes_keep_every_flushed_batch() {
    // WEIR_CRASH_SEEDS=N runs more seeds (seed printed on failure).
    let seeds: u64 = std::env::var("WEIR_CRASH_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    for seed in 0..seeds {
        let (m, s) = mem();
        let log = new_log(s, small_config());
        let mut rng = StdRng::seed_from_u64(seed);
        let mut rp = 0;
        for i in 0..rng.random_range(1..60) {
            let recs = rng.random_range(1..5);
            let size = rng.random_range(1..150);
            log.append(
                &mut make_batch(recs, size, 1_000 + rng.random_range(0..300), i as u8),
                0,
            )
            .unwrap();
            if rng.random_bool(0.1) {
                log.flush().unwrap();
                rp = log.log_end_offset();
            }
        }
        let all = read_all_batches(&log, 0);
        let c = m.crash(CrashMode::Torn { seed });
        // Reopened with the recovery point the log manager would have
        // checkpointed last; `rp` (everything flushed) must survive.
        let checkpoint = log.checkpoint_recovery_point();
        assert!(
            checkpoint <= rp,
            "seed {seed}: checkpoint above the flushed data"
        );
        let rec = open_unclean(&c, checkpoint).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let got = read_all_batches(&rec, 0);
        assert!(
            got.len() <= all.len() && got[..] == all[..got.len()],
            "seed {seed}: not a prefix"
        );
        assert!(rec.log_end_offset() >= rp, "seed {seed}: lost flushed data");
        check(&c, &rec, &got);
    }
}

/// A roll syncs nothing. A roll right after a flush leaves the rolled
/// segment below the recovery point (recovery would trust it as it is)
/// with index files no sync has covered yet; until the next flush syncs
/// them, the checkpointed recovery point is that segment's base, so a power
/// loss in between loses no index entry that recovery trusts.
#[test]
fn a_segment_rolled_after_a_flush_is_scanned_until_its_indexes_are_synced() {
    let (m, s) = mem();
    let log = new_log(s, small_config());
    let mut i = 0u8;
    // A flush before every append, so the append that rolls comes right
    // after one: the recovery point is the rolled segment's end.
    while log.segment_base_offsets().len() < 2 {
        log.flush().unwrap();
        log.append(&mut make_batch(3, 100, 1_000 + i64::from(i), i), 0)
            .unwrap();
        i += 1;
    }
    let rolled = log.segment_base_offsets()[0];
    let active = log.segment_base_offsets()[1];
    assert_eq!(
        log.recovery_point(),
        active,
        "the roll came right after a flush"
    );
    assert_eq!(log.checkpoint_recovery_point(), rolled);
    let flushed: Vec<(i64, Vec<u8>)> = read_all_batches(&log, 0)
        .into_iter()
        .filter(|(o, _)| *o < active)
        .collect();
    for (what, mode) in [
        ("power loss", CrashMode::LoseUnsynced),
        ("torn", CrashMode::Torn { seed: 7 }),
    ] {
        let c = m.crash(mode);
        let rec = open_unclean(&c, log.checkpoint_recovery_point())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = read_all_batches(&rec, 0);
        assert!(got.starts_with(&flushed), "{what}: flushed batches lost");
        check(&c, &rec, &got);
    }
    // The next flush syncs them: the checkpoint catches up.
    log.flush().unwrap();
    assert_eq!(log.checkpoint_recovery_point(), log.recovery_point());
    let c = m.crash(CrashMode::LoseUnsynced);
    let rec = open_unclean(&c, log.checkpoint_recovery_point()).unwrap();
    let got = read_all_batches(&rec, 0);
    assert_eq!(got, read_all_batches(&log, 0));
    check(&c, &rec, &got);
}

#[test]
fn a_misleading_index_entry_never_skips_batches() {
    let (m, batches, _) = build(3, 12, 12);
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    let log = reopen(s, small_config(), i64::MAX, true).unwrap();
    log.close().unwrap();
    let first_seg: Vec<&(i64, Vec<u8>)> = {
        let next = log
            .segment_base_offsets()
            .get(1)
            .copied()
            .unwrap_or(i64::MAX);
        batches.iter().filter(|(b, _)| *b < next).collect()
    };
    assert!(first_seg.len() >= 4);
    drop(log);
    // Entry 1 claims offset 1 is at the start of the third batch.
    let pos2: usize = first_seg[..2].iter().map(|(_, b)| b.len()).sum();
    let last_pos: usize = first_seg[..first_seg.len() - 1]
        .iter()
        .map(|(_, b)| b.len())
        .sum();
    let last = first_seg.last().unwrap();
    let last_off = BatchHeader::parse(&last.1).unwrap().last_offset();
    let mut idx = Vec::new();
    for (rel, pos) in [(1i32, pos2 as i32), (last_off as i32, last_pos as i32)] {
        idx.extend_from_slice(&rel.to_be_bytes());
        idx.extend_from_slice(&pos.to_be_bytes());
    }
    m.write_all(&seg_file(0, ".index"), &idx).unwrap();
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    let log = reopen(s, small_config(), i64::MAX, true).unwrap();
    assert_eq!(read_all_batches(&log, 0), batches);
    for off in 0..log.log_end_offset() {
        let r = log.read(off, 1, i64::MAX, true).unwrap();
        let h = BatchHeader::parse(&r.regions[0].read_to_vec().unwrap()).unwrap();
        assert!(
            h.base_offset <= off && off <= h.last_offset(),
            "offset {off}"
        );
    }
}
