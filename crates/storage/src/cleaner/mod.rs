//! Log compaction (`cleanup.policy=compact`): keeps, per key, only the
//! record at the latest offset; offsets are never renumbered.
//!
//! [`policy::choose`] decides purely which log to clean, [`txn`] which
//! batches of transactions and which markers a cleaning drops; [`LogCleaner`]
//! runs one cleaning at a time per worker thread (the broker runs
//! `log.cleaner.threads` of them) and keeps `cleaner-offset-checkpoint`.
//! The swap protocol that makes a crash at any step safe is described in
//! the `worker` module and `docs/retention-compaction.md`.

pub mod offset_map;
pub mod policy;
pub mod txn;
mod worker;

pub use worker::{CleanStats, Section, throttle_delay_ms};

use crate::checkpoint::{decode_checkpoint, write_checkpoint};
use crate::config::TopicPartition;
use crate::error::StorageError;
use crate::log::Log;
use crate::manager::LogManager;
use policy::CleanCandidate;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// `cleaner-offset-checkpoint`, one per data dir.
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// Time for the cleaner: the current time (summaries, delete horizons) and
/// waiting (I/O throttling). Tests pass a virtual clock.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> i64;
    fn sleep_ms(&self, ms: u64);
}

/// Broker-wide cleaner settings.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// `log.cleaner.threads`.
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size` (bytes, shared by the threads as
    /// in Kafka: each gets `size / threads`).
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.max.bytes.per.second` (read + write).
    pub io_max_bytes_per_second: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            dedupe_buffer_size: 128 << 20,
            io_max_bytes_per_second: f64::MAX,
        }
    }
}

/// Cumulative cleaner metrics.
#[derive(Debug, Default)]
pub struct CleanerMetrics {
    pub cleanings: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub records_kept: AtomicU64,
    pub records_dropped: AtomicU64,
    pub failures: AtomicU64,
    pub last_duration_ms: AtomicU64,
}

/// Where the cleaning of a log must stop (exclusive; the cleaner also stops
/// at the high watermark): the broker's last stable offset, below which
/// every transaction is decided. Called without the log's lock.
pub type CleanableLimit = Arc<dyn Fn(&Log) -> i64 + Send + Sync>;

/// Below which offset (exclusive) the cleaner may remove transaction
/// markers of a log: the broker's oldest producer snapshot. A rebuild of
/// the partition's producer state starts from a snapshot and replays the
/// log after it; a marker above the snapshot may end a transaction the
/// snapshot holds open, so it must stay readable. Called without the log's
/// lock.
pub type MarkerRemovalLimit = Arc<dyn Fn(&Log) -> i64 + Send + Sync>;

/// The log cleaner. `Send + Sync`; workers call [`LogCleaner::run_once`].
pub struct LogCleaner {
    /// Replaced whole by [`LogCleaner::reconfigure`]; a cleaning in
    /// progress keeps the settings it started with.
    cfg: Mutex<CleanerConfig>,
    checkpoints: Mutex<BTreeMap<TopicPartition, i64>>,
    /// Partitions being cleaned or truncated; [`LogCleaner::idle`] is
    /// notified whenever one leaves.
    in_progress: Mutex<BTreeSet<TopicPartition>>,
    idle: Condvar,
    metrics: CleanerMetrics,
    /// See [`LogCleaner::set_cleanable_limit`].
    limit: Mutex<Option<CleanableLimit>>,
    /// See [`LogCleaner::set_marker_removal_limit`].
    marker_limit: Mutex<Option<MarkerRemovalLimit>>,
}

impl std::fmt::Debug for LogCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogCleaner")
            .field("cfg", &self.cfg)
            .field("checkpoints", &self.checkpoints)
            .field("in_progress", &self.in_progress)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl LogCleaner {
    /// Loads `cleaner-offset-checkpoint` from every data dir of `mgr`.
    pub fn open(cfg: CleanerConfig, mgr: &LogManager) -> Result<LogCleaner, StorageError> {
        let storage = mgr.storage();
        let mut checkpoints = BTreeMap::new();
        for d in mgr.log_dirs() {
            let p = d.join(CLEANER_CHECKPOINT);
            if storage.exists(&p) {
                let text = String::from_utf8(worker::read_file(&*storage, &p)?).map_err(|_| {
                    StorageError::MalformedFile {
                        path: p.clone(),
                        reason: "not UTF-8".into(),
                    }
                })?;
                let entries = decode_checkpoint(&text)
                    .map_err(|reason| StorageError::MalformedFile { path: p, reason })?;
                checkpoints.extend(entries);
            }
        }
        Ok(LogCleaner {
            cfg: Mutex::new(cfg),
            checkpoints: Mutex::new(checkpoints),
            in_progress: Mutex::new(BTreeSet::new()),
            idle: Condvar::new(),
            metrics: CleanerMetrics::default(),
            limit: Mutex::new(None),
            marker_limit: Mutex::new(None),
        })
    }

    /// Bounds every later cleaning of a log by `limit(log)` (the broker's
    /// last stable offset; without it, the high watermark alone).
    pub fn set_cleanable_limit(&self, limit: CleanableLimit) {
        *self.limit.lock().unwrap_or_else(|e| e.into_inner()) = Some(limit);
    }

    /// Keeps every later cleaning of a log from removing transaction
    /// markers at or past `limit(log)` (without it, any marker whose
    /// transaction has no batch left may go once its delete horizon has
    /// passed).
    pub fn set_marker_removal_limit(&self, limit: MarkerRemovalLimit) {
        *self.marker_limit.lock().unwrap_or_else(|e| e.into_inner()) = Some(limit);
    }

    fn marker_limit(&self, log: &Log) -> i64 {
        let limit = self
            .marker_limit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        limit.map_or(i64::MAX, |f| f(log))
    }

    /// The section of `log` to clean now, bounded by the cleanable limit.
    fn section(&self, log: &Log, now_ms: i64) -> Section {
        let limit = self.limit.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let below = limit.map_or(i64::MAX, |f| f(log));
        log.clean_section_below(self.checkpoint_of(&log.tp), now_ms, below)
    }

    /// The settings the next cleaning uses.
    pub fn config(&self) -> CleanerConfig {
        self.cfg.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the settings (dynamic `log.cleaner.*` broker configs): the
    /// next cleaning uses them; one in progress finishes with its own.
    pub fn reconfigure(&self, cfg: CleanerConfig) {
        *self.cfg.lock().unwrap_or_else(|e| e.into_inner()) = cfg;
    }
    pub fn metrics(&self) -> &CleanerMetrics {
        &self.metrics
    }

    /// How many logs are being cleaned right now.
    pub fn cleanings_in_progress(&self) -> usize {
        self.in_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The first dirty offset checkpointed for `tp`.
    pub fn checkpoint_of(&self, tp: &TopicPartition) -> Option<i64> {
        self.checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tp)
            .copied()
    }

    fn candidate(&self, log: &Log, now_ms: i64) -> Option<(CleanCandidate, Section)> {
        let cfg = log.config();
        if !cfg.compact() {
            return None;
        }
        let s = self.section(log, now_ms);
        Some((
            CleanCandidate {
                tp: log.tp.clone(),
                clean_bytes: s.clean_bytes,
                dirty_bytes: s.dirty_bytes,
                oldest_dirty_timestamp: s.oldest_dirty_timestamp,
                min_cleanable_dirty_ratio: cfg.min_cleanable_dirty_ratio.0,
                max_compaction_lag_ms: cfg.max_compaction_lag_ms,
            },
            s,
        ))
    }

    /// Chooses the dirtiest cleanable log not being cleaned by another
    /// worker, cleans it, and checkpoints. `None` when nothing is due.
    pub fn run_once(
        &self,
        mgr: &LogManager,
        clock: &dyn Clock,
    ) -> Result<Option<(TopicPartition, CleanStats)>, StorageError> {
        let now_ms = clock.now_ms();
        let (log, section) = {
            // The busy set is copied: a candidate's section asks the
            // cleanable limit, which may load a partition's state. A log
            // taken meanwhile is skipped by `clean_log`.
            let busy = self
                .in_progress
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let mut logs = Vec::new();
            let mut cands = Vec::new();
            for log in mgr.logs() {
                if busy.contains(&log.tp) {
                    continue;
                }
                if let Some((c, s)) = self.candidate(&log, now_ms) {
                    logs.push((log, s));
                    cands.push(c);
                }
            }
            let Some(i) = policy::choose(&cands, now_ms) else {
                return Ok(None);
            };
            logs.swap_remove(i)
        };
        self.clean_log(mgr, &log, section, clock)
            .map(|s| s.map(|s| (log.tp.clone(), s)))
    }

    /// Cleans `tp` now, whatever its dirty ratio (tests, tools).
    pub fn clean_now(
        &self,
        mgr: &LogManager,
        tp: &TopicPartition,
        clock: &dyn Clock,
    ) -> Result<Option<CleanStats>, StorageError> {
        let log = mgr
            .get(tp)
            .ok_or_else(|| StorageError::UnknownLog(tp.to_string()))?;
        let section = self.section(&log, clock.now_ms());
        self.clean_log(mgr, &log, section, clock)
    }

    fn clean_log(
        &self,
        mgr: &LogManager,
        log: &Arc<Log>,
        section: Section,
        clock: &dyn Clock,
    ) -> Result<Option<CleanStats>, StorageError> {
        if !self
            .in_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(log.tp.clone())
        {
            return Ok(None);
        }
        let cfg = self.config();
        let per_thread = CleanerConfig {
            dedupe_buffer_size: cfg.dedupe_buffer_size / cfg.threads.max(1),
            ..cfg
        };
        let marker_limit = self.marker_limit(log);
        let r = worker::clean(
            log,
            section,
            &per_thread,
            clock,
            clock.now_ms(),
            marker_limit,
        );
        let r = r.and_then(|stats| {
            self.checkpoints
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(log.tp.clone(), stats.map_end);
            self.write_checkpoints(mgr)?;
            Ok(stats)
        });
        self.release(&log.tp);
        let m = &self.metrics;
        match &r {
            Ok(s) => {
                m.cleanings.fetch_add(1, Ordering::Relaxed);
                m.bytes_read.fetch_add(s.bytes_read, Ordering::Relaxed);
                m.bytes_written
                    .fetch_add(s.bytes_written, Ordering::Relaxed);
                m.records_kept.fetch_add(s.records_kept, Ordering::Relaxed);
                m.records_dropped
                    .fetch_add(s.records_dropped, Ordering::Relaxed);
                m.last_duration_ms
                    .store(s.duration_ms.max(0) as u64, Ordering::Relaxed);
                tracing::info!(
                    tp = %log.tp,
                    first_dirty = section.first_dirty,
                    map_end = s.map_end,
                    bytes_read = s.bytes_read,
                    bytes_written = s.bytes_written,
                    records_kept = s.records_kept,
                    records_dropped = s.records_dropped,
                    markers_removed = s.markers_removed,
                    segments = s.segments_swapped,
                    duration_ms = s.duration_ms,
                    "cleaned log"
                );
            }
            Err(e) => {
                m.failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(tp = %log.tp, error = %e, "cleaning failed");
            }
        }
        r.map(Some)
    }

    /// Truncates the log of `tp` to `offset` through
    /// [`LogManager::truncate_to`], keeping the cleaner checkpoint at or
    /// below the cut, as Kafka's `LogManager.truncateTo` does with
    /// `LogCleaner.maybeTruncateCheckpoint`. Without it, records appended
    /// after the truncation would sit below the checkpoint and count as
    /// already cleaned. When a cleaner runs, every truncation of a log goes
    /// through here.
    ///
    /// Waits for a cleaning of `tp` in progress to finish and keeps new
    /// ones out until the truncation is done. The lowered checkpoint is
    /// written before the log is cut: a crash in between leaves it merely
    /// low (more to clean), never above the truncated log.
    pub fn truncate_to(
        &self,
        mgr: &LogManager,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        self.excluding_cleaning(tp, || {
            self.truncate_checkpoint(mgr, tp, offset)
                .and_then(|()| mgr.truncate_to(tp, offset))
        })
    }

    /// Starts the log of `tp` over, empty, at `offset` through
    /// [`LogManager::truncate_fully_and_start_at`], keeping the cleaner
    /// checkpoint at or below `offset` and cleaning out of the partition
    /// meanwhile, as [`LogCleaner::truncate_to`] does.
    pub fn truncate_fully_and_start_at(
        &self,
        mgr: &LogManager,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        self.excluding_cleaning(tp, || {
            self.truncate_checkpoint(mgr, tp, offset)
                .and_then(|()| mgr.truncate_fully_and_start_at(tp, offset))
        })
    }

    /// Runs `f` once no cleaning of `tp` is in progress, keeping new ones
    /// out until it returns.
    fn excluding_cleaning<T>(&self, tp: &TopicPartition, f: impl FnOnce() -> T) -> T {
        {
            let mut busy = self.in_progress.lock().unwrap_or_else(|e| e.into_inner());
            while busy.contains(tp) {
                busy = self.idle.wait(busy).unwrap_or_else(|e| e.into_inner());
            }
            busy.insert(tp.clone());
        }
        let r = f();
        self.release(tp);
        r
    }

    /// Lowers the checkpoint of `tp` to `offset` if it is above, and
    /// writes `cleaner-offset-checkpoint` when it changed.
    pub fn truncate_checkpoint(
        &self,
        mgr: &LogManager,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        let lowered = {
            let mut all = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
            match all.get_mut(tp) {
                Some(ck) if *ck > offset => {
                    *ck = offset;
                    true
                }
                _ => false,
            }
        };
        if lowered {
            self.write_checkpoints(mgr)?;
        }
        Ok(())
    }

    /// Ends a cleaning or truncation of `tp`.
    fn release(&self, tp: &TopicPartition) {
        self.in_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tp);
        self.idle.notify_all();
    }

    /// Writes `cleaner-offset-checkpoint` in every data dir.
    pub fn write_checkpoints(&self, mgr: &LogManager) -> Result<(), StorageError> {
        let all = self
            .checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let logs = mgr.logs();
        let storage = mgr.storage();
        for d in mgr.log_dirs() {
            let entries: BTreeMap<TopicPartition, i64> = logs
                .iter()
                .filter(|l| l.dir.parent() == Some(d.as_path()))
                .filter_map(|l| all.get(&l.tp).map(|o| (l.tp.clone(), *o)))
                .collect();
            write_checkpoint(&*storage, &d.join(CLEANER_CHECKPOINT), &entries)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemStorage;
    use crate::config::LogConfig;
    use crate::manager::LogManagerConfig;
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn truncation_waits_for_a_cleaning_of_the_partition() {
        let storage = Arc::new(MemStorage::new());
        let mgr = LogManager::open(
            LogManagerConfig::with_storage(vec![PathBuf::from("/data")], storage),
            0,
        )
        .unwrap();
        let tp = TopicPartition::new("c", 0);
        let log = mgr.create_log(&tp, [1; 16], LogConfig::default()).unwrap();
        for _ in 0..4 {
            log.append(&mut crate::testing::batch(&[b"v"], 0), 0)
                .unwrap();
        }
        let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
        cleaner.checkpoints.lock().unwrap().insert(tp.clone(), 4);
        let (cleaner, mgr, tp) = (&cleaner, &mgr, &tp);
        // a cleaning of the partition is under way
        cleaner.in_progress.lock().unwrap().insert(tp.clone());
        let (done, finished) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                let r = cleaner.truncate_to(mgr, tp, 2);
                done.send(r.is_ok()).unwrap();
            });
            assert!(finished.recv_timeout(Duration::from_millis(200)).is_err());
            assert_eq!(log.log_end_offset(), 4);
            assert_eq!(cleaner.checkpoint_of(tp), Some(4));
            cleaner.release(tp);
            assert_eq!(finished.recv_timeout(Duration::from_secs(30)), Ok(true));
        });
        assert_eq!(log.log_end_offset(), 2);
        assert_eq!(cleaner.checkpoint_of(tp), Some(2));
        assert!(cleaner.in_progress.lock().unwrap().is_empty());
    }
}
