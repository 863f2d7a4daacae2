//! Consumer groups against an in-process broker: membership, offsets,
//! persistence in `__consumer_offsets` and expiry in virtual time.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use common::*;

pub(crate) const GROUP_CONFIG: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "3"),
];

const MEMBER_ID_REQUIRED: i16 = 79;
const REBALANCE_IN_PROGRESS: i16 = 27;
const ILLEGAL_GENERATION: i16 = 22;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;

fn join_req(group: &str, member_id: &str) -> RequestBody {
    RequestBody::JoinGroup(JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![join_group_request::JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"meta"),
            ..Default::default()
        }],
        ..Default::default()
    })
}

async fn join(c: &mut Client, group: &str, member_id: &str) -> JoinGroupResponse {
    match c.call(join_req(group, member_id), 7).await {
        ResponseBody::JoinGroup(r) => r,
        other => panic!("{other:?}"),
    }
}

/// Joins as a new member (two round trips: MEMBER_ID_REQUIRED first).
pub(crate) async fn join_new(c: &mut Client, group: &str) -> JoinGroupResponse {
    let first = join(c, group, "").await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    assert!(!first.member_id.is_empty());
    join(c, group, &first.member_id).await
}

pub(crate) async fn sync(
    c: &mut Client,
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: Vec<(String, &'static [u8])>,
) -> SyncGroupResponse {
    let req = SyncGroupRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: assignments
            .into_iter()
            .map(|(m, a)| sync_group_request::SyncGroupRequestAssignment {
                member_id: m,
                assignment: Bytes::from_static(a),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    match c.call(RequestBody::SyncGroup(req), 5).await {
        ResponseBody::SyncGroup(r) => r,
        other => panic!("{other:?}"),
    }
}

pub(crate) async fn heartbeat(
    c: &mut Client,
    group: &str,
    generation: i32,
    member_id: &str,
) -> i16 {
    let req = HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        ..Default::default()
    };
    match c.call(RequestBody::Heartbeat(req), 4).await {
        ResponseBody::Heartbeat(r) => r.error_code,
        other => panic!("{other:?}"),
    }
}

pub(crate) async fn commit(
    c: &mut Client,
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> i16 {
    let req = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.into(),
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                partition_index: partition,
                committed_offset: offset,
                committed_leader_epoch: -1,
                committed_metadata: Some("m".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetCommit(req), 8).await {
        ResponseBody::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("{other:?}"),
    }
}

/// The committed offset of one partition via OffsetFetch v8 (-1: none).
pub(crate) async fn fetch_offset(c: &mut Client, group: &str, topic: &str, partition: i32) -> i64 {
    let req = OffsetFetchRequest {
        groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopics {
                name: topic.into(),
                partition_indexes: vec![partition],
                ..Default::default()
            }]),
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetFetch(req), 8).await {
        ResponseBody::OffsetFetch(r) => {
            assert_eq!(r.groups[0].error_code, NONE);
            let p = &r.groups[0].topics[0].partitions[0];
            assert_eq!(p.error_code, NONE);
            p.committed_offset
        }
        other => panic!("{other:?}"),
    }
}

/// Same through OffsetFetch v1 (per-topic list, no top-level error).
async fn fetch_offset_v1(c: &mut Client, group: &str, topic: &str, partition: i32) -> i64 {
    let req = OffsetFetchRequest {
        group_id: group.into(),
        topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
            name: topic.into(),
            partition_indexes: vec![partition],
            ..Default::default()
        }]),
        ..Default::default()
    };
    match c.call(RequestBody::OffsetFetch(req), 1).await {
        ResponseBody::OffsetFetch(r) => r.topics[0].partitions[0].committed_offset,
        other => panic!("{other:?}"),
    }
}

async fn describe(c: &mut Client, group: &str) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest {
        groups: vec![group.into()],
        ..Default::default()
    };
    match c.call(RequestBody::DescribeGroups(req), 5).await {
        ResponseBody::DescribeGroups(mut r) => r.groups.remove(0),
        other => panic!("{other:?}"),
    }
}

async fn delete_group(c: &mut Client, group: &str) -> i16 {
    let req = DeleteGroupsRequest {
        groups_names: vec![group.into()],
        ..Default::default()
    };
    match c.call(RequestBody::DeleteGroups(req), 2).await {
        ResponseBody::DeleteGroups(r) => r.results[0].error_code,
        other => panic!("{other:?}"),
    }
}

async fn leave(c: &mut Client, group: &str, member_id: &str) -> i16 {
    let req = LeaveGroupRequest {
        group_id: group.into(),
        members: vec![leave_group_request::MemberIdentity {
            member_id: member_id.into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::LeaveGroup(req), 5).await {
        ResponseBody::LeaveGroup(r) => {
            assert_eq!(r.error_code, NONE);
            r.members[0].error_code
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_names_this_node_and_creates_the_offsets_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let req = FindCoordinatorRequest {
        key_type: 0,
        coordinator_keys: vec!["g1".into(), "g2".into()],
        ..Default::default()
    };
    let ResponseBody::FindCoordinator(r) = c.call(RequestBody::FindCoordinator(req), 4).await
    else {
        panic!()
    };
    assert_eq!(r.coordinators.len(), 2);
    for k in &r.coordinators {
        assert_eq!(k.error_code, NONE);
        assert_eq!(k.node_id, b.broker.config.node_id);
        assert_eq!(k.port, i32::from(b.local_addr.port()));
    }
    let req = FindCoordinatorRequest {
        key: "tx".into(),
        key_type: 1,
        ..Default::default()
    };
    let ResponseBody::FindCoordinator(r) = c.call(RequestBody::FindCoordinator(req), 3).await
    else {
        panic!()
    };
    // a transactional id's coordinator is this node too
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!(r.node_id, b.broker.config.node_id);
    let md = metadata(&mut c, Some(vec!["__consumer_offsets"]), false).await;
    assert_eq!(md.topics[0].error_code, NONE);
    assert!(md.topics[0].is_internal);
    assert_eq!(md.topics[0].partitions.len(), 3);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_sync_heartbeat_commit_fetch_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let j = join_new(&mut c, "g").await;
    assert_eq!(j.error_code, NONE);
    assert_eq!(j.generation_id, 1);
    assert_eq!(j.leader, j.member_id);
    assert_eq!(j.members.len(), 1);
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    let s = sync(
        &mut c,
        "g",
        1,
        &j.member_id,
        vec![(j.member_id.clone(), b"assigned")],
    )
    .await;
    assert_eq!(s.error_code, NONE);
    assert_eq!(&s.assignment[..], b"assigned");
    assert_eq!(heartbeat(&mut c, "g", 1, &j.member_id).await, NONE);
    assert_eq!(fetch_offset(&mut c, "g", "t", 0).await, -1);
    assert_eq!(commit(&mut c, "g", 1, &j.member_id, "t", 0, 42).await, NONE);
    assert_eq!(fetch_offset(&mut c, "g", "t", 0).await, 42);
    assert_eq!(fetch_offset_v1(&mut c, "g", "t", 0).await, 42);
    let d = describe(&mut c, "g").await;
    assert_eq!(d.group_state, "Stable");
    assert_eq!(d.members.len(), 1);
    assert_eq!(&d.members[0].member_assignment[..], b"assigned");
    let ResponseBody::ListGroups(l) = c
        .call(RequestBody::ListGroups(ListGroupsRequest::default()), 4)
        .await
    else {
        panic!()
    };
    assert_eq!(l.groups.len(), 1);
    assert_eq!(l.groups[0].group_id, "g");
    // a member in a live group cannot be deleted away
    assert_eq!(delete_group(&mut c, "g").await, NON_EMPTY_GROUP);
    assert_eq!(leave(&mut c, "g", &j.member_id).await, NONE);
    assert_eq!(describe(&mut c, "g").await.group_state, "Empty");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_with_two_members_and_stale_generation_commit() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut a = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut a, "t", 2, &[]).await, NONE);
    let ja = join_new(&mut a, "g").await;
    assert_eq!(ja.generation_id, 1);
    let s = sync(
        &mut a,
        "g",
        1,
        &ja.member_id,
        vec![(ja.member_id.clone(), b"all")],
    )
    .await;
    assert_eq!(s.error_code, NONE);

    // B joins: its join stays parked until A rejoins
    let addr = b.local_addr;
    let second = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        let j = join_new(&mut c, "g").await;
        (c, j)
    });
    // A learns about the rebalance through its heartbeat
    let mut hb = NONE;
    for _ in 0..200 {
        hb = heartbeat(&mut a, "g", 1, &ja.member_id).await;
        if hb == REBALANCE_IN_PROGRESS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(hb, REBALANCE_IN_PROGRESS);
    let ja2 = join(&mut a, "g", &ja.member_id).await;
    let (bc, jb) = second.await.unwrap();
    assert_eq!(ja2.error_code, NONE);
    assert_eq!(jb.error_code, NONE);
    assert_eq!(ja2.generation_id, 2);
    assert_eq!(jb.generation_id, 2);
    assert_eq!(ja2.leader, jb.leader);
    let (leader, follower, mut lc, mut fc) = if ja2.leader == ja2.member_id {
        (ja2, jb, a, bc)
    } else {
        (jb, ja2, bc, a)
    };
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
    // the follower's sync waits for the leader's assignment
    let fid = follower.member_id.clone();
    let fsync = tokio::spawn(async move {
        let r = sync(&mut fc, "g", 2, &fid, vec![]).await;
        (fc, r)
    });
    let ls = sync(
        &mut lc,
        "g",
        2,
        &leader.member_id,
        vec![
            (leader.member_id.clone(), b"p0"),
            (follower.member_id.clone(), b"p1"),
        ],
    )
    .await;
    assert_eq!(ls.error_code, NONE);
    assert_eq!(&ls.assignment[..], b"p0");
    let (mut fc, fs) = fsync.await.unwrap();
    assert_eq!(fs.error_code, NONE);
    assert_eq!(&fs.assignment[..], b"p1");
    // generation 1 is gone
    assert_eq!(
        commit(&mut fc, "g", 1, &follower.member_id, "t", 1, 7).await,
        ILLEGAL_GENERATION
    );
    assert_eq!(fetch_offset(&mut fc, "g", "t", 1).await, -1);
    assert_eq!(
        commit(&mut fc, "g", 2, &follower.member_id, "t", 1, 7).await,
        NONE
    );
    assert_eq!(fetch_offset(&mut lc, "g", "t", 1).await, 7);
    drop(fc);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_and_groups_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let j = join_new(&mut c, "g").await;
    sync(
        &mut c,
        "g",
        1,
        &j.member_id,
        vec![(j.member_id.clone(), b"a")],
    )
    .await;
    assert_eq!(commit(&mut c, "g", 1, &j.member_id, "t", 0, 10).await, NONE);
    assert_eq!(commit(&mut c, "g", 1, &j.member_id, "t", 0, 11).await, NONE);
    assert_eq!(commit(&mut c, "g", 1, &j.member_id, "t", 1, 3).await, NONE);
    // a standalone commit (generation -1) to another group
    assert_eq!(commit(&mut c, "solo", -1, "", "t", 1, 99).await, NONE);
    b.shutdown().await.unwrap();

    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(fetch_offset(&mut c, "g", "t", 0).await, 11);
    assert_eq!(fetch_offset(&mut c, "g", "t", 1).await, 3);
    assert_eq!(fetch_offset(&mut c, "solo", "t", 1).await, 99);
    // the group's generation came back too: the old member is still known
    let d = describe(&mut c, "g").await;
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id, j.member_id);
    assert_eq!(leave(&mut c, "g", &j.member_id).await, NONE);
    assert_eq!(delete_group(&mut c, "g").await, NONE);
    assert_eq!(delete_group(&mut c, "g").await, GROUP_ID_NOT_FOUND);
    b.shutdown().await.unwrap();

    // the deletion is durable: tombstones replayed
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(fetch_offset(&mut c, "g", "t", 0).await, -1);
    assert_eq!(describe(&mut c, "g").await.group_state, "Dead");
    assert_eq!(fetch_offset(&mut c, "solo", "t", 1).await, 99);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_of_empty_groups_expire_in_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicI64::new(1_700_000_000_000));
    let n = now.clone();
    let clock: weir_broker::broker::Clock = Arc::new(move || n.load(Ordering::SeqCst));
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.path().display().to_string());
    s.set("offsets.retention.minutes", "1");
    s.set("offsets.retention.check.interval.ms", "1000");
    for (k, v) in GROUP_CONFIG {
        s.set(k, v);
    }
    let b = weir_broker::server::start_with_clock(s.build().unwrap(), clock)
        .await
        .unwrap();
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    assert_eq!(commit(&mut c, "solo", -1, "", "t", 0, 5).await, NONE);
    now.fetch_add(30_000, Ordering::SeqCst);
    // within retention: still there after the timer ran
    assert_eq!(fetch_offset(&mut c, "solo", "t", 0).await, 5);
    now.fetch_add(31_000, Ordering::SeqCst);
    let mut got = 5;
    for _ in 0..500 {
        got = fetch_offset(&mut c, "solo", "t", 0).await;
        if got == -1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(got, -1, "expired after offsets.retention.minutes");
    b.shutdown().await.unwrap();
}

const UNKNOWN_SERVER_ERROR: i16 = -1;

/// Sets one config of a topic with IncrementalAlterConfigs.
async fn set_topic_config(c: &mut Client, topic: &str, name: &str, value: &str) {
    assert_eq!(alter_config(c, 2, topic, name, Some(value)).await, NONE);
}

/// A standalone commit (generation -1) with `metadata`.
async fn commit_with_metadata(c: &mut Client, group: &str, offset: i64, metadata: &str) -> i16 {
    let req = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: offset,
                committed_leader_epoch: -1,
                committed_metadata: Some(metadata.into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetCommit(req), 8).await {
        ResponseBody::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("{other:?}"),
    }
}

/// An append to `__consumer_offsets` that the log refuses (a record batch
/// over the topic's `max.message.bytes`) fails the commit with Kafka's
/// mapping (UNKNOWN_SERVER_ERROR for a record too large), and OffsetFetch
/// keeps returning the last durable offset, also after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_commit_append_is_not_visible() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    // commits to partitions that do not exist are refused
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    assert_eq!(commit_with_metadata(&mut c, "dur", 5, "m").await, NONE);
    set_topic_config(&mut c, "__consumer_offsets", "max.message.bytes", "300").await;
    let big = "x".repeat(1000);
    assert_eq!(
        commit_with_metadata(&mut c, "dur", 9, &big).await,
        UNKNOWN_SERVER_ERROR
    );
    assert_eq!(fetch_offset(&mut c, "dur", "t", 0).await, 5);
    // A commit that fits is written and visible.
    assert_eq!(commit_with_metadata(&mut c, "dur", 7, "m").await, NONE);
    assert_eq!(fetch_offset(&mut c, "dur", "t", 0).await, 7);
    drop(c);
    b.shutdown().await.unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(fetch_offset(&mut c, "dur", "t", 0).await, 7);
    drop(c);
    b.shutdown().await.unwrap();
}

/// The leader's SyncGroup whose assignment record cannot be appended is
/// answered with the append's error and the group rebalances; nothing
/// from that generation is persisted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_assignment_append_fails_sync_and_rebalances() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let j = join_new(&mut c, "big").await;
    assert_eq!(j.error_code, NONE);
    assert_eq!(j.leader, j.member_id);
    set_topic_config(&mut c, "__consumer_offsets", "max.message.bytes", "300").await;
    let s = sync(
        &mut c,
        "big",
        j.generation_id,
        &j.member_id,
        vec![(j.member_id.clone(), &[7u8; 1000])],
    )
    .await;
    assert_eq!(s.error_code, UNKNOWN_SERVER_ERROR);
    assert!(s.assignment.is_empty());
    let d = describe(&mut c, "big").await;
    assert_eq!(d.group_state, "PreparingRebalance");
    assert_eq!(
        heartbeat(&mut c, "big", j.generation_id, &j.member_id).await,
        REBALANCE_IN_PROGRESS
    );
    // With room for the record again, the rejoin completes normally.
    set_topic_config(&mut c, "__consumer_offsets", "max.message.bytes", "1048588").await;
    let j2 = join(&mut c, "big", &j.member_id).await;
    assert_eq!(j2.error_code, NONE);
    assert_eq!(j2.generation_id, j.generation_id + 1);
    let s2 = sync(
        &mut c,
        "big",
        j2.generation_id,
        &j2.member_id,
        vec![(j2.member_id.clone(), &[7u8; 1000])],
    )
    .await;
    assert_eq!(s2.error_code, NONE);
    assert_eq!(s2.assignment.len(), 1000);
    drop(c);
    b.shutdown().await.unwrap();
}
