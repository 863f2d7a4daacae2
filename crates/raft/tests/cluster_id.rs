//! Raft requests name their cluster: three voters of one cluster over TCP
//! refuse requests from another (or from none) before their raft sees
//! them, so a misconfigured node cannot move the quorum's term or leader.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Node, Recorder, agreed_leader, options, propose, wait_for};
use openraft::error::RPCError;
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::{BasicNode, LogId, Vote};
use tokio::net::TcpListener;
use weir_raft::MetadataRaft;
use weir_raft::network::{MAX_FRAME_BYTES, TcpNetworkFactory};

const OURS: &str = "quorum-a";

fn rpc_option() -> RPCOption {
    RPCOption::new(Duration::from_secs(5))
}

/// (term, leader) as each node sees it.
fn terms(nodes: &[Node]) -> Vec<(u64, Option<u64>)> {
    nodes
        .iter()
        .map(|n| {
            let m = n.raft().metrics().borrow().clone();
            (m.current_term, m.current_leader)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_another_cluster_are_refused_before_raft_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in 1..=3u64 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        voters.insert(id, l.local_addr().unwrap().to_string());
        listeners.insert(id, l);
    }
    let mut nodes = Vec::new();
    for (id, listener) in listeners {
        let mut opts = options(id, dir.path(), &voters);
        opts.cluster_id = Some(OURS.into());
        nodes.push(
            MetadataRaft::start_tcp(opts, Recorder::default(), listener)
                .await
                .unwrap(),
        );
    }
    for node in &nodes {
        node.initialize().await.unwrap();
    }
    let leader = wait_for("a leader", || agreed_leader(nodes.iter())).await;
    let all: Vec<&Node> = nodes.iter().collect();
    propose(&all, b"before").await;
    let before = terms(&nodes);

    // What a leader of another cluster at a far higher term sends: every
    // voter that took it would step down and follow node 9.
    let last = LogId::new(openraft::CommittedLeaderId::new(before[0].0 + 100, 9), 1000);
    let hostile_append = || AppendEntriesRequest {
        vote: Vote::new_committed(before[0].0 + 100, 9),
        prev_log_id: None,
        entries: vec![],
        leader_commit: Some(last),
    };
    let hostile_vote = || VoteRequest::new(Vote::new(before[0].0 + 100, 9), Some(last));
    for (theirs, named) in [(Some("quorum-b"), "quorum-b"), (None, "(none)")] {
        let mut factory = TcpNetworkFactory::new(MAX_FRAME_BYTES, theirs.map(String::from));
        let refusal = factory.refusal();
        for (id, addr) in &voters {
            let mut client = factory.new_client(*id, &BasicNode::new(addr)).await;
            let err = client
                .append_entries(hostile_append(), rpc_option())
                .await
                .expect_err("an append from another cluster is refused");
            assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
            let err = client
                .vote(hostile_vote(), rpc_option())
                .await
                .expect_err("a vote request from another cluster is refused");
            assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
        }
        let reason = refusal.borrow().clone().expect("the refusal is published");
        assert!(
            reason.contains(&format!("belongs to cluster {OURS}, this node to {named}"))
                && reason.contains("controller.quorum.voters"),
            "{reason}"
        );
    }

    // Nothing moved: the same leader in the same term commits on.
    assert_eq!(terms(&nodes), before);
    propose(&all, b"after").await;
    assert_eq!(terms(&nodes), before);
    assert_eq!(agreed_leader(nodes.iter()), Some(leader));

    // A request naming this cluster is served: a stale vote request gets
    // the voter's answer (not granted).
    let mut factory = TcpNetworkFactory::new(MAX_FRAME_BYTES, Some(OURS.into()));
    let mut client = factory.new_client(1, &BasicNode::new(&voters[&1])).await;
    let resp = client
        .vote(VoteRequest::new(Vote::new(0, 9), None), rpc_option())
        .await
        .expect("served");
    assert!(!resp.vote_granted);
    assert!(factory.refusal().borrow().is_none());
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
