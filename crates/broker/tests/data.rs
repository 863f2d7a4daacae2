//! Data path: produce, fetch, long poll, ListOffsets, restart, idempotence.

use crate::common;

use common::*;

/// Small responses are copied into one write by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_fetch_round_trip_in_every_fetch_encoding() {
    round_trip(&[], false).await;
}

/// With `fetch.inline.max.bytes=0` every record byte goes through sendfile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_fetch_round_trip_with_sendfile() {
    round_trip(&[("fetch.inline.max.bytes", "0")], true).await;
}

async fn round_trip(config: &[(&str, &str)], expect_sendfile: bool) {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), config).await;
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
    if expect_sendfile {
        // record data went through sendfile (6 fetches of both batches at least)
        let sent = weir_broker::connection::SENDFILE_BYTES
            .load(std::sync::atomic::Ordering::Relaxed)
            - sent_before;
        assert!(sent >= 6 * (batch(&refs[..5], 1000).len() + batch(&refs[5..], 2000).len()) as u64);
    }
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
    // the fetch must have parked (found nothing) before the append
    wait_parked_fetches(&b, 1).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_and_acks_follow_topic_configs() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // CreateTime with the default message.timestamp.after.max.ms (1 h)
    assert_eq!(create_topic(&mut c, "ct", 1, &[]).await, NONE);
    assert_eq!(
        produce(&mut c, "ct", 0, batch(&["future"], now + 86_400_000), 1)
            .await
            .0,
        32
    );
    assert_eq!(
        produce(&mut c, "ct", 0, batch(&["now"], now), 1).await,
        (NONE, 0)
    );
    // LogAppendTime: the broker stamps the batch and reports the time
    assert_eq!(
        create_topic(
            &mut c,
            "lat",
            1,
            &[("message.timestamp.type", "LogAppendTime")]
        )
        .await,
        NONE
    );
    let req = ProduceRequest {
        acks: -1,
        timeout_ms: 1000,
        topic_data: vec![produce_request::TopicProduceData {
            name: "lat".into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(batch(&["stamped"], 5)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let append_time = match c.call(RequestBody::Produce(req), 9).await {
        ResponseBody::Produce(r) => r.responses[0].partition_responses[0].log_append_time_ms,
        other => panic!("{other:?}"),
    };
    assert!(append_time >= now, "{append_time} < {now}");
    let (err, _, _) = fetch(&mut c, 12, "lat", Uuid::ZERO, 0, 0).await;
    assert_eq!(err, NONE);
    let (_, _, ts) = list_offset(&mut c, "lat", -3).await;
    assert_eq!(ts, append_time);
    // acks=all with min.insync.replicas above the single replica
    assert_eq!(
        create_topic(&mut c, "isr", 1, &[("min.insync.replicas", "2")]).await,
        NONE
    );
    assert_eq!(
        produce(&mut c, "isr", 0, batch(&["x"], now), -1).await.0,
        19
    );
    assert_eq!(
        produce(&mut c, "isr", 0, batch(&["x"], now), 1).await,
        (NONE, 0)
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_that_fails_to_open_is_offline_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "good", 1, &[]).await, NONE);
    assert_eq!(create_topic(&mut c, "bad", 1, &[]).await, NONE);
    assert_eq!(
        produce(&mut c, "good", 0, batch(&["g"], 1), 1).await,
        (NONE, 0)
    );
    drop(c);
    b.shutdown().await.unwrap();
    std::fs::write(
        dir.path().join("bad-0").join("partition.metadata"),
        b"garbage",
    )
    .unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(produce(&mut c, "bad", 0, batch(&["b"], 1), 1).await.0, 56);
    assert_eq!(fetch(&mut c, 12, "bad", Uuid::ZERO, 0, 0).await.0, 56);
    assert_eq!(
        produce(&mut c, "good", 0, batch(&["g2"], 1), 1).await,
        (NONE, 1)
    );
    let (err, _, got) = fetch(&mut c, 12, "good", Uuid::ZERO, 0, 0).await;
    assert_eq!(err, NONE);
    assert_eq!(got.len(), 2);
    // the damaged directory was left alone
    assert_eq!(
        std::fs::read(dir.path().join("bad-0").join("partition.metadata")).unwrap(),
        b"garbage"
    );
    b.shutdown().await.unwrap();
}

/// Fetches partitions 0 and 1 of `topic` from offset 0 with the given
/// limits; returns the record data size of each partition.
async fn fetch_sizes(
    c: &mut Client,
    topic: &str,
    max_bytes: i32,
    partition_max: i32,
) -> Vec<usize> {
    let req = FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes,
        isolation_level: 1,
        topics: vec![fetch_request::FetchTopic {
            topic: topic.to_string(),
            partitions: (0..2)
                .map(|p| fetch_request::FetchPartition {
                    partition: p,
                    fetch_offset: 0,
                    partition_max_bytes: partition_max,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::Fetch(req), 11).await {
        ResponseBody::Fetch(r) => r.responses[0]
            .partitions
            .iter()
            .map(|p| {
                assert_eq!(p.error_code, NONE);
                // read_committed answers carry an (empty) aborted list
                assert_eq!(p.aborted_transactions, Some(vec![]));
                p.records.as_ref().map_or(0, |r| r.len())
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_respects_request_and_partition_byte_limits() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "lim", 2, &[]).await, NONE);
    let v = "z".repeat(1000);
    let one = batch(&[&v], 1).len();
    for p in 0..2 {
        for _ in 0..10 {
            assert_eq!(produce(&mut c, "lim", p, batch(&[&v], 1), 1).await.0, NONE);
        }
    }
    // no limits hit: everything
    assert_eq!(
        fetch_sizes(&mut c, "lim", 1 << 20, 1 << 20).await,
        vec![10 * one, 10 * one]
    );
    // per-partition limit: whole batches that fit
    assert_eq!(
        fetch_sizes(&mut c, "lim", 1 << 20, (3 * one + 10) as i32).await,
        vec![3 * one, 3 * one]
    );
    // request limit: shared, first partition first
    assert_eq!(
        fetch_sizes(&mut c, "lim", (4 * one + 10) as i32, 1 << 20).await,
        vec![4 * one, 0]
    );
    // a limit below one batch still returns the first batch (progress)
    assert_eq!(fetch_sizes(&mut c, "lim", 10, 10).await, vec![one, 0]);
    b.shutdown().await.unwrap();
}
