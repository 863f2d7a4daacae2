//! The partition layer: the partition logs this broker holds, their high
//! watermarks, their idempotent-producer state and the wake-ups of the
//! long-poll fetches waiting on them.
//!
//! Handlers of the data path (Produce, Fetch, ListOffsets, DeleteRecords,
//! DescribeLogDirs) and the group coordinator's `__consumer_offsets` writes
//! reach partitions only through a [`ReplicaManager`]; which topics exist
//! and who leads a partition are not its business (that is the topic table
//! and the [`ClusterView`](crate::cluster::ClusterView)). Today every
//! partition has one replica, so the high watermark follows the log end
//! offset; replication (followers, the ISR, `acks=all`) belongs here too.
//!
//! ```
//! use weir_broker::replica_manager::ReplicaManager;
//! use weir_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let logs = LogManager::open(LogManagerConfig::new(vec![dir.path().to_path_buf()]), 0)?;
//! let replicas = ReplicaManager::new(logs);
//! replicas
//!     .prepare_logs("t", [1; 16], 0..1, LogConfig::default())?
//!     .commit();
//! let log = replicas.log("t", 0).ok_or("no log")?;
//! assert_eq!(log.high_watermark(), 0);
//! replicas.remove_partition(&TopicPartition::new("t", 0))?;
//! assert!(replicas.log("t", 0).is_none());
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use weir_protocol::error_code::ErrorCode;
use weir_storage::{Log, LogConfig, LogManager, PendingCreation, StorageError, TopicPartition};

use crate::cluster::ClusterSnapshot;
use crate::metrics::replication::ReplicationCounters;
use crate::producer_state::PartitionProducers;
use crate::replication::state::{IsrChange, PartitionReplication, Role, Transition};
use crate::topics::TopicMeta;
use crate::wakeups::PartitionWakeups;

/// How a broker may append to a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendRole {
    /// A single node (no cluster): always, with the batches' own leader
    /// epoch field.
    Standalone,
    /// The leader in `epoch`, appending under
    /// [`ReplicaManager::as_leader_in`]; `replicated` (other replicas
    /// exist): batches are stamped with the epoch and acks=all waits for
    /// the in-sync replicas.
    Leader { epoch: i32, replicated: bool },
    /// Not the leader (or not yet taken up).
    NotLeader,
}

impl AppendRole {
    /// The leader epoch to stamp on appended batches: the epoch of a
    /// replicated partition's leader (single-replica partitions and a
    /// single node keep the batches' own field).
    pub fn stamp(self) -> Option<i32> {
        match self {
            AppendRole::Leader {
                epoch,
                replicated: true,
            } => Some(epoch),
            _ => None,
        }
    }
}

/// Loads a partition's producer state (its snapshot and the batches after
/// it, or its log's tail): file reads, kept off the async runtime's worker
/// (a Fetch asking for the LSO may be the first to need it).
pub(crate) fn load_producers(log: &Log) -> PartitionProducers {
    crate::handler::blocking(|| crate::producer_state_io::rebuild(log))
}

/// Starts `epoch` at `leo` in `log`'s leader-epoch cache (a new leader).
fn start_epoch(log: &Log, epoch: i32, leo: i64) {
    if let Err(e) = log.assign_epoch_start(epoch, leo) {
        tracing::warn!(partition = %log.topic_partition(), error = %e, "cannot record the leader epoch start");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One partition's producer state; `None` until first used after start.
pub(crate) type ProducerSlot = Arc<Mutex<Option<PartitionProducers>>>;

/// Owner of the partition logs and everything kept per partition beside
/// them.
///
/// What is always true of it:
/// - a partition's high watermark never moves backwards: it is changed only
///   by [`ReplicaManager::advance_high_watermark`], under one lock, and only
///   upwards (a `debug_assert!` checks it);
/// - `log start <= high watermark <= log end offset` (the log clamps and
///   checks it);
/// - after every append that moves a partition's log end offset or high
///   watermark, its waiting fetches are woken
///   ([`ReplicaManager::notify_append`]); a fetch registered before its last
///   read therefore never sleeps past data it could return;
/// - producer state is kept only for partitions with a log: removing a
///   partition ([`ReplicaManager::remove_partition`]) drops it, and it is
///   rebuilt from the log (snapshot and tail) the next time it is needed.
pub struct ReplicaManager {
    logs: LogManager,
    /// Long-poll fetches waiting for appends, by partition.
    wakeups: PartitionWakeups,
    /// Per-partition producer state, loaded on first use.
    producers: RwLock<HashMap<TopicPartition, ProducerSlot>>,
    /// Producer-state loads, by where they ran.
    producer_loads: ProducerLoads,
    /// Serialises high-watermark updates so the HW never moves backwards.
    hw_lock: Mutex<()>,
    /// Replication state of the partitions the metadata assigns (cluster
    /// only; a partition without one has a single replica: its HW follows
    /// its log end offset).
    replication: RwLock<HashMap<TopicPartition, ReplicationSlot>>,
    /// The log cleaner, when one runs: truncations go through it so its
    /// checkpoint never lies above a cut.
    cleaner: std::sync::OnceLock<Arc<weir_storage::cleaner::LogCleaner>>,
    /// This broker's id, as the last [`apply_leadership`] named it.
    ///
    /// [`apply_leadership`]: ReplicaManager::apply_leadership
    node_id: AtomicI32,
    /// Replication events, for `/metrics`.
    counters: ReplicationCounters,
    /// Set for a cluster member before it serves anything: a partition then
    /// takes appends and moves its high watermark only under the replication
    /// state [`apply_leadership`] gave it (a restarted broker serving before
    /// that would acknowledge acks=all appends no follower has).
    ///
    /// [`apply_leadership`]: ReplicaManager::apply_leadership
    member: std::sync::atomic::AtomicBool,
    /// Set by [`resign_leaderships`](ReplicaManager::resign_leaderships):
    /// this broker leads nothing any more.
    resigned: std::sync::atomic::AtomicBool,
}

type ReplicationSlot = Arc<Mutex<PartitionReplication>>;

/// How many partitions' producer states were loaded (snapshot and log
/// tail read from disk), and where: ahead of the request on a blocking
/// thread ([`ReplicaManager::load_producers_ahead`]), or inline by the
/// code that needed them (a marker, a group's transactional offsets, a
/// state dropped after a failed append).
#[derive(Debug, Default)]
pub struct ProducerLoads {
    pub ahead: std::sync::atomic::AtomicU64,
    pub inline: std::sync::atomic::AtomicU64,
}

/// A partition this broker follows, for the fetcher of its leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    pub tp: TopicPartition,
    pub topic_id: [u8; 16],
    pub leader_epoch: i32,
}

impl ReplicaManager {
    /// Takes over the opened partition logs.
    pub fn new(logs: LogManager) -> ReplicaManager {
        ReplicaManager {
            logs,
            wakeups: PartitionWakeups::default(),
            producers: RwLock::new(HashMap::new()),
            producer_loads: ProducerLoads::default(),
            hw_lock: Mutex::new(()),
            replication: RwLock::new(HashMap::new()),
            cleaner: std::sync::OnceLock::new(),
            node_id: AtomicI32::new(-1),
            member: std::sync::atomic::AtomicBool::new(false),
            resigned: std::sync::atomic::AtomicBool::new(false),
            counters: ReplicationCounters::default(),
        }
    }

    /// Replication event counters (ISR changes, replicated bytes).
    pub fn replication_counters(&self) -> &ReplicationCounters {
        &self.counters
    }

    /// The log manager, for storage-wide work (retention, the cleaner, log
    /// dir reports) and start-up.
    pub fn logs(&self) -> &LogManager {
        &self.logs
    }

    /// The long-poll fetches waiting on partitions.
    pub fn wakeups(&self) -> &PartitionWakeups {
        &self.wakeups
    }

    /// The open log of a partition.
    pub fn log(&self, topic: &str, partition: i32) -> Option<Arc<Log>> {
        self.logs.get(&TopicPartition::new(topic, partition))
    }

    /// The error code for a partition without an open log: a partition of a
    /// known topic (`topic`, as the topic table has it) whose log failed to
    /// open is a storage error, anything else is unknown.
    pub fn missing_log_error(&self, topic: Option<&TopicMeta>, partition: i32) -> ErrorCode {
        let failed = topic
            .filter(|t| (0..t.partitions).contains(&partition))
            .is_some_and(|t| {
                self.logs
                    .failed_logs()
                    .contains_key(&TopicPartition::new(t.name.clone(), partition))
            });
        if failed {
            ErrorCode::KafkaStorageError
        } else {
            ErrorCode::UnknownTopicOrPartition
        }
    }

    /// Creates the logs of `partitions` of a topic all or nothing; they
    /// exist after a crash only once the returned creation is committed
    /// (see [`LogManager::prepare_logs`]).
    pub fn prepare_logs(
        &self,
        topic: &str,
        topic_id: [u8; 16],
        partitions: std::ops::Range<i32>,
        config: LogConfig,
    ) -> Result<PendingCreation<'_>, StorageError> {
        self.logs.prepare_logs(topic, topic_id, partitions, config)
    }

    /// Removes a partition this broker no longer holds: its log when open,
    /// then its producer state.
    pub fn remove_partition(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        if self.logs.get(tp).is_some() {
            self.logs.delete_log(tp)?;
        }
        self.forget_producers(tp);
        Ok(())
    }

    /// Gives the open logs of partitions `0..partitions` of `name` their
    /// new configuration.
    pub fn set_log_configs(&self, name: &str, partitions: i32, cfg: &LogConfig) {
        for p in 0..partitions {
            if let Some(log) = self.log(name, p) {
                log.set_config(cfg.clone());
            }
        }
    }

    /// Drops the producer state kept for a partition whose log is gone or
    /// changed under it (truncation, a new leader).
    pub fn forget_producers(&self, tp: &TopicPartition) {
        self.producers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tp);
    }

    /// Moves the high watermark up to what the partition's replicas allow:
    /// its log end offset with a single replica, the smallest log end
    /// offset of the maximal ISR when this broker leads replicas, nothing
    /// when it follows (the leader's fetch answers set it). Returns whether
    /// it moved.
    pub fn advance_high_watermark(&self, log: &Log) -> bool {
        let leo = log.log_end_offset();
        let target = match self.replication_of(log.topic_partition()) {
            // A cluster member's partition without a state yet waits for it.
            None if self.member.load(Ordering::Relaxed) => None,
            None => Some(leo),
            Some(slot) => {
                let state = lock(&slot);
                state.high_watermark(self.node_id.load(Ordering::Relaxed), leo)
            }
        };
        match target {
            Some(hw) => self.raise_high_watermark(log, hw),
            None => false,
        }
    }

    /// Raises the high watermark to `hw` (clamped to the log end offset);
    /// never lowers it. Returns whether it moved.
    pub fn raise_high_watermark(&self, log: &Log, hw: i64) -> bool {
        let _g = self.hw_lock.lock().unwrap_or_else(|p| p.into_inner());
        let before = log.high_watermark();
        let target = hw.min(log.log_end_offset());
        if before < target {
            log.set_high_watermark(target);
        }
        debug_assert!(
            log.high_watermark() >= before,
            "high watermark of {} moved backwards: {before} -> {}",
            log.topic_partition(),
            log.high_watermark()
        );
        log.high_watermark() > before
    }

    fn replication_of(&self, tp: &TopicPartition) -> Option<ReplicationSlot> {
        self.replication
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tp)
            .cloned()
    }

    /// The replication state of a partition, if the metadata assigns it.
    pub fn replication_state(&self, tp: &TopicPartition) -> Option<PartitionReplication> {
        self.replication_of(tp).map(|s| lock(&s).clone())
    }

    /// Makes this a cluster member's partition layer (see `member`); call
    /// before serving requests.
    pub fn set_cluster_member(&self) {
        self.member.store(true, Ordering::Relaxed);
    }

    /// Whether this broker has taken up the leadership of `tp` at
    /// `leader_epoch` that the cluster view gives it: always on a single
    /// node; in a cluster only once [`apply_leadership`] made it leader in
    /// that epoch (between the metadata naming it and that, an append would
    /// bypass the replication rules).
    ///
    /// [`apply_leadership`]: ReplicaManager::apply_leadership
    pub fn leads(&self, tp: &TopicPartition, leader_epoch: i32) -> bool {
        if !self.member.load(Ordering::Relaxed) {
            return true;
        }
        self.replication_of(tp).is_some_and(|slot| {
            let s = lock(&slot);
            s.role == Role::Leader && s.leader_epoch == leader_epoch
        })
    }

    /// Runs `write` (a follower's append or truncation of `tp`) only while
    /// this broker follows `leader` in `leader_epoch`, holding the
    /// partition's replication state throughout: a leadership change waits
    /// for a write under way, and an answer of the old leader that arrives
    /// after it is not applied (it would land below the new epoch's start,
    /// or cut a log this broker now leads). None when not applied.
    pub fn as_follower_of<R>(
        &self,
        tp: &TopicPartition,
        leader: i32,
        leader_epoch: i32,
        write: impl FnOnce() -> R,
    ) -> Option<R> {
        let slot = self.replication_of(tp)?;
        let s = lock(&slot);
        (s.role == Role::Follower { leader } && s.leader_epoch == leader_epoch).then(write)
    }

    /// Runs `append` (a leader's append to `tp`) only while this broker
    /// leads `tp` in `leader_epoch`, holding the partition's replication
    /// state throughout, so that the leadership cannot move between the
    /// check and the append (an append that lands after this broker became
    /// a follower would be answered as if replicated). None when not run.
    /// `append` must not touch the partition's replication state (the high
    /// watermark is moved after it returns).
    pub fn as_leader_in<R>(
        &self,
        tp: &TopicPartition,
        leader_epoch: i32,
        append: impl FnOnce() -> R,
    ) -> Option<R> {
        let slot = self.replication_of(tp)?;
        let s = lock(&slot);
        (s.role == Role::Leader && s.leader_epoch == leader_epoch).then(append)
    }

    /// Runs `append` as `role` (from [`append_role`](Self::append_role))
    /// allows: at once on a single node; as the leader in its epoch under
    /// [`as_leader_in`](Self::as_leader_in); not at all when not leading
    /// (None). `append` gets the leader epoch to stamp on the batches
    /// ([`AppendRole::stamp`]).
    pub fn append_in_role<R>(
        &self,
        tp: &TopicPartition,
        role: AppendRole,
        append: impl FnOnce(Option<i32>) -> R,
    ) -> Option<R> {
        match role {
            AppendRole::Standalone => Some(append(None)),
            AppendRole::Leader { epoch, .. } => {
                self.as_leader_in(tp, epoch, || append(role.stamp()))
            }
            AppendRole::NotLeader => None,
        }
    }

    /// Whether `replica` follows `tp` as this broker, its leader, knows it
    /// (a follower's fetch from any other broker is refused).
    pub fn has_follower(&self, tp: &TopicPartition, replica: i32) -> bool {
        self.replication_of(tp)
            .is_some_and(|slot| lock(&slot).followers.contains_key(&replica))
    }

    /// How this broker may append to `tp` now (see [`AppendRole`]).
    pub fn append_role(&self, tp: &TopicPartition) -> AppendRole {
        if !self.member.load(Ordering::Relaxed) {
            return AppendRole::Standalone;
        }
        let Some(slot) = self.replication_of(tp) else {
            return AppendRole::NotLeader;
        };
        let s = lock(&slot);
        if s.role != Role::Leader {
            return AppendRole::NotLeader;
        }
        AppendRole::Leader {
            epoch: s.leader_epoch,
            replicated: s.replicas.len() > 1,
        }
    }

    /// Applies the partition leadership of `snap` to every partition this
    /// broker holds: leaders start their epoch at their log end offset,
    /// followers drop the producer state they may hold (the new leader's
    /// log is the truth). Returns the partitions to follow, by leader.
    pub fn apply_leadership(
        &self,
        me: i32,
        snap: &ClusterSnapshot,
        now_ms: i64,
    ) -> BTreeMap<i32, Vec<Followed>> {
        if self.resigned.load(Ordering::SeqCst) {
            return BTreeMap::new();
        }
        self.node_id.store(me, Ordering::Relaxed);
        let mut follow: BTreeMap<i32, Vec<Followed>> = BTreeMap::new();
        let mut changed = Vec::new();
        let logs = self.logs.logs();
        {
            let mut map = self.replication.write().unwrap_or_else(|p| p.into_inner());
            map.retain(|tp, _| logs.iter().any(|l| l.topic_partition() == tp));
            for log in &logs {
                let tp = log.topic_partition();
                let (Some(topic), Some(view)) = (
                    snap.topic(&tp.topic),
                    snap.partition(&tp.topic, tp.partition),
                ) else {
                    map.remove(tp);
                    continue;
                };
                // The log end offset is read, and a new leader's epoch
                // started there, under the partition's state lock, which a
                // follower's append or truncation holds (`as_follower_of`):
                // an answer of the old leader still being applied finishes
                // first, and none is applied after.
                let (transition, state, leo) = match map.get(tp) {
                    Some(slot) => {
                        let mut s = lock(slot);
                        let leo = log.log_end_offset();
                        let t = s.apply(me, view, leo, now_ms);
                        if t == Transition::BecameLeader {
                            start_epoch(log, s.leader_epoch, leo);
                        }
                        (t, s.clone(), leo)
                    }
                    None => {
                        let leo = log.log_end_offset();
                        let s = PartitionReplication::new(me, topic.id, view, leo, now_ms);
                        let t = match s.role {
                            Role::Leader => Transition::BecameLeader,
                            Role::Follower { .. } => Transition::BecameFollower,
                            Role::Offline => Transition::BecameOffline,
                        };
                        if t == Transition::BecameLeader {
                            start_epoch(log, s.leader_epoch, leo);
                        }
                        map.insert(tp.clone(), Arc::new(Mutex::new(s.clone())));
                        (t, s, leo)
                    }
                };
                match transition {
                    Transition::BecameLeader => {
                        tracing::info!(partition = %tp, epoch = state.leader_epoch, leo, "leading");
                    }
                    Transition::BecameFollower => {
                        self.forget_producers(tp);
                        tracing::info!(partition = %tp, epoch = state.leader_epoch, leader = ?state.role, "following");
                    }
                    Transition::BecameOffline | Transition::Unchanged => {}
                }
                if transition != Transition::Unchanged {
                    changed.push(log.clone());
                }
                if let Role::Follower { leader } = state.role {
                    follow.entry(leader).or_default().push(Followed {
                        tp: tp.clone(),
                        topic_id: state.topic_id,
                        leader_epoch: state.leader_epoch,
                    });
                }
            }
        }
        for log in logs {
            self.advance_high_watermark(&log);
        }
        // Waiting produces and fetches look again at who leads.
        for log in changed {
            self.notify_append(&log);
        }
        follow
    }

    /// Gives up every leadership this broker holds, for a shutdown once it
    /// stops following the metadata: appends are refused and waiting
    /// acks=all produces (and offset commits) answered
    /// NOT_LEADER_OR_FOLLOWER at once, which a producer retries at the new
    /// leader with its sequence numbers unchanged, instead of holding them
    /// to their timeout (a REQUEST_TIMED_OUT leaves the producer unsure
    /// whether the batch was written). No later [`apply_leadership`] takes
    /// leadership again. Returns how many leaderships were given up.
    ///
    /// [`apply_leadership`]: ReplicaManager::apply_leadership
    pub fn resign_leaderships(&self) -> usize {
        self.resigned.store(true, Ordering::SeqCst);
        let slots: Vec<ReplicationSlot> = self
            .replication
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let mut resigned = 0;
        for slot in slots {
            let mut s = lock(&slot);
            if s.role == Role::Leader {
                s.role = Role::Offline;
                resigned += 1;
            }
        }
        // Waiting produces and fetches look again at who leads.
        for log in self.logs.logs() {
            self.notify_append(&log);
        }
        resigned
    }

    /// A follower's fetch of `tp` at `fetch_offset` (leader side): records
    /// its progress, moves the high watermark (waking what waits on it) and
    /// returns the ISR expansion to ask for, if any. `live` says which
    /// brokers may join the ISR.
    pub fn record_follower_fetch(
        &self,
        log: &Log,
        replica: i32,
        fetch_offset: i64,
        now_ms: i64,
        live: impl Fn(i32) -> bool,
    ) -> Result<Option<IsrChange>, ErrorCode> {
        let tp = log.topic_partition();
        let slot = self
            .replication_of(tp)
            .ok_or(ErrorCode::NotLeaderOrFollower)?;
        lock(&slot).record_fetch(replica, fetch_offset, log.log_end_offset(), now_ms)?;
        if self.advance_high_watermark(log) {
            self.notify_append(log);
        }
        let hw = log.high_watermark();
        let mut s = lock(&slot);
        let Some(new_isr) = s.expansion(replica, hw, now_ms, live) else {
            return Ok(None);
        };
        s.pending_isr = Some(new_isr.clone());
        Ok(Some(IsrChange {
            topic: tp.topic.clone(),
            topic_id: s.topic_id,
            partition: tp.partition,
            leader_epoch: s.leader_epoch,
            partition_epoch: s.partition_epoch,
            new_isr,
        }))
    }

    /// The ISR shrinks due now: members of the ISRs this broker leads not
    /// caught up for `lag_max_ms`. Each is marked pending until answered.
    pub fn isr_shrinks(&self, now_ms: i64, lag_max_ms: i64) -> Vec<IsrChange> {
        let me = self.node_id.load(Ordering::Relaxed);
        let slots: Vec<(TopicPartition, ReplicationSlot)> = self
            .replication
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(tp, s)| (tp.clone(), s.clone()))
            .collect();
        let mut out = Vec::new();
        for (tp, slot) in slots {
            let mut s = lock(&slot);
            if let Some(new_isr) = s.shrink(me, now_ms, lag_max_ms) {
                s.pending_isr = Some(new_isr.clone());
                out.push(IsrChange {
                    topic: tp.topic.clone(),
                    topic_id: s.topic_id,
                    partition: tp.partition,
                    leader_epoch: s.leader_epoch,
                    partition_epoch: s.partition_epoch,
                    new_isr,
                });
            }
        }
        out
    }

    /// The controller's answer at `now_ms` to an ISR change of `tp`:
    /// `(leader epoch, partition epoch, ISR)` as committed, or the error
    /// (after which no change is asked for a moment).
    pub fn isr_answered(
        &self,
        tp: &TopicPartition,
        answer: Result<(i32, i32, Vec<i32>), ErrorCode>,
        now_ms: i64,
    ) {
        let Some(slot) = self.replication_of(tp) else {
            return;
        };
        let (before, after) = {
            let mut s = lock(&slot);
            let before = s.isr.clone();
            s.isr_answered(answer, now_ms);
            (before, s.isr.clone())
        };
        self.counters.record_isr_change(&before, &after);
        if let Some(log) = self.logs.get(tp) {
            self.advance_high_watermark(&log);
            // Produces waiting for acks=all look at the ISR again.
            self.notify_append(&log);
        }
    }

    /// Waits until every in-sync replica has `tp` below `end_offset` (the
    /// high watermark reached it), for an acks=all produce. Errors:
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then smaller than
    /// `min_isr`, NOT_LEADER_OR_FOLLOWER when leadership moved,
    /// REQUEST_TIMED_OUT at `deadline`.
    pub async fn wait_for_replication(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        min_isr: usize,
        deadline: tokio::time::Instant,
    ) -> ErrorCode {
        self.wait_for_replication_in(tp, end_offset, min_isr, None, deadline)
            .await
    }

    /// [`wait_for_replication`](Self::wait_for_replication) of records
    /// appended in `leader_epoch` (when given): a leadership in any other
    /// epoch answers NOT_LEADER_OR_FOLLOWER, since the log may have been
    /// cut and written again at those offsets in between.
    pub async fn wait_for_replication_in(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        min_isr: usize,
        leader_epoch: Option<i32>,
        deadline: tokio::time::Instant,
    ) -> ErrorCode {
        let registration = self.wakeups.register(vec![tp.clone()]);
        loop {
            let Some(log) = self.logs.get(tp) else {
                return ErrorCode::NotLeaderOrFollower;
            };
            let state = self.replication_of(tp).map(|slot| {
                let s = lock(&slot);
                (s.role, s.leader_epoch, s.isr.len())
            });
            if let Some((role, epoch, _)) = state
                && (role != Role::Leader || leader_epoch.is_some_and(|e| e != epoch))
            {
                return ErrorCode::NotLeaderOrFollower;
            }
            if log.high_watermark() >= end_offset {
                let isr = state.map_or(1, |(_, _, isr)| isr);
                return if isr < min_isr {
                    ErrorCode::NotEnoughReplicasAfterAppend
                } else {
                    ErrorCode::None
                };
            }
            if tokio::time::timeout_at(deadline, registration.notified())
                .await
                .is_err()
            {
                return ErrorCode::RequestTimedOut;
            }
        }
    }

    /// Wakes the long-poll fetches waiting on `log`'s partition after data
    /// became visible there.
    pub fn notify_append(&self, log: &Log) {
        self.wakeups.wake(log.topic_partition());
    }

    /// Runs `f` on the producer state of a partition, loading it (snapshot
    /// and log tail) the first time the partition is touched. Holds only that
    /// partition's lock while `f` runs.
    pub fn with_producers<R>(&self, log: &Log, f: impl FnOnce(&mut PartitionProducers) -> R) -> R {
        let slot = self.producer_slot(log);
        let mut state = slot.lock().unwrap_or_else(|p| p.into_inner());
        f(state.get_or_insert_with(|| {
            self.producer_loads.inline.fetch_add(1, Ordering::Relaxed);
            load_producers(log)
        }))
    }

    /// Loads `log`'s producer state on a blocking thread unless it is in
    /// memory already, so that the request about to need it (an
    /// idempotent produce) finds it there instead of reading the snapshot
    /// and the log's tail on an async worker. Requests for the same
    /// partition meanwhile wait on the slot's lock, on blocking threads.
    pub async fn load_producers_ahead(&self, log: &Arc<Log>) {
        let slot = self.producer_slot(log);
        // Held by an append (or a load): let the blocking thread wait.
        if slot.try_lock().is_ok_and(|s| s.is_some()) {
            return;
        }
        let log = log.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            let mut state = slot.lock().unwrap_or_else(|p| p.into_inner());
            if state.is_some() {
                return false;
            }
            *state = Some(crate::producer_state_io::rebuild(&log));
            true
        })
        .await;
        if loaded.unwrap_or(false) {
            self.producer_loads.ahead.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Producer-state loads so far (for `/metrics`).
    pub fn producer_loads(&self) -> &ProducerLoads {
        &self.producer_loads
    }

    /// The slot of a partition's producer state (empty until loaded). Every
    /// Fetch asks for it (the LSO): a read lock finds it.
    pub(crate) fn producer_slot(&self, log: &Log) -> ProducerSlot {
        let tp = log.topic_partition();
        if let Some(slot) = self
            .producers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tp)
        {
            return slot.clone();
        }
        let mut map = self.producers.write().unwrap_or_else(|p| p.into_inner());
        map.entry(tp.clone()).or_default().clone()
    }

    /// Installs the log cleaner truncations must go through, and bounds
    /// its cleanings by each partition's last stable offset (an undecided
    /// transaction's records are never compacted). Transaction markers at
    /// or past a partition's oldest producer snapshot are never removed: a
    /// rebuild of its producer state replays the log after the snapshot,
    /// and a marker there may end a transaction the snapshot holds open.
    /// Without a snapshot a rebuild starts from no state, and a marker
    /// whose transaction has no batch left ends nothing it would open.
    pub fn set_cleaner(self: &Arc<Self>, cleaner: Arc<weir_storage::cleaner::LogCleaner>) {
        let replicas = Arc::downgrade(self);
        cleaner.set_cleanable_limit(Arc::new(move |log: &Log| {
            replicas
                .upgrade()
                .map_or_else(|| log.log_start_offset(), |r| r.last_stable_offset(log))
        }));
        cleaner.set_marker_removal_limit(Arc::new(|log: &Log| {
            crate::producer_state_io::oldest_snapshot(&*log.storage(), &log.dir())
                .unwrap_or(i64::MAX)
        }));
        let _ = self.cleaner.set(cleaner);
    }

    /// Truncates `tp` to `offset` (a follower dropping a divergent or
    /// unreplicated suffix): checkpoints lowered first, the cleaner's too,
    /// and the partition's producer state dropped (rebuilt from the log).
    pub fn truncate_to(&self, tp: &TopicPartition, offset: i64) -> Result<(), StorageError> {
        let r = match self.cleaner.get() {
            Some(c) => c.truncate_to(&self.logs, tp, offset),
            None => self.logs.truncate_to(tp, offset),
        };
        self.forget_producers(tp);
        r
    }

    /// Starts `tp` over, empty, at `offset` (a follower behind the
    /// leader's log start), as [`truncate_to`](Self::truncate_to) does.
    pub fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        let r = match self.cleaner.get() {
            Some(c) => c.truncate_fully_and_start_at(&self.logs, tp, offset),
            None => self.logs.truncate_fully_and_start_at(tp, offset),
        };
        self.forget_producers(tp);
        r
    }

    /// Periodic time-driven work of the logs (segment rolls by time).
    pub fn tick(&self, now_ms: i64) -> Result<(), StorageError> {
        self.logs.tick(now_ms)
    }

    /// Writes a producer-state snapshot for every partition whose state is
    /// in memory, at its current log end offset.
    pub fn snapshot_producers(&self) {
        let slots: Vec<_> = {
            let map = self.producers.read().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(tp, s)| (tp.clone(), s.clone())).collect()
        };
        for (tp, slot) in slots {
            let Some(log) = self.logs.get(&tp) else {
                continue;
            };
            let state = slot.lock().unwrap_or_else(|p| p.into_inner());
            let Some(state) = state.as_ref() else {
                continue;
            };
            // appends that change producer state hold this lock, so the
            // state covers every batch below this log end offset
            let leo = log.log_end_offset();
            // Only appends change the state: an idle partition's snapshot
            // at this offset is the one it would write.
            if crate::producer_state_io::has_snapshot_at(&*log.storage(), &log.dir(), leo) {
                continue;
            }
            // The replay after a snapshot indexes the aborted transactions
            // it finds; those below it must already be durable.
            if let Err(e) = log.sync_aborted_txns() {
                tracing::warn!(partition = %tp, "cannot sync the aborted-transaction index; no producer snapshot: {e}");
                continue;
            }
            if let Err(e) =
                crate::producer_state_io::write_snapshot(&*log.storage(), &log.dir(), leo, state)
            {
                tracing::warn!(partition = %tp, "cannot write producer snapshot: {e}");
            }
        }
    }

    /// Checkpoints recovery points, log starts and producer state.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        self.snapshot_producers();
        self.logs.checkpoint()
    }

    /// Snapshots producer state, then flushes, checkpoints and writes the
    /// clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.snapshot_producers();
        self.logs.shutdown()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weir_protocol::records::{Compression, RecordBatchBuilder};
    use weir_storage::LogManagerConfig;

    use super::*;
    use crate::producer_state::BatchMeta;

    fn open(dir: &std::path::Path) -> ReplicaManager {
        let logs = LogManager::open(LogManagerConfig::new(vec![dir.to_path_buf()]), 0).unwrap();
        ReplicaManager::new(logs)
    }

    fn create(r: &ReplicaManager, topic: &str, id: u8, partitions: i32) {
        r.prepare_logs(topic, [id; 16], 0..partitions, LogConfig::default())
            .unwrap()
            .commit();
    }

    fn append(log: &Log, records: usize) {
        let mut b = RecordBatchBuilder::new(Compression::None);
        for _ in 0..records {
            b.push(1, None, Some(bytes::Bytes::from_static(b"v")), vec![])
                .unwrap();
        }
        log.append(&mut b.build().unwrap().into_bytes().to_vec(), 1)
            .unwrap();
    }

    fn topic(name: &str, partitions: i32) -> TopicMeta {
        TopicMeta {
            name: name.to_string(),
            id: weir_protocol::Uuid([1; 16]).to_string(),
            partitions,
            configs: Default::default(),
        }
    }

    #[tokio::test]
    async fn an_append_moves_the_high_watermark_and_wakes_only_its_partition() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        create(&r, "t", 1, 2);
        let (p0, p1) = (r.log("t", 0).unwrap(), r.log("t", 1).unwrap());
        let waiting_on_1 = r.wakeups().register([TopicPartition::new("t", 1)]);
        append(&p0, 3);
        assert_eq!(p0.high_watermark(), 0, "appended, not yet visible");
        r.advance_high_watermark(&p0);
        r.notify_append(&p0);
        assert_eq!(p0.high_watermark(), 3);
        // a wake-up is a stored permit: `notified` is ready at its first poll
        let woken = tokio::select! {
            biased;
            _ = waiting_on_1.notified() => true,
            _ = std::future::ready(()) => false,
        };
        assert!(!woken, "woken by another partition's append");
        append(&p1, 1);
        r.advance_high_watermark(&p1);
        r.notify_append(&p1);
        assert_eq!(p1.high_watermark(), 1);
        tokio::time::timeout(Duration::from_secs(5), waiting_on_1.notified())
            .await
            .expect("the append to its partition wakes the fetch");
    }

    #[test]
    fn a_removed_partition_loses_its_producer_state() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        create(&r, "t", 1, 1);
        let log = r.log("t", 0).unwrap();
        let batch = BatchMeta {
            first_seq: 0,
            last_seq: 0,
            first_offset: 0,
            last_offset: 0,
            timestamp: 1,
        };
        r.with_producers(&log, |s| s.record(7, 0, batch));
        assert_eq!(r.with_producers(&log, |s| s.len()), 1);

        let tp = TopicPartition::new("t", 0);
        r.remove_partition(&tp).unwrap();
        assert!(r.log("t", 0).is_none());
        // the same partition again (a topic recreated under its name)
        create(&r, "t", 2, 1);
        let log = r.log("t", 0).unwrap();
        assert!(r.with_producers(&log, |s| s.is_empty()));
    }

    #[test]
    fn a_missing_log_is_a_storage_error_only_for_a_known_partition_that_failed() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        r.logs()
            .record_failed(&TopicPartition::new("t", 1), "unreadable".to_string());
        let t = topic("t", 2);
        assert_eq!(
            r.missing_log_error(Some(&t), 1),
            ErrorCode::KafkaStorageError
        );
        for (known, partition) in [(Some(&t), 0), (None, 1), (Some(&topic("t", 1)), 1)] {
            assert_eq!(
                r.missing_log_error(known, partition),
                ErrorCode::UnknownTopicOrPartition,
                "{known:?} partition {partition}"
            );
        }
    }
}
