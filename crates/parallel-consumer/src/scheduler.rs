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
//! - Over all partitions, the bytes of buffered records (waiting, and
//!   running until they finish) are bounded the same way: every partition
//!   is paused once they reach `max_buffered_bytes` and may resume once
//!   they are down to `resume_at_buffered_bytes`.
//!
//! A lock is a (partition, key hash) pair, not a copy of the key: two keys
//! with the same 64-bit hash are ordered as one key (more ordering, never
//! less), and no key is copied or compared byte by byte per decision.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

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
#[non_exhaustive]
pub struct SchedulerConfig {
    pub ordering: Ordering,
    /// Tasks running at once, over all partitions.
    pub max_concurrency: usize,
    /// Records held per partition (waiting plus running) before it is paused.
    pub max_buffered_per_partition: usize,
    /// A paused partition resumes once its buffer is down to this many.
    pub resume_at_buffered: usize,
    /// Bytes (key, value, headers) of buffered records over all partitions
    /// before every partition is paused.
    pub max_buffered_bytes: usize,
    /// Paused partitions may resume once the buffered bytes are down to
    /// this.
    pub resume_at_buffered_bytes: usize,
    /// Records handed to one handler call at most (batch handlers): the
    /// record chosen to run, then the records waiting behind it that its
    /// lock covers (the same key in key order, the next records of the
    /// partition otherwise), in offset order. A batch counts once against
    /// `max_concurrency` and holds its lock until its last record finished.
    pub max_batch: usize,
}

/// Defaults: a partition pauses at 10 000 buffered records and resumes at
/// 5 000, so a pause lets the workers drain half the buffer before
/// librdkafka fetches again (a narrow band, such as 1 000 and 500, paused
/// and resumed continuously and cost most of the throughput: a pause drops
/// librdkafka's prefetched records, a resume fetches them again); all
/// partitions together hold at most 64 MiB, resuming at 32 MiB.
impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            ordering: Ordering::Partition,
            max_concurrency: 16,
            max_buffered_per_partition: 10_000,
            resume_at_buffered: 5_000,
            max_buffered_bytes: 64 << 20,
            resume_at_buffered_bytes: 32 << 20,
            max_batch: 1,
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
    #[error("resume_at_buffered_bytes ({resume}) must be below max_buffered_bytes ({max})")]
    ResumeBytesNotBelowMax { resume: usize, max: usize },
}

impl SchedulerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_concurrency == 0 {
            return Err(ConfigError::Zero {
                name: "max_concurrency",
            });
        }
        if self.max_batch == 0 {
            return Err(ConfigError::Zero { name: "max_batch" });
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
        if self.resume_at_buffered_bytes >= self.max_buffered_bytes {
            return Err(ConfigError::ResumeBytesNotBelowMax {
                resume: self.resume_at_buffered_bytes,
                max: self.max_buffered_bytes,
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
    /// Records of one batch (`max_batch`) are consecutive decisions with the
    /// same `batch`, the id of its first record (a record alone: its own
    /// id).
    Submit {
        id: TaskId,
        batch: TaskId,
        tp: TopicPartition,
        payload: T,
    },
    /// Stop fetching `tp` (keep polling: heartbeats and rebalances go on).
    Pause(TopicPartition),
    /// Fetch `tp` again.
    Resume(TopicPartition),
}

/// What a running task holds: (partition id, key hash). In partition mode
/// the key hash is [`PARTITION_LOCK`].
type Lock = (u32, u64);

const PARTITION_LOCK: u64 = u64::MAX;

/// The hash a record's key is locked under in key order (see
/// [`Scheduler::push_sized`]): FNV-1a over the key's bytes (keys are
/// short, and a collision only orders two keys as one), a separate value
/// for no key.
pub fn key_hash(key: Option<&[u8]>) -> u64 {
    match key {
        None => 0,
        Some(bytes) => {
            bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
            }) | 1
        }
    }
}

/// Hashing for maps keyed by [`TaskId`]: ids are distinct counters, so a
/// multiply spreads them well enough (the default SipHash costs more than
/// the map operation).
#[derive(Debug, Default, Clone, Copy)]
pub struct TaskIdHasher(u64);

impl Hasher for TaskIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by [`TaskId`].
pub type TaskMap<V> = HashMap<TaskId, V, BuildHasherDefault<TaskIdHasher>>;

/// Hashing for the maps of partitions and locks, looked up several times
/// per record: a multiply-rotate over 8-byte words (the default SipHash
/// cost more than the lookups). Not resistant to chosen collisions; the
/// keys are partition names from the cluster's metadata and lock pairs
/// (at most `max_concurrency` of them).
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_i32(&mut self, n: i32) {
        self.add(u64::from(n as u32));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// A map with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A set with [`FastHasher`].
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

#[derive(Debug)]
struct Waiting<T> {
    key_hash: u64,
    bytes: usize,
    payload: T,
}

#[derive(Debug)]
struct PartitionState<T> {
    /// Stable id of the partition (kept across incarnations) for locks.
    id: u32,
    waiting: VecDeque<Waiting<T>>,
    /// Running tasks of the current incarnation of this partition.
    running: usize,
    /// Bytes of the waiting records.
    waiting_bytes: usize,
    /// Whether the consumer was told to pause it.
    paused: bool,
    /// Held by the caller (for example, commit metadata would not fit).
    held: bool,
    /// Stopped by the failure policy: nothing more is submitted.
    stopped: bool,
    /// Paused by the user: nothing more is submitted until resumed.
    user_paused: bool,
}

impl<T> PartitionState<T> {
    fn new(id: u32) -> Self {
        PartitionState {
            id,
            waiting: VecDeque::new(),
            running: 0,
            waiting_bytes: 0,
            paused: false,
            held: false,
            stopped: false,
            user_paused: false,
        }
    }

    fn buffered(&self) -> usize {
        self.waiting.len() + self.running
    }
}

#[derive(Debug)]
struct Running {
    /// The partition's id ([`Scheduler::ids`]).
    id: u32,
    lock: Option<Lock>,
    /// The partition incarnation it was submitted under.
    incarnation: u64,
    bytes: usize,
    /// The first record of its batch.
    batch: TaskId,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Scheduler<T> {
    config: SchedulerConfig,
    partitions: BTreeMap<TopicPartition, (u64, PartitionState<T>)>,
    /// The scheduled partitions in order (the round robin's), rebuilt when
    /// one is added or removed.
    order: Vec<TopicPartition>,
    running: TaskMap<Running>,
    /// Handler calls in flight (a batch is one).
    calls: usize,
    /// Unfinished records of batches of more than one record, by batch.
    batches: TaskMap<usize>,
    locks: FastSet<Lock>,
    /// Partition ids for locks, never reused: `ids[id]` is the partition.
    ids: Vec<TopicPartition>,
    id_of: HashMap<TopicPartition, u32>,
    next_task: u64,
    next_incarnation: u64,
    /// Where the next round-robin pass starts (an index into `order`).
    cursor: usize,
    /// Bytes of waiting records plus running tasks, all partitions.
    buffered_bytes: usize,
    /// Whether `buffered_bytes` reached the maximum and has not yet come
    /// down to the resume level.
    bytes_full: bool,
}

impl<T> Scheduler<T> {
    pub fn new(config: SchedulerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Scheduler {
            config,
            partitions: BTreeMap::new(),
            order: Vec::new(),
            running: TaskMap::default(),
            calls: 0,
            batches: TaskMap::default(),
            locks: FastSet::default(),
            ids: Vec::new(),
            id_of: HashMap::new(),
            next_task: 0,
            next_incarnation: 0,
            cursor: 0,
            buffered_bytes: 0,
            bytes_full: false,
        })
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Starts scheduling `tp` (on assignment). An existing state is replaced.
    pub fn add_partition(&mut self, tp: TopicPartition) -> Vec<T> {
        let dropped = self.remove_partition(&tp);
        self.next_incarnation += 1;
        let id = match self.id_of.get(&tp) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
                self.ids.push(tp.clone());
                self.id_of.insert(tp.clone(), id);
                id
            }
        };
        self.partitions
            .insert(tp, (self.next_incarnation, PartitionState::new(id)));
        self.order = self.partitions.keys().cloned().collect();
        dropped
    }

    /// Stops scheduling `tp` (revoke or loss) and returns its records that
    /// never started. Its running tasks keep their worker slot and lock until
    /// they are reported [`Scheduler::finished`].
    pub fn remove_partition(&mut self, tp: &TopicPartition) -> Vec<T> {
        match self.partitions.remove(tp) {
            Some((_, state)) => {
                self.buffered_bytes -= state.waiting_bytes;
                self.order = self.partitions.keys().cloned().collect();
                state.waiting.into_iter().map(|w| w.payload).collect()
            }
            None => Vec::new(),
        }
    }

    /// Queues a delivered record. Returns it back if `tp` is not scheduled.
    pub fn push(&mut self, tp: &TopicPartition, key: Option<Vec<u8>>, payload: T) -> Result<(), T> {
        self.push_sized(tp, key_hash(key.as_deref()), 0, payload)
    }

    /// Queues a delivered record whose key has hash `key` ([`key_hash`]),
    /// of `bytes` bytes (counted against `max_buffered_bytes` until its
    /// task finishes). Returns it back if `tp` is not scheduled.
    pub fn push_sized(
        &mut self,
        tp: &TopicPartition,
        key: u64,
        bytes: usize,
        payload: T,
    ) -> Result<(), T> {
        let key_hash = match self.config.ordering {
            Ordering::Key => key,
            Ordering::Partition | Ordering::Unordered => PARTITION_LOCK,
        };
        match self.partitions.get_mut(tp) {
            Some((_, state)) => {
                state.waiting.push_back(Waiting {
                    key_hash,
                    bytes,
                    payload,
                });
                state.waiting_bytes += bytes;
                self.buffered_bytes += bytes;
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
        let batch_done = match self.batches.get_mut(&r.batch) {
            Some(left) if *left > 1 => {
                *left -= 1;
                false
            }
            Some(_) => {
                self.batches.remove(&r.batch);
                true
            }
            None => true,
        };
        if batch_done {
            self.calls -= 1;
            if let Some(lock) = &r.lock {
                self.locks.remove(lock);
            }
        }
        self.buffered_bytes -= r.bytes;
        let Some(tp) = self.ids.get(r.id as usize) else {
            return;
        };
        if let Some((incarnation, state)) = self.partitions.get_mut(tp)
            && *incarnation == r.incarnation
        {
            state.running -= 1;
        }
    }

    /// Bytes of buffered records (waiting, and running until they finish)
    /// over all partitions.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Holds `tp` paused (or releases it) regardless of its buffer; its
    /// waiting records still run.
    pub fn set_held(&mut self, tp: &TopicPartition, held: bool) {
        if let Some((_, state)) = self.partitions.get_mut(tp) {
            state.held = held;
        }
    }

    /// Pauses `tp` for the user (or ends that): while paused it stays
    /// paused whatever its buffer, and none of its waiting records is
    /// submitted.
    pub fn set_user_paused(&mut self, tp: &TopicPartition, paused: bool) {
        if let Some((_, state)) = self.partitions.get_mut(tp) {
            state.user_paused = paused;
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

    /// Submits what may run now (round robin over partitions, one record per
    /// partition per round) and says which partitions to pause or resume.
    pub fn decide(&mut self) -> Vec<Decision<T>> {
        let mut out = Vec::new();
        let n = self.order.len();
        let start = if n == 0 { 0 } else { self.cursor % n };
        let mut progress = true;
        while progress && self.calls < self.config.max_concurrency {
            progress = false;
            for k in 0..n {
                if self.calls >= self.config.max_concurrency {
                    break;
                }
                let i = (start + k) % n;
                let tp = &self.order[i];
                let Some((incarnation, state)) = self.partitions.get_mut(tp) else {
                    continue;
                };
                if state.stopped || state.user_paused {
                    continue;
                }
                let locks = &self.locks;
                let index = match self.config.ordering {
                    Ordering::Unordered => (!state.waiting.is_empty()).then_some(0),
                    // Only the head may run: checking it is enough.
                    Ordering::Partition => (!state.waiting.is_empty()
                        && !locks.contains(&(state.id, PARTITION_LOCK)))
                    .then_some(0),
                    // The first record whose key is free. An earlier record
                    // with the same key would have been found first, so keys
                    // keep their order.
                    Ordering::Key => state
                        .waiting
                        .iter()
                        .position(|w| !locks.contains(&(state.id, w.key_hash))),
                };
                let Some(w) = index.and_then(|i| state.waiting.remove(i)) else {
                    continue;
                };
                let lock = match self.config.ordering {
                    Ordering::Unordered => None,
                    Ordering::Partition | Ordering::Key => Some((state.id, w.key_hash)),
                };
                if let Some(l) = lock {
                    self.locks.insert(l);
                }
                // The records its lock covers, waiting behind it, join its
                // batch in order.
                let mut more = Vec::new();
                let mut j = 0;
                while more.len() + 1 < self.config.max_batch && j < state.waiting.len() {
                    let covered = match self.config.ordering {
                        Ordering::Key => state.waiting[j].key_hash == w.key_hash,
                        Ordering::Partition | Ordering::Unordered => true,
                    };
                    match covered.then(|| state.waiting.remove(j)).flatten() {
                        Some(next) => more.push(next),
                        None => j += 1,
                    }
                }
                self.calls += 1;
                let first = TaskId(self.next_task + 1);
                if !more.is_empty() {
                    self.batches.insert(first, more.len() + 1);
                }
                for w in std::iter::once(w).chain(more) {
                    state.running += 1;
                    state.waiting_bytes -= w.bytes;
                    self.next_task += 1;
                    let id = TaskId(self.next_task);
                    self.running.insert(
                        id,
                        Running {
                            id: state.id,
                            lock,
                            incarnation: *incarnation,
                            bytes: w.bytes,
                            batch: first,
                        },
                    );
                    out.push(Decision::Submit {
                        id,
                        batch: first,
                        tp: tp.clone(),
                        payload: w.payload,
                    });
                }
                self.cursor = i + 1;
                progress = true;
            }
        }
        if self.buffered_bytes >= self.config.max_buffered_bytes {
            self.bytes_full = true;
        } else if self.buffered_bytes <= self.config.resume_at_buffered_bytes {
            self.bytes_full = false;
        }
        for (tp, (_, state)) in &mut self.partitions {
            let must_pause = state.stopped
                || state.user_paused
                || state.held
                || self.bytes_full
                || state.buffered() >= self.config.max_buffered_per_partition;
            let may_resume = !state.stopped
                && !state.user_paused
                && !state.held
                && !self.bytes_full
                && state.buffered() <= self.config.resume_at_buffered;
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
