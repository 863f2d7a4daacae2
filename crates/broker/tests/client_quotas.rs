//! Client quotas over the wire: AlterClientQuotas and DescribeClientQuotas
//! with Kafka's validation, kept across a restart
//! (`weir-client-quotas.json`); a producer over its `producer_byte_rate`
//! gets `throttle_time_ms` in its answers and its connection is muted, so
//! the rate it achieves stays near the quota even when it ignores the
//! throttle time; a consumer over its `consumer_byte_rate` gets empty
//! throttled answers; a client without a quota is never throttled; a
//! cluster member forwards quotas and describes what its image holds.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use weir_broker::{ConfigSources, RunningBroker, start};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::frame::{decode_response, encode_request};
use weir_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use weir_protocol::messages::describe_client_quotas_request::ComponentData;
use weir_protocol::messages::{
    AlterClientQuotasRequest, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
    FetchRequest, ProduceRequest, RequestBody, RequestHeader, ResponseBody, fetch_request,
    produce_request,
};
use weir_protocol::records::{Compression, RecordBatchBuilder};

use crate::common::{Client, create_topic, start_broker};

/// Sends `body` with `client_id` and reads its answer.
async fn call_as(c: &mut Client, client_id: &str, body: RequestBody, version: i16) -> ResponseBody {
    c.correlation_id += 1;
    let key = body.api_key();
    let header = RequestHeader {
        request_api_key: key as i16,
        request_api_version: version,
        correlation_id: c.correlation_id,
        client_id: Some(client_id.to_string()),
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    encode_request(&mut buf, &header, &body).unwrap();
    c.stream.write_all(&buf).await.unwrap();
    let frame = c.read_frame().await.expect("response");
    let (h, body) = decode_response(frame, key, version).unwrap();
    assert_eq!(h.correlation_id, c.correlation_id);
    body
}

type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

fn entry(entity: Entity<'_>, ops: &[(&str, f64, bool)]) -> EntryData {
    EntryData {
        entity: entity
            .iter()
            .map(|(t, n)| EntityData {
                entity_type: t.to_string(),
                entity_name: n.map(String::from),
                ..Default::default()
            })
            .collect(),
        ops: ops
            .iter()
            .map(|(k, v, remove)| OpData {
                key: k.to_string(),
                value: *v,
                remove: *remove,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// AlterClientQuotas; (error code, message) per entry.
async fn alter(
    c: &mut Client,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let req = AlterClientQuotasRequest {
        entries,
        validate_only,
        ..Default::default()
    };
    match c.call(RequestBody::AlterClientQuotas(req), 1).await {
        ResponseBody::AlterClientQuotas(r) => r
            .entries
            .into_iter()
            .map(|e| (e.error_code, e.error_message))
            .collect(),
        other => panic!("{other:?}"),
    }
}

async fn describe(
    c: &mut Client,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> DescribeClientQuotasResponse {
    let req = DescribeClientQuotasRequest {
        components: components
            .iter()
            .map(|(t, m, n)| ComponentData {
                entity_type: t.to_string(),
                match_type: *m,
                r#match: n.map(String::from),
                ..Default::default()
            })
            .collect(),
        strict,
        ..Default::default()
    };
    match c.call(RequestBody::DescribeClientQuotas(req), 1).await {
        ResponseBody::DescribeClientQuotas(r) => r,
        other => panic!("{other:?}"),
    }
}

/// The described (entity, values) pairs, entity as "type=name" joined.
fn described(r: &DescribeClientQuotasResponse) -> Vec<(String, Vec<(String, f64)>)> {
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let mut out: Vec<_> = r
        .entries
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| {
            let mut entity: Vec<String> = e
                .entity
                .iter()
                .map(|d| {
                    format!(
                        "{}={}",
                        d.entity_type,
                        d.entity_name.as_deref().unwrap_or("<default>")
                    )
                })
                .collect();
            entity.sort();
            let values = e.values.iter().map(|v| (v.key.clone(), v.value)).collect();
            (entity.join(","), values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test]
async fn quotas_are_altered_described_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("http.listeners", "")]).await;
    let mut c = Client::connect(b.local_addr).await;
    let invalid = ErrorCode::InvalidRequest.code();
    let got = alter(
        &mut c,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", 1024.0, false)],
            ),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", 1.0, false)],
            ),
            entry(
                &[("ip", Some("10.0.0.1")), ("client-id", Some("c"))],
                &[("connection_creation_rate", 1.0, false)],
            ),
            entry(
                &[("ip", Some("nope"))],
                &[("connection_creation_rate", 1.0, false)],
            ),
            entry(
                &[("client-id", Some("c"))],
                &[("consumer_byte_rate", 0.0, false)],
            ),
            entry(&[("client-id", None)], &[("unknown_key", 5.0, false)]),
            entry(
                &[("ip", Some("10.0.0.1"))],
                &[("connection_creation_rate", 5.0, false)],
            ),
            entry(
                &[("user", None), ("client-id", Some("app"))],
                &[
                    ("request_percentage", 50.0, false),
                    ("consumer_byte_rate", 2048.0, false),
                ],
            ),
        ],
        false,
    )
    .await;
    let codes: Vec<i16> = got.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        codes,
        [0, invalid, invalid, invalid, invalid, invalid, 0, 0],
        "{got:?}"
    );
    assert!(got[1].1.as_deref().unwrap().contains("group"));
    assert!(got[3].1.as_deref().unwrap().contains("nope"));
    assert!(got[4].1.as_deref().unwrap().contains("greater than 0"));
    assert!(got[5].1.as_deref().unwrap().contains("unknown_key"));
    // validate_only checks and changes nothing
    let got = alter(
        &mut c,
        vec![entry(
            &[("client-id", Some("x"))],
            &[("producer_byte_rate", 1.0, false)],
        )],
        true,
    )
    .await;
    assert_eq!(got[0].0, 0);
    let all = described(&describe(&mut c, &[], false).await);
    assert_eq!(
        all,
        [
            (
                "client-id=app,user=<default>".to_string(),
                vec![
                    ("consumer_byte_rate".to_string(), 2048.0),
                    ("request_percentage".to_string(), 50.0)
                ]
            ),
            (
                "ip=10.0.0.1".to_string(),
                vec![("connection_creation_rate".to_string(), 5.0)]
            ),
            (
                "user=alice".to_string(),
                vec![("producer_byte_rate".to_string(), 1024.0)]
            ),
        ]
    );
    // match types and strict
    let users = described(&describe(&mut c, &[("user", 2, None)], false).await);
    assert_eq!(users.len(), 1);
    let default_user = described(&describe(&mut c, &[("user", 1, None)], false).await);
    assert_eq!(default_user.len(), 1);
    assert!(described(&describe(&mut c, &[("user", 1, None)], true).await).is_empty());
    let alice = described(&describe(&mut c, &[("user", 0, Some("alice"))], true).await);
    assert_eq!(alice[0].0, "user=alice");
    let bad = describe(&mut c, &[("ip", 2, None), ("user", 2, None)], false).await;
    assert_eq!(bad.error_code, invalid);
    assert!(bad.entries.is_none());
    // remove a key
    let got = alter(
        &mut c,
        vec![entry(
            &[("user", None), ("client-id", Some("app"))],
            &[("request_percentage", 0.0, true)],
        )],
        false,
    )
    .await;
    assert_eq!(got[0].0, 0);
    b.shutdown().await.unwrap();

    let b = start_broker(dir.path(), &[("http.listeners", "")]).await;
    let mut c = Client::connect(b.local_addr).await;
    let after = described(&describe(&mut c, &[], false).await);
    assert_eq!(after.len(), 3);
    assert_eq!(after[0].1, [("consumer_byte_rate".to_string(), 2048.0)]);
    b.shutdown().await.unwrap();

    std::fs::write(
        dir.path().join("weir-client-quotas.json"),
        b"{\"version\":1,",
    )
    .unwrap();
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.path().display().to_string());
    let err = start(s.build().unwrap())
        .await
        .err()
        .expect("a corrupt file stops the start");
    assert!(err.to_string().contains("weir-client-quotas.json"), "{err}");
}

/// A 64 KiB batch of incompressible-ish values.
fn big_batch(seed: u8) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for i in 0..16u8 {
        let value: Vec<u8> = (0..4096u32)
            .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i ^ seed))
            .collect();
        b.push(0, None, Some(Bytes::from(value)), vec![]).unwrap();
    }
    b.build().unwrap().into_bytes()
}

fn produce_req(topic: &str, records: Bytes) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks: 1,
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
    })
}

/// Produces `total` bytes in 64 KiB batches as `client_id`, ignoring the
/// throttle times it is told; returns (bytes sent, elapsed, throttle
/// times seen).
async fn produce_flat_out(
    c: &mut Client,
    client_id: &str,
    total: usize,
) -> (usize, Duration, Vec<i32>) {
    let started = Instant::now();
    let (mut sent, mut throttles) = (0usize, Vec::new());
    let mut i = 0u8;
    while sent < total {
        let batch = big_batch(i);
        i = i.wrapping_add(1);
        sent += batch.len();
        match call_as(c, client_id, produce_req("q", batch), 9).await {
            ResponseBody::Produce(r) => {
                assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
                if r.throttle_time_ms > 0 {
                    throttles.push(r.throttle_time_ms);
                }
            }
            other => panic!("{other:?}"),
        }
    }
    (sent, started.elapsed(), throttles)
}

/// Two windows of one second: a burst is measured over one second, so a
/// few megabytes are enough to go over a quota of 512 KiB/s.
async fn start_quota_broker(dir: &std::path::Path) -> RunningBroker {
    start_broker(
        dir,
        &[
            ("http.listeners", ""),
            ("quota.window.num", "2"),
            ("quota.window.size.seconds", "1"),
        ],
    )
    .await
}

const QUOTA: f64 = 512.0 * 1024.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_over_its_quota_is_throttled_and_slowed() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_quota_broker(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "q", 1, &[]).await, 0);
    let got = alter(
        &mut c,
        vec![entry(
            &[("client-id", Some("slow"))],
            &[("producer_byte_rate", QUOTA, false)],
        )],
        false,
    )
    .await;
    assert_eq!(got[0].0, 0);

    // no quota for this client id: never throttled
    let (_, _, throttles) = produce_flat_out(&mut c, "fast", 3 << 20).await;
    assert!(throttles.is_empty(), "{throttles:?}");

    let (sent, elapsed, throttles) = produce_flat_out(&mut c, "slow", 3 << 20).await;
    assert!(!throttles.is_empty(), "no throttle time reported");
    assert!(throttles.iter().all(|t| *t <= 2_000), "{throttles:?}");
    // The connection was muted for the throttle times: the rate achieved
    // by a client that ignores them stays within a small multiple of the
    // quota (a bound on behaviour, not a speed).
    let achieved = sent as f64 / elapsed.as_secs_f64();
    assert!(
        achieved < 3.0 * QUOTA,
        "{achieved:.0} B/s against a quota of {QUOTA} B/s"
    );
    let produce_ms =
        b.broker.quotas.metrics.throttle_ms[0].load(std::sync::atomic::Ordering::Relaxed);
    assert!(produce_ms > 0);
    b.shutdown().await.unwrap();
}

fn fetch_req(offset: i64) -> RequestBody {
    RequestBody::Fetch(FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 4 << 20,
        session_epoch: -1,
        topics: vec![fetch_request::FetchTopic {
            topic: "q".to_string(),
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
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_over_its_quota_gets_empty_throttled_answers() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_quota_broker(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "q", 1, &[]).await, 0);
    produce_flat_out(&mut c, "writer", 2 << 20).await;
    let got = alter(
        &mut c,
        vec![entry(
            &[("client-id", Some("reader"))],
            &[("consumer_byte_rate", QUOTA, false)],
        )],
        false,
    )
    .await;
    assert_eq!(got[0].0, 0);
    // read the partition twice over from the start, ignoring throttle times
    let (mut offset, mut rounds, mut throttled, mut bytes) = (0i64, 0, 0, 0usize);
    let started = Instant::now();
    while rounds < 2 {
        match call_as(&mut c, "reader", fetch_req(offset), 12).await {
            ResponseBody::Fetch(r) if r.throttle_time_ms > 0 => {
                throttled += 1;
                assert!(r.responses.is_empty(), "a throttled fetch carries no data");
            }
            ResponseBody::Fetch(r) => {
                let p = &r.responses[0].partitions[0];
                assert_eq!(p.error_code, 0);
                let records = p.records.clone().unwrap_or_default();
                bytes += records.len();
                let last = weir_protocol::records::BatchIter::new(records)
                    .map(|b| b.unwrap().last_offset())
                    .last();
                offset = match last {
                    Some(o) => o + 1,
                    None => {
                        rounds += 1;
                        0
                    }
                };
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(throttled > 0);
    let achieved = bytes as f64 / started.elapsed().as_secs_f64();
    assert!(achieved < 3.0 * QUOTA, "{achieved:.0} B/s");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_member_forwards_quotas_and_describes_its_image() {
    let dir = tempfile::tempdir().unwrap();
    let (b, admin) = crate::scram_credentials::start_member(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    let set = vec![entry(
        &[("user", Some("a"))],
        &[("producer_byte_rate", 1.0, false)],
    )];
    // validate_only is forwarded too, and changes nothing.
    let got = alter(&mut c, set.clone(), true).await;
    assert_eq!(got[0].0, 0);
    assert!(b.broker.quotas.is_empty());
    let got = alter(&mut c, set, false).await;
    assert_eq!(got[0].0, 0);
    assert_eq!(
        admin.forwarded.load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // No file: a cluster member's quotas live in the metadata log.
    assert!(!dir.path().join("weir-client-quotas.json").exists());
    let d = describe(&mut c, &[], false).await;
    assert_eq!(d.error_code, 0);
    assert_eq!(d.entries.unwrap().len(), 1);
    assert!(!b.broker.quotas.is_empty());
    b.shutdown().await.unwrap();
}
