//! The consumer-owner's state machine: tracker + scheduler + commit
//! metadata + commit bookkeeping. Pure (time is an argument); the driver
//! feeds it Kafka events and executes what it returns.
//!
//! Event → effect:
//! - [`Engine::assign`]: new generation, tracking starts at the committed
//!   offset; the completed set stored in the commit metadata is restored so
//!   those records are acknowledged without running again.
//! - [`Engine::deliver`]: a polled record is tracked (in delivery order) and
//!   queued for a worker, or skipped if the restored set says it is done.
//! - [`Engine::finished`]: a worker result; results of older generations are
//!   discarded. A final failure stops the partition (the record holds the
//!   watermark; nothing is skipped silently).
//! - [`Engine::actions`]: tasks to submit and partitions to pause/resume
//!   (full buffers, or commit metadata that would no longer fit).
//! - [`Engine::commits`]: explicit offsets (+ metadata) that moved since the
//!   last confirmed commit; [`Engine::commit_succeeded`] /
//!   [`Engine::commit_failed`] record the outcome. Only a confirmed commit is
//!   a checkpoint; an ownership error stops commits for that assignment
//!   until a rebalance confirms it is still ours ([`Engine::revoking`],
//!   [`Engine::ownership_confirmed`]).
//! - [`Engine::revoking`] / [`Engine::revoke_finish`]: stop submitting, let
//!   in-flight work finish within the caller's bound, commit the completed
//!   prefix. [`Engine::lost`]: drop everything, commit nothing.
//! - [`Engine::rewind`]: start a partition again at its last confirmed
//!   commit under a new generation (exactly-once mode, after an aborted
//!   transaction: the aborted records must run again).

use crate::metadata::{self, CompletedSet, Encoded, MetadataError};
use crate::scheduler::{
    ConfigError, Decision, FastMap, FastSet, Scheduler, SchedulerConfig, TaskId, TaskMap,
};
use crate::tracker::{AssignmentTracker, ResultOutcome, TopicPartition, TrackerError};

/// Limits of the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineConfig {
    pub scheduler: SchedulerConfig,
    /// Size bound of the commit metadata (the broker's
    /// `offset.metadata.max.bytes`).
    pub max_metadata_bytes: usize,
    /// Delivered records per partition that may be tracked above the
    /// watermark (unfinished or completed) before fetching pauses.
    pub max_tracked_per_partition: usize,
    /// Whether commits carry the completed set above the watermark in their
    /// metadata, and a set found at assignment is honoured (its records are
    /// acknowledged without running). Off in exactly-once mode: a record
    /// above the watermark has not had its outputs written, so a new owner
    /// must run it again.
    pub completed_set: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            scheduler: SchedulerConfig::default(),
            max_metadata_bytes: metadata::DEFAULT_MAX_METADATA_BYTES,
            max_tracked_per_partition: 50_000,
            completed_set: true,
        }
    }
}

/// A record handed to a worker, with the generation it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task<T> {
    pub tp: TopicPartition,
    pub generation: u64,
    pub offset: i64,
    pub payload: T,
}

/// What a worker reports for a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The handler succeeded.
    Success,
    /// The handler kept failing and the record was written to the dead-letter
    /// topic: resolved, the watermark may pass it.
    DeadLettered { attempts: u32 },
    /// The handler kept failing and the record could not be resolved: the
    /// partition stops.
    Failed { attempts: u32 },
}

/// What happened to a delivered record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Tracked and queued for a worker.
    Queued,
    /// Already completed according to the restored commit metadata.
    Skipped,
    /// The partition is not owned (record from a revoked assignment).
    NotOwned,
    /// The tracker refused it (below the watermark or out of order).
    Rejected(TrackerError),
}

/// An explicit offset commit for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRequest {
    pub tp: TopicPartition,
    pub generation: u64,
    /// The next offset to read: one past the completed prefix.
    pub offset: i64,
    /// Completed offsets above `offset` ([`metadata`] format, may be empty).
    pub metadata: String,
}

/// Per-partition observations (all offsets are "next offset" positions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStats {
    pub topic: String,
    pub partition: i32,
    pub generation: u64,
    /// One past the last delivered record.
    pub position: i64,
    /// Last commit the broker confirmed (None: none known yet).
    pub committed: Option<i64>,
    /// One past the longest completed prefix: the commit candidate.
    pub effect_watermark: i64,
    /// Delivered and not finished (waiting or running).
    pub in_flight: usize,
    /// Records waiting for a worker.
    pub waiting: usize,
    /// Records whose handler finally failed (the partition is stopped).
    pub failed: usize,
    /// Delivered records held above the watermark.
    pub tracked: usize,
    pub paused: bool,
    pub stopped: bool,
    /// An ownership error stopped commits for this assignment.
    pub commits_stopped: bool,
    /// Age of the oldest delivered record that is not finished.
    pub oldest_unfinished_age_ms: Option<i64>,
    /// Records acknowledged from the restored completed set.
    pub skipped: u64,
    /// Why the commit metadata found at assignment was ignored, if it was.
    pub metadata_error: Option<MetadataError>,
    /// Results of tasks from an earlier assignment of this partition that
    /// were discarded (since the consumer started, over all assignments).
    pub stale_results: u64,
}

#[derive(Debug)]
struct PartInfo {
    generation: u64,
    restored: CompletedSet,
    metadata_error: Option<MetadataError>,
    /// (offset, metadata) last confirmed by the broker.
    confirmed: Option<(i64, String)>,
    commits_stopped: bool,
    revoking: bool,
    skipped: u64,
    /// The first offset delivered under this generation: where a rewind
    /// goes when nothing was ever committed.
    first_delivered: Option<i64>,
    /// Whether the completed set fitted the metadata bound when last checked
    /// (rechecked only after the set changed).
    metadata_fits: bool,
    metadata_dirty: bool,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Engine<T> {
    config: EngineConfig,
    tracker: AssignmentTracker,
    scheduler: Scheduler<Task<T>>,
    parts: FastMap<TopicPartition, PartInfo>,
    /// Submitted tasks not yet finished, with their partition.
    running: TaskMap<TopicPartition>,
    /// Discarded results of earlier assignments, per partition ever owned
    /// (kept across assignments).
    stale: FastMap<TopicPartition, u64>,
    /// Whether [`Engine::actions`] leaves the metadata size check to
    /// explicit [`Engine::check_metadata`] calls.
    metadata_checks_deferred: bool,
    /// Partitions the user paused (owned or not: the pause holds across
    /// assignments).
    user_paused: FastSet<TopicPartition>,
}

impl<T> Engine<T> {
    pub fn new(config: EngineConfig) -> Result<Self, ConfigError> {
        if config.max_tracked_per_partition == 0 {
            return Err(ConfigError::Zero {
                name: "max_tracked_per_partition",
            });
        }
        Ok(Engine {
            scheduler: Scheduler::new(config.scheduler.clone())?,
            config,
            tracker: AssignmentTracker::new(),
            parts: FastMap::default(),
            running: TaskMap::default(),
            stale: FastMap::default(),
            metadata_checks_deferred: false,
            user_paused: FastSet::default(),
        })
    }

    /// Takes ownership of `tp`. `committed` is the group's committed offset
    /// and its metadata, or `None` when the group has none (the consumer's
    /// reset policy decides; tracking starts at the first delivery).
    pub fn assign(&mut self, tp: TopicPartition, committed: Option<(i64, &str)>) -> u64 {
        // Whatever was queued for an earlier assignment is dropped.
        self.scheduler.add_partition(tp.clone());
        let (generation, restored, metadata_error, confirmed) = match committed {
            Some((offset, meta)) => {
                let generation = self.tracker.assign(tp.clone(), offset);
                let (restored, err) = if !self.config.completed_set {
                    (CompletedSet::default(), None)
                } else {
                    match metadata::decode(meta, offset) {
                        Ok(set) => (set, None),
                        Err(e) => (CompletedSet::default(), Some(e)),
                    }
                };
                (generation, restored, err, Some((offset, meta.to_string())))
            }
            None => (
                self.tracker.assign_unstarted(tp.clone()),
                CompletedSet::default(),
                None,
                None,
            ),
        };
        self.parts.insert(
            tp,
            PartInfo {
                generation,
                restored,
                metadata_error,
                confirmed,
                commits_stopped: false,
                revoking: false,
                skipped: 0,
                first_delivered: None,
                metadata_fits: true,
                metadata_dirty: false,
            },
        );
        generation
    }

    /// Starts `tp` again at its last confirmed commit (or, with none, at the
    /// first record delivered under the current generation) under a new
    /// generation: waiting records are dropped, results of running tasks
    /// will be stale, and the records from there on are delivered again.
    /// Returns the new generation and the offset the consumer must seek to,
    /// or `None` when `tp` is not owned or nothing was delivered or
    /// committed yet (there is nothing to run again).
    pub fn rewind(&mut self, tp: &TopicPartition) -> Option<(u64, i64)> {
        let part = self.parts.get(tp)?;
        if part.revoking {
            return None;
        }
        let confirmed = part.confirmed.clone();
        let offset = confirmed
            .as_ref()
            .map(|(o, _)| *o)
            .or(part.first_delivered)?;
        self.scheduler.add_partition(tp.clone());
        let generation = self.tracker.assign(tp.clone(), offset);
        self.parts.insert(
            tp.clone(),
            PartInfo {
                generation,
                restored: CompletedSet::default(),
                metadata_error: None,
                confirmed,
                commits_stopped: false,
                revoking: false,
                skipped: 0,
                first_delivered: None,
                metadata_fits: true,
                metadata_dirty: false,
            },
        );
        debug_assert!(
            self.tracker
                .partition(tp)
                .is_some_and(|t| t.next_commit() == offset && t.tracked() == 0)
        );
        Some((generation, offset))
    }

    /// The last commit of `tp` the broker confirmed (owned partitions).
    pub fn confirmed(&self, tp: &TopicPartition) -> Option<i64> {
        self.parts.get(tp)?.confirmed.as_ref().map(|(o, _)| *o)
    }

    /// The generation `tp` is owned under.
    pub fn generation(&self, tp: &TopicPartition) -> Option<u64> {
        self.parts.get(tp).map(|p| p.generation)
    }

    /// Owned partitions (including ones being revoked).
    pub fn owned(&self) -> Vec<TopicPartition> {
        let mut v: Vec<_> = self.parts.keys().cloned().collect();
        v.sort();
        v
    }

    /// A record polled for `tp` at `now_ms`.
    pub fn deliver(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        key: Option<Vec<u8>>,
        payload: T,
        now_ms: i64,
    ) -> Delivered {
        let key = crate::scheduler::key_hash(key.as_deref());
        self.deliver_sized(tp, offset, key, 0, payload, now_ms)
    }

    /// [`Engine::deliver`] of a record whose key has hash `key`
    /// ([`crate::scheduler::key_hash`]), of `bytes` bytes (counted against
    /// the scheduler's byte bound while it waits or runs).
    pub fn deliver_sized(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        key: u64,
        bytes: usize,
        payload: T,
        now_ms: i64,
    ) -> Delivered {
        let Some(part) = self.parts.get_mut(tp) else {
            return Delivered::NotOwned;
        };
        if part.revoking {
            return Delivered::NotOwned;
        }
        let generation = match self.tracker.deliver(tp, offset, now_ms) {
            Ok(Some(g)) => g,
            Ok(None) => return Delivered::NotOwned,
            Err(e) => return Delivered::Rejected(e),
        };
        part.first_delivered.get_or_insert(offset);
        part.restored.forget_below(offset);
        if part.restored.contains(offset) {
            part.skipped += 1;
            part.metadata_dirty = true;
            // Delivered just above: completing it cannot fail.
            let _ = self.tracker.complete(tp, generation, offset);
            return Delivered::Skipped;
        }
        let task = Task {
            tp: tp.clone(),
            generation,
            offset,
            payload,
        };
        match self.scheduler.push_sized(tp, key, bytes, task) {
            Ok(()) => Delivered::Queued,
            // Not reachable: the partition is scheduled while owned and not
            // revoking. Leaving it tracked and unfinished is the safe answer.
            Err(_) => Delivered::NotOwned,
        }
    }

    /// A worker finished task `id`. Returns false when the result was stale
    /// (older generation or partition no longer owned) and was discarded.
    pub fn finished(&mut self, id: TaskId, task: &TaskRef, outcome: Outcome) -> bool {
        self.scheduler.finished(id);
        self.running.remove(&id);
        let applied = match outcome {
            Outcome::Success | Outcome::DeadLettered { .. } => matches!(
                self.tracker
                    .complete(&task.tp, task.generation, task.offset),
                Ok(ResultOutcome::Applied { .. })
            ),
            Outcome::Failed { .. } => {
                let r = self.tracker.fail(&task.tp, task.generation, task.offset);
                let applied = matches!(r, Ok(Some(_)));
                if applied {
                    self.scheduler.stop(&task.tp);
                }
                applied
            }
        };
        if applied && let Some(part) = self.parts.get_mut(&task.tp) {
            part.metadata_dirty = true;
        }
        if !applied
            && self
                .parts
                .get(&task.tp)
                .is_none_or(|p| p.generation != task.generation)
        {
            *self.stale.entry(task.tp.clone()).or_default() += 1;
        }
        applied
    }

    /// From now on [`Engine::actions`] does not check whether the commit
    /// metadata still fits; the caller calls [`Engine::check_metadata`]
    /// itself (encoding the completed set costs time linear in the records
    /// tracked, too much for every decision).
    pub fn defer_metadata_checks(&mut self) {
        self.metadata_checks_deferred = true;
    }

    /// Rechecks, for partitions whose completed set changed, whether it
    /// still fits the metadata bound (a partition whose set does not fit is
    /// held paused by [`Engine::actions`]).
    pub fn check_metadata(&mut self) {
        if !self.config.completed_set {
            return;
        }
        for (tp, part) in &mut self.parts {
            if part.revoking || !part.metadata_dirty {
                continue;
            }
            let Some(t) = self.tracker.partition(tp) else {
                continue;
            };
            part.metadata_dirty = false;
            part.metadata_fits = metadata::encode(
                t.next_commit(),
                &t.completed_above_watermark(),
                self.config.max_metadata_bytes,
            )
            .complete;
        }
    }

    /// Bytes of delivered records waiting or running (see
    /// [`Engine::deliver_sized`]).
    pub fn buffered_bytes(&self) -> usize {
        self.scheduler.buffered_bytes()
    }

    /// Pauses `tp` for the user (or ends that), from the next
    /// [`Engine::actions`] on: nothing of it is fetched or submitted while
    /// paused, whatever its buffer holds, and the pause outlives
    /// reassignments.
    pub fn set_user_paused(&mut self, tp: &TopicPartition, paused: bool) {
        if paused {
            self.user_paused.insert(tp.clone());
        } else {
            self.user_paused.remove(tp);
        }
    }

    /// Tasks to submit and partitions to pause or resume.
    pub fn actions(&mut self) -> Vec<Decision<Task<T>>> {
        if !self.metadata_checks_deferred {
            self.check_metadata();
        }
        for (tp, part) in &mut self.parts {
            if part.revoking {
                continue;
            }
            let Some(t) = self.tracker.partition(tp) else {
                continue;
            };
            let held = !part.metadata_fits || t.tracked() >= self.config.max_tracked_per_partition;
            self.scheduler.set_held(tp, held);
            self.scheduler
                .set_user_paused(tp, self.user_paused.contains(tp));
        }
        let decisions = self.scheduler.decide();
        for d in &decisions {
            if let Decision::Submit { id, tp, .. } = d {
                self.running.insert(*id, tp.clone());
            }
        }
        decisions
    }

    fn request(&self, tp: &TopicPartition, part: &PartInfo) -> Option<CommitRequest> {
        if part.commits_stopped {
            return None;
        }
        let t = self.tracker.partition(tp)?;
        if !t.started() {
            return None;
        }
        let text = if self.config.completed_set {
            let Encoded { text, .. } = metadata::encode(
                t.next_commit(),
                &t.completed_above_watermark(),
                self.config.max_metadata_bytes,
            );
            text
        } else {
            String::new()
        };
        let offset = t.next_commit();
        if part
            .confirmed
            .as_ref()
            .is_some_and(|(o, m)| *o == offset && *m == text)
        {
            return None;
        }
        Some(CommitRequest {
            tp: tp.clone(),
            generation: part.generation,
            offset,
            metadata: text,
        })
    }

    /// Commits to make now: owned partitions whose offset or completed set
    /// changed since the last confirmed commit.
    pub fn commits(&self) -> Vec<CommitRequest> {
        let mut v: Vec<_> = self
            .parts
            .iter()
            .filter(|(_, p)| !p.revoking)
            .filter_map(|(tp, p)| self.request(tp, p))
            .collect();
        v.sort_by(|a, b| a.tp.cmp(&b.tp));
        v
    }

    /// The broker confirmed these commits.
    pub fn commit_succeeded(&mut self, requests: &[CommitRequest]) {
        for r in requests {
            if let Some(part) = self.parts.get_mut(&r.tp)
                && part.generation == r.generation
                // An answer to an older commit read after a newer one's
                // (commits sent without waiting) does not move it back.
                && part.confirmed.as_ref().is_none_or(|(o, _)| *o <= r.offset)
            {
                part.confirmed = Some((r.offset, r.metadata.clone()));
                self.tracker.commit_confirmed(&r.tp, r.generation, r.offset);
            }
        }
    }

    /// The commit failed. Nothing is recorded as a checkpoint; a transient
    /// failure is retried by the next [`Engine::commits`]. An ownership error
    /// (stale generation, unknown member, fenced) stops commits for these
    /// assignments: the partitions belong to someone else now.
    pub fn commit_failed(&mut self, requests: &[CommitRequest], ownership: bool) {
        if !ownership {
            return;
        }
        for r in requests {
            if let Some(part) = self.parts.get_mut(&r.tp)
                && part.generation == r.generation
            {
                part.commits_stopped = true;
            }
        }
    }

    /// A rebalance completed and these partitions are still ours (a
    /// cooperative rebalance keeps partitions across group generations):
    /// commits stopped by an ownership error from the old generation resume.
    pub fn ownership_confirmed(&mut self, tps: &[TopicPartition]) {
        for tp in tps {
            if let Some(part) = self.parts.get_mut(tp) {
                part.commits_stopped = false;
            }
        }
    }

    /// Start of a normal revoke: nothing more is submitted for `tp`; records
    /// that never started stay unfinished (they hold the watermark).
    ///
    /// A normal revoke means the partition is still ours until the callback
    /// returns, so commits stopped by an ownership error (a commit sent with
    /// a group generation that a rebalance had just replaced) are allowed
    /// again for the revoke commit.
    pub fn revoking(&mut self, tp: &TopicPartition) {
        if let Some(part) = self.parts.get_mut(tp) {
            part.revoking = true;
            part.commits_stopped = false;
            self.scheduler.remove_partition(tp);
        }
    }

    /// Running tasks of these partitions (any generation).
    pub fn running_for(&self, tps: &[TopicPartition]) -> usize {
        self.running.values().filter(|tp| tps.contains(tp)).count()
    }

    /// End of a normal revoke: drops `tp` and returns the commit of its
    /// completed prefix, unless nothing moved or commits are stopped.
    pub fn revoke_finish(&mut self, tp: &TopicPartition) -> Option<CommitRequest> {
        let part = self.parts.remove(tp)?;
        let request = self.request(tp, &part);
        self.tracker.revoke(tp);
        self.scheduler.remove_partition(tp);
        request
    }

    /// Ownership is already gone: drop `tp`, commit nothing. Late results
    /// of its tasks are discarded by generation.
    pub fn lost(&mut self, tp: &TopicPartition) {
        self.parts.remove(tp);
        self.tracker.lost(tp);
        self.scheduler.remove_partition(tp);
    }

    /// Tasks running now over all partitions.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Observations for every owned partition at `now_ms`, sorted.
    pub fn stats(&self, now_ms: i64) -> Vec<PartitionStats> {
        let mut v: Vec<_> = self
            .parts
            .iter()
            .filter_map(|(tp, part)| {
                let t = self.tracker.partition(tp)?;
                Some(PartitionStats {
                    topic: tp.topic.to_string(),
                    partition: tp.partition,
                    generation: part.generation,
                    position: t.position(),
                    committed: part.confirmed.as_ref().map(|(o, _)| *o),
                    effect_watermark: t.next_commit(),
                    in_flight: t.in_flight(),
                    waiting: self.scheduler.waiting(tp),
                    failed: t.failed(),
                    tracked: t.tracked(),
                    paused: self.scheduler.is_paused(tp),
                    stopped: self.scheduler.is_stopped(tp),
                    commits_stopped: part.commits_stopped,
                    oldest_unfinished_age_ms: t.oldest_unfinished_age_ms(now_ms),
                    skipped: part.skipped,
                    metadata_error: part.metadata_error.clone(),
                    stale_results: self.stale.get(tp).copied().unwrap_or(0),
                })
            })
            .collect();
        v.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        v
    }
}

/// The identity of a task, without its payload (what a worker sends back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    pub tp: TopicPartition,
    pub generation: u64,
    pub offset: i64,
}

impl<T> Task<T> {
    pub fn task_ref(&self) -> TaskRef {
        TaskRef {
            tp: self.tp.clone(),
            generation: self.generation,
            offset: self.offset,
        }
    }
}

#[cfg(test)]
mod tests;
