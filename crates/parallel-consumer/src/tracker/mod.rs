//! The completion tracker: per-partition commit watermarks over completed
//! work.
//!
//! Invariants of a [`PartitionTracker`]:
//! - `pending` holds the delivered offsets that are not yet below the
//!   watermark, in delivery order, which is strictly increasing offset order
//!   (Kafka delivers a partition in order; offsets may have gaps).
//! - `next_commit` is one past the last offset of the longest completed
//!   prefix of the delivered sequence, or the start offset if nothing was
//!   completed. It never moves backwards and never passes a delivered offset
//!   that is not completed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// What can go wrong when feeding the tracker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrackerError {
    #[error("offset {offset} delivered out of order (last delivered {last})")]
    OutOfOrder { offset: i64, last: i64 },
    #[error("offset {offset} below the commit watermark {next_commit}")]
    BelowWatermark { offset: i64, next_commit: i64 },
    #[error("offset {offset} was never delivered")]
    NotDelivered { offset: i64 },
    #[error("offset {offset} is not in flight")]
    NotInFlight { offset: i64 },
}

/// The state of one delivered record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// Delivered, not finished (queued or running).
    InFlight,
    /// The handler failed `attempts` times; holds the watermark until it is
    /// retried successfully or resolved by policy.
    Failed { attempts: u32 },
    /// Effect done (or resolved by policy, for example sent to a dead-letter
    /// topic).
    Completed,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: i64,
    state: RecordState,
    delivered_at_ms: i64,
}

/// Completion state of one partition.
#[derive(Debug, Clone)]
pub struct PartitionTracker {
    pending: VecDeque<Entry>,
    next_commit: i64,
    last_delivered: Option<i64>,
    in_flight: usize,
    failed: usize,
    /// False until the first delivery when the start offset was unknown
    /// (no committed offset: the consumer's reset policy picks the start).
    started: bool,
}

impl PartitionTracker {
    /// A tracker for a partition whose consumption starts at `start_offset`
    /// (the committed offset, or wherever the consumer was positioned).
    pub fn new(start_offset: i64) -> Self {
        PartitionTracker {
            pending: VecDeque::new(),
            next_commit: start_offset,
            last_delivered: None,
            in_flight: 0,
            failed: 0,
            started: true,
        }
    }

    /// A tracker for a partition without a committed offset: the first
    /// delivered offset becomes the start. Until then there is nothing to
    /// commit ([`PartitionTracker::started`] is false).
    pub fn unstarted() -> Self {
        PartitionTracker {
            started: false,
            ..Self::new(0)
        }
    }

    /// Whether the start offset is known (always, unless built with
    /// [`PartitionTracker::unstarted`] and nothing was delivered yet).
    pub fn started(&self) -> bool {
        self.started
    }

    /// Records that `offset` was handed to the application at `now_ms`.
    pub fn deliver(&mut self, offset: i64, now_ms: i64) -> Result<(), TrackerError> {
        if !self.started {
            self.started = true;
            self.next_commit = offset;
        }
        if offset < self.next_commit {
            return Err(TrackerError::BelowWatermark {
                offset,
                next_commit: self.next_commit,
            });
        }
        if let Some(last) = self.last_delivered
            && offset <= last
        {
            return Err(TrackerError::OutOfOrder { offset, last });
        }
        self.last_delivered = Some(offset);
        self.pending.push_back(Entry {
            offset,
            state: RecordState::InFlight,
            delivered_at_ms: now_ms,
        });
        self.in_flight += 1;
        Ok(())
    }

    fn index_of(&self, offset: i64) -> Result<usize, TrackerError> {
        // Offsets are mostly contiguous: try the index they would have
        // without gaps before searching.
        if let Some(front) = self.pending.front()
            && let Ok(i) = usize::try_from(offset - front.offset)
            && self.pending.get(i).is_some_and(|e| e.offset == offset)
        {
            return Ok(i);
        }
        self.pending
            .binary_search_by_key(&offset, |e| e.offset)
            .map_err(|_| TrackerError::NotDelivered { offset })
    }

    /// Marks `offset` completed and advances the watermark over the completed
    /// prefix. Returns the new `next_commit`.
    pub fn complete(&mut self, offset: i64) -> Result<i64, TrackerError> {
        let i = self.index_of(offset)?;
        match self.pending[i].state {
            RecordState::InFlight => self.in_flight -= 1,
            RecordState::Failed { .. } => self.failed -= 1,
            RecordState::Completed => return Ok(self.next_commit),
        }
        self.pending[i].state = RecordState::Completed;
        while let Some(front) = self.pending.front() {
            if front.state != RecordState::Completed {
                break;
            }
            self.next_commit = front.offset + 1;
            self.pending.pop_front();
        }
        Ok(self.next_commit)
    }

    /// Marks an in-flight `offset` failed. It keeps holding the watermark.
    /// Returns the number of failed attempts so far.
    pub fn fail(&mut self, offset: i64) -> Result<u32, TrackerError> {
        let i = self.index_of(offset)?;
        let attempts = match self.pending[i].state {
            RecordState::InFlight => 1,
            RecordState::Failed { attempts } => attempts + 1,
            RecordState::Completed => return Err(TrackerError::NotInFlight { offset }),
        };
        if self.pending[i].state == RecordState::InFlight {
            self.in_flight -= 1;
            self.failed += 1;
        }
        self.pending[i].state = RecordState::Failed { attempts };
        Ok(attempts)
    }

    /// Puts a failed `offset` back in flight for a retry, keeping its
    /// attempt count visible through [`PartitionTracker::state`] until it
    /// completes or fails again.
    pub fn retry(&mut self, offset: i64) -> Result<(), TrackerError> {
        let i = self.index_of(offset)?;
        match self.pending[i].state {
            RecordState::Failed { .. } => {
                self.failed -= 1;
                self.in_flight += 1;
                self.pending[i].state = RecordState::InFlight;
                Ok(())
            }
            _ => Err(TrackerError::NotInFlight { offset }),
        }
    }

    /// The state of a delivered offset above the watermark, or `None` when
    /// it is below the watermark or was never delivered.
    pub fn state(&self, offset: i64) -> Option<RecordState> {
        self.index_of(offset).ok().map(|i| self.pending[i].state)
    }

    /// The offset a commit may carry: one past the completed prefix.
    pub fn next_commit(&self) -> i64 {
        self.next_commit
    }

    /// Offset of the next record the consumer expects (one past the last
    /// delivered), or the start offset before any delivery.
    pub fn position(&self) -> i64 {
        self.last_delivered.map_or(self.next_commit, |o| o + 1)
    }

    /// Records delivered but not finished (running or queued).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Records whose last attempt failed.
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// Delivered offsets not yet below the watermark (unfinished plus
    /// completed above the watermark): the memory this partition holds.
    pub fn tracked(&self) -> usize {
        self.pending.len()
    }

    /// Age of the oldest unfinished record at `now_ms`.
    pub fn oldest_unfinished_age_ms(&self, now_ms: i64) -> Option<i64> {
        self.pending
            .iter()
            .find(|e| e.state != RecordState::Completed)
            .map(|e| now_ms - e.delivered_at_ms)
    }

    /// Offsets above the watermark that are already completed, ascending.
    /// (Stored in commit metadata so a new owner can skip them.)
    pub fn completed_above_watermark(&self) -> Vec<i64> {
        self.pending
            .iter()
            .filter(|e| e.state == RecordState::Completed)
            .map(|e| e.offset)
            .collect()
    }
}

/// A partition, named by topic and index. The topic name is shared, so
/// copies (several per record inside the consumer) allocate nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Per-partition trackers plus the assignment generation each belongs to.
///
/// Every task carries the generation of the assignment it was delivered
/// under; results from another generation are discarded, so a late result
/// after a revoke or a loss never moves a new owner's watermark.
#[derive(Debug, Default)]
pub struct AssignmentTracker {
    partitions: crate::scheduler::FastMap<TopicPartition, (u64, PartitionTracker)>,
    next_generation: u64,
    /// Last commit that the broker confirmed, per partition.
    committed: BTreeMap<TopicPartition, i64>,
}

/// What happened to a worker's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultOutcome {
    /// Applied; the partition's commit candidate is now this offset.
    Applied { next_commit: i64 },
    /// The result belongs to an older assignment (or an unowned partition)
    /// and was discarded.
    Stale,
}

impl AssignmentTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes ownership of `tp`, starting at `committed` (the group's
    /// committed offset). Returns the generation for tasks of this
    /// assignment; generations are never reused.
    pub fn assign(&mut self, tp: TopicPartition, committed: i64) -> u64 {
        self.next_generation += 1;
        let generation = self.next_generation;
        self.committed.insert(tp.clone(), committed);
        self.partitions
            .insert(tp, (generation, PartitionTracker::new(committed)));
        generation
    }

    /// Takes ownership of `tp` when the group has no committed offset for
    /// it: tracking starts at the first delivered offset.
    pub fn assign_unstarted(&mut self, tp: TopicPartition) -> u64 {
        self.next_generation += 1;
        let generation = self.next_generation;
        self.committed.remove(&tp);
        self.partitions
            .insert(tp, (generation, PartitionTracker::unstarted()));
        generation
    }

    /// A normal revoke: the caller stops submitting work for `tp`, and gets
    /// back the offset to commit (the completed prefix) if it moved past
    /// the last confirmed commit. The partition's state is dropped.
    pub fn revoke(&mut self, tp: &TopicPartition) -> Option<i64> {
        let (_, tracker) = self.partitions.remove(tp)?;
        let last = self.committed.remove(tp);
        if !tracker.started() {
            return None;
        }
        let candidate = tracker.next_commit();
        (last != Some(candidate)).then_some(candidate)
    }

    /// Ownership was lost (session expiry, fatal group error): nothing may be
    /// committed for it any more, its state is dropped.
    pub fn lost(&mut self, tp: &TopicPartition) {
        self.partitions.remove(tp);
        self.committed.remove(tp);
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<&PartitionTracker> {
        self.partitions.get(tp).map(|(_, t)| t)
    }

    /// Owned partitions with their generation, in no particular order.
    pub fn partitions(&self) -> impl Iterator<Item = (&TopicPartition, u64, &PartitionTracker)> {
        self.partitions.iter().map(|(tp, (g, t))| (tp, *g, t))
    }

    /// The generation `tp` is currently owned under.
    pub fn generation(&self, tp: &TopicPartition) -> Option<u64> {
        self.partitions.get(tp).map(|(g, _)| *g)
    }

    pub fn deliver(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        now_ms: i64,
    ) -> Result<Option<u64>, TrackerError> {
        match self.partitions.get_mut(tp) {
            Some((generation, t)) => t.deliver(offset, now_ms).map(|()| Some(*generation)),
            None => Ok(None),
        }
    }

    /// Applies a worker's success for `offset` delivered under `generation`.
    pub fn complete(
        &mut self,
        tp: &TopicPartition,
        generation: u64,
        offset: i64,
    ) -> Result<ResultOutcome, TrackerError> {
        match self.partitions.get_mut(tp) {
            Some((g, t)) if *g == generation => Ok(ResultOutcome::Applied {
                next_commit: t.complete(offset)?,
            }),
            _ => Ok(ResultOutcome::Stale),
        }
    }

    /// Applies a worker's failure for `offset` delivered under `generation`;
    /// returns the attempt count, or `None` for a stale result.
    pub fn fail(
        &mut self,
        tp: &TopicPartition,
        generation: u64,
        offset: i64,
    ) -> Result<Option<u32>, TrackerError> {
        match self.partitions.get_mut(tp) {
            Some((g, t)) if *g == generation => t.fail(offset).map(Some),
            _ => Ok(None),
        }
    }

    /// Offsets to commit now: every owned partition whose completed prefix
    /// moved past its last confirmed commit.
    pub fn commit_candidates(&self) -> Vec<(TopicPartition, i64)> {
        let mut out: Vec<_> = self
            .partitions
            .iter()
            .filter(|(_, (_, t))| t.started())
            .filter(|(tp, (_, t))| self.committed.get(*tp) != Some(&t.next_commit()))
            .map(|(tp, (_, t))| (tp.clone(), t.next_commit()))
            .collect();
        out.sort();
        out
    }

    /// Records that the broker confirmed a commit of `offset` for `tp` made
    /// under `generation`. A failed commit is simply never confirmed.
    pub fn commit_confirmed(&mut self, tp: &TopicPartition, generation: u64, offset: i64) {
        if self.generation(tp) == Some(generation) {
            self.committed.insert(tp.clone(), offset);
        }
    }

    /// The last confirmed commit for an owned partition.
    pub fn committed(&self, tp: &TopicPartition) -> Option<i64> {
        self.committed.get(tp).copied()
    }
}

#[cfg(test)]
mod tests;
