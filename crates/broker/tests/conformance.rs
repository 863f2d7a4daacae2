//! Kafka 4 conformance on the wire, against an in-process broker: offset
//! commits to partitions that do not exist, authorized operations when a
//! request asks for them, and the transaction coordinator's APIs at Kafka
//! 4's versions.

use crate::common;

use common::*;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Every operation Kafka 4.0 supports per resource type, as bit fields
/// (`1 << AclOperation code`), with no authorizer.
const TOPIC_OPS: i32 = 1 << 3 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 10 | 1 << 11;
const GROUP_OPS: i32 = 1 << 3 | 1 << 6 | 1 << 8 | 1 << 10 | 1 << 11;
const CLUSTER_OPS: i32 = 1 << 5 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12;

fn commit_req(group: &str, topics: &[(&str, &[i32])], offset: i64) -> RequestBody {
    RequestBody::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        retention_time_ms: -1,
        topics: topics
            .iter()
            .map(
                |(name, parts)| offset_commit_request::OffsetCommitRequestTopic {
                    name: (*name).into(),
                    partitions: parts
                        .iter()
                        .map(|&p| offset_commit_request::OffsetCommitRequestPartition {
                            partition_index: p,
                            committed_offset: offset,
                            committed_leader_epoch: -1,
                            committed_metadata: Some(String::new()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            )
            .collect(),
        ..Default::default()
    })
}

/// (topic, partition, error code) of each answered partition, in order.
async fn commit(
    c: &mut Client,
    version: i16,
    group: &str,
    topics: &[(&str, &[i32])],
) -> Vec<(String, i32, i16)> {
    match c.call(commit_req(group, topics, 7), version).await {
        ResponseBody::OffsetCommit(r) => r
            .topics
            .into_iter()
            .flat_map(|t| {
                t.partitions
                    .into_iter()
                    .map(move |p| (t.name.clone(), p.partition_index, p.error_code))
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// Every (topic, partition) the group has a committed offset for.
async fn committed(c: &mut Client, group: &str) -> Vec<(String, i32)> {
    let req = OffsetFetchRequest {
        groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetFetch(req), 8).await {
        ResponseBody::OffsetFetch(r) => {
            assert_eq!(r.groups[0].error_code, NONE);
            let mut out: Vec<_> = r.groups[0]
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .filter(|p| p.committed_offset >= 0)
                        .map(|p| (t.name.clone(), p.partition_index))
                })
                .collect();
            out.sort();
            out
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commit_to_a_missing_topic_or_partition_is_refused_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("offsets.topic.num.partitions", "1")]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "known", 2, &[]).await, NONE);
    // Kafka checks existence in its request layer, for every version.
    for version in [2, 8, 9] {
        let group = format!("standalone-v{version}");
        let answered = commit(
            &mut c,
            version,
            &group,
            &[("known", &[0, 2]), ("missing", &[0])],
        )
        .await;
        assert_eq!(
            answered,
            vec![
                ("known".into(), 0, NONE),
                ("known".into(), 2, UNKNOWN_TOPIC_OR_PARTITION),
                ("missing".into(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ],
            "OffsetCommit v{version}"
        );
        assert_eq!(
            committed(&mut c, &group).await,
            vec![("known".into(), 0)],
            "v{version}"
        );
        // Nothing but unknown partitions: nothing is stored, no group made.
        let only_missing = format!("only-missing-v{version}");
        let answered = commit(&mut c, version, &only_missing, &[("missing", &[0, 1])]).await;
        assert!(
            answered
                .iter()
                .all(|(_, _, e)| *e == UNKNOWN_TOPIC_OR_PARTITION),
            "v{version}: {answered:?}"
        );
        assert_eq!(committed(&mut c, &only_missing).await, vec![]);
    }
    b.shutdown().await.unwrap();
}

async fn metadata_with_ops(c: &mut Client, version: i16, asked: bool) -> MetadataResponse {
    // v11 removed the cluster flag
    let cluster = asked && version <= 10;
    let req = MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some("ops".into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: false,
        include_cluster_authorized_operations: cluster,
        include_topic_authorized_operations: asked,
        ..Default::default()
    };
    match c.call(RequestBody::Metadata(req), version).await {
        ResponseBody::Metadata(r) => r,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorized_operations_are_every_supported_operation_when_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("offsets.topic.num.partitions", "1"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "ops", 1, &[]).await, NONE);

    // Metadata v8–v10 carry the cluster's operations; v11+ only topics'.
    for (version, cluster) in [(8, CLUSTER_OPS), (10, CLUSTER_OPS), (12, i32::MIN)] {
        let m = metadata_with_ops(&mut c, version, true).await;
        assert_eq!(m.topics[0].error_code, NONE);
        assert_eq!(
            m.topics[0].topic_authorized_operations, TOPIC_OPS,
            "v{version}"
        );
        assert_eq!(m.cluster_authorized_operations, cluster, "v{version}");
        let m = metadata_with_ops(&mut c, version, false).await;
        assert_eq!(
            m.topics[0].topic_authorized_operations,
            i32::MIN,
            "v{version}"
        );
        assert_eq!(m.cluster_authorized_operations, i32::MIN, "v{version}");
    }

    for asked in [true, false] {
        let req = DescribeClusterRequest {
            include_cluster_authorized_operations: asked,
            endpoint_type: 1,
            ..Default::default()
        };
        match c.call(RequestBody::DescribeCluster(req), 1).await {
            ResponseBody::DescribeCluster(r) => {
                assert_eq!(r.error_code, NONE);
                let want = if asked { CLUSTER_OPS } else { i32::MIN };
                assert_eq!(r.cluster_authorized_operations, want, "asked: {asked}");
            }
            other => panic!("{other:?}"),
        }
    }

    // A group with a stored offset, and one that does not exist.
    assert_eq!(
        commit(&mut c, 8, "described", &[("ops", &[0])]).await,
        vec![("ops".to_string(), 0, NONE)]
    );
    for asked in [true, false] {
        let req = DescribeGroupsRequest {
            groups: vec!["described".into(), "absent".into()],
            include_authorized_operations: asked,
            ..Default::default()
        };
        match c.call(RequestBody::DescribeGroups(req), 5).await {
            ResponseBody::DescribeGroups(r) => {
                let want = if asked { GROUP_OPS } else { i32::MIN };
                for g in &r.groups {
                    assert_eq!(g.error_code, NONE, "{}", g.group_id);
                    assert_eq!(
                        g.authorized_operations, want,
                        "{} asked: {asked}",
                        g.group_id
                    );
                }
            }
            other => panic!("{other:?}"),
        }
    }
    b.shutdown().await.unwrap();
}

/// A transaction coordinator lookup; v4+ sends `coordinator_keys`, older
/// versions `key`.
fn find_txn_coordinator(version: i16) -> RequestBody {
    let batched = version >= 4;
    RequestBody::FindCoordinator(FindCoordinatorRequest {
        key: if batched {
            String::new()
        } else {
            "txn-1".into()
        },
        key_type: 1,
        coordinator_keys: if batched {
            vec!["txn-1".into(), "txn-2".into()]
        } else {
            vec![]
        },
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_apis_are_served_and_idempotence_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("offsets.topic.num.partitions", "1"),
            ("transaction.state.log.num.partitions", "1"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;

    // The transaction coordinator's APIs at Kafka 4's versions; EndTxn
    // stops at v4 so clients stay on transaction version 1.
    match c
        .call(RequestBody::ApiVersions(Default::default()), 3)
        .await
    {
        ResponseBody::ApiVersions(r) => {
            let range = |key: ApiKey| {
                r.api_keys
                    .iter()
                    .find(|k| k.api_key == key as i16)
                    .map(|k| (k.min_version, k.max_version))
            };
            assert_eq!(range(ApiKey::InitProducerId), Some((0, 5)));
            assert_eq!(range(ApiKey::AddPartitionsToTxn), Some((0, 5)));
            assert_eq!(range(ApiKey::AddOffsetsToTxn), Some((0, 4)));
            assert_eq!(range(ApiKey::EndTxn), Some((0, 4)));
            assert_eq!(range(ApiKey::DescribeTransactions), Some((0, 0)));
            assert_eq!(range(ApiKey::ListTransactions), Some((0, 1)));
        }
        other => panic!("{other:?}"),
    }

    // FindCoordinator for a transactional id names this broker, in both
    // shapes.
    match c.call(find_txn_coordinator(3), 3).await {
        ResponseBody::FindCoordinator(r) => {
            assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
            assert_eq!(r.node_id, b.broker.config.node_id);
        }
        other => panic!("{other:?}"),
    }
    match c.call(find_txn_coordinator(4), 4).await {
        ResponseBody::FindCoordinator(r) => {
            assert_eq!(r.coordinators.len(), 2);
            for k in &r.coordinators {
                assert_eq!(k.error_code, NONE, "{}", k.key);
            }
        }
        other => panic!("{other:?}"),
    }

    let init = |transactional_id: Option<&str>| {
        RequestBody::InitProducerId(InitProducerIdRequest {
            transactional_id: transactional_id.map(Into::into),
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        })
    };
    match c.call(init(Some("txn-1")), 4).await {
        ResponseBody::InitProducerId(r) => {
            assert_eq!(r.error_code, NONE);
            assert!(r.producer_id >= 0);
            assert_eq!(r.producer_epoch, 0);
        }
        other => panic!("{other:?}"),
    }
    // Idempotent producers (no transactional id: null) still get an id; an
    // empty one is INVALID_REQUEST, as Kafka's coordinator answers.
    match c.call(init(None), 4).await {
        ResponseBody::InitProducerId(r) => {
            assert_eq!(r.error_code, NONE);
            assert!(r.producer_id >= 0);
        }
        other => panic!("{other:?}"),
    }
    match c.call(init(Some("")), 4).await {
        ResponseBody::InitProducerId(r) => {
            assert_eq!(
                r.error_code,
                weir_protocol::error_code::ErrorCode::InvalidRequest.code()
            );
            assert_eq!(r.producer_id, -1);
        }
        other => panic!("{other:?}"),
    }
    b.shutdown().await.unwrap();
}
