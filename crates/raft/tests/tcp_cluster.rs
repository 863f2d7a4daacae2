//! Three voters over TCP on loopback, and the frame bound.

use crate::common;

use std::collections::BTreeMap;

use common::{Node, Recorder, agreed_leader, applied, options, propose, wait_for};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use weir_raft::MetadataRaft;
use weir_raft::network::{read_frame, write_frame};

fn all_applied_equal(nodes: &[&Node], len: usize) -> Option<Vec<(u64, Vec<u8>)>> {
    let first = applied(nodes[0]);
    (first.len() == len && nodes.iter().all(|n| applied(n) == first)).then_some(first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_over_tcp_survive_a_follower_restart() {
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
        let opts = options(id, dir.path(), &voters);
        nodes.push(
            MetadataRaft::start_tcp(opts, Recorder::default(), listener)
                .await
                .unwrap(),
        );
    }
    for node in &nodes {
        node.initialize().await.unwrap();
    }
    {
        let all: Vec<&Node> = nodes.iter().collect();
        wait_for("a leader", || agreed_leader(all.iter().copied())).await;
        for i in 0..5u8 {
            propose(&all, &[i]).await;
        }
        wait_for("5 applied everywhere", || all_applied_equal(&all, 5)).await;
    }

    // Kill a follower; the other two still commit.
    let leader = agreed_leader(nodes.iter()).unwrap();
    let pos = nodes.iter().position(|n| n.node_id() != leader).unwrap();
    let follower = nodes.remove(pos);
    let follower_id = follower.node_id();
    follower.shutdown().await.unwrap();
    {
        let live: Vec<&Node> = nodes.iter().collect();
        for i in 5..10u8 {
            propose(&live, &[i]).await;
        }
    }

    // Restart it on the same port and directory; it catches up.
    let addr = &voters[&follower_id];
    let listener = TcpListener::bind(addr).await.unwrap();
    let opts = options(follower_id, dir.path(), &voters);
    let restarted = MetadataRaft::start_tcp(opts, Recorder::default(), listener)
        .await
        .unwrap();
    restarted.initialize().await.unwrap();
    nodes.push(restarted);
    let all: Vec<&Node> = nodes.iter().collect();
    let seq = wait_for("the restarted follower caught up", || {
        all_applied_equal(&all, 10)
    })
    .await;
    let payloads: Vec<Vec<u8>> = seq.into_iter().map(|(_, p)| p).collect();
    assert_eq!(payloads, (0..10u8).map(|i| vec![i]).collect::<Vec<_>>());
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn frames_over_the_limit_are_refused() {
    // Reading: a length prefix over the limit is an error before any
    // payload is read or allocated.
    let (mut a, mut b) = tokio::io::duplex(64);
    a.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
    let err = read_frame(&mut b, 1024).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(
        err.to_string().contains("exceeds the limit of 1024"),
        "{err}"
    );

    // Writing: an oversized payload is refused, nothing is sent.
    let err = write_frame(&mut a, &[0u8; 2000], 1024).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);

    // A frame that ends early is an error, not a short payload.
    let (mut a, mut b) = tokio::io::duplex(64);
    a.write_all(&10u32.to_be_bytes()).await.unwrap();
    a.write_all(b"abc").await.unwrap();
    drop(a);
    let err = read_frame(&mut b, 1024).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);

    // Round trip within the limit.
    let (mut a, mut b) = tokio::io::duplex(4096);
    write_frame(&mut a, b"hello", 1024).await.unwrap();
    assert_eq!(read_frame(&mut b, 1024).await.unwrap(), b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_drops_a_connection_sending_an_oversized_frame() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let voters = BTreeMap::from([(1, addr.to_string())]);
    let node = MetadataRaft::start_tcp(
        options(1, dir.path(), &voters),
        Recorder::default(),
        listener,
    )
    .await
    .unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    // The server closes the connection instead of waiting for 4 GiB.
    let mut buf = [0u8; 1];
    let n = common::bounded(
        "the server closes",
        tokio::io::AsyncReadExt::read(&mut stream, &mut buf),
    )
    .await
    .unwrap_or(0);
    assert_eq!(n, 0);
    node.shutdown().await.unwrap();
}
