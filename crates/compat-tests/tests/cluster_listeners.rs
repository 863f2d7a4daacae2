//! A three-node cluster whose nodes serve a SASL_SSL client listener beside
//! the PLAINTEXT one the brokers replicate on. librdkafka bootstraps on node
//! 1's SASL_SSL port only, and must be sent to the other brokers' SASL_SSL
//! ports to reach the leaders of a replicated topic led by all three nodes:
//! every broker registers each of its client listeners, and a client is
//! told the brokers' endpoints of the listener it connected on, as Kafka
//! does. A PLAINTEXT client of the same nodes is told their PLAINTEXT ports.
//!
//! Answering every client with the brokers' PLAINTEXT ports fails this
//! test: librdkafka opens TLS to a PLAINTEXT port of node 2 and 3, its
//! Metadata shows the wrong ports, and the records for their partitions are
//! never delivered.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::cluster::{FAST_FAILOVER, WeirCluster};
use weir_test_support::pki::TestPki;

use crate::cluster::{ALL, READY, agreed, runtime, wait_settled, wait_until};

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_alice=\"alice-secret\";";
const TOPIC: &str = "over-sasl-ssl";
/// Partition i is led by node i + 1: the three replicas in a rotated order.
const ASSIGNMENT: [&[i32]; 3] = [&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]];
const RECORDS: usize = 300;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).expect("write test file");
    path.display().to_string()
}

/// A librdkafka config for the SASL_SSL listener at `bootstrap`.
fn sasl_ssl_client(bootstrap: &str, ca: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", USER)
        .set("sasl.password", PASSWORD)
        .set("ssl.ca.location", ca)
        .set("ssl.endpoint.identification.algorithm", "https");
    config
}

#[test]
fn librdkafka_over_sasl_ssl_is_sent_to_every_brokers_sasl_ssl_port() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let keystore = write(
        dir.path(),
        "broker.pem",
        &pki.server("weir-broker", 1).keystore_pem(),
    );
    let ca = write(dir.path(), "ca.pem", pki.ca_pem());
    let keystore_setting = format!("ssl.keystore.location={keystore}");
    let jaas_setting = format!("listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}");
    let mut settings: Vec<(&str, &str)> = FAST_FAILOVER.to_vec();
    for kv in [&keystore_setting, &jaas_setting] {
        settings.push(kv.split_once('=').expect("name=value"));
    }
    settings.push(("sasl.enabled.mechanisms", "PLAIN"));
    let cluster = WeirCluster::start_with_listeners(
        ALL.len(),
        "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        &settings,
    )
    .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));

    // A PLAINTEXT client (Metadata v7 from the harness) is told every
    // node's PLAINTEXT port: wait_settled waits for exactly those.
    let settled = wait_settled(&cluster, &ALL, READY);
    let sasl_ssl: BTreeMap<i32, String> = ALL
        .iter()
        .map(|&id| {
            let addr = cluster.nodes[(id - 1) as usize]
                .listener_addr("SASL_SSL")
                .unwrap_or_else(|| panic!("node {id} has no SASL_SSL listener in its log"));
            (id, addr.to_string())
        })
        .collect();
    for (id, plain) in &settled.brokers {
        assert_ne!(Some(plain), sasl_ssl.get(id), "node {id}'s two listeners");
    }

    // librdkafka knows only node 1's SASL_SSL port.
    let bootstrap = &sasl_ssl[&1];
    let admin: AdminClient<DefaultClientContext> = sasl_ssl_client(bootstrap, &ca)
        .create()
        .expect("admin client");
    let seen = wait_until(
        &cluster,
        "librdkafka over SASL_SSL lists the three brokers",
        READY,
        || {
            let md = admin
                .inner()
                .fetch_metadata(None, CLIENT_TIMEOUT)
                .map_err(|e| e.to_string())?;
            let brokers: BTreeMap<i32, String> = md
                .brokers()
                .iter()
                .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
                .collect();
            if brokers.len() == ALL.len() {
                Ok(brokers)
            } else {
                Err(format!("{brokers:?}"))
            }
        },
    );
    assert_eq!(
        seen, sasl_ssl,
        "the brokers a SASL_SSL client is told about are at their SASL_SSL ports"
    );

    let topic = NewTopic::new(TOPIC, 3, TopicReplication::Variable(&ASSIGNMENT));
    let opts = AdminOptions::new()
        .operation_timeout(Some(CLIENT_TIMEOUT))
        .request_timeout(Some(CLIENT_TIMEOUT));
    let results = runtime()
        .block_on(admin.create_topics([&topic], &opts))
        .unwrap_or_else(|e| panic!("CreateTopics over SASL_SSL: {e}"));
    if let Err((_, code)) = &results[0] {
        panic!("CreateTopics {TOPIC}: {code:?}");
    }
    wait_until(
        &cluster,
        "every node has a leader on each of 1, 2, 3",
        READY,
        || {
            let m = agreed(&cluster, &ALL)?;
            let leaders: Vec<i32> = m.partitions(TOPIC).iter().map(|p| p.leader).collect();
            let in_sync = m.partitions(TOPIC).iter().all(|p| p.isr.len() == 3);
            if leaders == [1, 2, 3] && in_sync {
                Ok(())
            } else {
                Err(format!("{:?}", m.partitions(TOPIC)))
            }
        },
    );

    // Produce to every partition, so to every node, over SASL_SSL only.
    let producer: FutureProducer = sasl_ssl_client(bootstrap, &ca)
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    let value = |i: usize| format!("value-{i}");
    let partition_of = |i: usize| (i % ASSIGNMENT.len()) as i32;
    runtime().block_on(async {
        let sends: Vec<_> = (0..RECORDS)
            .map(|i| {
                let v = value(i);
                let producer = &producer;
                async move {
                    producer
                        .send(
                            FutureRecord::<(), _>::to(TOPIC)
                                .partition(partition_of(i))
                                .payload(&v),
                            CLIENT_TIMEOUT,
                        )
                        .await
                        .map_err(|(e, _)| format!("record {i}: {e}"))
                }
            })
            .collect();
        for send in sends {
            send.await
                .unwrap_or_else(|e| panic!("produce over SASL_SSL: {e}"));
        }
    });

    // Consume them back from every partition's leader, over SASL_SSL.
    let consumer: BaseConsumer = sasl_ssl_client(bootstrap, &ca)
        .set("group.id", "unused-assign-only")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..ASSIGNMENT.len() as i32 {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .expect("add partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut got: BTreeSet<(i32, String)> = BTreeSet::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while got.len() < RECORDS && Instant::now() < deadline {
        let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let msg = msg.unwrap_or_else(|e| panic!("consume over SASL_SSL: {e}"));
        let v = String::from_utf8_lossy(msg.payload().unwrap_or_default()).into_owned();
        assert!(got.insert((msg.partition(), v.clone())), "{v} twice");
    }
    let want: BTreeSet<(i32, String)> = (0..RECORDS).map(|i| (partition_of(i), value(i))).collect();
    assert_eq!(got.len(), RECORDS, "consumed {} of {RECORDS}", got.len());
    assert_eq!(got, want);
}
