//! The cluster seam: with a cluster view installed (three brokers, this one
//! leading partition 0 of `t` and broker 2 leading partition 1), the
//! client-facing answers name every broker and the real leaders, requests
//! for a partition led elsewhere are refused with the new leader, stale
//! epochs are fenced, and topic changes go to the installed admin. With
//! the brokers' registered listeners in the view, each answer names the
//! brokers at their endpoint of the client's listener, and leaves out a
//! broker without it.

use std::sync::Arc;

use weir_broker::cluster::{
    AdminFuture, BrokerNode, ClusterSnapshot, ClusterView, ListenerEndpoint, PartitionView,
    TopicAdmin, TopicView,
};
use weir_broker::handler::RequestContext;
use weir_protocol::error_code::ErrorCode;

use crate::common::*;
use crate::group_shards::{HeldIo, answered};
use crate::groups::heartbeat;

const NOT_LEADER: i16 = ErrorCode::NotLeaderOrFollower as i16;
const FENCED: i16 = ErrorCode::FencedLeaderEpoch as i16;
const UNKNOWN_EPOCH: i16 = ErrorCode::UnknownLeaderEpoch as i16;
/// The leader epochs the view announces.
const EPOCH_P0: i32 = 3;
const EPOCH_P1: i32 = 7;
/// Partitions of `__consumer_offsets` in the view: partition i is led by
/// `[me, 2, 3][i]`.
const OFFSETS_PARTITIONS: i32 = 3;

/// A view the test sets by hand.
struct FixedView(std::sync::RwLock<Arc<ClusterSnapshot>>);

impl ClusterView for FixedView {
    fn snapshot(&self) -> Arc<ClusterSnapshot> {
        self.0.read().unwrap().clone()
    }
}

/// Answers every CreateTopics with NOT_CONTROLLER, as a stand-in for a
/// forwarding admin (the handler must pass its answer through).
struct RefusingAdmin;

impl TopicAdmin for RefusingAdmin {
    fn create_topics<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        req: CreateTopicsRequest,
    ) -> AdminFuture<'a, CreateTopicsResponse> {
        Box::pin(async move {
            CreateTopicsResponse {
                topics: req
                    .topics
                    .into_iter()
                    .map(|t| create_topics_response::CreatableTopicResult {
                        name: t.name,
                        error_code: ErrorCode::NotController.code(),
                        error_message: Some("forwarded".into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        })
    }

    fn delete_topics<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        _req: DeleteTopicsRequest,
    ) -> AdminFuture<'a, DeleteTopicsResponse> {
        Box::pin(async { DeleteTopicsResponse::default() })
    }

    fn create_partitions<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        _req: CreatePartitionsRequest,
    ) -> AdminFuture<'a, CreatePartitionsResponse> {
        Box::pin(async { CreatePartitionsResponse::default() })
    }
}

struct Setup {
    running: RunningBroker,
    view: Arc<FixedView>,
    me: i32,
    id: [u8; 16],
    _dir: tempfile::TempDir,
}

/// A broker with topic `t` (2 partitions, both logs local) and the
/// three-broker view installed.
async fn setup() -> Setup {
    setup_with(&[]).await
}

/// [`setup`] with `extra` broker settings.
async fn setup_with(extra: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let partitions = OFFSETS_PARTITIONS.to_string();
    let mut settings = vec![("offsets.topic.num.partitions", partitions.as_str())];
    settings.extend_from_slice(extra);
    let running = start_broker(dir.path(), &settings).await;
    let mut c = Client::connect(running.local_addr).await;
    // the view's ISR of partition 0 has two replicas
    let configs = [("min.insync.replicas", "3")];
    assert_eq!(create_topic(&mut c, "t", 2, &configs).await, NONE);
    let b = running.broker.clone();
    let me = b.config.node_id;
    let id = b.topic("t").unwrap().id_bytes();
    let (host, port) = b.advertised();
    let node = |id, port| BrokerNode {
        id,
        host: "127.0.0.1".into(),
        port,
        rack: Some(format!("rack-{id}")),
    };
    let mut brokers = vec![BrokerNode {
        id: me,
        host,
        port,
        rack: Some("rack-1".into()),
    }];
    brokers.push(node(2, 19_092));
    brokers.push(node(3, 29_092));
    let t = TopicView {
        name: "t".into(),
        id,
        partitions: vec![
            PartitionView {
                leader: me,
                leader_epoch: EPOCH_P0,
                partition_epoch: 0,
                replicas: vec![me, 2, 3],
                isr: vec![me, 2],
                offline_replicas: vec![3],
            },
            PartitionView {
                leader: 2,
                leader_epoch: EPOCH_P1,
                partition_epoch: 0,
                replicas: vec![2, me, 3],
                isr: vec![2, me, 3],
                offline_replicas: vec![],
            },
        ],
    };
    let offsets = TopicView {
        name: "__consumer_offsets".into(),
        id: [9; 16],
        partitions: [me, 2, 3]
            .into_iter()
            .map(|l| PartitionView {
                leader: l,
                leader_epoch: 1,
                partition_epoch: 0,
                replicas: vec![l],
                isr: vec![l],
                offline_replicas: vec![],
            })
            .collect(),
    };
    let snap = ClusterSnapshot::new(brokers, 3, vec![t, offsets]);
    let view = Arc::new(FixedView(std::sync::RwLock::new(Arc::new(snap))));
    b.set_cluster(view.clone(), Arc::new(RefusingAdmin));
    Setup {
        running,
        view,
        me,
        id,
        _dir: dir,
    }
}

fn produce_req(partition: i32) -> RequestBody {
    produce_req_acks(partition, 1)
}

fn produce_req_acks(partition: i32, acks: i16) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: "t".into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition,
                records: Some(batch(&["v"], 1_700_000_000_000)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn fetch_req(id: [u8; 16], partition: i32, current_leader_epoch: i32) -> RequestBody {
    RequestBody::Fetch(FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        session_epoch: -1,
        topics: vec![fetch_request::FetchTopic {
            topic: "t".into(),
            topic_id: Uuid(id),
            partitions: vec![fetch_request::FetchPartition {
                partition,
                current_leader_epoch,
                fetch_offset: 0,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn list_offsets_req(partition: i32, current_leader_epoch: i32) -> RequestBody {
    RequestBody::ListOffsets(ListOffsetsRequest {
        replica_id: -1,
        topics: vec![list_offsets_request::ListOffsetsTopic {
            name: "t".into(),
            partitions: vec![list_offsets_request::ListOffsetsPartition {
                partition_index: partition,
                current_leader_epoch,
                timestamp: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

#[tokio::test]
async fn metadata_and_describe_cluster_show_every_broker_and_leader() {
    let s = setup().await;
    let mut c = Client::connect(s.running.local_addr).await;
    let m = metadata(&mut c, Some(vec!["t"]), false).await;
    let mut ids: Vec<_> = m.brokers.iter().map(|b| (b.node_id, b.port)).collect();
    ids.sort();
    assert_eq!(
        ids,
        vec![
            (s.me, i32::from(s.running.local_addr.port())),
            (2, 19_092),
            (3, 29_092)
        ]
    );
    assert!(m.brokers.iter().all(|b| b.rack.is_some()));
    assert_eq!(m.controller_id, 3);
    let t = &m.topics[0];
    assert_eq!(t.error_code, NONE);
    assert_eq!(t.topic_id, Uuid(s.id));
    let p: Vec<_> = t
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                p.replica_nodes.clone(),
                p.isr_nodes.clone(),
                p.offline_replicas.clone(),
            )
        })
        .collect();
    assert_eq!(
        p,
        vec![
            (0, s.me, EPOCH_P0, vec![s.me, 2, 3], vec![s.me, 2], vec![3]),
            (1, 2, EPOCH_P1, vec![2, s.me, 3], vec![2, s.me, 3], vec![]),
        ]
    );
    let d = match c
        .call(
            RequestBody::DescribeCluster(DescribeClusterRequest::default()),
            1,
        )
        .await
    {
        ResponseBody::DescribeCluster(d) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!(d.controller_id, 3);
    let mut ids: Vec<_> = d.brokers.iter().map(|b| b.broker_id).collect();
    ids.sort();
    let mut want = vec![s.me, 2, 3];
    want.sort();
    assert_eq!(ids, want);
    s.running.shutdown().await.unwrap();
}

#[tokio::test]
async fn produce_goes_only_to_the_leader_and_names_the_new_one() {
    let s = setup().await;
    let mut c = Client::connect(s.running.local_addr).await;
    for version in [9, 11] {
        let r = match c.call(produce_req(1), version).await {
            ResponseBody::Produce(r) => r,
            other => panic!("{other:?}"),
        };
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, NOT_LEADER, "v{version}");
        if version >= 10 {
            assert_eq!(
                (p.current_leader.leader_id, p.current_leader.leader_epoch),
                (2, EPOCH_P1)
            );
            let e: Vec<_> = r
                .node_endpoints
                .iter()
                .map(|e| (e.node_id, e.port))
                .collect();
            assert_eq!(e, vec![(2, 19_092)]);
        } else {
            assert_eq!(p.current_leader.leader_id, -1);
        }
        let r = match c.call(produce_req(0), version).await {
            ResponseBody::Produce(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(r.responses[0].partition_responses[0].error_code, NONE);
        assert!(r.node_endpoints.is_empty());
    }
    // acks=all counts the view's in-sync replicas
    let r = match c.call(produce_req_acks(0, -1), 11).await {
        ResponseBody::Produce(r) => r,
        other => panic!("{other:?}"),
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ErrorCode::NotEnoughReplicas.code());
    assert!(
        p.error_message.as_deref().unwrap().contains("(2)"),
        "{:?}",
        p.error_message
    );
    // nothing reached partition 1's local log
    let log = s.running.broker.replicas.log("t", 1).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    s.running.shutdown().await.unwrap();
}

#[tokio::test]
async fn fetch_checks_leadership_and_leader_epoch() {
    let s = setup().await;
    let mut c = Client::connect(s.running.local_addr).await;
    assert_eq!(produce(&mut c, "t", 0, batch(&["a"], 1), 1).await.0, NONE);
    let part = |r: ResponseBody| match r {
        ResponseBody::Fetch(r) => (
            r.responses[0].partitions[0].clone(),
            r.node_endpoints
                .iter()
                .map(|e| e.node_id)
                .collect::<Vec<_>>(),
        ),
        other => panic!("{other:?}"),
    };
    // not the leader: the leader in current_leader from v12, endpoints from v16
    let (p, _) = part(c.call(fetch_req(s.id, 1, -1), 11).await);
    assert_eq!((p.error_code, p.current_leader.leader_id), (NOT_LEADER, -1));
    let (p, e) = part(c.call(fetch_req(s.id, 1, -1), 12).await);
    assert_eq!(p.error_code, NOT_LEADER);
    assert_eq!(
        (p.current_leader.leader_id, p.current_leader.leader_epoch),
        (2, EPOCH_P1)
    );
    assert!(e.is_empty());
    let (p, e) = part(c.call(fetch_req(s.id, 1, EPOCH_P1), 16).await);
    assert_eq!(p.error_code, NOT_LEADER);
    assert_eq!(e, vec![2]);
    // the leader serves the current epoch (or none), fences an older one and
    // does not know a newer one
    for epoch in [-1, EPOCH_P0] {
        let (p, _) = part(c.call(fetch_req(s.id, 0, epoch), 13).await);
        assert_eq!(p.error_code, NONE, "epoch {epoch}");
        assert_eq!(p.high_watermark, 1);
    }
    let (p, _) = part(c.call(fetch_req(s.id, 0, EPOCH_P0 - 1), 13).await);
    assert_eq!(p.error_code, FENCED);
    let (p, _) = part(c.call(fetch_req(s.id, 0, EPOCH_P0 + 1), 13).await);
    assert_eq!(p.error_code, UNKNOWN_EPOCH);
    s.running.shutdown().await.unwrap();
}

#[tokio::test]
async fn list_offsets_and_delete_records_only_on_the_leader() {
    let s = setup().await;
    let mut c = Client::connect(s.running.local_addr).await;
    let part = |r: ResponseBody| match r {
        ResponseBody::ListOffsets(r) => {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.offset, p.leader_epoch)
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(part(c.call(list_offsets_req(1, -1), 8).await).0, NOT_LEADER);
    assert_eq!(
        part(c.call(list_offsets_req(0, -1), 8).await),
        (NONE, 0, EPOCH_P0)
    );
    assert_eq!(
        part(c.call(list_offsets_req(0, EPOCH_P0 - 1), 8).await).0,
        FENCED
    );
    let req = |partition| {
        RequestBody::DeleteRecords(DeleteRecordsRequest {
            topics: vec![delete_records_request::DeleteRecordsTopic {
                name: "t".into(),
                partitions: vec![delete_records_request::DeleteRecordsPartition {
                    partition_index: partition,
                    offset: -1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            timeout_ms: 5000,
            ..Default::default()
        })
    };
    for (partition, code) in [(1, NOT_LEADER), (0, NONE)] {
        match c.call(req(partition), 2).await {
            ResponseBody::DeleteRecords(r) => {
                assert_eq!(r.topics[0].partitions[0].error_code, code, "p{partition}")
            }
            other => panic!("{other:?}"),
        }
    }
    s.running.shutdown().await.unwrap();
}

/// A group whose offsets partition is `partition`.
fn group_on(partition: i32) -> String {
    (0..)
        .map(|i| format!("group-{i}"))
        .find(|g| weir_group::partition_for(g, OFFSETS_PARTITIONS) == partition)
        .unwrap()
}

#[tokio::test]
async fn find_coordinator_names_the_offsets_partition_leader() {
    let s = setup().await;
    let mut c = Client::connect(s.running.local_addr).await;
    let (remote, local) = (group_on(1), group_on(0));
    let req = FindCoordinatorRequest {
        key_type: 0,
        coordinator_keys: vec![remote.clone(), local.clone()],
        ..Default::default()
    };
    let r = match c.call(RequestBody::FindCoordinator(req), 4).await {
        ResponseBody::FindCoordinator(r) => r,
        other => panic!("{other:?}"),
    };
    let found: Vec<_> = r
        .coordinators
        .iter()
        .map(|k| (k.key.clone(), k.error_code, k.node_id, k.port))
        .collect();
    assert_eq!(
        found,
        vec![
            (remote.clone(), NONE, 2, 19_092),
            (local, NONE, s.me, i32::from(s.running.local_addr.port())),
        ]
    );
    let req = FindCoordinatorRequest {
        key: remote,
        key_type: 0,
        ..Default::default()
    };
    match c.call(RequestBody::FindCoordinator(req), 3).await {
        ResponseBody::FindCoordinator(r) => {
            assert_eq!((r.error_code, r.node_id, r.port), (NONE, 2, 19_092))
        }
        other => panic!("{other:?}"),
    }
    s.running.shutdown().await.unwrap();
}

#[tokio::test]
async fn create_topics_goes_to_the_installed_admin() {
    let s = setup().await;
    let mut c = Client::connect(s.running.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "new", 1, &[]).await,
        ErrorCode::NotController.code()
    );
    assert!(s.running.broker.topic("new").is_none());
    s.running.shutdown().await.unwrap();
}

/// JoinGroup's first answer for a new member of `group`.
async fn join_code(c: &mut Client, group: &str) -> i16 {
    let req = JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![join_group_request::JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"meta"),
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::JoinGroup(req), 7).await {
        ResponseBody::JoinGroup(r) => r.error_code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn groups_are_coordinated_only_where_their_offsets_partition_is_led() {
    let s = setup().await;
    let b = s.running.broker.clone();
    let groups = b.groups().unwrap();
    groups.follow_leadership(&b);
    let mut c = Client::connect(s.running.local_addr).await;
    let member_id_required = ErrorCode::MemberIdRequired.code();
    let not_coordinator = ErrorCode::NotCoordinator.code();
    assert_eq!(join_code(&mut c, &group_on(0)).await, member_id_required);
    assert_eq!(join_code(&mut c, &group_on(1)).await, not_coordinator);

    // leadership of partition 1 moves here, of partition 0 away
    let mut snap = (*s.view.snapshot()).clone();
    let offsets: Vec<_> = snap.topics().cloned().collect();
    let moved: Vec<_> = offsets
        .into_iter()
        .map(|mut t| {
            if t.name == "__consumer_offsets" {
                t.partitions[0].leader = 2;
                t.partitions[1].leader = s.me;
            }
            t
        })
        .collect();
    snap = ClusterSnapshot::new(snap.brokers.clone(), snap.controller_id, moved);
    *s.view.0.write().unwrap() = Arc::new(snap);
    groups.follow_leadership(&b);
    assert_eq!(join_code(&mut c, &group_on(0)).await, not_coordinator);
    assert_eq!(join_code(&mut c, &group_on(1)).await, member_id_required);
    s.running.shutdown().await.unwrap();
}

/// A partition this broker starts to lead is replayed with its shard's
/// state lock free: while the replay is held at the disk, a Heartbeat and an
/// OffsetFetch on a group of that partition are answered
/// COORDINATOR_LOAD_IN_PROGRESS at once, and a group of another partition is
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_being_loaded_answers_load_in_progress() {
    let load_in_progress = ErrorCode::CoordinatorLoadInProgress.code();
    let member_id_required = ErrorCode::MemberIdRequired.code();
    let s = setup().await;
    let b = s.running.broker.clone();
    b.groups().unwrap().follow_leadership(&b);
    let mut c = Client::connect(s.running.local_addr).await;

    // leadership of partition 1 moves here; its replay is held
    let snap = (*s.view.snapshot()).clone();
    let moved: Vec<_> = snap
        .topics()
        .cloned()
        .map(|mut t| {
            if t.name == "__consumer_offsets" {
                t.partitions[1].leader = s.me;
            }
            t
        })
        .collect();
    let snap = ClusterSnapshot::new(snap.brokers.clone(), snap.controller_id, moved);
    *s.view.0.write().unwrap() = Arc::new(snap);
    let hold = HeldIo::new(b.clone(), 1);
    let loader = {
        let b = b.clone();
        tokio::task::spawn_blocking(move || b.groups().unwrap().follow_leadership(&b))
    };
    hold.wait_held(1).await;

    let loading = group_on(1);
    let beat = heartbeat(&mut c, &loading, 1, "m");
    assert_eq!(answered(&hold, "Heartbeat", beat).await, load_in_progress);
    let fetched = offset_fetch_error(&mut c, &loading);
    assert_eq!(
        answered(&hold, "OffsetFetch", fetched).await,
        load_in_progress
    );
    let served = group_on(0);
    let other = join_code(&mut c, &served);
    assert_eq!(
        answered(&hold, "JoinGroup on another partition", other).await,
        member_id_required
    );
    assert_eq!(hold.held(), 1);

    drop(hold);
    loader.await.unwrap();
    assert_eq!(join_code(&mut c, &loading).await, member_id_required);
    s.running.shutdown().await.unwrap();
}

/// The group-level error of OffsetFetch v8 for `group`.
async fn offset_fetch_error(c: &mut Client, group: &str) -> i16 {
    let req = OffsetFetchRequest {
        groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetFetch(req), 8).await {
        ResponseBody::OffsetFetch(r) => r.groups[0].error_code,
        other => panic!("{other:?}"),
    }
}

/// Produce of one record to `topic`-`partition`, v11.
fn produce_to(topic: &str, partition: i32) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks: 1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition,
                records: Some(batch(&["v"], 1_700_000_000_000)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Two listeners, PLAINTEXT and EXTERNAL; broker 2 registered both, broker
/// 3 only PLAINTEXT and leads `u`-0. A client of each listener is told the
/// brokers' endpoints of its own listener (Metadata, DescribeCluster,
/// FindCoordinator, Produce's and Fetch's node endpoints), as Kafka does;
/// on EXTERNAL broker 3 is left out, the partition it leads has no leader
/// (LISTENER_NOT_FOUND, LEADER_NOT_AVAILABLE before v6) and its replicas
/// count as offline.
#[tokio::test]
async fn brokers_are_named_at_their_endpoint_of_the_clients_listener() {
    let s = setup_with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        ),
    ])
    .await;
    let addr = |name: &str| {
        s.running
            .listener_addrs
            .iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
    };
    let (plain, external) = (addr("PLAINTEXT"), addr("EXTERNAL"));
    let ep = |name: &str, port: u16| ListenerEndpoint {
        name: name.into(),
        host: "127.0.0.1".into(),
        port,
    };
    let snap = s.view.snapshot();
    let mut topics: Vec<TopicView> = snap.topics().cloned().collect();
    topics.push(TopicView {
        name: "u".into(),
        id: [5; 16],
        partitions: vec![PartitionView {
            leader: 3,
            leader_epoch: 2,
            partition_epoch: 0,
            replicas: vec![3, 2],
            isr: vec![3, 2],
            offline_replicas: vec![],
        }],
    });
    let with_listeners = ClusterSnapshot::new(snap.brokers.clone(), snap.controller_id, topics)
        .with_listeners([
            (
                s.me,
                vec![
                    ep("PLAINTEXT", plain.port()),
                    ep("EXTERNAL", external.port()),
                ],
            ),
            (2, vec![ep("PLAINTEXT", 19_092), ep("EXTERNAL", 19_192)]),
            (3, vec![ep("PLAINTEXT", 29_092)]),
        ]);
    *s.view.0.write().unwrap() = Arc::new(with_listeners);
    let (me, plain_port, external_port) =
        (s.me, i32::from(plain.port()), i32::from(external.port()));

    let mut pc = Client::connect(plain).await;
    let mut ec = Client::connect(external).await;
    let brokers = |m: &MetadataResponse| {
        let mut b: Vec<_> = m.brokers.iter().map(|b| (b.node_id, b.port)).collect();
        b.sort();
        b
    };
    let partition = |m: &MetadataResponse, topic: &str, i: usize| {
        let p = &m
            .topics
            .iter()
            .find(|t| t.name.as_deref() == Some(topic))
            .unwrap()
            .partitions[i];
        (p.error_code, p.leader_id, p.offline_replicas.clone())
    };
    let m = metadata(&mut pc, Some(vec!["t", "u"]), false).await;
    let mut want = vec![(me, plain_port), (2, 19_092), (3, 29_092)];
    want.sort();
    assert_eq!(brokers(&m), want);
    assert_eq!(partition(&m, "u", 0), (NONE, 3, vec![]));
    assert_eq!(partition(&m, "t", 1), (NONE, 2, vec![]));

    let m = metadata(&mut ec, Some(vec!["t", "u"]), false).await;
    let mut want = vec![(me, external_port), (2, 19_192)];
    want.sort();
    assert_eq!(brokers(&m), want);
    let listener_not_found = ErrorCode::ListenerNotFound.code();
    assert_eq!(partition(&m, "u", 0), (listener_not_found, -1, vec![3]));
    assert_eq!(partition(&m, "t", 1), (NONE, 2, vec![3]));
    assert_eq!(partition(&m, "t", 0), (NONE, me, vec![3]));
    let req = MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some("u".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    match ec.call(RequestBody::Metadata(req), 5).await {
        ResponseBody::Metadata(m) => assert_eq!(
            partition(&m, "u", 0),
            (ErrorCode::LeaderNotAvailable.code(), -1, vec![3])
        ),
        other => panic!("{other:?}"),
    }

    let described = |r: ResponseBody| match r {
        ResponseBody::DescribeCluster(d) => {
            let mut b: Vec<_> = d.brokers.iter().map(|b| (b.broker_id, b.port)).collect();
            b.sort();
            b
        }
        other => panic!("{other:?}"),
    };
    let describe = || RequestBody::DescribeCluster(DescribeClusterRequest::default());
    assert_eq!(described(ec.call(describe(), 1).await), want);
    assert_eq!(described(pc.call(describe(), 1).await).len(), 3);

    let coordinators = |r: ResponseBody| match r {
        ResponseBody::FindCoordinator(r) => r
            .coordinators
            .iter()
            .map(|k| (k.error_code, k.node_id, k.port))
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let find = || {
        RequestBody::FindCoordinator(FindCoordinatorRequest {
            key_type: 0,
            coordinator_keys: vec![group_on(1), group_on(2)],
            ..Default::default()
        })
    };
    assert_eq!(
        coordinators(pc.call(find(), 4).await),
        vec![(NONE, 2, 19_092), (NONE, 3, 29_092)]
    );
    let found = coordinators(ec.call(find(), 4).await);
    assert_eq!(found[0], (NONE, 2, 19_192));
    assert_eq!(found[1].0, ErrorCode::CoordinatorNotAvailable.code());

    let endpoints = |r: ResponseBody| match r {
        ResponseBody::Produce(r) => {
            assert_eq!(r.responses[0].partition_responses[0].error_code, NOT_LEADER);
            r.node_endpoints
                .iter()
                .map(|e| (e.node_id, e.port))
                .collect::<Vec<_>>()
        }
        ResponseBody::Fetch(r) => {
            assert_eq!(r.responses[0].partitions[0].error_code, NOT_LEADER);
            r.node_endpoints
                .iter()
                .map(|e| (e.node_id, e.port))
                .collect::<Vec<_>>()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        endpoints(pc.call(produce_to("t", 1), 11).await),
        vec![(2, 19_092)]
    );
    assert_eq!(
        endpoints(ec.call(produce_to("t", 1), 11).await),
        vec![(2, 19_192)]
    );
    assert_eq!(
        endpoints(pc.call(produce_to("u", 0), 11).await),
        vec![(3, 29_092)]
    );
    assert_eq!(endpoints(ec.call(produce_to("u", 0), 11).await), vec![]);
    assert_eq!(
        endpoints(pc.call(fetch_req(s.id, 1, EPOCH_P1), 16).await),
        vec![(2, 19_092)]
    );
    assert_eq!(
        endpoints(ec.call(fetch_req(s.id, 1, EPOCH_P1), 16).await),
        vec![(2, 19_192)]
    );
    s.running.shutdown().await.unwrap();
}
