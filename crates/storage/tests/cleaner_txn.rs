//! Transactions in compaction: aborted records go without hiding the
//! committed records of their keys, the cleaner stops at the last stable
//! offset, and a transaction's marker stays while a batch of it is left,
//! then goes once its delete horizon has passed (Kafka's rule); the
//! `.txnindex` and what a read_committed consumer reads stay right
//! throughout. A property test against a model of producers, transactions
//! and cleanings at advancing times.

use bytes::Bytes;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use weir_protocol::records::{
    BatchIter, Compression, ControlRecordType, DecompressLimits, EndTxnMarker, RecordBatch,
    RecordBatchBuilder,
};
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::cleaner::{CleanerConfig, LogCleaner};
use weir_storage::{AbortMarker, AbortedTxn, Log, LogManager};

use crate::cleaner::{
    DELETE_RETENTION, VClock, config, kv_batch, manager, read_all, tp, txn_kv_batch,
};

/// Every batch of the log, in order.
fn batches(log: &Log) -> Vec<RecordBatch> {
    let r = log
        .read(log.log_start_offset(), usize::MAX, i64::MAX, true)
        .unwrap();
    let mut out = Vec::new();
    for region in r.regions {
        for b in BatchIter::new(region.read_to_vec().unwrap()).verify_crc(true) {
            out.push(b.unwrap());
        }
    }
    out
}

/// The transaction markers left (control batches with a record): offset,
/// type, delete horizon.
fn markers(log: &Log) -> Vec<(i64, ControlRecordType, Option<i64>)> {
    batches(log)
        .into_iter()
        .filter(|b| b.is_control() && b.header().records_count > 0)
        .map(|b| {
            let h = *b.header();
            let kind = b.control_type(&DecompressLimits::default()).unwrap();
            let horizon = h.has_delete_horizon().then_some(h.base_timestamp);
            (b.base_offset(), kind, horizon)
        })
        .collect()
}

/// The values a read_committed consumer reads below `lso`, with the
/// aborted transactions a Fetch of `[log start, lso)` answers with (the
/// Java consumer's rule: a producer listed as aborted is skipped from the
/// batch that reaches its entry's first offset until its ABORT marker).
fn read_committed(log: &Log, lso: i64) -> Vec<(i64, String)> {
    let mut aborted: Vec<(i64, i64)> = log
        .aborted_txns(log.log_start_offset(), lso)
        .into_iter()
        .map(|t| (t.first_offset, t.producer_id))
        .collect();
    aborted.sort();
    let mut aborted = aborted.into_iter().peekable();
    let mut skipping = HashSet::new();
    let mut out = Vec::new();
    for b in batches(log).into_iter().filter(|b| b.base_offset() < lso) {
        let h = *b.header();
        while let Some(&(first, pid)) = aborted.peek()
            && first <= b.last_offset()
        {
            skipping.insert(pid);
            aborted.next();
        }
        if b.is_control() {
            if b.control_type(&DecompressLimits::default()).ok() == Some(ControlRecordType::Abort) {
                skipping.remove(&h.producer_id);
            }
            continue;
        }
        if h.is_transactional() && skipping.contains(&h.producer_id) {
            continue;
        }
        for r in b.collect_records(&DecompressLimits::default()).unwrap() {
            let offset = r.offset(b.base_offset());
            let v = String::from_utf8(r.value.unwrap_or_default().to_vec()).unwrap();
            out.push((offset, v));
        }
    }
    out
}

/// One record of key `key` with value `value`, transactional for `pid`.
fn record(pid: Option<i64>, key: &str, value: &str) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(Compression::None);
    if let Some(pid) = pid {
        b = b.producer(pid, 0, 0).transactional(true);
    }
    b.push(
        0,
        Some(Bytes::copy_from_slice(key.as_bytes())),
        Some(Bytes::copy_from_slice(value.as_bytes())),
        Vec::new(),
    )
    .unwrap();
    b.build().unwrap().as_bytes().to_vec()
}

/// Appends `pid`'s COMMIT, or its ABORT of the transaction that began at
/// `first` (indexed, with `next_open` as the entry's last stable offset).
/// Returns the marker's offset.
fn end_txn(log: &Log, pid: i64, abort: Option<i64>, next_open: Option<i64>) -> i64 {
    let m = match abort {
        Some(_) => EndTxnMarker::abort(0),
        None => EndTxnMarker::commit(0),
    };
    let mut marker = RecordBatchBuilder::end_txn_marker_batch(0, 0, pid, 0, 0, &m)
        .unwrap()
        .as_bytes()
        .to_vec();
    let aborts: Vec<AbortMarker> = abort
        .map(|first| AbortMarker {
            batch: 0,
            producer_id: pid,
            first_offset: first,
            next_open_offset: next_open,
        })
        .into_iter()
        .collect();
    let (info, _) = log
        .append_ending_txns(&mut marker, 0, None, &aborts)
        .unwrap();
    info.base_offset
}

fn txn_index_files(storage: &MemStorage) -> Vec<(String, usize)> {
    let dir = PathBuf::from("/data/c-0");
    let mut out: Vec<(String, usize)> = storage
        .list_dir(&dir)
        .unwrap()
        .into_iter()
        .filter(|(n, _)| n.ends_with(".txnindex"))
        .map(|(n, _)| {
            let f = storage.open(&dir.join(&n), false).unwrap();
            (n, f.len().unwrap() as usize)
        })
        .collect();
    out.sort();
    out
}

/// An aborted transaction's records go and do not make the cleaner drop the
/// committed record of their key before them (they never enter the offset
/// map); its marker stays. No record at or past the cleanable limit (the
/// LSO: an undecided transaction) is used or cleaned.
#[test]
fn aborted_records_hide_nothing_and_the_limit_bounds_cleaning() {
    let mem = MemStorage::new();
    let mgr = manager(Arc::new(mem.clone()), 0);
    let log = mgr.create_log(&tp(), [3; 16], config()).unwrap();
    // 0: key 1 committed (plain); 1: key 1 in producer 5's transaction;
    // 2: its ABORT.
    log.append(&mut kv_batch(&[(1, Some(10))], 0), 0).unwrap();
    log.append(&mut txn_kv_batch(5, &[(1, Some(66))]), 0)
        .unwrap();
    let abort = AbortMarker {
        batch: 0,
        producer_id: 5,
        first_offset: 1,
        next_open_offset: None,
    };
    let mut m = RecordBatchBuilder::end_txn_marker_batch(0, 0, 5, 0, 0, &EndTxnMarker::abort(0))
        .unwrap()
        .as_bytes()
        .to_vec();
    log.append_ending_txns(&mut m, 0, None, &[abort]).unwrap();
    // Key 2 written twice, the second time well after: the limit decides
    // whether the first may go.
    log.append(&mut kv_batch(&[(2, Some(20))], 0), 0).unwrap();
    for i in 0..20u8 {
        log.append(&mut kv_batch(&[(3 + i % 3, Some(i))], 0), 0)
            .unwrap();
    }
    let limit = log.log_end_offset();
    log.append(&mut kv_batch(&[(2, Some(21))], 0), 0).unwrap();
    for i in 0..20u8 {
        log.append(&mut kv_batch(&[(3 + i % 3, Some(i))], 0), 0)
            .unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    let value_of = |key: u8| -> Vec<(i64, u8)> {
        read_all(&mgr)
            .0
            .into_iter()
            .filter(|(_, k, _)| k.as_deref() == Some(format!("key-{key}").as_bytes()))
            .map(|(o, _, v)| (o, v.unwrap()[0]))
            .collect()
    };
    let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
    cleaner.set_cleanable_limit(Arc::new(move |_| limit));
    let clock = VClock(AtomicI64::new(1_000));
    cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
    // The aborted record is gone, the committed one before it stays; the
    // marker and the index entry stay.
    assert_eq!(
        value_of(1),
        [(0, 10)],
        "the aborted record hid the committed one"
    );
    assert_eq!(read_all(&mgr).1, 1, "the ABORT marker");
    assert_eq!(
        value_of(2).first(),
        Some(&(3, 20)),
        "cleaned past the limit"
    );
    assert_eq!(log.all_aborted_txns().len(), 1);

    // Without the limit the later record of key 2 supersedes the first.
    cleaner.set_cleanable_limit(Arc::new(|_| i64::MAX));
    cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
    assert_eq!(value_of(1).first(), Some(&(0, 10)));
    assert_eq!(value_of(2), [(limit, 21)]);
}

/// Producer 1 commits a record that a later plain record supersedes,
/// producer 2 aborts one, producer 3 commits one that stays. The first
/// cleaning drops the superseded and the aborted records and keeps every
/// marker (their batches were read); the second finds producers 1 and 2
/// without batches: their markers get a delete horizon and producer 2's
/// entry leaves the `.txnindex`; a cleaning at the horizon removes them,
/// unless they lie at or past the removal limit. Producer 3's marker
/// stays. What read_committed reads never changes.
#[test]
fn markers_stay_while_their_transaction_has_data_and_go_after_the_horizon() {
    let mem = MemStorage::new();
    let mgr = manager(Arc::new(mem.clone()), 0);
    let log = mgr.create_log(&tp(), [3; 16], config()).unwrap();
    use ControlRecordType::{Abort, Commit};
    log.append(&mut record(Some(1), "a", "a-txn"), 0).unwrap();
    log.append(&mut record(Some(2), "b", "b-aborted"), 0)
        .unwrap();
    log.append(&mut record(Some(3), "c", "c-txn"), 0).unwrap();
    assert_eq!(end_txn(&log, 1, None, Some(1)), 3);
    assert_eq!(end_txn(&log, 2, Some(1), Some(2)), 4);
    assert_eq!(end_txn(&log, 3, None, None), 5);
    log.append(&mut record(None, "a", "a-plain"), 0).unwrap();
    for i in 0..12 {
        log.append(&mut record(None, &format!("f{i}"), "filler"), 0)
            .unwrap();
    }
    log.flush().unwrap();
    log.set_high_watermark(log.log_end_offset());
    let leo = log.log_end_offset();
    let active = *log.segment_base_offsets().last().unwrap();
    assert!(active > 8, "the markers lie below the active segment");
    let entry = AbortedTxn {
        producer_id: 2,
        first_offset: 1,
        last_offset: 4,
        last_stable_offset: 2,
    };
    assert_eq!(log.all_aborted_txns(), [entry]);
    let visible = read_committed(&log, leo);
    let values: Vec<&str> = visible.iter().map(|(_, v)| v.as_str()).take(3).collect();
    assert_eq!(values, ["a-txn", "c-txn", "a-plain"]);
    let after_cleaning: Vec<(i64, String)> = visible.into_iter().skip(1).collect();

    let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
    let clock = VClock(AtomicI64::new(1_000));
    let s = cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
    assert_eq!(s.markers_removed, 0);
    let kept: Vec<(i64, String)> = read_all(&mgr)
        .0
        .into_iter()
        .take(2)
        .map(|(o, _, v)| (o, String::from_utf8(v.unwrap().to_vec()).unwrap()))
        .collect();
    assert_eq!(
        kept,
        [(2, "c-txn".into()), (6, "a-plain".into())],
        "the superseded and the aborted records went"
    );
    let all_markers = [(3, Commit, None), (4, Abort, None), (5, Commit, None)];
    assert_eq!(markers(&log), all_markers, "their batches were read");
    assert_eq!(log.all_aborted_txns(), [entry]);
    assert_eq!(txn_index_files(&mem).len(), 1);
    assert_eq!(read_committed(&log, leo), after_cleaning);

    // No batch of 1's and 2's transactions is left: their markers wait for
    // the horizon, 2's entry goes.
    let horizon = Some(1_000 + DELETE_RETENTION);
    let with_horizons = [(3, Commit, horizon), (4, Abort, horizon), (5, Commit, None)];
    cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
    assert_eq!(markers(&log), with_horizons);
    assert_eq!(log.all_aborted_txns(), []);
    assert_eq!(txn_index_files(&mem), []);
    assert_eq!(read_committed(&log, leo), after_cleaning);
    clock
        .0
        .store(1_000 + DELETE_RETENTION - 1, Ordering::SeqCst);
    cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
    assert_eq!(markers(&log), with_horizons, "before the horizon");

    // At the horizon; the broker's limit (its oldest producer snapshot)
    // keeps the marker at 4, then lets it go.
    clock.0.store(1_000 + DELETE_RETENTION, Ordering::SeqCst);
    cleaner.set_marker_removal_limit(Arc::new(|_| 4));
    let s = cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
    assert_eq!(s.markers_removed, 1);
    assert_eq!(markers(&log), [(4, Abort, horizon), (5, Commit, None)]);
    cleaner.set_marker_removal_limit(Arc::new(|_| i64::MAX));
    cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
    let left = [(5, Commit, None)];
    assert_eq!(markers(&log), left, "3's transaction has a record left");
    assert_eq!(read_committed(&log, leo), after_cleaning);
    assert_eq!(log.log_end_offset(), leo);

    // As it is after a restart.
    mgr.shutdown().unwrap();
    let mgr2 = manager(Arc::new(mem.crash(CrashMode::LoseUnsynced)), 20_000);
    let log2 = mgr2.get(&tp()).unwrap();
    assert_eq!(markers(&log2), left);
    assert_eq!(log2.all_aborted_txns(), []);
    assert_eq!(read_committed(&log2, leo), after_cleaning);
}

/// Markers of transactions that never had a batch here (a COMMIT retried,
/// a transaction empty on this partition) get a horizon at once and go
/// after it; a control batch of another type stays.
#[test]
fn markers_without_batches_go_after_the_horizon_other_control_batches_stay() {
    let mem = MemStorage::new();
    let mgr = manager(Arc::new(mem.clone()), 0);
    let log = mgr.create_log(&tp(), [3; 16], config()).unwrap();
    let mut leader_change = RecordBatchBuilder::new(Compression::None).control(true);
    leader_change
        .push(
            0,
            Some(ControlRecordType::LeaderChange.key()),
            Some(Bytes::from_static(&[0, 0])),
            Vec::new(),
        )
        .unwrap();
    let mut commits = Vec::new();
    for i in 0..30u8 {
        log.append(&mut kv_batch(&[(i % 3, Some(i))], 0), 0)
            .unwrap();
        if i % 10 == 0 {
            commits.push(end_txn(&log, 7, None, None));
        }
        if i == 15 {
            log.append(&mut leader_change.build().unwrap().as_bytes().to_vec(), 0)
                .unwrap();
        }
    }
    log.set_high_watermark(log.log_end_offset());
    let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
    let clock = VClock(AtomicI64::new(0));
    let s = cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
    assert!(s.records_dropped > 0);
    let kinds = |log: &Log| -> Vec<(ControlRecordType, Option<i64>)> {
        markers(log).into_iter().map(|(_, k, h)| (k, h)).collect()
    };
    let commit = (ControlRecordType::Commit, Some(DELETE_RETENTION));
    let leader = (ControlRecordType::LeaderChange, None);
    assert_eq!(kinds(&log), [commit, commit, leader, commit]);
    clock.0.store(DELETE_RETENTION, Ordering::SeqCst);
    let s = cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
    assert_eq!(s.markers_removed, 3);
    assert_eq!(kinds(&log), [leader]);
    // A batch the cleaning had to keep (the last of a group) is left as an
    // empty control batch in place of the marker.
    let empty: Vec<i64> = batches(&log)
        .iter()
        .filter(|b| b.is_control() && b.header().records_count == 0)
        .map(|b| b.base_offset())
        .collect();
    assert!(empty.iter().all(|o| commits.contains(o)), "{empty:?}");
}

/// One step of the model's workload.
#[derive(Debug, Clone)]
enum Step {
    /// A plain record of a key.
    Plain(u8),
    /// A transactional record of a key by a producer (opening its
    /// transaction).
    Txn(u8, u8),
    /// A producer's COMMIT (true) or ABORT.
    End(u8, bool),
    /// A cleaning, this many milliseconds after the previous step.
    Clean(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..6).prop_map(Step::Plain),
        4 => (0u8..3, 0u8..6).prop_map(|(p, k)| Step::Txn(p, k)),
        2 => (0u8..3, any::<bool>()).prop_map(|(p, c)| Step::End(p, c)),
        1 => (0..2 * DELETE_RETENTION).prop_map(Step::Clean),
    ]
}

/// What the model knows of the log.
#[derive(Default)]
struct Model {
    /// Offset → (key, value, the producer of a transactional record).
    records: BTreeMap<i64, (String, String, Option<i64>)>,
    /// Open transactions: producer → first offset.
    open: BTreeMap<i64, i64>,
    /// The offsets of aborted records.
    aborted: HashSet<i64>,
    now: i64,
}

impl Model {
    fn lso(&self, log: &Log) -> i64 {
        self.open
            .values()
            .copied()
            .min()
            .unwrap_or(log.log_end_offset())
    }

    fn apply(&mut self, log: &Log, step: &Step) {
        let next = log.log_end_offset();
        match *step {
            Step::Plain(k) => self.plain(log, &format!("k{k}")),
            Step::Txn(p, k) => {
                let pid = i64::from(p);
                let value = format!("v{next}");
                log.append(&mut record(Some(pid), &format!("k{k}"), &value), 0)
                    .unwrap();
                self.records
                    .insert(next, (format!("k{k}"), value, Some(pid)));
                self.open.entry(pid).or_insert(next);
            }
            Step::End(p, commit) => {
                let pid = i64::from(p);
                let first = self.open.remove(&pid);
                let next_open = self.open.values().copied().min();
                let abort = if commit { None } else { first };
                if !commit {
                    // A marker for nothing open is written as a COMMIT.
                    if let Some(first) = first {
                        for (o, r) in self.records.range(first..) {
                            if r.2 == Some(pid) {
                                self.aborted.insert(*o);
                            }
                        }
                    }
                }
                end_txn(log, pid, abort, next_open);
            }
            Step::Clean(_) => {}
        }
        log.set_high_watermark(log.log_end_offset());
    }

    fn plain(&mut self, log: &Log, key: &str) {
        let next = log.log_end_offset();
        let value = format!("v{next}");
        log.append(&mut record(None, key, &value), 0).unwrap();
        self.records.insert(next, (key.to_string(), value, None));
        log.set_high_watermark(log.log_end_offset());
    }

    /// For each key, the offset of its latest committed record below
    /// `end`.
    fn latest_committed(&self, end: i64) -> HashMap<String, i64> {
        let mut latest = HashMap::new();
        for (o, (k, _, pid)) in self.records.range(..end) {
            let undecided = pid.is_some_and(|p| self.open.get(&p).is_some_and(|f| f <= o));
            if !self.aborted.contains(o) && !undecided {
                latest.insert(k.clone(), *o);
            }
        }
        latest
    }
}

/// The log read as a rebuild of producer state reads it: the transactions
/// open at its end (producer → first offset), and the markers left whose
/// transaction has no batch before them.
fn rebuild(log: &Log) -> (BTreeMap<i64, i64>, Vec<i64>) {
    let mut open: BTreeMap<i64, i64> = BTreeMap::new();
    let mut without_batches = Vec::new();
    for b in batches(log) {
        let h = *b.header();
        if !b.is_control() {
            if h.is_transactional() {
                open.entry(h.producer_id).or_insert(b.base_offset());
            }
            continue;
        }
        if h.records_count == 0 {
            continue;
        }
        if open.remove(&h.producer_id).is_none() {
            without_batches.push(b.base_offset());
        }
    }
    (open, without_batches)
}

/// Cleans at the model's time, up to the last stable offset, and checks:
/// read_committed reads only committed records and the latest committed
/// record of every key; no transaction is left open that the model has
/// decided (a marker is never removed while a batch of its transaction
/// is left).
fn clean_and_check(
    mgr: &LogManager,
    cleaner: &LogCleaner,
    model: &Model,
) -> Result<(), TestCaseError> {
    let log = mgr.get(&tp()).unwrap();
    let lso = model.lso(&log);
    cleaner.set_cleanable_limit(Arc::new(move |_| lso));
    cleaner
        .clean_now(mgr, &tp(), &VClock(AtomicI64::new(model.now)))
        .unwrap();
    let visible = read_committed(&log, lso);
    for (o, v) in &visible {
        let r = model.records.get(o);
        prop_assert!(r.is_some_and(|r| &r.1 == v), "offset {} reads {}", o, v);
        prop_assert!(!model.aborted.contains(o), "aborted record at {} read", o);
    }
    let read: HashSet<i64> = visible.iter().map(|(o, _)| *o).collect();
    for (k, o) in model.latest_committed(lso) {
        prop_assert!(read.contains(&o), "latest committed {} at {} gone", k, o);
    }
    let (open, _) = rebuild(&log);
    prop_assert_eq!(
        &open,
        &model.open,
        "open transactions read back from the log"
    );
    for t in log.all_aborted_txns() {
        prop_assert!(
            markers(&log)
                .iter()
                .any(|m| m.0 == t.last_offset && m.1 == ControlRecordType::Abort),
            "{:?} without its marker",
            t
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random producers, transactions and cleanings; then every
    /// transaction ends, records roll the markers out of the active
    /// segment and cleanings run past every horizon: each marker left
    /// still has a batch of its transaction.
    #[test]
    fn transactions_through_compaction_match_a_model(steps in prop::collection::vec(step(), 1..80)) {
        let mem = MemStorage::new();
        let mgr = manager(Arc::new(mem.clone()), 0);
        let log = mgr.create_log(&tp(), [3; 16], config()).unwrap();
        let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
        let mut model = Model { now: 1_000, ..Model::default() };
        for s in &steps {
            model.apply(&log, s);
            if let Step::Clean(after) = s {
                model.now += after;
                clean_and_check(&mgr, &cleaner, &model)?;
            }
        }
        let open: Vec<i64> = model.open.keys().copied().collect();
        for pid in open {
            model.apply(&log, &Step::End(pid as u8, true));
        }
        for i in 0..12 {
            model.plain(&log, &format!("filler{i}"));
        }
        for _ in 0..3 {
            model.now += DELETE_RETENTION;
            clean_and_check(&mgr, &cleaner, &model)?;
        }
        let active = *log.segment_base_offsets().last().unwrap();
        let (_, without_batches) = rebuild(&log);
        let stale: Vec<i64> = without_batches.into_iter().filter(|o| *o < active).collect();
        prop_assert!(stale.is_empty(), "markers past their horizon without batches: {:?}", stale);
    }
}
