//! Broker-only nodes: the metadata log fetched from the active controller
//! (`__cluster_metadata` Fetch and FetchSnapshot on the CONTROLLER
//! listener) into a [`MetadataObserver`]'s image, across a controller
//! failover, and from a snapshot when the controller no longer keeps the
//! batches.

use crate::common;
use crate::controller_listener::{
    CLUSTER_ID, active, client_config, create, node_config, only_error, start_cluster, unfenced,
};

use std::collections::BTreeMap;

use common::{bounded, wait_for};
use tokio::net::TcpListener;
use weir_client::Connection;
use weir_cluster::listener::METADATA_TOPIC;
use weir_cluster::listener::metadata_fetch::METADATA_TOPIC_ID;
use weir_cluster::{ClusterNode, ControllerClient, MetadataObserver, ObserverConfig};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::FetchRequest;
use weir_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

fn observer_config(cluster_id: &str) -> ObserverConfig {
    let mut c = ObserverConfig::new(7);
    c.cluster_id = Some(cluster_id.into());
    c.client = client_config();
    c
}

/// The observer's image once it is the active controller's, at the same
/// index.
async fn caught_up(observer: &MetadataObserver, nodes: &[ClusterNode], topics: &[&str]) {
    wait_for("the observer's image equals the controller's", || {
        let id = active(nodes)?;
        let leader = nodes.iter().find(|n| n.node_id() == id)?.images().current();
        let seen = observer.images().current();
        let all = topics.iter().all(|t| seen.image.topic_by_name(t).is_some());
        (all && seen.index == leader.index && seen.image == leader.image).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_only_node_follows_the_metadata_log_across_a_controller_failover() {
    let dir = tempfile::tempdir().unwrap();
    let (mut nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let client = ControllerClient::new(voters.clone(), client_config());
    let r = client.send(&create("before", 3, 1, false)).await.unwrap();
    assert_eq!(only_error(&r), ErrorCode::None);

    let observer = MetadataObserver::start(voters.clone(), observer_config(CLUSTER_ID));
    caught_up(&observer, &nodes, &["before"]).await;
    assert_eq!(observer.leader(), Some(controller));

    let r = client.send(&create("after", 2, 1, false)).await.unwrap();
    assert_eq!(only_error(&r), ErrorCode::None);
    caught_up(&observer, &nodes, &["before", "after"]).await;

    // The active controller stops; the observer moves to the next one.
    let at = nodes
        .iter()
        .position(|n| n.node_id() == controller)
        .unwrap();
    bounded("stop the controller", nodes.remove(at).stop())
        .await
        .unwrap();
    let next = wait_for("a new active controller", || active(&nodes)).await;
    let r = client.send(&create("failover", 1, 1, false)).await.unwrap();
    assert_eq!(only_error(&r), ErrorCode::None);
    caught_up(&observer, &nodes, &["before", "after", "failover"]).await;
    wait_for("the observer names the new controller", || {
        (observer.leader() == Some(next)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_behind_the_kept_batches_loads_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let voters = BTreeMap::from([(1u64, l.local_addr().unwrap().to_string())]);
    let mut config = node_config(1, dir.path(), &voters);
    // Two batches kept: the registration and the topics below push the
    // first ones out, so a broker starting from nothing needs a snapshot.
    config.controller.retained_batches = 2;
    let nodes = vec![ClusterNode::start(config, l).await.unwrap()];
    wait_for("node 1 active", || active(&nodes)).await;
    wait_for("broker 1 unfenced", || unfenced(&nodes[0]).then_some(())).await;
    let client = ControllerClient::new(voters.clone(), client_config());
    let names = ["t1", "t2", "t3", "t4", "t5"];
    for name in names {
        let r = client.send(&create(name, 1, 1, false)).await.unwrap();
        assert_eq!(only_error(&r), ErrorCode::None);
    }
    let observer = MetadataObserver::start(voters.clone(), observer_config(CLUSTER_ID));
    caught_up(&observer, &nodes, &names).await;
    // And it goes on with batches after the snapshot.
    let r = client.send(&create("t6", 1, 1, false)).await.unwrap();
    assert_eq!(only_error(&r), ErrorCode::None);
    caught_up(&observer, &nodes, &["t6"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_fetches_from_another_cluster_or_of_another_topic_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 1).await;
    let id = wait_for("one active controller", || active(&nodes)).await;
    // The registration is the first batch.
    wait_for("broker 1 unfenced", || unfenced(&nodes[0]).then_some(())).await;
    let mut conn = bounded("connect", Connection::connect(&voters[&id], "test"))
        .await
        .unwrap();
    let fetch = |cluster_id: &str, topic: &str| FetchRequest {
        cluster_id: Some(cluster_id.into()),
        max_wait_ms: 0,
        topics: vec![FetchTopic {
            topic: topic.into(),
            topic_id: if topic == METADATA_TOPIC {
                METADATA_TOPIC_ID
            } else {
                Default::default()
            },
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: 1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let r = conn
        .send(&fetch("another-cluster", METADATA_TOPIC))
        .await
        .unwrap();
    assert_eq!(
        ErrorCode::from_code_lossy(r.error_code),
        ErrorCode::InconsistentClusterId
    );
    let r = conn.send(&fetch(CLUSTER_ID, "orders")).await.unwrap();
    assert_eq!(
        ErrorCode::from_code_lossy(r.responses[0].partitions[0].error_code),
        ErrorCode::UnknownTopicOrPartition
    );
    let r = conn.send(&fetch(CLUSTER_ID, METADATA_TOPIC)).await.unwrap();
    let p = &r.responses[0].partitions[0];
    assert_eq!(ErrorCode::from_code_lossy(p.error_code), ErrorCode::None);
    assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
}
