//! End-to-end tests: an in-process broker on 127.0.0.1:0 with a temporary
//! data dir, driven by a small client built on `weir_protocol`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weir_broker::config::ConfigSources;
use weir_broker::{RunningBroker, start};
use weir_protocol::codec::Uuid;
use weir_protocol::frame::{decode_response, encode_request};
use weir_protocol::messages::*;
use weir_protocol::records::{BatchIter, Compression, RecordBatchBuilder};

const NONE: i16 = 0;

struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation_id: 0,
        }
    }

    async fn send_only(&mut self, body: RequestBody, version: i16) -> i32 {
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

    async fn read_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.ok()?;
        let n = i32::from_be_bytes(len);
        assert!((0..64 << 20).contains(&n), "response size {n}");
        let mut buf = vec![0u8; n as usize];
        self.stream.read_exact(&mut buf).await.ok()?;
        Some(Bytes::from(buf))
    }

    async fn call(&mut self, body: RequestBody, version: i16) -> ResponseBody {
        let key = body.api_key();
        let corr = self.send_only(body, version).await;
        let frame = self.read_frame().await.expect("response");
        let (header, body) = decode_response(frame, key, version).unwrap();
        assert_eq!(header.correlation_id, corr);
        body
    }

    /// True once the broker has closed the connection.
    async fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

async fn start_broker(dir: &std::path::Path, extra: &[(&str, &str)]) -> RunningBroker {
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.display().to_string());
    for (k, v) in extra {
        s.set(k, v);
    }
    start(s.build().unwrap()).await.unwrap()
}

fn batch(values: &[&str], timestamp: i64) -> Bytes {
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

fn idempotent_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
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

async fn create_topic(
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

async fn produce(
    c: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> (i16, i64) {
    let req = ProduceRequest {
        transactional_id: None,
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
async fn fetch(
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

async fn metadata(c: &mut Client, topics: Option<Vec<&str>>, auto: bool) -> MetadataResponse {
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

async fn list_offset(c: &mut Client, topic: &str, ts: i64) -> (i16, i64, i64) {
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

async fn api_versions_ok(addr: SocketAddr) {
    let mut c = Client::connect(addr).await;
    match c
        .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    {
        ResponseBody::ApiVersions(r) => assert_eq!(r.error_code, NONE),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_lists_kafka4_ranges_and_answers_unknown_versions_in_v0() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let r = match c
        .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    {
        ResponseBody::ApiVersions(r) => r,
        other => panic!("{other:?}"),
    };
    let range = |k: ApiKey| {
        r.api_keys
            .iter()
            .find(|a| a.api_key == k as i16)
            .map(|a| (a.min_version, a.max_version))
    };
    assert_eq!(range(ApiKey::Produce), Some((3, 11)));
    assert_eq!(range(ApiKey::Fetch), Some((4, 17)));
    assert_eq!(range(ApiKey::ListOffsets), Some((1, 10)));
    assert_eq!(range(ApiKey::CreateTopics), Some((2, 7)));

    // ApiVersions v99: header v2 bytes by hand; answer is a v0 response
    let mut raw = Vec::new();
    raw.extend_from_slice(&18i16.to_be_bytes());
    raw.extend_from_slice(&99i16.to_be_bytes());
    raw.extend_from_slice(&777i32.to_be_bytes());
    raw.extend_from_slice(&(-1i16).to_be_bytes());
    raw.push(0);
    let mut framed = (raw.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&raw);
    c.stream.write_all(&framed).await.unwrap();
    let frame = c.read_frame().await.unwrap();
    let (h, body) = decode_response(frame, ApiKey::ApiVersions, 0).unwrap();
    assert_eq!(h.correlation_id, 777);
    match body {
        ResponseBody::ApiVersions(r) => {
            assert_eq!(r.error_code, 35);
            assert!(
                r.api_keys
                    .iter()
                    .any(|a| a.api_key == 0 && a.min_version == 3)
            );
        }
        other => panic!("{other:?}"),
    }
    // Produce v2 was removed in Kafka 4: the connection is closed
    let mut c2 = Client::connect(b.local_addr).await;
    c2.send_only(
        RequestBody::Produce(ProduceRequest {
            acks: 1,
            ..Default::default()
        }),
        2,
    )
    .await;
    assert!(c2.is_closed().await);
    api_versions_ok(b.local_addr).await;
    b.shutdown().await.unwrap();
}

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
async fn produce_fetch_round_trip_in_every_fetch_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "rt", 1, &[]).await, NONE);
    let vals: Vec<String> = (0..10).map(|i| format!("value-{i}")).collect();
    let refs: Vec<&str> = vals.iter().map(String::as_str).collect();
    assert_eq!(
        produce(&mut c, "rt", 0, batch(&refs[..5], 1000), -1).await,
        (NONE, 0)
    );
    assert_eq!(
        produce(&mut c, "rt", 0, batch(&refs[5..], 2000), 1).await,
        (NONE, 5)
    );
    let id = metadata(&mut c, Some(vec!["rt"]), false).await.topics[0].topic_id;
    let sent_before =
        weir_broker::connection::SENDFILE_BYTES.load(std::sync::atomic::Ordering::Relaxed);
    for version in [4, 11, 12, 13, 16, 17] {
        let (err, hw, got) = fetch(&mut c, version, "rt", id, 0, 0).await;
        assert_eq!((err, hw), (NONE, 10), "v{version}");
        let expect: Vec<(i64, String)> = vals
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i as i64, v))
            .collect();
        assert_eq!(got, expect, "v{version}");
    }
    // record data went through sendfile (6 fetches of both batches at least)
    let sent = weir_broker::connection::SENDFILE_BYTES.load(std::sync::atomic::Ordering::Relaxed)
        - sent_before;
    assert!(sent >= 6 * (batch(&refs[..5], 1000).len() + batch(&refs[5..], 2000).len()) as u64);
    // a fetch in the middle of a batch gets the whole batch
    let (_, _, got) = fetch(&mut c, 12, "rt", id, 7, 0).await;
    assert_eq!(got.first().map(|x| x.0), Some(5));
    assert!(got.iter().any(|x| x.0 == 7));
    // beyond the end
    let (err, _, _) = fetch(&mut c, 12, "rt", id, 100, 0).await;
    assert_eq!(err, 1);
    // unknown topic
    let (err, _, _) = fetch(&mut c, 12, "nope", id, 0, 0).await;
    assert_eq!(err, 3);
    // acks=0 gets no response, but the data lands
    let corr = c
        .send_only(
            RequestBody::Produce(ProduceRequest {
                acks: 0,
                timeout_ms: 1000,
                topic_data: vec![produce_request::TopicProduceData {
                    name: "rt".into(),
                    partition_data: vec![produce_request::PartitionProduceData {
                        index: 0,
                        records: Some(batch(&["fire-and-forget"], 3000)),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            9,
        )
        .await;
    // the next response on this connection answers the next request
    let (err, hw, got) = fetch(&mut c, 12, "rt", id, 10, 0).await;
    assert!(c.correlation_id > corr);
    assert_eq!((err, hw), (NONE, 11));
    assert_eq!(got, vec![(10, "fire-and-forget".to_string())]);
    // acks=0 to an unknown partition: no response, the connection is closed
    c.send_only(
        RequestBody::Produce(ProduceRequest {
            acks: 0,
            timeout_ms: 1000,
            topic_data: vec![produce_request::TopicProduceData {
                name: "rt".into(),
                partition_data: vec![produce_request::PartitionProduceData {
                    index: 9,
                    records: Some(batch(&["lost"], 3000)),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        9,
    )
    .await;
    assert!(c.is_closed().await);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_fetch_wakes_on_append() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "lp", 1, &[]).await, NONE);
    let addr = b.local_addr;
    let waiter = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        // max_wait is the broker's cap (30 s); the test's own bound is lower
        fetch(&mut c, 12, "lp", Uuid::ZERO, 0, 30_000).await
    });
    // let the fetch arrive and park; then append
    api_versions_ok(addr).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        produce(&mut c, "lp", 0, batch(&["wake"], 1), 1).await,
        (NONE, 0)
    );
    let (err, hw, got) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("fetch was not woken by the append")
        .unwrap();
    assert_eq!((err, hw), (NONE, 1));
    assert_eq!(got, vec![(0, "wake".to_string())]);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_by_time_and_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "lo", 1, &[]).await, NONE);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let t0 = now - 100_000;
    produce(&mut c, "lo", 0, batch(&["a", "b", "c"], t0), 1).await; // offsets 0..2, ts t0..t0+2
    produce(&mut c, "lo", 0, batch(&["d", "e"], t0 + 50_000), 1).await; // offsets 3..4
    assert_eq!(list_offset(&mut c, "lo", -2).await.1, 0);
    assert_eq!(list_offset(&mut c, "lo", -1).await.1, 5);
    let (err, off, ts) = list_offset(&mut c, "lo", t0 + 1).await;
    assert_eq!((err, off, ts), (NONE, 1, t0 + 1));
    let (_, off, _) = list_offset(&mut c, "lo", t0 + 10).await;
    assert_eq!(off, 3);
    let (_, off, _) = list_offset(&mut c, "lo", now + 1_000_000).await;
    assert_eq!(off, -1);
    let (err, off, ts) = list_offset(&mut c, "lo", -3).await;
    assert_eq!((err, off, ts), (NONE, 4, t0 + 50_001));
    b.shutdown().await.unwrap();
}

fn describe_topic_req(topic: &str) -> RequestBody {
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

async fn topic_config(c: &mut Client, topic: &str) -> BTreeMap<String, (Option<String>, i8)> {
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
async fn restart_keeps_topics_ids_configs_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "keep", 2, &[("retention.ms", "777")]).await,
        NONE
    );
    produce(&mut c, "keep", 0, batch(&["one", "two"], 5), 1).await;
    let before = metadata(&mut c, Some(vec!["keep"]), false).await;
    drop(c);
    b.shutdown().await.unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let after = metadata(&mut c, Some(vec!["keep"]), false).await;
    assert_eq!(before.cluster_id, after.cluster_id);
    assert_eq!(before.topics[0].topic_id, after.topics[0].topic_id);
    assert_eq!(after.topics[0].partitions.len(), 2);
    assert_eq!(
        topic_config(&mut c, "keep").await["retention.ms"]
            .0
            .as_deref(),
        Some("777")
    );
    let (err, hw, got) = fetch(&mut c, 12, "keep", Uuid::ZERO, 0, 0).await;
    assert_eq!((err, hw), (NONE, 2));
    assert_eq!(got, vec![(0, "one".into()), (1, "two".into())]);
    assert_eq!(
        produce(&mut c, "keep", 0, batch(&["three"], 6), 1).await,
        (NONE, 2)
    );
    b.shutdown().await.unwrap();
}

async fn init_pid(c: &mut Client) -> (i64, i16) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_produce_deduplicates_and_rejects_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "idem", 1, &[]).await, NONE);
    let (pid, epoch) = init_pid(&mut c).await;
    let (pid2, _) = init_pid(&mut c).await;
    assert_ne!(pid, pid2);
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 0, 3), -1).await,
        (NONE, 0)
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 3, 2), -1).await,
        (NONE, 3)
    );
    // retry of the first batch: acknowledged with its original offset
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 0, 3), -1).await,
        (NONE, 0)
    );
    assert_eq!(list_offset(&mut c, "idem", -1).await.1, 5);
    // gap
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 7, 1), -1)
            .await
            .0,
        45
    );
    assert_eq!(list_offset(&mut c, "idem", -1).await.1, 5);
    // the state survives a restart (rebuilt from the log)
    drop(c);
    b.shutdown().await.unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 3, 2), -1).await,
        (NONE, 3)
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 6, 1), -1)
            .await
            .0,
        45
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 5, 1), -1).await,
        (NONE, 5)
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_never_disturbs_other_clients_or_data() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let addr = b.local_addr;
    let mut c = Client::connect(addr).await;
    assert_eq!(create_topic(&mut c, "safe", 1, &[]).await, NONE);
    assert_eq!(
        produce(&mut c, "safe", 0, batch(&["keep-me"], 1), 1).await,
        (NONE, 0)
    );
    async fn still_fine(addr: SocketAddr, c: &mut Client) {
        api_versions_ok(addr).await;
        let (err, _, got) = fetch(c, 12, "safe", Uuid::ZERO, 0, 0).await;
        assert_eq!(err, NONE);
        assert_eq!(got[0], (0, "keep-me".to_string()));
    }
    let raw = |bytes: Vec<u8>| async move {
        let mut s = Client::connect(addr).await;
        s.stream.write_all(&bytes).await.unwrap();
        s
    };
    // random bytes
    let mut seed = 0x1234_5678u64;
    let mut junk = vec![0u8; 4096];
    for x in junk.iter_mut() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        *x = seed as u8;
    }
    junk[0] = 0; // keep the declared size below the limit
    let mut s = raw(junk).await;
    let _ = s.stream.shutdown().await;
    still_fine(addr, &mut c).await;
    // truncated frame, then EOF
    let mut s = raw(vec![0, 0, 0, 100, 0, 18, 0, 3]).await;
    let _ = s.stream.shutdown().await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // a 2 GiB size prefix
    let mut s = raw(vec![0x7f, 0xff, 0xff, 0xff]).await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // a negative size prefix
    let mut s = raw(vec![0xff, 0xff, 0xff, 0xf0]).await;
    assert!(s.is_closed().await);
    // unknown api key
    let mut frame = Vec::new();
    frame.extend_from_slice(&999i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    let mut s = raw(framed).await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // Metadata v0 declaring a 2^31-1 element topics array
    let mut frame = Vec::new();
    frame.extend_from_slice(&3i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(&i32::MAX.to_be_bytes());
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    let mut s = raw(framed).await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // corrupt CRC: CORRUPT_MESSAGE, nothing appended
    let mut bad = batch(&["evil"], 1).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert_eq!(produce(&mut c, "safe", 0, Bytes::from(bad), 1).await.0, 2);
    // truncated batch inside a valid request
    let good = batch(&["half"], 1);
    assert_eq!(
        produce(&mut c, "safe", 0, good.slice(..good.len() - 3), 1)
            .await
            .0,
        2
    );
    assert_eq!(list_offset(&mut c, "safe", -1).await.1, 1);
    still_fine(addr, &mut c).await;
    // the broker still accepts and stores new data
    assert_eq!(
        produce(&mut c, "safe", 0, batch(&["after"], 2), 1).await,
        (NONE, 1)
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "pipe", 1, &[]).await, NONE);
    let mut sent = Vec::new();
    for i in 0..20 {
        let body = RequestBody::Produce(ProduceRequest {
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![produce_request::TopicProduceData {
                name: "pipe".into(),
                partition_data: vec![produce_request::PartitionProduceData {
                    index: 0,
                    records: Some(batch(&[&format!("m{i}")], i)),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        sent.push(c.send_only(body, 9).await);
    }
    for (i, corr) in sent.into_iter().enumerate() {
        let frame = c.read_frame().await.unwrap();
        let (h, body) = decode_response(frame, ApiKey::Produce, 9).unwrap();
        assert_eq!(h.correlation_id, corr);
        match body {
            ResponseBody::Produce(r) => {
                assert_eq!(r.responses[0].partition_responses[0].base_offset, i as i64)
            }
            other => panic!("{other:?}"),
        }
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limits_close_excess_connections() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("max.connections.per.ip", "2")]).await;
    let mut c1 = Client::connect(b.local_addr).await;
    let mut c2 = Client::connect(b.local_addr).await;
    for c in [&mut c1, &mut c2] {
        match c
            .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
            .await
        {
            ResponseBody::ApiVersions(r) => assert_eq!(r.error_code, NONE),
            other => panic!("{other:?}"),
        }
    }
    let mut c3 = Client::connect(b.local_addr).await;
    assert!(
        c3.is_closed().await,
        "third connection from one IP must be refused"
    );
    drop(c1);
    // the slot is released once the broker sees the close
    let mut ok = false;
    for _ in 0..200 {
        let mut c = Client::connect(b.local_addr).await;
        c.send_only(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
            .await;
        if c.read_frame().await.is_some() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(ok);
    drop(c2);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("connections.max.idle.ms", "100")]).await;
    let mut idle = Client::connect(b.local_addr).await;
    assert!(idle.is_closed().await);
    // a frame that starts but never completes is closed the same way
    let mut slow = Client::connect(b.local_addr).await;
    slow.stream.write_all(&[0, 0, 1, 0, 0, 18]).await.unwrap();
    assert!(slow.is_closed().await);
    api_versions_ok(b.local_addr).await;
    b.shutdown().await.unwrap();
}

/// A plausible request of `key` at `version` against topic `t`.
fn request_for(key: ApiKey, version: i16, t: &str, id: Uuid, n: i16) -> RequestBody {
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
        ApiKey::DescribeCluster => RequestBody::DescribeCluster(DescribeClusterRequest::default()),
        other => panic!("no request for {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_version_of_every_api_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "vv", 1, &[]).await, NONE);
    produce(&mut c, "vv", 0, batch(&["seed"], 1), 1).await;
    let id = metadata(&mut c, Some(vec!["vv"]), false).await.topics[0].topic_id;
    let mut checked = 0;
    for &(key, lo, hi) in weir_broker::handler::SUPPORTED {
        for version in lo..=hi {
            let body = request_for(key, version, "vv", id, checked);
            let resp = c.call(body, version).await;
            match &resp {
                ResponseBody::Produce(r) => {
                    assert_eq!(
                        r.responses[0].partition_responses[0].error_code, NONE,
                        "{key:?} v{version}"
                    )
                }
                ResponseBody::Fetch(r) => {
                    let p = &r.responses[0].partitions[0];
                    assert_eq!(p.error_code, NONE, "{key:?} v{version}");
                    assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
                }
                ResponseBody::ListOffsets(r) => {
                    assert_eq!(
                        r.topics[0].partitions[0].error_code, NONE,
                        "{key:?} v{version}"
                    )
                }
                ResponseBody::Metadata(r) => assert_eq!(r.topics[0].error_code, NONE),
                ResponseBody::CreateTopics(r) => assert_eq!(r.topics[0].error_code, NONE),
                ResponseBody::DescribeConfigs(r) => assert_eq!(r.results[0].error_code, NONE),
                _ => {}
            }
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked}");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_long_polls_and_restart_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "sd", 1, &[]).await, NONE);
    let addr = b.local_addr;
    let waiter = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        fetch(&mut c, 12, "sd", Uuid::ZERO, 0, 30_000).await
    });
    api_versions_ok(addr).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // well below the fetch's 30 s max wait
    tokio::time::timeout(Duration::from_secs(20), b.shutdown())
        .await
        .expect("shutdown waited for the long poll")
        .unwrap();
    let (err, _, got) = waiter.await.unwrap();
    assert_eq!(err, NONE);
    assert!(got.is_empty());
    assert!(dir.path().join(".kafka_cleanshutdown").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_state_is_snapshotted_in_kafka_format_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "snap", 1, &[]).await, NONE);
    let (pid, epoch) = init_pid(&mut c).await;
    for i in 0..3 {
        let r = produce(
            &mut c,
            "snap",
            0,
            idempotent_batch(pid, epoch, i * 2, 2),
            -1,
        )
        .await;
        assert_eq!(r, (NONE, i as i64 * 2));
    }
    // move the log start past those batches, so a log scan cannot see them
    assert_eq!(
        produce(&mut c, "snap", 0, batch(&["plain"], 1), 1).await,
        (NONE, 6)
    );
    let req = DeleteRecordsRequest {
        topics: vec![delete_records_request::DeleteRecordsTopic {
            name: "snap".into(),
            partitions: vec![delete_records_request::DeleteRecordsPartition {
                partition_index: 0,
                offset: 6,
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 1000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteRecords(req), 2).await {
        ResponseBody::DeleteRecords(r) => {
            assert_eq!(r.topics[0].partitions[0].low_watermark, 6)
        }
        other => panic!("{other:?}"),
    }
    drop(c);
    b.shutdown().await.unwrap();
    let snap = dir
        .path()
        .join("snap-0")
        .join("00000000000000000007.snapshot");
    let bytes = std::fs::read(&snap).expect("snapshot written at shutdown");
    // version 1, 3 entries of 46 bytes (the last batches of one producer)
    assert_eq!(&bytes[..2], &[0, 1]);
    assert_eq!(i32::from_be_bytes(bytes[6..10].try_into().unwrap()), 3);
    assert_eq!(bytes.len(), 10 + 3 * 46);
    // the newest entry: pid, epoch, last sequence 5, last offset 5, delta 1
    let last = &bytes[10 + 2 * 46..];
    assert_eq!(i64::from_be_bytes(last[0..8].try_into().unwrap()), pid);
    assert_eq!(i16::from_be_bytes(last[8..10].try_into().unwrap()), epoch);
    assert_eq!(i32::from_be_bytes(last[10..14].try_into().unwrap()), 5);
    assert_eq!(i64::from_be_bytes(last[14..22].try_into().unwrap()), 5);
    assert_eq!(i32::from_be_bytes(last[22..26].try_into().unwrap()), 1);
    // restart: the snapshot (not a log scan) answers a retry of the first batch
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(list_offset(&mut c, "snap", -2).await.1, 6);
    assert_eq!(
        produce(&mut c, "snap", 0, idempotent_batch(pid, epoch, 0, 2), -1).await,
        (NONE, 0)
    );
    assert_eq!(
        produce(&mut c, "snap", 0, idempotent_batch(pid, epoch, 7, 1), -1)
            .await
            .0,
        45
    );
    assert_eq!(
        produce(&mut c, "snap", 0, idempotent_batch(pid, epoch, 6, 1), -1).await,
        (NONE, 7)
    );
    b.shutdown().await.unwrap();
}
