//! Shared helpers for the weir-cluster tests: a three-voter quorum of
//! controller nodes, fake brokers, and deadline-bounded waits.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use weir_cluster::{ControllerError, ControllerNode, QuorumController, QuorumControllerConfig};
use weir_metadata::controller::{ControllerConfig, Heartbeat, Registration};
use weir_metadata::{MetadataImage, Topic};
use weir_protocol::Uuid;
use weir_raft::RaftOptions;
use weir_raft::network::MemRouter;

pub const DEADLINE: Duration = Duration::from_secs(30);
pub const SESSION_TIMEOUT_MS: u64 = 9_000;

pub fn mem_voters() -> BTreeMap<u64, String> {
    (1..=3).map(|id| (id, format!("mem-{id}"))).collect()
}

/// Fast raft timeouts for tests on a small machine.
pub fn options(id: u64, dir: &Path, voters: &BTreeMap<u64, String>) -> RaftOptions {
    let mut o = RaftOptions::new(id, dir.join(format!("node-{id}")), voters.clone());
    o.heartbeat_interval_ms = 50;
    o.election_timeout_min_ms = 300;
    o.election_timeout_max_ms = 600;
    o
}

pub fn config(id: u64) -> QuorumControllerConfig {
    QuorumControllerConfig {
        controller: ControllerConfig {
            session_timeout_ms: SESSION_TIMEOUT_MS,
            ..ControllerConfig::default()
        },
        seed: id,
        request_timeout: Duration::from_secs(5),
        ..QuorumControllerConfig::default()
    }
}

/// Three controller nodes on `router`, initialized.
pub async fn start_mem(
    dir: &Path,
    router: &MemRouter,
    tune: impl Fn(&mut RaftOptions),
) -> Vec<ControllerNode> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let mut opts = options(id, dir, &mem_voters());
        tune(&mut opts);
        nodes.push(
            ControllerNode::start_mem(opts, config(id), router)
                .await
                .unwrap(),
        );
    }
    for node in &nodes {
        node.raft.initialize().await.unwrap();
    }
    nodes
}

/// Polls `check` until it returns `Some`, failing the test after `DEADLINE`.
pub async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Bounds a future by `DEADLINE`.
pub async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {DEADLINE:?}: {what}"))
}

/// The leader all the given nodes agree on, with that leader among them.
pub fn agreed_leader<'a>(nodes: impl IntoIterator<Item = &'a ControllerNode>) -> Option<u64> {
    let nodes: Vec<&ControllerNode> = nodes.into_iter().collect();
    let leader = nodes.first()?.controller.leader()?;
    let all_agree = nodes.iter().all(|n| n.controller.leader() == Some(leader));
    let present = nodes.iter().any(|n| n.node_id() == leader);
    (all_agree && present).then_some(leader)
}

pub fn node(nodes: &[ControllerNode], id: u64) -> &ControllerNode {
    nodes.iter().find(|n| n.node_id() == id).unwrap()
}

/// Runs `request` on whichever of `nodes` leads, retrying while leadership
/// moves (NOT_CONTROLLER, timed out); any other error fails the test.
pub async fn on_leader<'a, T, F, Fut>(
    nodes: impl IntoIterator<Item = &'a ControllerNode>,
    request: F,
) -> T
where
    F: Fn(QuorumController) -> Fut,
    Fut: Future<Output = Result<T, ControllerError>>,
{
    let nodes: Vec<&ControllerNode> = nodes.into_iter().collect();
    bounded("a request on the leader", async {
        loop {
            let leader = wait_for("a leader", || agreed_leader(nodes.iter().copied())).await;
            let node = nodes.iter().find(|n| n.node_id() == leader).unwrap();
            match request(node.controller.clone()).await {
                Ok(v) => return v,
                Err(ControllerError::NotController { .. } | ControllerError::TimedOut) => {
                    tokio::task::yield_now().await
                }
                Err(e) => panic!("request failed: {e}"),
            }
        }
    })
    .await
}

pub fn registration(id: i32) -> Registration {
    Registration {
        broker_id: id,
        incarnation_id: Uuid([id as u8; 16]),
        endpoints: vec![],
        rack: None,
    }
}

/// Registers brokers `ids` at `now_ms` and heartbeats each once caught up
/// (at `now_ms`), so they are unfenced; returns their epochs.
pub async fn register_brokers(
    nodes: &[ControllerNode],
    ids: impl IntoIterator<Item = i32>,
    now_ms: u64,
) -> BTreeMap<i32, i64> {
    let mut epochs = BTreeMap::new();
    for id in ids {
        let epoch = on_leader(nodes, |c| async move {
            c.register_broker(registration(id), now_ms).await
        })
        .await;
        epochs.insert(id, epoch);
    }
    for (&id, &epoch) in &epochs {
        let reply = on_leader(nodes, |c| {
            let offset = nodes
                .iter()
                .map(|n| n.images.current().index)
                .max()
                .unwrap_or(0);
            heartbeat(c, id, epoch, offset, now_ms)
        })
        .await;
        assert!(!reply.is_fenced, "broker {id} unfenced");
    }
    epochs
}

pub async fn heartbeat(
    c: QuorumController,
    broker_id: i32,
    broker_epoch: i64,
    offset: u64,
    now_ms: u64,
) -> Result<weir_metadata::controller::HeartbeatReply, ControllerError> {
    let hb = Heartbeat {
        broker_id,
        broker_epoch,
        current_metadata_offset: offset as i64,
        want_fence: false,
        want_shutdown: false,
    };
    c.heartbeat(hb, now_ms).await
}

pub fn image(node: &ControllerNode) -> MetadataImage {
    node.images.current().image.clone()
}

/// The topic `name` when every node's image holds it identically.
pub fn topic_everywhere(nodes: &[ControllerNode], name: &str) -> Option<Topic> {
    let first = image(nodes.first()?).topic_by_name(name)?.clone();
    nodes
        .iter()
        .all(|n| image(n).topic_by_name(name) == Some(&first))
        .then_some(first)
}

/// Every node's image, when they are all equal (same index too).
pub fn images_equal(nodes: &[ControllerNode]) -> Option<MetadataImage> {
    let first = nodes.first()?.images.current();
    nodes
        .iter()
        .all(|n| *n.images.current() == *first)
        .then(|| first.image.clone())
}
