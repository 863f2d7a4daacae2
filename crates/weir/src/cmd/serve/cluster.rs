//! `weir serve` as one broker of a cluster: the control plane (weir-cluster's
//! [`ClusterNode`] on a combined node: metadata raft and controller on the
//! CONTROLLER listener; on a broker-only node a [`MetadataObserver`]
//! fetching the metadata log; broker registration and heartbeats on both)
//! wired to the broker through its two seams:
//!
//! - [`ImageView`]: the broker's [`ClusterView`], answered from the metadata
//!   image this node applies (live brokers, the active controller, each
//!   partition's leader, epoch, replicas, ISR and offline replicas);
//! - [`ForwardingAdmin`]: the broker's [`TopicAdmin`], which sends
//!   CreateTopics, DeleteTopics, CreatePartitions and topic config changes
//!   to the active controller and answers once this node's image shows the
//!   change;
//! - [`follow_image`]: after every applied batch, the broker hosts the
//!   partitions the image assigns it and coordinates the groups of the
//!   `__consumer_offsets` partitions and the transactions of the
//!   `__transaction_state` partitions it leads.
//!
//! See "Running a cluster" in docs/cluster.md.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use weir_broker::cluster::{
    AdminFuture, BrokerNode, ClusterSnapshot, ClusterView, HostedTopic, ListenerEndpoint,
    PartitionView, TopicAdmin, TopicView,
};
use weir_broker::handler::RequestContext;
use weir_broker::handler::configs::{OP_DELETE, OP_SET};
use weir_broker::{Broker, BrokerConfig};
use weir_cluster::client::{ControllerClient, ControllerClientConfig};
use weir_cluster::{BrokerState, ImageReader};
use weir_metadata::MetadataImage;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use weir_protocol::messages::create_topics_request::CreatableTopicConfig;
use weir_protocol::messages::create_topics_response::CreatableTopicResult;
use weir_protocol::messages::delete_topics_response::DeletableTopicResult;
use weir_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use weir_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};

/// Kafka's id of the PLAINTEXT security protocol in broker registrations.
const PLAINTEXT_ID: i16 = 0;

/// Kafka's resource type of topic configs in `ConfigRecord`.
const TOPIC_RESOURCE: i8 = 2;

/// The broker's view of the cluster, from the metadata image. Snapshots are
/// rebuilt only when the image or the active controller changed.
pub struct ImageView {
    images: ImageReader,
    /// The active controller as this node knows it.
    leader: LeaderFn,
    /// This node's inter-broker listener name (see [`snapshot_of`]).
    inter_broker: String,
    cache: Mutex<Option<(SnapshotKey, Arc<ClusterSnapshot>)>>,
}

/// What a snapshot was built from: the image's log index and the active
/// controller.
type SnapshotKey = (u64, Option<u64>);

impl ImageView {
    pub fn new(images: ImageReader, leader: LeaderFn, inter_broker: String) -> ImageView {
        ImageView {
            images,
            leader,
            inter_broker,
            cache: Mutex::new(None),
        }
    }
}

impl ClusterView for ImageView {
    fn snapshot(&self) -> Arc<ClusterSnapshot> {
        let applied = self.images.current();
        let leader = (self.leader)();
        let key = (applied.index, leader);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, snap)) = cache.as_ref()
            && *k == key
        {
            return snap.clone();
        }
        let snap = Arc::new(snapshot_of(
            &applied.image,
            controller_id(&applied.image, leader),
            &self.inter_broker,
        ));
        *cache = Some((key, snap.clone()));
        snap
    }
}

/// Who reads the active controller's id.
pub type LeaderFn = Arc<dyn Fn() -> Option<u64> + Send + Sync>;

/// The controller id clients are told: the active controller when it is a
/// live broker (combined nodes), else, as KRaft does, a live broker (the
/// lowest id), which forwards controller requests; -1 with none.
pub fn controller_id(image: &MetadataImage, leader: Option<u64>) -> i32 {
    let live = |id: i32| image.broker(id).is_some_and(|b| !b.fenced);
    match leader.and_then(|l| i32::try_from(l).ok()) {
        Some(id) if live(id) => id,
        _ => image
            .brokers()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .min()
            .unwrap_or(-1),
    }
}

/// What clients see of `image`: the unfenced brokers with every client
/// listener they registered, and every topic's partitions. A replica is
/// offline when its broker is fenced or not registered.
///
/// A broker's `host:port` (where brokers reach it) is its endpoint named
/// `inter_broker` (this node's inter-broker listener; Kafka has every
/// broker of a cluster use the same name), else its first PLAINTEXT one.
pub fn snapshot_of(
    image: &MetadataImage,
    controller_id: i32,
    inter_broker: &str,
) -> ClusterSnapshot {
    let live: Vec<_> = image.brokers().filter(|b| !b.fenced).collect();
    let brokers = live
        .iter()
        .filter_map(|b| {
            let e = b
                .endpoints
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(inter_broker))
                .or_else(|| {
                    b.endpoints
                        .iter()
                        .find(|e| e.security_protocol == PLAINTEXT_ID)
                })
                .or_else(|| b.endpoints.first())?;
            Some(BrokerNode {
                id: b.id,
                host: e.host.clone(),
                port: e.port,
                rack: b.rack.clone(),
            })
        })
        .collect();
    let listeners = live.iter().map(|b| {
        let endpoints = b
            .endpoints
            .iter()
            .map(|e| ListenerEndpoint {
                name: e.name.clone(),
                host: e.host.clone(),
                port: e.port,
            })
            .collect();
        (b.id, endpoints)
    });
    let online = |id: i32| image.broker(id).is_some_and(|b| !b.fenced);
    let topics = image
        .topics()
        .map(|t| TopicView {
            name: t.name.clone(),
            id: t.id.0,
            partitions: t
                .partitions
                .values()
                .map(|p| PartitionView {
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    offline_replicas: p.replicas.iter().copied().filter(|r| !online(*r)).collect(),
                })
                .collect(),
        })
        .collect();
    let configs = image.topics().filter_map(|t| {
        Some((
            t.name.clone(),
            image.configs(TOPIC_RESOURCE, &t.name)?.clone(),
        ))
    });
    let shutting_down = image
        .brokers()
        .filter(|b| !b.fenced && b.in_controlled_shutdown)
        .map(|b| b.id);
    ClusterSnapshot::new(brokers, controller_id, topics)
        .with_topic_configs(configs)
        .with_shutting_down(shutting_down)
        .with_listeners(listeners)
}

/// The topics with a replica on broker `me`, as `reconcile_hosted` takes
/// them.
pub fn hosted_by(image: &MetadataImage, me: i32) -> Vec<HostedTopic> {
    image
        .topics()
        .filter_map(|t| {
            let partitions: Vec<i32> = t
                .partitions
                .iter()
                .filter(|(_, p)| p.replicas.contains(&me))
                .map(|(id, _)| *id)
                .collect();
            (!partitions.is_empty()).then(|| HostedTopic {
                name: t.name.clone(),
                id: t.id.0,
                partitions,
                configs: image
                    .configs(TOPIC_RESOURCE, &t.name)
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Topic changes go to the active controller; the answer is given once this
/// node's image has caught up with the change (bounded by `wait`), so a
/// client that creates a topic and asks this broker for its metadata next
/// finds it.
pub struct ForwardingAdmin {
    client: ControllerClient,
    images: ImageReader,
    /// The last image index the broker's hosted logs were brought in line
    /// with ([`follow_image`]).
    hosted: watch::Receiver<u64>,
    wait: Duration,
}

impl ForwardingAdmin {
    pub fn new(
        voters: BTreeMap<u64, String>,
        images: ImageReader,
        hosted: watch::Receiver<u64>,
        deadline: Duration,
    ) -> Self {
        let client = ControllerClient::new(
            voters,
            ControllerClientConfig {
                client_id: "weir-forwarding".into(),
                deadline,
                ..ControllerClientConfig::default()
            },
        );
        ForwardingAdmin {
            client,
            images,
            hosted,
            wait: deadline,
        }
    }

    /// Waits until `done` holds of this node's image and the broker hosts
    /// what that image assigns it (so a client's next produce finds the
    /// log), or `self.wait` passed.
    async fn caught_up(&self, done: impl Fn(&MetadataImage) -> bool) {
        let mut updates = self.images.watch();
        let end = tokio::time::Instant::now() + self.wait;
        let index = loop {
            updates.borrow_and_update();
            let applied = self.images.current();
            if done(&applied.image) {
                break applied.index;
            }
            match tokio::time::timeout_at(end, updates.changed()).await {
                Ok(Ok(())) => {}
                Err(_) | Ok(Err(_)) => return,
            }
        };
        let mut hosted = self.hosted.clone();
        let _ = tokio::time::timeout_at(end, hosted.wait_for(|h| *h >= index)).await;
    }
}

impl TopicAdmin for ForwardingAdmin {
    fn create_topics<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: CreateTopicsRequest,
    ) -> AdminFuture<'a, CreateTopicsResponse> {
        Box::pin(async move {
            let names: Vec<String> = req.topics.iter().map(|t| t.name.clone()).collect();
            match self.client.send(&req).await {
                Ok(resp) => {
                    if !req.validate_only {
                        let created: Vec<String> = resp
                            .topics
                            .iter()
                            .filter(|t| t.error_code == ErrorCode::None.code())
                            .map(|t| t.name.clone())
                            .collect();
                        self.caught_up(|image| {
                            created.iter().all(|n| image.topic_by_name(n).is_some())
                        })
                        .await;
                    }
                    resp
                }
                Err(e) => CreateTopicsResponse {
                    topics: names
                        .into_iter()
                        .map(|name| CreatableTopicResult {
                            name,
                            error_code: ErrorCode::RequestTimedOut.code(),
                            error_message: Some(e.to_string()),
                            num_partitions: -1,
                            replication_factor: -1,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            }
        })
    }

    fn delete_topics<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: DeleteTopicsRequest,
    ) -> AdminFuture<'a, DeleteTopicsResponse> {
        Box::pin(async move {
            match self.client.send(&req).await {
                Ok(resp) => {
                    let deleted: Vec<String> = resp
                        .responses
                        .iter()
                        .filter(|t| t.error_code == ErrorCode::None.code())
                        .filter_map(|t| t.name.clone())
                        .collect();
                    self.caught_up(|image| {
                        deleted.iter().all(|n| image.topic_by_name(n).is_none())
                    })
                    .await;
                    resp
                }
                Err(e) => {
                    let mut names: Vec<Option<String>> =
                        req.topic_names.iter().cloned().map(Some).collect();
                    names.extend(req.topics.iter().map(|t| t.name.clone()));
                    DeleteTopicsResponse {
                        responses: names
                            .into_iter()
                            .map(|name| DeletableTopicResult {
                                name,
                                error_code: ErrorCode::RequestTimedOut.code(),
                                error_message: Some(e.to_string()),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    }
                }
            }
        })
    }

    fn create_partitions<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: CreatePartitionsRequest,
    ) -> AdminFuture<'a, CreatePartitionsResponse> {
        Box::pin(async move {
            match self.client.send(&req).await {
                Ok(resp) => {
                    if !req.validate_only {
                        let grown: Vec<(String, usize)> = resp
                            .results
                            .iter()
                            .filter(|t| t.error_code == ErrorCode::None.code())
                            .filter_map(|t| {
                                let asked = req.topics.iter().find(|a| a.name == t.name)?;
                                Some((t.name.clone(), usize::try_from(asked.count).ok()?))
                            })
                            .collect();
                        self.caught_up(|image| {
                            grown.iter().all(|(n, count)| {
                                image
                                    .topic_by_name(n)
                                    .is_some_and(|t| t.partitions.len() >= *count)
                            })
                        })
                        .await;
                    }
                    resp
                }
                Err(e) => CreatePartitionsResponse {
                    results: req
                        .topics
                        .into_iter()
                        .map(|t| CreatePartitionsTopicResult {
                            name: t.name,
                            error_code: ErrorCode::RequestTimedOut.code(),
                            error_message: Some(e.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            }
        })
    }

    /// Sent as IncrementalAlterConfigs: the new set as SET operations and
    /// a DELETE for each override this node's image has that the set
    /// drops (see weir-cluster's `listener::configs`). Answered once the
    /// image has the new set and the broker's hosted logs took it.
    fn alter_topic_configs<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        topic: &'a str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> AdminFuture<'a, Result<(), (ErrorCode, String)>> {
        Box::pin(async move {
            let current = self
                .images
                .current()
                .image
                .configs(TOPIC_RESOURCE, topic)
                .cloned()
                .unwrap_or_default();
            let removed: Vec<String> = current
                .into_keys()
                .filter(|k| !configs.contains_key(k))
                .collect();
            let ops = configs
                .iter()
                .map(|(name, value)| AlterableConfig {
                    name: name.clone(),
                    config_operation: OP_SET,
                    value: Some(value.clone()),
                    ..Default::default()
                })
                .chain(removed.iter().map(|name| AlterableConfig {
                    name: name.clone(),
                    config_operation: OP_DELETE,
                    value: None,
                    ..Default::default()
                }))
                .collect();
            let req = IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource_type: TOPIC_RESOURCE,
                    resource_name: topic.to_string(),
                    configs: ops,
                    ..Default::default()
                }],
                validate_only,
                ..Default::default()
            };
            let resp = self
                .client
                .send(&req)
                .await
                .map_err(|e| (ErrorCode::RequestTimedOut, e.to_string()))?;
            let Some(r) = resp.responses.first() else {
                return Err((
                    ErrorCode::UnknownServerError,
                    "the controller answered no resource".to_string(),
                ));
            };
            let code = ErrorCode::from_code_lossy(r.error_code);
            if code != ErrorCode::None {
                return Err((code, r.error_message.clone().unwrap_or_default()));
            }
            if !validate_only {
                // Done when the image has the new set, or no longer has the
                // topic; another change may have committed after ours.
                self.caught_up(|image| {
                    image.topic_by_name(topic).is_none()
                        || image.configs(TOPIC_RESOURCE, topic).map_or_else(
                            || configs.is_empty(),
                            |c| {
                                configs.iter().all(|(k, v)| c.get(k) == Some(v))
                                    && removed.iter().all(|k| !c.contains_key(k))
                            },
                        )
                })
                .await;
            }
            Ok(())
        })
    }

    fn elect_leaders<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: ElectLeadersRequest,
    ) -> AdminFuture<'a, ElectLeadersResponse> {
        Box::pin(async move {
            match self.client.send(&req).await {
                Ok(resp) => resp,
                Err(e) => {
                    tracing::warn!(error = %e, "ElectLeaders not forwarded");
                    ElectLeadersResponse {
                        error_code: ErrorCode::RequestTimedOut.code(),
                        ..Default::default()
                    }
                }
            }
        })
    }

    fn alter_partition_reassignments<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: AlterPartitionReassignmentsRequest,
    ) -> AdminFuture<'a, AlterPartitionReassignmentsResponse> {
        Box::pin(async move {
            match self.client.send(&req).await {
                Ok(resp) => resp,
                Err(e) => {
                    tracing::warn!(error = %e, "AlterPartitionReassignments not forwarded");
                    AlterPartitionReassignmentsResponse {
                        error_code: ErrorCode::RequestTimedOut.code(),
                        error_message: Some(e.to_string()),
                        ..Default::default()
                    }
                }
            }
        })
    }

    fn list_partition_reassignments<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: ListPartitionReassignmentsRequest,
    ) -> AdminFuture<'a, ListPartitionReassignmentsResponse> {
        Box::pin(async move {
            match self.client.send(&req).await {
                Ok(resp) => resp,
                Err(e) => {
                    tracing::warn!(error = %e, "ListPartitionReassignments not forwarded");
                    ListPartitionReassignmentsResponse {
                        error_code: ErrorCode::RequestTimedOut.code(),
                        error_message: Some(e.to_string()),
                        ..Default::default()
                    }
                }
            }
        })
    }
}

/// Whether the image holds this process's own registration (`state`, the
/// broker lifecycle's): until then, leaderships the image names for this
/// node id are a previous incarnation's, which a restarted process must not
/// take up (as Kafka's broker publishes no metadata before its registration
/// and catch-up): its log may lack what that incarnation acknowledged.
fn registered_in(image: &MetadataImage, me: i32, state: &watch::Receiver<BrokerState>) -> bool {
    let epoch = state.borrow().broker_epoch;
    epoch.is_some_and(|e| image.broker(me).is_some_and(|b| b.epoch == e))
}

/// Keeps the broker in line with the metadata image until `stop` changes:
/// after each applied batch (or a missed run of them) it hosts the
/// partitions assigned to this node and, once the image holds this
/// process's registration (`registration`; None: no lifecycle to wait
/// for), takes up the leadership of its partitions and of the
/// `__consumer_offsets` and `__transaction_state` partitions.
pub async fn follow_image(
    broker: Arc<Broker>,
    images: ImageReader,
    hosted_index: watch::Sender<u64>,
    mut registration: Option<watch::Receiver<BrokerState>>,
    mut stop: watch::Receiver<bool>,
) {
    let me = broker.config.node_id;
    let mut updates = images.watch();
    let mut last: Option<Vec<HostedTopic>> = None;
    let mut failed = false;
    let mut waited = false;
    // The lifecycle ended (refused, or shut down): its last state stands,
    // and there is nothing more to wait for from it.
    let mut lifecycle_ended = false;
    loop {
        let applied = images.current();
        let hosted = hosted_by(&applied.image, me);
        if last.as_ref() != Some(&hosted) {
            let errors = {
                let guard = broker.admin.lock().await;
                // Creating and deleting logs does file I/O and fsyncs.
                tokio::task::block_in_place(|| broker.reconcile_hosted(&guard, &hosted))
            };
            for e in &errors {
                tracing::warn!(error = %e, "cannot host what the metadata image assigns");
            }
            failed = !errors.is_empty();
            if !failed {
                last = Some(hosted);
            }
        }
        let registered = registration
            .as_ref()
            .is_none_or(|r| registered_in(&applied.image, me, r));
        if registered {
            // Leaders start their epochs and followers fetch, before
            // anything waits on this index.
            tokio::task::block_in_place(|| broker.apply_leadership());
            if let Some(groups) = broker.groups() {
                tokio::task::block_in_place(|| groups.follow_leadership(&broker));
            }
            if let Some(txns) = broker.transactions() {
                tokio::task::block_in_place(|| txns.follow_leadership(&broker));
            }
        } else if !waited {
            waited = true;
            tracing::info!("waiting for this broker's registration before taking up leaderships");
        }
        if !failed {
            hosted_index.send_replace(applied.index);
        }
        tokio::select! {
            r = updates.changed() => {
                if r.is_err() {
                    return;
                }
            }
            r = async { registration.as_mut().expect("guarded").changed().await }, if registration.is_some() && !registered && !lifecycle_ended => {
                if r.is_err() {
                    lifecycle_ended = true;
                }
            }
            _ = stop.changed() => return,
            // A failed reconciliation is retried even with no new batch.
            _ = tokio::time::sleep(Duration::from_secs(1)), if failed => {}
        }
    }
}

/// Creates `__consumer_offsets` through the controller once enough brokers
/// are registered: `offsets.topic.num.partitions` partitions, replication
/// factor `offsets.topic.replication.factor` capped at the number of nodes,
/// compacted. Retries until it exists or `stop`.
pub async fn ensure_offsets_topic(
    config: Arc<BrokerConfig>,
    voters: BTreeMap<u64, String>,
    images: ImageReader,
    mut stop: watch::Receiver<bool>,
) {
    let topic = weir_broker::groups::OFFSETS_TOPIC;
    let client = ControllerClient::new(
        voters.clone(),
        ControllerClientConfig {
            client_id: "weir-offsets-topic".into(),
            ..ControllerClientConfig::default()
        },
    );
    // The count the group coordinator places groups over.
    let partitions = weir_broker::groups::group_config(&config).offsets_topic_partitions;
    // In the config table, whose default (3) is Kafka's.
    let wanted_rf = config
        .integer("offsets.topic.replication.factor")
        .unwrap_or(1)
        .max(1);
    // Kafka refuses to create it with fewer live brokers than its
    // replication factor; here every voter is a broker, so the factor is
    // capped at the cluster's size and creation waits for that many.
    let rf = wanted_rf.min(voters.len() as i64);
    let mut updates = images.watch();
    loop {
        let image = images.current().image.clone();
        if image.topic_by_name(topic).is_some() {
            return;
        }
        let live = image.brokers().filter(|b| b.is_active()).count() as i64;
        if live >= rf {
            let req = CreateTopicsRequest {
                topics: vec![
                    weir_protocol::messages::create_topics_request::CreatableTopic {
                        name: topic.to_string(),
                        num_partitions: partitions,
                        replication_factor: rf as i16,
                        configs: vec![CreatableTopicConfig {
                            name: "cleanup.policy".into(),
                            value: Some("compact".into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                ],
                timeout_ms: 30_000,
                ..Default::default()
            };
            match client.send(&req).await {
                Ok(resp) => {
                    for t in &resp.topics {
                        let code = ErrorCode::from_code_lossy(t.error_code);
                        if code != ErrorCode::None && code != ErrorCode::TopicAlreadyExists {
                            tracing::warn!(
                                ?code,
                                message = t.error_message.as_deref().unwrap_or(""),
                                "cannot create {topic} yet"
                            );
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot create {topic} yet"),
            }
        }
        tokio::select! {
            r = updates.changed() => {
                if r.is_err() {
                    return;
                }
            }
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// ISR changes of the partitions this broker leads, sent to the active
/// controller as AlterPartition with this broker's current epoch.
pub struct ControllerIsrChanger {
    client: Arc<ControllerClient>,
    node_id: i32,
    broker_epoch: Arc<dyn Fn() -> i64 + Send + Sync>,
}

impl ControllerIsrChanger {
    pub fn new(
        voters: BTreeMap<u64, String>,
        node_id: i32,
        broker_epoch: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Self {
        ControllerIsrChanger {
            client: Arc::new(ControllerClient::new(
                voters,
                ControllerClientConfig {
                    client_id: format!("weir-isr-{node_id}"),
                    ..ControllerClientConfig::default()
                },
            )),
            node_id,
            broker_epoch,
        }
    }
}

impl weir_broker::replication::IsrChanger for ControllerIsrChanger {
    fn alter_partition(
        &self,
        change: weir_broker::replication::state::IsrChange,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = weir_broker::replication::IsrAnswer> + Send>,
    > {
        use weir_cluster::broker_requests::{self, BrokerRequestError};
        let client = Arc::clone(&self.client);
        let node_id = self.node_id;
        let epoch = (self.broker_epoch)();
        Box::pin(async move {
            let req = weir_metadata::controller::AlterPartition {
                topic_id: weir_protocol::Uuid(change.topic_id),
                partition: change.partition,
                leader_epoch: change.leader_epoch,
                partition_epoch: change.partition_epoch,
                new_isr: change.new_isr.iter().map(|id| (*id, -1)).collect(),
            };
            match broker_requests::alter_partition(&client, node_id, epoch, vec![req]).await {
                Ok(mut results) => results
                    .pop()
                    .map_or(Err(ErrorCode::UnknownServerError), |(_, r)| {
                        r.map(|p| (p.leader_epoch, p.partition_epoch, p.isr))
                    }),
                Err(BrokerRequestError::Refused(code)) => Err(code),
                Err(BrokerRequestError::Client(_)) => Err(ErrorCode::RequestTimedOut),
            }
        })
    }
}

/// Producer ids from blocks the active controller hands out
/// (AllocateProducerIds), so no two brokers give a producer the same id,
/// also across failovers.
pub struct ControllerProducerIds {
    client: Arc<ControllerClient>,
    node_id: i32,
    broker_epoch: Arc<dyn Fn() -> i64 + Send + Sync>,
    /// The current block: next id, end (exclusive).
    block: tokio::sync::Mutex<(i64, i64)>,
}

impl ControllerProducerIds {
    pub fn new(
        voters: BTreeMap<u64, String>,
        node_id: i32,
        broker_epoch: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Self {
        ControllerProducerIds {
            client: Arc::new(ControllerClient::new(
                voters,
                ControllerClientConfig {
                    client_id: format!("weir-producer-ids-{node_id}"),
                    deadline: Duration::from_secs(10),
                    ..ControllerClientConfig::default()
                },
            )),
            node_id,
            broker_epoch,
            block: tokio::sync::Mutex::new((0, 0)),
        }
    }
}

impl weir_broker::broker::ProducerIdSource for ControllerProducerIds {
    fn next(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<i64, ErrorCode>> + Send + '_>>
    {
        Box::pin(async move {
            let mut block = self.block.lock().await;
            if block.0 >= block.1 {
                let epoch = (self.broker_epoch)();
                match weir_cluster::broker_requests::allocate_producer_ids(
                    &self.client,
                    self.node_id,
                    epoch,
                )
                .await
                {
                    Ok(b) => *block = (b.first, b.end()),
                    Err(e) => {
                        tracing::warn!(error = %e, "no producer id block from the controller");
                        // Retriable for clients: they ask again.
                        return Err(ErrorCode::CoordinatorLoadInProgress);
                    }
                }
            }
            let id = block.0;
            block.0 += 1;
            Ok(id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_protocol::Uuid;
    use weir_protocol::messages::metadata::RegisterBrokerRecord;
    use weir_protocol::messages::metadata::register_broker_record::BrokerEndpoint;
    use weir_protocol::metadata_record::MetadataRecord;

    fn register(id: i32, fenced: bool, endpoints: &[(&str, u16, i16)]) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid([id as u8; 16]),
            broker_epoch: i64::from(id),
            end_points: endpoints
                .iter()
                .map(|(name, port, protocol)| BrokerEndpoint {
                    name: (*name).into(),
                    host: format!("h{id}"),
                    port: *port,
                    security_protocol: *protocol,
                    ..Default::default()
                })
                .collect(),
            fenced,
            ..Default::default()
        })
    }

    /// Every registered listener survives into the image (and its
    /// snapshot records) and the cluster snapshot; a broker's own address
    /// is its inter-broker endpoint, by name, else its first PLAINTEXT one;
    /// a fenced broker is not listed.
    #[test]
    fn snapshots_keep_every_listener_and_reach_brokers_on_the_inter_broker_one() {
        let records = [
            register(1, false, &[("SASL_SSL", 11, 3), ("PLAINTEXT", 10, 0)]),
            register(2, false, &[("SASL_SSL", 21, 3), ("INTERNAL", 20, 0)]),
            register(3, true, &[("PLAINTEXT", 30, 0)]),
        ];
        let (image, _) = MetadataImage::empty().apply(&records).unwrap();
        let (image, _) = MetadataImage::empty()
            .apply(&weir_cluster::image::image_records(&image))
            .unwrap();
        assert_eq!(image.broker(1).unwrap().endpoints.len(), 2);
        let snap = snapshot_of(&image, 1, "PLAINTEXT");
        let reached: Vec<_> = snap.brokers.iter().map(|b| (b.id, b.port)).collect();
        assert_eq!(reached, [(1, 10), (2, 20)]);
        let on = |name: &str| weir_broker::session::ListenerInfo {
            name: name.into(),
            protocol: weir_broker::config::SecurityProtocol::SaslSsl,
            advertised_host: "me".into(),
            advertised_port: 0,
        };
        let two = snap.broker(2).unwrap();
        assert_eq!(
            snap.client_endpoint(two, 1, &on("SASL_SSL")),
            Some(("h2".into(), 21))
        );
        assert_eq!(
            snap.client_endpoint(two, 1, &on("INTERNAL")),
            Some(("h2".into(), 20))
        );
        assert_eq!(snap.client_endpoint(two, 1, &on("PLAINTEXT")), None);
    }
}
