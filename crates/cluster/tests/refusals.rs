//! Bad configurations are refused with one line: a node whose
//! `controller.quorum.voters` (hence cluster id) differs from the quorum's
//! has its raft requests refused and its registration refused for good,
//! and a second live process with a node id already registered gives up
//! once the old session could have expired.

use crate::common;
use crate::controller_listener::{
    CLUSTER_ID, SESSION_TIMEOUT_MS, active, client_config, node_config, unfenced,
};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bounded, wait_for};
use tokio::net::TcpListener;
use weir_cluster::{
    BrokerInfo, BrokerLifecycle, ClusterNode, ClusterNodeConfig, ControllerClient, LifecycleConfig,
};

/// Slower elections than the shared helpers', so the quorum's term stays
/// put on a loaded machine unless something disturbs it.
fn steady(mut config: ClusterNodeConfig) -> ClusterNodeConfig {
    config.raft.heartbeat_interval_ms = 100;
    config.raft.election_timeout_min_ms = 1500;
    config.raft.election_timeout_max_ms = 3000;
    config
}

async fn start_quorum(dir: &Path) -> (Vec<ClusterNode>, BTreeMap<u64, String>) {
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in 1..=3u64 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        voters.insert(id, l.local_addr().unwrap().to_string());
        listeners.insert(id, l);
    }
    let mut nodes = Vec::new();
    for (id, l) in listeners {
        let config = steady(node_config(id, dir, &voters));
        nodes.push(ClusterNode::start(config, l).await.unwrap());
    }
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    wait_for("one active controller", || active(&nodes)).await;
    (nodes, voters)
}

/// (term, leader, voters) as each node's raft sees them.
fn raft_view(nodes: &[ClusterNode]) -> Vec<(u64, Option<u64>, Vec<u64>)> {
    nodes
        .iter()
        .map(|n| {
            let m = n.controller_node().raft.raft().metrics().borrow().clone();
            let voters = m.membership_config.voter_ids().collect();
            (m.current_term, m.current_leader, voters)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_other_voters_is_refused_and_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_quorum(dir.path()).await;
    let before = raft_view(&nodes);

    // Node 0 lists itself beside the three real voters: its cluster id
    // (derived from the voters) differs, it is the lowest id so it
    // initializes its own voter set and campaigns at the real voters.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut wrong_voters = voters.clone();
    wrong_voters.insert(0, l.local_addr().unwrap().to_string());
    let mut config = steady(node_config(0, dir.path(), &wrong_voters));
    config.cluster_id = Some("other-cluster".into());
    if let Some((info, _)) = &mut config.broker {
        info.cluster_id = "other-cluster".into();
    }
    let fourth = ClusterNode::start(config, l).await.unwrap();

    let reason = bounded("node 0's registration refused", fourth.refused()).await;
    assert!(
        reason.contains("refused node 0")
            && reason.contains("INCONSISTENT_CLUSTER_ID")
            && reason.contains("controller.quorum.voters"),
        "{reason}"
    );
    assert!(!reason.contains('\n'), "one line: {reason}");
    let state = fourth.broker_state().unwrap().borrow().clone();
    assert!(state.stopped && state.broker_epoch.is_none(), "{state:?}");

    let mut refusal = fourth.controller_node().raft.peer_refusal();
    let raft_reason = bounded(
        "node 0's raft requests refused",
        refusal.wait_for(|r| r.is_some()),
    )
    .await
    .unwrap()
    .clone()
    .unwrap();
    assert!(
        raft_reason.contains(&format!(
            "belongs to cluster {CLUSTER_ID}, this node to other-cluster"
        )) && raft_reason.contains("controller.quorum.voters"),
        "{raft_reason}"
    );

    // The quorum did not move: same term, same leader, same voters, and
    // node 0 is no broker of it.
    assert_eq!(raft_view(&nodes), before);
    for n in &nodes {
        assert!(n.images().current().image.broker(0).is_none());
    }
    fourth.stop().await.unwrap();
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_live_process_of_a_node_id_gives_up_after_the_session_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_quorum(dir.path()).await;
    let first = nodes[0].broker_state().unwrap();
    let first_epoch = first.borrow().broker_epoch.unwrap();
    let registered = nodes[0]
        .images()
        .current()
        .image
        .broker(1)
        .cloned()
        .unwrap();

    let client = Arc::new(ControllerClient::new(voters, client_config()));
    let images = nodes[0].images();
    let offset = Arc::new(move || images.current().index as i64);
    let info = BrokerInfo {
        node_id: 1,
        cluster_id: CLUSTER_ID.into(),
        listeners: vec![],
        rack: None,
    };
    let config = LifecycleConfig {
        heartbeat_interval: Duration::from_millis(100),
        shutdown_timeout: Duration::from_secs(5),
    };
    let session_timeout = Duration::from_millis(SESSION_TIMEOUT_MS);
    let started = Instant::now();
    let second =
        BrokerLifecycle::start_with_session_timeout(info, config, client, offset, session_timeout);
    let reason = bounded("the second process refused", second.refused()).await;
    // Not before the first one's session could have expired (a restarted
    // broker waits that long for its old registration to lapse).
    assert!(
        started.elapsed() >= session_timeout * 4,
        "gave up after {:?}",
        started.elapsed()
    );
    assert!(
        reason.contains("refused node 1")
            && reason.contains("DUPLICATE_BROKER_REGISTRATION")
            && reason.contains("node.id must be unique"),
        "{reason}"
    );
    let state = second.state().borrow().clone();
    assert!(state.stopped && state.broker_epoch.is_none(), "{state:?}");

    // The first process kept its registration throughout.
    let now = first.borrow().clone();
    assert_eq!(now.broker_epoch, Some(first_epoch));
    assert!(!now.fenced && now.refused.is_none(), "{now:?}");
    let still = nodes[0]
        .images()
        .current()
        .image
        .broker(1)
        .cloned()
        .unwrap();
    assert_eq!(still.incarnation_id, registered.incarnation_id);
    assert_eq!(still.epoch, registered.epoch);
    assert!(!still.fenced);
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
