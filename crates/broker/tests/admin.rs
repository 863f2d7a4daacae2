//! Topic administration: Metadata auto-creation, create/delete, configs, DeleteRecords.

use crate::common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creates_and_advertises_the_bound_port() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("num.partitions", "2")]).await;
    let mut c = Client::connect(b.local_addr).await;
    let m = metadata(&mut c, Some(vec!["auto-one"]), true).await;
    assert_eq!(m.brokers[0].port, b.local_addr.port() as i32);
    assert_eq!(m.brokers[0].host, "127.0.0.1");
    assert_eq!(m.controller_id, 1);
    assert!(m.cluster_id.as_deref().is_some_and(|c| c.len() == 22));
    let t = &m.topics[0];
    assert_eq!(t.error_code, NONE);
    assert_ne!(t.topic_id, Uuid::ZERO);
    assert_eq!(t.partitions.len(), 2);
    assert_eq!(t.partitions[1].leader_id, 1);
    let m = metadata(&mut c, Some(vec!["not-auto"]), false).await;
    assert_eq!(m.topics[0].error_code, 3);
    let m = metadata(&mut c, Some(vec!["bad name!"]), true).await;
    assert_eq!(m.topics[0].error_code, 17);
    let m = metadata(&mut c, None, false).await;
    let names: Vec<_> = m.topics.iter().map(|t| t.name.clone().unwrap()).collect();
    assert_eq!(names, vec!["auto-one".to_string()]);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_delete_topics() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "t1", 3, &[("retention.ms", "1000")]).await,
        NONE
    );
    assert_eq!(create_topic(&mut c, "t1", 3, &[]).await, 36);
    assert_eq!(create_topic(&mut c, "t2", 0, &[]).await, 37);
    assert_eq!(
        create_topic(&mut c, "t3", 1, &[("no.such.config", "1")]).await,
        40
    );
    // replication factor 3 is refused with a message
    let req = CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: "rf3".into(),
            num_partitions: 1,
            replication_factor: 3,
            ..Default::default()
        }],
        validate_only: false,
        ..Default::default()
    };
    match c.call(RequestBody::CreateTopics(req), 7).await {
        ResponseBody::CreateTopics(r) => {
            assert_eq!(r.topics[0].error_code, 38);
            assert!(
                r.topics[0]
                    .error_message
                    .as_deref()
                    .unwrap()
                    .contains("replication")
            );
        }
        other => panic!("{other:?}"),
    }
    // validate_only creates nothing
    let req = CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: "dry".into(),
            num_partitions: 1,
            replication_factor: -1,
            ..Default::default()
        }],
        validate_only: true,
        ..Default::default()
    };
    match c.call(RequestBody::CreateTopics(req), 7).await {
        ResponseBody::CreateTopics(r) => assert_eq!(r.topics[0].error_code, NONE),
        other => panic!("{other:?}"),
    }
    let m = metadata(&mut c, None, false).await;
    let names: Vec<_> = m.topics.iter().map(|t| t.name.clone().unwrap()).collect();
    assert_eq!(names, vec!["t1".to_string()]);
    assert_eq!(m.topics[0].partitions.len(), 3);
    // delete (v6, by name) then it is gone
    let req = DeleteTopicsRequest {
        topics: vec![delete_topics_request::DeleteTopicState {
            name: Some("t1".into()),
            topic_id: Uuid::ZERO,
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteTopics(req.clone()), 6).await {
        ResponseBody::DeleteTopics(r) => assert_eq!(r.responses[0].error_code, NONE),
        other => panic!("{other:?}"),
    }
    match c.call(RequestBody::DeleteTopics(req), 6).await {
        ResponseBody::DeleteTopics(r) => assert_eq!(r.responses[0].error_code, 3),
        other => panic!("{other:?}"),
    }
    let m = metadata(&mut c, None, false).await;
    assert!(m.topics.is_empty());
    assert!(!dir.path().join("t1-0").exists());
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_alter_configs() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("log.segment.bytes", "4096")]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "cfg", 1, &[("retention.ms", "1234")]).await,
        NONE
    );
    let m = topic_config(&mut c, "cfg").await;
    assert_eq!(m["retention.ms"], (Some("1234".into()), 1));
    assert_eq!(m["segment.bytes"], (Some("4096".into()), 4));
    assert_eq!(m["cleanup.policy"], (Some("delete".into()), 5));
    assert!(m.len() >= 20);
    // incremental: SET, APPEND, DELETE
    let inc = |name: &str, op: i8, value: Option<&str>| {
        incremental_alter_configs_request::AlterableConfig {
            name: name.to_string(),
            config_operation: op,
            value: value.map(String::from),
            ..Default::default()
        }
    };
    let req = IncrementalAlterConfigsRequest {
        resources: vec![incremental_alter_configs_request::AlterConfigsResource {
            resource_type: 2,
            resource_name: "cfg".into(),
            configs: vec![
                inc("max.message.bytes", 0, Some("2000")),
                inc("cleanup.policy", 2, Some("compact")),
                inc("retention.ms", 1, None),
            ],
            ..Default::default()
        }],
        validate_only: false,
        ..Default::default()
    };
    match c.call(RequestBody::IncrementalAlterConfigs(req), 1).await {
        ResponseBody::IncrementalAlterConfigs(r) => assert_eq!(r.responses[0].error_code, NONE),
        other => panic!("{other:?}"),
    }
    let m = topic_config(&mut c, "cfg").await;
    assert_eq!(m["max.message.bytes"], (Some("2000".into()), 1));
    assert_eq!(m["cleanup.policy"], (Some("delete,compact".into()), 1));
    assert_eq!(m["retention.ms"].1, 5);
    // the new max.message.bytes is enforced
    let big = "x".repeat(3000);
    assert_eq!(produce(&mut c, "cfg", 0, batch(&[&big], 1), 1).await.0, 10);
    // AlterConfigs replaces the whole set
    let req = AlterConfigsRequest {
        resources: vec![alter_configs_request::AlterConfigsResource {
            resource_type: 2,
            resource_name: "cfg".into(),
            configs: vec![alter_configs_request::AlterableConfig {
                name: "retention.bytes".into(),
                value: Some("99".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        validate_only: false,
        ..Default::default()
    };
    match c.call(RequestBody::AlterConfigs(req), 2).await {
        ResponseBody::AlterConfigs(r) => assert_eq!(r.responses[0].error_code, NONE),
        other => panic!("{other:?}"),
    }
    let m = topic_config(&mut c, "cfg").await;
    assert_eq!(m["retention.bytes"], (Some("99".into()), 1));
    assert_eq!(m["max.message.bytes"].1, 5);
    // a bad value is refused
    let req = IncrementalAlterConfigsRequest {
        resources: vec![incremental_alter_configs_request::AlterConfigsResource {
            resource_type: 2,
            resource_name: "cfg".into(),
            configs: vec![inc("retention.ms", 0, Some("soon"))],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::IncrementalAlterConfigs(req), 1).await {
        ResponseBody::IncrementalAlterConfigs(r) => assert_eq!(r.responses[0].error_code, 40),
        other => panic!("{other:?}"),
    }
    // broker configs
    let req = RequestBody::DescribeConfigs(DescribeConfigsRequest {
        resources: vec![describe_configs_request::DescribeConfigsResource {
            resource_type: 4,
            resource_name: "1".into(),
            configuration_keys: Some(vec!["log.segment.bytes".into(), "num.partitions".into()]),
            ..Default::default()
        }],
        ..Default::default()
    });
    match c.call(req, 4).await {
        ResponseBody::DescribeConfigs(r) => {
            let cfgs: BTreeMap<_, _> = r.results[0]
                .configs
                .iter()
                .map(|c| (c.name.clone(), (c.value.clone(), c.config_source)))
                .collect();
            assert_eq!(cfgs["log.segment.bytes"], (Some("4096".into()), 4));
            assert_eq!(cfgs["num.partitions"], (Some("1".into()), 5));
        }
        other => panic!("{other:?}"),
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "dr", 1, &[("segment.bytes", "1024")]).await,
        NONE
    );
    let v = "y".repeat(300);
    for _ in 0..10 {
        assert_eq!(
            produce(&mut c, "dr", 0, batch(&[&v, &v], 1), 1).await.0,
            NONE
        );
    }
    let req = DeleteRecordsRequest {
        topics: vec![delete_records_request::DeleteRecordsTopic {
            name: "dr".into(),
            partitions: vec![delete_records_request::DeleteRecordsPartition {
                partition_index: 0,
                offset: 8,
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 1000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteRecords(req), 2).await {
        ResponseBody::DeleteRecords(r) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.error_code, p.low_watermark), (NONE, 8));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(list_offset(&mut c, "dr", -2).await.1, 8);
    assert_eq!(fetch(&mut c, 12, "dr", Uuid::ZERO, 2, 0).await.0, 1);
    let (err, _, got) = fetch(&mut c, 12, "dr", Uuid::ZERO, 8, 0).await;
    assert_eq!(err, NONE);
    assert!(got.iter().any(|x| x.0 == 8));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_and_describe_log_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "grow", 2, &[]).await, NONE);
    let grow = |count: i32, validate_only: bool| {
        RequestBody::CreatePartitions(CreatePartitionsRequest {
            topics: vec![create_partitions_request::CreatePartitionsTopic {
                name: "grow".into(),
                count,
                assignments: None,
                ..Default::default()
            }],
            timeout_ms: 1000,
            validate_only,
            ..Default::default()
        })
    };
    let code = |r: ResponseBody| match r {
        ResponseBody::CreatePartitions(r) => r.results[0].error_code,
        other => panic!("{other:?}"),
    };
    assert_eq!(code(c.call(grow(5, true), 3).await), NONE);
    assert_eq!(
        metadata(&mut c, Some(vec!["grow"]), false).await.topics[0]
            .partitions
            .len(),
        2
    );
    assert_eq!(code(c.call(grow(5, false), 3).await), NONE);
    assert_eq!(
        metadata(&mut c, Some(vec!["grow"]), false).await.topics[0]
            .partitions
            .len(),
        5
    );
    assert_eq!(code(c.call(grow(3, false), 3).await), 37);
    assert_eq!(
        produce(&mut c, "grow", 4, batch(&["new"], 1), 1).await,
        (NONE, 0)
    );
    // log dirs: one dir, five partitions, sizes from the logs
    let req = DescribeLogDirsRequest {
        topics: None,
        ..Default::default()
    };
    match c.call(RequestBody::DescribeLogDirs(req), 4).await {
        ResponseBody::DescribeLogDirs(r) => {
            assert_eq!(r.results.len(), 1);
            let t = &r.results[0].topics;
            assert_eq!(t.len(), 1);
            assert_eq!(t[0].name, "grow");
            let sizes: Vec<(i32, i64)> = t[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.partition_size))
                .collect();
            assert_eq!(sizes.len(), 5);
            assert_eq!(sizes[4].1, batch(&["new"], 1).len() as i64);
            assert!(sizes[..4].iter().all(|(_, s)| *s == 0));
        }
        other => panic!("{other:?}"),
    }
    // still 5 partitions after a restart
    drop(c);
    b.shutdown().await.unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        metadata(&mut c, Some(vec!["grow"]), false).await.topics[0]
            .partitions
            .len(),
        5
    );
    b.shutdown().await.unwrap();
}

/// `.log` files in a partition directory: the segments on disk.
fn log_files(dir: &std::path::Path, topic: &str, partition: i32) -> u64 {
    std::fs::read_dir(dir.join(format!("{topic}-{partition}")))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_log_dirs_reports_segment_counts_only_when_asked() {
    use weir_protocol::weir_ext;
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "segs", 2, &[("segment.bytes", "200")]).await,
        NONE
    );
    // each batch is larger than half a segment: one segment per batch
    let value = "v".repeat(100);
    for i in 0..5 {
        assert_eq!(
            produce(&mut c, "segs", 0, batch(&[&value], i), 1).await,
            (NONE, i)
        );
    }
    let on_disk = [
        log_files(dir.path(), "segs", 0),
        log_files(dir.path(), "segs", 1),
    ];
    assert!(on_disk[0] >= 5, "{on_disk:?}");
    assert_eq!(on_disk[1], 1);

    let partitions =
        |r: &DescribeLogDirsResponse| -> Vec<describe_log_dirs_response::DescribeLogDirsPartition> {
            r.results
                .iter()
                .flat_map(|d| d.topics.iter())
                .filter(|t| t.name == "segs")
                .flat_map(|t| t.partitions.iter().cloned())
                .collect()
        };
    for version in 1..=4 {
        // without the tag: no tagged field anywhere
        let req = DescribeLogDirsRequest {
            topics: None,
            ..Default::default()
        };
        let r = match c.call(RequestBody::DescribeLogDirs(req), version).await {
            ResponseBody::DescribeLogDirs(r) => r,
            other => panic!("{other:?}"),
        };
        assert!(r.unknown_tagged_fields.is_empty());
        for d in &r.results {
            assert!(d.unknown_tagged_fields.is_empty());
            for t in &d.topics {
                assert!(t.unknown_tagged_fields.is_empty());
                for p in &t.partitions {
                    assert!(p.unknown_tagged_fields.is_empty(), "v{version}: {p:?}");
                }
            }
        }
        assert_eq!(partitions(&r).len(), 2);
        if version < 2 {
            continue; // tagged fields need a flexible version
        }
        // with the tag: one count per partition, as many as .log files
        let mut req = DescribeLogDirsRequest {
            topics: Some(vec![describe_log_dirs_request::DescribableLogDirTopic {
                topic: "segs".into(),
                partitions: vec![0, 1],
                ..Default::default()
            }]),
            ..Default::default()
        };
        weir_ext::request_segment_counts(&mut req);
        let r = match c.call(RequestBody::DescribeLogDirs(req), version).await {
            ResponseBody::DescribeLogDirs(r) => r,
            other => panic!("{other:?}"),
        };
        let got: Vec<(i32, Option<u64>)> = partitions(&r)
            .iter()
            .map(|p| (p.partition_index, weir_ext::segment_count(p)))
            .collect();
        assert_eq!(
            got,
            vec![(0, Some(on_disk[0])), (1, Some(on_disk[1]))],
            "v{version}"
        );
        // only that one tagged field was added
        for p in partitions(&r) {
            assert_eq!(p.unknown_tagged_fields.len(), 1);
        }
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_leaders_on_a_single_node_has_nothing_to_elect() {
    use weir_protocol::messages::{ElectLeadersRequest, elect_leaders_request};
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "lead", 2, &[]).await, NONE);
    let elect = |election_type: i8, topics: Option<Vec<(&str, Vec<i32>)>>| {
        RequestBody::ElectLeaders(ElectLeadersRequest {
            election_type,
            topic_partitions: topics.map(|ts| {
                ts.into_iter()
                    .map(|(t, ps)| elect_leaders_request::TopicPartitions {
                        topic: t.into(),
                        partitions: ps,
                        ..Default::default()
                    })
                    .collect()
            }),
            timeout_ms: 1000,
            ..Default::default()
        })
    };
    for version in [0, 1, 2] {
        let r = match c
            .call(
                elect(0, Some(vec![("lead", vec![0, 1, 7]), ("nope", vec![0])])),
                version,
            )
            .await
        {
            ResponseBody::ElectLeaders(r) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(r.error_code, NONE);
        let codes: Vec<(String, i32, i16)> = r
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result
                    .iter()
                    .map(|p| (t.topic.clone(), p.partition_id, p.error_code))
            })
            .collect();
        // ELECTION_NOT_NEEDED (84) for the partitions that exist,
        // UNKNOWN_TOPIC_OR_PARTITION (3) for the others
        assert_eq!(
            codes,
            vec![
                ("lead".to_string(), 0, 84),
                ("lead".to_string(), 1, 84),
                ("lead".to_string(), 7, 3),
                ("nope".to_string(), 0, 3),
            ],
            "v{version}"
        );
    }
    // every partition: nothing to report
    match c.call(elect(0, None), 2).await {
        ResponseBody::ElectLeaders(r) => {
            assert_eq!(r.error_code, NONE);
            assert!(r.replica_election_results.is_empty());
        }
        other => panic!("{other:?}"),
    }
    // an election type Kafka does not know
    match c.call(elect(5, Some(vec![("lead", vec![0])])), 2).await {
        ResponseBody::ElectLeaders(r) => assert_eq!(r.error_code, 42),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_reassignments_on_a_single_node_have_nowhere_to_go() {
    use weir_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use weir_protocol::messages::{
        AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest,
    };
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "moving", 2, &[]).await, NONE);
    let partition = |index: i32, replicas: Option<Vec<i32>>| ReassignablePartition {
        partition_index: index,
        replicas,
        ..Default::default()
    };
    let req = AlterPartitionReassignmentsRequest {
        timeout_ms: 1000,
        topics: vec![
            ReassignableTopic {
                name: "moving".into(),
                partitions: vec![
                    partition(0, Some(vec![1])),
                    partition(1, Some(vec![2])),
                    partition(1, Some(vec![1, 1])),
                    partition(0, None),
                    partition(9, Some(vec![1])),
                ],
                ..Default::default()
            },
            ReassignableTopic {
                name: "nope".into(),
                partitions: vec![partition(0, Some(vec![1]))],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let r = match c
        .call(RequestBody::AlterPartitionReassignments(req), 0)
        .await
    {
        ResponseBody::AlterPartitionReassignments(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(r.error_code, NONE);
    let codes: Vec<(String, i32, i16)> = r
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.clone(), p.partition_index, p.error_code))
        })
        .collect();
    // Node 1 already holds every partition: NONE; another broker or a
    // repeated one is INVALID_REPLICA_ASSIGNMENT (39); a cancel is
    // NO_REASSIGNMENT_IN_PROGRESS (85); unknown partitions are 3.
    assert_eq!(
        codes,
        vec![
            ("moving".to_string(), 0, NONE),
            ("moving".to_string(), 1, 39),
            ("moving".to_string(), 1, 39),
            ("moving".to_string(), 0, 85),
            ("moving".to_string(), 9, 3),
            ("nope".to_string(), 0, 3),
        ]
    );
    let list = ListPartitionReassignmentsRequest {
        timeout_ms: 1000,
        topics: None,
        ..Default::default()
    };
    match c
        .call(RequestBody::ListPartitionReassignments(list), 0)
        .await
    {
        ResponseBody::ListPartitionReassignments(r) => {
            assert_eq!(r.error_code, NONE);
            assert!(r.topics.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// Incremental changes of different keys of one topic, sent at once on
/// separate connections: every key is in the final set (none overwrote
/// another's with the overrides it read before).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_incremental_topic_changes_keep_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "many", 1, &[]).await, NONE);
    let keys = [
        ("retention.ms", "86400001"),
        ("retention.bytes", "1000001"),
        ("segment.ms", "3600001"),
        ("max.message.bytes", "100001"),
        ("min.insync.replicas", "1"),
        ("delete.retention.ms", "86400002"),
        ("min.compaction.lag.ms", "5"),
        ("max.compaction.lag.ms", "86400003"),
        ("file.delete.delay.ms", "60001"),
        ("segment.index.bytes", "10485761"),
        ("index.interval.bytes", "4097"),
        ("message.timestamp.type", "LogAppendTime"),
    ];
    for round in 0..5 {
        let tasks: Vec<_> = keys
            .iter()
            .map(|&(name, value)| {
                let addr = b.local_addr;
                tokio::spawn(async move {
                    let mut c = Client::connect(addr).await;
                    let req = IncrementalAlterConfigsRequest {
                        resources: vec![incremental_alter_configs_request::AlterConfigsResource {
                            resource_type: 2,
                            resource_name: "many".into(),
                            configs: vec![incremental_alter_configs_request::AlterableConfig {
                                name: name.into(),
                                config_operation: 0,
                                value: Some(value.into()),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    };
                    match c.call(RequestBody::IncrementalAlterConfigs(req), 1).await {
                        ResponseBody::IncrementalAlterConfigs(r) => r.responses[0].error_code,
                        other => panic!("{other:?}"),
                    }
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), NONE);
        }
        let m = topic_config(&mut c, "many").await;
        for (name, value) in keys {
            assert_eq!(
                m[name],
                (Some(value.to_string()), 1),
                "round {round}: {name} lost"
            );
        }
        // start the next round from no overrides
        let req = AlterConfigsRequest {
            resources: vec![alter_configs_request::AlterConfigsResource {
                resource_type: 2,
                resource_name: "many".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        match c.call(RequestBody::AlterConfigs(req), 1).await {
            ResponseBody::AlterConfigs(r) => assert_eq!(r.responses[0].error_code, NONE),
            other => panic!("{other:?}"),
        }
    }
}
