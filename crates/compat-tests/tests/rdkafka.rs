//! librdkafka (through the `rdkafka` crate, librdkafka built from source)
//! against a real `weir serve`: idempotent producer with `acks=all`,
//! every compression codec, an assign()-based consumer, offsets by time,
//! and the admin client (create/describe/alter/delete).
//!
//! Records per codec: `WEIR_COMPAT_RDKAFKA_RECORDS`, else `DEFAULT_RECORDS`
//! (`SOAK_RECORDS` with `WEIR_SOAK=1`).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::segment::stored_batches;
use weir_compat_tests::{WeirProcess, env_count, partition_for_key, scaled};

const PARTITIONS: i32 = 6;
const DEFAULT_RECORDS: usize = 5_000;
const SOAK_RECORDS: usize = 100_000;
const TIMEOUT: Duration = Duration::from_secs(30);

fn records() -> usize {
    scaled("WEIR_COMPAT_RDKAFKA_RECORDS", DEFAULT_RECORDS, SOAK_RECORDS)
}

fn start_broker() -> WeirProcess {
    WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

fn admin(broker: &WeirProcess) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        // Producer-type handles ask for auto-creation in their metadata
        // requests by default, which would re-create a deleted topic.
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("admin client")
}

fn opts() -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT))
}

async fn create_topic(
    broker: &WeirProcess,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    let admin = admin(broker);
    let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new_topic = new_topic.set(k, v);
    }
    let results = admin
        .create_topics([&new_topic], &opts())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "create_topics request failed: {e}\n{}",
                broker.stderr_tail()
            )
        });
    assert_eq!(results.len(), 1);
    if let Err((name, code)) = &results[0] {
        panic!("creating {name} failed: {code:?}");
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn value_for(i: usize, codec: &str) -> Vec<u8> {
    let mut v = format!("value-{i}-{codec}-").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 20 + i % 200));
    v
}

/// What a consumed record looked like, for comparison.
struct Seen {
    partition: i32,
    offset: i64,
    timestamp: i64,
}

/// `stored_codec`: the compression the `.log` batches must carry, or `None`
/// to skip that check.
async fn round_trip(codec: &str, stored_codec: Option<i16>, n: usize) {
    let broker = start_broker();
    let topic = format!("rdkafka-{codec}");
    create_topic(&broker, &topic, PARTITIONS, &[]).await;

    // --- produce ---
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", codec)
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .create()
        .expect("producer");
    let base_ts = now_ms() - 3_600_000;
    let started = Instant::now();
    let keys: Vec<String> = (0..n).map(|i| format!("key-{i}")).collect();
    let values: Vec<Vec<u8>> = (0..n).map(|i| value_for(i, codec)).collect();
    let idx: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let mut futures = Vec::with_capacity(n);
    for i in 0..n {
        let mut record = FutureRecord::to(&topic)
            .key(&keys[i])
            .payload(&values[i])
            .timestamp(base_ts + i as i64)
            .headers(
                OwnedHeaders::new()
                    .insert(Header {
                        key: "idx",
                        value: Some(&idx[i]),
                    })
                    .insert(Header {
                        key: "codec",
                        value: Some(codec),
                    }),
            );
        loop {
            match producer.send_result(record) {
                Ok(fut) => {
                    futures.push(fut);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Err((e, _)) => panic!("send of record {i} failed: {e}"),
            }
        }
    }
    let mut delivered = Vec::with_capacity(n);
    for (i, fut) in futures.into_iter().enumerate() {
        match fut.await {
            Ok(Ok(d)) => delivered.push((d.partition, d.offset)),
            Ok(Err((e, _))) => panic!(
                "record {i} not delivered: {e}\n--- weir stderr (tail) ---\n{}",
                broker.stderr_tail()
            ),
            Err(_) => panic!("record {i}: delivery future canceled"),
        }
    }
    eprintln!(
        "rdkafka [{codec}]: produced {n} records in {:.1?}",
        started.elapsed()
    );
    for (i, (p, _)) in delivered.iter().enumerate() {
        let want = partition_for_key(keys[i].as_bytes(), PARTITIONS as u32) as i32;
        assert_eq!(
            *p, want,
            "record {i} delivered to partition {p}, murmur2 says {want}"
        );
    }

    // --- consume everything back with assign(), no group ---
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        // librdkafka refuses assign() without a group.id; nothing joins
        // or commits to this group (no subscribe, no commits).
        .set("group.id", "weir-compat-assign")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(&topic, p, Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let started = Instant::now();
    let deadline =
        started + Duration::from_secs(env_count("WEIR_COMPAT_CONSUME_TIMEOUT_SECS", 300) as u64);
    let mut seen: Vec<Option<Seen>> = (0..n).map(|_| None).collect();
    let mut count = 0usize;
    let mut last: HashMap<i32, (i64, usize)> = HashMap::new();
    while count < n {
        assert!(
            Instant::now() < deadline,
            "consumed only {count} of {n} records before the deadline\n--- weir stderr (tail) ---\n{}",
            broker.stderr_tail()
        );
        let Some(msg) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let msg = msg.unwrap_or_else(|e| panic!("consumer error after {count} records: {e}"));
        let key = std::str::from_utf8(msg.key().expect("key")).expect("utf8 key");
        let i: usize = key
            .strip_prefix("key-")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("unexpected key {key:?}"));
        assert!(i < n, "key {key} out of range");
        assert!(seen[i].is_none(), "record {i} delivered twice");
        assert_eq!(
            msg.payload(),
            Some(values[i].as_slice()),
            "value of record {i}"
        );
        let headers = msg.headers().expect("headers");
        let hs: Vec<(String, Option<Vec<u8>>)> = headers
            .iter()
            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
            .collect();
        assert_eq!(
            hs,
            vec![
                ("idx".to_string(), Some(idx[i].clone().into_bytes())),
                ("codec".to_string(), Some(codec.as_bytes().to_vec())),
            ],
            "headers of record {i}"
        );
        let ts = msg.timestamp().to_millis().expect("timestamp");
        assert_eq!(ts, base_ts + i as i64, "timestamp of record {i}");
        let (p, off) = (msg.partition(), msg.offset());
        assert_eq!(
            (p, off),
            delivered[i],
            "record {i}: read at (partition, offset) != delivery report"
        );
        if let Some(&(prev_off, prev_i)) = last.get(&p) {
            assert!(
                off > prev_off,
                "partition {p}: offset {off} after {prev_off}"
            );
            assert!(
                i > prev_i,
                "partition {p}: record {i} after {prev_i} (order broken)"
            );
        }
        last.insert(p, (off, i));
        seen[i] = Some(Seen {
            partition: p,
            offset: off,
            timestamp: ts,
        });
        count += 1;
    }
    eprintln!(
        "rdkafka [{codec}]: consumed {n} records in {:.1?}",
        started.elapsed()
    );

    // --- watermarks and offsets by time ---
    let mut per_part: HashMap<i32, Vec<&Seen>> = HashMap::new();
    for s in seen.iter().flatten() {
        per_part.entry(s.partition).or_default().push(s);
    }
    for p in 0..PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(&topic, p, TIMEOUT)
            .unwrap_or_else(|e| panic!("watermarks of partition {p}: {e}"));
        let count = per_part.get(&p).map_or(0, Vec::len) as i64;
        assert_eq!((low, high), (0, count), "watermarks of partition {p}");
    }
    let query_ts = base_ts + (n / 2) as i64;
    let mut q = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        q.add_partition_offset(&topic, p, Offset::Offset(query_ts))
            .expect("tpl");
    }
    let answer = consumer
        .offsets_for_times(q, TIMEOUT)
        .unwrap_or_else(|e| panic!("offsets_for_times: {e}"));
    for p in 0..PARTITIONS {
        let mut recs: Vec<&Seen> = per_part.get(&p).cloned().unwrap_or_default();
        recs.sort_by_key(|s| s.offset);
        let expected = recs
            .iter()
            .find(|s| s.timestamp >= query_ts)
            .map_or(Offset::End, |s| Offset::Offset(s.offset));
        let got = answer
            .find_partition(&topic, p)
            .unwrap_or_else(|| panic!("partition {p} missing from offsets_for_times answer"));
        assert_eq!(got.error(), Ok(()), "offsets_for_times partition {p}");
        assert_eq!(
            got.offset(),
            expected,
            "offset for timestamp {query_ts} in partition {p}"
        );
    }

    // --- what the broker stored: the client's batches, compressed as sent ---
    let mut stored = 0i64;
    for p in 0..PARTITIONS {
        for b in stored_batches(broker.data_dir(), &topic, p)
            .unwrap_or_else(|e| panic!("reading {topic}-{p}: {e}"))
        {
            if let Some(code) = stored_codec {
                assert_eq!(
                    b.compression, code,
                    "{topic}-{p}: stored batch codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd): {b:?}"
                );
            }
            assert!(
                b.producer_id >= 0,
                "idempotent batch without producer id: {b:?}"
            );
            stored += i64::from(b.record_count);
        }
    }
    assert_eq!(stored, n as i64, "records stored in .log files");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_round_trip_none() {
    round_trip("none", Some(0), records()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_round_trip_gzip() {
    round_trip("gzip", Some(1), records()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_round_trip_snappy() {
    round_trip("snappy", Some(2), records()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_round_trip_lz4() {
    // librdkafka 2.12.1 turns on LZ4 only when the broker advertises
    // FindCoordinator (its LZ4 feature probe); otherwise it sends the batches
    // uncompressed. The strict on-disk check is `rdkafka_lz4_batches_stored_as_lz4`.
    round_trip("lz4", None, records()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_lz4_batches_stored_as_lz4() {
    round_trip("lz4", Some(3), 2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_round_trip_zstd() {
    round_trip("zstd", Some(4), records()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_admin_topic_lifecycle_and_configs() {
    let broker = start_broker();
    let admin = admin(&broker);
    let topic = "rdkafka-admin";
    create_topic(&broker, topic, PARTITIONS, &[("retention.ms", "3600000")]).await;

    // Creating it again is refused with TOPIC_ALREADY_EXISTS.
    let again = admin
        .create_topics(
            [&NewTopic::new(
                topic,
                PARTITIONS,
                TopicReplication::Fixed(1),
            )],
            &opts(),
        )
        .await
        .expect("create_topics request");
    assert_eq!(
        again[0],
        Err((topic.to_string(), RDKafkaErrorCode::TopicAlreadyExists))
    );
    // Replication beyond the single broker is refused.
    let replicated = admin
        .create_topics(
            [&NewTopic::new("rdkafka-rf3", 1, TopicReplication::Fixed(3))],
            &opts(),
        )
        .await
        .expect("create_topics request");
    assert!(
        replicated[0].is_err(),
        "replication factor 3 accepted: {replicated:?}"
    );

    // Metadata shows the partitions.
    let md = admin
        .inner()
        .fetch_metadata(Some(topic), TIMEOUT)
        .expect("metadata");
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .expect("topic in metadata");
    assert_eq!(t.error(), None, "topic error in metadata");
    assert_eq!(t.partitions().len(), PARTITIONS as usize);

    // Describe: the set value is a dynamic topic config; others are defaults.
    let spec = ResourceSpecifier::Topic(topic);
    let described = admin
        .describe_configs([&spec], &opts())
        .await
        .expect("describe");
    let res = described[0].as_ref().expect("describe result");
    let retention = res.get("retention.ms").expect("retention.ms described");
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!(retention.source, ConfigSource::DynamicTopic);
    let cleanup = res.get("cleanup.policy").expect("cleanup.policy described");
    assert_eq!(cleanup.value.as_deref(), Some("delete"));
    assert!(
        cleanup.is_default,
        "cleanup.policy should be a default: {cleanup:?}"
    );
    for name in ["segment.bytes", "max.message.bytes", "min.insync.replicas"] {
        assert!(
            res.get(name).is_some(),
            "{name} missing from DescribeConfigs"
        );
    }

    // Alter (AlterConfigs replaces the dynamic set) and read it back.
    let alter = AlterConfig::new(spec).set("retention.ms", "7200000");
    let altered = admin.alter_configs([&alter], &opts()).await.expect("alter");
    assert!(altered[0].is_ok(), "alter_configs: {altered:?}");
    let described = admin
        .describe_configs([&spec], &opts())
        .await
        .expect("describe");
    let res = described[0].as_ref().expect("describe result");
    assert_eq!(
        res.get("retention.ms").and_then(|e| e.value.as_deref()),
        Some("7200000")
    );

    // Delete: gone from metadata afterwards.
    let deleted = admin
        .delete_topics(&[topic], &opts())
        .await
        .expect("delete");
    assert_eq!(deleted, vec![Ok(topic.to_string())]);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let md = admin
            .inner()
            .fetch_metadata(None, TIMEOUT)
            .unwrap_or_else(|e| panic!("metadata after delete: {e}\n{}", broker.stderr_tail()));
        if md.topics().iter().all(|t| t.name() != topic) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} still in metadata after delete"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records written by a real client survive a clean restart (SIGTERM, start
/// on the same data dir) and are read back by a new client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_data_survives_restart() {
    let mut broker = start_broker();
    let topic = "rdkafka-restart";
    let n = 1000usize;
    create_topic(&broker, topic, 3, &[]).await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    let keys: Vec<String> = (0..n).map(|i| format!("key-{i}")).collect();
    let mut futures = Vec::new();
    for key in &keys {
        let record = FutureRecord::to(topic).key(key).payload(key);
        futures.push(
            producer
                .send_result(record)
                .unwrap_or_else(|(e, _)| panic!("send: {e}")),
        );
    }
    for fut in futures {
        match fut.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => panic!("delivery failed: {e}\n{}", broker.stderr_tail()),
            Err(_) => panic!("delivery future canceled"),
        }
    }
    drop(producer);
    broker
        .restart()
        .unwrap_or_else(|e| panic!("restart failed: {e}"));

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        // librdkafka refuses assign() without a group.id; nothing joins
        // or commits to this group (no subscribe, no commits).
        .set("group.id", "weir-compat-assign")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut per_part = [0i64; 3];
    for key in &keys {
        per_part[partition_for_key(key.as_bytes(), 3) as usize] += 1;
    }
    for (p, want) in per_part.iter().enumerate() {
        let (low, high) = consumer
            .fetch_watermarks(topic, p as i32, TIMEOUT)
            .unwrap_or_else(|e| panic!("watermarks after restart: {e}\n{}", broker.stderr_tail()));
        assert_eq!((low, high), (0, *want), "partition {p} after restart");
    }
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let mut got = vec![false; n];
    let mut count = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while count < n {
        assert!(
            Instant::now() < deadline,
            "read {count} of {n} after restart"
        );
        let Some(msg) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let msg = msg.unwrap_or_else(|e| panic!("consumer error: {e}"));
        let key = std::str::from_utf8(msg.key().expect("key")).expect("utf8");
        assert_eq!(msg.payload(), Some(key.as_bytes()));
        let i: usize = key[4..].parse().expect("index");
        assert!(!got[i], "record {i} twice");
        got[i] = true;
        count += 1;
    }
}
