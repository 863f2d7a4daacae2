//! Three controller nodes over weir-raft's TCP transport on loopback.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use tokio::net::TcpListener;
use weir_cluster::{ControllerError, ControllerNode};
use weir_metadata::controller::NewTopic;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topic_over_tcp_converges() {
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
            ControllerNode::start_tcp(opts, config(id), listener)
                .await
                .unwrap(),
        );
    }
    for n in &nodes {
        n.raft.initialize().await.unwrap();
    }
    register_brokers(&nodes, 1..=3, 0).await;
    let topic = NewTopic {
        name: "over-tcp".into(),
        num_partitions: 4,
        replication_factor: 3,
        ..Default::default()
    };
    let id = on_leader(&nodes, |c| {
        let topic = topic.clone();
        async move { c.create_topic(topic).await }
    })
    .await;
    let t = wait_for("every image holds the topic", || {
        topic_everywhere(&nodes, "over-tcp")
    })
    .await;
    assert_eq!(t.id, id);
    assert!(t.partitions.values().all(|p| p.isr.len() == 3));
    wait_for("all images equal", || images_equal(&nodes)).await;

    let leader = agreed_leader(&nodes).unwrap();
    let follower = nodes.iter().find(|n| n.node_id() != leader).unwrap();
    let err = follower
        .controller
        .create_topic(topic.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ControllerError::NotController {
            leader: Some(leader)
        }
    );
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
