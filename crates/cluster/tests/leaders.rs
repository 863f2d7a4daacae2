//! CreatePartitions, ElectLeaders and the periodic leader rebalance
//! through the CONTROLLER listener of three cluster nodes on loopback, and
//! the controller metrics they move.

use crate::common;
use crate::controller_listener::{
    active, client_config, create, node_config, only_error, unfenced,
};

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{bounded, wait_for};
use tokio::net::TcpListener;
use weir_client::Connection;
use weir_cluster::listener::{Clock, monotonic_clock};
use weir_cluster::{ClusterNode, ClusterNodeConfig, ControllerClient};
use weir_metadata::controller::{AlterPartition, Heartbeat};
use weir_metadata::{MetadataImage, Topic};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use weir_protocol::messages::elect_leaders_request::TopicPartitions;
use weir_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, ElectLeadersRequest, ElectLeadersResponse,
};

/// Three nodes sharing one clock, each config passed through `tune`.
async fn start(
    dir: &Path,
    tune: impl Fn(&mut ClusterNodeConfig),
) -> (Vec<ClusterNode>, Clock, BTreeMap<u64, String>) {
    let clock = monotonic_clock();
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in 1..=3 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        voters.insert(id, l.local_addr().unwrap().to_string());
        listeners.insert(id, l);
    }
    let mut nodes = Vec::new();
    for (id, l) in listeners {
        let mut config = node_config(id, dir, &voters);
        config.clock = clock.clone();
        tune(&mut config);
        nodes.push(ClusterNode::start(config, l).await.unwrap());
    }
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    (nodes, clock, voters)
}

fn grow(
    name: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> CreatePartitionsRequest {
    CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic {
            name: name.into(),
            count,
            assignments: assignments.map(|a| {
                a.into_iter()
                    .map(|broker_ids| CreatePartitionsAssignment {
                        broker_ids,
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        }],
        timeout_ms: 5_000,
        validate_only,
        ..Default::default()
    }
}

fn grow_error(resp: &CreatePartitionsResponse) -> ErrorCode {
    assert_eq!(resp.results.len(), 1, "{resp:?}");
    ErrorCode::from_code_lossy(resp.results[0].error_code)
}

fn elect(election_type: i8, topic: &str, partitions: &[i32]) -> ElectLeadersRequest {
    ElectLeadersRequest {
        election_type,
        topic_partitions: Some(vec![TopicPartitions {
            topic: topic.into(),
            partitions: partitions.to_vec(),
            ..Default::default()
        }]),
        timeout_ms: 5_000,
        ..Default::default()
    }
}

/// (partition, error) of every result, by partition.
fn election_errors(resp: &ElectLeadersResponse) -> Vec<(i32, ErrorCode)> {
    let mut out: Vec<(i32, ErrorCode)> = resp
        .replica_election_results
        .iter()
        .flat_map(|t| &t.partition_result)
        .map(|p| (p.partition_id, ErrorCode::from_code_lossy(p.error_code)))
        .collect();
    out.sort_by_key(|(p, _)| *p);
    out
}

fn image(node: &ClusterNode) -> MetadataImage {
    node.images().current().image.clone()
}

/// The topic when every node's image holds it identically.
fn topic_everywhere(nodes: &[ClusterNode], name: &str) -> Option<Topic> {
    let first = image(nodes.first()?).topic_by_name(name)?.clone();
    nodes
        .iter()
        .all(|n| image(n).topic_by_name(name) == Some(&first))
        .then_some(first)
}

fn active_node(nodes: &[ClusterNode]) -> &ClusterNode {
    let id = active(nodes).expect("one active controller");
    nodes.iter().find(|n| n.node_id() == id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_through_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, _, voters) = start(dir.path(), |_| {}).await;
    let client = ControllerClient::new(voters.clone(), client_config());
    let resp = client.send(&create("grow", 2, 2, false)).await.unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);

    let resp = bounded("grow to 5", client.send(&grow("grow", 5, None, false)))
        .await
        .unwrap();
    assert_eq!(grow_error(&resp), ErrorCode::None, "{resp:?}");
    let t = wait_for("five partitions everywhere", || {
        topic_everywhere(&nodes, "grow").filter(|t| t.partitions.len() == 5)
    })
    .await;
    let mut leaders = BTreeMap::<i32, usize>::new();
    for p in t.partitions.values() {
        assert_eq!(p.replicas.len(), 2, "{p:?}");
        assert_eq!((p.leader, &p.isr), (p.replicas[0], &p.replicas));
        *leaders.entry(p.leader).or_default() += 1;
    }
    assert_eq!(
        leaders.len(),
        3,
        "leaders spread over the brokers: {leaders:?}"
    );

    let cases = [
        (
            "fewer",
            grow("grow", 3, None, false),
            ErrorCode::InvalidPartitions,
        ),
        (
            "unknown",
            grow("nope", 3, None, false),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            "one assignment short",
            grow("grow", 7, Some(vec![vec![1, 2]]), false),
            ErrorCode::InvalidReplicaAssignment,
        ),
        ("only checked", grow("grow", 9, None, true), ErrorCode::None),
    ];
    for (what, req, want) in cases {
        let resp = client.send(&req).await.unwrap();
        assert_eq!(grow_error(&resp), want, "{what}: {resp:?}");
    }
    let resp = client
        .send(&grow("grow", 6, Some(vec![vec![3, 1]]), false))
        .await
        .unwrap();
    assert_eq!(grow_error(&resp), ErrorCode::None, "{resp:?}");
    let t = wait_for("six partitions everywhere", || {
        topic_everywhere(&nodes, "grow").filter(|t| t.partitions.len() == 6)
    })
    .await;
    assert_eq!(
        t.partitions[&5].replicas,
        vec![3, 1],
        "validate_only added nothing"
    );

    // Off the active controller: NOT_CONTROLLER, for both new requests.
    let controller = active(&nodes).unwrap();
    let other = voters.iter().find(|(id, _)| **id != controller).unwrap().1;
    let mut conn = bounded("connect", Connection::connect(other, "test"))
        .await
        .unwrap();
    let resp = conn.send(&grow("grow", 8, None, false)).await.unwrap();
    assert_eq!(grow_error(&resp), ErrorCode::NotController);
    let resp = conn.send(&elect(0, "grow", &[0])).await.unwrap();
    assert_eq!(resp.error_code, ErrorCode::NotController.code());
    assert_eq!(election_errors(&resp), vec![(0, ErrorCode::NotController)]);

    let metrics: Vec<_> = nodes.iter().map(|n| n.controller().metrics()).collect();
    assert_eq!(
        metrics.iter().map(|m| m.active_controller).sum::<u64>(),
        1,
        "{metrics:?}"
    );
    assert!(
        metrics
            .iter()
            .all(|m| m.fenced_brokers == 0 && m.offline_partitions == 0)
    );
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

/// Topic "t" (3 partitions on the 3 brokers) whose partition 0's preferred
/// replica was fenced and came back: another broker leads partition 0,
/// and the preferred one is out of every ISR. Returns the preferred one.
async fn move_leadership_off_partition_0(
    nodes: &[ClusterNode],
    clock: &Clock,
    client: &ControllerClient,
) -> i32 {
    let resp = client.send(&create("t", 3, 3, false)).await.unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);
    let t = wait_for("t everywhere", || topic_everywhere(nodes, "t")).await;
    let preferred = t.partitions[&0].replicas[0];
    assert_eq!(t.partitions[&0].leader, preferred);
    let epoch = image(&nodes[0]).broker(preferred).unwrap().epoch;
    // The broker asks to be fenced once; its next heartbeat unfences it.
    let fence = Heartbeat {
        broker_id: preferred,
        broker_epoch: epoch,
        current_metadata_offset: 0,
        want_fence: true,
        want_shutdown: false,
    };
    let reply = bounded(
        "fence",
        active_node(nodes).controller().heartbeat(fence, clock()),
    )
    .await;
    assert!(reply.unwrap().is_fenced);
    wait_for("the preferred replica back, leading nothing", || {
        let t = topic_everywhere(nodes, "t")?;
        let p = &t.partitions[&0];
        let back = nodes.iter().all(|n| image(n).is_active(preferred));
        (back && p.leader != preferred && !p.isr.contains(&preferred)).then_some(())
    })
    .await;
    preferred
}

/// The leaders take `back` into every ISR again, as they would once it
/// caught up.
async fn rejoin(nodes: &[ClusterNode], back: i32) {
    let t = topic_everywhere(nodes, "t").unwrap();
    for (&partition, p) in &t.partitions {
        if p.isr.contains(&back) {
            continue;
        }
        let mut new_isr: Vec<(i32, i64)> = p.isr.iter().map(|r| (*r, -1)).collect();
        new_isr.push((back, -1));
        let req = AlterPartition {
            topic_id: t.id,
            partition,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr,
        };
        let controller = active_node(nodes).controller().clone();
        bounded(
            "alter partition",
            controller.alter_partition(p.leader, -1, req),
        )
        .await
        .unwrap();
    }
    wait_for("the ISRs hold it again everywhere", || {
        let t = topic_everywhere(nodes, "t")?;
        t.partitions
            .values()
            .all(|p| p.isr.contains(&back))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_leaders_moves_leadership_back_to_the_preferred_replica() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, clock, voters) =
        start(dir.path(), |c| c.auto_leader_rebalance_enable = false).await;
    let client = ControllerClient::new(voters, client_config());
    let preferred = move_leadership_off_partition_0(&nodes, &clock, &client).await;
    let elections_before = active_node(&nodes)
        .controller()
        .metrics()
        .leader_elections_total;
    assert!(elections_before >= 1, "the fence moved a leader");

    let resp = client.send(&elect(0, "t", &[0, 9])).await.unwrap();
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        election_errors(&resp),
        vec![
            (0, ErrorCode::PreferredLeaderNotAvailable),
            (9, ErrorCode::UnknownTopicOrPartition)
        ]
    );

    rejoin(&nodes, preferred).await;
    let epoch = topic_everywhere(&nodes, "t").unwrap().partitions[&0].leader_epoch;
    let resp = client.send(&elect(0, "t", &[0, 1, 2])).await.unwrap();
    assert_eq!(
        election_errors(&resp),
        vec![
            (0, ErrorCode::None),
            (1, ErrorCode::ElectionNotNeeded),
            (2, ErrorCode::ElectionNotNeeded)
        ]
    );
    let t = wait_for(
        "partition 0 led by its preferred replica everywhere",
        || topic_everywhere(&nodes, "t").filter(|t| t.partitions[&0].leader == preferred),
    )
    .await;
    assert_eq!(t.partitions[&0].leader_epoch, epoch + 1);

    // Nothing left to do: every partition is left out of an all-partitions
    // answer; an unclean election of a led partition is not needed.
    let all = ElectLeadersRequest {
        topic_partitions: None,
        ..elect(0, "t", &[])
    };
    let resp = client.send(&all).await.unwrap();
    assert_eq!(election_errors(&resp), vec![]);
    let resp = client.send(&elect(1, "t", &[1])).await.unwrap();
    assert_eq!(
        election_errors(&resp),
        vec![(1, ErrorCode::ElectionNotNeeded)]
    );
    let resp = client.send(&elect(7, "t", &[1])).await.unwrap();
    assert_eq!(resp.error_code, ErrorCode::InvalidRequest.code());

    let m = active_node(&nodes).controller().metrics();
    assert_eq!(m.active_controller, 1);
    assert_eq!(m.leader_elections_total, elections_before + 1, "{m:?}");
    assert!(m.preferred_election_runs_total >= 3, "{m:?}");
    assert_eq!((m.fenced_brokers, m.offline_partitions), (0, 0));
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_rebalance_moves_leadership_back_to_the_preferred_replica() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, clock, voters) = start(dir.path(), |c| {
        c.auto_leader_rebalance_enable = true;
        c.leader_imbalance_check_interval = Duration::from_millis(200);
    })
    .await;
    let client = ControllerClient::new(voters, client_config());
    let preferred = move_leadership_off_partition_0(&nodes, &clock, &client).await;
    rejoin(&nodes, preferred).await;
    wait_for(
        "every partition led by its preferred replica everywhere",
        || {
            let t = topic_everywhere(&nodes, "t")?;
            t.partitions
                .values()
                .all(|p| p.leader == p.replicas[0])
                .then_some(())
        },
    )
    .await;
    let m = active_node(&nodes).controller().metrics();
    assert!(m.preferred_election_runs_total >= 1, "{m:?}");
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
