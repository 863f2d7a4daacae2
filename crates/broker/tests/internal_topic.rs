//! `__consumer_offsets` is protected like Kafka's internal topics: clients
//! read it but cannot write to it, delete it, grow it, truncate it or
//! create it; Metadata marks it internal.

use crate::common;

use common::*;

const OFFSETS: &str = "__consumer_offsets";
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// One `__consumer_offsets` partition, so every group lands in partition 0.
const CONFIG: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "1"),
];

/// Creates `__consumer_offsets` the way clients do: by asking for a
/// coordinator, then commits offset 5 for group "g" so the topic has data.
async fn use_groups(c: &mut Client) {
    let req = FindCoordinatorRequest {
        key_type: 0,
        coordinator_keys: vec!["g".into()],
        ..Default::default()
    };
    match c.call(RequestBody::FindCoordinator(req), 4).await {
        ResponseBody::FindCoordinator(r) => assert_eq!(r.coordinators[0].error_code, NONE),
        other => panic!("{other:?}"),
    }
    // Offsets are committed only for partitions that exist.
    assert_eq!(create_topic(c, "t", 1, &[]).await, NONE);
    let req = OffsetCommitRequest {
        group_id: "g".into(),
        generation_id_or_member_epoch: -1,
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: 5,
                committed_leader_epoch: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetCommit(req), 8).await {
        ResponseBody::OffsetCommit(r) => {
            assert_eq!(r.topics[0].partitions[0].error_code, NONE)
        }
        other => panic!("{other:?}"),
    }
}

fn produce_req(topic: &str) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks: -1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(batch(&["junk"], 1_700_000_000_000)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Sends `body` with header client id `client_id` and decodes the answer.
async fn call_as(c: &mut Client, client_id: &str, body: RequestBody, version: i16) -> ResponseBody {
    c.correlation_id += 1;
    let header = RequestHeader {
        request_api_key: body.api_key() as i16,
        request_api_version: version,
        correlation_id: c.correlation_id,
        client_id: Some(client_id.into()),
        ..Default::default()
    };
    let key = body.api_key();
    let mut buf = BytesMut::new();
    encode_request(&mut buf, &header, &body).unwrap();
    c.stream.write_all(&buf).await.unwrap();
    let frame = c.read_frame().await.expect("response");
    let (h, body) = decode_response(frame, key, version).unwrap();
    assert_eq!(h.correlation_id, c.correlation_id);
    body
}

fn produce_result(r: ResponseBody) -> (i16, Option<String>) {
    match r {
        ResponseBody::Produce(r) => {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.error_message.clone())
        }
        other => panic!("{other:?}"),
    }
}

async fn log_end(c: &mut Client) -> i64 {
    let (error, hw, _) = fetch(c, 12, OFFSETS, Uuid::ZERO, 0, 0).await;
    assert_eq!(error, NONE);
    hw
}

async fn partition_count(c: &mut Client, topic: &str) -> usize {
    let m = metadata(c, Some(vec![topic]), false).await;
    assert_eq!(m.topics[0].error_code, NONE, "{topic} exists");
    m.topics[0].partitions.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_read_but_cannot_write_or_change_the_offsets_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    use_groups(&mut c).await;

    // Metadata marks it internal, an ordinary topic not.
    assert_eq!(create_topic(&mut c, "plain", 1, &[]).await, NONE);
    let m = metadata(&mut c, None, false).await;
    let internal = |name: &str| {
        m.topics
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
            .map(|t| t.is_internal)
    };
    assert_eq!(internal(OFFSETS), Some(true));
    assert_eq!(internal("plain"), Some(false));

    // Fetch is allowed (tools read the topic): the commit record is there.
    let (error, hw, records) = fetch(&mut c, 12, OFFSETS, Uuid::ZERO, 0, 0).await;
    assert_eq!(error, NONE);
    assert_eq!(hw, 1);
    assert_eq!(records.len(), 1);

    // Produce: INVALID_TOPIC_EXCEPTION, nothing appended.
    let (error, msg) = produce_result(c.call(produce_req(OFFSETS), 9).await);
    assert_eq!(error, INVALID_TOPIC_EXCEPTION);
    assert_eq!(
        msg.as_deref(),
        Some("Cannot append to internal topic __consumer_offsets")
    );
    assert_eq!(log_end(&mut c).await, 1);
    // The same request to an ordinary topic succeeds.
    let (error, _) = produce_result(c.call(produce_req("plain"), 9).await);
    assert_eq!(error, NONE);

    // DeleteTopics (by name): refused, the topic stays.
    let req = DeleteTopicsRequest {
        topic_names: vec![OFFSETS.into()],
        timeout_ms: 5000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteTopics(req), 5).await {
        ResponseBody::DeleteTopics(r) => {
            assert_eq!(r.responses[0].error_code, INVALID_TOPIC_EXCEPTION)
        }
        other => panic!("{other:?}"),
    }
    // DeleteTopics by topic id (v6+): refused too.
    let id = metadata(&mut c, Some(vec![OFFSETS]), false).await.topics[0].topic_id;
    let req = DeleteTopicsRequest {
        topics: vec![delete_topics_request::DeleteTopicState {
            name: None,
            topic_id: id,
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteTopics(req), 6).await {
        ResponseBody::DeleteTopics(r) => {
            assert_eq!(r.responses[0].error_code, INVALID_TOPIC_EXCEPTION);
            assert_eq!(r.responses[0].name.as_deref(), Some(OFFSETS));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(partition_count(&mut c, OFFSETS).await, 1);

    // CreatePartitions: refused, the partition count stays.
    let req = CreatePartitionsRequest {
        topics: vec![create_partitions_request::CreatePartitionsTopic {
            name: OFFSETS.into(),
            count: 4,
            assignments: None,
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    match c.call(RequestBody::CreatePartitions(req), 3).await {
        ResponseBody::CreatePartitions(r) => {
            assert_eq!(r.results[0].error_code, INVALID_TOPIC_EXCEPTION)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(partition_count(&mut c, OFFSETS).await, 1);

    // DeleteRecords: refused, the log start stays.
    let req = DeleteRecordsRequest {
        topics: vec![delete_records_request::DeleteRecordsTopic {
            name: OFFSETS.into(),
            partitions: vec![delete_records_request::DeleteRecordsPartition {
                partition_index: 0,
                offset: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteRecords(req), 2).await {
        ResponseBody::DeleteRecords(r) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!(p.error_code, INVALID_TOPIC_EXCEPTION);
            assert_eq!(p.low_watermark, -1);
        }
        other => panic!("{other:?}"),
    }
    let (_, _, records) = fetch(&mut c, 12, OFFSETS, Uuid::ZERO, 0, 0).await;
    assert_eq!(records.len(), 1, "the commit record is still readable");

    // CreateTopics of an existing internal topic: TOPIC_ALREADY_EXISTS.
    assert_eq!(
        create_topic(&mut c, OFFSETS, 3, &[]).await,
        TOPIC_ALREADY_EXISTS
    );

    // The committed offset survived all of it.
    let req = OffsetFetchRequest {
        group_id: "g".into(),
        topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
            name: "t".into(),
            partition_indexes: vec![0],
            ..Default::default()
        }]),
        ..Default::default()
    };
    match c.call(RequestBody::OffsetFetch(req), 1).await {
        ResponseBody::OffsetFetch(r) => assert_eq!(r.topics[0].partitions[0].committed_offset, 5),
        other => panic!("{other:?}"),
    }
    drop(c);
    b.shutdown().await.unwrap();
}

/// Kafka lets its admin client id write to internal topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_client_id_may_produce_to_the_offsets_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    use_groups(&mut c).await;
    let (error, _) =
        produce_result(call_as(&mut c, "__admin_client", produce_req(OFFSETS), 9).await);
    assert_eq!(error, NONE);
    assert_eq!(log_end(&mut c).await, 2);
    let (error, _) = produce_result(call_as(&mut c, "other", produce_req(OFFSETS), 9).await);
    assert_eq!(error, INVALID_TOPIC_EXCEPTION);
    assert_eq!(log_end(&mut c).await, 2);
    drop(c);
    b.shutdown().await.unwrap();
}

/// Before any group use the topic does not exist; a client cannot create
/// it (it would get the wrong partition count or cleanup policy), and the
/// broker still creates it correctly on first group use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_cannot_make_the_offsets_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, OFFSETS, 7, &[("cleanup.policy", "delete")]).await,
        INVALID_TOPIC_EXCEPTION
    );
    let m = metadata(&mut c, Some(vec![OFFSETS]), false).await;
    assert_ne!(m.topics[0].error_code, NONE, "not created");
    use_groups(&mut c).await;
    assert_eq!(partition_count(&mut c, OFFSETS).await, 1);
    let configs = topic_config(&mut c, OFFSETS).await;
    assert_eq!(
        configs
            .get("cleanup.policy")
            .and_then(|(v, _)| v.as_deref()),
        Some("compact")
    );
    drop(c);
    b.shutdown().await.unwrap();
}

/// Metadata with auto-creation for `__consumer_offsets` (as a Java consumer
/// reading the topic sends it) creates it as the coordinator needs it, not
/// with the defaults of an ordinary topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creation_makes_the_coordinator_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("offsets.topic.num.partitions", "4"),
            ("num.partitions", "2"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    let m = metadata(&mut c, Some(vec![OFFSETS]), true).await;
    assert_eq!(m.topics[0].error_code, NONE);
    assert!(m.topics[0].is_internal);
    assert_eq!(m.topics[0].partitions.len(), 4);
    let configs = topic_config(&mut c, OFFSETS).await;
    assert_eq!(
        configs
            .get("cleanup.policy")
            .and_then(|(v, _)| v.as_deref()),
        Some("compact")
    );
    use_groups(&mut c).await;
    drop(c);
    b.shutdown().await.unwrap();
}
