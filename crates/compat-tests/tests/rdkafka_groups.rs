//! librdkafka consumer groups against a real `weir serve`: two members of
//! one group share 6 partitions (eager `range` and `cooperative-sticky`
//! assignment), no partition is owned twice, and together they read every
//! record.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use weir_compat_tests::WeirProcess;

const PARTITIONS: i32 = 6;
const RECORDS: usize = 600;
const TIMEOUT: Duration = Duration::from_secs(30);

async fn setup(broker: &WeirProcess, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))],
            &opts,
        )
        .await
        .expect("create topics");
    assert!(r[0].is_ok(), "{r:?}");
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "all")
        .create()
        .expect("producer");
    for i in 0..RECORDS {
        let key = format!("k{i}");
        let value = format!("v{i}");
        producer
            .send(FutureRecord::to(topic).key(&key).payload(&value), TIMEOUT)
            .await
            .expect("produce");
    }
}

fn member(broker: &WeirProcess, group: &str, strategy: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", group)
        .set("partition.assignment.strategy", strategy)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "200")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500")
        .create()
        .expect("consumer")
}

fn owned(c: &BaseConsumer) -> BTreeSet<i32> {
    c.assignment()
        .map(|l| l.elements().iter().map(|e| e.partition()).collect())
        .unwrap_or_default()
}

fn two_members_share_partitions(strategy: &str) {
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let topic = format!("rdkafka-group-{strategy}");
    let group = format!("rdkafka-group-{strategy}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(setup(&broker, &topic));

    let a = member(&broker, &group, strategy);
    let b = member(&broker, &group, strategy);
    a.subscribe(&[&topic]).expect("subscribe");
    b.subscribe(&[&topic]).expect("subscribe");
    let mut seen = HashSet::new();
    let mut balanced = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !(balanced && seen.len() == RECORDS) {
        for c in [&a, &b] {
            if let Some(m) = c.poll(Duration::from_millis(50)) {
                let m = m.expect("consume");
                let v = m.payload().map(|p| p.to_vec()).unwrap_or_default();
                seen.insert(v);
            }
        }
        let (oa, ob) = (owned(&a), owned(&b));
        assert!(
            oa.is_disjoint(&ob),
            "partition owned twice: {oa:?} and {ob:?}"
        );
        balanced = !oa.is_empty() && !ob.is_empty() && oa.len() + ob.len() == PARTITIONS as usize;
    }
    assert!(
        balanced,
        "members never shared all partitions: {:?} / {:?}\n{}",
        owned(&a),
        owned(&b),
        broker.stderr_tail()
    );
    assert_eq!(seen.len(), RECORDS, "records read by the group");
    drop(a);
    drop(b);
}

#[test]
fn rdkafka_group_eager_range() {
    two_members_share_partitions("range");
}

#[test]
fn rdkafka_group_cooperative_sticky() {
    two_members_share_partitions("cooperative-sticky");
}
