//! Transactions in a cluster: the transaction coordinator's state is
//! written to every in-sync replica of its `__transaction_state` partition
//! before it takes effect, so a transaction survives kill -9 of its
//! coordinator: the next leader of that partition replays it, takes the
//! producer's EndTxn and writes the markers to the partition leaders (some
//! of which moved too). librdkafka's transactional producer and
//! read_committed consumer.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::cluster::{
    ALL, FAILOVER, READY, agreed, all_led, create_topic, start_cluster, wait_until,
};

const TOPIC: &str = "txn-failover";
const TRANSACTIONAL_ID: &str = "failover-tx";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 30;

/// Kafka's partition of a transactional id: `Utils.abs(id.hashCode())`
/// modulo the partition count (`Utils.abs(Integer.MIN_VALUE)` is 0).
pub(crate) fn transaction_partition(id: &str, partitions: i32) -> i32 {
    let h = id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    (if h == i32::MIN { 0 } else { h.abs() }) % partitions
}

fn producer(bootstrap: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", TRANSACTIONAL_ID)
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("transactional producer")
}

/// Every record of `TOPIC` a consumer at `isolation` reads up to its end.
fn read_all(bootstrap: &str, isolation: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "txn-failover-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .expect("partition");
    }
    c.assign(&tpl).expect("assign");
    let mut values = Vec::new();
    let mut at_end = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while at_end < PARTITIONS {
        assert!(
            std::time::Instant::now() < deadline,
            "{isolation}: not read to the end within 60 s ({} records)",
            values.len()
        );
        match c.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => at_end += 1,
            Some(Err(e)) => panic!("{isolation} consumer: {e}"),
            None => {}
        }
    }
    values.sort();
    values
}

#[test]
fn a_transaction_survives_kill_9_of_its_coordinator() {
    let (mut cluster, _) = start_cluster();
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, TOPIC, PARTITIONS, 3).expect("CreateTopics");
    let p = producer(&bootstrap);
    // FindCoordinator creates __transaction_state (RF 3) through the
    // controller; the client retries until its partitions are led.
    p.init_transactions(READY).expect("init_transactions");
    let m = wait_until(&cluster, "the topics are led", READY, || {
        let m = agreed(&cluster, &ALL)?;
        (all_led(&m, TOPIC) && all_led(&m, "__transaction_state"))
            .then_some(m)
            .ok_or("not yet".into())
    });
    let state = m.partitions("__transaction_state");
    let txn_partition = transaction_partition(TRANSACTIONAL_ID, state.len() as i32);
    let coordinator = state[txn_partition as usize].clone();
    assert_eq!(coordinator.isr.len(), 3, "{coordinator:?}");

    p.begin_transaction().expect("begin_transaction");
    for i in 0..RECORDS {
        let (key, value) = (format!("k{i}"), format!("v{i:03}"));
        p.send(BaseRecord::to(TOPIC).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .expect("enqueue");
    }
    p.flush(Duration::from_secs(30)).expect("flush");

    // The coordinator dies with the transaction open (its Ongoing record
    // is on every replica of its partition).
    cluster
        .node(coordinator.leader)
        .kill_hard()
        .expect("kill -9");
    let survivors: Vec<i32> = ALL
        .into_iter()
        .filter(|id| *id != coordinator.leader)
        .collect();
    wait_until(&cluster, "a new coordinator", FAILOVER, || {
        let m = agreed(&cluster, &survivors)?;
        let now = &m.partitions("__transaction_state")[txn_partition as usize];
        (now.leader >= 0 && now.leader != coordinator.leader)
            .then_some(())
            .ok_or(format!("{now:?}"))
    });
    p.commit_transaction(Duration::from_secs(60))
        .expect("commit_transaction through the new coordinator");

    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.pid().is_some())
        .map(|n| n.bootstrap().to_string())
        .collect();
    let bootstrap = bootstrap.join(",");
    let want: Vec<String> = (0..RECORDS).map(|i| format!("v{i:03}")).collect();
    assert_eq!(read_all(&bootstrap, "read_committed"), want);
    assert_eq!(read_all(&bootstrap, "read_uncommitted"), want);
}
