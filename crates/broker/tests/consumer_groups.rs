//! ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) over the
//! wire: a member joins and gets its assignment by topic id, the bad
//! requests are answered with Kafka's error codes, ListGroups reports the
//! group type, and OffsetCommit/OffsetFetch v9 check the member epoch.

use crate::common::*;

use weir_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;

pub(crate) fn join(group: &str, member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        ..Default::default()
    }
}

pub(crate) async fn heartbeat(
    c: &mut Client,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    match c.call(RequestBody::ConsumerGroupHeartbeat(req), 1).await {
        ResponseBody::ConsumerGroupHeartbeat(r) => r,
        other => panic!("{other:?}"),
    }
}

/// OffsetCommit of `offset` for partition 0 of `topic` by `member` of a
/// consumer group at member epoch `epoch`, sent at `version`; the
/// partition's error code.
pub(crate) async fn member_commit(
    c: &mut Client,
    (group, member, epoch): (&str, &str, i32),
    topic: &str,
    offset: i64,
    version: i16,
) -> i16 {
    let req = RequestBody::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: epoch,
        member_id: member.into(),
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: offset,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    match c.call(req, version).await {
        ResponseBody::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_group_heartbeat_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "cgt", 4, &[]).await, 0);
    let id = metadata(&mut c, Some(vec!["cgt"]), false).await.topics[0].topic_id;

    let r = heartbeat(&mut c, join("g", "m1", &["cgt"])).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    let a = r.assignment.expect("assignment on join");
    assert_eq!(a.topic_partitions.len(), 1);
    assert_eq!(a.topic_partitions[0].topic_id, id);
    assert_eq!(a.topic_partitions[0].partitions, vec![0, 1, 2, 3]);

    // The bad requests.
    let owned = Some(vec![TopicPartitions {
        topic_id: id,
        partitions: vec![0, 1, 2, 3],
        ..Default::default()
    }]);
    let cases: Vec<(&str, ConsumerGroupHeartbeatRequest, i16)> = vec![
        (
            "fenced epoch",
            ConsumerGroupHeartbeatRequest {
                member_epoch: 7,
                rebalance_timeout_ms: -1,
                subscribed_topic_names: None,
                topic_partitions: owned.clone(),
                ..join("g", "m1", &[])
            },
            110, // FENCED_MEMBER_EPOCH
        ),
        (
            "unknown member",
            ConsumerGroupHeartbeatRequest {
                member_epoch: 1,
                topic_partitions: None,
                ..join("g", "nobody", &["cgt"])
            },
            25, // UNKNOWN_MEMBER_ID
        ),
        (
            "invalid regex",
            ConsumerGroupHeartbeatRequest {
                subscribed_topic_names: None,
                subscribed_topic_regex: Some("cg(".into()),
                ..join("g", "m2", &[])
            },
            128, // INVALID_REGULAR_EXPRESSION
        ),
        (
            "unknown assignor",
            ConsumerGroupHeartbeatRequest {
                server_assignor: Some("sticky".into()),
                ..join("g", "m2", &["cgt"])
            },
            112, // UNSUPPORTED_ASSIGNOR
        ),
        (
            "no member id in v1",
            join("g", "", &["cgt"]),
            42, // INVALID_REQUEST
        ),
    ];
    for (name, req, code) in cases {
        let r = heartbeat(&mut c, req).await;
        assert_eq!(r.error_code, code, "{name}: {r:?}");
        assert!(r.error_message.is_some(), "{name}");
    }

    // Describe: one member, its epochs and assignments with topic names.
    let d = match c
        .call(
            RequestBody::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
                group_ids: vec!["g".into(), "none".into()],
                ..Default::default()
            }),
            0,
        )
        .await
    {
        ResponseBody::ConsumerGroupDescribe(r) => r,
        other => panic!("{other:?}"),
    };
    let g = &d.groups[0];
    assert_eq!(
        (g.error_code, g.group_state.as_str(), g.group_epoch),
        (0, "Stable", 1)
    );
    assert_eq!(g.assignor_name, "uniform");
    assert_eq!(g.members[0].member_id, "m1");
    assert_eq!(
        g.members[0].assignment.topic_partitions[0].topic_name,
        "cgt"
    );
    assert_eq!(d.groups[1].error_code, 69); // GROUP_ID_NOT_FOUND

    // ListGroups v5 with the type filter.
    let listed = match c
        .call(
            RequestBody::ListGroups(ListGroupsRequest {
                types_filter: vec!["consumer".into()],
                ..Default::default()
            }),
            5,
        )
        .await
    {
        ResponseBody::ListGroups(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type, "consumer");
    assert_eq!(listed.groups[0].group_state, "Stable");

    // OffsetCommit v9 carries the member epoch.
    for (epoch, version, code) in [
        (2, 9, 113), // STALE_MEMBER_EPOCH
        (1, 8, 35),  // UNSUPPORTED_VERSION: a member commits with v9+
        (1, 9, 0),
    ] {
        assert_eq!(
            member_commit(&mut c, ("g", "m1", epoch), "cgt", 3, version).await,
            code,
            "epoch {epoch} v{version}"
        );
    }
    // OffsetFetch v9 as the member with a stale epoch.
    let fetch = RequestBody::OffsetFetch(OffsetFetchRequest {
        groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
            group_id: "g".into(),
            member_id: Some("m1".into()),
            member_epoch: 5,
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    });
    match c.call(fetch, 9).await {
        ResponseBody::OffsetFetch(r) => assert_eq!(r.groups[0].error_code, 113),
        other => panic!("{other:?}"),
    }

    // Leaving: the group is empty and can be deleted.
    let r = heartbeat(
        &mut c,
        ConsumerGroupHeartbeatRequest {
            member_epoch: -1,
            topic_partitions: None,
            subscribed_topic_names: None,
            rebalance_timeout_ms: -1,
            ..join("g", "m1", &[])
        },
    )
    .await;
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    b.shutdown().await.unwrap();

    // After a restart the group is back, empty, with its epoch.
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    match c
        .call(
            RequestBody::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
                group_ids: vec!["g".into()],
                ..Default::default()
            }),
            0,
        )
        .await
    {
        ResponseBody::ConsumerGroupDescribe(r) => {
            let g = &r.groups[0];
            assert_eq!((g.error_code, g.group_state.as_str()), (0, "Empty"));
            assert_eq!(g.group_epoch, 2);
        }
        other => panic!("{other:?}"),
    }
    b.shutdown().await.unwrap();
}

/// Sets (`Some`) or deletes the group config `name` of `group`; the
/// resource's error code.
async fn alter_group_config(c: &mut Client, group: &str, name: &str, value: Option<&str>) -> i16 {
    const RESOURCE_GROUP: i8 = 32;
    alter_config(c, RESOURCE_GROUP, group, name, value).await
}

/// The group config `consumer.heartbeat.interval.ms` set on one group is
/// the interval its members are told from their next heartbeat (Kafka 4);
/// another group keeps the broker's; deleted, the broker's again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_config_sets_the_heartbeat_interval_of_its_members() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "cgi", 2, &[]).await, 0);
    let r = heartbeat(&mut c, join("gi", "m1", &["cgi"])).await;
    assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 5_000), "{r:?}");
    let beat = |epoch| ConsumerGroupHeartbeatRequest {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        topic_partitions: None,
        ..join("gi", "m1", &[])
    };
    let name = "consumer.heartbeat.interval.ms";
    assert_eq!(
        alter_group_config(&mut c, "gi", name, Some("12000")).await,
        0
    );
    let r = heartbeat(&mut c, beat(r.member_epoch)).await;
    assert_eq!(
        (r.error_code, r.heartbeat_interval_ms),
        (0, 12_000),
        "{r:?}"
    );
    let other = heartbeat(&mut c, join("other", "m9", &["cgi"])).await;
    assert_eq!(other.heartbeat_interval_ms, 5_000, "{other:?}");
    // Outside the broker's bounds (5000..15000): refused, nothing changes.
    assert_eq!(
        alter_group_config(&mut c, "gi", name, Some("20000")).await,
        40 // INVALID_CONFIG
    );
    let r = heartbeat(&mut c, beat(r.member_epoch)).await;
    assert_eq!(r.heartbeat_interval_ms, 12_000, "{r:?}");
    assert_eq!(alter_group_config(&mut c, "gi", name, None).await, 0);
    let r = heartbeat(&mut c, beat(r.member_epoch)).await;
    assert_eq!((r.error_code, r.heartbeat_interval_ms), (0, 5_000), "{r:?}");
    b.shutdown().await.unwrap();
}
