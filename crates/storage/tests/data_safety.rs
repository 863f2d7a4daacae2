//! Data-safety reproductions: a torn tail left by a failed write or
//! appended after a clean shutdown must never cost acknowledged records,
//! and damage below the recovery point must never make a read skip or
//! return records other than the ones asked for.

use crate::common;

use common::*;
use std::sync::Arc;
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{CrashMode, FaultyStorage, MemStorage, Storage};
use weir_storage::testing::batch_layout;
use weir_storage::{LogConfig, StorageError};

/// One record per batch, `flush.messages=1`: every append is synced before
/// it returns, like an acknowledged produce with `log.flush.interval.messages=1`.
fn synced_config() -> LogConfig {
    LogConfig {
        flush_messages: 1,
        ..small_config()
    }
}

fn log_len(m: &MemStorage, base: i64) -> usize {
    m.read_all(&seg_file(base, ".log")).unwrap().len()
}

/// Every record offset readable from 0, through the public read API.
fn readable_offsets(log: &weir_storage::Log) -> Vec<i64> {
    read_all_batches(log, 0)
        .iter()
        .flat_map(|(base, b)| {
            let h = BatchHeader::parse(b).unwrap();
            *base..=h.last_offset()
        })
        .collect()
}

/// A log with one large segment of `n` one-record batches, closed
/// cleanly; returns the storage and the log end offset.
fn closed_log(config: &LogConfig, n: i64) -> (MemStorage, Arc<dyn Storage>, i64) {
    let (m, s) = mem();
    let log = new_log(s.clone(), config.clone());
    for i in 0..n {
        log.append(&mut make_batch(1, 40, 1_000 + i, 1), 1_000)
            .unwrap();
    }
    log.close().unwrap();
    let leo = log.log_end_offset();
    (m, s, leo)
}

/// The junk a failed write or a careless operator leaves after the last
/// batch: random bytes, zeros, and the first part of a valid batch.
fn junk_kinds() -> Vec<(&'static str, Vec<u8>)> {
    let mut random = vec![0u8; 3000];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in random.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let big = make_batch(10, 1000, 5_000, 7);
    assert!(big.len() > 5000);
    vec![
        ("3000 random bytes", random),
        ("8 KiB of zeros", vec![0u8; 8192]),
        ("the first 5000 bytes of a batch", big[..5000].to_vec()),
    ]
}

/// Issue reproduction: stop cleanly, append junk to the active `.log`,
/// start, append 100 synced records, crash, start: all 100 are there.
#[test]
fn junk_after_a_clean_shutdown_is_cut_and_later_records_survive_a_crash() {
    for (what, junk) in junk_kinds() {
        let config = LogConfig {
            segment_bytes: 1 << 20,
            ..synced_config()
        };
        let (m, s, clean_leo) = closed_log(&config, 5);
        let path = seg_file(0, ".log");
        let before = log_len(&m, 0);
        let mut bytes = m.read_all(&path).unwrap();
        bytes.extend_from_slice(&junk);
        m.write_all(&path, &bytes).unwrap();

        let log = reopen(s.clone(), config.clone(), clean_leo, true).unwrap();
        assert_eq!(log.log_end_offset(), clean_leo, "{what}");
        assert_eq!(log_len(&m, 0), before, "{what}: junk cut at start");
        for i in 0..100 {
            let info = log
                .append(&mut make_batch(1, 50, 2_000 + i, 2), 2_000)
                .unwrap();
            assert_eq!(info.base_offset, clean_leo + i, "{what}");
        }
        let acked_leo = log.log_end_offset();
        // kill -9: only synced bytes survive; the recovery point checkpoint
        // still says what the clean shutdown wrote.
        let crashed: Arc<dyn Storage> = Arc::new(m.crash(CrashMode::LoseUnsynced));
        drop(log);
        let log = reopen(crashed, config, clean_leo, false).unwrap();
        assert_eq!(
            log.log_end_offset(),
            acked_leo,
            "{what}: acknowledged records lost"
        );
        assert_eq!(
            readable_offsets(&log),
            (0..acked_leo).collect::<Vec<_>>(),
            "{what}"
        );
    }
}

/// A write that fails part-way (a full disk) is cut from the file before
/// the error is returned, so the segment keeps ending on a batch boundary.
#[test]
fn a_failed_append_is_cut_from_the_segment() {
    let config = synced_config();
    let m = MemStorage::new();
    let faulty = FaultyStorage::new(m.clone());
    let s: Arc<dyn Storage> = Arc::new(faulty.clone());
    let log = new_log(s.clone(), config.clone());
    for i in 0..3 {
        log.append(&mut make_batch(1, 50, 1_000 + i, 1), 1_000)
            .unwrap();
    }
    let before = log_len(&m, 0);
    faulty.set_partial_writes(true);
    faulty.set_disk_full(true);
    let err = log
        .append(&mut make_batch(4, 100, 1_100, 3), 1_100)
        .unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    assert_eq!(log_len(&m, 0), before, "the partial write was cut");
    faulty.heal();
    faulty.set_partial_writes(false);

    // More acknowledged appends, a crash, and everything acknowledged is there.
    for i in 0..10 {
        log.append(&mut make_batch(1, 20, 1_200 + i, 4), 1_200)
            .unwrap();
    }
    let acked = log.log_end_offset();
    assert_eq!(acked, 13);
    let crashed: Arc<dyn Storage> = Arc::new(m.crash(CrashMode::LoseUnsynced));
    drop(log);
    let log = reopen(crashed, config, 0, false).unwrap();
    assert_eq!(log.log_end_offset(), acked);
    assert_eq!(readable_offsets(&log), (0..acked).collect::<Vec<_>>());
}

/// The failed write's bytes are cut even when the cut itself fails at the
/// time: the clean shutdown trims the file to its last batch.
#[test]
fn a_clean_shutdown_trims_what_a_failed_cut_left() {
    let config = synced_config();
    let m = MemStorage::new();
    let faulty = FaultyStorage::new(m.clone());
    let s: Arc<dyn Storage> = Arc::new(faulty.clone());
    let log = new_log(s.clone(), config.clone());
    log.append(&mut make_batch(1, 50, 1_000, 1), 1_000).unwrap();
    let before = log_len(&m, 0);
    // Every write fails (the cut too), each after writing half its bytes.
    faulty.set_partial_writes(true);
    faulty.fail_writes_after(0);
    log.append(&mut make_batch(4, 100, 1_100, 3), 1_100)
        .unwrap_err();
    assert!(log_len(&m, 0) > before, "the fault left bytes behind");
    faulty.heal();
    faulty.set_partial_writes(false);
    log.close().unwrap();
    assert_eq!(log_len(&m, 0), before);
}

/// A flushed log of many one-record batches over several segments, closed
/// cleanly; returns the storage and every original batch by base offset.
/// Batches by base offset, as stored.
type Batches = Vec<(i64, Vec<u8>)>;

fn many_segments(config: &LogConfig) -> (MemStorage, Arc<dyn Storage>, Batches) {
    let (m, s) = mem();
    let log = new_log(s.clone(), config.clone());
    for i in 0..120 {
        log.append(
            &mut make_batch(1 + (i % 3) as usize, 40, 1_000 + i, i as u8),
            1_000,
        )
        .unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    let all = read_all_batches(&log, 0);
    log.close().unwrap();
    (m, s, all)
}

/// Base offsets of the partition's `.log` files, in order.
fn segment_bases(m: &MemStorage) -> Vec<i64> {
    m.list_dir(&segment_dir())
        .unwrap()
        .iter()
        .filter_map(|(n, _)| n.strip_suffix(".log").and_then(|d| d.parse().ok()))
        .collect()
}

/// Damaged `batchLength` fields inside a flushed (inactive) segment: a read
/// before the damage returns intact batches up to it, a read at or inside
/// it fails with CorruptLog, and no read ever returns a batch that does not
/// hold the offset asked for, or one that fails its CRC.
#[test]
fn reads_around_a_corrupt_batch_length_never_skip_or_serve_damage() {
    let config = small_config();
    // How the length is damaged, given the batch's own length and the sizes
    // of the two batches after it.
    type Damage = fn(i32, usize, usize) -> i32;
    let kinds: Vec<(&str, Damage)> = vec![
        ("length + 1", |l, _, _| l + 1),
        ("length - 1", |l, _, _| l - 1),
        ("zero", |_, _, _| 0),
        ("huge", |_, _, _| i32::MAX - 100),
        ("spans the next two batches", |l, a, b| l + (a + b) as i32),
    ];
    for (what, damage) in kinds {
        let (m, s, all) = many_segments(&config);
        let bases = segment_bases(&m);
        assert!(bases.len() >= 4, "{bases:?}");
        let victim_seg = bases[bases.len() / 2];
        let next_seg = bases[bases.len() / 2 + 1];
        let path = seg_file(victim_seg, ".log");
        let mut bytes = m.read_all(&path).unwrap();
        let layout = batch_layout(&bytes);
        assert!(layout.len() >= 5, "{what}: {} batches", layout.len());
        let (pos, h) = layout[2];
        let (a, b) = (layout[3].1.total_size(), layout[4].1.total_size());
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
        bytes[pos + 8..pos + 12].copy_from_slice(&damage(len, a, b).to_be_bytes());
        m.write_all(&path, &bytes).unwrap();
        let damaged_from = h.base_offset;

        let log = reopen(s.clone(), config.clone(), i64::MAX, true).unwrap();
        let leo = log.log_end_offset();
        log.set_high_watermark(leo);
        // Reads in several orders, since damage found by one read changes
        // what the next sees.
        let order: Vec<i64> = (0..leo).chain((0..leo).rev()).collect();
        for o in order {
            let r = log.read(o, 1 << 20, i64::MAX, true);
            let in_damage = o >= damaged_from && o < next_seg;
            match r {
                Err(StorageError::CorruptLog { .. }) => assert!(
                    o >= damaged_from && o < next_seg,
                    "{what}: offset {o} is before the damage at {damaged_from} or in a later segment, yet failed"
                ),
                Err(e) => panic!("{what}: offset {o}: {e}"),
                Ok(r) => {
                    assert!(!r.regions.is_empty(), "{what}: nothing at {o}");
                    let mut first = true;
                    let mut next = None;
                    for region in &r.regions {
                        let got = region.read_to_vec().unwrap();
                        for (p, gh) in batch_layout(&got) {
                            let b = &got[p..p + gh.total_size()];
                            gh.verify_crc(b).unwrap_or_else(|e| {
                                panic!("{what}: read at {o} returned a damaged batch: {e}")
                            });
                            let orig = all.iter().find(|(base, _)| *base == gh.base_offset);
                            assert_eq!(
                                orig.map(|(_, ob)| ob.as_slice()),
                                Some(b),
                                "{what}: read at {o} returned a batch that was never written"
                            );
                            assert!(
                                next.is_none_or(|n| n == gh.base_offset),
                                "{what}: read at {o} skips from {next:?} to {}",
                                gh.base_offset
                            );
                            next = Some(gh.last_offset() + 1);
                            if first {
                                assert!(
                                    gh.base_offset <= o && o <= gh.last_offset(),
                                    "{what}: read at {o} starts at batch {}..={}",
                                    gh.base_offset,
                                    gh.last_offset()
                                );
                                first = false;
                            }
                        }
                    }
                    assert!(
                        !in_damage || o > h.last_offset(),
                        "{what}: offset {o} inside the damaged batch was served"
                    );
                }
            }
        }
        // Reads before the damage reach it and stop there; the damage is
        // reported by the log.
        let d = log.damage();
        assert_eq!(d.len(), 1, "{what}: {d:?}");
        assert_eq!(d[0].0, victim_seg, "{what}");
        assert!(d[0].1.offset <= damaged_from, "{what}: {:?}", d[0]);
    }
}

/// Damage found while recovering (the index of a flushed segment was
/// lost, so it is rebuilt) does not refuse the start: the segment keeps its
/// bytes and reads stop before the damage.
#[test]
fn damage_found_at_start_marks_the_segment_and_keeps_the_rest() {
    let config = small_config();
    let (m, s, all) = many_segments(&config);
    let bases = segment_bases(&m);
    let victim = bases[1];
    let path = seg_file(victim, ".log");
    let mut bytes = m.read_all(&path).unwrap();
    let layout = batch_layout(&bytes);
    let (pos, h) = layout[1];
    bytes[pos + 70] ^= 0xff; // a record byte: CRC mismatch
    m.write_all(&path, &bytes).unwrap();
    s.remove_file(&seg_file(victim, ".index")).unwrap();

    let log = reopen(s.clone(), config.clone(), i64::MAX, true).unwrap();
    let (_, last) = all.last().unwrap();
    let expected_leo = BatchHeader::parse(last).unwrap().last_offset() + 1;
    assert_eq!(log.log_end_offset(), expected_leo);
    let d = log.damage();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].0, d[0].1.offset), (victim, h.base_offset));
    // The bytes are all still there.
    assert_eq!(m.read_all(&path).unwrap().len(), bytes.len());
    // Before the damage: served; at it: CorruptLog; after the segment: served.
    log.set_high_watermark(log.log_end_offset());
    let r = log.read(victim, 1 << 20, i64::MAX, true).unwrap();
    assert_eq!(r.total_bytes, pos);
    assert!(matches!(
        log.read(h.base_offset, 1 << 20, i64::MAX, true),
        Err(StorageError::CorruptLog { .. })
    ));
    let next = bases[2];
    assert!(log.read(next, 1 << 20, i64::MAX, true).is_ok());
}

/// Damage in the active segment below the recovery point (found when its
/// index has to be rebuilt) is kept too: appends go to a new segment at the
/// recovery point, so no offset is handed out twice, and the damaged
/// offsets fail on read.
#[test]
fn damage_in_the_active_segment_moves_appends_to_a_new_segment() {
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..small_config()
    };
    let (m, s, clean_leo) = closed_log(&config, 20);
    let path = seg_file(0, ".log");
    let mut bytes = m.read_all(&path).unwrap();
    let layout = batch_layout(&bytes);
    let (pos, h) = layout[10];
    bytes[pos + 70] ^= 0xff;
    m.write_all(&path, &bytes).unwrap();
    s.remove_file(&seg_file(0, ".index")).unwrap();

    let log = reopen(s.clone(), config, clean_leo, true).unwrap();
    assert_eq!(log.log_end_offset(), clean_leo);
    assert_eq!(log.segment_base_offsets(), vec![0, clean_leo]);
    assert_eq!(m.read_all(&path).unwrap(), bytes, "the bytes are kept");
    let d = log.damage();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].0, d[0].1.offset, d[0].1.position),
        (0, h.base_offset, pos as u64)
    );
    let info = log.append(&mut make_batch(1, 40, 3_000, 2), 3_000).unwrap();
    assert_eq!(info.base_offset, clean_leo);
    log.set_high_watermark(log.log_end_offset());
    for o in 0..=clean_leo {
        let r = log.read(o, 1 << 20, i64::MAX, true);
        if (h.base_offset..clean_leo).contains(&o) {
            assert!(
                matches!(r, Err(StorageError::CorruptLog { .. })),
                "{o}: {r:?}"
            );
        } else {
            assert!(!r.unwrap().regions.is_empty(), "{o}");
        }
    }
}

/// An unclean restart on a full disk: recovery cannot write the indexes it
/// rebuilds nor sync, yet the log opens, serves every record, refuses
/// appends with the disk error, and takes them again once space returns.
#[test]
fn an_unclean_restart_on_a_full_disk_opens_the_log_for_reading() {
    let config = small_config();
    let (m, s) = mem();
    let log = new_log(s.clone(), config.clone());
    for i in 0..60 {
        log.append(&mut make_batch(1, 40, 1_000 + i, 1), 1_000)
            .unwrap();
    }
    log.flush().unwrap();
    let leo = log.log_end_offset();
    assert!(log.segment_count() > 3);
    drop(log);
    // kill -9 with everything synced, then the disk fills up; the index
    // files are lost so recovery must rebuild (and write) every one.
    let crashed = m.crash(CrashMode::LoseUnsynced);
    for (name, _) in crashed.list_dir(&segment_dir()).unwrap() {
        if name.ends_with(".index") || name.ends_with(".timeindex") {
            crashed.remove_file(&segment_dir().join(name)).unwrap();
        }
    }
    let faulty = FaultyStorage::new(crashed);
    faulty.set_disk_full(true);
    let fs: Arc<dyn Storage> = Arc::new(faulty.clone());
    let log = reopen(fs.clone(), config.clone(), 0, false).unwrap();
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(readable_offsets(&log), (0..leo).collect::<Vec<_>>());
    let err = log
        .append(&mut make_batch(1, 40, 2_000, 2), 2_000)
        .unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(log.log_end_offset(), leo);
    faulty.set_disk_full(false);
    let info = log.append(&mut make_batch(1, 40, 2_000, 2), 2_000).unwrap();
    assert_eq!(info.base_offset, leo);
}

/// A roll that fails part-way (its new `.index` cannot be written) leaves
/// no files behind, so the batch acknowledged afterwards in the old segment
/// survives a crash, also when the recovery point is the failed roll's
/// offset. (Found by the storage fuzz engine.)
#[test]
fn a_failed_roll_leaves_no_segment_behind() {
    let config = LogConfig {
        segment_bytes: 700,
        ..small_config()
    };
    let m = MemStorage::new();
    let faulty = FaultyStorage::new(m.clone());
    let s: Arc<dyn Storage> = Arc::new(faulty.clone());
    let log = new_log(s.clone(), config.clone());
    for i in 0..2 {
        log.append(&mut make_batch(1, 100, 1_000 + i, 1), 1_000)
            .unwrap();
    }
    log.flush().unwrap();
    let rp = log.recovery_point();
    assert_eq!(rp, 2);
    // Three batches in one request make a roll due; the roll fails after
    // its .log file was created.
    faulty.fail_writes_after(3);
    let mut three: Vec<u8> = (0..3)
        .flat_map(|i| make_batch(1, 100, 1_100 + i, 2))
        .collect();
    log.append(&mut three, 1_100).unwrap_err();
    faulty.heal();
    assert!(
        !m.exists(&seg_file(2, ".log")),
        "the failed roll's files are gone"
    );
    let info = log
        .append(&mut make_batch(1, 100, 1_200, 3), 1_200)
        .unwrap();
    assert_eq!(info.base_offset, 2);
    drop(log);
    let crashed: Arc<dyn Storage> = Arc::new(m.crash(CrashMode::KeepWritten));
    let log = reopen(crashed, config, rp, false).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(readable_offsets(&log), vec![0, 1, 2]);
}
