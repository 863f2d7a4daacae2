//! The parallel consumer against a broker that authenticates every client
//! (an embedded weir broker whose client listener is SASL_PLAINTEXT, or
//! SASL_SSL with a test CA's certificate, with PLAIN): the consumer, the
//! dead-letter producer and the exactly-once producer all get the
//! consumer's `security.protocol`, `sasl.*` and `ssl.*` settings, so a
//! poison record reaches the dead-letter topic and outputs are written in
//! transactions. A producer without them could not connect.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestBroker, runtime, unique, wait_until};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_parallel_consumer::driver::{ExactlyOnceConfig, ParallelConsumer};
use weir_parallel_consumer::exactly_once::OutputRecord;
use weir_parallel_consumer::record::{FailurePolicy, Record};
use weir_parallel_consumer::scheduler::Ordering;
use weir_test_support::pki::TestPki;

const WAIT: Duration = Duration::from_secs(60);

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_pc=\"pc-secret\";";

/// Clients bootstrap on the first listener (SASL_PLAINTEXT, the address
/// every Metadata answer on it names); the PLAINTEXT one is the broker's
/// own inter-broker listener, where it sends its transaction markers
/// (weir's broker-to-broker client does not speak SASL).
fn sasl_broker() -> TestBroker {
    TestBroker::embedded(&[
        (
            "listeners",
            "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        ),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("transaction.state.log.num.partitions", "1"),
    ])
}

/// A broker whose client listener is SASL_SSL (PLAIN over TLS; the
/// server certificate, for 127.0.0.1, is signed by a test CA), with the
/// CA file clients trust.
struct SaslSsl {
    broker: TestBroker,
    ca: String,
    _dir: tempfile::TempDir,
}

fn sasl_ssl_broker() -> SaslSsl {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, pki.server("weir-broker", 1).keystore_pem()).expect("keystore");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pki.ca_pem()).expect("ca");
    let keystore = keystore.display().to_string();
    let broker = TestBroker::embedded(&[
        (
            "listeners",
            "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        ),
        ("ssl.keystore.location", &keystore),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_ssl.plain.sasl.jaas.config", JAAS),
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("transaction.state.log.num.partitions", "1"),
    ]);
    SaslSsl {
        broker,
        ca: ca.display().to_string(),
        _dir: dir,
    }
}

/// A client of the SASL listener (no other settings); over TLS when
/// `tls_ca` names the CA file to trust.
fn authenticated_with(bootstrap: &str, tls_ca: Option<&str>) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", "pc")
        .set("sasl.password", "pc-secret");
    if let Some(ca) = tls_ca {
        c.set("security.protocol", "SASL_SSL")
            .set("ssl.ca.location", ca)
            .set("ssl.endpoint.identification.algorithm", "https");
    }
    c
}

thread_local! {
    /// The CA of the SASL_SSL broker the current test talks to, if any.
    static TLS_CA: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A client of the current test's broker ([`authenticated_with`]).
fn authenticated(bootstrap: &str) -> ClientConfig {
    TLS_CA.with(|ca| authenticated_with(bootstrap, ca.borrow().as_deref()))
}

fn create_topics(rt: &tokio::runtime::Runtime, bootstrap: &str, topics: &[&str]) {
    let admin: AdminClient<DefaultClientContext> =
        authenticated(bootstrap).create().expect("admin client");
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, 1, TopicReplication::Fixed(1)))
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in rt
        .block_on(admin.create_topics(&new, &opts))
        .expect("create_topics")
    {
        r.unwrap_or_else(|(name, code)| panic!("creating {name}: {code:?}"));
    }
}

fn produce(bootstrap: &str, topic: &str, payloads: &[&str]) {
    let producer: BaseProducer = authenticated(bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    for p in payloads {
        producer
            .send(
                BaseRecord::<str, str>::to(topic)
                    .partition(0)
                    .key("k")
                    .payload(p),
            )
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

fn committed(bootstrap: &str, group: &str, topic: &str) -> Option<i64> {
    let consumer: BaseConsumer = authenticated(bootstrap)
        .set("group.id", group)
        .create()
        .expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let list = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .ok()?;
    match list.find_partition(topic, 0)?.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

/// The payloads of partition 0 of `topic` (read_committed), once `n` are
/// there.
fn read(bootstrap: &str, topic: &str, n: usize) -> Vec<String> {
    let reader: BaseConsumer = authenticated(bootstrap)
        .set("group.id", unique("reader"))
        .set("isolation.level", "read_committed")
        .create()
        .expect("reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    reader.assign(&tpl).expect("assign");
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            Instant::now() < deadline,
            "{topic}: {out:?} after {WAIT:?}, expected {n} records"
        );
        if let Some(m) = reader.poll(Duration::from_millis(200)) {
            let m = m.expect("record");
            out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string());
        }
    }
    out
}

/// The consumer's settings: the SASL ones and the group's.
fn consumer_client(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = authenticated(bootstrap);
    c.set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500");
    c
}

#[test]
fn the_dead_letter_producer_authenticates_like_the_consumer() {
    let broker = sasl_broker();
    dead_letter_reaches_its_topic(&broker.bootstrap());
}

/// Over SASL_SSL the dead-letter producer needs the consumer's TLS
/// settings (the CA) as well as its SASL ones.
#[test]
fn the_dead_letter_producer_connects_over_sasl_ssl_like_the_consumer() {
    let tls = sasl_ssl_broker();
    TLS_CA.with(|ca| *ca.borrow_mut() = Some(tls.ca.clone()));
    dead_letter_reaches_its_topic(&tls.broker.bootstrap());
}

fn dead_letter_reaches_its_topic(b: &str) {
    let rt = runtime();
    let (topic, dlt, group) = (unique("sasl-in"), unique("sasl-dead"), unique("sasl-g"));
    create_topics(&rt, b, &[&topic, &dlt]);
    produce(b, &topic, &["ok", "poison", "ok"]);
    let mut cfg = common::config(Ordering::Partition, 1);
    cfg.on_failure = FailurePolicy::DeadLetter { topic: dlt.clone() };
    let pc = ParallelConsumer::start(
        consumer_client(b, &group),
        &[topic.as_str()],
        cfg,
        rt.handle().clone(),
        |r: Record| async move {
            if r.payload.as_deref() == Some(b"poison".as_slice()) {
                Err("cannot parse poison".to_string())
            } else {
                Ok(())
            }
        },
    )
    .expect("start");
    // the poison record is committed past only once it is in the
    // dead-letter topic
    wait_until("3 committed", || committed(b, &group, &topic) == Some(3));
    pc.shutdown_blocking().expect("shutdown");
    assert_eq!(read(b, &dlt, 1), vec!["poison".to_string()]);
}

#[test]
fn the_exactly_once_producer_authenticates_like_the_consumer() {
    let broker = sasl_broker();
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, out, group) = (
        unique("sasl-eos-in"),
        unique("sasl-eos-out"),
        unique("sasl-eg"),
    );
    create_topics(&rt, b, &[&topic, &out]);
    produce(b, &topic, &["a", "b", "c"]);
    let out_topic = out.clone();
    let pc = ParallelConsumer::start_exactly_once(
        consumer_client(b, &group),
        &[topic.as_str()],
        common::config(Ordering::Partition, 1),
        ExactlyOnceConfig::new(unique("sasl-txn")),
        rt.handle().clone(),
        move |r: Record| {
            let out_topic = out_topic.clone();
            async move {
                let mut v = r.payload.as_deref().unwrap_or_default().to_vec();
                v.extend_from_slice(b"!");
                Ok::<_, String>(vec![OutputRecord::to(&out_topic).partition(0).payload(v)])
            }
        },
    )
    .expect("start");
    wait_until("3 committed", || committed(b, &group, &topic) == Some(3));
    pc.shutdown_blocking().expect("shutdown");
    assert_eq!(read(b, &out, 3), vec!["a!", "b!", "c!"]);
}
