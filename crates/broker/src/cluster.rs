//! The broker's seam to the cluster: what the handlers ask about brokers,
//! controllers and partition leadership ([`ClusterView`]), and who changes
//! topics ([`TopicAdmin`]).
//!
//! A single node answers both itself ([`SingleNode`], [`LocalTopicAdmin`]):
//! it is the only broker, the controller, and the leader of every partition
//! at epoch 0, and its topics are those of `weir-topics.json`. In a cluster
//! the process that runs the metadata log installs implementations fed by
//! the metadata image ([`crate::Broker::set_cluster`]) and tells the broker
//! which partitions to host ([`crate::Broker::reconcile_hosted`]); the
//! handlers do not know which mode they run in.
//!
//! A handler takes one [`ClusterSnapshot`] per request, so every answer in
//! a response comes from the same version of the metadata.
//!
//! ```
//! use std::sync::Arc;
//! use weir_broker::cluster::{BrokerNode, ClusterSnapshot, PartitionView, TopicView};
//! let snap = ClusterSnapshot::new(
//!     vec![BrokerNode { id: 1, host: "a".into(), port: 9092, rack: None }],
//!     1,
//!     vec![TopicView {
//!         name: "t".into(),
//!         id: [7; 16],
//!         partitions: vec![PartitionView::single(1)],
//!     }],
//! );
//! assert!(snap.check_leader(1, "t", 0, -1).is_ok());
//! assert!(snap.check_leader(2, "t", 0, -1).is_err());
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use crate::handler::RequestContext;
use crate::topics::TopicStore;

/// A live broker: its id, its inter-broker endpoint and its rack.
///
/// `host:port` is where other brokers reach it (replica fetchers,
/// transaction markers): its inter-broker listener, always PLAINTEXT.
/// Clients are told the endpoint of their own listener instead
/// ([`ClusterSnapshot::client_endpoint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerNode {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// One client listener a broker registered: its name (as in `listeners`,
/// upper case) and advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// One partition's leadership. `leader` is -1 when the partition has no
/// leader (every replica offline); otherwise it is one of `isr`, and `isr`
/// and `offline_replicas` are subsets of `replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub leader: i32,
    pub leader_epoch: i32,
    /// Bumped by every change of the partition's leader, replicas or ISR
    /// (KRaft's partition epoch); AlterPartition names it.
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
}

impl PartitionView {
    /// A partition whose only replica, `node`, leads it at epoch 0.
    pub fn single(node: i32) -> PartitionView {
        PartitionView {
            leader: node,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![node],
            isr: vec![node],
            offline_replicas: Vec::new(),
        }
    }
}

/// A topic with its id; `partitions[i]` is partition `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub name: String,
    pub id: [u8; 16],
    pub partitions: Vec<PartitionView>,
}

/// One consistent version of the cluster metadata clients see.
#[derive(Debug, Clone, Default)]
pub struct ClusterSnapshot {
    /// Live (registered, unfenced) brokers, by id.
    pub brokers: Vec<BrokerNode>,
    /// The active controller's id, -1 when none is known.
    pub controller_id: i32,
    topics: BTreeMap<String, TopicView>,
    by_id: HashMap<[u8; 16], String>,
    /// Config overrides by topic name; a topic without overrides has none.
    configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Live brokers in their controlled shutdown: still served to clients,
    /// but no ISR takes them back (the controller would refuse it with
    /// INELIGIBLE_REPLICA, KIP-841).
    shutting_down: BTreeSet<i32>,
    /// The client listeners each broker registered, by broker id. A broker
    /// without an entry (a single node, or a snapshot built without
    /// listeners) is reached at its `host:port` on every listener.
    listeners: HashMap<i32, Vec<ListenerEndpoint>>,
}

/// Why this broker does not serve a partition request as its leader, with
/// the leader as this broker knows it (for the tagged `current_leader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotLeader {
    pub code: ErrorCode,
    /// -1 when unknown.
    pub leader_id: i32,
    /// -1 when unknown.
    pub leader_epoch: i32,
}

impl ClusterSnapshot {
    pub fn new(brokers: Vec<BrokerNode>, controller_id: i32, topics: Vec<TopicView>) -> Self {
        let by_id = topics.iter().map(|t| (t.id, t.name.clone())).collect();
        ClusterSnapshot {
            brokers,
            controller_id,
            topics: topics.into_iter().map(|t| (t.name.clone(), t)).collect(),
            by_id,
            configs: BTreeMap::new(),
            shutting_down: BTreeSet::new(),
            listeners: HashMap::new(),
        }
    }

    /// This snapshot with the client listeners each broker registered.
    pub fn with_listeners(
        mut self,
        listeners: impl IntoIterator<Item = (i32, Vec<ListenerEndpoint>)>,
    ) -> Self {
        self.listeners = listeners.into_iter().collect();
        self
    }

    /// Where a client connected on `listener` reaches broker `n`: `n`'s
    /// endpoint of the listener with the same name, as Kafka answers
    /// (`MetadataCache.getAliveBrokerNode(id, listenerName)`); None when
    /// `n` registered no such listener, and the client must not be sent
    /// there. This broker (`own`) answers with the connection's listener
    /// itself, registered or not yet.
    pub fn client_endpoint(
        &self,
        n: &BrokerNode,
        own: i32,
        listener: &crate::session::ListenerInfo,
    ) -> Option<(String, u16)> {
        if n.id == own {
            return Some((listener.advertised_host.clone(), listener.advertised_port));
        }
        match self.listeners.get(&n.id) {
            None => Some((n.host.clone(), n.port)),
            Some(registered) => registered
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(&listener.name))
                .map(|e| (e.host.clone(), e.port)),
        }
    }

    /// This snapshot with `ids` in their controlled shutdown.
    pub fn with_shutting_down(mut self, ids: impl IntoIterator<Item = i32>) -> Self {
        self.shutting_down = ids.into_iter().collect();
        self
    }

    /// Whether broker `id` may join an ISR: live and not in its
    /// controlled shutdown (Kafka's ISR eligibility, KIP-841).
    pub fn may_join_isr(&self, id: i32) -> bool {
        self.broker(id).is_some() && !self.shutting_down.contains(&id)
    }

    /// This snapshot with the topics' config overrides (by topic name;
    /// entries for topics not in the snapshot are dropped).
    pub fn with_topic_configs(
        mut self,
        configs: impl IntoIterator<Item = (String, BTreeMap<String, String>)>,
    ) -> Self {
        self.configs = configs
            .into_iter()
            .filter(|(name, c)| !c.is_empty() && self.topics.contains_key(name))
            .collect();
        self
    }

    /// A topic's config overrides (empty when it has none), `None` for a
    /// topic not in the snapshot. In a cluster they come from the metadata
    /// image, so every broker answers the same for topics it does not host.
    pub fn topic_configs(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.topics.get(name)?;
        Some(self.configs.get(name).unwrap_or(&NONE))
    }

    pub fn broker(&self, id: i32) -> Option<&BrokerNode> {
        self.brokers.iter().find(|b| b.id == id)
    }

    pub fn topic(&self, name: &str) -> Option<&TopicView> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<&TopicView> {
        self.topics.get(self.by_id.get(id)?)
    }

    /// Every topic, by name.
    pub fn topics(&self) -> impl Iterator<Item = &TopicView> {
        self.topics.values()
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionView> {
        let p = usize::try_from(partition).ok()?;
        self.topic(topic)?.partitions.get(p)
    }

    /// Whether `node` may answer a client request for `topic`-`partition`
    /// as its leader; the leader epoch when it may. As Kafka: a
    /// `current_leader_epoch` (-1 = not checked) older than the leader's is
    /// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (this broker has
    /// not seen it yet), both before NOT_LEADER_OR_FOLLOWER.
    pub fn check_leader(
        &self,
        node: i32,
        topic: &str,
        partition: i32,
        current_leader_epoch: i32,
    ) -> Result<i32, NotLeader> {
        let Some(p) = self.partition(topic, partition) else {
            return Err(NotLeader {
                code: ErrorCode::UnknownTopicOrPartition,
                leader_id: -1,
                leader_epoch: -1,
            });
        };
        let refuse = |code| NotLeader {
            code,
            leader_id: p.leader,
            leader_epoch: p.leader_epoch,
        };
        if current_leader_epoch >= 0 && current_leader_epoch < p.leader_epoch {
            return Err(refuse(ErrorCode::FencedLeaderEpoch));
        }
        if current_leader_epoch > p.leader_epoch {
            return Err(refuse(ErrorCode::UnknownLeaderEpoch));
        }
        if p.leader != node {
            return Err(refuse(ErrorCode::NotLeaderOrFollower));
        }
        Ok(p.leader_epoch)
    }

    /// The live brokers among `ids`, each once, in the order first named
    /// (for a response's `node_endpoints`).
    pub fn nodes(&self, ids: impl IntoIterator<Item = i32>) -> Vec<&BrokerNode> {
        let mut out: Vec<&BrokerNode> = Vec::new();
        for id in ids {
            if let Some(b) = self.broker(id)
                && !out.iter().any(|o| o.id == id)
            {
                out.push(b);
            }
        }
        out
    }
}

/// The cluster as this broker's handlers see it.
pub trait ClusterView: Send + Sync {
    /// The current version; cheap enough to call once per request.
    fn snapshot(&self) -> Arc<ClusterSnapshot>;
}

/// A single node: the only broker, the controller and every partition's
/// leader (epoch 0, replicas = ISR = itself), for the topics of its own
/// topic store. Snapshots are rebuilt only when the store or the advertised
/// address changed.
pub struct SingleNode {
    node_id: i32,
    topics: Arc<RwLock<TopicStore>>,
    advertised: Arc<RwLock<(String, u16)>>,
    cache: Mutex<Option<(u64, Arc<ClusterSnapshot>)>>,
}

impl SingleNode {
    pub fn new(
        node_id: i32,
        topics: Arc<RwLock<TopicStore>>,
        advertised: Arc<RwLock<(String, u16)>>,
    ) -> SingleNode {
        SingleNode {
            node_id,
            topics,
            advertised,
            cache: Mutex::new(None),
        }
    }
}

impl ClusterView for SingleNode {
    fn snapshot(&self) -> Arc<ClusterSnapshot> {
        let (host, port) = self
            .advertised
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let store = self.topics.read().unwrap_or_else(|p| p.into_inner());
        let generation = store.generation();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, snap)) = cache.as_ref()
            && *g == generation
            && snap
                .brokers
                .first()
                .is_some_and(|b| b.host == host && b.port == port)
        {
            return snap.clone();
        }
        let topics = store
            .all()
            .map(|t| TopicView {
                name: t.name.clone(),
                id: t.id_bytes(),
                partitions: (0..t.partitions)
                    .map(|_| PartitionView::single(self.node_id))
                    .collect(),
            })
            .collect();
        let configs = store.all().map(|t| (t.name.clone(), t.configs.clone()));
        let snap = Arc::new(
            ClusterSnapshot::new(
                vec![BrokerNode {
                    id: self.node_id,
                    host,
                    port,
                    rack: None,
                }],
                self.node_id,
                topics,
            )
            .with_topic_configs(configs),
        );
        *cache = Some((generation, snap.clone()));
        snap
    }
}

/// A boxed future borrowing the request context.
pub type AdminFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Topic creation, deletion, partition growth and config changes, a whole
/// request at a time: the answer carries a Kafka error code and message per
/// topic. A
/// single node does it locally ([`LocalTopicAdmin`]); a cluster member
/// forwards the request to the active controller.
pub trait TopicAdmin: Send + Sync {
    fn create_topics<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: CreateTopicsRequest,
    ) -> AdminFuture<'a, CreateTopicsResponse>;

    fn delete_topics<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: DeleteTopicsRequest,
    ) -> AdminFuture<'a, DeleteTopicsResponse>;

    fn create_partitions<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: CreatePartitionsRequest,
    ) -> AdminFuture<'a, CreatePartitionsResponse>;

    /// ElectLeaders; by default this broker's own answer (a single node
    /// leads everything with its preferred replica).
    fn elect_leaders<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: ElectLeadersRequest,
    ) -> AdminFuture<'a, ElectLeadersResponse> {
        Box::pin(async move { crate::handler::elect_leaders::elect_locally(ctx, req) })
    }

    /// AlterPartitionReassignments; by default this broker's own answer (a
    /// single node is the only broker, so there is nowhere to move to).
    fn alter_partition_reassignments<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: AlterPartitionReassignmentsRequest,
    ) -> AdminFuture<'a, AlterPartitionReassignmentsResponse> {
        Box::pin(
            async move { crate::handler::alter_partition_reassignments::alter_locally(ctx, req) },
        )
    }

    /// ListPartitionReassignments; by default this broker's own answer
    /// (none in progress on a single node).
    fn list_partition_reassignments<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: ListPartitionReassignmentsRequest,
    ) -> AdminFuture<'a, ListPartitionReassignmentsResponse> {
        Box::pin(
            async move { crate::handler::list_partition_reassignments::list_locally(ctx, req) },
        )
    }

    /// Makes `configs` the complete set of `topic`'s config overrides
    /// (AlterConfigs and IncrementalAlterConfigs of a TOPIC resource, after
    /// the handler validated names and values); with `validate_only`,
    /// changes nothing. By default this broker's own topic store and logs
    /// (a single node); a cluster member forwards the change to the active
    /// controller and answers once its image and its hosted logs have it.
    fn alter_topic_configs<'a>(
        &'a self,
        ctx: &'a RequestContext,
        topic: &'a str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> AdminFuture<'a, Result<(), (ErrorCode, String)>> {
        Box::pin(crate::handler::configs::alter_topic_locally(
            ctx,
            topic,
            configs,
            validate_only,
        ))
    }
}

/// Changes topics in this broker's own topic store and logs (single node).
pub struct LocalTopicAdmin;

impl TopicAdmin for LocalTopicAdmin {
    fn create_topics<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: CreateTopicsRequest,
    ) -> AdminFuture<'a, CreateTopicsResponse> {
        Box::pin(crate::handler::create_topics::create_locally(ctx, req))
    }

    fn delete_topics<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: DeleteTopicsRequest,
    ) -> AdminFuture<'a, DeleteTopicsResponse> {
        Box::pin(crate::handler::delete_topics::delete_locally(ctx, req))
    }

    fn create_partitions<'a>(
        &'a self,
        ctx: &'a RequestContext,
        req: CreatePartitionsRequest,
    ) -> AdminFuture<'a, CreatePartitionsResponse> {
        Box::pin(crate::handler::create_partitions::create_locally(ctx, req))
    }
}

/// A topic this broker hosts partitions of, as the metadata image assigns
/// them ([`crate::Broker::reconcile_hosted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedTopic {
    pub name: String,
    pub id: [u8; 16],
    /// The partitions with a replica on this broker.
    pub partitions: Vec<i32>,
    /// The topic's config overrides.
    pub configs: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> ClusterSnapshot {
        ClusterSnapshot::new(
            vec![],
            1,
            vec![TopicView {
                name: "t".into(),
                id: [1; 16],
                partitions: vec![PartitionView {
                    leader: 2,
                    leader_epoch: 5,
                    partition_epoch: 0,
                    replicas: vec![1, 2],
                    isr: vec![1, 2],
                    offline_replicas: vec![],
                }],
            }],
        )
    }

    #[test]
    fn leader_checks_in_kafka_order() {
        let s = snap();
        let code = |node, p, epoch| s.check_leader(node, "t", p, epoch).map_err(|e| e.code);
        assert_eq!(code(2, 0, -1), Ok(5));
        assert_eq!(code(2, 0, 5), Ok(5));
        assert_eq!(code(2, 0, 4), Err(ErrorCode::FencedLeaderEpoch));
        assert_eq!(code(2, 0, 6), Err(ErrorCode::UnknownLeaderEpoch));
        // the epoch is checked before leadership, as Kafka's Partition does
        assert_eq!(code(1, 0, 4), Err(ErrorCode::FencedLeaderEpoch));
        assert_eq!(code(1, 0, 5), Err(ErrorCode::NotLeaderOrFollower));
        assert_eq!(code(1, 1, -1), Err(ErrorCode::UnknownTopicOrPartition));
        assert_eq!(code(1, -1, -1), Err(ErrorCode::UnknownTopicOrPartition));
        let e = s.check_leader(1, "t", 0, -1).unwrap_err();
        assert_eq!((e.leader_id, e.leader_epoch), (2, 5));
        assert_eq!(s.topic_by_id(&[1; 16]).map(|t| t.name.as_str()), Some("t"));
    }

    /// Each broker is answered with its endpoint of the client's listener
    /// (by name, in any case); one without it is not answered; one with no
    /// registered listeners at its inter-broker address; this broker with
    /// the connection's listener.
    #[test]
    fn client_endpoints_by_listener_name() {
        let node = |id, port| BrokerNode {
            id,
            host: "h".into(),
            port,
            rack: None,
        };
        let ep = |name: &str, port| ListenerEndpoint {
            name: name.into(),
            host: name.to_ascii_lowercase(),
            port,
        };
        let s = ClusterSnapshot::new(vec![node(1, 10), node(2, 20), node(3, 30)], 1, vec![])
            .with_listeners([
                (1, vec![ep("PLAINTEXT", 10), ep("SASL_SSL", 11)]),
                (2, vec![ep("PLAINTEXT", 20), ep("SASL_SSL", 21)]),
            ]);
        let on = |name: &str, port| crate::session::ListenerInfo {
            name: name.into(),
            protocol: crate::config::SecurityProtocol::Plaintext,
            advertised_host: "me".into(),
            advertised_port: port,
        };
        let sasl = on("SASL_SSL", 11);
        let ends = |l: &crate::session::ListenerInfo| {
            s.brokers
                .iter()
                .map(|n| s.client_endpoint(n, 1, l))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ends(&sasl),
            [
                Some(("me".into(), 11)),
                Some(("sasl_ssl".into(), 21)),
                Some(("h".into(), 30)),
            ]
        );
        assert_eq!(
            ends(&on("plaintext", 10))[1],
            Some(("plaintext".into(), 20))
        );
        assert_eq!(ends(&on("EXTERNAL", 12))[1], None);
    }
}
