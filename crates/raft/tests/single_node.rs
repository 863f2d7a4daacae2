//! One voter: start, propose, restart from disk, snapshots.

use crate::common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::{Recorder, applied, bounded, options, wait_for};
use weir_raft::MetadataRaft;

fn voters() -> BTreeMap<u64, String> {
    BTreeMap::from([(1, "127.0.0.1:1".to_string())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_and_recover_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let router = weir_raft::network::MemRouter::default();
    let opts = options(1, dir.path(), &voters());

    let node = MetadataRaft::start_mem(opts.clone(), Recorder::default(), &router)
        .await
        .unwrap();
    node.initialize().await.unwrap();
    wait_for("node 1 leads", || (node.leader() == Some(1)).then_some(())).await;
    let mut indexes = Vec::new();
    for i in 0..5u8 {
        indexes.push(
            bounded("propose", node.propose(Bytes::from(vec![i])))
                .await
                .unwrap(),
        );
    }
    assert!(
        indexes.windows(2).all(|w| w[0] < w[1]),
        "indexes increase: {indexes:?}"
    );
    let before = applied(&node);
    assert_eq!(
        before.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(),
        (0..5u8).map(|i| vec![i]).collect::<Vec<_>>()
    );
    assert_eq!(node.committed(), indexes.last().copied());
    node.shutdown().await.unwrap();

    // Restart: the state machine is rebuilt from the log alone, and a second
    // initialize is a no-op.
    let node = MetadataRaft::start_mem(opts, Recorder::default(), &router)
        .await
        .unwrap();
    node.initialize().await.unwrap();
    wait_for("replayed state", || {
        (applied(&node) == before).then_some(())
    })
    .await;
    wait_for("node 1 leads again", || {
        (node.leader() == Some(1)).then_some(())
    })
    .await;
    let next = bounded("propose", node.propose(Bytes::from_static(b"after")))
        .await
        .unwrap();
    assert!(next > *indexes.last().unwrap());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_from_snapshot_and_purged_log() {
    let dir = tempfile::tempdir().unwrap();
    let router = weir_raft::network::MemRouter::default();
    let mut opts = options(1, dir.path(), &voters());
    opts.snapshot_after_entries = 4;
    opts.entries_kept_after_snapshot = 0;

    let node = MetadataRaft::start_mem(opts.clone(), Recorder::default(), &router)
        .await
        .unwrap();
    node.initialize().await.unwrap();
    wait_for("node 1 leads", || (node.leader() == Some(1)).then_some(())).await;
    for i in 0..12u8 {
        bounded("propose", node.propose(Bytes::from(vec![i])))
            .await
            .unwrap();
    }
    wait_for("a snapshot and a purge", || {
        let m = node.raft().metrics().borrow().clone();
        (m.snapshot.is_some() && m.purged.is_some()).then_some(())
    })
    .await;
    let before = applied(&node);
    node.shutdown().await.unwrap();
    assert!(
        dir.path()
            .join("node-1")
            .join(weir_raft::state_machine::SNAPSHOT_FILE)
            .exists()
    );

    let node = MetadataRaft::start_mem(opts, Recorder::default(), &router)
        .await
        .unwrap();
    wait_for("restored state", || {
        (applied(&node) == before).then_some(())
    })
    .await;
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn start_refuses_a_node_outside_the_voters() {
    let dir = tempfile::tempdir().unwrap();
    let router = weir_raft::network::MemRouter::default();
    let opts = options(7, dir.path(), &voters());
    let err = MetadataRaft::start_mem(opts, Recorder::default(), &router)
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("node.id 7 is not among the voters"),
        "{err}"
    );
}
