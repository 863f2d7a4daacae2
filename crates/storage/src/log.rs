//! One partition's log: an ordered map of segments plus its offsets.
//!
//! Invariants (under the mutex): `log_start <= hw <= leo`,
//! `recovery_point <= leo`; segments are keyed by base offset, the last one
//! is the only one appended to; every batch's offsets are ≥ its segment's
//! base and < the next segment's base; `leo` is the offset after the last
//! batch of the active segment (or its base when empty); every leader epoch
//! entry starts within `[log_start, leo]` (see [`crate::epochs`]).

use crate::backend::{Storage, StorageFile};
use crate::batch::{BatchScanner, Scanned, as_stored, assign, plan, validate, validate_as_stored};
use crate::checkpoint::{PARTITION_METADATA, encode_partition_metadata, write_atomic};
use crate::config::{LogConfig, TopicPartition};
use crate::epochs::{self, EpochEntry, LeaderEpochCache};
use crate::error::{IoContext, StorageError};
use crate::manager::{Persist, Registry};
use crate::segment::{
    Damage, HeaderWalk, LOG_SUFFIX, PRODUCER_SNAPSHOT_SUFFIX, RecentHit, Segment, Step,
    parse_file_name,
};
use crate::txn_index::{self, AbortedTxn};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker's timestamp when the topic uses LogAppendTime.
    pub log_append_time: Option<i64>,
    pub log_start_offset: i64,
    pub record_count: i64,
}

/// An aborted transaction whose ABORT marker is one of the batches of an
/// append: its `.txnindex` entry is written in the same step as the batch
/// (under the log's lock), so no flush ever covers the marker without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortMarker {
    /// Index of the marker among the batches of the append.
    pub batch: usize,
    pub producer_id: i64,
    /// The offset of the transaction's first batch.
    pub first_offset: i64,
    /// The first offset of the earliest transaction of another producer
    /// still open once the marker is written (the entry's last stable
    /// offset; `None`: none is, and it is the marker's offset + 1).
    pub next_open_offset: Option<i64>,
}

/// A slice of a segment file, ready for sendfile. Holds the file open, so it
/// stays readable after the segment is deleted.
#[derive(Debug, Clone)]
pub struct FileRegion {
    file: Arc<dyn StorageFile>,
    position: u64,
    len: usize,
}

impl FileRegion {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// File descriptor for sendfile; `None` for non-OS backends.
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.file.raw_fd()
    }
    pub fn position(&self) -> u64 {
        self.position
    }
    /// Reads the region into `out`, which must be exactly `len()` bytes.
    pub fn read_into(&self, out: &mut [u8]) -> Result<(), StorageError> {
        if out.len() != self.len {
            return Err(StorageError::Io {
                path: PathBuf::from("<file region>"),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "buffer length differs from the region's",
                ),
            });
        }
        self.file
            .read_exact_at(out, self.position)
            .map_err(|source| StorageError::Io {
                path: PathBuf::from("<file region>"),
                source,
            })
    }

    /// Copies the bytes out (TLS, in-memory backends, tests).
    pub fn read_to_vec(&self) -> Result<Vec<u8>, StorageError> {
        let mut buf = vec![0u8; self.len];
        self.read_into(&mut buf)?;
        Ok(buf)
    }
}

/// What a read returns: whole batches, in offset order.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub regions: Vec<FileRegion>,
    pub total_bytes: usize,
    /// The offset after the last batch returned (the fetch offset when
    /// none is).
    pub end_offset: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub log_end_offset: i64,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub config: LogConfig,
    pub segments: BTreeMap<i64, Segment>,
    pub log_start: i64,
    pub leo: i64,
    pub hw: i64,
    pub recovery_point: i64,
    pub unflushed_messages: u64,
    pub last_flush_ms: i64,
    pub last_now_ms: i64,
    /// Bumped on every truncation, so a flush that raced one does not
    /// advance the recovery point over data it did not sync.
    pub truncations: u64,
    pub closed: bool,
    /// The leader epochs of the log, as in its `leader-epoch-checkpoint`
    /// (written before anything that relies on a change of them).
    pub epochs: LeaderEpochCache,
    /// Group commit: at most one sync runs at a time (see [`Log::flush_to`]).
    pub flush: FlushState,
}

/// The sync in progress, if any, and the condition its waiters sleep on.
#[derive(Debug, Default)]
pub(crate) struct FlushState {
    /// LEO at the start of the running sync: every record below it is
    /// durable once that sync completes.
    pub syncing_to: Option<i64>,
    /// Rolled segments that lie below the recovery point (or below where
    /// the running sync will put it), so recovery would trust them as they
    /// are, but whose index files (offset, time, aborted transactions) a
    /// roll left unsynced: a roll syncs nothing, the next flush syncs them.
    /// Until then the recovery point written to the checkpoint is the
    /// oldest one's base ([`Inner::checkpoint_recovery_point`]), so
    /// recovery scans them and rebuilds their indexes.
    pub rolled_unsynced: std::collections::BTreeSet<i64>,
    /// A roll created segment files since the directory was last synced:
    /// the next flush syncs it before the recovery point may move into
    /// them.
    pub dir_unsynced: bool,
    /// Notified whenever a sync ends (successfully or not). Shared out of
    /// the guard so a waiter can sleep on the log's own mutex.
    pub done: Arc<Condvar>,
}

impl FlushState {
    /// For a log just created or opened: segment files may have been
    /// created since the directory was last synced, so the first flush
    /// syncs it before any record in them counts as durable.
    pub(crate) fn with_directory_unsynced() -> FlushState {
        FlushState {
            dir_unsynced: true,
            ..FlushState::default()
        }
    }
}

impl Inner {
    /// The log's offset invariants, checked after every change to them in
    /// debug builds (and so in every test).
    #[track_caller]
    pub(crate) fn debug_check(&self) {
        debug_assert!(
            self.log_start <= self.hw && self.hw <= self.leo,
            "log start {} <= high watermark {} <= log end {}",
            self.log_start,
            self.hw,
            self.leo
        );
        debug_assert!(
            self.recovery_point <= self.leo,
            "recovery point {} <= log end {}",
            self.recovery_point,
            self.leo
        );
        debug_assert!(
            self.epochs
                .entries()
                .iter()
                .all(|e| self.log_start <= e.start_offset && e.start_offset <= self.leo),
            "leader epochs {:?} start within [log start {}, log end {}]",
            self.epochs.entries(),
            self.log_start,
            self.leo
        );
    }

    /// Trims the leader epochs to a log start that moved up (retention,
    /// DeleteRecords) and rewrites their file. A failure to write is only
    /// logged: the file then holds entries below the log start, which the
    /// next open trims again.
    pub(crate) fn trim_epochs_to_log_start(&mut self, storage: &dyn Storage, dir: &Path) {
        if self.epochs.truncate_from_start(self.log_start)
            && let Err(e) = epochs::write(storage, dir, &self.epochs)
        {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot rewrite the leader epoch checkpoint after the log start moved");
        }
    }

    /// The recovery point to write to the checkpoint: the in-memory one,
    /// or the base of the oldest rolled segment below it whose indexes are
    /// not synced yet (see [`FlushState::rolled_unsynced`]), so that
    /// recovery scans that segment instead of trusting its index files.
    pub(crate) fn checkpoint_recovery_point(&self) -> i64 {
        self.rolled_unsynced()
            .next()
            .map_or(self.recovery_point, |b| b.min(self.recovery_point))
    }

    /// The marks of [`FlushState::rolled_unsynced`] that still matter, in
    /// order: a marked segment that went (retention, compaction) or is
    /// active again (a truncation into it) needs nothing more, as recovery
    /// scans the segment holding the recovery point.
    fn rolled_unsynced(&self) -> impl Iterator<Item = i64> + '_ {
        let active = self
            .segments
            .keys()
            .next_back()
            .copied()
            .unwrap_or(i64::MAX);
        self.flush
            .rolled_unsynced
            .iter()
            .copied()
            .filter(move |b| *b < active && self.segments.contains_key(b))
    }

    /// Whether a roll left work for the next flush (see [`Log::roll`]):
    /// marked index files or the directory. Drops the marks that no longer
    /// matter.
    pub(crate) fn roll_work(&mut self) -> bool {
        self.flush.rolled_unsynced = self.rolled_unsynced().collect();
        !self.flush.rolled_unsynced.is_empty() || self.flush.dir_unsynced
    }

    pub(crate) fn active(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }
}

/// The records of an append: a buffer offsets are assigned in, or one that
/// is stored as it is with the offsets written over the stored copy.
enum Input<'a> {
    Mut(&'a mut [u8]),
    Shared(&'a [u8]),
    /// A follower's: stored as it is, offsets included.
    AsStored(&'a [u8]),
}

/// One partition. `Send + Sync`; all methods take `&self`.
#[derive(Debug)]
pub struct Log {
    pub(crate) tp: TopicPartition,
    pub(crate) topic_id: [u8; 16],
    pub(crate) dir: PathBuf,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) inner: Mutex<Inner>,
    /// The log manager holding this log, whose checkpoints a truncation
    /// rewrites (none for a log opened or created on its own).
    pub(crate) owner: Mutex<Weak<Registry>>,
}

/// Removes the producer snapshots in `dir` whose offset is above `offset`
/// (not synced: the caller syncs the dir). Returns how many went.
pub(crate) fn remove_producer_snapshots_above(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
) -> Result<usize, StorageError> {
    let mut removed = 0;
    for (name, is_dir) in storage.list_dir(dir).at(dir)? {
        let Some((at, PRODUCER_SNAPSHOT_SUFFIX)) = parse_file_name(&name) else {
            continue;
        };
        if is_dir || at <= offset {
            continue;
        }
        let p = dir.join(&name);
        storage.remove_file(&p).at(&p)?;
        tracing::info!(path = %p.display(), offset, "removed a producer snapshot above the log end offset");
        removed += 1;
    }
    Ok(removed)
}

pub(crate) fn roll_jitter(config: &LogConfig) -> i64 {
    let max = config.segment_jitter_ms.min(config.segment_ms);
    if max <= 0 {
        0
    } else {
        (rand::random::<u64>() % max as u64) as i64
    }
}

impl Log {
    /// Creates a new, empty log in `<data_dir>/<tp>`.
    pub fn create(
        storage: Arc<dyn Storage>,
        data_dir: &Path,
        tp: &TopicPartition,
        topic_id: [u8; 16],
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Log, StorageError> {
        config.validate().map_err(StorageError::InvalidArgument)?;
        let dir = data_dir.join(tp.to_string());
        if storage.exists(&dir) {
            return Err(StorageError::LogExists(tp.to_string()));
        }
        storage.create_dir_all(&dir).at(&dir)?;
        storage.sync_dir(data_dir).at(data_dir)?;
        write_atomic(
            &*storage,
            &dir.join(PARTITION_METADATA),
            encode_partition_metadata(&topic_id).as_bytes(),
        )?;
        epochs::write(&*storage, &dir, &LeaderEpochCache::default())?;
        let seg = Segment::create(
            &*storage,
            &dir,
            0,
            config.segment_index_bytes,
            now_ms,
            roll_jitter(&config),
        )?;
        let mut segments = BTreeMap::new();
        segments.insert(0, seg);
        Ok(Log {
            tp: tp.clone(),
            topic_id,
            dir,
            storage,
            inner: Mutex::new(Inner {
                config,
                segments,
                log_start: 0,
                leo: 0,
                hw: 0,
                recovery_point: 0,
                unflushed_messages: 0,
                last_flush_ms: now_ms,
                last_now_ms: now_ms,
                truncations: 0,
                closed: false,
                epochs: LeaderEpochCache::default(),
                // The first segment's files were created after the last
                // directory sync: the first flush syncs it.
                flush: FlushState::with_directory_unsynced(),
            }),
            owner: Mutex::new(Weak::new()),
        })
    }

    pub(crate) fn set_owner(&self, registry: &Arc<Registry>) {
        *self.owner.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(registry);
    }

    /// Runs the truncation `cut` with the owning manager's checkpoints
    /// rewritten around it, or with none when no manager holds the log.
    fn cut_durably(
        &self,
        cut: impl FnOnce(&Log, Persist<'_>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let owner = self
            .owner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade();
        match owner {
            Some(registry) => registry.cut_with_checkpoints(self, cut),
            None => cut(self, &mut |_, _| Ok(())),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }
    pub fn topic_id(&self) -> [u8; 16] {
        self.topic_id
    }
    pub fn config(&self) -> LogConfig {
        self.lock().config.clone()
    }
    /// New settings apply to later appends and new segments.
    pub fn set_config(&self, c: LogConfig) {
        self.lock().config = c;
    }
    pub fn dir(&self) -> PathBuf {
        self.dir.clone()
    }
    /// The storage backend the log's files live on (for files kept beside
    /// the segments, such as producer snapshots).
    pub fn storage(&self) -> Arc<dyn Storage> {
        self.storage.clone()
    }
    pub fn log_start_offset(&self) -> i64 {
        self.lock().log_start
    }
    pub fn log_end_offset(&self) -> i64 {
        self.lock().leo
    }
    pub fn high_watermark(&self) -> i64 {
        self.lock().hw
    }
    /// Sets the high watermark, clamped to `[log start, LEO]`.
    pub fn set_high_watermark(&self, hw: i64) {
        let mut g = self.lock();
        g.hw = hw.clamp(g.log_start, g.leo);
        g.debug_check();
    }
    pub fn recovery_point(&self) -> i64 {
        self.lock().recovery_point
    }
    /// The recovery point the log manager writes to the checkpoint: the
    /// recovery point, or lower while a rolled segment below it still has
    /// unsynced index files (recovery must scan that one).
    pub fn checkpoint_recovery_point(&self) -> i64 {
        self.lock().checkpoint_recovery_point()
    }
    pub fn size_bytes(&self) -> u64 {
        self.lock().segments.values().map(|s| s.size).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.lock().segments.len()
    }
    /// The damage found so far in this log's segments, as (segment base
    /// offset, damage), oldest first. Found at start (segments recovered or
    /// verified) or by reads; see [`Damage`].
    pub fn damage(&self) -> Vec<(i64, Damage)> {
        self.lock()
            .segments
            .iter()
            .filter_map(|(b, s)| s.damage().map(|d| (*b, d)))
            .collect()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.lock().segments.keys().copied().collect()
    }

    /// Validates every batch in `records` (magic 2, CRC-32C, lengths, size ≤
    /// max_message_bytes, timestamps), assigns consecutive offsets from LEO
    /// in place, sets LogAppendTime (+CRC) when configured, appends, indexes,
    /// and flushes per policy. All or nothing.
    pub fn append(&self, records: &mut [u8], now_ms: i64) -> Result<AppendInfo, StorageError> {
        self.append_inner(records, now_ms, None)
    }

    /// [`Log::append`] as the leader in `leader_epoch`: also stamps each
    /// batch's partitionLeaderEpoch (not CRC-covered), as Kafka's leader does.
    pub fn append_as_leader(
        &self,
        records: &mut [u8],
        now_ms: i64,
        leader_epoch: i32,
    ) -> Result<AppendInfo, StorageError> {
        self.append_inner(records, now_ms, Some(leader_epoch))
    }

    /// [`Log::append`] without waiting for the flush the policy
    /// (`flush.messages`) may ask for. Returns, with the append's result, the
    /// offset to pass to [`Log::flush_through`] before the append may be
    /// acknowledged, when the policy asks for one. Lets a caller append to
    /// several partitions first and then sync them concurrently.
    pub fn append_deferring_flush(
        &self,
        records: &mut [u8],
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        self.append_unflushed(Input::Mut(records), now_ms, None, &[])
    }

    /// [`Log::append_deferring_flush`] for a buffer the caller cannot change
    /// (a slice of the received request): the bytes are written as they
    /// are and each batch's assigned base offset is written over the
    /// stored copy, so the request is never copied. With LogAppendTime the
    /// batches must be rewritten (timestamp, CRC): that case copies.
    pub fn append_shared(
        &self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        self.append_unflushed(Input::Shared(records), now_ms, None, &[])
    }

    /// [`Log::append_shared`] as the leader in `leader_epoch` (stamps each
    /// batch's partitionLeaderEpoch, so the request is copied first).
    pub fn append_shared_as_leader(
        &self,
        records: &[u8],
        now_ms: i64,
        leader_epoch: i32,
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        self.append_unflushed(Input::Shared(records), now_ms, Some(leader_epoch), &[])
    }

    /// Appends batches a follower fetched from its leader, as the leader
    /// wrote them: offsets, timestamps, partitionLeaderEpoch and producer
    /// fields are kept, byte for byte. The batches are checked (magic 2,
    /// CRC-32C, lengths, record count against the offset range, offsets
    /// increasing from batch to batch; a gap between batches is what
    /// compaction leaves and is kept) but not the records' contents, which
    /// the leader validated. The first batch must not start below the log
    /// end offset ([`StorageError::UnexpectedAppendOffset`]) and each batch
    /// must start after the one before ([`StorageError::OffsetsOutOfOrder`]);
    /// otherwise nothing is appended. A batch's leader epoch newer than the
    /// latest is recorded as starting at its base offset (the epoch file is
    /// written before the batch). Flushes per policy, as [`Log::append`];
    /// the high watermark does not move (the caller sets it from the
    /// leader's).
    pub fn append_as_follower(
        &self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let (info, flush) = self.append_as_follower_deferring_flush(records, now_ms)?;
        if let Some(end) = flush {
            self.flush_through(end, now_ms)?;
        }
        Ok(info)
    }

    /// [`Log::append_as_follower`] leaving the flush the policy asks for to
    /// the caller, as [`Log::append_deferring_flush`].
    pub fn append_as_follower_deferring_flush(
        &self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        self.append_unflushed(Input::AsStored(records), now_ms, None, &[])
    }

    /// [`Log::append_as_follower_deferring_flush`] of batches that end
    /// aborted transactions: `aborts` names their ABORT markers, whose
    /// `.txnindex` entries are written with the batches (all or nothing).
    pub fn append_as_follower_ending_txns(
        &self,
        records: &[u8],
        now_ms: i64,
        aborts: &[AbortMarker],
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        self.append_unflushed(Input::AsStored(records), now_ms, None, aborts)
    }

    /// [`Log::append_deferring_flush`] (as the leader in `leader_epoch`,
    /// when given) of batches that end aborted transactions: `aborts` names
    /// their ABORT markers, whose `.txnindex` entries are written with the
    /// batches (all or nothing).
    pub fn append_ending_txns(
        &self,
        records: &mut [u8],
        now_ms: i64,
        leader_epoch: Option<i32>,
        aborts: &[AbortMarker],
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        self.append_unflushed(Input::Mut(records), now_ms, leader_epoch, aborts)
    }

    fn append_inner(
        &self,
        records: &mut [u8],
        now_ms: i64,
        leader_epoch: Option<i32>,
    ) -> Result<AppendInfo, StorageError> {
        let (info, flush) =
            self.append_unflushed(Input::Mut(records), now_ms, leader_epoch, &[])?;
        if let Some(end) = flush {
            self.flush_through(end, now_ms)?;
        }
        Ok(info)
    }

    /// Appends; returns the end offset to flush through when the flush
    /// policy asks for a sync (the caller does it, without the lock).
    fn append_unflushed(
        &self,
        input: Input<'_>,
        now_ms: i64,
        leader_epoch: Option<i32>,
        aborts: &[AbortMarker],
    ) -> Result<(AppendInfo, Option<i64>), StorageError> {
        let config = {
            let g = self.lock();
            if g.closed {
                return Err(StorageError::Closed(self.tp.to_string()));
            }
            g.config.clone()
        };
        let bytes: &[u8] = match &input {
            Input::Mut(r) => r,
            Input::Shared(r) | Input::AsStored(r) => r,
        };
        let follower = matches!(input, Input::AsStored(_));
        // Validation (which also refuses a request larger than a segment)
        // reads every record (decompressing within its bound):
        // the costly part of an append, done before taking the log's lock
        // so that reads and other appends of the partition do not wait.
        let valid = if follower {
            validate_as_stored(bytes, &config)?
        } else {
            validate(bytes, &config, now_ms)?
        };
        for a in aborts {
            if !valid.is_control(a.batch) {
                return Err(StorageError::InvalidArgument(format!(
                    "{a:?}: batch {} of the append is not a control batch",
                    a.batch
                )));
            }
        }
        let mut g = self.lock();
        if g.closed {
            return Err(StorageError::Closed(self.tp.to_string()));
        }
        g.last_now_ms = now_ms;
        let base = g.leo;
        let mut copy;
        let in_place = leader_epoch.is_some()
            || config.message_timestamp_type == crate::TimestampType::LogAppendTime;
        let (records, batches, write_base_offsets): (&[u8], _, _) = match input {
            Input::Mut(r) => {
                let b = assign(r, &valid, base, &config, now_ms, leader_epoch);
                (r, b, false)
            }
            Input::Shared(r) if in_place => {
                copy = r.to_vec();
                let b = assign(&mut copy, &valid, base, &config, now_ms, leader_epoch);
                (&copy, b, false)
            }
            Input::Shared(r) => (r, plan(&valid, base), true),
            Input::AsStored(r) => {
                let b = as_stored(&valid);
                if let Some(first) = b.first()
                    && first.base_offset < base
                {
                    return Err(StorageError::UnexpectedAppendOffset {
                        first_offset: first.base_offset,
                        log_end_offset: base,
                    });
                }
                (r, b, false)
            }
        };
        let first = batches.first().map_or(base, |b| b.base_offset);
        let last = batches.last().map_or(base, |b| b.last_offset);
        // The leader epochs the batches carry: stamped by this leader, or
        // as a follower received them. Other appends store the producer's
        // field, which says nothing about leadership.
        let carried: Vec<(i32, i64)> = match leader_epoch {
            Some(epoch) => vec![(epoch, first)],
            None if follower => valid
                .leader_epochs()
                .zip(batches.iter().map(|b| b.base_offset))
                .collect(),
            None => Vec::new(),
        };
        self.assign_carried_epochs(&mut g, &carried)?;
        let max_ts = batches.iter().map(|b| b.max_timestamp).max().unwrap_or(-1);
        self.maybe_roll(
            &mut g,
            records.len() as u64,
            last,
            batches.len(),
            max_ts,
            now_ms,
        )?;
        let storage = self.storage.clone();
        let seg = g.active();
        let old_size = seg.size;
        let appended = seg
            .append(
                records,
                &batches,
                config.index_interval_bytes,
                write_base_offsets,
            )
            .and_then(|()| {
                aborts.iter().try_for_each(|a| {
                    let last = batches.get(a.batch).map_or(base, |b| b.base_offset);
                    seg.txn_index.append(
                        &*storage,
                        AbortedTxn {
                            producer_id: a.producer_id,
                            first_offset: a.first_offset,
                            last_offset: last,
                            last_stable_offset: a.next_open_offset.unwrap_or(last + 1),
                        },
                    )
                })
            });
        if let Err(e) = appended {
            // Undo derived state, and cut what part of the write reached the
            // file (a full disk fails part-way): the segment must end on a
            // batch boundary, or a later restart would take the partial
            // batch for part of the log. Should the cut fail too, appends
            // still write at `size` and the next start cuts the rest.
            let _ = seg.index.truncate_to_position(old_size as u32);
            let _ = seg.time_index.truncate_to(base);
            let _ = seg.txn_index.truncate_to(base);
            seg.size = old_size;
            seg.next_offset = base;
            seg.recent.clear();
            if let Err(cut) = seg.log.set_len(old_size) {
                tracing::warn!(tp = %self.tp, position = old_size, error = %cut, "cannot cut a failed append");
            }
            return Err(e);
        }
        g.leo = last + 1;
        let count: i64 = batches.iter().map(|b| b.records).sum();
        g.unflushed_messages = g.unflushed_messages.saturating_add(count as u64);
        let info = AppendInfo {
            base_offset: first,
            last_offset: last,
            log_append_time: (!follower
                && config.message_timestamp_type == crate::TimestampType::LogAppendTime)
                .then_some(now_ms),
            log_start_offset: g.log_start,
            record_count: count,
        };
        let flush = (g.unflushed_messages >= config.flush_messages).then_some(last + 1);
        g.debug_check();
        Ok((info, flush))
    }

    /// Records the epochs of `carried` ((epoch, first offset) of each
    /// batch about to be appended) that differ from the latest, as Kafka's
    /// follower does for every batch it appends, and writes the epoch file
    /// before any of those batches is: a batch on disk is never of an epoch
    /// its file does not know. A batch of an epoch older than the latest
    /// entry replaces the entries from there (`LeaderEpochCache::assign`),
    /// so the file never names an epoch that starts below a record of an
    /// older one. Nothing changes when the write fails.
    fn assign_carried_epochs(
        &self,
        g: &mut Inner,
        carried: &[(i32, i64)],
    ) -> Result<(), StorageError> {
        let needed = |epochs: &LeaderEpochCache, epoch: i32, start: i64| {
            epoch >= 0
                && epochs
                    .latest_entry()
                    .is_none_or(|l| l.epoch != epoch || start < l.start_offset)
        };
        if !carried.iter().any(|&(e, o)| needed(&g.epochs, e, o)) {
            return Ok(());
        }
        let mut next = g.epochs.clone();
        for &(epoch, start) in carried {
            if needed(&next, epoch, start) {
                next.assign(epoch, start);
            }
        }
        epochs::write(&*self.storage, &self.dir, &next)?;
        g.epochs = next;
        Ok(())
    }

    /// Records that `epoch` starts at `offset` (Kafka's
    /// `LeaderEpochFileCache.assign`: the broker becoming leader in `epoch`
    /// passes the log end offset, before it appends anything). Entries of
    /// epochs ≥ `epoch` or starting at or after `offset` are replaced; the
    /// call does nothing when `epoch` is the latest and starts at or before
    /// `offset`. The epoch file is written before this returns. `offset`
    /// must lie within `[log start, LEO]`, `epoch` must not be negative.
    pub fn assign_epoch_start(&self, epoch: i32, offset: i64) -> Result<(), StorageError> {
        let mut g = self.lock();
        if epoch < 0 || offset < g.log_start || offset > g.leo {
            return Err(StorageError::InvalidArgument(format!(
                "leader epoch {epoch} starting at {offset} (log start {}, log end {})",
                g.log_start, g.leo
            )));
        }
        let mut next = g.epochs.clone();
        if next.assign(epoch, offset) {
            epochs::write(&*self.storage, &self.dir, &next)?;
            g.epochs = next;
        }
        g.debug_check();
        Ok(())
    }

    /// The latest leader epoch that wrote (or is about to write) to the log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.lock().epochs.latest_epoch()
    }

    /// Where leader epoch `epoch` ended in this log, as (epoch, end offset):
    /// Kafka's `endOffsetFor` against the current LEO (see
    /// [`LeaderEpochCache::end_offset_for`]). Answers OffsetForLeaderEpoch.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let g = self.lock();
        g.epochs.end_offset_for(epoch, g.leo)
    }

    /// The leader epoch entries, oldest first.
    pub fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.lock().epochs.entries().to_vec()
    }

    fn maybe_roll(
        &self,
        g: &mut Inner,
        incoming: u64,
        last_offset: i64,
        batches: usize,
        max_timestamp: i64,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let config = g.config.clone();
        let seg = g.active();
        if seg.size == 0 {
            return Ok(());
        }
        let roll = seg.size + incoming > config.segment_bytes
            || seg.time_waited_for_roll(now_ms, max_timestamp)
                > config.segment_ms - seg.roll_jitter_ms
            || seg.index.len() + batches > seg.index.max_entries()
            || seg.time_index.len() + batches > seg.time_index.max_entries()
            || last_offset - seg.base_offset > i32::MAX as i64;
        if roll {
            self.roll(g, now_ms)?;
        }
        Ok(())
    }

    /// Starts a new active segment at LEO.
    pub(crate) fn roll(&self, g: &mut Inner, now_ms: i64) -> Result<(), StorageError> {
        let leo = g.leo;
        let config = g.config.clone();
        if g.active().base_offset == leo {
            return Ok(());
        }
        // The recovery point sits (or a running sync will put it) at the
        // end of this segment.
        let covered = g.recovery_point.max(g.flush.syncing_to.unwrap_or(i64::MIN)) >= leo;
        let old = g.active();
        let old_base = old.base_offset;
        old.on_become_inactive()?;
        let seg = match Segment::create(
            &*self.storage,
            &self.dir,
            leo,
            config.segment_index_bytes,
            now_ms,
            roll_jitter(&config),
        ) {
            Ok(seg) => seg,
            Err(e) => {
                // A roll that fails part-way (a full disk) must leave no
                // files behind: the log goes on appending to the old
                // segment, and a later start would take them for a segment
                // starting inside the old one's offsets.
                self.remove_segment_files(leo);
                return Err(e);
            }
        };
        g.segments.insert(leo, seg);
        if covered {
            // From the moment the new segment (based at the recovery point)
            // exists, recovery would trust the old one as it is, indexes
            // included, which flushes leave unsynced while a segment holds
            // the recovery point. No sync here (this runs inside an
            // append): the checkpoint points recovery at the old segment
            // until the next flush has synced them.
            g.flush.rolled_unsynced.insert(old_base);
        }
        // The directory is synced by the next flush, before the recovery
        // point moves into the new files.
        g.flush.dir_unsynced = true;
        tracing::debug!(tp = %self.tp, base = leo, "rolled segment");
        Ok(())
    }

    /// Removes what exists of the files of a segment at `base` that never
    /// became part of the log (best effort: a failure is logged).
    fn remove_segment_files(&self, base: i64) {
        use crate::segment::{SEGMENT_SUFFIXES, file_name};
        for suffix in SEGMENT_SUFFIXES {
            let p = self.dir.join(file_name(base, suffix));
            if self.storage.exists(&p)
                && let Err(e) = self.storage.remove_file(&p)
            {
                tracing::warn!(path = %p.display(), error = %e, "cannot remove the files of a failed roll");
            }
        }
        let _ = self.storage.sync_dir(&self.dir);
    }

    /// Reads whole batches from `fetch_offset`, up to `max_bytes` (the first
    /// batch regardless of size when `min_one_batch`), stopping before any
    /// batch that reaches `max_offset` (exclusive; e.g. the high watermark).
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadResult, StorageError> {
        let g = self.lock();
        if fetch_offset < g.log_start || fetch_offset > g.leo {
            return Err(StorageError::OffsetOutOfRange {
                offset: fetch_offset,
                log_start: g.log_start,
                log_end: g.leo,
            });
        }
        let mut regions = Vec::new();
        let mut total = 0usize;
        let mut end_offset = fetch_offset;
        let start_base = g
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        'segments: for (i, seg) in g.segments.range(start_base..).map(|(_, s)| s).enumerate() {
            if fetch_offset >= max_offset {
                break;
            }
            // Batches appended recently are found without reading headers.
            let cached = if i == 0 {
                seg.recent.find(fetch_offset, seg.size)
            } else {
                seg.recent.covers(seg.size).then_some(RecentHit::At(0))
            };
            let (start, mut batches) = match cached {
                Some(RecentHit::PastEnd) => continue,
                Some(RecentHit::At(k)) => {
                    let mut it = seg.recent.from(k).peekable();
                    let start = it.peek().map_or(seg.size, |b| b.position);
                    (
                        start,
                        Batches::Cached(it.map(|b| (b.last_offset, b.size as usize))),
                    )
                }
                None => {
                    let (start, expected) = if i == 0 {
                        match seg.translate_offset(fetch_offset)? {
                            Some((pos, h)) => (pos, h.base_offset),
                            None => continue,
                        }
                    } else {
                        (0, seg.base_offset)
                    };
                    (
                        start,
                        Batches::Walked(HeaderWalk::new(seg, start, Some(expected))),
                    )
                }
            };
            let mut end = start;
            let mut stop = false;
            loop {
                // The end of a damaged segment is its damage: never go on
                // to a later segment, which would skip the damaged offsets
                // without a word.
                let next = match batches.next()? {
                    Next::End => seg.damage().map_or(Next::End, Next::Damaged),
                    next => next,
                };
                let (last_offset, size) = match next {
                    Next::Batch(last_offset, size) => (last_offset, size),
                    Next::End => break,
                    Next::Damaged(d) => {
                        // Serve the intact batches before the damage (the
                        // walk may have found the last one counted bad).
                        let cut = end.saturating_sub(d.position.max(start));
                        end -= cut;
                        total -= cut as usize;
                        if total == 0 {
                            return Err(seg.damage_error(&d));
                        }
                        if cut > 0 {
                            // The batch counted last was the damaged one.
                            end_offset = end_offset.min(d.offset);
                        }
                        stop = true;
                        break;
                    }
                };
                if last_offset >= max_offset {
                    stop = true;
                    break;
                }
                if total + size > max_bytes && !(total == 0 && min_one_batch) {
                    stop = true;
                    break;
                }
                total += size;
                end += size as u64;
                end_offset = end_offset.max(last_offset + 1);
                if total >= max_bytes {
                    stop = true;
                    break;
                }
            }
            if end > start {
                regions.push(FileRegion {
                    file: seg.log.clone(),
                    position: start,
                    len: (end - start) as usize,
                });
            }
            if stop {
                break 'segments;
            }
        }
        Ok(ReadResult {
            regions,
            total_bytes: total,
            end_offset,
            log_start_offset: g.log_start,
            high_watermark: g.hw,
            log_end_offset: g.leo,
        })
    }

    /// The first record with timestamp ≥ `ts` as (offset, timestamp).
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let g = self.lock();
        for seg in g.segments.values() {
            if seg.max_timestamp >= ts
                && let Some(found) = seg.find_offset_by_timestamp(ts, g.log_start)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp (the first such) as
    /// (offset, timestamp), for ListOffsets MAX_TIMESTAMP.
    pub fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>, StorageError> {
        let g = self.lock();
        let mut best: Option<&Segment> = None;
        for seg in g.segments.values() {
            if seg.size > 0 && best.is_none_or(|b| seg.max_timestamp > b.max_timestamp) {
                best = Some(seg);
            }
        }
        match best {
            None => Ok(None),
            Some(seg) => seg.find_offset_by_timestamp(seg.max_timestamp, g.log_start),
        }
    }

    /// Moves the log start offset to `offset` (DeleteRecords). Reads below
    /// it fail from now on; the segments wholly below it are deleted by the
    /// next retention run exactly as retention deletes segments (log start
    /// checkpointed first, files renamed `.deleted`, unlinked after
    /// `file.delete.delay.ms`), so a read that already holds a segment's
    /// file finishes. `offset` must not exceed the high watermark.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, StorageError> {
        let mut g = self.lock();
        if offset > g.hw || offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: g.log_start,
                log_end: g.hw,
            });
        }
        if offset > g.log_start {
            g.log_start = offset;
            g.trim_epochs_to_log_start(&*self.storage, &self.dir);
        }
        g.debug_check();
        Ok(g.log_start)
    }

    /// Removes every record at or after `offset` (replication truncation).
    /// A batch straddling `offset` is removed whole. The result is flushed
    /// and becomes the recovery point; producer snapshots above the new log
    /// end offset are removed (all of them when nothing stays), as Kafka
    /// does, and the leader epochs starting at or after the new log end
    /// offset (all of them when nothing stays).
    ///
    /// For a log held by a [`LogManager`], the recovery point and log start
    /// in the checkpoints of its data dir are rewritten around the cut
    /// before this returns (see [`LogManager::truncate_to`]), so that a
    /// crash after later appends never recovers with the old, higher
    /// recovery point (which would take a torn append in the offsets it
    /// covers for damage of synced data) or the old log start (which would
    /// hide records appended after a truncation below it). A log opened on
    /// its own has no checkpoints: its caller persists
    /// [`Log::recovery_point`] and [`Log::log_start_offset`] before the
    /// next append.
    ///
    /// A truncation that fails leaves the log closed to appends (its files
    /// may no longer match its offsets); the next start recovers it.
    ///
    /// [`LogManager`]: crate::LogManager
    /// [`LogManager::truncate_to`]: crate::LogManager::truncate_to
    pub fn truncate_to(&self, offset: i64) -> Result<(), StorageError> {
        self.cut_durably(|log, persist| log.cut_then(offset, false, persist))
    }

    /// Removes every segment and starts the log empty at `offset`: log
    /// start = LEO = high watermark = recovery point = `offset`, no leader
    /// epochs, no producer snapshots (Kafka's `truncateFullyAndStartAt`,
    /// for a follower whose fetch offset is below the leader's log start).
    /// `offset` may lie above the LEO. The new state is flushed, and the
    /// checkpoints rewritten as by [`Log::truncate_to`].
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), StorageError> {
        self.cut_durably(|log, persist| log.cut_then(offset, true, persist))
    }

    /// A truncation to `offset` (`full`: of every segment, the log starting
    /// over at `offset`), telling `persist` what recovery point and log
    /// start offset to put on disk, with the lock held so nothing is
    /// appended meanwhile (the log manager writes its checkpoints there):
    /// before anything is cut, a recovery point at or below every byte the
    /// cut changes (so a crash in the middle never makes recovery take a
    /// half-made cut for damage of synced data), then the new ones. Nothing
    /// is persisted when there is nothing to cut. If anything fails, the log
    /// is closed before the lock is released.
    fn cut_then(
        &self,
        offset: i64,
        full: bool,
        mut persist: impl FnMut(i64, i64) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        if offset < 0 {
            return Err(StorageError::InvalidArgument(format!(
                "truncate to {offset}"
            )));
        }
        let mut g = self.lock();
        if offset >= g.leo && !full {
            // Nothing to cut, but an epoch entry at the end without records
            // (this broker became leader, then lost it before appending)
            // goes, as in Kafka: a follower naming that epoch would be told
            // to cut back to here again and again.
            let leo = g.leo;
            let mut next = g.epochs.clone();
            if next.truncate_from_end(leo) {
                epochs::write(&*self.storage, &self.dir, &next)?;
                g.epochs = next;
            }
            return Ok(());
        }
        // The base of the segment that will be cut (or `offset` when every
        // segment goes) is at or below the new LEO; a full truncation cuts
        // from the first segment on.
        let below_cut = if full {
            g.segments
                .keys()
                .next()
                .map_or(offset, |b| (*b).min(offset))
        } else {
            g.segments
                .range(..=offset)
                .next_back()
                .map_or(offset, |(b, _)| *b)
        }
        .min(g.checkpoint_recovery_point());
        let r = persist(below_cut, g.log_start)
            .and_then(|()| self.truncate_locked(&mut g, offset, full))
            .and_then(|()| persist(g.recovery_point, g.log_start));
        if let Err(e) = &r {
            tracing::error!(tp = %self.tp, offset, error = %e, "truncation failed; the log takes no more appends until the next start");
            g.closed = true;
        }
        r
    }

    fn truncate_locked(&self, g: &mut Inner, offset: i64, full: bool) -> Result<(), StorageError> {
        g.truncations += 1;
        let config = g.config.clone();
        // Whether no batch stays: then no producer snapshot does either.
        let mut restarted = false;
        if full || offset <= g.log_start || g.segments.keys().next().is_none_or(|&b| offset <= b) {
            // Nothing stays: start over at `offset`.
            let all: Vec<i64> = g.segments.keys().copied().collect();
            for b in all {
                if let Some(seg) = g.segments.remove(&b) {
                    seg.delete(&*self.storage)?;
                }
            }
            let seg = Segment::create(
                &*self.storage,
                &self.dir,
                offset,
                config.segment_index_bytes,
                g.last_now_ms,
                roll_jitter(&config),
            )?;
            g.segments.insert(offset, seg);
            g.log_start = offset;
            g.leo = offset;
            restarted = true;
        } else {
            let doomed: Vec<i64> = g.segments.range(offset..).map(|(b, _)| *b).collect();
            for b in doomed {
                if let Some(seg) = g.segments.remove(&b) {
                    seg.delete(&*self.storage)?;
                }
            }
            let seg = g.active();
            let cut = seg.truncate_to(offset, config.index_interval_bytes)?;
            seg.make_active()?;
            let next = seg.next_offset;
            g.leo = match cut {
                Some(base) if base < offset => base.max(next),
                _ => offset,
            };
            if g.leo < g.log_start {
                // The batch holding the log start went: start empty there.
                let start = g.log_start;
                for (_, seg) in std::mem::take(&mut g.segments) {
                    seg.delete(&*self.storage)?;
                }
                let seg = Segment::create(
                    &*self.storage,
                    &self.dir,
                    start,
                    config.segment_index_bytes,
                    g.last_now_ms,
                    roll_jitter(&config),
                )?;
                g.segments.insert(start, seg);
                g.leo = start;
                restarted = true;
            }
        }
        remove_producer_snapshots_above(
            &*self.storage,
            &self.dir,
            if restarted { i64::MIN } else { g.leo },
        )?;
        // No epoch wrote what is gone (Kafka clears the cache when the log
        // starts over).
        let epochs_changed = if restarted {
            g.epochs.clear()
        } else {
            g.epochs.truncate_from_end(g.leo)
        };
        if epochs_changed {
            epochs::write(&*self.storage, &self.dir, &g.epochs)?;
        }
        // The cut must be durable before new appends reuse these offsets,
        // or a crash could bring the old batches back. Truncation is rare
        // (replication), so flush everything up to the new LEO.
        let rp = g.checkpoint_recovery_point().min(g.leo);
        let from = g
            .segments
            .range(..=rp)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for seg in g.segments.range(from..).map(|(_, s)| s) {
            seg.flush()?;
        }
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        g.flush.rolled_unsynced.clear();
        g.flush.dir_unsynced = false;
        g.hw = g.hw.min(g.leo).max(g.log_start);
        g.recovery_point = g.leo;
        g.unflushed_messages = 0;
        g.debug_check();
        Ok(())
    }

    /// Fsyncs everything up to LEO and advances the recovery point.
    pub fn flush(&self) -> Result<(), StorageError> {
        self.flush_to(None, None)
    }

    /// Makes every record below `end_offset` durable and moves the recovery
    /// point past it (group commit: returns without a sync of its own when a
    /// sync that started after the append already covers it). Blocks; call
    /// it off the async runtime.
    pub fn flush_through(&self, end_offset: i64, now_ms: i64) -> Result<(), StorageError> {
        self.flush_to(Some(end_offset), Some(now_ms))
    }

    /// Syncs up to `target` (default: LEO at the call) and advances the
    /// recovery point, without holding the lock during the syncs.
    ///
    /// Group commit: one sync runs at a time and covers every append before
    /// it started (it syncs up to the LEO of that moment). A caller whose
    /// target the running sync covers waits for it; one it does not cover
    /// waits for it to end and then starts the next sync, which covers all
    /// such waiters at once.
    ///
    /// What is synced: the `.log` of the segment that will hold the new
    /// recovery point, and all three files of every segment before it.
    /// Index entries still in memory are written first (not synced).
    /// That segment's indexes may stay unsynced because recovery scans the
    /// segment holding the recovery point (and everything after it) and
    /// rebuilds its indexes from the log; the segments before it are
    /// trusted as they are, so their indexes must be durable.
    pub(crate) fn flush_to(
        &self,
        target: Option<i64>,
        now_ms: Option<i64>,
    ) -> Result<(), StorageError> {
        let mut g = self.lock();
        let wanted = target.unwrap_or(g.leo);
        loop {
            // Work a roll left (index files of a segment recovery would
            // trust, the directory) is done by whichever flush comes next.
            if wanted.min(g.leo) <= g.recovery_point && !g.roll_work() {
                return Ok(());
            }
            if g.flush.syncing_to.is_some() {
                // Covered by the running sync, or to be covered by the next
                // one: either way wait for this one to end, then look again.
                let done = g.flush.done.clone();
                g = done.wait(g).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            // Only a roll's work is due (the target is durable already):
            // sync the marked indexes and the directory, no log data, and
            // leave the recovery point where the flush policy put it.
            let roll_only = wanted.min(g.leo) <= g.recovery_point;
            let upto = if roll_only { g.recovery_point } else { g.leo };
            let from = g
                .segments
                .range(..=g.recovery_point)
                .next_back()
                .map_or(i64::MIN, |(b, _)| *b);
            let holder = g
                .segments
                .range(..=upto)
                .next_back()
                .map_or(i64::MIN, |(b, _)| *b);
            // Index entries appends left in memory go to the files now, so
            // a flush leaves every index file complete (if not synced).
            for seg in g.segments.range_mut(from..=upto).map(|(_, s)| s) {
                seg.write_index_entries()?;
            }
            let mut files = Vec::new();
            // Aborted-transaction entries are written with their markers:
            // every segment's written entries are synced with its log, the
            // holder's too (recovery cannot rebuild them from its batches).
            let mut txn_files = Vec::new();
            // Rolled segments below `from` whose indexes a roll left
            // unsynced (their logs are synced already).
            let rolled: Vec<i64> = g.flush.rolled_unsynced.iter().copied().collect();
            for base in rolled.iter().filter(|b| **b < from) {
                if let Some(seg) = g.segments.get(base) {
                    files.extend(seg.index_files());
                    txn_files.extend(seg.txn_index.take_unsynced());
                }
            }
            for (&base, seg) in g.segments.range(from..upto).filter(|_| !roll_only) {
                if base < holder {
                    files.extend(seg.files());
                } else {
                    files.push(seg.log.clone());
                }
                txn_files.extend(seg.txn_index.take_unsynced());
            }
            let sync_dir = std::mem::take(&mut g.flush.dir_unsynced);
            let truncations = g.truncations;
            g.flush.syncing_to = Some(upto);
            drop(g);
            let synced = files
                .iter()
                .try_for_each(|f| f.sync().at(&self.dir))
                .and_then(|()| txn_index::sync_taken(&txn_files))
                .and_then(|()| {
                    if sync_dir {
                        self.storage.sync_dir(&self.dir).at(&self.dir)
                    } else {
                        Ok(())
                    }
                });
            g = self.lock();
            g.flush.syncing_to = None;
            g.flush.done.notify_all();
            if synced.is_err() && sync_dir {
                g.flush.dir_unsynced = true;
            }
            synced?;
            // Every segment the roll marks below `upto` is synced now: the
            // ones taken above, and the ones at or above `from` with all
            // their files (a roll during the sync adds only segments at or
            // above `upto`'s holder, which stay marked).
            for base in rolled {
                if base < holder {
                    g.flush.rolled_unsynced.remove(&base);
                }
            }
            // A truncation during the sync flushed and moved the recovery
            // point itself; our files may no longer be the log's.
            if g.truncations == truncations && upto > g.recovery_point {
                g.recovery_point = upto.min(g.leo);
                if upto >= g.leo {
                    g.unflushed_messages = 0;
                }
                if let Some(now) = now_ms {
                    g.last_flush_ms = now;
                }
                g.debug_check();
            }
        }
    }

    /// Time-driven work: `segment.ms` rolls, flushing rolled segments, `flush.ms`.
    pub fn tick(&self, now_ms: i64) -> Result<(), StorageError> {
        let (flush_all, flush_rolled) = {
            let mut g = self.lock();
            if g.closed {
                return Ok(());
            }
            g.last_now_ms = now_ms;
            let config = g.config.clone();
            let seg = g.active();
            if seg.size > 0
                && seg.time_waited_for_roll(now_ms, now_ms) > config.segment_ms - seg.roll_jitter_ms
            {
                self.roll(&mut g, now_ms)?;
            }
            let active_base = g.active().base_offset;
            let flush_all = g.leo > g.recovery_point
                && now_ms.saturating_sub(g.last_flush_ms) >= config.flush_ms;
            // A roll's own syncs (see `roll`) also wait for this.
            let roll_work = g.roll_work();
            (
                flush_all,
                (g.recovery_point < active_base || roll_work)
                    .then_some(active_base.max(g.recovery_point)),
            )
        };
        if flush_all {
            self.flush_to(None, Some(now_ms))?;
        } else if let Some(t) = flush_rolled {
            // Kafka flushes a segment once it is rolled; so do we, lazily.
            self.flush_to(Some(t), None)?;
        }
        Ok(())
    }

    /// Flushes, trims the active segment's indexes, and refuses further appends.
    pub fn close(&self) -> Result<(), StorageError> {
        self.flush()?;
        let mut g = self.lock();
        if g.closed {
            return Ok(());
        }
        g.closed = true;
        let seg = g.active();
        seg.on_become_inactive()?;
        // The file ends at the last batch (a failed append whose cut also
        // failed may have left bytes after it).
        if seg.log.len().at(&seg.path(LOG_SUFFIX))? > seg.size {
            seg.log.set_len(seg.size).at(&seg.path(LOG_SUFFIX))?;
        }
        seg.flush()?;
        Ok(())
    }

    /// Verifies the CRC of every batch of every segment (slow; for tools and
    /// tests). Returns the first bad batch as (segment base, position, reason).
    pub fn verify(&self) -> Result<Option<(i64, u64, String)>, StorageError> {
        let g = self.lock();
        for seg in g.segments.values() {
            let mut sc = BatchScanner::new(&*seg.log, 0, seg.size, true);
            while let Some(item) = sc.next_batch().at(&seg.path(LOG_SUFFIX))? {
                if let Scanned::Invalid { position, reason } = item {
                    return Ok(Some((seg.base_offset, position, reason)));
                }
            }
        }
        Ok(None)
    }
}

/// The batches a read walks: from the recent-batch cache or from the file.
enum Batches<'a, I: Iterator<Item = (i64, usize)>> {
    Cached(I),
    Walked(HeaderWalk<'a>),
}

/// The next batch of a read as (last offset, total size), or why there is none.
enum Next {
    Batch(i64, usize),
    End,
    Damaged(Damage),
}

impl<I: Iterator<Item = (i64, usize)>> Batches<'_, I> {
    fn next(&mut self) -> Result<Next, StorageError> {
        match self {
            Batches::Cached(it) => Ok(it.next().map_or(Next::End, |(l, s)| Next::Batch(l, s))),
            Batches::Walked(walk) => Ok(match walk.next_step()? {
                Step::Batch(_, h) => Next::Batch(h.last_offset(), h.total_size()),
                Step::End => Next::End,
                Step::Damaged(d) => Next::Damaged(d),
            }),
        }
    }
}
