//! Produce errors over the wire as Kafka answers them: records refused one
//! by one are listed in `record_errors` (Produce v8+) with their index in
//! the batch, beside Kafka's partition-level `error_message`; a request
//! larger than a segment is `RECORD_LIST_TOO_LARGE`, a batch over
//! `max.message.bytes` `MESSAGE_TOO_LARGE`. Nothing is appended.

use crate::common;

use common::*;

const MESSAGE_TOO_LARGE: i16 = 10;
const RECORD_LIST_TOO_LARGE: i16 = 18;
const INVALID_TIMESTAMP: i16 = 32;
const INVALID_RECORD: i16 = 87;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One uncompressed batch of `(key, timestamp)` records.
fn records(codec: Compression, records: &[(Option<&str>, i64)]) -> Bytes {
    let mut b = RecordBatchBuilder::new(codec);
    for &(key, ts) in records {
        b.push(
            ts,
            key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            Some(Bytes::from_static(b"value")),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

/// Produces `records` at `version` and returns the partition's answer.
async fn produce_at(
    c: &mut Client,
    topic: &str,
    records: Bytes,
    version: i16,
) -> produce_response::PartitionProduceResponse {
    let req = ProduceRequest {
        acks: -1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::Produce(req), version).await {
        ResponseBody::Produce(mut r) => r.responses.remove(0).partition_responses.remove(0),
        other => panic!("{other:?}"),
    }
}

fn indices(p: &produce_response::PartitionProduceResponse) -> Vec<i32> {
    p.record_errors.iter().map(|e| e.batch_index).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_without_a_key_on_a_compacted_topic_are_named_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "compacted", 1, &[("cleanup.policy", "compact")]).await,
        NONE
    );
    let now = now_ms();
    let missing = [2usize, 5, 7];
    for codec in [Compression::None, Compression::Zstd] {
        let batch: Vec<_> = (0..10)
            .map(|i| ((!missing.contains(&i)).then_some("k"), now))
            .collect();
        let p = produce_at(&mut c, "compacted", records(codec, &batch), 9).await;
        assert_eq!(p.error_code, INVALID_RECORD, "{codec:?}");
        assert_eq!(p.base_offset, -1);
        assert_eq!(indices(&p), [2, 5, 7], "{codec:?}");
        for e in &p.record_errors {
            assert_eq!(
                e.batch_index_error_message.as_deref(),
                Some("Compacted topic cannot accept message without key")
            );
        }
        let message = p.error_message.unwrap();
        assert!(
            message.starts_with(
                "One or more records have been rejected due to 3 record errors in total, \
                 and only showing the first three errors at most: \
                 [RecordError(batchIndex=2, message='Compacted topic cannot accept"
            ),
            "{message}"
        );
        // Below v8 the response has no room for either: the code alone.
        let old = produce_at(&mut c, "compacted", records(codec, &batch), 7).await;
        assert_eq!(
            (old.error_code, old.record_errors.len(), old.error_message),
            (INVALID_RECORD, 0, None)
        );
    }
    assert_eq!(list_offset(&mut c, "compacted", -1).await.1, 0);
    // The same records with keys are taken.
    let keyed = records(Compression::None, &[(Some("k"), now); 10]);
    let p = produce_at(&mut c, "compacted", keyed, 9).await;
    assert_eq!(
        (p.error_code, p.base_offset, indices(&p)),
        (NONE, 0, vec![])
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_out_of_bounds_are_named_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let configs = [
        ("message.timestamp.type", "CreateTime"),
        ("message.timestamp.before.max.ms", "60000"),
        ("message.timestamp.after.max.ms", "60000"),
        ("cleanup.policy", "compact"),
    ];
    assert_eq!(create_topic(&mut c, "timed", 1, &configs).await, NONE);
    let now = now_ms();
    let hour = 3_600_000;
    // Record 1 an hour old, record 3 an hour ahead, record 4 without a key.
    let batch = [
        (Some("k"), now),
        (Some("k"), now - hour),
        (Some("k"), now),
        (Some("k"), now + hour),
        (None, now),
    ];
    let p = produce_at(&mut c, "timed", records(Compression::Lz4, &batch), 9).await;
    assert_eq!(p.error_code, INVALID_TIMESTAMP);
    assert_eq!(indices(&p), [1, 3, 4]);
    assert_eq!(
        p.error_message.as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );
    let old = p.record_errors[0]
        .batch_index_error_message
        .as_deref()
        .unwrap();
    assert!(
        old.starts_with(&format!(
            "Timestamp {} of message with offset 1 is out of range. The timestamp should be within [",
            now - hour
        )),
        "{old}"
    );
    assert_eq!(list_offset(&mut c, "timed", -1).await.1, 0);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_a_segment_is_record_list_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let configs = [("segment.bytes", "4096"), ("max.message.bytes", "8192")];
    assert_eq!(create_topic(&mut c, "small", 1, &configs).await, NONE);
    let now = now_ms();
    let batch_of = |n: usize| records(Compression::None, &vec![(Some("key"), now); n]);
    let over_segment = batch_of(300);
    assert!((4096..=8192).contains(&over_segment.len()));
    let over_max = batch_of(600);
    assert!(over_max.len() > 8192);
    for version in [3, 9] {
        let p = produce_at(&mut c, "small", over_segment.clone(), version).await;
        assert_eq!(p.error_code, RECORD_LIST_TOO_LARGE, "v{version}");
        assert!(p.record_errors.is_empty());
        let p = produce_at(&mut c, "small", over_max.clone(), version).await;
        assert_eq!(p.error_code, MESSAGE_TOO_LARGE, "v{version}");
    }
    assert_eq!(list_offset(&mut c, "small", -1).await.1, 0);
    let p = produce_at(&mut c, "small", batch_of(10), 9).await;
    assert_eq!((p.error_code, p.base_offset), (NONE, 0));
    b.shutdown().await.unwrap();
}
