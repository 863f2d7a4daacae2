//! Log compaction: a property test against a model, crash at every file
//! operation of a cleaning, control batches, the cleaner checkpoint.

use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use weir_protocol::records::{
    BatchIter, Compression, DecompressLimits, EndTxnMarker, RecordBatchBuilder,
};
use weir_storage::backend::{CrashMode, MemStorage, Storage, StorageFile};
use weir_storage::cleaner::{CleanerConfig, Clock, LogCleaner};
use weir_storage::{
    AbortMarker, AbortedTxn, LogConfig, LogManager, LogManagerConfig, Ratio, TopicPartition,
};

pub(crate) const DELETE_RETENTION: i64 = 10_000;

pub(crate) struct VClock(pub(crate) AtomicI64);
impl Clock for VClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
    fn sleep_ms(&self, ms: u64) {
        self.0.fetch_add(ms as i64, Ordering::SeqCst);
    }
}

pub(crate) fn tp() -> TopicPartition {
    TopicPartition::new("c", 0)
}

pub(crate) fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        segment_index_bytes: 4096,
        index_interval_bytes: 64,
        message_timestamp_after_max_ms: i64::MAX,
        message_timestamp_before_max_ms: i64::MAX,
        cleanup_policy: "compact".into(),
        delete_retention_ms: DELETE_RETENTION,
        min_cleanable_dirty_ratio: Ratio(0.0),
        ..LogConfig::default()
    }
}

pub(crate) type Op = (u8, Option<u8>);

/// One uncompressed batch of keyed records (value `None` = tombstone).
pub(crate) fn kv_batch(ops: &[Op], ts: i64) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for (k, v) in ops {
        let key = Bytes::from(format!("key-{k}"));
        let value = v.map(|v| Bytes::from(vec![v; 20]));
        b.push(ts, Some(key), value, Vec::new()).unwrap();
    }
    b.build().unwrap().as_bytes().to_vec()
}

pub(crate) fn manager(storage: Arc<dyn Storage>, now: i64) -> LogManager {
    let mut mc = LogManagerConfig::with_storage(vec![PathBuf::from("/data")], storage);
    mc.default_log_config = config();
    LogManager::open(mc, now).unwrap()
}

/// (offset, key, value) of one record.
pub(crate) type Rec = (i64, Option<Bytes>, Option<Bytes>);

/// Every record in the log, and the number of control batches.
pub(crate) fn read_all(mgr: &LogManager) -> (Vec<Rec>, usize) {
    let log = mgr.get(&tp()).unwrap();
    let r = log
        .read(log.log_start_offset(), usize::MAX, i64::MAX, true)
        .unwrap();
    let mut out = Vec::new();
    let mut controls = 0;
    for region in r.regions {
        for b in BatchIter::new(region.read_to_vec().unwrap()).verify_crc(true) {
            let b = b.unwrap();
            if b.is_control() {
                controls += 1;
                continue;
            }
            for rec in b.collect_records(&DecompressLimits::default()).unwrap() {
                out.push((rec.offset(b.base_offset()), rec.key, rec.value));
            }
        }
    }
    (out, controls)
}

/// Appends `batches` at time 0 and returns the model: offset → (key, value).
fn fill(mgr: &LogManager, batches: &[Vec<Op>]) -> BTreeMap<i64, Op> {
    let log = match mgr.get(&tp()) {
        Some(l) => l,
        None => mgr.create_log(&tp(), [3; 16], config()).unwrap(),
    };
    let mut model = BTreeMap::new();
    for ops in batches {
        let info = log.append(&mut kv_batch(ops, 0), 0).unwrap();
        for (i, op) in ops.iter().enumerate() {
            model.insert(info.base_offset + i as i64, *op);
        }
    }
    log.flush().unwrap();
    log.set_high_watermark(log.log_end_offset());
    model
}

/// Every surviving record matches the model, offsets increase, and every
/// key's latest record is present unless it is a tombstone allowed to go.
fn check(
    out: &[Rec],
    model: &BTreeMap<i64, Op>,
    tombstones_may_go_below: i64,
) -> Result<(), String> {
    let mut prev = -1;
    for (off, k, v) in out {
        if *off <= prev {
            return Err(format!("offset {off} after {prev}"));
        }
        prev = *off;
        let (mk, mv) = model.get(off).ok_or(format!("offset {off} not in model"))?;
        if k.as_deref() != Some(format!("key-{mk}").as_bytes())
            || v.as_deref() != mv.map(|x| vec![x; 20]).as_deref()
        {
            return Err(format!("offset {off} differs from the model"));
        }
    }
    let mut latest: BTreeMap<u8, (i64, Option<u8>)> = BTreeMap::new();
    for (off, (k, v)) in model {
        latest.insert(*k, (*off, *v));
    }
    for (k, (off, v)) in latest {
        let present = out.iter().any(|(o, _, _)| *o == off);
        let may_go = v.is_none() && off < tombstones_may_go_below;
        if !present && !may_go {
            return Err(format!("latest record of key {k} at {off} is gone"));
        }
    }
    Ok(())
}

fn ops_strategy() -> impl Strategy<Value = Vec<Vec<Op>>> {
    let op = (0u8..8, prop::option::weighted(0.8, any::<u8>()));
    prop::collection::vec(prop::collection::vec(op, 1..4), 5..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn compaction_matches_model(batches in ops_strategy()) {
        let mem = MemStorage::new();
        let mgr = manager(Arc::new(mem.clone()), 0);
        let model = fill(&mgr, &batches);
        let log = mgr.get(&tp()).unwrap();
        let active = *log.segment_base_offsets().last().unwrap();
        let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
        let clock = VClock(AtomicI64::new(1_000));
        cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
        let (out, _) = read_all(&mgr);
        // Tombstones are kept before their horizon.
        check(&out, &model, -1).map_err(TestCaseError::fail)?;
        // Below the active segment only each key's latest record (among
        // the cleanable records) is left.
        for (off, k, _) in &out {
            if *off < active {
                let later = model.range(off + 1..active).any(|(_, (mk, _))| k.as_deref() == Some(format!("key-{mk}").as_bytes()));
                prop_assert!(!later, "superseded record at {} survived", off);
            }
        }
        prop_assert_eq!(log.log_end_offset(), *model.keys().last().unwrap() + 1);

        // Before the horizon: tombstones stay; after it: they go.
        clock.0.store(1_000 + DELETE_RETENTION - 1, Ordering::SeqCst);
        cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
        check(&read_all(&mgr).0, &model, -1).map_err(TestCaseError::fail)?;
        clock.0.store(1_000 + DELETE_RETENTION, Ordering::SeqCst);
        cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
        let (out, _) = read_all(&mgr);
        check(&out, &model, active).map_err(TestCaseError::fail)?;
        for (off, _, v) in &out {
            prop_assert!(!(v.is_none() && *off < active), "tombstone at {} outlived its horizon", off);
        }

        // Restart: same contents, the cleaner checkpoint survives.
        let ck = cleaner.checkpoint_of(&tp());
        mgr.shutdown().unwrap();
        let mgr2 = manager(Arc::new(mem.crash(CrashMode::LoseUnsynced)), 20_000);
        prop_assert_eq!(read_all(&mgr2).0, out);
        let cleaner2 = LogCleaner::open(CleanerConfig::default(), &mgr2).unwrap();
        prop_assert_eq!(cleaner2.checkpoint_of(&tp()), ck);
    }
}

#[test]
fn small_offset_map_cleans_in_rounds() {
    let mem = MemStorage::new();
    let mgr = manager(Arc::new(mem.clone()), 0);
    let batches: Vec<Vec<Op>> = (0..40)
        .map(|i| vec![((i % 20) as u8, Some(i as u8))])
        .collect();
    let model = fill(&mgr, &batches);
    // Room for 9 keys: several rounds.
    let cfg = CleanerConfig {
        dedupe_buffer_size: 24 * 10,
        ..CleanerConfig::default()
    };
    let cleaner = LogCleaner::open(cfg, &mgr).unwrap();
    let clock = VClock(AtomicI64::new(0));
    let mut ends = Vec::new();
    for _ in 0..10 {
        let s = cleaner.clean_now(&mgr, &tp(), &clock).unwrap().unwrap();
        check(&read_all(&mgr).0, &model, -1).unwrap();
        ends.push(s.map_end);
    }
    assert!(ends.windows(2).all(|w| w[0] <= w[1]), "{ends:?}");
    assert!(ends[0] < ends[9], "{ends:?}");
    let log = mgr.get(&tp()).unwrap();
    let active = *log.segment_base_offsets().last().unwrap();
    assert_eq!(ends[9], active);
}

// ---- crash at every file operation ----

#[derive(Debug)]
struct Budget(AtomicU64);
impl Budget {
    fn take(&self) -> io::Result<()> {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| io::Error::other("crashed"))
    }
}

#[derive(Debug)]
struct CrashFile(Arc<dyn StorageFile>, Arc<Budget>);
impl StorageFile for CrashFile {
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, pos)
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.1.take()?;
        self.0.write_all_at(buf, pos)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.1.take()?;
        self.0.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.1.take()?;
        self.0.sync()
    }
}

/// Every mutating operation spends one unit of budget; at zero the
/// "process" is dead: every further mutation fails.
#[derive(Debug)]
struct CrashStorage(MemStorage, Arc<Budget>);
impl Storage for CrashStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        if create && !self.0.exists(path) {
            self.1.take()?;
        }
        Ok(Arc::new(CrashFile(
            self.0.open(path, create)?,
            self.1.clone(),
        )))
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.1.take()?;
        self.0.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.1.take()?;
        self.0.remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.1.take()?;
        self.0.create_dir_all(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.1.take()?;
        self.0.remove_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        self.0.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.1.take()?;
        self.0.sync_dir(path)
    }
}

#[test]
fn crash_at_every_step_of_a_cleaning() {
    let batches: Vec<Vec<Op>> = (0..30u8)
        .map(|i| {
            vec![
                (i % 5, if i % 7 == 3 { None } else { Some(i) }),
                ((i + 2) % 5, Some(i)),
            ]
        })
        .collect();
    let mut step = 0u64;
    loop {
        let mem = MemStorage::new();
        let budget = Arc::new(Budget(AtomicU64::new(u64::MAX)));
        let storage = Arc::new(CrashStorage(mem.clone(), budget.clone()));
        let mgr = manager(storage, 0);
        let model = fill(&mgr, &batches);
        let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
        budget.0.store(step, Ordering::SeqCst);
        let r = cleaner.clean_now(&mgr, &tp(), &VClock(AtomicI64::new(1_000)));
        let finished = r.is_ok();
        for mode in [CrashMode::LoseUnsynced, CrashMode::KeepWritten] {
            let after = mem.crash(mode);
            let mgr2 = manager(Arc::new(after.clone()), 2_000);
            assert!(
                mgr2.failed_logs().is_empty(),
                "step {step}: {:?}",
                mgr2.failed_logs()
            );
            let (out, _) = read_all(&mgr2);
            check(&out, &model, -1).unwrap_or_else(|e| panic!("step {step} {mode:?}: {e}"));
            let log = mgr2.get(&tp()).unwrap();
            assert_eq!(
                log.log_end_offset(),
                *model.keys().last().unwrap() + 1,
                "step {step}"
            );
            let leftovers = after
                .list_dir(&PathBuf::from("/data/c-0"))
                .unwrap()
                .into_iter()
                .filter(|(n, _)| {
                    n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")
                })
                .count();
            assert_eq!(leftovers, 0, "step {step}");
        }
        if finished {
            assert!(step > 10, "the cleaning took only {step} operations");
            break;
        }
        step += 1;
    }
}

/// A transactional batch of `pid` with the records `ops`.
pub(crate) fn txn_kv_batch(pid: i64, ops: &[Op]) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .producer(pid, 0, 0)
        .transactional(true);
    for (k, v) in ops {
        let value = v.map(|v| Bytes::from(vec![v; 20]));
        b.push(0, Some(Bytes::from(format!("key-{k}"))), value, Vec::new())
            .unwrap();
    }
    b.build().unwrap().as_bytes().to_vec()
}

/// The `.txnindex` entries through a crash at any file operation of a
/// cleaning. The first cleaning after the aborts reads their batches (and
/// drops them): every entry moves to the cleaned segment. The next one
/// finds the aborted transactions without batches: their entries leave
/// the index (the markers stay until their delete horizon), group by
/// group, so a crash leaves the entries of the groups not yet swapped.
#[test]
fn crash_at_every_step_of_a_cleaning_keeps_the_aborted_transactions() {
    crash_at_every_step_of_a_cleaning_with_transactions(0);
}

#[test]
fn crash_at_every_step_of_a_cleaning_that_unindexes_aborted_transactions() {
    crash_at_every_step_of_a_cleaning_with_transactions(1);
}

/// Appends 24 transactions of three producers (one record each, keys
/// shared, every other one aborted): the entries of the aborts.
fn append_transactions(log: &weir_storage::Log) -> Vec<AbortedTxn> {
    let mut entries = Vec::new();
    for i in 0..24u8 {
        let pid = i64::from(i % 3);
        let mut data = RecordBatchBuilder::new(Compression::None)
            .producer(pid, 0, 0)
            .transactional(true);
        data.push(
            0,
            Some(Bytes::from(format!("key-{}", i % 4))),
            Some(Bytes::from(vec![i; 20])),
            Vec::new(),
        )
        .unwrap();
        let first = log
            .append(&mut data.build().unwrap().as_bytes().to_vec(), 0)
            .unwrap()
            .base_offset;
        let abort = i % 2 == 0;
        let m = if abort {
            EndTxnMarker::abort(0)
        } else {
            EndTxnMarker::commit(0)
        };
        let mut marker = RecordBatchBuilder::end_txn_marker_batch(0, 0, pid, 0, 0, &m)
            .unwrap()
            .as_bytes()
            .to_vec();
        let aborts: Vec<AbortMarker> = abort
            .then_some(AbortMarker {
                batch: 0,
                producer_id: pid,
                first_offset: first,
                next_open_offset: None,
            })
            .into_iter()
            .collect();
        let (info, _) = log
            .append_ending_txns(&mut marker, 0, None, &aborts)
            .unwrap();
        if abort {
            entries.push(AbortedTxn {
                producer_id: pid,
                first_offset: first,
                last_offset: info.base_offset,
                last_stable_offset: info.base_offset + 1,
            });
        }
    }
    entries
}

/// Crashes the cleaning after `cleanings_before` complete ones at every
/// file operation; every control batch survives, the entries are a
/// subsequence of the ones before the cleaning, and all of what it leaves
/// once it completes.
fn crash_at_every_step_of_a_cleaning_with_transactions(cleanings_before: usize) {
    let mut step = 0u64;
    loop {
        let mem = MemStorage::new();
        let budget = Arc::new(Budget(AtomicU64::new(u64::MAX)));
        let storage = Arc::new(CrashStorage(mem.clone(), budget.clone()));
        let mgr = manager(storage, 0);
        let log = mgr.create_log(&tp(), [3; 16], config()).unwrap();
        let appended = append_transactions(&log);
        log.flush().unwrap();
        log.set_high_watermark(log.log_end_offset());
        assert_eq!(log.all_aborted_txns(), appended);
        let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
        let clock = VClock(AtomicI64::new(1_000));
        for _ in 0..cleanings_before {
            cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
        }
        let before = log.all_aborted_txns();
        // The active segment is not cleaned.
        let active = *log.segment_base_offsets().last().unwrap();
        let after_cleaning: Vec<AbortedTxn> = appended
            .iter()
            .filter(|t| cleanings_before == 0 || t.last_offset >= active)
            .copied()
            .collect();
        budget.0.store(step, Ordering::SeqCst);
        let r = cleaner.clean_now(&mgr, &tp(), &clock);
        let finished = r.is_ok();
        if finished {
            let s = r.unwrap().unwrap();
            assert!(s.segments_swapped > 1, "{s:?}");
            assert_eq!(s.markers_removed, 0, "{s:?}");
            assert_eq!(log.all_aborted_txns(), after_cleaning);
        }
        for mode in [CrashMode::LoseUnsynced, CrashMode::KeepWritten] {
            let after = mem.crash(mode);
            let mgr2 = manager(Arc::new(after.clone()), 2_000);
            assert!(mgr2.failed_logs().is_empty(), "step {step}");
            let log2 = mgr2.get(&tp()).unwrap();
            let entries = log2.all_aborted_txns();
            let mut rest = before.iter();
            assert!(
                entries.iter().all(|e| rest.any(|b| b == e)),
                "step {step} {mode:?}: {entries:?} not among {before:?}"
            );
            if finished {
                assert_eq!(entries, after_cleaning, "step {step} {mode:?}");
            }
            assert_eq!(read_all(&mgr2).1, 24, "step {step} {mode:?}: the markers");
            let leftovers: Vec<String> = after
                .list_dir(&PathBuf::from("/data/c-0"))
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| {
                    n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")
                })
                .collect();
            assert!(leftovers.is_empty(), "step {step}: {leftovers:?}");
        }
        if finished {
            assert!(step > 10, "the cleaning took only {step} operations");
            break;
        }
        step += 1;
    }
}

/// A truncation below the cleaner checkpoint lowers it (in memory and in
/// `cleaner-offset-checkpoint`), so records appended after the truncation
/// are dirty: a record below the cut that one of them supersedes goes at
/// the next cleaning.
#[test]
fn truncation_lowers_the_cleaner_checkpoint() {
    let mem = MemStorage::new();
    let mgr = manager(Arc::new(mem.clone()), 0);
    let first: Vec<Vec<Op>> = (0..40u8).map(|i| vec![(i % 8, Some(i))]).collect();
    fill(&mgr, &first);
    let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
    let clock = VClock(AtomicI64::new(1_000));
    cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
    let cleaned_to = cleaner.checkpoint_of(&tp()).unwrap();
    assert!(cleaned_to >= 8, "checkpoint {cleaned_to}");

    // Cut off the newest four cleaned records; four older keys stay below.
    let cut = cleaned_to - 4;
    cleaner.truncate_to(&mgr, &tp(), cut).unwrap();
    let log = mgr.get(&tp()).unwrap();
    assert_eq!(log.log_end_offset(), cut);
    assert!(cleaner.checkpoint_of(&tp()).unwrap() <= cut);
    let reopened = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
    assert!(reopened.checkpoint_of(&tp()).unwrap() <= cut);
    // The model is now what is left: the cleaned records below the cut.
    let mut model: BTreeMap<i64, Op> = read_all(&mgr)
        .0
        .into_iter()
        .map(|(off, k, v)| {
            let k = std::str::from_utf8(&k.unwrap()).unwrap()["key-".len()..]
                .parse()
                .unwrap();
            (off, (k, v.map(|v| v[0])))
        })
        .collect();
    let below: Vec<u8> = model.values().rev().take(4).map(|(k, _)| *k).collect();
    assert_eq!(below.len(), 4);

    // New records for those keys land below the old checkpoint, then
    // records of other keys roll segments past it.
    let mut again: Vec<Vec<Op>> = below.iter().map(|k| vec![(*k, Some(200))]).collect();
    again.extend((0..20u8).map(|i| vec![(50 + i, Some(i))]));
    model.extend(fill(&mgr, &again));
    assert!(
        model
            .range(cut..cleaned_to)
            .all(|(_, (k, _))| below.contains(k))
    );
    let active = *log.segment_base_offsets().last().unwrap();
    assert!(active > cleaned_to);

    cleaner.clean_now(&mgr, &tp(), &clock).unwrap();
    let (out, _) = read_all(&mgr);
    check(&out, &model, -1).unwrap();
    for (off, k, _) in &out {
        if *off < active {
            let later = model
                .range(off + 1..active)
                .any(|(_, (mk, _))| k.as_deref() == Some(format!("key-{mk}").as_bytes()));
            assert!(!later, "superseded record at {off} survived");
        }
    }
}
