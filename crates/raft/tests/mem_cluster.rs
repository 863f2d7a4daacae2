//! Three voters on the in-memory router: election, replication order,
//! leader isolation, restart and catch-up.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use common::{Node, Recorder, agreed_leader, applied, bounded, options, propose, wait_for};
use weir_raft::network::MemRouter;
use weir_raft::{MetadataRaft, RaftOptions};

fn voters() -> BTreeMap<u64, String> {
    (1..=3).map(|id| (id, format!("mem-{id}"))).collect()
}

async fn start(dir: &Path, router: &MemRouter, tune: impl Fn(&mut RaftOptions)) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let mut opts = options(id, dir, &voters());
        tune(&mut opts);
        nodes.push(
            MetadataRaft::start_mem(opts, Recorder::default(), router)
                .await
                .unwrap(),
        );
    }
    for node in &nodes {
        node.initialize().await.unwrap();
    }
    nodes
}

fn all_applied_equal(nodes: &[&Node], len: usize) -> Option<Vec<(u64, Vec<u8>)>> {
    let first = applied(nodes[0]);
    (first.len() == len && nodes.iter().all(|n| applied(n) == first)).then_some(first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_replicate_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start(dir.path(), &router, |_| {}).await;
    let all: Vec<&Node> = nodes.iter().collect();
    wait_for("a leader", || agreed_leader(all.iter().copied())).await;

    let mut indexes = Vec::new();
    for i in 0..20u8 {
        indexes.push(propose(&all, &[i]).await);
    }
    assert!(indexes.windows(2).all(|w| w[0] < w[1]));
    let seq = wait_for("every node applied all 20", || all_applied_equal(&all, 20)).await;
    let payloads: Vec<Vec<u8>> = seq.iter().map(|(_, p)| p.clone()).collect();
    assert_eq!(payloads, (0..20u8).map(|i| vec![i]).collect::<Vec<_>>());
    assert_eq!(seq.iter().map(|(i, _)| *i).collect::<Vec<_>>(), indexes);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_leader_loses_its_uncommitted_entries() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start(dir.path(), &router, |_| {}).await;
    let all: Vec<&Node> = nodes.iter().collect();
    for i in 0..5u8 {
        propose(&all, &[b'a', i]).await;
    }
    wait_for("5 applied everywhere", || all_applied_equal(&all, 5)).await;

    let old = agreed_leader(all.iter().copied()).unwrap();
    let old_node = nodes.iter().find(|n| n.node_id() == old).unwrap();
    let rest: Vec<&Node> = nodes.iter().filter(|n| n.node_id() != old).collect();
    router.isolate(old);

    // The cut-off leader still accepts entries into its own log.
    let last_before = old_node.raft().metrics().borrow().last_log_index;
    let mut lost = Vec::new();
    for i in 0..3u8 {
        let raft = old_node.raft().clone();
        lost.push(tokio::spawn(async move {
            raft.client_write(Bytes::from(vec![b'x', i])).await
        }));
    }
    wait_for("the isolated leader appended its 3 entries", || {
        let last = old_node.raft().metrics().borrow().last_log_index;
        (last >= last_before.map(|l| l + 3)).then_some(())
    })
    .await;

    let new = wait_for("a new leader among the majority", || {
        agreed_leader(rest.iter().copied()).filter(|l| *l != old)
    })
    .await;
    assert_ne!(new, old);
    for i in 0..3u8 {
        propose(&rest, &[b'b', i]).await;
    }
    router.heal();

    let seq = wait_for("all 3 nodes agree on 8 entries", || {
        all_applied_equal(&all, 8)
    })
    .await;
    assert!(
        seq.iter().all(|(_, p)| p[0] != b'x'),
        "an uncommitted entry of the isolated leader was applied: {seq:?}"
    );
    let tags: Vec<u8> = seq.iter().map(|(_, p)| p[0]).collect();
    assert_eq!(tags, b"aaaaabbb");
    for handle in lost {
        let result = bounded("the lost proposal is answered", handle)
            .await
            .unwrap();
        let err = result.expect_err("a write of the deposed leader must not succeed");
        assert!(
            err.forward_to_leader::<openraft::BasicNode>().is_some(),
            "{err}"
        );
    }

    // The deposed leader's log on disk lost the conflicting suffix too: it
    // restarts and replays exactly the agreed sequence.
    let mut nodes = nodes;
    let pos = nodes.iter().position(|n| n.node_id() == old).unwrap();
    let old_node = nodes.remove(pos);
    router.unregister(old);
    old_node.shutdown().await.unwrap();
    let restarted = MetadataRaft::start_mem(
        options(old, dir.path(), &voters()),
        Recorder::default(),
        &router,
    )
    .await
    .unwrap();
    wait_for("the restarted node replays the agreed entries", || {
        (applied(&restarted) == seq).then_some(())
    })
    .await;
    nodes.push(restarted);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_catches_up_through_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let tune = |o: &mut RaftOptions| {
        o.snapshot_after_entries = 5;
        o.entries_kept_after_snapshot = 0;
    };
    let mut nodes = start(dir.path(), &router, tune).await;
    {
        let all: Vec<&Node> = nodes.iter().collect();
        for i in 0..4u8 {
            propose(&all, &[i]).await;
        }
        wait_for("4 applied everywhere", || all_applied_equal(&all, 4)).await;
    }
    let leader = agreed_leader(nodes.iter()).unwrap();
    let pos = nodes.iter().position(|n| n.node_id() != leader).unwrap();
    let follower = nodes.remove(pos);
    let follower_id = follower.node_id();
    router.unregister(follower_id);
    follower.shutdown().await.unwrap();

    {
        let live: Vec<&Node> = nodes.iter().collect();
        for i in 4..20u8 {
            propose(&live, &[i]).await;
        }
        // The leader's log behind its snapshot is gone: catching up needs
        // the snapshot.
        wait_for("the leader purged its log", || {
            let m = live
                .iter()
                .find(|n| n.node_id() == leader)?
                .raft()
                .metrics()
                .borrow()
                .clone();
            m.purged.filter(|p| p.index > 6).map(|_| ())
        })
        .await;
    }

    let mut opts = options(follower_id, dir.path(), &voters());
    tune(&mut opts);
    let restarted = MetadataRaft::start_mem(opts, Recorder::default(), &router)
        .await
        .unwrap();
    restarted.initialize().await.unwrap();
    nodes.push(restarted);
    let all: Vec<&Node> = nodes.iter().collect();
    let seq = wait_for("the restarted follower caught up", || {
        all_applied_equal(&all, 20)
    })
    .await;
    assert_eq!(
        seq.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(),
        (0..20u8).map(|i| vec![i]).collect::<Vec<_>>()
    );
    let restarted = nodes.last().unwrap();
    assert!(
        restarted.raft().metrics().borrow().snapshot.is_some(),
        "the follower holds a snapshot"
    );
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
