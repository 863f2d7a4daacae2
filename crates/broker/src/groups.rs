//! Glue between the pure group coordinator (`weir-group`) and the broker:
//! it owns the [`GroupCoordinator`], parks JoinGroup/SyncGroup requests
//! until their answer comes out of the state machine, appends the
//! coordinator's records to `__consumer_offsets` through the normal log
//! (so storage recovery covers them) and replays that topic on start.
//!
//! The coordinator is sharded by `__consumer_offsets` partition, as
//! Kafka's: one [`GroupCoordinator`] per partition, each behind its own
//! lock, so requests on groups of different partitions never wait on each
//! other.
//!
//! Invariants, per partition: a call that may append holds the shard's
//! writer lock from its decision until its appends' outcomes are reported,
//! so records reach the log in the order the state machine produced them
//! and each outcome is reported before the next writing call is decided (a
//! commit is never visible before it is in the log); the shard's state lock
//! is never held across an append or fsync, so calls that write nothing
//! (Heartbeat, OffsetFetch, DescribeGroups, ListGroups) never wait on the
//! disk; a response that follows an append in an output list is sent only
//! after that append's outcome is known.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{oneshot, watch};
use weir_group::{
    AppendOutcome, GroupConfig, GroupCoordinator, JoinResponse, LogPosition, OffsetsRecord, Output,
    PartitionStatus, Response, SyncResponse, TxnProducer,
};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::records::{
    BatchIter, Compression, ControlRecordType, DecompressLimits, RecordBatchBuilder,
};

use crate::broker::{Broker, CreateTopicError};
use crate::config::BrokerConfig;
use crate::producer_state::{BatchMeta, last_seq};

mod gate;
mod reads;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The client id whose Produce requests may write to internal topics
/// (Kafka's `AdminUtils.ADMIN_CLIENT_ID`).
pub const ADMIN_CLIENT_ID: &str = "__admin_client";

/// Whether `topic` is an internal topic the broker manages itself
/// (reported `is_internal` in Metadata, refused to client writes and
/// administrative changes): Kafka's `Topic.isInternal`.
pub fn is_internal_topic(topic: &str) -> bool {
    topic == OFFSETS_TOPIC || topic == crate::transactions::TRANSACTION_STATE_TOPIC
}

/// The error of a client Produce to an internal topic, as Kafka's
/// ReplicaManager answers it (INVALID_TOPIC_EXCEPTION), unless the client
/// is Kafka's admin client id, which may write there.
pub fn internal_produce_error(topic: &str, client_id: &str) -> Option<(ErrorCode, String)> {
    (is_internal_topic(topic) && client_id != ADMIN_CLIENT_ID).then(|| {
        (
            ErrorCode::InvalidTopicException,
            format!("Cannot append to internal topic {topic}"),
        )
    })
}

/// How often the timer task checks the coordinator's next deadline.
const TIMER_POLL: Duration = Duration::from_millis(100);

/// Bytes read from `__consumer_offsets` per step while loading.
const LOAD_CHUNK_BYTES: usize = 1 << 20;

/// Why writing to `__consumer_offsets` failed.
#[derive(Debug, thiserror::Error)]
pub enum GroupsError {
    #[error("cannot create {OFFSETS_TOPIC}: {0}")]
    CreateTopic(String),
    #[error("{OFFSETS_TOPIC} partition {0} is not available")]
    MissingPartition(i32),
    #[error("cannot build a record batch: {0}")]
    Build(String),
    #[error("append to {OFFSETS_TOPIC} failed: {0}")]
    Append(#[from] weir_storage::StorageError),
    #[error("this broker does not lead {OFFSETS_TOPIC} partition {0}")]
    NotLeader(i32),
    #[error("producer {producer_id} epoch {epoch} is older than its current epoch {current}")]
    FencedProducer {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
}

/// The broker's group coordinator, sharded by `__consumer_offsets`
/// partition, and its parked requests.
///
/// Always true: shard `p` holds exactly the groups of partition `p`
/// (`partition_for(group_id) == p`), and its coordinator owns no other
/// partition; `shards.len()` is the partition count of the topic.
pub struct Groups {
    shards: Vec<Shard>,
    /// A shard owning no partition (every request NOT_COORDINATOR), for a
    /// partition outside `shards`.
    outside: Shard,
    /// The settings shared by every shard (each shard's coordinator has its
    /// own member id seed).
    config: GroupConfig,
    next_token: AtomicU64,
    /// True once `__consumer_offsets` exists.
    topic_ready: AtomicBool,
    /// `offsets.topic.segment.bytes`, used when creating the topic.
    segment_bytes: i64,
    /// Holds the appends and loads of chosen partitions (tests of a
    /// stalled disk).
    gate: gate::IoGate,
}

/// The groups of one `__consumer_offsets` partition.
///
/// Lock order: `writer`, then `coord`, then `waiters`. `coord` is held
/// only to decide a call or to report an append's outcome, never across an
/// append or fsync, so calls that write nothing (Heartbeat, OffsetFetch,
/// DescribeGroups, ListGroups) never wait on the disk.
struct Shard {
    /// Held by a call that may append from before its decision until the
    /// outcomes of its appends are reported: this partition's records
    /// reach the log in the order they were decided, and the next writing
    /// call is decided on a state that knows those outcomes (as the
    /// coordinator's `append_completed` requires).
    writer: Mutex<()>,
    coord: Mutex<GroupCoordinator>,
    /// Parked JoinGroup/SyncGroup requests of this partition's groups.
    waiters: Mutex<HashMap<u64, oneshot::Sender<Response>>>,
}

impl Shard {
    fn new(coord: GroupCoordinator) -> Self {
        Shard {
            writer: Mutex::new(()),
            coord: Mutex::new(coord),
            waiters: Mutex::new(HashMap::new()),
        }
    }
}

/// A parked request: the receiver yields the coordinator's answer.
pub struct Parked {
    pub token: u64,
    partition: i32,
    rx: oneshot::Receiver<Response>,
}

/// Locks `m`, recovering a poisoned lock (the state machine never panics
/// half way through a call on valid input).
fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An integer broker setting: explicit, else its default from the config
/// table (`configdef`); `fallback` only for a name the table lacks.
fn setting(c: &BrokerConfig, name: &str, fallback: i64) -> i64 {
    c.integer(name).unwrap_or(fallback)
}

/// The coordinator settings from the broker configuration.
pub fn group_config(b: &BrokerConfig) -> GroupConfig {
    let d = GroupConfig::default();
    let clamp_i32 = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    GroupConfig {
        offsets_topic_partitions: clamp_i32(setting(
            b,
            "offsets.topic.num.partitions",
            i64::from(d.offsets_topic_partitions),
        ))
        .max(1),
        min_session_timeout_ms: clamp_i32(setting(
            b,
            "group.min.session.timeout.ms",
            i64::from(d.min_session_timeout_ms),
        )),
        max_session_timeout_ms: clamp_i32(setting(
            b,
            "group.max.session.timeout.ms",
            i64::from(d.max_session_timeout_ms),
        )),
        initial_rebalance_delay_ms: clamp_i32(setting(
            b,
            "group.initial.rebalance.delay.ms",
            i64::from(d.initial_rebalance_delay_ms),
        ))
        .max(0),
        new_member_join_timeout_ms: d.new_member_join_timeout_ms,
        max_group_size: usize::try_from(setting(b, "group.max.size", d.max_group_size as i64))
            .unwrap_or(d.max_group_size)
            .max(1),
        offsets_retention_ms: b
            .integer("offsets.retention.minutes")
            .map_or(d.offsets_retention_ms, |m| m.max(1).saturating_mul(60_000)),
        offsets_retention_check_interval_ms: setting(
            b,
            "offsets.retention.check.interval.ms",
            d.offsets_retention_check_interval_ms,
        )
        .max(1),
        max_metadata_bytes: usize::try_from(setting(
            b,
            "offset.metadata.max.bytes",
            d.max_metadata_bytes as i64,
        ))
        .unwrap_or(d.max_metadata_bytes),
        member_id_seed: rand::random(),
        consumer_session_timeout_ms: clamp_i32(setting(
            b,
            "group.consumer.session.timeout.ms",
            i64::from(d.consumer_session_timeout_ms),
        ))
        .max(1),
        consumer_heartbeat_interval_ms: clamp_i32(setting(
            b,
            "group.consumer.heartbeat.interval.ms",
            i64::from(d.consumer_heartbeat_interval_ms),
        ))
        .max(1),
        consumer_assignors: b
            .value("group.consumer.assignors")
            .map(|v| consumer_assignors(&v))
            .filter(|a| !a.is_empty())
            .unwrap_or(d.consumer_assignors),
        consumer_max_size: usize::try_from(setting(
            b,
            "group.consumer.max.size",
            d.consumer_max_size as i64,
        ))
        .unwrap_or(d.consumer_max_size)
        .max(1),
        consumer_migration_policy: b
            .value("group.consumer.migration.policy")
            .and_then(|v| weir_group::MigrationPolicy::parse(&v))
            .unwrap_or(d.consumer_migration_policy),
    }
}

/// `group.consumer.assignors`: short names (`uniform`, `range`) or Kafka's
/// class names, comma-separated; unknown entries are dropped (with a
/// warning).
fn consumer_assignors(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let short = match s {
                "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => "uniform",
                "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => "range",
                other => other,
            };
            let known = weir_group::Assignor::parse(short).is_some();
            if !known {
                tracing::warn!("group.consumer.assignors: unknown assignor {s}, ignored");
            }
            known.then(|| short.to_string())
        })
        .collect()
}

/// Nanoseconds since the first call, from a monotonic clock: the group
/// coordinator's assignment clock (weir_consumer_group_assignment_seconds).
fn monotonic_nanos() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Groups {
    /// Builds one coordinator shard per `__consumer_offsets` partition and,
    /// when the topic exists, replays every partition into its shard. An
    /// existing topic's partition count wins over
    /// `offsets.topic.num.partitions` (group placement depends on it).
    pub fn open(b: &Broker) -> Groups {
        let mut config = group_config(&b.config);
        let existing = b.topic(OFFSETS_TOPIC);
        if let Some(t) = &existing {
            config.offsets_topic_partitions = t.partitions.max(1);
        }
        let partitions = config.offsets_topic_partitions;
        let now = b.now_ms();
        let shards = (0..partitions)
            .map(|p| {
                let mut coord = shard_coordinator(&config, p);
                if b.config.is_cluster() {
                    // A cluster member coordinates the groups of the
                    // offsets partitions it leads, once the image says
                    // which (`follow_leadership`).
                    let _ = coord.unload(p);
                } else if existing.is_some() {
                    let _ = coord.begin_load(p);
                    load_partition(b, &mut coord, p);
                    coord.complete_load(p, now);
                }
                Shard::new(coord)
            })
            .collect();
        let mut nothing = GroupCoordinator::new(config.clone());
        for p in 0..partitions {
            let _ = nothing.unload(p);
        }
        Groups {
            shards,
            outside: Shard::new(nothing),
            config,
            next_token: AtomicU64::new(1),
            topic_ready: AtomicBool::new(existing.is_some()),
            segment_bytes: setting(&b.config, "offsets.topic.segment.bytes", 100 * 1024 * 1024),
            gate: gate::IoGate::default(),
        }
    }

    /// The coordinator settings (those of every shard but the member id
    /// seed).
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition (and shard) of `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        weir_group::partition_for(group_id, self.config.offsets_topic_partitions)
    }

    fn shard(&self, partition: i32) -> &Shard {
        // partition_for is always in range; a partition out of range (a
        // marker on a partition the topic did not have at start) has no
        // groups here: the shard owning nothing answers for it.
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.shards.get(p))
            .unwrap_or(&self.outside)
    }

    /// Locks the shard of `group_id`, for a call that appends nothing
    /// (Heartbeat, OffsetFetch, a describe). Never waits on an append: no
    /// shard lock is held across one. Calls that may append go through
    /// [`Groups::write`].
    pub fn lock(&self, group_id: &str) -> MutexGuard<'_, GroupCoordinator> {
        relock(&self.shard(self.partition_for(group_id)).coord)
    }

    /// Locks the shard of `partition` (see [`Groups::lock`]).
    pub fn lock_partition(&self, partition: i32) -> MutexGuard<'_, GroupCoordinator> {
        relock(&self.shard(partition).coord)
    }

    /// Runs `f` on each shard in partition order, one shard locked at a
    /// time (broker-wide reads: ListGroups, metrics, the console).
    pub fn for_each_shard(&self, mut f: impl FnMut(&GroupCoordinator)) {
        for s in &self.shards {
            f(&relock(&s.coord));
        }
    }

    /// A call that may append, on the shard of `group_id`: `decide` runs
    /// under the shard lock and returns its result and the coordinator's
    /// outputs, which are then performed with the shard lock released (see
    /// [`Groups::perform`]). Blocks (off the async workers) while an earlier
    /// writing call of the same partition is appending.
    pub fn write<R>(
        &self,
        b: &Broker,
        group_id: &str,
        decide: impl FnOnce(&mut GroupCoordinator) -> (R, Vec<Output>),
    ) -> (R, AppendFailures) {
        self.write_partition(b, self.partition_for(group_id), decide)
    }

    /// [`Groups::write`] on the shard of `partition`.
    pub fn write_partition<R>(
        &self,
        b: &Broker,
        partition: i32,
        decide: impl FnOnce(&mut GroupCoordinator) -> (R, Vec<Output>),
    ) -> (R, AppendFailures) {
        let shard = self.shard(partition);
        crate::handler::blocking(|| {
            self.decide_and_perform(b, shard, relock(&shard.writer), decide)
        })
    }

    /// Decides under `shard`'s state lock and performs the outputs with it
    /// released; `_writer` (the shard's writer lock) is held throughout.
    fn decide_and_perform<R>(
        &self,
        b: &Broker,
        shard: &Shard,
        _writer: MutexGuard<'_, ()>,
        decide: impl FnOnce(&mut GroupCoordinator) -> (R, Vec<Output>),
    ) -> (R, AppendFailures) {
        let (r, out) = decide(&mut relock(&shard.coord));
        let failures = self.perform(b, shard, out);
        (r, failures)
    }

    /// Creates `__consumer_offsets` if it does not exist yet. In a cluster
    /// the controller creates it; this only checks that the image has it.
    pub async fn ensure_topic(&self, b: &Broker) -> Result<(), GroupsError> {
        if self.topic_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        if b.config.is_cluster() {
            if b.cluster().topic(OFFSETS_TOPIC).is_none() {
                return Err(GroupsError::CreateTopic(
                    "not in the cluster metadata yet".to_string(),
                ));
            }
            self.topic_ready.store(true, Ordering::Release);
            return Ok(());
        }
        let _admin = b.admin.lock().await;
        if b.topic(OFFSETS_TOPIC).is_none() {
            let partitions = self.config.offsets_topic_partitions;
            let configs = BTreeMap::from([
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("compression.type".to_string(), "producer".to_string()),
                ("segment.bytes".to_string(), self.segment_bytes.to_string()),
            ]);
            let r = crate::handler::blocking(|| {
                b.create_topic(OFFSETS_TOPIC, partitions, 1, configs, false)
            });
            match r {
                Ok(_) | Err(CreateTopicError::Exists(_)) => {}
                Err(e) => return Err(GroupsError::CreateTopic(e.to_string())),
            }
        }
        self.topic_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Coordinates the groups of exactly the `__consumer_offsets`
    /// partitions this broker leads in the cluster view: a partition it
    /// starts leading is replayed from its log, one it stopped leading is
    /// dropped (its parked requests get NOT_COORDINATOR). Called by the
    /// cluster wiring after each metadata change, once the hosted logs are
    /// in place ([`Broker::reconcile_hosted`]); a no-op when nothing moved.
    ///
    /// A partition is replayed into a coordinator of its own, under its
    /// shard's writer lock only: meanwhile the partition is Loading in the
    /// shard, whose state lock stays free, so requests on its groups are
    /// answered COORDINATOR_LOAD_IN_PROGRESS (calls that may append wait for
    /// the writer lock), and other partitions are not involved at all.
    pub fn follow_leadership(&self, b: &Broker) {
        let snap = b.cluster();
        let me = b.config.node_id;
        for (p, shard) in (0..).zip(&self.shards) {
            let leads = snap
                .partition(OFFSETS_TOPIC, p)
                .is_some_and(|v| v.leader == me);
            let _writer = relock(&shard.writer);
            let mut coord = relock(&shard.coord);
            let out = match (leads, coord.partition_status(p)) {
                (true, PartitionStatus::NotOwned) => {
                    let out = coord.begin_load(p);
                    drop(coord);
                    // only answers to parked requests: nothing is appended
                    self.perform(b, shard, out);
                    let mut loaded = shard_coordinator(&self.config, p);
                    let _ = loaded.begin_load(p);
                    self.gate.pass(p);
                    load_partition(b, &mut loaded, p);
                    loaded.complete_load(p, b.now_ms());
                    if relock(&shard.coord).adopt_load(p, loaded) {
                        tracing::info!(partition = p, "coordinating the groups of {OFFSETS_TOPIC}");
                    }
                    continue;
                }
                (false, PartitionStatus::Active | PartitionStatus::Loading) => {
                    tracing::info!(
                        partition = p,
                        "no longer coordinating the groups of {OFFSETS_TOPIC}"
                    );
                    coord.unload(p)
                }
                _ => continue,
            };
            drop(coord);
            // only answers to parked requests: nothing is appended
            self.perform(b, shard, out);
        }
    }

    /// Registers a waiter for a request on `group_id`; pass its token to
    /// `join_group` / `sync_group`.
    pub fn park(&self, group_id: &str) -> Parked {
        let partition = self.partition_for(group_id);
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        relock(&self.shard(partition).waiters).insert(token, tx);
        Parked {
            token,
            partition,
            rx,
        }
    }

    /// Waits for the answer of a parked request. Returns None when the
    /// broker shuts down first (or the answer was lost).
    pub async fn wait(
        &self,
        parked: Parked,
        mut shutdown: watch::Receiver<bool>,
    ) -> Option<Response> {
        let token = parked.token;
        let r = tokio::select! {
            r = parked.rx => r.ok(),
            _ = shutdown.wait_for(|s| *s) => None,
        };
        relock(&self.shard(parked.partition).waiters).remove(&token);
        r
    }

    /// Performs one call's outputs in order, with the shard lock released
    /// (the caller holds the shard's `writer`). After each append the
    /// coordinator learns its outcome (`append_completed`, under the shard
    /// lock again): commits and deletions take effect only when durable,
    /// and answers that depended on a failed write are sent as that write's
    /// error (Kafka's mapping of append errors, see [`append_error_code`]).
    /// A response that follows an append in the list is sent only once that
    /// append's outcome is known. Returns the failed appends by partition.
    fn perform(&self, b: &Broker, shard: &Shard, outputs: Vec<Output>) -> AppendFailures {
        let mut failures = AppendFailures::default();
        let mut failed_tokens: HashMap<u64, ErrorCode> = HashMap::new();
        let mut queue: VecDeque<Output> = outputs.into();
        while let Some(o) = queue.pop_front() {
            match o {
                Output::Append {
                    partition,
                    records,
                    write,
                    transaction,
                } => {
                    debug_assert!(
                        std::ptr::eq(self.shard(partition), shard),
                        "a shard appends only to its own partition"
                    );
                    self.gate.pass(partition);
                    let result = append(b, partition, &records, transaction);
                    if let Err(e) = &result {
                        tracing::warn!(partition, "group coordinator append failed: {e}");
                    }
                    let outcome = match &result {
                        Ok(at) => {
                            if !records.is_empty() {
                                failures.appended.insert(partition, *at);
                            }
                            AppendOutcome::Appended {
                                base_offset: at.base_offset,
                            }
                        }
                        Err(_) => AppendOutcome::Failed,
                    };
                    let done = relock(&shard.coord).append_completed(write, outcome, b.now_ms());
                    if let Err(e) = result {
                        let code = append_error_code(&e);
                        failures.by_partition.entry(partition).or_insert(code);
                        failed_tokens.extend(done.failed_tokens.iter().map(|&t| (t, code)));
                    }
                    for o in done.outputs.into_iter().rev() {
                        queue.push_front(o);
                    }
                }
                Output::Respond { token, response } => {
                    let response = match failed_tokens.get(&token) {
                        Some(&code) => failed_response(response, code),
                        None => response,
                    };
                    let tx = relock(&shard.waiters).remove(&token);
                    if let Some(tx) = tx {
                        // the requester may have gone away; nothing to do then
                        let _ = tx.send(response);
                    }
                }
            }
        }
        failures
    }

    /// A transaction marker of `producer_id` landed on `partition` of
    /// `__consumer_offsets` (called by the WriteTxnMarkers handler once the
    /// marker is appended): on COMMIT (`committed`) the producer's pending
    /// transactional offsets of that partition's groups become the committed
    /// ones, on ABORT they are dropped. Ordered after the partition's
    /// writing call in progress, if any (its `writer`).
    ///
    /// Replay applies the markers it reads the same way, so a marker that
    /// was already replayed (a load between its append and this call)
    /// finds nothing pending and changes nothing.
    pub fn complete_txn(&self, broker: &Broker, partition: i32, producer_id: i64, committed: bool) {
        let (done, _) = self.write_partition(broker, partition, |coord| {
            (
                coord.complete_txn(partition, producer_id, committed),
                Vec::new(),
            )
        });
        tracing::debug!(
            partition,
            producer_id,
            committed,
            groups = done.groups,
            offsets_committed = done.committed,
            offsets_dropped = done.dropped,
            node = broker.config.node_id,
            "transaction marker on {OFFSETS_TOPIC}"
        );
    }

    /// The partitions whose timers are due at `now_ms` (a shard with no
    /// deadline yet is due: its first tick schedules the offset expiry
    /// check), and whether any shard has a group.
    fn due(&self, now_ms: i64) -> (Vec<i32>, bool) {
        let mut due = Vec::new();
        let mut has_groups = false;
        for (p, s) in (0..).zip(&self.shards) {
            let coord = relock(&s.coord);
            if coord.next_deadline().is_none_or(|t| t <= now_ms) {
                due.push(p);
            }
            has_groups |= !coord.list_groups(&[], &[]).is_empty();
        }
        (due, has_groups)
    }

    /// Runs the timers due at `now_ms`, shard by shard, and performs their
    /// outputs.
    pub fn tick(&self, b: &Broker, now_ms: i64) {
        self.tick_partitions(b, now_ms, &self.due(now_ms).0, true);
    }

    /// Runs the timers of `partitions` that are due at `now_ms`. Without
    /// `wait`, a partition whose writing call is in progress (an append
    /// that may be waiting on the disk) is skipped: the timer loop comes
    /// back to it at its next turn, and the other partitions' timers do
    /// not wait on that disk.
    fn tick_partitions(&self, b: &Broker, now_ms: i64, partitions: &[i32], wait: bool) {
        for &p in partitions {
            let shard = self.shard(p);
            crate::handler::blocking(|| {
                let writer = match shard.writer.try_lock() {
                    Ok(w) => w,
                    Err(TryLockError::Poisoned(w)) => w.into_inner(),
                    Err(TryLockError::WouldBlock) if !wait => return,
                    Err(TryLockError::WouldBlock) => relock(&shard.writer),
                };
                self.decide_and_perform(b, shard, writer, |coord| {
                    let due = coord.next_deadline().is_none_or(|t| t <= now_ms);
                    ((), if due { coord.tick(now_ms) } else { Vec::new() })
                });
            });
        }
    }

    /// Holds every append to `partition` of `__consumer_offsets` before it
    /// reaches the log, and every load of it before its replay, until
    /// [`Groups::resume_io`]: a stalled disk, deterministically, for tests.
    #[doc(hidden)]
    pub fn pause_io(&self, partition: i32) {
        self.gate.pause(partition);
    }

    /// Lets the appends and loads held by [`Groups::pause_io`] go on.
    #[doc(hidden)]
    pub fn resume_io(&self, partition: i32) {
        self.gate.resume(partition);
    }

    /// Appends and loads of `partition` held by [`Groups::pause_io`] now.
    #[doc(hidden)]
    pub fn held_io(&self, partition: i32) -> usize {
        self.gate.held(partition)
    }
}

/// A coordinator for the shard of `partition`: it owns that partition
/// only (Active, with no groups yet) and has the shard's settings.
fn shard_coordinator(config: &GroupConfig, partition: i32) -> GroupCoordinator {
    let mut coord = GroupCoordinator::new(shard_config(config, partition));
    coord.set_assignment_clock(monotonic_nanos);
    for q in (0..config.offsets_topic_partitions).filter(|&q| q != partition) {
        let _ = coord.unload(q);
    }
    coord
}

/// The settings of the shard of `partition`: its own member id seed, so
/// shards do not hand out the same ids (ids are unique within a shard by
/// its counter, and a group lives in one shard).
fn shard_config(config: &GroupConfig, partition: i32) -> GroupConfig {
    let p = u64::from(partition.unsigned_abs());
    GroupConfig {
        member_id_seed: config
            .member_id_seed
            .wrapping_add(p.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        ..config.clone()
    }
}

/// Appends that failed during one writing call ([`Groups::write`]), with the error code
/// to answer (first failure per `__consumer_offsets` partition), and where
/// the last successful one of each partition landed (what a commit waits
/// to see replicated).
#[derive(Debug, Default)]
pub struct AppendFailures {
    pub by_partition: BTreeMap<i32, ErrorCode>,
    pub appended: BTreeMap<i32, AppendedAt>,
}

/// Where records were appended to a `__consumer_offsets` partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedAt {
    pub base_offset: i64,
    /// One past the last record.
    pub end_offset: i64,
    /// The leader epoch they were appended in (None: no followers).
    pub leader_epoch: Option<i32>,
}

impl AppendFailures {
    pub fn is_empty(&self) -> bool {
        self.by_partition.is_empty()
    }

    /// The error of the first failed partition, if any.
    pub fn first(&self) -> Option<ErrorCode> {
        self.by_partition.values().next().copied()
    }

    pub fn for_partition(&self, partition: i32) -> Option<ErrorCode> {
        self.by_partition.get(&partition).copied()
    }
}

/// The error a group request gets when its `__consumer_offsets` append
/// failed, as Kafka's coordinator maps append errors
/// (`CoordinatorOperationExceptionHelper`): a missing partition is
/// COORDINATOR_NOT_AVAILABLE, a storage error NOT_COORDINATOR (the client
/// looks the coordinator up again), a record too large UNKNOWN_SERVER_ERROR.
pub fn append_error_code(e: &GroupsError) -> ErrorCode {
    let storage = match e {
        GroupsError::CreateTopic(_) | GroupsError::MissingPartition(_) => {
            return ErrorCode::CoordinatorNotAvailable;
        }
        GroupsError::Build(_) => return ErrorCode::UnknownServerError,
        GroupsError::NotLeader(_) => return ErrorCode::NotCoordinator,
        GroupsError::FencedProducer { .. } => return ErrorCode::InvalidProducerEpoch,
        GroupsError::Append(e) => crate::codes::from_storage(e),
    };
    match storage {
        ErrorCode::UnknownTopicOrPartition => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge => ErrorCode::UnknownServerError,
        other => other,
    }
}

fn failed_response(r: Response, e: ErrorCode) -> Response {
    match r {
        Response::Join(j) => Response::Join(JoinResponse {
            error: e,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            members: Vec::new(),
            member_id: j.member_id,
        }),
        Response::Sync(_) => Response::Sync(SyncResponse {
            error: e,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }),
    }
}

/// Appends records as one uncompressed batch and advances the high
/// watermark; returns the offset of the first record. The log's flush
/// policy decides when it is fsynced.
///
/// With `transaction` the batch is a transactional batch of that producer
/// (base sequence 0, as Kafka's coordinator writes it): an epoch older than
/// the one the partition knows for the producer is fenced
/// (INVALID_PRODUCER_EPOCH), and the batch is recorded in the partition's
/// producer state like a produced transactional batch, under that state's
/// lock throughout (the lock order of every such append: producer state,
/// then the log).
fn append(
    b: &Broker,
    partition: i32,
    records: &[OffsetsRecord],
    transaction: Option<TxnProducer>,
) -> Result<AppendedAt, GroupsError> {
    let log = b
        .replicas
        .log(OFFSETS_TOPIC, partition)
        .ok_or(GroupsError::MissingPartition(partition))?;
    if records.is_empty() {
        let end = log.log_end_offset();
        return Ok(AppendedAt {
            base_offset: end,
            end_offset: end,
            leader_epoch: None,
        });
    }
    let now = b.now_ms();
    let mut builder = RecordBatchBuilder::new(Compression::None);
    if let Some(t) = transaction {
        builder = builder
            .producer(t.producer_id, t.producer_epoch, 0)
            .transactional(true);
    }
    for r in records {
        builder
            .push(now, Some(r.key.clone()), r.value.clone(), Vec::new())
            .map_err(|e| GroupsError::Build(e.to_string()))?;
    }
    let batch = builder
        .build()
        .map_err(|e| GroupsError::Build(e.to_string()))?;
    let mut buf = batch.as_bytes().to_vec();
    let do_append =
        |buf: &mut [u8]| -> Result<(weir_storage::AppendInfo, Option<i32>), GroupsError> {
            // A leader with followers stamps its epoch, as for produced
            // batches, and appends only while it leads in that epoch.
            let tp = log.topic_partition();
            let role = b.replicas.append_role(tp);
            let info = b
                .replicas
                .append_in_role(tp, role, |stamp| match stamp {
                    Some(epoch) => log.append_as_leader(buf, now, epoch),
                    None => log.append(buf, now),
                })
                .ok_or(GroupsError::NotLeader(tp.partition))??;
            b.replicas.advance_high_watermark(&log);
            b.replicas.notify_append(&log);
            Ok((info, role.stamp()))
        };
    let (info, leader_epoch) = match transaction {
        None => do_append(&mut buf)?,
        Some(t) => b.replicas.with_producers(&log, |state| {
            if let Some(current) = state.get(t.producer_id).map(|e| e.epoch)
                && t.producer_epoch < current
            {
                return Err(GroupsError::FencedProducer {
                    producer_id: t.producer_id,
                    epoch: t.producer_epoch,
                    current,
                });
            }
            let (info, leader_epoch) = do_append(&mut buf)?;
            let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
            // Opens the producer's transaction on this partition (if not
            // open yet): the partition's last stable offset stays below it
            // until the marker, and an ABORT indexes it in `.txnindex`.
            state.record_data(
                t.producer_id,
                t.producer_epoch,
                Some(BatchMeta {
                    first_seq: 0,
                    last_seq: last_seq(0, count),
                    first_offset: info.base_offset,
                    last_offset: info.last_offset,
                    timestamp: now,
                }),
                true,
            );
            Ok((info, leader_epoch))
        })?,
    };
    Ok(AppendedAt {
        base_offset: info.base_offset,
        end_offset: info.last_offset + 1,
        leader_epoch,
    })
}

/// Replays one partition of `__consumer_offsets` into the coordinator.
/// Unreadable data ends the load of that partition with a warning (what was
/// read so far stays); records the coordinator cannot decode are skipped.
fn load_partition(b: &Broker, coord: &mut GroupCoordinator, partition: i32) {
    let Some(log) = b.replicas.log(OFFSETS_TOPIC, partition) else {
        return;
    };
    let limits = DecompressLimits::default();
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    let mut replayed = 0usize;
    while offset < end {
        let read = match log.read(offset, LOAD_CHUNK_BYTES, end, true) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(partition, offset, "cannot read {OFFSETS_TOPIC}: {e}");
                return;
            }
        };
        let mut data = Vec::with_capacity(read.total_bytes);
        for region in &read.regions {
            match region.read_to_vec() {
                Ok(v) => data.extend_from_slice(&v),
                Err(e) => {
                    tracing::warn!(partition, offset, "cannot read {OFFSETS_TOPIC}: {e}");
                    return;
                }
            }
        }
        let before = offset;
        for batch in BatchIter::new(data) {
            let batch = match batch {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(partition, offset, "bad batch in {OFFSETS_TOPIC}: {e}");
                    return;
                }
            };
            offset = batch.next_offset();
            if batch.next_offset() <= before {
                continue;
            }
            let header = batch.header();
            if batch.is_control() {
                // A transaction's marker completes its pending offsets.
                match batch.control_type(&limits) {
                    Ok(kind @ (ControlRecordType::Commit | ControlRecordType::Abort)) => {
                        let committed = kind == ControlRecordType::Commit;
                        coord.complete_txn(partition, header.producer_id, committed);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(
                            partition,
                            offset,
                            "bad control batch in {OFFSETS_TOPIC}: {e}"
                        )
                    }
                }
                continue;
            }
            let transaction = batch.is_transactional().then_some(header.producer_id);
            let records = match batch.collect_records(&limits) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(partition, offset, "bad batch in {OFFSETS_TOPIC}: {e}");
                    continue;
                }
            };
            for r in records {
                let Some(key) = r.key else { continue };
                let at = LogPosition {
                    offset: header.base_offset + i64::from(r.offset_delta),
                    transaction,
                };
                match coord.replay(at, &key, r.value.as_deref()) {
                    Ok(()) => replayed += 1,
                    Err(e) => tracing::warn!(partition, "skipping {OFFSETS_TOPIC} record: {e}"),
                }
            }
        }
        if offset <= before {
            // no progress (empty read): stop rather than spin
            break;
        }
    }
    if replayed > 0 {
        tracing::info!(
            partition,
            records = replayed,
            "loaded {OFFSETS_TOPIC} partition"
        );
    }
}

/// Runs the coordinator's timers until shutdown.
pub async fn timer_loop(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(TIMER_POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => break,
        }
        let Some(groups) = broker.groups() else {
            continue;
        };
        let now = broker.now_ms();
        let (due, has_groups) = groups.due(now);
        if due.is_empty() {
            continue;
        }
        // Timers only write records for existing groups: create
        // `__consumer_offsets` then, not for a broker nobody used groups on.
        if has_groups && groups.ensure_topic(&broker).await.is_err() {
            continue;
        }
        groups.tick_partitions(&broker, now, &due, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_storage::StorageError;

    /// The coordinator's settings come from the broker's table of
    /// defaults, which agrees with the state machine's own defaults.
    #[test]
    fn default_settings_come_from_the_config_table() {
        let c = BrokerConfig::default();
        for name in [
            "offsets.topic.num.partitions",
            "group.min.session.timeout.ms",
            "group.max.session.timeout.ms",
            "group.initial.rebalance.delay.ms",
            "group.max.size",
            "offsets.retention.minutes",
            "offsets.retention.check.interval.ms",
            "offset.metadata.max.bytes",
            "offsets.topic.segment.bytes",
        ] {
            assert!(c.integer(name).is_some(), "{name} has no default");
        }
        let got = GroupConfig {
            member_id_seed: 0,
            ..group_config(&c)
        };
        assert_eq!(got, GroupConfig::default());
    }

    #[test]
    fn append_errors_map_as_kafka_coordinator_does() {
        let io = || std::io::Error::other("disk gone");
        let cases: Vec<(GroupsError, ErrorCode)> = vec![
            (
                GroupsError::MissingPartition(3),
                ErrorCode::CoordinatorNotAvailable,
            ),
            (
                GroupsError::CreateTopic("no".into()),
                ErrorCode::CoordinatorNotAvailable,
            ),
            (
                GroupsError::Append(StorageError::UnknownLog("x".into())),
                ErrorCode::CoordinatorNotAvailable,
            ),
            (
                GroupsError::Append(StorageError::Io {
                    path: "00000000000000000000.log".into(),
                    source: io(),
                }),
                ErrorCode::NotCoordinator,
            ),
            (
                GroupsError::Append(StorageError::Closed("x".into())),
                ErrorCode::NotCoordinator,
            ),
            (
                GroupsError::Append(StorageError::RecordTooLarge { size: 9, max: 1 }),
                ErrorCode::UnknownServerError,
            ),
            (
                GroupsError::Build("too many".into()),
                ErrorCode::UnknownServerError,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(append_error_code(&e), want, "{e}");
        }
    }
}
