//! Table-style tests of the log: append, read, roll, indexes, timestamps,
//! truncation, restart.

use crate::common;
use common::*;
use std::sync::Arc;
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{FileStorage, Storage};
use weir_storage::index::{parse_offset_index, parse_time_index};
use weir_storage::{LogConfig, StorageError, TimestampType};

#[test]
fn offsets_are_assigned_from_leo_and_reads_return_whole_batches() {
    let (_m, s) = mem();
    let log = new_log(s, small_config());
    let mut a = make_batch(3, 10, 1000, b'a');
    let mut b = make_batch(2, 10, 2000, b'b');
    let ia = log.append(&mut a, 5000).unwrap();
    let ib = log.append(&mut b, 5000).unwrap();
    assert_eq!((ia.base_offset, ia.last_offset, ia.record_count), (0, 2, 3));
    assert_eq!((ib.base_offset, ib.last_offset), (3, 4));
    assert_eq!(BatchHeader::parse(&b).unwrap().base_offset, 3);
    assert_eq!(log.log_end_offset(), 5);
    // A fetch in the middle of a batch returns the whole batch.
    let r = log.read(4, 1 << 20, i64::MAX, true).unwrap();
    assert_eq!(r.regions.len(), 1);
    assert_eq!(r.regions[0].read_to_vec().unwrap(), b);
    // max_offset (HW) excludes batches that reach it.
    let r = log.read(0, 1 << 20, 3, true).unwrap();
    assert_eq!(r.regions[0].read_to_vec().unwrap(), a);
    // Byte limit: only whole batches, but min_one_batch returns the first.
    let r = log.read(0, a.len() - 1, i64::MAX, false).unwrap();
    assert_eq!(r.total_bytes, 0);
    let r = log.read(0, a.len() - 1, i64::MAX, true).unwrap();
    assert_eq!(r.total_bytes, a.len());
    let r = log.read(0, a.len() + b.len(), i64::MAX, false).unwrap();
    assert_eq!(r.total_bytes, a.len() + b.len());
    // Out of range both sides; LEO itself is an empty read.
    assert!(matches!(
        log.read(6, 100, i64::MAX, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        log.read(-1, 100, i64::MAX, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.read(5, 100, i64::MAX, true).unwrap().total_bytes, 0);
}

#[test]
fn invalid_requests_are_rejected_whole() {
    let (_m, s) = mem();
    let log = new_log(s, small_config());
    let good = make_batch(1, 10, 1000, b'a');
    let mut bad = make_batch(1, 10, 1000, b'b');
    let last = bad.len() - 1;
    bad[last] ^= 1; // CRC mismatch
    let mut req = [good.clone(), bad].concat();
    assert!(matches!(
        log.append(&mut req, 0),
        Err(StorageError::CorruptRecord { .. })
    ));
    let mut truncated = good[..good.len() - 3].to_vec();
    assert!(matches!(
        log.append(&mut truncated, 0),
        Err(StorageError::CorruptRecord { .. })
    ));
    assert!(matches!(
        log.append(&mut [], 0),
        Err(StorageError::CorruptRecord { .. })
    ));
    let mut big = make_batch(1, 2000, 1000, b'c');
    let mut cfg = small_config();
    cfg.max_message_bytes = 1000;
    log.set_config(cfg);
    assert!(matches!(
        log.append(&mut big, 0),
        Err(StorageError::RecordTooLarge { .. })
    ));
    let mut cfg = small_config();
    cfg.message_timestamp_after_max_ms = 10;
    log.set_config(cfg);
    let mut future = make_batch(1, 10, 1_000_000, b'd');
    assert!(matches!(
        log.append(&mut future, 0),
        Err(StorageError::RejectedRecords {
            invalid_timestamp: true,
            ..
        })
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn log_append_time_rewrites_max_timestamp_and_crc() {
    let (_m, s) = mem();
    let cfg = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..small_config()
    };
    let log = new_log(s, cfg);
    let mut b = make_batch(2, 10, 1000, b'a');
    let info = log.append(&mut b, 777_000).unwrap();
    assert_eq!(info.log_append_time, Some(777_000));
    let h = BatchHeader::parse(&b).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, 777_000);
    h.verify_crc(&b).unwrap();
    assert_eq!(
        log.offset_for_timestamp(777_000).unwrap(),
        Some((0, 777_000))
    );
}

#[test]
fn segments_roll_on_size_and_index_entries_point_at_batch_starts() {
    let (m, s) = mem();
    let log = new_log(s.clone(), small_config());
    let mut sizes = Vec::new();
    for i in 0..40 {
        let mut b = make_batch(2, 100, 1000 + i * 10, i as u8);
        sizes.push(b.len());
        log.append(&mut b, 0).unwrap();
    }
    assert!(log.segment_count() > 5, "{} segments", log.segment_count());
    let bases = log.segment_base_offsets();
    for (i, &base) in bases.iter().enumerate() {
        let bytes = m.read_all(&seg_file(base, ".log")).unwrap();
        assert!(bytes.len() as u64 <= 2048);
        let idx = parse_offset_index(&m.read_all(&seg_file(base, ".index")).unwrap()).unwrap();
        for (rel, pos) in idx {
            let h = BatchHeader::parse(&bytes[pos as usize..]).unwrap();
            assert_eq!(h.last_offset(), base + rel as i64);
        }
        if i + 1 < bases.len() {
            // Rolled segments: indexes trimmed, a final time index entry.
            let tbytes = m.read_all(&seg_file(base, ".timeindex")).unwrap();
            let t = parse_time_index(&tbytes).unwrap();
            assert_eq!(tbytes.len(), t.len() * 12);
            assert!(!t.is_empty());
        } else {
            assert_eq!(
                m.read_all(&seg_file(base, ".index")).unwrap().len(),
                8 * 1024
            );
        }
    }
    let all = read_all_batches(&log, 0);
    assert_eq!(all.len(), 40);
    for (i, (base, _)) in all.iter().enumerate() {
        assert_eq!(*base, 2 * i as i64);
    }
    for off in 0..80 {
        let r = log.read(off, 1, i64::MAX, true).unwrap();
        let h = BatchHeader::parse(&r.regions[0].read_to_vec().unwrap()).unwrap();
        assert!(h.base_offset <= off && off <= h.last_offset());
    }
}

#[test]
fn segment_ms_rolls_on_append_and_tick() {
    let (_m, s) = mem();
    let cfg = LogConfig {
        segment_ms: 1000,
        ..small_config()
    };
    let log = new_log(s, cfg);
    // As in Kafka, the age is measured from the first batch's timestamp to
    // the incoming records' timestamp, not by the wall clock.
    log.append(&mut make_batch(1, 10, 10, 1), 10).unwrap();
    log.append(&mut make_batch(1, 10, 500, 1), 99_999).unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append(&mut make_batch(1, 10, 1500, 1), 1500).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    log.tick(5000).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 3]);
    // The rolled segments were flushed by the tick.
    assert_eq!(log.recovery_point(), 3);
}

#[test]
fn timestamp_lookups() {
    let (_m, s) = mem();
    let log = new_log(s, small_config());
    // Timestamps not monotonic across batches.
    let mut ts_per_batch = Vec::new();
    for i in 0..30i64 {
        let ts = 10_000 + (i * 37 % 11) * 100;
        ts_per_batch.push(ts);
        log.append(&mut make_batch(3, 60, ts, 0), 0).unwrap();
    }
    // Model: first record with timestamp >= target.
    let recs: Vec<(i64, i64)> = ts_per_batch
        .iter()
        .enumerate()
        .flat_map(|(i, &ts)| (0..3).map(move |j| (i as i64 * 3 + j, ts + j)))
        .collect();
    for target in (9_000..11_500).step_by(17) {
        let want = recs.iter().find(|r| r.1 >= target).copied();
        assert_eq!(
            log.offset_for_timestamp(target).unwrap(),
            want,
            "target {target}"
        );
    }
    let max = recs.iter().map(|r| r.1).max().unwrap();
    let want = recs.iter().find(|r| r.1 == max).copied();
    assert_eq!(log.max_timestamp_offset().unwrap(), want);
}

#[test]
fn truncate_and_delete_records() {
    let (_m, s) = mem();
    let log = new_log(s, small_config());
    for i in 0..30 {
        log.append(&mut make_batch(2, 100, 1000, i), 0).unwrap();
    }
    let before = read_all_batches(&log, 0);
    log.set_high_watermark(60);
    log.truncate_to(31).unwrap(); // inside batch 30..31: the batch goes
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(log.high_watermark(), 30);
    assert_eq!(read_all_batches(&log, 0), before[..15].to_vec());
    log.append(&mut make_batch(1, 10, 1000, 1), 0).unwrap();
    assert_eq!(log.log_end_offset(), 31);
    log.truncate_to(10).unwrap();
    assert_eq!(read_all_batches(&log, 0), before[..5].to_vec());
    log.set_high_watermark(10);
    assert!(log.delete_records_before(11).is_err());
    let segs = log.segment_count();
    assert_eq!(log.delete_records_before(9).unwrap(), 9);
    // The segments below go at the next retention run (retention.rs).
    assert_eq!(log.segment_count(), segs);
    assert!(matches!(
        log.read(8, 100, i64::MAX, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(log.read(9, 100, i64::MAX, true).unwrap().total_bytes > 0);
    log.truncate_to(0).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.segment_count()
        ),
        (0, 0, 1)
    );
}

#[test]
fn clean_and_unclean_reopen_give_the_same_log() {
    for clean in [true, false] {
        let (_m, s) = mem();
        let log = new_log(s.clone(), small_config());
        for i in 0..25 {
            log.append(&mut make_batch(3, 50, 1000 + i, i as u8), 0)
                .unwrap();
        }
        let before = read_all_batches(&log, 0);
        let segs = log.segment_base_offsets();
        if clean {
            log.close().unwrap();
        }
        let rp = if clean { log.log_end_offset() } else { 0 };
        drop(log);
        let log = reopen(s.clone(), small_config(), rp, clean).unwrap();
        assert_eq!(log.segment_base_offsets(), segs);
        assert_eq!(log.log_end_offset(), 75);
        assert_eq!(read_all_batches(&log, 0), before);
        assert_eq!(log.topic_id(), [9; 16]);
        log.append(&mut make_batch(1, 5, 2000, 0), 0).unwrap();
        assert_eq!(log.log_end_offset(), 76);
    }
}

#[test]
fn real_files_give_a_sendfile_descriptor() {
    let tmp = tempfile::tempdir().unwrap();
    let s: Arc<dyn Storage> = Arc::new(FileStorage);
    let log = weir_storage::Log::create(s.clone(), tmp.path(), &tp(), [1; 16], small_config(), 0)
        .unwrap();
    let mut b = make_batch(2, 10, 1000, 3);
    log.append(&mut b, 0).unwrap();
    let r = log.read(0, 1000, i64::MAX, true).unwrap();
    assert!(r.regions[0].raw_fd().is_some());
    assert_eq!(r.regions[0].read_to_vec().unwrap(), b);
    let dir = tmp.path().join("t-0");
    let meta = std::fs::read_to_string(dir.join("partition.metadata")).unwrap();
    assert_eq!(meta, "version: 0\ntopic_id: AQEBAQEBAQEBAQEBAQEBAQ\n");
    assert_eq!(
        std::fs::read(dir.join("00000000000000000000.log")).unwrap(),
        b
    );
    assert_eq!(
        std::fs::metadata(dir.join("00000000000000000000.index"))
            .unwrap()
            .len(),
        8192
    );
    log.close().unwrap();
    assert_eq!(
        std::fs::metadata(dir.join("00000000000000000000.index"))
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        std::fs::metadata(dir.join("00000000000000000000.timeindex"))
            .unwrap()
            .len(),
        12
    );
}
