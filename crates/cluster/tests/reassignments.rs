//! AlterPartitionReassignments and ListPartitionReassignments over the
//! CONTROLLER listener of three cluster nodes on loopback: a move of an
//! RF=1 partition from one broker to another shows its adding and removing
//! replicas and completes when the leader's AlterPartition brings the
//! target into the ISR (the old leader is told NEW_LEADER_ELECTED);
//! a cancel; the refusals; NOT_CONTROLLER off the active controller.

use std::collections::BTreeMap;

use crate::common;
use crate::controller_listener::{active, client_config, start_cluster, unfenced};

use common::{bounded, wait_for};
use weir_client::Connection;
use weir_cluster::broker_requests::alter_partition;
use weir_cluster::{ClusterNode, ControllerClient};
use weir_metadata::controller::AlterPartition;
use weir_metadata::{Partition, Topic};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use weir_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use weir_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use weir_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, CreateTopicsRequest,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

/// Creates `name` with one partition on `replicas`.
async fn create_on(client: &ControllerClient, name: &str, replicas: &[i32]) {
    let req = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![CreatableReplicaAssignment {
                partition_index: 0,
                broker_ids: replicas.to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    let resp = bounded("create", client.send(&req)).await.unwrap();
    assert_eq!(resp.topics[0].error_code, 0, "{resp:?}");
}

/// A request reassigning partition `partition` of `topic` (`None`:
/// cancel).
fn reassign(
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> AlterPartitionReassignmentsRequest {
    AlterPartitionReassignmentsRequest {
        timeout_ms: 5000,
        topics: vec![ReassignableTopic {
            name: topic.into(),
            partitions: vec![ReassignablePartition {
                partition_index: partition,
                replicas: target.map(<[i32]>::to_vec),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The code of the only partition of `resp` (the top level must be
/// NONE).
fn only_code(resp: &AlterPartitionReassignmentsResponse) -> ErrorCode {
    assert_eq!(resp.error_code, 0, "{resp:?}");
    assert_eq!(resp.responses.len(), 1, "{resp:?}");
    assert_eq!(resp.responses[0].partitions.len(), 1, "{resp:?}");
    ErrorCode::from_code_lossy(resp.responses[0].partitions[0].error_code)
}

async fn send_reassign(
    client: &ControllerClient,
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> ErrorCode {
    let resp = bounded("reassign", client.send(&reassign(topic, partition, target)))
        .await
        .unwrap();
    only_code(&resp)
}

/// A refused request: what, topic, partition, target, the code.
type Case<'a> = (&'a str, &'a str, i32, Option<&'a [i32]>, ErrorCode);

/// (topic, partition, replicas, adding, removing) of every listed one.
type Listed = Vec<(String, i32, Vec<i32>, Vec<i32>, Vec<i32>)>;

fn listed(resp: &ListPartitionReassignmentsResponse) -> Listed {
    assert_eq!(resp.error_code, 0, "{resp:?}");
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.clone(),
                    p.partition_index,
                    p.replicas.clone(),
                    p.adding_replicas.clone(),
                    p.removing_replicas.clone(),
                )
            })
        })
        .collect()
}

async fn list(client: &ControllerClient, topics: Option<&[(&str, &[i32])]>) -> Listed {
    let req = ListPartitionReassignmentsRequest {
        timeout_ms: 5000,
        topics: topics.map(|ts| {
            ts.iter()
                .map(|(name, ps)| ListPartitionReassignmentsTopics {
                    name: (*name).into(),
                    partition_indexes: ps.to_vec(),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    };
    listed(&bounded("list", client.send(&req)).await.unwrap())
}

/// Partition 0 of `name` once every image agrees on it and `check` holds.
async fn agreed(
    nodes: &[ClusterNode],
    name: &str,
    check: impl Fn(&Partition) -> bool,
) -> (Topic, Partition) {
    wait_for("every image agrees on the partition", || {
        let first = nodes[0]
            .images()
            .current()
            .image
            .topic_by_name(name)?
            .clone();
        let p = first.partitions.get(&0)?.clone();
        let same = nodes
            .iter()
            .all(|n| n.images().current().image.topic_by_name(name) == Some(&first));
        (same && check(&p)).then_some((first, p))
    })
    .await
}

fn broker_epoch(node: &ClusterNode, id: i32) -> i64 {
    node.images().current().image.broker(id).unwrap().epoch
}

async fn three_brokers() -> (
    tempfile::TempDir,
    Vec<ClusterNode>,
    BTreeMap<u64, String>,
    ControllerClient,
) {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let client = ControllerClient::new(voters.clone(), client_config());
    (dir, nodes, voters, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_shows_while_in_progress_and_completes_once_the_target_is_in_sync() {
    let (_dir, nodes, _, client) = three_brokers().await;
    create_on(&client, "moved", &[1]).await;
    let (topic, before) = agreed(&nodes, "moved", |_| true).await;
    assert_eq!((before.replicas.clone(), before.leader), (vec![1], 1));

    assert_eq!(
        send_reassign(&client, "moved", 0, Some(&[2])).await,
        ErrorCode::None
    );
    let (_, started) = agreed(&nodes, "moved", |p| p.is_reassigning()).await;
    assert_eq!(
        (
            started.replicas.clone(),
            started.adding_replicas.clone(),
            started.removing_replicas.clone(),
            started.isr.clone(),
            started.leader,
            started.leader_epoch
        ),
        (
            vec![2, 1],
            vec![2],
            vec![1],
            vec![1],
            1,
            before.leader_epoch
        )
    );
    let ongoing = vec![("moved".to_string(), 0, vec![2, 1], vec![2], vec![1])];
    assert_eq!(list(&client, None).await, ongoing);
    assert_eq!(list(&client, Some(&[("moved", &[0, 5])])).await, ongoing);
    assert_eq!(list(&client, Some(&[("other", &[0])])).await, vec![]);

    // Broker 2 caught up; leader 1 adds it to the ISR. That completes the
    // move: 1 is no longer a replica, so it is told NEW_LEADER_ELECTED.
    let epoch = broker_epoch(&nodes[0], 1);
    let change = AlterPartition {
        topic_id: topic.id,
        partition: 0,
        leader_epoch: started.leader_epoch,
        partition_epoch: started.partition_epoch,
        new_isr: vec![(1, epoch), (2, broker_epoch(&nodes[0], 2))],
    };
    let results = bounded(
        "alter partition",
        alter_partition(&client, 1, epoch, vec![change]),
    )
    .await
    .unwrap();
    assert_eq!(results[0].1, Err(ErrorCode::NewLeaderElected));
    let (_, done) = agreed(&nodes, "moved", |p| !p.is_reassigning()).await;
    assert_eq!(
        (done.replicas.clone(), done.isr.clone(), done.leader),
        (vec![2], vec![2], 2)
    );
    assert_eq!(done.leader_epoch, before.leader_epoch + 1);
    assert_eq!(list(&client, None).await, vec![]);

    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_refusals_and_not_controller() {
    let (_dir, nodes, voters, client) = three_brokers().await;
    create_on(&client, "c", &[1]).await;
    let (_, before) = agreed(&nodes, "c", |_| true).await;

    assert_eq!(
        send_reassign(&client, "c", 0, Some(&[3, 2])).await,
        ErrorCode::None
    );
    agreed(&nodes, "c", |p| p.adding_replicas == [2, 3]).await;
    assert_eq!(send_reassign(&client, "c", 0, None).await, ErrorCode::None);
    let (_, cancelled) = agreed(&nodes, "c", |p| !p.is_reassigning()).await;
    assert_eq!(
        (
            cancelled.replicas.clone(),
            cancelled.isr.clone(),
            cancelled.leader
        ),
        (vec![1], vec![1], 1)
    );
    assert!(cancelled.leader_epoch > before.leader_epoch);
    assert_eq!(list(&client, None).await, vec![]);

    let cases: Vec<Case<'_>> = vec![
        (
            "cancel with none in progress",
            "c",
            0,
            None,
            ErrorCode::NoReassignmentInProgress,
        ),
        (
            "unknown topic",
            "nope",
            0,
            Some(&[1]),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            "unknown partition",
            "c",
            4,
            Some(&[1]),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            "empty",
            "c",
            0,
            Some(&[]),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            "duplicate",
            "c",
            0,
            Some(&[2, 2]),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            "unknown broker",
            "c",
            0,
            Some(&[2, 9]),
            ErrorCode::InvalidReplicaAssignment,
        ),
    ];
    for (what, topic, partition, target, code) in cases {
        assert_eq!(
            send_reassign(&client, topic, partition, target).await,
            code,
            "{what}"
        );
    }
    let (_, after) = agreed(&nodes, "c", |_| true).await;
    assert_eq!(after, cancelled, "refusals change nothing");

    // A voter that is not the active controller refuses the whole
    // request and commits nothing.
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let follower = *voters.keys().find(|v| **v != controller).unwrap();
    let mut conn = bounded("connect", Connection::connect(&voters[&follower], "test"))
        .await
        .unwrap();
    let resp = conn.send(&reassign("c", 0, Some(&[2]))).await.unwrap();
    assert_eq!(resp.error_code, ErrorCode::NotController.code(), "{resp:?}");
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::NotController.code()
    );
    let resp = conn
        .send(&ListPartitionReassignmentsRequest::default())
        .await
        .unwrap();
    assert_eq!(resp.error_code, ErrorCode::NotController.code(), "{resp:?}");
    let (_, still) = agreed(&nodes, "c", |_| true).await;
    assert_eq!(still, cancelled);

    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
