//! Shared test client and helpers: an in-process broker on 127.0.0.1:0 with
//! a temporary data dir, driven by a small client built on `weir_protocol`.
#![allow(dead_code)]

pub use std::collections::BTreeMap;
pub use std::net::SocketAddr;
pub use std::time::Duration;

pub use bytes::{Bytes, BytesMut};
pub use tokio::io::{AsyncReadExt, AsyncWriteExt};
pub use tokio::net::TcpStream;
pub use weir_broker::config::ConfigSources;
pub use weir_broker::{RunningBroker, start};
pub use weir_protocol::codec::Uuid;
pub use weir_protocol::frame::{decode_response, encode_request};
pub use weir_protocol::messages::*;
pub use weir_protocol::records::{BatchIter, Compression, RecordBatchBuilder};

pub const NONE: i16 = 0;

/// A cluster view a test sets by hand (install it with
/// `Broker::set_cluster`, change it through the lock).
pub struct FixedView(pub std::sync::RwLock<std::sync::Arc<weir_broker::cluster::ClusterSnapshot>>);

impl FixedView {
    pub fn new(snap: weir_broker::cluster::ClusterSnapshot) -> std::sync::Arc<FixedView> {
        std::sync::Arc::new(FixedView(std::sync::RwLock::new(std::sync::Arc::new(snap))))
    }
}

impl weir_broker::cluster::ClusterView for FixedView {
    fn snapshot(&self) -> std::sync::Arc<weir_broker::cluster::ClusterSnapshot> {
        self.0.read().unwrap().clone()
    }
}

/// A client's byte stream: plain TCP or TLS.
pub trait ClientStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> ClientStream for T {}

pub struct Client {
    pub stream: Box<dyn ClientStream>,
    pub correlation_id: i32,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: Box::new(TcpStream::connect(addr).await.unwrap()),
            correlation_id: 0,
        }
    }

    /// A TLS client of an SSL listener; `Err` when the handshake fails.
    pub async fn connect_tls(
        addr: SocketAddr,
        config: std::sync::Arc<rustls::ClientConfig>,
    ) -> std::io::Result<(Client, rustls::pki_types::CertificateDer<'static>)> {
        let tcp = TcpStream::connect(addr).await?;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        let cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        Ok((
            Client {
                stream: Box::new(tls),
                correlation_id: 0,
            },
            cert,
        ))
    }

    pub async fn send_only(&mut self, body: RequestBody, version: i16) -> i32 {
        self.correlation_id += 1;
        let header = RequestHeader {
            request_api_key: body.api_key() as i16,
            request_api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("weir-test".to_string()),
            ..Default::default()
        };
        let mut buf = BytesMut::new();
        encode_request(&mut buf, &header, &body).unwrap();
        self.stream.write_all(&buf).await.unwrap();
        self.correlation_id
    }

    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.ok()?;
        let n = i32::from_be_bytes(len);
        assert!((0..64 << 20).contains(&n), "response size {n}");
        let mut buf = vec![0u8; n as usize];
        self.stream.read_exact(&mut buf).await.ok()?;
        Some(Bytes::from(buf))
    }

    pub async fn call(&mut self, body: RequestBody, version: i16) -> ResponseBody {
        let key = body.api_key();
        let corr = self.send_only(body, version).await;
        let frame = self.read_frame().await.expect("response");
        let (header, body) = decode_response(frame, key, version).unwrap();
        assert_eq!(header.correlation_id, corr);
        body
    }

    /// True once the broker has closed the connection.
    pub async fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

/// Waits (up to 20 s) until `n` fetches are parked waiting for data.
pub async fn wait_parked_fetches(b: &RunningBroker, n: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while b.broker.metrics.parked_fetches() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} parked fetch(es) expected, {} after 20 s",
            b.broker.metrics.parked_fetches()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub async fn start_broker(dir: &std::path::Path, extra: &[(&str, &str)]) -> RunningBroker {
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.display().to_string());
    for (k, v) in extra {
        s.set(k, v);
    }
    start(s.build().unwrap()).await.unwrap()
}

pub fn batch(values: &[&str], timestamp: i64) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for (i, v) in values.iter().enumerate() {
        b.push(
            timestamp + i as i64,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::copy_from_slice(v.as_bytes())),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

pub fn idempotent_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None).producer(pid, epoch, seq);
    for i in 0..n {
        b.push(
            1_700_000_000_000,
            None,
            Some(Bytes::from(format!("v{}", seq as usize + i))),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

pub async fn create_topic(
    c: &mut Client,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> i16 {
    let req = CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: name.to_string(),
            num_partitions: partitions,
            replication_factor: 1,
            configs: configs
                .iter()
                .map(|(k, v)| create_topics_request::CreatableTopicConfig {
                    name: k.to_string(),
                    value: Some(v.to_string()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    match c.call(RequestBody::CreateTopics(req), 7).await {
        ResponseBody::CreateTopics(r) => r.topics[0].error_code,
        other => panic!("{other:?}"),
    }
}

pub async fn produce(
    c: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> (i16, i64) {
    produce_as(c, None, topic, partition, records, acks).await
}

/// [`produce`] with a transactional id (a transactional producer's).
pub async fn produce_as(
    c: &mut Client,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> (i16, i64) {
    let req = ProduceRequest {
        transactional_id: transactional_id.map(Into::into),
        acks,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::Produce(req), 9).await {
        ResponseBody::Produce(r) => {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        }
        other => panic!("{other:?}"),
    }
}

/// Fetches one partition; returns (error, high watermark, values with offsets).
pub async fn fetch(
    c: &mut Client,
    version: i16,
    topic: &str,
    topic_id: Uuid,
    offset: i64,
    max_wait_ms: i32,
) -> (i16, i64, Vec<(i64, String)>) {
    let req = FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics: vec![fetch_request::FetchTopic {
            topic: if version < 13 {
                topic.to_string()
            } else {
                String::new()
            },
            topic_id: if version >= 13 { topic_id } else { Uuid::ZERO },
            partitions: vec![fetch_request::FetchPartition {
                partition: 0,
                current_leader_epoch: -1,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = match c.call(RequestBody::Fetch(req), version).await {
        ResponseBody::Fetch(r) => r,
        other => panic!("{other:?}"),
    };
    let p = &resp.responses[0].partitions[0];
    let mut values = Vec::new();
    if let Some(records) = &p.records {
        for b in BatchIter::new(records.clone()) {
            let b = b.unwrap();
            b.validate_crc().unwrap();
            for r in b.collect_records(&Default::default()).unwrap() {
                let off = b.base_offset() + r.offset_delta as i64;
                let v = r
                    .value
                    .map(|v| String::from_utf8_lossy(&v).into_owned())
                    .unwrap_or_default();
                values.push((off, v));
            }
        }
    }
    (p.error_code, p.high_watermark, values)
}

pub async fn metadata(c: &mut Client, topics: Option<Vec<&str>>, auto: bool) -> MetadataResponse {
    let req = MetadataRequest {
        topics: topics.map(|t| {
            t.into_iter()
                .map(|n| metadata_request::MetadataRequestTopic {
                    name: Some(n.to_string()),
                    ..Default::default()
                })
                .collect()
        }),
        allow_auto_topic_creation: auto,
        ..Default::default()
    };
    match c.call(RequestBody::Metadata(req), 12).await {
        ResponseBody::Metadata(r) => r,
        other => panic!("{other:?}"),
    }
}

pub async fn list_offset(c: &mut Client, topic: &str, ts: i64) -> (i16, i64, i64) {
    let req = ListOffsetsRequest {
        replica_id: -1,
        topics: vec![list_offsets_request::ListOffsetsTopic {
            name: topic.to_string(),
            partitions: vec![list_offsets_request::ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp: ts,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::ListOffsets(req), 8).await {
        ResponseBody::ListOffsets(r) => {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.offset, p.timestamp)
        }
        other => panic!("{other:?}"),
    }
}

pub async fn api_versions_ok(addr: SocketAddr) {
    let mut c = Client::connect(addr).await;
    match c
        .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    {
        ResponseBody::ApiVersions(r) => assert_eq!(r.error_code, NONE),
        other => panic!("{other:?}"),
    }
}

pub fn describe_topic_req(topic: &str) -> RequestBody {
    RequestBody::DescribeConfigs(DescribeConfigsRequest {
        resources: vec![describe_configs_request::DescribeConfigsResource {
            resource_type: 2,
            resource_name: topic.to_string(),
            configuration_keys: None,
            ..Default::default()
        }],
        include_synonyms: true,
        ..Default::default()
    })
}

pub async fn topic_config(c: &mut Client, topic: &str) -> BTreeMap<String, (Option<String>, i8)> {
    match c.call(describe_topic_req(topic), 4).await {
        ResponseBody::DescribeConfigs(r) => {
            assert_eq!(r.results[0].error_code, NONE);
            r.results[0]
                .configs
                .iter()
                .map(|c| (c.name.clone(), (c.value.clone(), c.config_source)))
                .collect()
        }
        other => panic!("{other:?}"),
    }
}

/// One IncrementalAlterConfigs change of config `name` of a resource
/// (`resource_type`: 2 topic, 4 broker, 32 group): set to `value`, or
/// deleted with `None`. Returns the resource's error code.
pub async fn alter_config(
    c: &mut Client,
    resource_type: i8,
    resource_name: &str,
    name: &str,
    value: Option<&str>,
) -> i16 {
    alter_config_answer(c, resource_type, resource_name, name, value)
        .await
        .0
}

/// [`alter_config`], with the resource's error message.
pub async fn alter_config_answer(
    c: &mut Client,
    resource_type: i8,
    resource_name: &str,
    name: &str,
    value: Option<&str>,
) -> (i16, Option<String>) {
    let req = IncrementalAlterConfigsRequest {
        resources: vec![incremental_alter_configs_request::AlterConfigsResource {
            resource_type,
            resource_name: resource_name.into(),
            configs: vec![incremental_alter_configs_request::AlterableConfig {
                name: name.into(),
                // SET or DELETE
                config_operation: if value.is_some() { 0 } else { 1 },
                value: value.map(String::from),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::IncrementalAlterConfigs(req), 1).await {
        ResponseBody::IncrementalAlterConfigs(r) => (
            r.responses[0].error_code,
            r.responses[0].error_message.clone(),
        ),
        other => panic!("{other:?}"),
    }
}

pub async fn init_pid(c: &mut Client) -> (i64, i16) {
    match c
        .call(
            RequestBody::InitProducerId(InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            }),
            4,
        )
        .await
    {
        ResponseBody::InitProducerId(r) => {
            assert_eq!(r.error_code, NONE);
            (r.producer_id, r.producer_epoch)
        }
        other => panic!("{other:?}"),
    }
}

/// A plausible request of `key` at `version` against topic `t`.
pub fn request_for(key: ApiKey, version: i16, t: &str, id: Uuid, n: i16) -> RequestBody {
    match key {
        ApiKey::Produce => RequestBody::Produce(ProduceRequest {
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![produce_request::TopicProduceData {
                name: t.into(),
                partition_data: vec![produce_request::PartitionProduceData {
                    index: 0,
                    records: Some(batch(&["x"], 1)),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::Fetch => RequestBody::Fetch(FetchRequest {
            max_wait_ms: 0,
            min_bytes: 0,
            max_bytes: 1 << 20,
            topics: vec![fetch_request::FetchTopic {
                topic: if version <= 12 {
                    t.into()
                } else {
                    String::new()
                },
                topic_id: if version >= 13 { id } else { Uuid::ZERO },
                partitions: vec![fetch_request::FetchPartition {
                    partition: 0,
                    fetch_offset: 0,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::ListOffsets => RequestBody::ListOffsets(ListOffsetsRequest {
            replica_id: -1,
            topics: vec![list_offsets_request::ListOffsetsTopic {
                name: t.into(),
                partitions: vec![list_offsets_request::ListOffsetsPartition {
                    partition_index: 0,
                    timestamp: -1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::Metadata => RequestBody::Metadata(MetadataRequest {
            topics: Some(vec![metadata_request::MetadataRequestTopic {
                name: Some(t.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ApiKey::ApiVersions => RequestBody::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => RequestBody::CreateTopics(CreateTopicsRequest {
            topics: vec![create_topics_request::CreatableTopic {
                name: format!("ct-{version}-{n}"),
                num_partitions: 1,
                replication_factor: 1,
                ..Default::default()
            }],
            timeout_ms: 1000,
            ..Default::default()
        }),
        ApiKey::DeleteTopics => {
            let name = format!("ct-{}-{n}", 7);
            if version >= 6 {
                RequestBody::DeleteTopics(DeleteTopicsRequest {
                    topics: vec![delete_topics_request::DeleteTopicState {
                        name: Some(name),
                        ..Default::default()
                    }],
                    timeout_ms: 1000,
                    ..Default::default()
                })
            } else {
                RequestBody::DeleteTopics(DeleteTopicsRequest {
                    topic_names: vec![name],
                    timeout_ms: 1000,
                    ..Default::default()
                })
            }
        }
        ApiKey::DeleteRecords => RequestBody::DeleteRecords(DeleteRecordsRequest {
            topics: vec![delete_records_request::DeleteRecordsTopic {
                name: t.into(),
                partitions: vec![delete_records_request::DeleteRecordsPartition {
                    partition_index: 0,
                    offset: 0,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            timeout_ms: 1000,
            ..Default::default()
        }),
        ApiKey::InitProducerId => RequestBody::InitProducerId(InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 1000,
            ..Default::default()
        }),
        ApiKey::DescribeConfigs => RequestBody::DescribeConfigs(DescribeConfigsRequest {
            resources: vec![describe_configs_request::DescribeConfigsResource {
                resource_type: 2,
                resource_name: t.into(),
                configuration_keys: None,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::AlterConfigs => RequestBody::AlterConfigs(AlterConfigsRequest {
            resources: vec![alter_configs_request::AlterConfigsResource {
                resource_type: 2,
                resource_name: t.into(),
                configs: vec![],
                ..Default::default()
            }],
            validate_only: true,
            ..Default::default()
        }),
        ApiKey::IncrementalAlterConfigs => {
            RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
                resources: vec![incremental_alter_configs_request::AlterConfigsResource {
                    resource_type: 2,
                    resource_name: t.into(),
                    configs: vec![],
                    ..Default::default()
                }],
                validate_only: true,
                ..Default::default()
            })
        }
        ApiKey::DescribeLogDirs => RequestBody::DescribeLogDirs(DescribeLogDirsRequest {
            topics: None,
            ..Default::default()
        }),
        ApiKey::CreatePartitions => RequestBody::CreatePartitions(CreatePartitionsRequest {
            topics: vec![create_partitions_request::CreatePartitionsTopic {
                name: t.into(),
                count: 1 + n as i32,
                assignments: None,
                ..Default::default()
            }],
            timeout_ms: 1000,
            validate_only: true,
            ..Default::default()
        }),
        ApiKey::ElectLeaders => {
            RequestBody::ElectLeaders(weir_protocol::messages::ElectLeadersRequest {
                topic_partitions: Some(vec![
                    weir_protocol::messages::elect_leaders_request::TopicPartitions {
                        topic: t.into(),
                        partitions: vec![0],
                        ..Default::default()
                    },
                ]),
                timeout_ms: 1000,
                ..Default::default()
            })
        }
        ApiKey::AlterPartitionReassignments => RequestBody::AlterPartitionReassignments(
            weir_protocol::messages::AlterPartitionReassignmentsRequest {
                timeout_ms: 1000,
                topics: vec![
                    weir_protocol::messages::alter_partition_reassignments_request::ReassignableTopic {
                        name: t.into(),
                        partitions: vec![weir_protocol::messages::alter_partition_reassignments_request::ReassignablePartition {
                            partition_index: 0,
                            replicas: Some(vec![1]),
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
        ),
        ApiKey::ListPartitionReassignments => RequestBody::ListPartitionReassignments(
            weir_protocol::messages::ListPartitionReassignmentsRequest {
                timeout_ms: 1000,
                topics: None,
                ..Default::default()
            },
        ),
        ApiKey::DescribeCluster => RequestBody::DescribeCluster(DescribeClusterRequest::default()),
        // Group APIs: requests that get an immediate answer (errors are fine:
        // the point is that every version is decoded and answered).
        ApiKey::FindCoordinator if version >= 4 => {
            RequestBody::FindCoordinator(FindCoordinatorRequest {
                coordinator_keys: vec!["g".into()],
                ..Default::default()
            })
        }
        ApiKey::FindCoordinator => RequestBody::FindCoordinator(FindCoordinatorRequest {
            key: "g".into(),
            ..Default::default()
        }),
        ApiKey::JoinGroup => RequestBody::JoinGroup(JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![],
            ..Default::default()
        }),
        ApiKey::SyncGroup => RequestBody::SyncGroup(SyncGroupRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: "nobody".into(),
            ..Default::default()
        }),
        ApiKey::Heartbeat => RequestBody::Heartbeat(HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: "nobody".into(),
            ..Default::default()
        }),
        ApiKey::LeaveGroup if version >= 3 => RequestBody::LeaveGroup(LeaveGroupRequest {
            group_id: "g".into(),
            members: vec![leave_group_request::MemberIdentity {
                member_id: "nobody".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::LeaveGroup => RequestBody::LeaveGroup(LeaveGroupRequest {
            group_id: "g".into(),
            member_id: "nobody".into(),
            ..Default::default()
        }),
        ApiKey::OffsetCommit => RequestBody::OffsetCommit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: -1,
            topics: vec![offset_commit_request::OffsetCommitRequestTopic {
                name: t.into(),
                partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: 0,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::OffsetFetch if version >= 8 => RequestBody::OffsetFetch(OffsetFetchRequest {
            groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
                group_id: "g".into(),
                topics: None,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::OffsetFetch => RequestBody::OffsetFetch(OffsetFetchRequest {
            group_id: "g".into(),
            topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
                name: t.into(),
                partition_indexes: vec![0],
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ApiKey::ListGroups => RequestBody::ListGroups(ListGroupsRequest::default()),
        ApiKey::DescribeGroups => RequestBody::DescribeGroups(DescribeGroupsRequest {
            groups: vec!["g".into()],
            ..Default::default()
        }),
        ApiKey::DeleteGroups => RequestBody::DeleteGroups(DeleteGroupsRequest {
            groups_names: vec![format!("absent-{n}")],
            ..Default::default()
        }),
        ApiKey::OffsetDelete => RequestBody::OffsetDelete(OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![],
            ..Default::default()
        }),
        ApiKey::OffsetForLeaderEpoch => {
            RequestBody::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest {
                replica_id: -1,
                topics: vec![offset_for_leader_epoch_request::OffsetForLeaderTopic {
                    topic: t.into(),
                    partitions: vec![offset_for_leader_epoch_request::OffsetForLeaderPartition {
                        partition: 0,
                        current_leader_epoch: -1,
                        leader_epoch: 0,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            })
        }
        ApiKey::TxnOffsetCommit => RequestBody::TxnOffsetCommit(TxnOffsetCommitRequest {
            transactional_id: format!("txn-{n}"),
            group_id: format!("txn-g-{n}"),
            producer_id: 1000 + i64::from(n),
            producer_epoch: 0,
            topics: vec![txn_offset_commit_request::TxnOffsetCommitRequestTopic {
                name: t.into(),
                partitions: vec![txn_offset_commit_request::TxnOffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: 1,
                    committed_leader_epoch: -1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::AddPartitionsToTxn => {
            let topics = vec![add_partitions_to_txn_request::AddPartitionsToTxnTopic {
                name: t.into(),
                partitions: vec![0],
                ..Default::default()
            }];
            RequestBody::AddPartitionsToTxn(if version < 4 {
                AddPartitionsToTxnRequest {
                    v3_and_below_transactional_id: format!("txn-{n}"),
                    v3_and_below_producer_id: 1000 + i64::from(n),
                    v3_and_below_producer_epoch: 0,
                    v3_and_below_topics: topics,
                    ..Default::default()
                }
            } else {
                AddPartitionsToTxnRequest {
                    transactions: vec![add_partitions_to_txn_request::AddPartitionsToTxnTransaction {
                        transactional_id: format!("txn-{n}"),
                        producer_id: 1000 + i64::from(n),
                        producer_epoch: 0,
                        verify_only: true,
                        topics,
                        ..Default::default()
                    }],
                    ..Default::default()
                }
            })
        }
        ApiKey::AddOffsetsToTxn => RequestBody::AddOffsetsToTxn(AddOffsetsToTxnRequest {
            transactional_id: format!("txn-{n}"),
            producer_id: 1000 + i64::from(n),
            producer_epoch: 0,
            group_id: format!("txn-g-{n}"),
            ..Default::default()
        }),
        ApiKey::EndTxn => RequestBody::EndTxn(EndTxnRequest {
            transactional_id: format!("txn-{n}"),
            producer_id: 1000 + i64::from(n),
            producer_epoch: 0,
            committed: true,
            ..Default::default()
        }),
        ApiKey::DescribeTransactions => {
            RequestBody::DescribeTransactions(DescribeTransactionsRequest {
                transactional_ids: vec![format!("txn-{n}")],
                ..Default::default()
            })
        }
        ApiKey::ListTransactions => RequestBody::ListTransactions(ListTransactionsRequest {
            state_filters: vec!["Ongoing".into()],
            ..Default::default()
        }),
        // On a PLAINTEXT listener: ILLEGAL_SASL_STATE.
        ApiKey::SaslHandshake => {
            RequestBody::SaslHandshake(weir_protocol::messages::SaslHandshakeRequest {
                mechanism: "PLAIN".into(),
                ..Default::default()
            })
        }
        ApiKey::SaslAuthenticate => RequestBody::SaslAuthenticate(Default::default()),
        // Nothing set: one RESOURCE_NOT_FOUND, and none described.
        ApiKey::AlterUserScramCredentials => {
            RequestBody::AlterUserScramCredentials(AlterUserScramCredentialsRequest {
                deletions: vec![alter_user_scram_credentials_request::ScramCredentialDeletion {
                    name: format!("user-{n}"),
                    mechanism: 1,
                    ..Default::default()
                }],
                ..Default::default()
            })
        }
        ApiKey::DescribeUserScramCredentials => {
            RequestBody::DescribeUserScramCredentials(Default::default())
        }
        // No authorizer: SECURITY_DISABLED for each.
        ApiKey::CreateAcls => RequestBody::CreateAcls(weir_protocol::messages::CreateAclsRequest {
            creations: vec![weir_protocol::messages::create_acls_request::AclCreation {
                resource_type: 2,
                resource_name: t.into(),
                resource_pattern_type: 3,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ApiKey::DescribeAcls => {
            RequestBody::DescribeAcls(weir_protocol::messages::DescribeAclsRequest {
                resource_type_filter: 1,
                pattern_type_filter: 1,
                operation: 1,
                permission_type: 1,
                ..Default::default()
            })
        }
        ApiKey::DeleteAcls => RequestBody::DeleteAcls(weir_protocol::messages::DeleteAclsRequest {
            filters: vec![weir_protocol::messages::delete_acls_request::DeleteAclsFilter {
                resource_type_filter: 1,
                pattern_type_filter: 1,
                operation: 1,
                permission_type: 1,
                ..Default::default()
            }],
            ..Default::default()
        }),
        // Nothing set: no entries.
        ApiKey::DescribeClientQuotas => RequestBody::DescribeClientQuotas(Default::default()),
        // Checked only (validate_only): accepted, nothing changes.
        ApiKey::AlterClientQuotas => RequestBody::AlterClientQuotas(
            weir_protocol::messages::AlterClientQuotasRequest {
                entries: vec![weir_protocol::messages::alter_client_quotas_request::EntryData {
                    entity: vec![
                        weir_protocol::messages::alter_client_quotas_request::EntityData {
                            entity_type: "client-id".into(),
                            entity_name: Some(format!("client-{n}")),
                            ..Default::default()
                        },
                    ],
                    ops: vec![weir_protocol::messages::alter_client_quotas_request::OpData {
                        key: "producer_byte_rate".into(),
                        value: 1024.0,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                validate_only: true,
                ..Default::default()
            },
        ),
        // A COMMIT marker for a producer with nothing open: appended.
        ApiKey::WriteTxnMarkers => RequestBody::WriteTxnMarkers(WriteTxnMarkersRequest {
            markers: vec![write_txn_markers_request::WritableTxnMarker {
                producer_id: 1_000 + i64::from(n),
                producer_epoch: 0,
                transaction_result: true,
                topics: vec![write_txn_markers_request::WritableTxnMarkerTopic {
                    name: t.into(),
                    partition_indexes: vec![0],
                    ..Default::default()
                }],
                coordinator_epoch: 0,
                ..Default::default()
            }],
            ..Default::default()
        }),
        // A member joining a consumer-protocol group (KIP-848).
        ApiKey::ConsumerGroupHeartbeat => {
            RequestBody::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest {
                group_id: format!("cg-{n}"),
                member_id: format!("member-{n}"),
                member_epoch: 0,
                rebalance_timeout_ms: 10_000,
                subscribed_topic_names: Some(vec![t.into()]),
                topic_partitions: Some(Vec::new()),
                ..Default::default()
            })
        }
        ApiKey::ConsumerGroupDescribe => {
            RequestBody::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
                group_ids: vec!["cg-0".into()],
                ..Default::default()
            })
        }
        other => panic!("no request for {other:?}"),
    }
}

/// A follower's Fetch (v15+: the replica id in `ReplicaState`) of
/// partition 0 of topic `id` from `offset`, naming `leader_epoch` and
/// `last_fetched_epoch`, without waiting.
pub fn follower_fetch_request(
    replica: i32,
    id: Uuid,
    offset: i64,
    leader_epoch: i32,
    last_fetched_epoch: i32,
) -> FetchRequest {
    FetchRequest {
        replica_state: fetch_request::ReplicaState {
            replica_id: replica,
            replica_epoch: -1,
            ..Default::default()
        },
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1 << 20,
        topics: vec![fetch_request::FetchTopic {
            topic_id: id,
            partitions: vec![fetch_request::FetchPartition {
                partition: 0,
                current_leader_epoch: leader_epoch,
                fetch_offset: offset,
                last_fetched_epoch,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Makes broker `b` a cluster member whose view is `snap` (a test may
/// replace it through the view returned) and applies its leadership.
pub fn join_cluster(
    b: &std::sync::Arc<weir_broker::Broker>,
    snap: weir_broker::cluster::ClusterSnapshot,
) -> std::sync::Arc<FixedView> {
    let view = FixedView::new(snap);
    b.replicas.set_cluster_member();
    b.set_cluster(
        view.clone(),
        std::sync::Arc::new(weir_broker::cluster::LocalTopicAdmin),
    );
    b.apply_leadership();
    view
}

/// A started broker with the one-partition topic `t`, a client of it, and
/// what [`three_replicas`] needs: the topic's id and this broker's id,
/// host and port.
pub struct TopicT {
    pub running: RunningBroker,
    pub b: std::sync::Arc<weir_broker::Broker>,
    pub c: Client,
    pub id: [u8; 16],
    pub me: i32,
    pub host: String,
    pub port: u16,
}

pub async fn broker_with_topic_t(dir: &std::path::Path) -> TopicT {
    let running = start_broker(dir, &[]).await;
    let b = running.broker.clone();
    let mut c = Client::connect(running.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let id = b.topic("t").unwrap().id_bytes();
    let (host, port) = b.advertised();
    let me = b.config.node_id;
    TopicT {
        running,
        b,
        c,
        id,
        me,
        host,
        port,
    }
}

/// A cluster of this broker (`me`, at `host:port`) and brokers 2 and 3
/// (unroutable addresses), with topic `t` (`id`) of one partition on all
/// three, led by `leader` in `epoch`, its ISR full.
pub fn three_replicas(
    me: i32,
    host: &str,
    port: u16,
    id: [u8; 16],
    leader: i32,
    epoch: i32,
) -> weir_broker::cluster::ClusterSnapshot {
    let brokers = [me, 2, 3]
        .into_iter()
        .map(|n| weir_broker::cluster::BrokerNode {
            id: n,
            host: if n == me {
                host.to_string()
            } else {
                // Unroutable: the fetch task toward broker 2 never connects.
                format!("192.0.2.{n}")
            },
            port: if n == me { port } else { 1 },
            rack: None,
        })
        .collect();
    weir_broker::cluster::ClusterSnapshot::new(
        brokers,
        me,
        vec![weir_broker::cluster::TopicView {
            name: "t".into(),
            id,
            partitions: vec![weir_broker::cluster::PartitionView {
                leader,
                leader_epoch: epoch,
                partition_epoch: epoch,
                replicas: vec![me, 2, 3],
                isr: vec![me, 2, 3],
                offline_replicas: vec![],
            }],
        }],
    )
}

/// The time of explicit cleaner runs (`LogCleaner::clean_now`): set by the
/// test, never advanced by sleeping.
pub struct CleanerClock(std::sync::atomic::AtomicI64);

impl CleanerClock {
    pub fn at(now_ms: i64) -> CleanerClock {
        CleanerClock(std::sync::atomic::AtomicI64::new(now_ms))
    }

    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl weir_storage::cleaner::Clock for CleanerClock {
    fn now_ms(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn sleep_ms(&self, _: u64) {}
}
