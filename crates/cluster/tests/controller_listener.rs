//! The CONTROLLER listener end to end: three cluster nodes on loopback,
//! each a controller and a broker, talking raft and the Kafka controller
//! protocol on one port per node.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{bounded, options, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weir_client::Connection;
use weir_cluster::listener::{METADATA_TOPIC, SERVED_APIS};
use weir_cluster::{
    BrokerInfo, ClusterNode, ClusterNodeConfig, ControllerClient, ControllerClientConfig,
    LifecycleConfig, QuorumControllerConfig,
};
use weir_metadata::Endpoint;
use weir_metadata::controller::ControllerConfig;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_topics_request::CreatableTopic;
use weir_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use weir_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, CreateTopicsResponse, DescribeQuorumRequest,
};

pub const SESSION_TIMEOUT_MS: u64 = 1500;
pub const CLUSTER_ID: &str = "test-cluster";

pub fn client_config() -> ControllerClientConfig {
    ControllerClientConfig {
        attempt_timeout: Duration::from_secs(1),
        deadline: Duration::from_secs(15),
        ..Default::default()
    }
}

pub fn node_config(id: u64, dir: &Path, voters: &BTreeMap<u64, String>) -> ClusterNodeConfig {
    let mut c = ClusterNodeConfig::new(options(id, dir, voters));
    c.controller = QuorumControllerConfig {
        controller: ControllerConfig {
            session_timeout_ms: SESSION_TIMEOUT_MS,
            ..ControllerConfig::default()
        },
        seed: id,
        request_timeout: Duration::from_secs(5),
        ..QuorumControllerConfig::default()
    };
    c.cluster_id = Some(CLUSTER_ID.into());
    c.tick_interval = Duration::from_millis(100);
    c.client = client_config();
    c.broker = Some((
        BrokerInfo {
            node_id: id as i32,
            cluster_id: CLUSTER_ID.into(),
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 19_090 + id as u16,
                security_protocol: 0,
            }],
            rack: None,
        },
        LifecycleConfig {
            heartbeat_interval: Duration::from_millis(100),
            shutdown_timeout: Duration::from_secs(5),
        },
    ));
    c
}

pub async fn start_cluster(dir: &Path, n: u64) -> (Vec<ClusterNode>, BTreeMap<u64, String>) {
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in 1..=n {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        voters.insert(id, l.local_addr().unwrap().to_string());
        listeners.insert(id, l);
    }
    let mut nodes = Vec::new();
    for (id, l) in listeners {
        nodes.push(
            ClusterNode::start(node_config(id, dir, &voters), l)
                .await
                .unwrap(),
        );
    }
    (nodes, voters)
}

pub fn unfenced(node: &ClusterNode) -> bool {
    node.broker_state()
        .is_some_and(|s| s.borrow().broker_epoch.is_some() && !s.borrow().fenced)
}

pub fn active(nodes: &[ClusterNode]) -> Option<u64> {
    let ids: Vec<u64> = nodes
        .iter()
        .filter(|n| n.controller().is_active())
        .map(|n| n.node_id())
        .collect();
    (ids.len() == 1).then(|| ids[0])
}

pub fn create(name: &str, partitions: i32, rf: i16, validate_only: bool) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only,
        ..Default::default()
    }
}

pub fn only_error(resp: &CreateTopicsResponse) -> ErrorCode {
    assert_eq!(resp.topics.len(), 1, "{resp:?}");
    ErrorCode::from_code_lossy(resp.topics[0].error_code)
}

fn broker_fenced_everywhere(nodes: &[&ClusterNode], id: i32) -> bool {
    nodes.iter().all(|n| {
        n.images()
            .current()
            .image
            .broker(id)
            .is_some_and(|b| b.fenced)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_register_create_topics_and_fail_over() {
    let dir = tempfile::tempdir().unwrap();
    let (mut nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;

    // From a node that is not the controller.
    let other = nodes.iter().find(|n| n.node_id() != controller).unwrap();
    let client = other.controller_client();
    let resp = bounded(
        "create rf=3",
        client.send(&create("replicated", 4, 3, false)),
    )
    .await;
    assert_eq!(only_error(&resp.unwrap()), ErrorCode::None);
    let topic = wait_for("every image holds the topic", || {
        let first = nodes[0]
            .images()
            .current()
            .image
            .topic_by_name("replicated")?
            .clone();
        nodes
            .iter()
            .all(|n| n.images().current().image.topic_by_name("replicated") == Some(&first))
            .then_some(first)
    })
    .await;
    assert_eq!(topic.partitions.len(), 4);
    assert!(
        topic
            .partitions
            .values()
            .all(|p| p.replicas.len() == 3 && p.isr.len() == 3)
    );

    let resp = client.send(&create("too-wide", 1, 4, false)).await.unwrap();
    assert_eq!(only_error(&resp), ErrorCode::InvalidReplicationFactor);
    let resp = client
        .send(&create("replicated", 1, 1, false))
        .await
        .unwrap();
    assert_eq!(only_error(&resp), ErrorCode::TopicAlreadyExists);
    let resp = client.send(&create("bad/name", 1, 1, false)).await.unwrap();
    assert_eq!(only_error(&resp), ErrorCode::InvalidTopicException);
    let resp = client
        .send(&create("no-partitions", 0, 1, false))
        .await
        .unwrap();
    assert_eq!(only_error(&resp), ErrorCode::InvalidPartitions);
    let resp = client
        .send(&create("only-checked", 2, 3, true))
        .await
        .unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);
    assert!(
        nodes.iter().all(|n| n
            .images()
            .current()
            .image
            .topic_by_name("only-checked")
            .is_none()),
        "validate_only commits nothing"
    );

    // DescribeQuorum: the leader, its term and the three voters.
    let describe = DescribeQuorumRequest {
        topics: vec![TopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![PartitionData {
                partition_index: 0,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let q = client.send(&describe).await.unwrap();
    assert_eq!(q.error_code, 0);
    let p = &q.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.leader_id as u64, controller);
    assert!(p.leader_epoch >= 1, "{p:?}");
    assert!(p.high_watermark > 0, "{p:?}");
    let mut voter_ids: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id).collect();
    voter_ids.sort();
    assert_eq!(voter_ids, vec![1, 2, 3]);
    assert!(p.observers.is_empty());
    assert!(p.current_voters.iter().all(|v| v.log_end_offset > 0));
    assert_eq!(q.nodes.len(), 3);

    // The active controller's process stops without a controlled shutdown.
    let pos = nodes
        .iter()
        .position(|n| n.node_id() == controller)
        .unwrap();
    let stopped = nodes.remove(pos);
    stopped.stop().await.unwrap();
    let next = wait_for("a new active controller", || active(&nodes)).await;
    assert_ne!(next, controller);

    let survivors: Vec<&ClusterNode> = nodes.iter().collect();
    wait_for("the stopped broker fenced on every survivor", || {
        broker_fenced_everywhere(&survivors, controller as i32).then_some(())
    })
    .await;
    // The survivors' sessions started at the same moment on the new
    // controller: they are unfenced only because they kept heartbeating.
    for n in &nodes {
        let image = n.images().current();
        for m in &nodes {
            let b = image.image.broker(m.node_id() as i32).unwrap();
            assert!(!b.fenced, "broker {} still unfenced", m.node_id());
        }
    }
    assert!(nodes.iter().all(unfenced));

    let client = Arc::new(ControllerClient::new(voters, client_config()));
    let resp = client
        .send(&create("after-failover", 2, 2, false))
        .await
        .unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);
    let resp = client
        .send(&create("after-failover-rf3", 1, 3, false))
        .await
        .unwrap();
    assert_eq!(only_error(&resp), ErrorCode::InvalidReplicationFactor);
    wait_for("survivors hold the new topic", || {
        nodes
            .iter()
            .all(|n| {
                n.images()
                    .current()
                    .image
                    .topic_by_name("after-failover")
                    .is_some()
            })
            .then_some(())
    })
    .await;
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

/// Reads until the peer closes the connection; fails on a deadline.
async fn closed(mut stream: TcpStream) {
    let mut buf = [0u8; 64];
    bounded("the connection closes", async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_frames_close_only_their_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 1).await;
    let addr = voters[&1].clone();
    wait_for("the broker unfenced", || unfenced(&nodes[0]).then_some(())).await;

    // A connection that sends half a request and then nothing.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(&[0, 0]).await.unwrap();

    // Neither raft nor Kafka.
    let mut garbage = TcpStream::connect(&addr).await.unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    closed(garbage).await;

    // A Kafka-looking size far above the bound, and a negative one.
    for size in [i32::MAX, 64 * 1024 * 1024, -5] {
        let mut big = TcpStream::connect(&addr).await.unwrap();
        big.write_all(&size.to_be_bytes()).await.unwrap();
        big.write_all(&[0, 18, 0, 3]).await.unwrap();
        closed(big).await;
    }

    // A raft-looking frame far above its bound, and one of garbage JSON.
    let mut raft_big = TcpStream::connect(&addr).await.unwrap();
    raft_big.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    raft_big.write_all(b"{").await.unwrap();
    closed(raft_big).await;
    let mut raft_junk = TcpStream::connect(&addr).await.unwrap();
    raft_junk.write_all(&5u32.to_be_bytes()).await.unwrap();
    raft_junk.write_all(b"{junk").await.unwrap();
    closed(raft_junk).await;

    // Random bytes after a valid-looking size.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20 {
        let mut body = vec![0u8; 64];
        for b in body.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
        body[0] = 0;
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&64i32.to_be_bytes()).await.unwrap();
        s.write_all(&body).await.unwrap();
        // Either answered (a decodable request) or closed: never a hang.
        let mut buf = [0u8; 4];
        let _ = bounded("an answer or a close", s.read(&mut buf)).await;
    }

    // Other connections are unaffected: ApiVersions advertises exactly what
    // is served, and requests are answered.
    let mut conn = bounded("connect", Connection::connect(&addr, "test"))
        .await
        .unwrap();
    let versions = conn.send(&ApiVersionsRequest::default()).await.unwrap();
    let mut keys: Vec<i16> = versions.api_keys.iter().map(|k| k.api_key).collect();
    keys.sort();
    let mut served: Vec<i16> = SERVED_APIS.iter().map(|k| *k as i16).collect();
    served.sort();
    assert_eq!(keys, served);
    let resp = conn
        .send(&create("still-served", 1, 1, false))
        .await
        .unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);
    assert!(unfenced(&nodes[0]));
    drop(idle);
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_cluster_keeps_its_metadata_and_brokers_register_again() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let client = ControllerClient::new(voters.clone(), client_config());
    let resp = client.send(&create("durable", 3, 3, false)).await.unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);
    let epochs: Vec<i64> = nodes
        .iter()
        .map(|n| n.broker_state().unwrap().borrow().broker_epoch.unwrap())
        .collect();
    for n in nodes {
        n.stop().await.unwrap();
    }

    // Same ports, same data dirs: initialization is a no-op this time.
    let mut nodes = Vec::new();
    for (id, addr) in &voters {
        let l = TcpListener::bind(addr.as_str()).await.unwrap();
        nodes.push(
            ClusterNode::start(node_config(*id, dir.path(), &voters), l)
                .await
                .unwrap(),
        );
    }
    // New incarnations: registered with new epochs once the old sessions
    // expire, then unfenced.
    wait_for("three brokers registered again and unfenced", || {
        nodes
            .iter()
            .zip(&epochs)
            .all(|(n, old)| {
                unfenced(n)
                    && n.broker_state()
                        .unwrap()
                        .borrow()
                        .broker_epoch
                        .is_some_and(|e| e > *old)
            })
            .then_some(())
    })
    .await;
    assert!(nodes.iter().all(|n| {
        n.images()
            .current()
            .image
            .topic_by_name("durable")
            .is_some()
    }));
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
