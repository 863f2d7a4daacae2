//! [`QuorumController`]: the controller beside each node's metadata raft.
//!
//! On the raft leader a request goes through one pipeline, one request at
//! a time (a `tokio::sync::Mutex` held from decision to apply):
//!
//! 1. confirm leadership with a quorum and wait until this node has applied
//!    everything committed so far (openraft's `ensure_linearizable`, which
//!    covers the leader's own first entry of its term, so entries of earlier
//!    leaders are in the image);
//! 2. run weir-metadata's pure decision on that image;
//! 3. propose the records as one batch and wait until it is committed and
//!    applied here;
//! 4. answer.
//!
//! Because the next request starts only after the previous batch is in the
//! image, two creates of one topic cannot both pass the existence check.
//! Anywhere else the answer is NOT_CONTROLLER with the leader this node
//! knows of. The whole pipeline is bounded by `request_timeout`; a request
//! that runs out answers REQUEST_TIMED_OUT (its batch may or may not have
//! committed, as with Kafka).
//!
//! The controller's soft state (sessions, placement seed) starts afresh
//! every time this node becomes leader in a new term. Time is the caller's
//! `now_ms`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;
use tokio::sync::Mutex;
use weir_metadata::controller::{
    AlterPartition, Controller, ControllerConfig, ElectionResult, ElectionType, Heartbeat,
    HeartbeatReply, NewPartitions, NewTopic, OngoingReassignment, Reassignment, ReassignmentResult,
    Registration, Rejection, alter_topic_configs, delete_acls, ongoing_reassignments,
};
use weir_metadata::image::TOPIC_RESOURCE;
use weir_metadata::{MetadataImage, Partition};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::metadata_record::MetadataRecord;

use crate::batch::encode_batch;
use crate::image::ImageReader;
use crate::metrics::{ControllerCounters, ControllerMetricsSnapshot};

/// Default bound on one request, decision to apply.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request was not done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// This node is not the active controller; `leader` is the one it knows.
    #[error("not the controller (leader {leader:?})")]
    NotController { leader: Option<u64> },
    /// The decision refused the request.
    #[error("{}: {}", .0.code.name(), .0.message)]
    Rejected(Rejection),
    /// The request ran past its deadline; its records may have committed.
    #[error("the request timed out")]
    TimedOut,
    /// The batch committed but did not apply (every node skipped it).
    #[error("batch at index {index} was skipped: {reason}")]
    Skipped { index: u64, reason: String },
    /// Raft stopped or failed.
    #[error("metadata raft stopped: {0}")]
    Stopped(String),
}

impl ControllerError {
    /// The Kafka error code to answer with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ControllerError::NotController { .. } => ErrorCode::NotController,
            ControllerError::Rejected(r) => r.code,
            ControllerError::TimedOut => ErrorCode::RequestTimedOut,
            ControllerError::Skipped { .. } | ControllerError::Stopped(_) => {
                ErrorCode::UnknownServerError
            }
        }
    }
}

impl From<Rejection> for ControllerError {
    fn from(r: Rejection) -> Self {
        ControllerError::Rejected(r)
    }
}

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct QuorumControllerConfig {
    pub controller: ControllerConfig,
    /// Mixed with the term into the seed of placement and topic ids.
    pub seed: u64,
    /// Bound on one request.
    pub request_timeout: Duration,
    /// Applied batches kept for broker-only nodes that fetch the metadata
    /// log; one further behind loads a snapshot of the image instead.
    pub retained_batches: usize,
}

impl Default for QuorumControllerConfig {
    fn default() -> Self {
        QuorumControllerConfig {
            controller: ControllerConfig::default(),
            seed: 0,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            retained_batches: crate::image::DEFAULT_RETAINED_BATCHES,
        }
    }
}

/// The decision state of the term this node leads.
struct Active {
    term: Option<u64>,
    controller: Controller,
}

struct Inner {
    node_id: u64,
    raft: weir_raft::Raft,
    images: ImageReader,
    config: QuorumControllerConfig,
    /// Held from a decision until its batch is applied: decisions are
    /// serialized and each sees the image of the one before.
    active: Mutex<Active>,
    counters: ControllerCounters,
    /// Heartbeats as they arrive (broker id to its epoch and the arrival
    /// time), before their decision waits for the quorum: each decision
    /// renews those sessions first (`Controller::heard_from`).
    heard: std::sync::Mutex<BTreeMap<i32, (i64, u64)>>,
}

/// A request's decision: given the controller and the image at `offset`,
/// the answer and the records to commit before giving it.
type Decided<T> = Result<(T, Vec<MetadataRecord>), Rejection>;

/// The controller of one node; cloning shares it.
#[derive(Clone)]
pub struct QuorumController {
    inner: Arc<Inner>,
}

impl QuorumController {
    /// The controller of node `node_id`, proposing through `raft` and
    /// reading `images` (the reader of the state machine `raft` applies to).
    pub fn new(
        node_id: u64,
        raft: weir_raft::Raft,
        images: ImageReader,
        config: QuorumControllerConfig,
    ) -> Self {
        let controller = Controller::new(config.controller.clone(), config.seed);
        QuorumController {
            inner: Arc::new(Inner {
                node_id,
                raft,
                images,
                config,
                active: Mutex::new(Active {
                    term: None,
                    controller,
                }),
                counters: ControllerCounters::default(),
                heard: std::sync::Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// The raft leader this node knows of: the active controller.
    pub fn leader(&self) -> Option<u64> {
        self.inner.raft.metrics().borrow().current_leader
    }

    /// Whether this node is the active controller as far as it knows.
    pub fn is_active(&self) -> bool {
        self.leader() == Some(self.inner.node_id)
    }

    /// BrokerRegistration: the broker's epoch.
    pub async fn register_broker(
        &self,
        req: Registration,
        now_ms: u64,
    ) -> Result<i64, ControllerError> {
        self.decide(move |c, image, _| c.register_broker(image, &req, now_ms))
            .await
    }

    /// BrokerHeartbeat. The broker is caught up when its
    /// `current_metadata_offset` reaches the index of the last applied batch.
    pub async fn heartbeat(
        &self,
        hb: Heartbeat,
        now_ms: u64,
    ) -> Result<HeartbeatReply, ControllerError> {
        self.inner
            .heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(hb.broker_id)
            .and_modify(|(epoch, at)| {
                if *epoch != hb.broker_epoch || *at < now_ms {
                    (*epoch, *at) = (hb.broker_epoch, now_ms);
                }
            })
            .or_insert((hb.broker_epoch, now_ms));
        self.decide(move |c, image, offset| {
            let reply = c.heartbeat(image, &hb, offset, now_ms)?;
            let records = reply.records.clone();
            Ok((reply, records))
        })
        .await
    }

    /// CreateTopics for one topic: its id.
    pub async fn create_topic(&self, topic: NewTopic) -> Result<Uuid, ControllerError> {
        self.decide(move |c, image, _| c.create_topic(image, &topic))
            .await
    }

    /// CreateTopics with `validate_only`: the same decision as
    /// [`create_topic`](Self::create_topic) on the same image, but nothing
    /// is committed; the id is the one the topic would have had.
    pub async fn validate_topic(&self, topic: NewTopic) -> Result<Uuid, ControllerError> {
        self.decide(move |c, image, _| {
            c.create_topic(image, &topic)
                .map(|(id, _)| (id, Vec::new()))
        })
        .await
    }

    /// DeleteTopics for one topic.
    pub async fn delete_topic(&self, name: String) -> Result<(), ControllerError> {
        self.decide(move |c, image, _| Ok(((), c.delete_topic(image, &name)?)))
            .await
    }

    /// CreatePartitions for one topic.
    pub async fn create_partitions(&self, req: NewPartitions) -> Result<(), ControllerError> {
        self.decide(move |c, image, _| Ok(((), c.create_partitions(image, &req)?)))
            .await
    }

    /// CreatePartitions with `validate_only`: the same decision, nothing
    /// committed.
    pub async fn validate_partitions(&self, req: NewPartitions) -> Result<(), ControllerError> {
        self.decide(move |c, image, _| {
            c.create_partitions(image, &req)?;
            Ok(((), Vec::new()))
        })
        .await
    }

    /// Changes a topic's config overrides: `changes` maps a key to its new
    /// value (`None` removes it), applied to the overrides in the image the
    /// decision runs on; keys not named stay as they are. The records are
    /// [`weir_metadata::controller::alter_topic_configs`]'s for the result.
    /// With `validate_only` the same decision, nothing committed.
    pub async fn alter_topic_configs(
        &self,
        topic: String,
        changes: BTreeMap<String, Option<String>>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        self.decide(move |_, image, _| {
            let mut configs = image
                .configs(TOPIC_RESOURCE, &topic)
                .cloned()
                .unwrap_or_default();
            for (name, value) in changes {
                match value {
                    Some(v) => configs.insert(name, v),
                    None => configs.remove(&name),
                };
            }
            let records = alter_topic_configs(image, &topic, &configs)?;
            Ok(((), if validate_only { Vec::new() } else { records }))
        })
        .await
    }

    /// CreateAcls: one decision and one batch for the whole request, one
    /// result per ACL (see weir-metadata's `controller::acls`).
    pub async fn create_acls(
        &self,
        acls: Vec<weir_acl::AclBinding>,
    ) -> Result<Vec<Result<(), Rejection>>, ControllerError> {
        self.decide(move |c, image, _| {
            let created = c.create_acls(image, &acls);
            Ok((created.results, created.records))
        })
        .await
    }

    /// DeleteAcls: one decision and one batch for the whole request; per
    /// filter, the ACLs it deleted.
    pub async fn delete_acls(
        &self,
        filters: Vec<weir_acl::AclBindingFilter>,
    ) -> Result<Vec<Vec<weir_acl::AclBinding>>, ControllerError> {
        self.decide(move |_, image, _| {
            let deletion = delete_acls(image, &filters)?;
            Ok((deletion.deleted, deletion.records))
        })
        .await
    }

    /// AlterUserScramCredentials: one decision and one batch for the whole
    /// request, one result per user named (see weir-metadata's
    /// `controller::scram`).
    pub async fn alter_scram_credentials(
        &self,
        deletions: Vec<weir_metadata::scram::Deletion>,
        upsertions: Vec<weir_metadata::scram::Upsertion>,
    ) -> Result<Vec<(String, Result<(), weir_metadata::scram::Refusal>)>, ControllerError> {
        self.decide(move |_, image, _| {
            let a =
                weir_metadata::controller::alter_scram_credentials(image, &deletions, &upsertions);
            Ok((a.results, a.records))
        })
        .await
    }

    /// AlterClientQuotas: one decision and one batch for the whole
    /// request (none with `validate_only`), one result per entry (see
    /// weir-metadata's `controller::client_quotas`).
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<weir_metadata::client_quotas::Alteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), weir_metadata::client_quotas::Refusal>>, ControllerError> {
        self.decide(move |_, image, _| {
            let a =
                weir_metadata::controller::alter_client_quotas(image, &alterations, validate_only);
            Ok((a.results, a.records))
        })
        .await
    }

    /// ElectLeaders: one decision for every partition asked (`None`: all),
    /// each with its result; the elections are committed as one batch.
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<ElectionResult>, ControllerError> {
        self.decide(move |c, image, _| {
            if election == ElectionType::Preferred {
                self.inner.counters.preferred_run();
            }
            Ok(c.elect_leaders(image, election, partitions.as_deref()))
        })
        .await
    }

    /// One run of the leader rebalance (`auto.leader.rebalance.enable`):
    /// a preferred election for every partition that can have its first
    /// replica lead again. Returns how many leaders moved.
    pub async fn rebalance_leaders(&self) -> Result<usize, ControllerError> {
        self.decide(|c, image, _| {
            self.inner.counters.preferred_run();
            let records = c.rebalance_leaders(image);
            Ok((records.len(), records))
        })
        .await
    }

    /// AlterPartitionReassignments: one decision for every partition
    /// asked, each with its result; the changes are committed as one batch.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: Vec<Reassignment>,
    ) -> Result<Vec<ReassignmentResult>, ControllerError> {
        self.decide(move |c, image, _| Ok(c.alter_partition_reassignments(image, &reassignments)))
            .await
    }

    /// ListPartitionReassignments: the reassignments in progress among
    /// `topics` (topic, partitions; `None`: all), read on the active
    /// controller's image once it holds everything committed.
    pub async fn list_partition_reassignments(
        &self,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<OngoingReassignment>, ControllerError> {
        self.decide(move |_, image, _| {
            Ok((ongoing_reassignments(image, topics.as_deref()), Vec::new()))
        })
        .await
    }

    /// The controller metrics now (see [`crate::metrics`]).
    pub fn metrics(&self) -> ControllerMetricsSnapshot {
        let image = self.inner.images.current();
        self.inner.counters.snapshot(&image.image, self.is_active())
    }

    /// AlterPartition for one partition: the partition as it now is.
    pub async fn alter_partition(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        req: AlterPartition,
    ) -> Result<Partition, ControllerError> {
        self.decide(move |c, image, _| c.alter_partition(image, broker_id, broker_epoch, &req))
            .await
    }

    /// ControlledShutdown: once answered, the broker leads nothing.
    pub async fn controlled_shutdown(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(), ControllerError> {
        self.decide(move |c, image, _| {
            Ok(((), c.controlled_shutdown(image, broker_id, broker_epoch)?))
        })
        .await
    }

    /// AllocateProducerIds: the first id of a block of
    /// `weir_metadata::controller::PRODUCER_ID_BLOCK_SIZE`.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<i64, ControllerError> {
        self.decide(move |c, image, _| c.allocate_producer_ids(image, broker_id, broker_epoch))
            .await
    }

    /// Session expiry at `now_ms`: fences every broker whose heartbeats
    /// stopped for longer than `broker.session.timeout.ms`, moving its
    /// leadership to the ISR. Returns the brokers fenced.
    pub async fn tick(&self, now_ms: u64) -> Result<Vec<i32>, ControllerError> {
        self.decide(move |c, image, _| {
            let before: Vec<i32> = active_ids(image);
            let records = c.expire_sessions(image, now_ms);
            let fenced = match image.apply(&records) {
                Ok((after, _)) => before
                    .into_iter()
                    .filter(|id| !after.is_active(*id))
                    .collect(),
                Err(_) => Vec::new(),
            };
            Ok((fenced, records))
        })
        .await
    }

    /// Runs `decide` in the pipeline of the module doc.
    async fn decide<T>(
        &self,
        decide: impl FnOnce(&mut Controller, &MetadataImage, i64) -> Decided<T>,
    ) -> Result<T, ControllerError> {
        if let Some(leader) = self.leader().filter(|l| *l != self.inner.node_id) {
            return Err(ControllerError::NotController {
                leader: Some(leader),
            });
        }
        bound(self.inner.config.request_timeout, async {
            let mut active = self.inner.active.lock().await;
            self.ensure_leader().await?;
            let term = self.inner.raft.metrics().borrow().current_term;
            if active.term != Some(term) {
                // A new term of ours: sessions start over (see weir-metadata's
                // controller doc) and placement draws from a new seed.
                let seed = self.inner.config.seed ^ term.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                active.controller = Controller::new(self.inner.config.controller.clone(), seed);
                active.term = Some(term);
            }
            let applied = self.inner.images.current();
            let heard =
                std::mem::take(&mut *self.inner.heard.lock().unwrap_or_else(|p| p.into_inner()));
            for (broker, (epoch, at)) in heard {
                active
                    .controller
                    .heard_from(&applied.image, broker, epoch, at);
            }
            let offset = i64::try_from(applied.index).unwrap_or(i64::MAX);
            let (answer, records) = decide(&mut active.controller, &applied.image, offset)?;
            if !records.is_empty() {
                self.propose(&records).await?;
                self.inner.counters.committed(&records);
            }
            Ok(answer)
        })
        .await
    }

    /// Confirms leadership with a quorum and waits for this node's image to
    /// hold everything committed.
    async fn ensure_leader(&self) -> Result<(), ControllerError> {
        match self.inner.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(e) => match e.forward_to_leader::<BasicNode>() {
                Some(fwd) => Err(ControllerError::NotController {
                    leader: fwd.leader_id,
                }),
                None => match e {
                    openraft::error::RaftError::APIError(_) => {
                        Err(ControllerError::NotController { leader: None })
                    }
                    openraft::error::RaftError::Fatal(f) => {
                        Err(ControllerError::Stopped(f.to_string()))
                    }
                },
            },
        }
    }

    /// Commits `records` as one batch and checks that it applied.
    async fn propose(&self, records: &[MetadataRecord]) -> Result<(), ControllerError> {
        let payload = encode_batch(records)
            .map_err(|e| ControllerError::Stopped(format!("records do not encode: {e}")))?;
        let index = match self.inner.raft.client_write(payload).await {
            Ok(resp) => resp.data,
            Err(e) => {
                return Err(match e.forward_to_leader::<BasicNode>() {
                    Some(fwd) => ControllerError::NotController {
                        leader: fwd.leader_id,
                    },
                    None => ControllerError::Stopped(e.to_string()),
                });
            }
        };
        match self.inner.images.rejection(index) {
            Some(reason) => Err(ControllerError::Skipped { index, reason }),
            None => {
                debug_assert!(self.inner.images.current().index >= index);
                Ok(())
            }
        }
    }
}

fn active_ids(image: &MetadataImage) -> Vec<i32> {
    image
        .brokers()
        .filter(|b| b.is_active())
        .map(|b| b.id)
        .collect()
}

async fn bound<T>(
    timeout: Duration,
    f: impl Future<Output = Result<T, ControllerError>>,
) -> Result<T, ControllerError> {
    tokio::time::timeout(timeout, f)
        .await
        .unwrap_or(Err(ControllerError::TimedOut))
}
