//! Which delivered record runs next: ordering modes, a global concurrency
//! limit and bounded per-partition buffers. Pure: no I/O, no clock.
//!
//! The scheduler holds delivered records that are waiting for a worker and
//! counts the ones running. [`Scheduler::decide`] returns what the owner
//! thread should do: submit tasks, pause partitions whose buffer is full,
//! resume partitions that drained.
//!
//! Invariants:
//! - At most `max_concurrency` tasks run at once (tasks of revoked partitions
//!   count until they finish: they still occupy a worker).
//! - Partition mode: at most one running task per partition. Key mode: at
//!   most one running task per (partition, key); records without a key are
//!   ordered like one shared key of their partition. Within a lock, tasks
//!   start in delivery order.
//! - A partition is paused while `buffered >= max_buffered_per_partition`
//!   (or while held or stopped) and resumed once `buffered <=
//!   resume_at_buffered`, so pause/resume does not flap on every record.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use crate::tracker::TopicPartition;

/// How records may run in parallel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ordering {
    /// One record at a time per partition, in offset order.
    #[default]
    Partition,
    /// One record at a time per key (within its partition), parallel
    /// across keys.
    Key,
    /// Any record may run as soon as a worker is free.
    Unordered,
}

/// Limits of the scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub ordering: Ordering,
    /// Tasks running at once, over all partitions.
    pub max_concurrency: usize,
    /// Records held per partition (waiting plus running) before it is paused.
    pub max_buffered_per_partition: usize,
    /// A paused partition resumes once its buffer is down to this many.
    pub resume_at_buffered: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            ordering: Ordering::Partition,
            max_concurrency: 16,
            max_buffered_per_partition: 1000,
            resume_at_buffered: 500,
        }
    }
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{name} must be at least 1")]
    Zero { name: &'static str },
    #[error("resume_at_buffered ({resume}) must be below max_buffered_per_partition ({max})")]
    ResumeNotBelowMax { resume: usize, max: usize },
}

impl SchedulerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_concurrency == 0 {
            return Err(ConfigError::Zero {
                name: "max_concurrency",
            });
        }
        if self.max_buffered_per_partition == 0 {
            return Err(ConfigError::Zero {
                name: "max_buffered_per_partition",
            });
        }
        if self.resume_at_buffered >= self.max_buffered_per_partition {
            return Err(ConfigError::ResumeNotBelowMax {
                resume: self.resume_at_buffered,
                max: self.max_buffered_per_partition,
            });
        }
        Ok(())
    }
}

/// Identifies a submitted task until it finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub u64);

/// What the owner thread should do.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision<T> {
    /// Hand `payload` to a worker; report [`Scheduler::finished`] with `id`.
    Submit {
        id: TaskId,
        tp: TopicPartition,
        payload: T,
    },
    /// Stop fetching `tp` (keep polling: heartbeats and rebalances go on).
    Pause(TopicPartition),
    /// Fetch `tp` again.
    Resume(TopicPartition),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Lock {
    Partition(TopicPartition),
    Key(TopicPartition, Option<Vec<u8>>),
}

#[derive(Debug)]
struct Waiting<T> {
    key: Option<Vec<u8>>,
    payload: T,
}

#[derive(Debug)]
struct PartitionState<T> {
    waiting: VecDeque<Waiting<T>>,
    /// Running tasks of the current incarnation of this partition.
    running: usize,
    /// Whether the consumer was told to pause it.
    paused: bool,
    /// Held by the caller (for example, commit metadata would not fit).
    held: bool,
    /// Stopped by the failure policy: nothing more is submitted.
    stopped: bool,
}

impl<T> Default for PartitionState<T> {
    fn default() -> Self {
        PartitionState {
            waiting: VecDeque::new(),
            running: 0,
            paused: false,
            held: false,
            stopped: false,
        }
    }
}

impl<T> PartitionState<T> {
    fn buffered(&self) -> usize {
        self.waiting.len() + self.running
    }
}

#[derive(Debug)]
struct Running {
    tp: TopicPartition,
    lock: Option<Lock>,
    /// The partition incarnation it was submitted under.
    incarnation: u64,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Scheduler<T> {
    config: SchedulerConfig,
    partitions: BTreeMap<TopicPartition, (u64, PartitionState<T>)>,
    running: HashMap<TaskId, Running>,
    locks: HashSet<Lock>,
    next_task: u64,
    next_incarnation: u64,
    /// Where the next round-robin pass starts (fairness across partitions).
    cursor: Option<TopicPartition>,
}

impl<T> Scheduler<T> {
    pub fn new(config: SchedulerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Scheduler {
            config,
            partitions: BTreeMap::new(),
            running: HashMap::new(),
            locks: HashSet::new(),
            next_task: 0,
            next_incarnation: 0,
            cursor: None,
        })
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Starts scheduling `tp` (on assignment). An existing state is replaced.
    pub fn add_partition(&mut self, tp: TopicPartition) -> Vec<T> {
        let dropped = self.remove_partition(&tp);
        self.next_incarnation += 1;
        self.partitions
            .insert(tp, (self.next_incarnation, PartitionState::default()));
        dropped
    }

    /// Stops scheduling `tp` (revoke or loss) and returns its records that
    /// never started. Its running tasks keep their worker slot and lock until
    /// they are reported [`Scheduler::finished`].
    pub fn remove_partition(&mut self, tp: &TopicPartition) -> Vec<T> {
        match self.partitions.remove(tp) {
            Some((_, state)) => state.waiting.into_iter().map(|w| w.payload).collect(),
            None => Vec::new(),
        }
    }

    /// Queues a delivered record. Returns it back if `tp` is not scheduled.
    pub fn push(&mut self, tp: &TopicPartition, key: Option<Vec<u8>>, payload: T) -> Result<(), T> {
        match self.partitions.get_mut(tp) {
            Some((_, state)) => {
                state.waiting.push_back(Waiting { key, payload });
                Ok(())
            }
            None => Err(payload),
        }
    }

    /// A submitted task finished (whatever its outcome). Unknown ids are
    /// ignored.
    pub fn finished(&mut self, id: TaskId) {
        let Some(r) = self.running.remove(&id) else {
            return;
        };
        if let Some(lock) = &r.lock {
            self.locks.remove(lock);
        }
        if let Some((incarnation, state)) = self.partitions.get_mut(&r.tp)
            && *incarnation == r.incarnation
        {
            state.running -= 1;
        }
    }

    /// Holds `tp` paused (or releases it) regardless of its buffer; its
    /// waiting records still run.
    pub fn set_held(&mut self, tp: &TopicPartition, held: bool) {
        if let Some((_, state)) = self.partitions.get_mut(tp) {
            state.held = held;
        }
    }

    /// Stops `tp`: it is paused and nothing more of it is submitted.
    pub fn stop(&mut self, tp: &TopicPartition) {
        if let Some((_, state)) = self.partitions.get_mut(tp) {
            state.stopped = true;
        }
    }

    pub fn is_stopped(&self, tp: &TopicPartition) -> bool {
        self.partitions.get(tp).is_some_and(|(_, s)| s.stopped)
    }

    pub fn is_paused(&self, tp: &TopicPartition) -> bool {
        self.partitions.get(tp).is_some_and(|(_, s)| s.paused)
    }

    /// Records of `tp` waiting plus running.
    pub fn buffered(&self, tp: &TopicPartition) -> usize {
        self.partitions.get(tp).map_or(0, |(_, s)| s.buffered())
    }

    /// Records of `tp` waiting for a worker.
    pub fn waiting(&self, tp: &TopicPartition) -> usize {
        self.partitions.get(tp).map_or(0, |(_, s)| s.waiting.len())
    }

    /// Tasks running now, including those of partitions no longer owned.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    fn lock_for(&self, tp: &TopicPartition, key: &Option<Vec<u8>>) -> Option<Lock> {
        match self.config.ordering {
            Ordering::Partition => Some(Lock::Partition(tp.clone())),
            Ordering::Key => Some(Lock::Key(tp.clone(), key.clone())),
            Ordering::Unordered => None,
        }
    }

    /// Index of the first waiting record of `tp` that may start now.
    fn runnable(&self, tp: &TopicPartition, state: &PartitionState<T>) -> Option<usize> {
        if state.stopped {
            return None;
        }
        match self.config.ordering {
            // Only the head may run: checking it is enough.
            Ordering::Partition | Ordering::Unordered => {
                let head = state.waiting.front()?;
                let free = self
                    .lock_for(tp, &head.key)
                    .is_none_or(|l| !self.locks.contains(&l));
                free.then_some(0)
            }
            // The first record whose key is free. An earlier record with the
            // same key would have been found first, so keys keep their order.
            Ordering::Key => state
                .waiting
                .iter()
                .position(|w| !self.locks.contains(&Lock::Key(tp.clone(), w.key.clone()))),
        }
    }

    /// Submits what may run now (round robin over partitions, one record per
    /// partition per round) and says which partitions to pause or resume.
    pub fn decide(&mut self) -> Vec<Decision<T>> {
        let mut out = Vec::new();
        let order: Vec<TopicPartition> = {
            let keys: Vec<_> = self.partitions.keys().cloned().collect();
            let start = self
                .cursor
                .as_ref()
                .map_or(0, |c| keys.partition_point(|k| k <= c));
            keys[start..]
                .iter()
                .chain(&keys[..start])
                .cloned()
                .collect()
        };
        let mut progress = true;
        while progress && self.running.len() < self.config.max_concurrency {
            progress = false;
            for tp in &order {
                if self.running.len() >= self.config.max_concurrency {
                    break;
                }
                let Some((_, state)) = self.partitions.get(tp) else {
                    continue;
                };
                let Some(i) = self.runnable(tp, state) else {
                    continue;
                };
                let Some((incarnation, state)) = self.partitions.get_mut(tp) else {
                    continue;
                };
                let Some(w) = state.waiting.remove(i) else {
                    continue;
                };
                state.running += 1;
                let incarnation = *incarnation;
                let lock = self.lock_for(tp, &w.key);
                if let Some(l) = &lock {
                    self.locks.insert(l.clone());
                }
                self.next_task += 1;
                let id = TaskId(self.next_task);
                self.running.insert(
                    id,
                    Running {
                        tp: tp.clone(),
                        lock,
                        incarnation,
                    },
                );
                self.cursor = Some(tp.clone());
                out.push(Decision::Submit {
                    id,
                    tp: tp.clone(),
                    payload: w.payload,
                });
                progress = true;
            }
        }
        for (tp, (_, state)) in &mut self.partitions {
            let must_pause = state.stopped
                || state.held
                || state.buffered() >= self.config.max_buffered_per_partition;
            let may_resume =
                !state.stopped && !state.held && state.buffered() <= self.config.resume_at_buffered;
            if !state.paused && must_pause {
                state.paused = true;
                out.push(Decision::Pause(tp.clone()));
            } else if state.paused && may_resume {
                state.paused = false;
                out.push(Decision::Resume(tp.clone()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
