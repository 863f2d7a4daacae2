//! OffsetForLeaderEpoch against a hand-set cluster view: this broker leads
//! `t`-0 (replicas me and 2) at epoch 5 with epochs 1, 3 and 5 in its log,
//! broker 2 leads `t`-1. Each answer is Kafka's `endOffsetFor`; the
//! current leader epoch fences like Fetch's; consumers and the partition's
//! follower are served, other broker ids and non-leaders are not.

use std::sync::Arc;

use weir_broker::cluster::{
    BrokerNode, ClusterSnapshot, LocalTopicAdmin, PartitionView, TopicView,
};

use crate::common::*;

const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// The leader epoch `me` leads `t`-0 in.
const EPOCH: i32 = 5;

fn snapshot(me: i32, host: &str, port: u16, t_id: [u8; 16]) -> ClusterSnapshot {
    let node = |id: i32, host: &str, port: u16| BrokerNode {
        id,
        host: host.into(),
        port,
        rack: None,
    };
    let t = TopicView {
        name: "t".into(),
        id: t_id,
        partitions: vec![
            PartitionView {
                leader: me,
                leader_epoch: EPOCH,
                partition_epoch: 2,
                replicas: vec![me, 2],
                isr: vec![me, 2],
                offline_replicas: vec![],
            },
            PartitionView {
                leader: 2,
                leader_epoch: 7,
                partition_epoch: 2,
                replicas: vec![2, me],
                isr: vec![2, me],
                offline_replicas: vec![],
            },
        ],
    };
    ClusterSnapshot::new(
        vec![node(me, host, port), node(2, "10.0.0.2", 9092)],
        me,
        vec![t],
    )
}

/// (topic, partition, current leader epoch, asked epoch)
type Ask<'a> = (&'a str, i32, i32, i32);

/// (error code, leader epoch, end offset) per asked partition, in order.
async fn ask(
    c: &mut Client,
    version: i16,
    replica_id: i32,
    asks: &[Ask<'_>],
) -> Vec<(i16, i32, i64)> {
    let topics = asks
        .iter()
        .map(|&(topic, partition, current, epoch)| {
            offset_for_leader_epoch_request::OffsetForLeaderTopic {
                topic: topic.into(),
                partitions: vec![offset_for_leader_epoch_request::OffsetForLeaderPartition {
                    partition,
                    current_leader_epoch: current,
                    leader_epoch: epoch,
                    ..Default::default()
                }],
                ..Default::default()
            }
        })
        .collect();
    let req = OffsetForLeaderEpochRequest {
        replica_id,
        topics,
        ..Default::default()
    };
    let ResponseBody::OffsetForLeaderEpoch(r) = c
        .call(RequestBody::OffsetForLeaderEpoch(req), version)
        .await
    else {
        panic!("not an OffsetForLeaderEpoch response");
    };
    assert_eq!(r.topics.len(), asks.len());
    r.topics
        .iter()
        .zip(asks)
        .map(|(t, a)| {
            assert_eq!((t.topic.as_str(), t.partitions[0].partition), (a.0, a.1));
            let p = &t.partitions[0];
            (p.error_code, p.leader_epoch, p.end_offset)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_answers_where_each_epoch_ended() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_broker(dir.path(), &[]).await;
    let b = running.broker.clone();
    let me = b.config.node_id;
    let mut c = Client::connect(running.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    // epoch 1: offsets 0..3, epoch 3: 3..5, then this broker leads epoch
    // 5 from offset 5 (the epochs a leader records when it starts one)
    let log = b.replicas.log("t", 0).unwrap();
    for (epoch, n) in [(1, 3), (3, 2)] {
        log.assign_epoch_start(epoch, log.log_end_offset()).unwrap();
        let (err, _) = produce(&mut c, "t", 0, batch(&vec!["v"; n], 1), -1).await;
        assert_eq!(err, NONE);
    }
    log.assign_epoch_start(EPOCH, 5).unwrap();
    let t_id = b.topic("t").unwrap().id_bytes();
    let (host, port) = b.advertised();
    b.set_cluster(
        FixedView::new(snapshot(me, &host, port, t_id)),
        Arc::new(LocalTopicAdmin),
    );

    let consumer = |epoch| ("t", 0, EPOCH, epoch);
    let answers = ask(
        &mut c,
        4,
        -1,
        &[
            consumer(1),
            consumer(2),
            consumer(3),
            consumer(EPOCH),
            consumer(0),
            consumer(9),
            consumer(-1),
        ],
    )
    .await;
    assert_eq!(
        answers,
        vec![
            (NONE, 1, 3),
            // between known epochs: the one before, ended where 3 starts
            (NONE, 1, 3),
            (NONE, 3, 5),
            // the current epoch ends at the log end offset
            (NONE, EPOCH, 5),
            // before the first known epoch: the start of the first
            (NONE, 0, 0),
            // unknown, undefined
            (NONE, -1, -1),
            (NONE, -1, -1),
        ]
    );

    // fenced like Fetch, per partition; only the leader answers
    let answers = ask(
        &mut c,
        4,
        -1,
        &[
            ("t", 0, EPOCH - 1, 3),
            ("t", 0, EPOCH + 1, 3),
            ("t", 0, -1, 3),
            ("t", 1, 7, 3),
            ("t", 9, -1, 3),
            ("absent", 0, -1, 3),
        ],
    )
    .await;
    assert_eq!(
        answers,
        vec![
            (FENCED_LEADER_EPOCH, -1, -1),
            (UNKNOWN_LEADER_EPOCH, -1, -1),
            (NONE, 3, 5),
            (NOT_LEADER_OR_FOLLOWER, -1, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]
    );

    // the follower is served; a broker that is no replica, or this broker
    // itself, is not
    for (replica, expect) in [
        (2, (NONE, 3, 5)),
        (7, (NOT_LEADER_OR_FOLLOWER, -1, -1)),
        (me, (NOT_LEADER_OR_FOLLOWER, -1, -1)),
    ] {
        let got = ask(&mut c, 4, replica, &[consumer(3)]).await;
        assert_eq!(got, vec![expect], "replica {replica}");
    }
    // v2 has no replica id (Kafka's -2): served like a consumer
    for version in 2..=4 {
        let got = ask(&mut c, version, -1, &[consumer(1)]).await;
        assert_eq!(got, vec![(NONE, 1, 3)], "v{version}");
    }
    running.shutdown().await.unwrap();
}

/// A single node stores the producers' epoch field and records no epochs:
/// it answers as the only leader since the log's start, in epoch 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_answers_for_its_one_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(running.local_addr).await;
    assert_eq!(create_topic(&mut c, "s", 1, &[]).await, NONE);
    // librdkafka writes epoch 0 in its batches
    let mut batch = RecordBatchBuilder::new(Compression::None).partition_leader_epoch(0);
    for _ in 0..3 {
        batch
            .push(1, None, Some(Bytes::from_static(b"v")), vec![])
            .unwrap();
    }
    let (err, _) = produce(&mut c, "s", 0, batch.build().unwrap().into_bytes(), -1).await;
    assert_eq!(err, NONE);
    let got = ask(
        &mut c,
        4,
        -1,
        &[
            ("s", 0, 0, 0),
            ("s", 0, -1, 0),
            ("s", 0, 0, 1),
            ("s", 0, 1, 0),
        ],
    )
    .await;
    assert_eq!(
        got,
        vec![
            (NONE, 0, 3),
            (NONE, 0, 3),
            (NONE, -1, -1),
            (UNKNOWN_LEADER_EPOCH, -1, -1)
        ]
    );
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_before_kafka_4_are_not_advertised() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(running.local_addr).await;
    let ResponseBody::ApiVersions(v) = c
        .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    else {
        panic!("not an ApiVersions response");
    };
    let key = ApiKey::OffsetForLeaderEpoch as i16;
    let entry = v
        .api_keys
        .iter()
        .find(|k| k.api_key == key)
        .expect("advertised");
    assert_eq!((entry.min_version, entry.max_version), (2, 4));
    running.shutdown().await.unwrap();
}
