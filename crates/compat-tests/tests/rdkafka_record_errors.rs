//! Per-record produce errors and batch size limits as librdkafka (the
//! `rdkafka` crate) sees them on a real `weir serve`:
//!
//! - 100 records in one batch to a compacted topic, 10 without a key: the
//!   broker lists the 10 in `record_errors`, so librdkafka fails exactly
//!   those with INVALID_RECORD and the 90 others with
//!   `_INVALID_DIFFERENT_RECORD`; resent, the 90 are all stored.
//! - CreateTime timestamps older than `message.timestamp.before.max.ms`:
//!   the same split when several records are bad (each INVALID_RECORD,
//!   librdkafka's rule); when one is, librdkafka fails the whole batch with
//!   the partition's INVALID_TIMESTAMP.
//! - A batch larger than `segment.bytes` fails with RECORD_LIST_TOO_LARGE,
//!   one over `max.message.bytes` with MESSAGE_TOO_LARGE.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::WeirProcess;

const TIMEOUT: Duration = Duration::from_secs(30);

fn start_broker() -> WeirProcess {
    WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

async fn create_topic(broker: &WeirProcess, topic: &str, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .expect("admin client");
    let mut new_topic = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new_topic = new_topic.set(k, v);
    }
    let opts = AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT));
    let results = admin
        .create_topics([&new_topic], &opts)
        .await
        .expect("create_topics request");
    if let Some(Err((name, code))) = results.first() {
        panic!("creating {name} failed: {code:?}");
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A producer that puts everything sent within a second in one batch.
fn producer(broker: &WeirProcess) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("linger.ms", "1000")
        .set("batch.num.messages", "10000")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer")
}

/// One record to send: key, value, timestamp.
struct Out {
    key: Option<String>,
    value: String,
    timestamp: i64,
}

/// Sends all of `records` to partition 0 of `topic` at once (one batch)
/// and returns each one's outcome: its offset or librdkafka's error code.
async fn send_all(
    p: &FutureProducer,
    topic: &str,
    records: &[Out],
) -> Vec<Result<i64, RDKafkaErrorCode>> {
    let futures: Vec<_> = records
        .iter()
        .map(|r| {
            let mut rec = FutureRecord::to(topic)
                .partition(0)
                .payload(&r.value)
                .timestamp(r.timestamp);
            if let Some(k) = &r.key {
                rec = rec.key(k);
            }
            p.send_result(rec).expect("queued")
        })
        .collect();
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        out.push(match f.await.expect("delivery report") {
            Ok(delivery) => Ok(delivery.offset),
            Err((KafkaError::MessageProduction(code), _)) => Err(code),
            Err((e, _)) => panic!("unexpected delivery error {e:?}"),
        });
    }
    out
}

/// Every value of partition 0 from the beginning, waiting (with a deadline)
/// until `expected` have been read.
fn consume_values(broker: &WeirProcess, topic: &str, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("partition");
    consumer.assign(&tpl).expect("assign");
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut values = Vec::new();
    while values.len() < expected && std::time::Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("consumed");
            values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    // Anything more than expected would show up here too.
    if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) {
        values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
    }
    values
}

/// The indices whose outcome is the error `code`.
fn failed_with(outcomes: &[Result<i64, RDKafkaErrorCode>], code: RDKafkaErrorCode) -> Vec<usize> {
    outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| **o == Err(code))
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_without_a_key_fail_alone_and_the_others_can_be_resent() {
    let broker = start_broker();
    let topic = "record-errors-compacted";
    create_topic(&broker, topic, &[("cleanup.policy", "compact")]).await;
    let now = now_ms();
    let records: Vec<Out> = (0..100)
        .map(|i| Out {
            key: (i % 10 != 3).then(|| format!("key-{i}")),
            value: format!("value-{i}"),
            timestamp: now,
        })
        .collect();
    let p = producer(&broker);
    let outcomes = send_all(&p, topic, &records).await;
    let keyless: Vec<usize> = (0..100).filter(|i| i % 10 == 3).collect();
    let others: Vec<usize> = (0..100).filter(|i| i % 10 != 3).collect();
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::InvalidRecord),
        keyless,
        "{outcomes:?}"
    );
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::InvalidDifferentRecord),
        others,
        "{outcomes:?}"
    );

    // The application resends the 90 that were not at fault.
    let resend: Vec<Out> = others
        .iter()
        .map(|&i| Out {
            key: records[i].key.clone(),
            value: records[i].value.clone(),
            timestamp: now_ms(),
        })
        .collect();
    let outcomes = send_all(&p, topic, &resend).await;
    let offsets: Vec<i64> = outcomes
        .iter()
        .map(|o| o.unwrap_or_else(|e| panic!("resend failed: {e:?}")))
        .collect();
    assert_eq!(offsets, (0..90).collect::<Vec<i64>>());
    let stored = consume_values(&broker, topic, 90);
    let sent: Vec<String> = resend.iter().map(|r| r.value.clone()).collect();
    assert_eq!(stored, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_with_timestamps_out_of_bounds_fail_alone() {
    let broker = start_broker();
    let topic = "record-errors-timestamps";
    create_topic(
        &broker,
        topic,
        &[
            ("message.timestamp.type", "CreateTime"),
            ("message.timestamp.before.max.ms", "60000"),
        ],
    )
    .await;
    let p = producer(&broker);
    let now = now_ms();
    let old = [4usize, 9, 14];
    let batch = |old: &[usize]| -> Vec<Out> {
        (0..20)
            .map(|i| Out {
                key: Some(format!("key-{i}")),
                value: format!("value-{i}"),
                timestamp: if old.contains(&i) {
                    now - 3_600_000
                } else {
                    now
                },
            })
            .collect()
    };
    // Several bad records: librdkafka gives each INVALID_RECORD.
    let outcomes = send_all(&p, topic, &batch(&old)).await;
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::InvalidRecord),
        old,
        "{outcomes:?}"
    );
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::InvalidDifferentRecord).len(),
        17,
        "{outcomes:?}"
    );
    // A single bad record: librdkafka (2.12) forces the partition's code
    // onto every record of the batch (its delivery path overwrites the
    // per-record codes unless more than one record is named).
    let outcomes = send_all(&p, topic, &batch(&[7])).await;
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::InvalidTimestamp).len(),
        20,
        "{outcomes:?}"
    );
    // Nothing of either batch was stored.
    let fresh = send_all(&p, topic, &batch(&[])).await;
    assert_eq!(fresh.first(), Some(&Ok(0)), "{fresh:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_over_the_segment_size_or_max_message_bytes_are_refused() {
    let broker = start_broker();
    let topic = "record-errors-sizes";
    create_topic(
        &broker,
        topic,
        &[("segment.bytes", "65536"), ("max.message.bytes", "262144")],
    )
    .await;
    let p = producer(&broker);
    let now = now_ms();
    let batch = |n: usize| -> Vec<Out> {
        (0..n)
            .map(|i| Out {
                key: Some(format!("key-{i}")),
                value: format!("{i:0>1000}"),
                timestamp: now,
            })
            .collect()
    };
    // About 100 KB: over the segment size, under max.message.bytes.
    let outcomes = send_all(&p, topic, &batch(100)).await;
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::MessageBatchTooLarge).len(),
        100,
        "{outcomes:?}"
    );
    // About 400 KB: over max.message.bytes as well.
    let outcomes = send_all(&p, topic, &batch(400)).await;
    assert_eq!(
        failed_with(&outcomes, RDKafkaErrorCode::MessageSizeTooLarge).len(),
        400,
        "{outcomes:?}"
    );
    // A batch that fits is stored from offset 0.
    let outcomes = send_all(&p, topic, &batch(10)).await;
    assert_eq!(outcomes.first(), Some(&Ok(0)), "{outcomes:?}");
}
