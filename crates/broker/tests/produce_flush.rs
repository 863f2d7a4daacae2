//! Produce with `flush.messages=1`: a request to several partitions is
//! answered only after every partition's records are synced (the recovery
//! point covers them), and the stored batches carry the assigned offsets
//! although the broker writes the request's bytes without copying them.

use crate::common;
use common::*;

/// An acks=all Produce of `records` to each of partitions `0..partitions`.
fn produce_all(topic: &str, partitions: i32, records: Bytes) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks: -1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.into(),
            partition_data: (0..partitions)
                .map(|p| produce_request::PartitionProduceData {
                    index: p,
                    records: Some(records.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_partition_produce_is_synced_before_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "durable", 4, &[("flush.messages", "1")]).await,
        NONE
    );
    for round in 0..3i64 {
        let req = produce_all("durable", 4, batch(&["a", "b"], 1_700_000_000_000));
        let ResponseBody::Produce(r) = c.call(req, 9).await else {
            panic!("not a produce response");
        };
        let parts = &r.responses[0].partition_responses;
        assert_eq!(parts.len(), 4);
        for p in parts {
            assert_eq!(p.error_code, NONE, "{:?}", p.error_message);
            assert_eq!(p.base_offset, round * 2);
            let log = b.broker.replicas.log("durable", p.index).unwrap();
            // Synced before the answer: the recovery point covers the append.
            assert_eq!(log.recovery_point(), round * 2 + 2);
        }
    }
    // The stored batches carry the offsets the broker assigned.
    for p in 0..4 {
        let log = b.broker.replicas.log("durable", p).unwrap();
        let read = log.read(0, 1 << 20, i64::MAX, true).unwrap();
        let mut bytes = Vec::new();
        for r in &read.regions {
            bytes.extend(r.read_to_vec().unwrap());
        }
        let offsets: Vec<i64> = BatchIter::new(Bytes::from(bytes))
            .map(|batch| batch.unwrap().base_offset())
            .collect();
        assert_eq!(offsets, vec![0, 2, 4], "partition {p}");
    }
    let (err, _, recs) = fetch(&mut c, 12, "durable", Uuid::default(), 0, 0).await;
    assert_eq!(err, NONE);
    let got: Vec<i64> = recs.iter().map(|(o, _)| *o).collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
    b.shutdown().await.unwrap();
}

/// Produce requests sent back to back on one connection (as a producer with
/// several requests in flight does) are appended while earlier ones wait
/// for their syncs, and every answer still comes in request order, after
/// its own records are synced. A request of another kind in between is
/// answered in its place and sees the earlier produces' records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_produces_are_answered_in_order_once_synced() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "piped", 2, &[("flush.messages", "1")]).await,
        NONE
    );
    let produce = |i: usize| {
        produce_all(
            "piped",
            2,
            batch(&[&format!("r{i}-a"), &format!("r{i}-b")], 1000),
        )
    };
    // 20 produces with a ListOffsets after the 10th, all written before any
    // answer is read
    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push((c.send_only(produce(i), 9).await, ApiKey::Produce, 9));
        if i == 9 {
            // the latest offset of partition 0
            let lo = request_for(ApiKey::ListOffsets, 7, "piped", Uuid::ZERO, 0);
            sent.push((c.send_only(lo, 7).await, ApiKey::ListOffsets, 7));
        }
    }
    let mut produced = 0i64;
    for (corr, key, version) in sent {
        let frame = c.read_frame().await.expect("answer");
        let (header, body) = decode_response(frame, key, version).unwrap();
        assert_eq!(header.correlation_id, corr, "answers in request order");
        match body {
            ResponseBody::Produce(r) => {
                for p in &r.responses[0].partition_responses {
                    assert_eq!(p.error_code, NONE, "{:?}", p.error_message);
                    assert_eq!(p.base_offset, produced * 2, "offsets in request order");
                    let log = b.broker.replicas.log("piped", p.index).unwrap();
                    assert!(log.recovery_point() >= produced * 2 + 2, "synced first");
                }
                produced += 1;
            }
            ResponseBody::ListOffsets(r) => {
                // after the first ten produces: their records are visible
                assert_eq!(produced, 10);
                assert_eq!(r.topics[0].partitions[0].offset, 20);
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!(produced, 20);
    b.shutdown().await.unwrap();
}

/// A request that closes the connection (here a Produce in a version the
/// broker does not support) still lets the produces sent before it get
/// their answers first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_produce_answers_go_out_before_a_close() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "closing", 1, &[("flush.messages", "1")]).await,
        NONE
    );
    let mut sent = Vec::new();
    for i in 0..5 {
        let req = produce_all("closing", 1, batch(&[&format!("v{i}")], 1000));
        sent.push(c.send_only(req, 9).await);
    }
    // size 8: api key 0 (Produce), version 99, correlation id 77
    let mut garbage = 8i32.to_be_bytes().to_vec();
    garbage.extend_from_slice(&0i16.to_be_bytes());
    garbage.extend_from_slice(&99i16.to_be_bytes());
    garbage.extend_from_slice(&77i32.to_be_bytes());
    c.stream.write_all(&garbage).await.unwrap();
    for (i, corr) in sent.into_iter().enumerate() {
        let frame = c.read_frame().await.expect("answer before the close");
        let (header, body) = decode_response(frame, ApiKey::Produce, 9).unwrap();
        assert_eq!(header.correlation_id, corr);
        let ResponseBody::Produce(r) = body else {
            panic!("not a produce answer");
        };
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (NONE, i as i64));
    }
    assert!(c.is_closed().await);
    b.shutdown().await.unwrap();
}
