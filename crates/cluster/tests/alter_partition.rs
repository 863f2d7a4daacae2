//! AlterPartition and AllocateProducerIds over the CONTROLLER listener of
//! three cluster nodes on loopback, through `broker_requests` (which sends
//! v3 through a `ControllerClient`) and raw connections for the other
//! versions and the follower voters.

use crate::common;
use crate::controller_listener::{
    active, client_config, create, only_error, start_cluster, unfenced,
};

use common::{bounded, wait_for};
use weir_client::Connection;
use weir_cluster::broker_requests::{
    BrokerRequestError, PartitionState, ProducerIdBlock, allocate_producer_ids, alter_partition,
};
use weir_cluster::listener::served_versions;
use weir_cluster::{ClusterNode, ControllerClient};
use weir_metadata::controller::{AlterPartition, PRODUCER_ID_BLOCK_SIZE};
use weir_metadata::{Partition, Topic};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_partition_request::{PartitionData, TopicData};
use weir_protocol::messages::{
    AllocateProducerIdsRequest, AlterPartitionRequest, AlterPartitionResponse, ApiKey,
    ApiVersionsRequest,
};

/// The topic as every node's image holds it, once they agree and `check`
/// holds of its partition 0.
async fn agreed_partition(
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

/// A change of partition 0 of `topic` from the epochs of `p` to `isr`
/// (with each member's epoch from `epochs`).
fn change(
    topic: Uuid,
    p: &Partition,
    isr: &[i32],
    epoch_of: impl Fn(i32) -> i64,
) -> AlterPartition {
    AlterPartition {
        topic_id: topic,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr.iter().map(|id| (*id, epoch_of(*id))).collect(),
    }
}

/// The one result of a one-change AlterPartition.
async fn one(
    client: &ControllerClient,
    broker: i32,
    broker_epoch: i64,
    c: AlterPartition,
) -> Result<PartitionState, ErrorCode> {
    let tp = (c.topic_id, c.partition);
    let results = bounded(
        "alter partition",
        alter_partition(client, broker, broker_epoch, vec![c]),
    )
    .await
    .unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, tp);
    results.into_iter().next().unwrap().1
}

/// A v2 request (ISR ids without epochs) from the epochs of `p` to `isr`.
fn alter_v2(
    broker: i32,
    broker_epoch: i64,
    topic: Uuid,
    p: &Partition,
    isr: &[i32],
) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker_id: broker,
        broker_epoch,
        topics: vec![TopicData {
            topic_id: topic,
            partitions: vec![PartitionData {
                partition_index: 0,
                leader_epoch: p.leader_epoch,
                new_isr: isr.to_vec(),
                partition_epoch: p.partition_epoch,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn only_partition(
    resp: &AlterPartitionResponse,
) -> &weir_protocol::messages::alter_partition_response::PartitionData {
    assert_eq!(resp.error_code, 0, "{resp:?}");
    assert_eq!(resp.topics.len(), 1, "{resp:?}");
    assert_eq!(resp.topics[0].partitions.len(), 1, "{resp:?}");
    &resp.topics[0].partitions[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_shrinks_and_expands_its_isr_and_stale_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let client = ControllerClient::new(voters.clone(), client_config());
    let resp = bounded("create rf=3", client.send(&create("isr", 1, 3, false))).await;
    assert_eq!(only_error(&resp.unwrap()), ErrorCode::None);
    let (topic, p0) = agreed_partition(&nodes, "isr", |p| p.isr.len() == 3).await;
    let id = topic.id;
    let leader = p0.leader;
    let followers: Vec<i32> = p0
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != leader)
        .collect();
    let (dropped, kept) = (followers[0], followers[1]);
    let epoch = |b: i32| broker_epoch(&nodes[0], b);
    assert!(
        epoch(leader) >= 1,
        "a registered broker's epoch is positive"
    );

    // The leader drops one follower: committed with the partition epoch
    // bumped, the leader epoch unchanged.
    let shrunk_isr: Vec<i32> = p0.isr.iter().copied().filter(|r| *r != dropped).collect();
    let shrink = change(id, &p0, &shrunk_isr, epoch);
    let state = one(&client, leader, epoch(leader), shrink.clone())
        .await
        .unwrap();
    let expected = PartitionState {
        leader,
        leader_epoch: p0.leader_epoch,
        isr: shrunk_isr.clone(),
        partition_epoch: p0.partition_epoch + 1,
        leader_recovery_state: 0,
    };
    assert_eq!(state, expected);
    let (_, p1) = agreed_partition(&nodes, "isr", |p| p.isr == shrunk_isr).await;
    assert_eq!(p1.partition_epoch, p0.partition_epoch + 1);
    assert_eq!(p1.leader_epoch, p0.leader_epoch);
    assert_eq!(p1.leader, leader);

    // The same change again names the old partition epoch.
    let only_leader = change(id, &p0, &[leader], epoch);
    assert_eq!(
        one(&client, leader, epoch(leader), only_leader).await,
        Err(ErrorCode::InvalidUpdateVersion)
    );
    // An older leader epoch.
    let mut fenced = change(id, &p1, &[leader], epoch);
    fenced.leader_epoch = p1.leader_epoch - 1;
    assert_eq!(
        one(&client, leader, epoch(leader), fenced).await,
        Err(ErrorCode::FencedLeaderEpoch)
    );
    // From a follower: Kafka's INVALID_REQUEST.
    let from_follower = change(id, &p1, &[leader, kept], epoch);
    assert_eq!(
        one(&client, kept, epoch(kept), from_follower).await,
        Err(ErrorCode::InvalidRequest)
    );
    // An unknown topic id.
    let unknown = change(Uuid([0xab; 16]), &p1, &[leader], epoch);
    assert_eq!(
        one(&client, leader, epoch(leader), unknown).await,
        Err(ErrorCode::UnknownTopicId)
    );
    // The requester's own epoch is stale: the whole request is refused.
    let stale = bounded(
        "stale broker epoch",
        alter_partition(
            &client,
            leader,
            epoch(leader) - 1,
            vec![change(id, &p1, &[leader], epoch)],
        ),
    )
    .await;
    assert!(
        matches!(
            stale,
            Err(BrokerRequestError::Refused(ErrorCode::StaleBrokerEpoch))
        ),
        "{stale:?}"
    );
    // v3 checks each new member's broker epoch.
    let wrong_member_epoch = change(id, &p1, &p0.isr, |b| {
        if b == dropped { epoch(b) + 1 } else { epoch(b) }
    });
    assert_eq!(
        one(&client, leader, epoch(leader), wrong_member_epoch).await,
        Err(ErrorCode::IneligibleReplica)
    );
    // None of the refusals changed anything.
    let (_, still) = agreed_partition(&nodes, "isr", |_| true).await;
    assert_eq!(still, p1);

    // The follower caught up: back to three.
    let expand = change(id, &p1, &p0.isr, epoch);
    let state = one(&client, leader, epoch(leader), expand).await.unwrap();
    assert_eq!(state.isr, p0.isr);
    assert_eq!(state.partition_epoch, p0.partition_epoch + 2);
    let (_, p2) = agreed_partition(&nodes, "isr", |p| p.isr.len() == 3).await;
    assert_eq!(p2.isr, p0.isr);
    assert_eq!(p2.partition_epoch, p0.partition_epoch + 2);
    assert_eq!(p2.leader_epoch, p0.leader_epoch);

    // The listener advertises v2-v3 and answers v2 (ids only, no epochs);
    // the same ISR commits nothing and answers the partition as it is.
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let mut conn = bounded("connect", Connection::connect(&voters[&controller], "test"))
        .await
        .unwrap();
    let versions = conn.send(&ApiVersionsRequest::default()).await.unwrap();
    let advertised = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::AlterPartition as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(advertised, Some((2, 3)));
    assert_eq!(served_versions(ApiKey::AlterPartition), (2, 3));
    let resp = conn
        .send_version(&alter_v2(leader, epoch(leader), id, &p2, &p2.isr), 2)
        .await
        .unwrap();
    let answered = only_partition(&resp);
    assert_eq!(answered.error_code, 0);
    assert_eq!(answered.isr, p2.isr);
    assert_eq!(answered.partition_epoch, p2.partition_epoch);
    // v1 named topics; not served.
    let mut v1 = alter_v2(leader, epoch(leader), id, &p2, &p2.isr);
    v1.topics[0].topic_id = Uuid::default();
    v1.topics[0].topic_name = "isr".into();
    let resp = conn.send_version(&v1, 1).await.unwrap();
    assert_eq!(resp.error_code, ErrorCode::UnsupportedVersion.code());
    assert!(resp.topics.is_empty());

    // A voter that is not the active controller answers NOT_CONTROLLER
    // for the whole request, and commits nothing.
    let follower = *voters.keys().find(|v| **v != controller).unwrap();
    let mut conn = bounded("connect", Connection::connect(&voters[&follower], "test"))
        .await
        .unwrap();
    let req = alter_v2(leader, epoch(leader), id, &p2, &shrunk_isr);
    let resp = conn.send_version(&req, 2).await.unwrap();
    assert_eq!(resp.error_code, ErrorCode::NotController.code(), "{resp:?}");
    assert!(resp.topics.is_empty());
    let resp = conn
        .send(&AllocateProducerIdsRequest {
            broker_id: leader,
            broker_epoch: epoch(leader),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(resp.error_code, ErrorCode::NotController.code(), "{resp:?}");
    let (_, p3) = agreed_partition(&nodes, "isr", |_| true).await;
    assert_eq!(p3, p2);

    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

fn disjoint(a: &ProducerIdBlock, b: &ProducerIdBlock) -> bool {
    a.end() <= b.first || b.end() <= a.first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_id_blocks_never_overlap_across_a_controller_failover() {
    let dir = tempfile::tempdir().unwrap();
    let (mut nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;
    // A broker that survives the failover asks.
    let broker = nodes
        .iter()
        .map(|n| n.node_id())
        .find(|id| *id != controller)
        .unwrap() as i32;
    let client = ControllerClient::new(voters, client_config());
    let epoch = broker_epoch(&nodes[0], broker);

    let first = bounded("allocate", allocate_producer_ids(&client, broker, epoch))
        .await
        .unwrap();
    let second = bounded("allocate", allocate_producer_ids(&client, broker, epoch))
        .await
        .unwrap();
    for b in [&first, &second] {
        assert_eq!(i64::from(b.len), PRODUCER_ID_BLOCK_SIZE);
        assert!(b.first >= 0, "{b:?}");
    }
    assert!(disjoint(&first, &second), "{first:?} {second:?}");
    let stale = bounded("stale", allocate_producer_ids(&client, broker, epoch - 1)).await;
    assert!(
        matches!(
            stale,
            Err(BrokerRequestError::Refused(ErrorCode::StaleBrokerEpoch))
        ),
        "{stale:?}"
    );

    // The active controller's process stops; the next one continues after
    // every block handed out.
    let pos = nodes
        .iter()
        .position(|n| n.node_id() == controller)
        .unwrap();
    nodes.remove(pos).stop().await.unwrap();
    let next = wait_for("a new active controller", || active(&nodes)).await;
    assert_ne!(next, controller);
    let survivor = nodes.iter().find(|n| n.node_id() == broker as u64).unwrap();
    let epoch = broker_epoch(survivor, broker);
    let third = bounded(
        "allocate after failover",
        allocate_producer_ids(&client, broker, epoch),
    )
    .await
    .unwrap();
    assert!(disjoint(&first, &third), "{first:?} {third:?}");
    assert!(disjoint(&second, &third), "{second:?} {third:?}");
    assert!(third.first >= first.end().max(second.end()), "{third:?}");

    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
