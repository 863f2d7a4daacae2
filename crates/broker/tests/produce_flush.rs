//! Produce with `flush.messages=1`: a request to several partitions is
//! answered only after every partition's records are synced (the recovery
//! point covers them), and the stored batches carry the assigned offsets
//! although the broker writes the request's bytes without copying them.

mod common;
use common::*;

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
        let req = ProduceRequest {
            acks: -1,
            timeout_ms: 5000,
            topic_data: vec![produce_request::TopicProduceData {
                name: "durable".into(),
                partition_data: (0..4)
                    .map(|p| produce_request::PartitionProduceData {
                        index: p,
                        records: Some(batch(&["a", "b"], 1_700_000_000_000)),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Produce(r) = c.call(RequestBody::Produce(req), 9).await else {
            panic!("not a produce response");
        };
        let parts = &r.responses[0].partition_responses;
        assert_eq!(parts.len(), 4);
        for p in parts {
            assert_eq!(p.error_code, NONE, "{:?}", p.error_message);
            assert_eq!(p.base_offset, round * 2);
            let log = b.broker.log("durable", p.index).unwrap();
            // Synced before the answer: the recovery point covers the append.
            assert_eq!(log.recovery_point(), round * 2 + 2);
        }
    }
    // The stored batches carry the offsets the broker assigned.
    for p in 0..4 {
        let log = b.broker.log("durable", p).unwrap();
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
