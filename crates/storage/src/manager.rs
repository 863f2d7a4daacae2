//! The log manager: every partition under the data dirs, opened in parallel,
//! checkpointed, truncated for replication (with the checkpoints rewritten
//! around the cut, see [`LogManager::truncate_to`]), and shut down cleanly.
//!
//! Start-up never refuses to start over one bad file or one failing dir
//! (see `docs/storage-format.md`, "Start-up rules"): a malformed offset
//! checkpoint is ignored with a warning (full recovery, log start from the
//! segments); a log dir that cannot be listed, or whose clean-shutdown
//! marker cannot be removed, is taken offline ([`LogManager::offline_dirs`])
//! and its partitions are listed by [`LogManager::failed_logs`]; creations
//! interrupted by a crash are settled (`creation`).

use crate::backend::{FileStorage, Storage};
use crate::checkpoint::{
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, read_checkpoint,
    write_atomic, write_checkpoint,
};
use crate::config::{LogConfig, TopicPartition};
use crate::creation::{self, Intent, KnownTopic, PendingCreation};
use crate::error::{IoContext, StorageError};
use crate::log::Log;
use crate::recovery::OpenOptions;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// Settings of the log manager.
#[derive(Debug, Clone)]
pub struct LogManagerConfig {
    /// `log.dirs`.
    pub log_dirs: Vec<PathBuf>,
    /// `num.recovery.threads.per.data.dir`.
    pub recovery_threads_per_data_dir: usize,
    /// Config for logs found on disk whose topic has no entry in `topic_configs`.
    pub default_log_config: LogConfig,
    pub topic_configs: HashMap<String, LogConfig>,
    /// CRC-check already-flushed segments too when recovering (slow).
    pub verify_flushed_on_recovery: bool,
    /// `log.flush.offset.checkpoint.interval.ms`: `tick` writes the
    /// checkpoint files this often.
    pub checkpoint_interval_ms: i64,
    /// The caller's table of committed topics, used at start to settle
    /// creations a crash interrupted ([`LogManager::prepare_logs`]). `None`
    /// when the caller keeps no table or lost it: then an interrupted
    /// creation counts as done when all its partitions exist.
    pub topic_table: Option<HashMap<String, KnownTopic>>,
    pub storage: Arc<dyn Storage>,
}

impl Default for LogManagerConfig {
    /// No log dirs, real files, one recovery thread per dir, Kafka defaults.
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl LogManagerConfig {
    /// Real files, one recovery thread per dir, Kafka defaults.
    pub fn new(log_dirs: Vec<PathBuf>) -> Self {
        Self::with_storage(log_dirs, Arc::new(FileStorage))
    }
    pub fn with_storage(log_dirs: Vec<PathBuf>, storage: Arc<dyn Storage>) -> Self {
        LogManagerConfig {
            log_dirs,
            recovery_threads_per_data_dir: 1,
            default_log_config: LogConfig::default(),
            topic_configs: HashMap::new(),
            verify_flushed_on_recovery: false,
            checkpoint_interval_ms: 60_000,
            topic_table: None,
            storage,
        }
    }
    fn config_for(&self, topic: &str) -> LogConfig {
        self.topic_configs
            .get(topic)
            .cloned()
            .unwrap_or_else(|| self.default_log_config.clone())
    }
}

/// All partitions of this broker. `Send + Sync`.
#[derive(Debug)]
pub struct LogManager {
    cfg: LogManagerConfig,
    registry: Arc<Registry>,
    failed: Mutex<BTreeMap<TopicPartition, String>>,
    /// Log dirs taken offline at start, with the reason. Nothing is read
    /// from or written to them until the next start.
    offline_dirs: BTreeMap<PathBuf, String>,
    now_ms: Mutex<i64>,
    last_checkpoint_ms: Mutex<i64>,
}

/// The logs of a manager and what its checkpoint writes hold. Each log
/// keeps a weak link to it, so that a truncation called on the log
/// ([`Log::truncate_to`]) rewrites the checkpoints of its data dir as
/// [`LogManager::truncate_to`] does.
#[derive(Debug)]
pub(crate) struct Registry {
    storage: Arc<dyn Storage>,
    logs: RwLock<BTreeMap<TopicPartition, Arc<Log>>>,
    /// Held while checkpoint files are read from the logs and written.
    checkpoint_writes: Mutex<()>,
}

/// What a truncation calls with the recovery point and log start to
/// checkpoint (see `Log::cut_then`).
pub(crate) type Persist<'a> = &'a mut dyn FnMut(i64, i64) -> Result<(), StorageError>;

impl Registry {
    fn logs(&self) -> Vec<Arc<Log>> {
        self.logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Serializes checkpoint writes, so one that read a recovery point
    /// before a truncation never writes it over the truncation's.
    fn lock_checkpoints(&self) -> std::sync::MutexGuard<'_, ()> {
        self.checkpoint_writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn write_checkpoints(
        &self,
        data_dir: &Path,
        rps: &BTreeMap<TopicPartition, i64>,
        starts: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), StorageError> {
        let storage = &*self.storage;
        // Log starts first: retention raises a recovery point past segments
        // it deletes, which were perhaps never synced. Were that recovery
        // point durable while the old log start is not, a crash would bring
        // those segments back and trust their torn bytes.
        write_checkpoint(storage, &data_dir.join(LOG_START_OFFSET_CHECKPOINT), starts)?;
        write_checkpoint(storage, &data_dir.join(RECOVERY_POINT_CHECKPOINT), rps)
    }

    /// Runs `cut`, a truncation of `log`, giving it what writes the
    /// checkpoints of the log's data dir with the recovery point and log
    /// start it passes. A log no longer registered (deleted) is cut
    /// without checkpoints.
    pub(crate) fn cut_with_checkpoints(
        &self,
        log: &Log,
        cut: impl FnOnce(&Log, Persist<'_>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let registered = self
            .logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&log.tp)
            .is_some_and(|l| std::ptr::eq(Arc::as_ptr(l), log));
        if !registered {
            return cut(log, &mut |_, _| Ok(()));
        }
        let data_dir = log.dir.parent().unwrap_or(Path::new("/")).to_path_buf();
        let _writing = self.lock_checkpoints();
        // The other logs' offsets now: a recovery point that rises meanwhile
        // is written a little low, which only costs recovery time.
        let (mut rps, mut starts) = dir_offsets(&self.logs(), &data_dir);
        cut(log, &mut |recovery_point, log_start| {
            rps.insert(log.tp.clone(), recovery_point);
            starts.insert(log.tp.clone(), log_start);
            self.write_checkpoints(&data_dir, &rps, &starts)
        })
    }
}

struct Job {
    dir: PathBuf,
    tp: TopicPartition,
    opts: OpenOptions,
}

impl LogManager {
    /// Finds and recovers every partition dir. A partition that fails to open
    /// (e.g. corruption below its recovery point) is left out and listed by
    /// [`LogManager::failed_logs`]; the others open normally.
    pub fn open(cfg: LogManagerConfig, now_ms: i64) -> Result<LogManager, StorageError> {
        let storage = cfg.storage.clone();
        let mut offline_dirs = BTreeMap::new();
        let mut online = Vec::new();
        for data_dir in &cfg.log_dirs {
            match storage
                .create_dir_all(data_dir)
                .and_then(|()| storage.list_dir(data_dir))
            {
                Ok(_) => online.push(data_dir.clone()),
                Err(e) => {
                    tracing::error!(dir = %data_dir.display(), error = %e, "log dir is offline: cannot open it");
                    offline_dirs.insert(data_dir.clone(), format!("cannot open the log dir: {e}"));
                }
            }
        }
        let mut failed = creation::settle(&*storage, &online, cfg.topic_table.as_ref());
        let mut per_dir: Vec<Vec<Job>> = Vec::new();
        let mut markers = Vec::new();
        for data_dir in &online {
            let marker = data_dir.join(CLEAN_SHUTDOWN_FILE);
            let clean = storage.exists(&marker);
            if clean {
                markers.push(marker);
            }
            let rps = read_checkpoint_or_empty(&*storage, data_dir, RECOVERY_POINT_CHECKPOINT);
            let starts = read_checkpoint_or_empty(&*storage, data_dir, LOG_START_OFFSET_CHECKPOINT);
            let listing = match storage.list_dir(data_dir) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(dir = %data_dir.display(), error = %e, "log dir is offline: cannot list it");
                    offline_dirs.insert(data_dir.clone(), format!("cannot list the log dir: {e}"));
                    continue;
                }
            };
            let mut jobs = Vec::new();
            for (name, is_dir) in listing {
                if !is_dir {
                    continue;
                }
                let p = data_dir.join(&name);
                if name.ends_with("-delete") {
                    // A delete already decided; retried at the next start if
                    // it fails now.
                    if let Err(e) = storage.remove_dir_all(&p) {
                        tracing::warn!(dir = %p.display(), error = %e, "cannot remove a deleted partition");
                    }
                    continue;
                }
                let Some(tp) = TopicPartition::from_dir_name(&name) else {
                    continue;
                };
                if failed.contains_key(&tp) {
                    continue;
                }
                let opts = OpenOptions {
                    recovery_point: rps.get(&tp).copied().unwrap_or(0),
                    log_start: starts.get(&tp).copied().unwrap_or(0),
                    clean_shutdown: clean,
                    verify_flushed: cfg.verify_flushed_on_recovery,
                    now_ms,
                };
                jobs.push(Job { dir: p, tp, opts });
            }
            per_dir.push(jobs);
        }

        let results: Mutex<Vec<(TopicPartition, Result<Log, StorageError>)>> =
            Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for jobs in per_dir {
                let queue = Arc::new(Mutex::new(jobs));
                for _ in 0..cfg.recovery_threads_per_data_dir.max(1) {
                    let queue = queue.clone();
                    let results = &results;
                    let cfg = &cfg;
                    let storage = storage.clone();
                    s.spawn(move || {
                        loop {
                            let job = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                            let Some(job) = job else { break };
                            let config = cfg.config_for(&job.tp.topic);
                            let r = Log::open(
                                storage.clone(),
                                &job.dir,
                                job.tp.clone(),
                                config,
                                job.opts,
                            );
                            results
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push((job.tp, r));
                        }
                    });
                }
            }
        });

        let mut logs = BTreeMap::new();
        for (tp, r) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
            match r {
                Ok(log) => {
                    if logs.contains_key(&tp) {
                        failed.insert(tp.clone(), "partition found in two log dirs".to_string());
                        continue;
                    }
                    logs.insert(tp, Arc::new(log));
                }
                Err(e) => {
                    tracing::error!(%tp, error = %e, "could not open log");
                    failed.insert(tp, e.to_string());
                }
            }
        }
        // From now on a crash is an unclean shutdown. A dir whose marker
        // stays would skip recovery after a crash: it goes offline instead
        // (its logs are left as they were opened, so the marker stays true).
        for m in markers {
            let removed = storage
                .remove_file(&m)
                .and_then(|()| m.parent().map_or(Ok(()), |d| storage.sync_dir(d)));
            if let Err(e) = removed {
                let dir = m.parent().unwrap_or(Path::new("/")).to_path_buf();
                tracing::error!(dir = %dir.display(), error = %e, "log dir is offline: cannot remove the clean-shutdown marker");
                offline_dirs.insert(dir, format!("cannot remove {CLEAN_SHUTDOWN_FILE}: {e}"));
            }
        }
        for (dir, reason) in &offline_dirs {
            let gone: Vec<TopicPartition> = logs
                .iter()
                .filter(|(_, l)| l.dir.parent() == Some(dir.as_path()))
                .map(|(tp, _)| tp.clone())
                .collect();
            for tp in gone {
                logs.remove(&tp);
                failed.insert(
                    tp,
                    format!("log dir {} is offline: {reason}", dir.display()),
                );
            }
        }
        let registry = Arc::new(Registry {
            storage: cfg.storage.clone(),
            logs: RwLock::new(logs),
            checkpoint_writes: Mutex::new(()),
        });
        for log in registry.logs() {
            log.set_owner(&registry);
        }
        Ok(LogManager {
            cfg,
            registry,
            failed: Mutex::new(failed),
            offline_dirs,
            now_ms: Mutex::new(now_ms),
            last_checkpoint_ms: Mutex::new(now_ms),
        })
    }

    /// Partitions that could not be opened, with the reason.
    pub fn failed_logs(&self) -> BTreeMap<TopicPartition, String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records a partition the caller could not open or create (it is then
    /// listed by [`LogManager::failed_logs`] until the next start).
    pub fn record_failed(&self, tp: &TopicPartition, reason: String) {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tp.clone(), reason);
    }

    /// Log dirs taken offline at start, with the reason.
    pub fn offline_dirs(&self) -> &BTreeMap<PathBuf, String> {
        &self.offline_dirs
    }

    /// The log dirs in use (`log.dirs` without the offline ones).
    pub fn online_dirs(&self) -> Vec<PathBuf> {
        self.cfg
            .log_dirs
            .iter()
            .filter(|d| !self.offline_dirs.contains_key(*d))
            .cloned()
            .collect()
    }

    fn read_logs(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<TopicPartition, Arc<Log>>> {
        self.registry.logs.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write_logs(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<TopicPartition, Arc<Log>>> {
        self.registry
            .logs
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a log in the data dir holding the fewest partitions.
    pub fn create_log(
        &self,
        tp: &TopicPartition,
        topic_id: [u8; 16],
        config: LogConfig,
    ) -> Result<Arc<Log>, StorageError> {
        let mut logs = self.write_logs();
        if logs.contains_key(tp) {
            return Err(StorageError::LogExists(tp.to_string()));
        }
        let online = self.online_dirs();
        let dir = online
            .iter()
            .min_by_key(|d| {
                logs.values()
                    .filter(|l| l.dir.parent() == Some(d.as_path()))
                    .count()
            })
            .ok_or_else(|| StorageError::InvalidArgument("no online log dirs".into()))?;
        let now = *self.now_ms.lock().unwrap_or_else(|e| e.into_inner());
        let log = Arc::new(Log::create(
            self.cfg.storage.clone(),
            dir,
            tp,
            topic_id,
            config,
            now,
        )?);
        log.set_owner(&self.registry);
        logs.insert(tp.clone(), log.clone());
        Ok(log)
    }

    /// Creates the logs of partitions `partitions` of `topic` all or nothing
    /// (see `creation`): an intent file in every online log dir first, then
    /// the logs. If one fails, the others are removed and the error
    /// returned. On success the creation is pending until
    /// [`PendingCreation::commit`]; a crash before that undoes it at the
    /// next start unless [`LogManagerConfig::topic_table`] holds the topic.
    pub fn prepare_logs(
        &self,
        topic: &str,
        topic_id: [u8; 16],
        partitions: std::ops::Range<i32>,
        config: LogConfig,
    ) -> Result<PendingCreation<'_>, StorageError> {
        if partitions.start < 0 || partitions.is_empty() {
            return Err(StorageError::InvalidArgument(format!(
                "bad partition range {partitions:?}"
            )));
        }
        let dirs = self.online_dirs();
        if dirs.is_empty() {
            return Err(StorageError::InvalidArgument("no online log dirs".into()));
        }
        // Never start over an existing partition: an undo removes every
        // directory of the range.
        for p in partitions.clone() {
            let tp = TopicPartition::new(topic, p);
            if self.get(&tp).is_some()
                || self
                    .cfg
                    .log_dirs
                    .iter()
                    .any(|d| self.cfg.storage.exists(&d.join(tp.to_string())))
            {
                return Err(StorageError::LogExists(tp.to_string()));
            }
        }
        let intent = Intent {
            topic: topic.to_string(),
            topic_id,
            partitions: partitions.clone(),
        };
        creation::write_intents(&*self.cfg.storage, &dirs, &intent)?;
        let mut pending = PendingCreation {
            mgr: self,
            intent,
            dirs,
            logs: Vec::new(),
            settled: false,
        };
        for p in partitions {
            let tp = TopicPartition::new(topic, p);
            match self.create_log(&tp, topic_id, config.clone()) {
                Ok(log) => pending.logs.push(log),
                Err(e) => {
                    tracing::warn!(partition = %tp, error = %e, "topic creation failed; removing the partitions made so far");
                    if let Err(undo) = pending.abort() {
                        tracing::error!(topic, error = %undo, "cannot undo the failed creation; the next start settles it");
                    }
                    return Err(e);
                }
            }
        }
        Ok(pending)
    }

    /// The storage backend the logs live on.
    pub fn storage(&self) -> Arc<dyn Storage> {
        self.cfg.storage.clone()
    }

    /// `log.dirs`.
    pub fn log_dirs(&self) -> &[PathBuf] {
        &self.cfg.log_dirs
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<Arc<Log>> {
        self.read_logs().get(tp).cloned()
    }

    pub fn logs(&self) -> Vec<Arc<Log>> {
        self.read_logs().values().cloned().collect()
    }

    /// Removes a log: renames its dir to `<tp>.<random hex>-delete` (so a
    /// crash mid-way finishes the delete on restart), then removes it.
    pub fn delete_log(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        let log = self
            .write_logs()
            .remove(tp)
            .ok_or_else(|| StorageError::UnknownLog(tp.to_string()))?;
        log.lock().closed = true;
        let storage = &self.cfg.storage;
        let parent = log.dir.parent().unwrap_or(Path::new("/")).to_path_buf();
        let doomed = parent.join(format!("{tp}.{:032x}-delete", rand::random::<u128>()));
        storage.rename(&log.dir, &doomed).at(&log.dir)?;
        storage.sync_dir(&parent).at(&parent)?;
        storage.remove_dir_all(&doomed).at(&doomed)?;
        Ok(())
    }

    /// Writes `recovery-point-offset-checkpoint` and
    /// `log-start-offset-checkpoint` in every data dir.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        let _writing = self.lock_checkpoints();
        let logs = self.logs();
        for data_dir in &self.online_dirs() {
            let (rps, starts) = dir_offsets(&logs, data_dir);
            self.write_checkpoints(data_dir, &rps, &starts)?;
        }
        Ok(())
    }

    /// Truncates the log of `tp` to `offset` ([`Log::truncate_to`], which
    /// does the same for a log this manager holds) and rewrites the
    /// checkpoints of its data dir before any append can follow, as Kafka's `LogManager.truncateTo` does: the on-disk recovery
    /// point never stays above the truncation, so recovery never trusts
    /// bytes appended after it as synced, and a log start the truncation
    /// lowered is never brought back up by a crash. The recovery point is
    /// also checkpointed once before the cut, at or below every byte the
    /// cut changes, so a crash in the middle of the cut is recovered as a
    /// torn tail, not as damage.
    ///
    /// If the truncation or the checkpoint fails, the log is closed to
    /// appends (the checkpoint may still hold the old recovery point) and
    /// the error is returned; the next start recovers it.
    ///
    /// The manager does not know the log cleaner (the broker owns it): when
    /// one runs, truncate through
    /// [`LogCleaner::truncate_to`](crate::cleaner::LogCleaner::truncate_to),
    /// which keeps cleaning out of the partition meanwhile and lowers the
    /// cleaner checkpoint to the cut.
    pub fn truncate_to(&self, tp: &TopicPartition, offset: i64) -> Result<(), StorageError> {
        self.get(tp)
            .ok_or_else(|| StorageError::UnknownLog(tp.to_string()))?
            .truncate_to(offset)
    }

    /// Starts the log of `tp` over, empty, at `offset`
    /// ([`Log::truncate_fully_and_start_at`]), with the checkpoints of its
    /// data dir rewritten around the cut as [`LogManager::truncate_to`]
    /// does: afterwards the on-disk recovery point and log start are
    /// `offset`. When a cleaner runs, go through
    /// [`LogCleaner::truncate_fully_and_start_at`](crate::cleaner::LogCleaner::truncate_fully_and_start_at).
    pub fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        self.get(tp)
            .ok_or_else(|| StorageError::UnknownLog(tp.to_string()))?
            .truncate_fully_and_start_at(offset)
    }

    fn lock_checkpoints(&self) -> std::sync::MutexGuard<'_, ()> {
        self.registry.lock_checkpoints()
    }

    fn write_checkpoints(
        &self,
        data_dir: &Path,
        rps: &BTreeMap<TopicPartition, i64>,
        starts: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), StorageError> {
        self.registry.write_checkpoints(data_dir, rps, starts)
    }

    /// Time-driven work of every log (segment.ms rolls, flushes), then the
    /// periodic checkpoint. Returns the first error after trying every log.
    pub fn tick(&self, now_ms: i64) -> Result<(), StorageError> {
        *self.now_ms.lock().unwrap_or_else(|e| e.into_inner()) = now_ms;
        let mut first_err = None;
        for log in self.logs() {
            if let Err(e) = log.tick(now_ms) {
                tracing::error!(tp = %log.tp, error = %e, "log tick failed");
                first_err.get_or_insert(e);
            }
        }
        let due = {
            let mut last = self
                .last_checkpoint_ms
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let due = now_ms.saturating_sub(*last) >= self.cfg.checkpoint_interval_ms;
            if due {
                *last = now_ms;
            }
            due
        };
        if due && let Err(e) = self.checkpoint() {
            first_err.get_or_insert(e);
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Flushes and closes every log, writes the checkpoints, then the
    /// clean-shutdown marker in each data dir.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        for log in self.logs() {
            log.close()?;
        }
        self.checkpoint()?;
        for data_dir in &self.online_dirs() {
            write_atomic(
                &*self.cfg.storage,
                &data_dir.join(CLEAN_SHUTDOWN_FILE),
                b"{\"version\":0,\"brokerEpoch\":-1}",
            )?;
        }
        Ok(())
    }
}

/// The recovery points and log start offsets of the logs in `data_dir`.
fn dir_offsets(
    logs: &[Arc<Log>],
    data_dir: &Path,
) -> (BTreeMap<TopicPartition, i64>, BTreeMap<TopicPartition, i64>) {
    let mut rps = BTreeMap::new();
    let mut starts = BTreeMap::new();
    for log in logs.iter().filter(|l| l.dir.parent() == Some(data_dir)) {
        let g = log.lock();
        rps.insert(log.tp.clone(), g.checkpoint_recovery_point());
        starts.insert(log.tp.clone(), g.log_start);
    }
    (rps, starts)
}

/// Reads an offset checkpoint; a malformed or unreadable one is treated as
/// absent, with a warning, as Kafka does (no recovery point: every log is
/// recovered fully; no log start: the first segment's base offset).
fn read_checkpoint_or_empty(
    storage: &dyn Storage,
    data_dir: &Path,
    name: &str,
) -> BTreeMap<TopicPartition, i64> {
    let path = data_dir.join(name);
    read_checkpoint(storage, &path).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "ignoring the checkpoint file; recovering every log of the dir as if it were absent");
        BTreeMap::new()
    })
}
