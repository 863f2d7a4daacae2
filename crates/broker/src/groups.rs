//! Glue between the pure group coordinator (`weir-group`) and the broker:
//! it owns the [`GroupCoordinator`], parks JoinGroup/SyncGroup requests
//! until their answer comes out of the state machine, appends the
//! coordinator's records to `__consumer_offsets` through the normal log
//! (so storage recovery covers them) and replays that topic on start.
//!
//! Invariant: the coordinator lock is held while a call's outputs are
//! executed, so records reach the log in the order the state machine
//! produced them, each append's outcome is reported to the coordinator
//! before anything else reads or changes it (a commit is never visible
//! before it is in the log), and a response that follows an append in an
//! output list is sent only after that append succeeded.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
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

/// The broker's group coordinator and its parked requests.
pub struct Groups {
    coord: Mutex<GroupCoordinator>,
    /// Parked JoinGroup/SyncGroup requests by token.
    waiters: Mutex<HashMap<u64, oneshot::Sender<Response>>>,
    next_token: AtomicU64,
    /// True once `__consumer_offsets` exists.
    topic_ready: AtomicBool,
    /// `offsets.topic.segment.bytes`, used when creating the topic.
    segment_bytes: i64,
}

/// A parked request: the receiver yields the coordinator's answer.
pub struct Parked {
    pub token: u64,
    rx: oneshot::Receiver<Response>,
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
    /// Builds the coordinator and, when `__consumer_offsets` exists, replays
    /// every partition of it. An existing topic's partition count wins over
    /// `offsets.topic.num.partitions` (group placement depends on it).
    pub fn open(b: &Broker) -> Groups {
        let mut config = group_config(&b.config);
        let existing = b.topic(OFFSETS_TOPIC);
        if let Some(t) = &existing {
            config.offsets_topic_partitions = t.partitions.max(1);
        }
        let partitions = config.offsets_topic_partitions;
        let mut coord = GroupCoordinator::new(config);
        coord.set_assignment_clock(monotonic_nanos);
        let now = b.now_ms();
        if b.config.is_cluster() {
            // A cluster member coordinates the groups of the offsets
            // partitions it leads, once the image says which
            // (`follow_leadership`).
            for p in 0..partitions {
                let _ = coord.unload(p);
            }
        } else if existing.is_some() {
            for p in 0..partitions {
                let _ = coord.begin_load(p);
                load_partition(b, &mut coord, p);
                coord.complete_load(p, now);
            }
        }
        Groups {
            coord: Mutex::new(coord),
            waiters: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
            topic_ready: AtomicBool::new(existing.is_some()),
            segment_bytes: setting(&b.config, "offsets.topic.segment.bytes", 100 * 1024 * 1024),
        }
    }

    /// Locks the coordinator (a poisoned lock is recovered: the state
    /// machine never panics half way through a call on valid input).
    pub fn lock(&self) -> MutexGuard<'_, GroupCoordinator> {
        self.coord.lock().unwrap_or_else(|p| p.into_inner())
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
            let partitions = self.lock().config().offsets_topic_partitions;
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
    pub fn follow_leadership(&self, b: &Broker) {
        let snap = b.cluster();
        let me = b.config.node_id;
        let mut coord = self.lock();
        let partitions = coord.config().offsets_topic_partitions;
        let now = b.now_ms();
        for p in 0..partitions {
            let leads = snap
                .partition(OFFSETS_TOPIC, p)
                .is_some_and(|v| v.leader == me);
            let status = coord.partition_status(p);
            let out = match (leads, status) {
                (true, PartitionStatus::NotOwned) => {
                    let out = coord.begin_load(p);
                    load_partition(b, &mut coord, p);
                    coord.complete_load(p, now);
                    tracing::info!(partition = p, "coordinating the groups of {OFFSETS_TOPIC}");
                    out
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
            self.execute(b, &mut coord, out);
        }
    }

    /// Registers a waiter; pass its token to `join_group` / `sync_group`.
    pub fn park(&self) -> Parked {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token, tx);
        Parked { token, rx }
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
        self.waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&token);
        r
    }

    /// Performs outputs in order. After each append the coordinator learns
    /// its outcome (`append_completed`): commits and deletions take effect
    /// only when durable, and answers that depended on a failed write are
    /// sent as that write's error (Kafka's mapping of append errors, see
    /// [`append_error_code`]). Returns the failed appends by partition.
    /// Call with the coordinator locked (`coord` is the locked guard).
    pub fn execute(
        &self,
        b: &Broker,
        coord: &mut GroupCoordinator,
        outputs: Vec<Output>,
    ) -> AppendFailures {
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
                    let done = coord.append_completed(write, outcome, b.now_ms());
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
                    let tx = self
                        .waiters
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&token);
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
    /// ones, on ABORT they are dropped.
    ///
    /// Replay applies the markers it reads the same way, so a marker that
    /// was already replayed (a load between its append and this call)
    /// finds nothing pending and changes nothing.
    pub fn complete_txn(&self, broker: &Broker, partition: i32, producer_id: i64, committed: bool) {
        let done = self.lock().complete_txn(partition, producer_id, committed);
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

    /// Runs the coordinator's timers at `now_ms` and performs the outputs.
    pub fn tick(&self, b: &Broker, now_ms: i64) {
        let mut coord = self.lock();
        // no deadline yet: the first tick schedules the offset expiry check
        if coord.next_deadline().is_none_or(|t| t <= now_ms) {
            let out = coord.tick(now_ms);
            if !out.is_empty() {
                let _ = crate::handler::blocking(|| self.execute(b, &mut coord, out));
            }
        }
    }
}

/// Appends that failed during one [`Groups::execute`], with the error code
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
        let (due, has_groups) = {
            let coord = groups.lock();
            (
                coord.next_deadline().is_none_or(|t| t <= now),
                !coord.list_groups(&[], &[]).is_empty(),
            )
        };
        if !due {
            continue;
        }
        // Timers only write records for existing groups: create
        // `__consumer_offsets` then, not for a broker nobody used groups on.
        if has_groups && groups.ensure_topic(&broker).await.is_err() {
            continue;
        }
        groups.tick(&broker, now);
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
