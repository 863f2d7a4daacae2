//! The aborted-transaction index (`.txnindex`): Kafka's bytes, entries
//! written with their markers, queries across segments, truncation,
//! deletion with segments, crashes, damage and its rebuild, all against a
//! model of the transactions.

use crate::common::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use weir_protocol::records::{Compression, EndTxnMarker, RecordBatchBuilder};
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::retention::Retention;
use weir_storage::segment::read_all;
use weir_storage::txn_index::{ENTRY_BYTES, parse};
use weir_storage::{AbortMarker, AbortedTxn, Log, LogConfig, LogManager, LogManagerConfig};

/// A transactional batch of `n` records of producer `pid`.
fn txn_batch(pid: i64, n: usize) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .producer(pid, 0, 0)
        .transactional(true);
    for _ in 0..n {
        b.push(
            1_000,
            None,
            Some(bytes::Bytes::from_static(&[7; 40])),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().as_bytes().to_vec()
}

fn marker(pid: i64, commit: bool) -> Vec<u8> {
    let m = if commit {
        EndTxnMarker::commit(3)
    } else {
        EndTxnMarker::abort(3)
    };
    RecordBatchBuilder::end_txn_marker_batch(0, -1, pid, 0, 1_000, &m)
        .unwrap()
        .as_bytes()
        .to_vec()
}

/// What the partition's producers do, one step at a time.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A transactional batch of producer `p` (opens its transaction).
    Data(u8),
    /// A batch of no producer.
    Plain,
    /// Producer `p` commits (or aborts) whatever it has open.
    End(u8, bool),
}

/// The transactions of the partition as the producer state keeps them:
/// each producer's open transaction's first offset.
#[derive(Default)]
struct Model {
    open: BTreeMap<i64, i64>,
    first_of: HashMap<i64, i64>,
    entries: Vec<AbortedTxn>,
}

impl Model {
    /// Appends `step` to `log`, indexing an abort as the broker does.
    fn apply(&mut self, log: &Log, step: Step) {
        match step {
            Step::Data(p) => {
                let pid = p as i64;
                let info = log.append(&mut txn_batch(pid, 2), 1_000).unwrap();
                if let std::collections::hash_map::Entry::Vacant(v) = self.first_of.entry(pid) {
                    v.insert(info.base_offset);
                    self.open.insert(info.base_offset, pid);
                }
            }
            Step::Plain => {
                log.append(&mut make_batch(1, 30, 1_000, 1), 1_000).unwrap();
            }
            Step::End(p, commit) => {
                let pid = p as i64;
                let first = self.first_of.remove(&pid);
                if let Some(f) = first {
                    self.open.remove(&f);
                }
                let aborts: Vec<AbortMarker> = first
                    .filter(|_| !commit)
                    .map(|first_offset| AbortMarker {
                        batch: 0,
                        producer_id: pid,
                        first_offset,
                        next_open_offset: self.open.keys().next().copied(),
                    })
                    .into_iter()
                    .collect();
                let (info, _) = log
                    .append_ending_txns(&mut marker(pid, commit), 1_000, None, &aborts)
                    .unwrap();
                if !aborts.is_empty() {
                    self.entries.push(AbortedTxn {
                        producer_id: pid,
                        first_offset: aborts[0].first_offset,
                        last_offset: info.base_offset,
                        last_stable_offset: self
                            .open
                            .keys()
                            .next()
                            .copied()
                            .unwrap_or(info.base_offset + 1),
                    });
                }
            }
        }
    }
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            4 => (0u8..4).prop_map(Step::Data),
            1 => Just(Step::Plain),
            3 => (0u8..4, any::<bool>()).prop_map(|(p, c)| Step::End(p, c)),
        ],
        1..80,
    )
}

/// The entries of every `.txnindex` file of the log dir, as the files say.
fn on_disk(storage: &dyn Storage) -> Vec<AbortedTxn> {
    let mut out = Vec::new();
    for (name, _) in storage.list_dir(&segment_dir()).unwrap() {
        let Some(base) = name.strip_suffix(".txnindex") else {
            continue;
        };
        let p = segment_dir().join(&name);
        let bytes = read_all(&*storage.open(&p, false).unwrap()).unwrap();
        let (entries, damage) = parse(&bytes, base.parse().unwrap());
        assert_eq!(damage, None, "{name}");
        out.extend(entries);
    }
    out
}

/// The marker offsets still in the log.
fn markers(log: &Log) -> Vec<i64> {
    read_all_batches(log, log.log_start_offset())
        .into_iter()
        .filter(|(_, b)| {
            weir_protocol::records::BatchHeader::parse(b)
                .unwrap()
                .is_control()
        })
        .map(|(o, _)| o)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The index holds what the model says, in memory, on disk, after a
    /// reopen, and after a rebuild from the batches of a damaged file.
    #[test]
    fn index_matches_the_model(steps in steps()) {
        let (mem, storage) = mem();
        let log = new_log(storage.clone(), small_config());
        let mut model = Model::default();
        for s in &steps {
            model.apply(&log, *s);
        }
        prop_assert_eq!(log.all_aborted_txns(), model.entries.clone());
        prop_assert_eq!(on_disk(&mem), model.entries.clone());
        // Queries: every range against a scan of the model's entries.
        let leo = log.log_end_offset();
        for from in (0..leo).step_by(3) {
            for upper in [from + 1, from + 7, leo] {
                let got = log.aborted_txns(from, upper);
                let want: Vec<_> = model.entries.iter()
                    .filter(|e| e.last_offset >= from && e.first_offset < upper)
                    .copied().collect();
                // The search may stop early only past every overlapping entry.
                prop_assert!(want.starts_with(&got) && got.len() == want.len(),
                    "[{}, {}): got {:?}, want {:?}", from, upper, got, want);
            }
        }
        log.flush().unwrap();
        log.close().unwrap();
        let reopened = reopen(storage.clone(), small_config(), leo, true).unwrap();
        prop_assert_eq!(reopened.all_aborted_txns(), model.entries.clone());
        drop(reopened);

        // Damage a flushed index file: every index is rebuilt from the log.
        let files: Vec<String> = mem.list_dir(&segment_dir()).unwrap().into_iter()
            .map(|(n, _)| n).filter(|n| n.ends_with(".txnindex")).collect();
        if let Some(name) = files.first() {
            let p = segment_dir().join(name);
            let f = mem.open(&p, false).unwrap();
            let len = f.len().unwrap();
            f.set_len(len - 5).unwrap();
            f.sync().unwrap();
            let rebuilt = reopen(storage.clone(), small_config(), leo, false).unwrap();
            prop_assert_eq!(rebuilt.all_aborted_txns(), model.entries.clone());
            prop_assert_eq!(on_disk(&mem), model.entries.clone());
        }
    }

    /// After a crash, the entries that stay are those of markers that
    /// stay: all of them below the recovery point, and above it those the
    /// crash did not take (whole entries lost with nothing torn are the
    /// broker's to index again, replaying from its snapshot: done here by
    /// hand, which makes the index whole).
    #[test]
    fn a_crash_keeps_the_entries_of_the_markers_it_keeps(
        steps in steps(), flushed in 0usize..80, seed in any::<u64>()
    ) {
        let (mem, storage) = mem();
        let log = new_log(storage.clone(), small_config());
        let mut model = Model::default();
        let mut rp = 0;
        for (i, s) in steps.iter().enumerate() {
            model.apply(&log, *s);
            if i == flushed {
                log.flush().unwrap();
                rp = log.recovery_point();
            }
        }
        for mode in [CrashMode::LoseUnsynced, CrashMode::KeepWritten, CrashMode::Torn { seed }] {
            let after: Arc<dyn Storage> = Arc::new(mem.crash(mode));
            let log = reopen(after, small_config(), rp, false).unwrap();
            let kept = markers(&log);
            let want: Vec<_> = model.entries.iter()
                .filter(|e| kept.contains(&e.last_offset)).copied().collect();
            let got = log.all_aborted_txns();
            prop_assert!(got.iter().all(|e| want.contains(e)), "{:?}: {:?} not in {:?}", mode, got, want);
            let flushed: Vec<_> = want.iter().filter(|e| e.last_offset < rp).copied().collect();
            prop_assert!(got.starts_with(&flushed), "{:?}: {:?} lost some of {:?}", mode, got, flushed);
            if matches!(mode, CrashMode::KeepWritten) {
                prop_assert_eq!(&got, &want);
            }
            for e in &want {
                let added = log.append_aborted_txn(*e).unwrap();
                prop_assert_eq!(added, !got.contains(e));
            }
            prop_assert_eq!(log.all_aborted_txns(), want);
        }
    }
}

#[test]
fn entries_are_kafkas_34_bytes_in_the_segment_of_their_marker() {
    let (mem, storage) = mem();
    let log = new_log(storage, small_config());
    let mut model = Model::default();
    // 0-1: producer 5 opens; 2-3: producer 6 opens; 4: 5 aborts (6 still
    // open: LSO 2); 5: 6 aborts (none open: LSO 6).
    for s in [
        Step::Data(5),
        Step::Data(6),
        Step::End(5, false),
        Step::End(6, false),
    ] {
        model.apply(&log, s);
    }
    let p = seg_file(0, ".txnindex");
    let bytes = read_all(&*mem.open(&p, false).unwrap()).unwrap();
    let mut want = Vec::new();
    for (pid, first, last, lso) in [(5i64, 0i64, 4i64, 2i64), (6, 2, 5, 6)] {
        want.extend_from_slice(&0i16.to_be_bytes());
        for v in [pid, first, last, lso] {
            want.extend_from_slice(&v.to_be_bytes());
        }
    }
    assert_eq!(bytes, want);
    assert_eq!(bytes.len(), 2 * ENTRY_BYTES);
    // A segment without an aborted transaction has no file.
    while log.segment_count() == 1 {
        model.apply(&log, Step::Plain);
    }
    model.apply(&log, Step::Data(1));
    model.apply(&log, Step::End(1, true));
    let active = *log.segment_base_offsets().last().unwrap();
    assert!(mem.exists(&seg_file(active, ".log")));
    assert!(!mem.exists(&seg_file(active, ".txnindex")));
}

#[test]
fn an_abort_marker_must_be_a_control_batch_and_a_failed_index_write_appends_nothing() {
    let (_, storage) = mem();
    let log = new_log(storage, LogConfig::default());
    log.append(&mut txn_batch(1, 1), 1_000).unwrap();
    let abort = |batch| AbortMarker {
        batch,
        producer_id: 1,
        first_offset: 0,
        next_open_offset: None,
    };
    // Batch 0 of a data append is no marker; batch 1 does not exist.
    for (records, a) in [(txn_batch(1, 1), abort(0)), (marker(1, false), abort(1))] {
        let mut records = records;
        assert!(matches!(
            log.append_ending_txns(&mut records, 1_000, None, &[a]),
            Err(weir_storage::StorageError::InvalidArgument(_))
        ));
    }
    assert_eq!(log.log_end_offset(), 1);
    // An entry that cannot follow the index's last one refuses the whole
    // append: the marker is not written without its entry.
    log.append_ending_txns(&mut marker(1, false), 1_000, None, &[abort(0)])
        .unwrap();
    let bad = AbortMarker {
        first_offset: 5,
        ..abort(0)
    };
    assert!(
        log.append_ending_txns(&mut marker(1, false), 1_000, None, &[bad])
            .is_err()
    );
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.all_aborted_txns().len(), 1);
    assert_eq!(markers(&log), vec![1]);
}

/// `sync_aborted_txns` (before a producer snapshot) makes entries durable
/// without their log: a crash may then keep an entry whose marker it took.
/// Recovery drops it; an entry whose offset holds no matching marker is
/// garbage, and every index is rebuilt from the batches.
#[test]
fn recovery_drops_entries_without_their_marker_and_rebuilds_garbage() {
    let (mem, storage) = mem();
    let log = new_log(storage, small_config());
    let mut model = Model::default();
    model.apply(&log, Step::Data(1));
    model.apply(&log, Step::End(1, false));
    log.flush().unwrap();
    let rp = log.recovery_point();
    model.apply(&log, Step::Data(2));
    model.apply(&log, Step::End(2, false));
    log.sync_aborted_txns().unwrap();
    assert_eq!(model.entries.len(), 2);
    let after: Arc<dyn Storage> = Arc::new(mem.crash(CrashMode::LoseUnsynced));
    assert_eq!(on_disk(&*after), model.entries, "both entries are durable");
    let reopened = reopen(after.clone(), small_config(), rp, false).unwrap();
    assert_eq!(reopened.log_end_offset(), rp, "the second marker is gone");
    assert_eq!(reopened.all_aborted_txns(), model.entries[..1].to_vec());
    assert_eq!(on_disk(&*after), model.entries[..1].to_vec());
    drop(reopened);

    // Garbage inside the log's offsets: the entry names another producer.
    let p = seg_file(0, ".txnindex");
    let f = after.open(&p, false).unwrap();
    let mut wrong = model.entries[0];
    wrong.producer_id = 9;
    f.write_all_at(&wrong.to_bytes(), 0).unwrap();
    f.sync().unwrap();
    let rebuilt = reopen(after.clone(), small_config(), 0, false).unwrap();
    assert_eq!(rebuilt.all_aborted_txns(), model.entries[..1].to_vec());
}

#[test]
fn truncation_drops_the_entries_of_the_markers_it_cuts() {
    let (mem, storage) = mem();
    let log = new_log(storage, small_config());
    let mut model = Model::default();
    for i in 0..30u8 {
        model.apply(&log, Step::Data(i % 3));
        model.apply(&log, Step::End(i % 3, i % 2 == 0));
    }
    assert!(log.segment_count() > 2, "{}", log.segment_count());
    let all = model.entries.clone();
    assert!(all.len() > 6);
    for cut in [
        all[5].last_offset + 1,
        all[5].last_offset,
        all[2].last_offset - 1,
    ] {
        log.truncate_to(cut).unwrap();
        let want: Vec<_> = all
            .iter()
            .filter(|e| e.last_offset < cut)
            .copied()
            .collect();
        assert_eq!(log.all_aborted_txns(), want, "cut at {cut}");
        assert_eq!(on_disk(&mem), want, "cut at {cut}");
    }
    log.truncate_fully_and_start_at(500).unwrap();
    assert!(log.all_aborted_txns().is_empty());
    assert!(on_disk(&mem).is_empty());
    // An entry may be indexed again where the log is (a replay after a
    // crash), once: and only inside the log.
    let mut model = Model::default();
    model.apply(&log, Step::Data(1));
    model.apply(&log, Step::Data(2));
    model.apply(&log, Step::End(1, false));
    model.apply(&log, Step::End(2, false));
    let entries = model.entries.clone();
    log.truncate_to(entries[1].last_offset).unwrap();
    for e in &entries {
        assert!(!log.append_aborted_txn(*e).unwrap_or(false) || e == &entries[1]);
    }
    assert!(
        log.append_aborted_txn(entries[1]).is_err(),
        "past the log end"
    );
}

#[test]
fn retention_deletes_a_segments_index_with_it() {
    let mem = MemStorage::new();
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let mut mc = LogManagerConfig::with_storage(vec![data_dir()], storage);
    mc.default_log_config = small_config();
    let mgr = LogManager::open(mc, 0).unwrap();
    let cfg = LogConfig {
        retention_bytes: 3_000,
        file_delete_delay_ms: 0,
        ..small_config()
    };
    let log = mgr.create_log(&tp(), [1; 16], cfg).unwrap();
    let mut model = Model::default();
    for i in 0..40u8 {
        model.apply(&log, Step::Data(i % 2));
        model.apply(&log, Step::End(i % 2, false));
    }
    log.set_high_watermark(log.log_end_offset());
    let before = log.segment_base_offsets();
    let report = Retention::new().run(&mgr, 10_000).unwrap();
    assert!(report.segments_deleted > 0);
    let after = log.segment_base_offsets();
    for gone in before.iter().filter(|b| !after.contains(b)) {
        assert!(!mem.exists(&seg_file(*gone, ".txnindex")), "{gone}");
        assert!(!mem.exists(&seg_file(*gone, ".log")), "{gone}");
    }
    let start = log.log_start_offset();
    let want: Vec<_> = model
        .entries
        .iter()
        .filter(|e| e.last_offset >= start)
        .copied()
        .collect();
    assert_eq!(log.all_aborted_txns(), want);
    assert_eq!(on_disk(&mem), want);
}

/// Fuzz smoke test of the `.txnindex` parser (the cargo-fuzz target
/// `txn_index` runs the same entry point): seeds from real entries.
#[test]
fn txn_index_files_survive_mutation() {
    let entries = [
        AbortedTxn {
            producer_id: 7,
            first_offset: 90,
            last_offset: 104,
            last_stable_offset: 95,
        },
        AbortedTxn {
            producer_id: 8,
            first_offset: 100,
            last_offset: 110,
            last_stable_offset: 111,
        },
    ];
    let mut seed = 100i64.to_be_bytes().to_vec();
    seed.extend(entries.iter().flat_map(|e| e.to_bytes()));
    let seeds = vec![seed, 0i64.to_be_bytes().to_vec()];
    weir_test_support::fuzz_smoke(
        "txn_index",
        &seeds,
        50_000,
        weir_storage::txn_index::fuzz_parse,
    );
}

/// A write that fails while an ABORT and its entry are appended (any write
/// of the batch or of the index, a full disk, a file that cannot be
/// created) leaves neither: the append is refused whole and the log goes
/// on; after a restart every entry has its marker.
#[test]
fn a_failed_abort_append_leaves_neither_the_marker_nor_its_entry() {
    use std::sync::atomic::Ordering;
    use weir_storage::backend::FaultyStorage;
    type Fault = Box<dyn Fn(&FaultyStorage)>;
    let mut faults: Vec<(String, Fault)> = (0..6u64)
        .map(|n| {
            let f: Fault = Box::new(move |s: &FaultyStorage| s.fail_writes_after(n));
            (format!("writes after {n}"), f)
        })
        .collect();
    faults.push((
        "full disk".into(),
        Box::new(|s| s.faults().disk_full.store(true, Ordering::SeqCst)),
    ));
    faults.push((
        "no new file".into(),
        Box::new(|s| s.faults().creates_left.store(0, Ordering::SeqCst)),
    ));
    for (name, fault) in faults {
        let mem = MemStorage::new();
        let faulty = FaultyStorage::new(mem.clone());
        let log = new_log(Arc::new(faulty.clone()), small_config());
        log.append(&mut txn_batch(1, 1), 1_000).unwrap();
        let abort = AbortMarker {
            batch: 0,
            producer_id: 1,
            first_offset: 0,
            next_open_offset: None,
        };
        fault(&faulty);
        let r = log.append_ending_txns(&mut marker(1, false), 1_000, None, &[abort]);
        faulty.fail_writes_after(u64::MAX);
        faulty.faults().disk_full.store(false, Ordering::SeqCst);
        faulty
            .faults()
            .creates_left
            .store(u64::MAX, Ordering::SeqCst);
        match r {
            Ok(_) => {
                assert_eq!(markers(&log), [1], "{name}");
                assert_eq!(log.all_aborted_txns().len(), 1, "{name}");
            }
            Err(_) => {
                assert_eq!(log.log_end_offset(), 1, "{name}");
                assert!(log.all_aborted_txns().is_empty(), "{name}");
                // The log goes on: the retry is appended and indexed.
                log.append_ending_txns(&mut marker(1, false), 1_000, None, &[abort])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(log.all_aborted_txns().len(), 1, "{name}");
            }
        }
        for mode in [CrashMode::KeepWritten, CrashMode::LoseUnsynced] {
            let after: Arc<dyn Storage> = Arc::new(mem.crash(mode));
            let reopened = reopen(after, small_config(), 0, false).unwrap();
            let kept = markers(&reopened);
            for e in reopened.all_aborted_txns() {
                assert!(kept.contains(&e.last_offset), "{name} {mode:?}: {e:?}");
            }
        }
    }
}
