//! Leftover `.cleaned` / `.swap` / `.deleted` files are resolved without
//! losing or duplicating records; injected I/O errors surface as errors and
//! leave the log consistent.

use crate::common;
use common::*;
use std::sync::Arc;
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{CrashMode, FaultyStorage, MemStorage, Storage};
use weir_storage::{Log, StorageError};

fn log_with_segments(m: &MemStorage) -> (Vec<(i64, Vec<u8>)>, Vec<i64>) {
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    let log = new_log(s, small_config());
    for i in 0..30 {
        log.append(&mut make_batch(2, 100, 1000 + i, i as u8), 0)
            .unwrap();
    }
    let batches = read_all_batches(&log, 0);
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    (batches, bases)
}

fn reopen_clean(m: &MemStorage) -> Log {
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    reopen(s, small_config(), i64::MAX, true).unwrap()
}

#[test]
fn swap_replaces_the_segments_it_covers() {
    let m = MemStorage::new();
    let (batches, bases) = log_with_segments(&m);
    assert!(bases.len() >= 4);
    // A "cleaning" of segments 0 and 1 into one: same batches (nothing to
    // remove), written as a swap file, crash before the old ones were removed.
    let mut merged = m.read_all(&seg_file(bases[0], ".log")).unwrap();
    merged.extend(m.read_all(&seg_file(bases[1], ".log")).unwrap());
    let c = m.crash(CrashMode::KeepWritten);
    c.write_all(&seg_file(bases[0], ".log.swap"), &merged)
        .unwrap();
    c.write_all(&seg_file(bases[0], ".index.swap"), &[1, 2, 3])
        .unwrap();
    // And leftovers of an unfinished cleaning and of a delete.
    c.write_all(&seg_file(bases[2], ".log.cleaned"), b"partial junk")
        .unwrap();
    c.write_all(&seg_file(bases[3], ".log.deleted"), b"old")
        .unwrap();
    let log = reopen_clean(&c);
    assert_eq!(read_all_batches(&log, 0), batches);
    let mut want_bases = bases.clone();
    want_bases.remove(1);
    assert_eq!(log.segment_base_offsets(), want_bases);
    for (name, _) in c.list_dir(&segment_dir()).unwrap() {
        assert!(
            !name.ends_with(".swap") && !name.ends_with(".cleaned") && !name.ends_with(".deleted"),
            "{name} left over"
        );
    }
    // Every offset still reads the batch that holds it.
    for off in 0..log.log_end_offset() {
        let r = log.read(off, 1, i64::MAX, true).unwrap();
        let h = BatchHeader::parse(&r.regions[0].read_to_vec().unwrap()).unwrap();
        assert!(h.base_offset <= off && off <= h.last_offset());
    }
}

#[test]
fn a_cleaned_file_without_swap_is_dropped_and_originals_kept() {
    let m = MemStorage::new();
    let (batches, bases) = log_with_segments(&m);
    let c = m.crash(CrashMode::KeepWritten);
    let first = m.read_all(&seg_file(bases[0], ".log")).unwrap();
    c.write_all(
        &seg_file(bases[0], ".log.cleaned"),
        &first[..first.len() / 2],
    )
    .unwrap();
    let log = reopen_clean(&c);
    assert_eq!(read_all_batches(&log, 0), batches);
    assert_eq!(log.segment_base_offsets(), bases);
    assert!(!c.exists(&seg_file(bases[0], ".log.cleaned")));
}

#[test]
fn write_errors_leave_the_log_unchanged() {
    let faulty = FaultyStorage::new(MemStorage::new());
    let s: Arc<dyn Storage> = Arc::new(faulty.clone());
    let log = new_log(s, small_config());
    for i in 0..5 {
        log.append(&mut make_batch(2, 100, 1000, i), 0).unwrap();
    }
    let before = read_all_batches(&log, 0);
    let mut errors = 0;
    for allowed in 0..4 {
        faulty.fail_writes_after(allowed);
        for _ in 0..3 {
            let r = log.append(&mut make_batch(3, 500, 1000, 9), 0);
            if let Err(e) = r {
                errors += 1;
                assert!(matches!(e, StorageError::Io { .. }), "{e}");
            }
        }
        faulty.heal();
        // Whatever got in is whole, consecutive batches after the old ones.
        let now = read_all_batches(&log, 0);
        assert_eq!(now[..before.len()], before[..]);
        let mut next = 0;
        for (base, b) in &now {
            assert_eq!(*base, next);
            next = BatchHeader::parse(b).unwrap().last_offset() + 1;
        }
        assert_eq!(log.log_end_offset(), next);
    }
    assert!(errors >= 4, "only {errors} injected failures surfaced");
    faulty.set_fail_sync(true);
    let rp = log.recovery_point();
    assert!(log.flush().is_err());
    assert_eq!(log.recovery_point(), rp);
    faulty.heal();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

#[test]
fn append_as_leader_stamps_the_epoch() {
    let (_m, s) = mem();
    let log = new_log(s, small_config());
    let mut b = make_batch(2, 10, 1000, 1);
    log.append_as_leader(&mut b, 0, 7).unwrap();
    let h = BatchHeader::parse(&b).unwrap();
    assert_eq!(h.partition_leader_epoch, 7);
    h.verify_crc(&b).unwrap();
    let stored = log.read(0, 1000, i64::MAX, true).unwrap().regions[0]
        .read_to_vec()
        .unwrap();
    assert_eq!(stored, b);
}
