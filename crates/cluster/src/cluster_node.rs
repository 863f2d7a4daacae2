//! [`ClusterNode`]: everything of the control plane one process runs —
//! the controller node serving its CONTROLLER listener (raft and Kafka
//! controller requests on one port), quorum initialization, session expiry
//! and the leader rebalance on the active controller, and the broker
//! lifecycle.
//!
//! Quorum initialization: only the lowest voter id initializes the voter
//! set, and only on a data dir whose log holds no membership yet
//! ([`MetadataRaft::initialize`](weir_raft::MetadataRaft::initialize) does
//! nothing on an initialized log, so restarts are safe). Every other voter
//! waits to be replicated to.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use weir_raft::{RaftOptions, RaftStartError};

use crate::client::{ControllerClient, ControllerClientConfig};
use crate::controller::{QuorumController, QuorumControllerConfig};
use crate::image::ImageReader;
use crate::lifecycle::{BrokerInfo, BrokerLifecycle, BrokerState, LifecycleConfig};
use crate::listener::{
    self, Clock, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REQUEST_BYTES, ListenerContext,
};
use crate::node::ControllerNode;

/// Default period of the session-expiry check on the active controller.
pub const DEFAULT_TICK_INTERVAL: Duration = Duration::from_millis(250);
/// Kafka's `leader.imbalance.check.interval.seconds` default.
pub const DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// How one process of the cluster runs.
#[derive(Clone)]
pub struct ClusterNodeConfig {
    /// The metadata quorum: `node.id`, the metadata log dir and
    /// `controller.quorum.voters` (id -> CONTROLLER `host:port`).
    pub raft: RaftOptions,
    pub controller: QuorumControllerConfig,
    /// Registrations and raft requests from another cluster id are
    /// refused; `None` accepts any. Also the raft options' cluster id
    /// unless those name one.
    pub cluster_id: Option<String>,
    /// Bound on one Kafka request frame on the CONTROLLER listener.
    pub max_request_bytes: usize,
    /// Bound on open connections to the CONTROLLER listener.
    pub max_connections: usize,
    /// How often the active controller expires sessions.
    pub tick_interval: Duration,
    /// `auto.leader.rebalance.enable` (default true): the active controller
    /// periodically moves leadership back to each partition's preferred
    /// replica where it is active and in the ISR.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds` (default 300 s): the period
    /// of that rebalance; the first runs one period after start.
    pub leader_imbalance_check_interval: Duration,
    /// The clock the controller decides with.
    pub clock: Clock,
    /// This process's broker, if it is one (`process.roles` has `broker`).
    pub broker: Option<(BrokerInfo, LifecycleConfig)>,
    pub client: ControllerClientConfig,
}

impl ClusterNodeConfig {
    /// A node with the defaults and no broker.
    pub fn new(raft: RaftOptions) -> Self {
        ClusterNodeConfig {
            raft,
            controller: QuorumControllerConfig::default(),
            cluster_id: None,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tick_interval: DEFAULT_TICK_INTERVAL,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval: DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL,
            clock: listener::monotonic_clock(),
            broker: None,
            client: ControllerClientConfig::default(),
        }
    }
}

/// A running control plane of one process. Dropping it stops its tasks
/// without a controlled shutdown; [`shutdown`](Self::shutdown) does one.
pub struct ClusterNode {
    node: ControllerNode,
    client: Arc<ControllerClient>,
    lifecycle: Option<BrokerLifecycle>,
    /// The controllers' session timeout (bounds the lifecycle's retries of
    /// a duplicate registration).
    session_timeout: Duration,
    tasks: Tasks,
}

impl ClusterNode {
    /// Starts the node on its bound CONTROLLER `listener`.
    pub async fn start(
        config: ClusterNodeConfig,
        listener: TcpListener,
    ) -> Result<Self, RaftStartError> {
        let node_id = config.raft.node_id;
        let voters = config.raft.voters.clone();
        let lowest = voters.keys().next().copied();
        // One cluster id for registrations and raft requests alike.
        let mut raft = config.raft;
        raft.cluster_id = raft.cluster_id.or_else(|| config.cluster_id.clone());
        let cluster_id = raft.cluster_id.clone();
        let session_timeout =
            Duration::from_millis(config.controller.controller.session_timeout_ms);
        let node = ControllerNode::start_tcp_client(raft, config.controller).await?;
        let ctx = ListenerContext {
            node_id,
            controller: node.controller.clone(),
            images: node.images.clone(),
            raft: node.raft.raft().clone(),
            voters: voters.clone(),
            cluster_id,
            clock: config.clock.clone(),
            max_request_bytes: config.max_request_bytes,
            max_raft_frame_bytes: node.raft.max_frame_bytes(),
            max_connections: config.max_connections,
        };
        let mut tasks = vec![tokio::spawn(listener::serve(listener, ctx))];
        if lowest == Some(node_id) {
            node.raft.initialize().await?;
        }
        tasks.push(tokio::spawn(expire_sessions(
            node.controller.clone(),
            config.clock,
            config.tick_interval,
        )));
        if config.auto_leader_rebalance_enable {
            tasks.push(tokio::spawn(rebalance_leaders(
                node.controller.clone(),
                config.leader_imbalance_check_interval,
            )));
        }
        let client = Arc::new(ControllerClient::new(voters, config.client));
        let lifecycle = config.broker.map(|(info, lifecycle)| {
            start_lifecycle(&node, &client, info, lifecycle, session_timeout)
        });
        Ok(ClusterNode {
            node,
            client,
            lifecycle,
            session_timeout,
            tasks: Tasks(tasks),
        })
    }

    pub fn node_id(&self) -> u64 {
        self.node.node_id()
    }

    /// Starts this node's broker lifecycle after the node itself: for a
    /// broker whose client listener's address is known only once it is
    /// bound. Replaces (and stops) one given in the config.
    pub fn start_broker(&mut self, info: BrokerInfo, config: LifecycleConfig) {
        let lifecycle =
            start_lifecycle(&self.node, &self.client, info, config, self.session_timeout);
        self.lifecycle = Some(lifecycle);
    }

    /// Resolves with one line saying why, once the active controller has
    /// refused this node's broker for good (another cluster id: a
    /// different `controller.quorum.voters` or `cluster.id`; or its
    /// `node.id` held by another live process); the broker has stopped
    /// heartbeating by then and the process should exit. Never resolves on
    /// a node without a broker. Watches the lifecycle running when called:
    /// call it after [`start_broker`](Self::start_broker).
    pub fn refused(&self) -> impl Future<Output = String> + Send + 'static {
        let refused = self.lifecycle.as_ref().map(BrokerLifecycle::refused);
        async move {
            match refused {
                Some(refused) => refused.await,
                None => std::future::pending().await,
            }
        }
    }

    /// The metadata image this node applies, for the broker side.
    pub fn images(&self) -> ImageReader {
        self.node.images.clone()
    }

    /// The controller beside this node's raft (answers NOT_CONTROLLER
    /// unless this node is the active controller).
    pub fn controller(&self) -> &QuorumController {
        &self.node.controller
    }

    /// A client of the active controller (for forwarding CreateTopics and
    /// DeleteTopics).
    pub fn controller_client(&self) -> Arc<ControllerClient> {
        Arc::clone(&self.client)
    }

    /// The broker's lifecycle state, if this node is a broker.
    pub fn broker_state(&self) -> Option<watch::Receiver<BrokerState>> {
        self.lifecycle.as_ref().map(BrokerLifecycle::state)
    }

    /// The controller node (raft, images, controller).
    pub fn controller_node(&self) -> &ControllerNode {
        &self.node
    }

    /// Controlled shutdown of the broker (bounded by its
    /// `shutdown_timeout`), then stops the listener, session expiry and
    /// raft.
    pub async fn shutdown(mut self) -> Result<(), RaftStartError> {
        self.controlled_shutdown().await;
        self.stop().await
    }

    /// The broker's controlled shutdown alone (bounded by its
    /// `shutdown_timeout`): the controller moves its leaderships away while
    /// raft keeps running, so the broker side can still apply those moves
    /// before [`stop`](Self::stop). Returns whether the controller agreed;
    /// false too on a node without a broker or when already done.
    pub async fn controlled_shutdown(&mut self) -> bool {
        match self.lifecycle.take() {
            Some(lifecycle) => lifecycle.shutdown().await,
            None => false,
        }
    }

    /// Stops at once, without a controlled shutdown (as a crash would, but
    /// with raft's files closed cleanly).
    pub async fn stop(mut self) -> Result<(), RaftStartError> {
        self.lifecycle.take();
        for task in self.tasks.0.drain(..) {
            task.abort();
            let _ = task.await;
        }
        let ClusterNode { node, .. } = self;
        node.shutdown().await
    }
}

/// Registration and heartbeats of this node's broker, reporting the index
/// of the image the node has applied as its metadata offset.
fn start_lifecycle(
    node: &ControllerNode,
    client: &Arc<ControllerClient>,
    info: BrokerInfo,
    config: LifecycleConfig,
    session_timeout: Duration,
) -> BrokerLifecycle {
    let images = node.images.clone();
    let offset = Arc::new(move || i64::try_from(images.current().index).unwrap_or(i64::MAX));
    let client = Arc::clone(client);
    BrokerLifecycle::start_with_session_timeout(info, config, client, offset, session_timeout)
}

/// Tasks aborted when dropped.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Session expiry on whichever node is the active controller.
async fn expire_sessions(controller: QuorumController, clock: Clock, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if !controller.is_active() {
            continue;
        }
        match controller.tick(clock()).await {
            Ok(fenced) if !fenced.is_empty() => {
                tracing::info!(?fenced, "fenced brokers whose sessions expired");
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "session expiry skipped"),
        }
    }
}

/// The leader rebalance on whichever node is the active controller, every
/// `interval` from one `interval` after start.
async fn rebalance_leaders(controller: QuorumController, interval: Duration) {
    let start = tokio::time::Instant::now() + interval;
    let mut ticks = tokio::time::interval_at(start, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if !controller.is_active() {
            continue;
        }
        match controller.rebalance_leaders().await {
            Ok(moved) if moved > 0 => {
                tracing::info!(moved, "moved leaders back to their preferred replicas");
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "leader rebalance skipped"),
        }
    }
}
