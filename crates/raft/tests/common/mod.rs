//! Shared helpers for the weir-raft tests: a recording state machine,
//! cluster set-up and deadline-bounded waits.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weir_raft::{MetadataRaft, MetadataStateMachine, ProposeError, RaftOptions};

/// A state machine that records every applied payload with its index.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recorder {
    pub applied: Vec<(u64, Vec<u8>)>,
}

impl MetadataStateMachine for Recorder {
    fn apply(&mut self, index: u64, payload: &[u8]) -> Result<(), String> {
        self.applied.push((index, payload.to_vec()));
        Ok(())
    }

    fn snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(&self.applied).expect("encode")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.applied = serde_json::from_slice(snapshot).map_err(|e| e.to_string())?;
        Ok(())
    }
}

pub type Node = MetadataRaft<Recorder>;

/// Fast timeouts for tests on a small machine.
pub fn options(id: u64, dir: &Path, voters: &BTreeMap<u64, String>) -> RaftOptions {
    let mut o = RaftOptions::new(id, dir.join(format!("node-{id}")), voters.clone());
    o.heartbeat_interval_ms = 50;
    o.election_timeout_min_ms = 300;
    o.election_timeout_max_ms = 600;
    o
}

pub const DEADLINE: Duration = Duration::from_secs(30);

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
pub fn agreed_leader<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Option<u64> {
    let nodes: Vec<&Node> = nodes.into_iter().collect();
    let leader = nodes.first()?.leader()?;
    let all_agree = nodes.iter().all(|n| n.leader() == Some(leader));
    let present = nodes.iter().any(|n| n.node_id() == leader);
    (all_agree && present).then_some(leader)
}

/// Proposes at whichever of `nodes` leads, retrying while leadership moves.
pub async fn propose(nodes: &[&Node], payload: &[u8]) -> u64 {
    bounded("propose", async {
        loop {
            let leader = wait_for("a leader", || agreed_leader(nodes.iter().copied())).await;
            let node = nodes
                .iter()
                .find(|n| n.node_id() == leader)
                .expect("leader present");
            match node.propose(Bytes::copy_from_slice(payload)).await {
                Ok(index) => return index,
                Err(ProposeError::NotLeader { .. }) => tokio::task::yield_now().await,
                Err(e) => panic!("propose failed: {e}"),
            }
        }
    })
    .await
}

/// The payloads a node applied, in order.
pub fn applied(node: &Node) -> Vec<(u64, Vec<u8>)> {
    node.read(|r| r.applied.clone())
}
