//! [`MetadataRaft`]: the metadata log as a broker sees it.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use openraft::error::{InitializeError, RaftError};
use openraft::{BasicNode, Config, RaftNetworkFactory, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::log_store::{LogOpenError, LogStore};
use crate::network::{MAX_FRAME_BYTES, MemRouter, PeerRefusal, TcpNetworkFactory, serve_tcp};
use crate::state_machine::{MetadataStateMachine, SnapshotLoadError, StateMachineStore};
use crate::{Raft, TypeConfig};

/// Bound on a cluster id, which every raft request carries.
pub const MAX_CLUSTER_ID_BYTES: usize = 256;

/// How one node of the metadata quorum runs. Plain data; [`validate`]
/// checks it.
///
/// [`validate`]: RaftOptions::validate
#[derive(Debug, Clone)]
pub struct RaftOptions {
    /// Kafka's `node.id`.
    pub node_id: u64,
    /// The metadata log directory (log, state file, snapshot).
    pub dir: PathBuf,
    /// The voters and their controller endpoints `host:port`
    /// (`controller.quorum.voters`).
    pub voters: BTreeMap<u64, String>,
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many entries applied since the last one.
    pub snapshot_after_entries: u64,
    /// Entries kept in the log behind a snapshot (for slow followers).
    pub entries_kept_after_snapshot: u64,
    /// Bound on one RPC frame on the TCP transport.
    pub max_frame_bytes: usize,
    /// The cluster this quorum is: named in every raft request this node
    /// sends over TCP, and requests naming another (or none) are refused.
    /// `None` sends none and serves any.
    pub cluster_id: Option<String>,
}

impl RaftOptions {
    /// Options with the defaults: heartbeat 100 ms, election timeout
    /// 1000–2000 ms (Kafka's `controller.quorum.election.timeout.ms`),
    /// a snapshot every 10 000 entries keeping 1000 behind it.
    pub fn new(node_id: u64, dir: impl Into<PathBuf>, voters: BTreeMap<u64, String>) -> Self {
        RaftOptions {
            node_id,
            dir: dir.into(),
            voters,
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            snapshot_after_entries: 10_000,
            entries_kept_after_snapshot: 1000,
            max_frame_bytes: MAX_FRAME_BYTES,
            cluster_id: None,
        }
    }

    /// Checks the options make sense together.
    pub fn validate(&self) -> Result<(), RaftStartError> {
        if !self.voters.contains_key(&self.node_id) {
            return Err(RaftStartError::Config(format!(
                "node.id {} is not among the voters {:?}",
                self.node_id,
                self.voters.keys().collect::<Vec<_>>()
            )));
        }
        if self.max_frame_bytes < 64 * 1024 {
            return Err(RaftStartError::Config(format!(
                "max_frame_bytes {} is below 64 KiB",
                self.max_frame_bytes
            )));
        }
        if let Some(id) = &self.cluster_id
            && (id.is_empty() || id.len() > MAX_CLUSTER_ID_BYTES)
        {
            return Err(RaftStartError::Config(format!(
                "cluster id {id:?} is empty or longer than {MAX_CLUSTER_ID_BYTES} bytes"
            )));
        }
        Ok(())
    }

    fn raft_config(&self) -> Result<Config, RaftStartError> {
        let config = Config {
            cluster_name: "weir-metadata".to_string(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_after_entries),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            // Chunks, as JSON, stay well inside a frame.
            snapshot_max_chunk_size: (self.max_frame_bytes / 4) as u64,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| RaftStartError::Config(e.to_string()))
    }
}

/// Why a node could not start or initialize.
#[derive(Debug, thiserror::Error)]
pub enum RaftStartError {
    #[error("invalid metadata quorum configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Log(#[from] LogOpenError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotLoadError),
    #[error("metadata quorum i/o: {0}")]
    Io(#[from] io::Error),
    #[error("metadata raft: {0}")]
    Raft(String),
}

/// Why a proposal was not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// This node is not the leader; retry at the leader if one is known.
    #[error("not the metadata leader (leader {leader:?} at {endpoint:?})")]
    NotLeader {
        leader: Option<u64>,
        endpoint: Option<String>,
    },
    /// The node is shutting down or hit a fatal error.
    #[error("metadata raft stopped: {0}")]
    Stopped(String),
}

/// One running node of the metadata quorum. Invariant: the log store and
/// state machine are the ones the raft instance owns.
pub struct MetadataRaft<S> {
    node_id: u64,
    voters: BTreeMap<u64, String>,
    raft: Raft,
    log: LogStore,
    sm: StateMachineStore<S>,
    max_frame_bytes: usize,
    cluster_id: Option<String>,
    /// Refusals of this node's requests by peers (TCP transport only).
    refusal: PeerRefusal,
    server: Option<JoinHandle<()>>,
}

impl<S: MetadataStateMachine> MetadataRaft<S> {
    /// Opens the log and snapshot in `options.dir` and starts raft with the
    /// given network. The caller routes incoming RPCs to [`raft`].
    ///
    /// [`raft`]: MetadataRaft::raft
    pub async fn start<N>(options: RaftOptions, sm: S, network: N) -> Result<Self, RaftStartError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        // No transport but TCP's refuses anything: nothing ever changes.
        let refusal = watch::channel(None).1;
        Self::start_with(options, sm, network, refusal).await
    }

    async fn start_with<N>(
        options: RaftOptions,
        sm: S,
        network: N,
        refusal: PeerRefusal,
    ) -> Result<Self, RaftStartError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        options.validate()?;
        let config = Arc::new(options.raft_config()?);
        let dir = options.dir.clone();
        let (log, sm) = tokio::task::spawn_blocking(move || {
            let log = LogStore::open(&dir)?;
            let sm = StateMachineStore::open(&dir, sm)?;
            Ok::<_, RaftStartError>((log, sm))
        })
        .await
        .map_err(io::Error::other)??;
        let raft = Raft::new(options.node_id, config, network, log.clone(), sm.clone())
            .await
            .map_err(|e| RaftStartError::Raft(e.to_string()))?;
        Ok(MetadataRaft {
            node_id: options.node_id,
            voters: options.voters,
            raft,
            log,
            sm,
            max_frame_bytes: options.max_frame_bytes,
            cluster_id: options.cluster_id,
            refusal,
            server: None,
        })
    }

    /// Starts a node that talks to the other voters over TCP and serves
    /// their RPCs on `listener` (the node's CONTROLLER listener).
    pub async fn start_tcp(
        options: RaftOptions,
        sm: S,
        listener: TcpListener,
    ) -> Result<Self, RaftStartError> {
        let mut node = Self::start_tcp_client(options, sm).await?;
        let server = serve_tcp(
            listener,
            node.raft.clone(),
            node.max_frame_bytes,
            node.cluster_id.clone(),
        );
        node.server = Some(tokio::spawn(server));
        Ok(node)
    }

    /// Starts a node that talks to the other voters over TCP but serves no
    /// listener itself: the caller accepts connections on the node's
    /// CONTROLLER listener and hands raft ones to
    /// [`serve_raft_connection`](crate::network::serve_raft_connection)
    /// with [`raft`](MetadataRaft::raft) and [`cluster_id`](Self::cluster_id).
    pub async fn start_tcp_client(options: RaftOptions, sm: S) -> Result<Self, RaftStartError> {
        let network = TcpNetworkFactory::new(options.max_frame_bytes, options.cluster_id.clone());
        let refusal = network.refusal();
        Self::start_with(options, sm, network, refusal).await
    }

    /// The bound on one RPC frame this node was started with.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// The cluster id this node names in its requests and requires of
    /// requests it serves.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The last refusal of this node's raft requests by a peer of another
    /// cluster, as one line naming the setting to fix (`None` until then).
    pub fn peer_refusal(&self) -> PeerRefusal {
        self.refusal.clone()
    }

    /// Starts a node on an in-memory router (tests).
    pub async fn start_mem(
        options: RaftOptions,
        sm: S,
        router: &MemRouter,
    ) -> Result<Self, RaftStartError> {
        let id = options.node_id;
        let node = Self::start(options, sm, router.factory(id)).await?;
        router.register(id, node.raft.clone());
        Ok(node)
    }

    /// Bootstraps the voter set, once: a node whose log already holds a
    /// membership (it was initialized before, or joined one that was)
    /// returns `Ok` without doing anything. Every voter may call it with
    /// the same voters.
    pub async fn initialize(&self) -> Result<(), RaftStartError> {
        let initialized = self
            .raft
            .is_initialized()
            .await
            .map_err(|e| RaftStartError::Raft(e.to_string()))?;
        if initialized {
            return Ok(());
        }
        let members: BTreeMap<u64, BasicNode> = self
            .voters
            .iter()
            .map(|(id, addr)| (*id, BasicNode::new(addr)))
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(RaftStartError::Raft(e.to_string())),
        }
    }

    /// Appends `payload` to the metadata log and waits until it is committed
    /// and applied here; returns its log index. Only the leader accepts
    /// proposals. A leader cut off from the quorum answers only once it
    /// learns of a newer leader, so callers bound the wait.
    pub async fn propose(&self, payload: Bytes) -> Result<u64, ProposeError> {
        match self.raft.client_write(payload).await {
            Ok(resp) => Ok(resp.data),
            Err(e) => match e.forward_to_leader() {
                Some(fwd) => Err(ProposeError::NotLeader {
                    leader: fwd.leader_id,
                    endpoint: fwd.leader_node.as_ref().map(|n| n.addr.clone()),
                }),
                None => Err(ProposeError::Stopped(e.to_string())),
            },
        }
    }

    /// The node id.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// The highest log index this node knows to be committed (persisted).
    pub fn committed(&self) -> Option<u64> {
        self.log.committed().map(|id| id.index)
    }

    /// The highest log index applied to the state machine.
    pub fn applied(&self) -> Option<u64> {
        self.sm.last_applied().map(|id| id.index)
    }

    /// Reads the state machine.
    pub fn read<T>(&self, f: impl FnOnce(&S) -> T) -> T {
        self.sm.read(f)
    }

    /// The underlying openraft handle (metrics, membership changes,
    /// incoming RPCs for a custom transport).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Stops raft and the RPC server. The directory can be reopened with
    /// `start` afterwards.
    pub async fn shutdown(mut self) -> Result<(), RaftStartError> {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| RaftStartError::Raft(e.to_string()))
    }
}

impl<S> Drop for MetadataRaft<S> {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}
