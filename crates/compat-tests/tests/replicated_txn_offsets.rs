//! Offsets committed in a transaction survive kill -9 of the group
//! coordinator in a three-node cluster: librdkafka's transactional producer
//! sends a group's offsets to its open transaction (a transactional batch
//! on every in-sync replica of the group's `__consumer_offsets` partition),
//! the coordinator is killed, the next leader of that partition loads the
//! offsets as pending (a consumer without `require_stable` still sees none),
//! and the producer's COMMIT marker, written to that new leader, makes them
//! the group's.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::cluster::{
    ALL, FAILOVER, READY, agreed, all_led, create_topic, start_cluster, wait_until,
};

const SOURCE: &str = "txn-offsets-source";
const OUTPUT: &str = "txn-offsets-output";
const GROUP: &str = "txn-offsets-failover";
const OFFSET: i64 = 17;
const TIMEOUT: Duration = Duration::from_secs(60);

/// Kafka's partition of a group or transactional id:
/// `Utils.abs(id.hashCode())` modulo the partition count
/// (`Utils.abs(Integer.MIN_VALUE)` is 0).
fn partition_of(id: &str, partitions: usize) -> usize {
    let h = id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    (if h == i32::MIN { 0 } else { h.abs() }) as usize % partitions
}

fn producer(bootstrap: &str, transactional_id: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", transactional_id)
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("transactional producer")
}

fn consumer(bootstrap: &str, isolation: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("consumer")
}

fn source_partition(at: Offset) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(SOURCE, 0, at).expect("partition");
    tpl
}

/// The group's committed offset of the source partition, as `c` fetches it.
fn committed(c: &BaseConsumer) -> Result<Offset, String> {
    c.committed_offsets(source_partition(Offset::Invalid), Duration::from_secs(10))
        .map_err(|e| e.to_string())?
        .find_partition(SOURCE, 0)
        .map(|e| e.offset())
        .ok_or_else(|| "no such partition in the answer".to_string())
}

#[test]
fn transactional_offsets_survive_kill_9_of_the_group_coordinator() {
    let (mut cluster, _) = start_cluster();
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, SOURCE, 1, 3).expect("CreateTopics");
    create_topic(&bootstrap, OUTPUT, 1, 3).expect("CreateTopics");
    // FindCoordinator creates __transaction_state through the controller.
    let first = producer(&bootstrap, "txn-offsets-probe");
    first.init_transactions(READY).expect("init_transactions");
    drop(first);
    let m = wait_until(&cluster, "the topics are led", READY, || {
        let m = agreed(&cluster, &ALL)?;
        [SOURCE, OUTPUT, "__consumer_offsets", "__transaction_state"]
            .iter()
            .all(|t| all_led(&m, t))
            .then_some(m)
            .ok_or("not yet".into())
    });
    let offsets = m.partitions("__consumer_offsets");
    let group_partition = partition_of(GROUP, offsets.len());
    let coordinator = offsets[group_partition].clone();
    assert_eq!(coordinator.isr.len(), 3, "{coordinator:?}");
    // A transaction coordinator on another node, so that only the group
    // coordinator fails over.
    let state = m.partitions("__transaction_state");
    let transactional_id = (0..1000)
        .map(|n| format!("txn-offsets-{n}"))
        .find(|id| state[partition_of(id, state.len())].leader != coordinator.leader)
        .expect("a transactional id coordinated elsewhere");

    let p = producer(&bootstrap, &transactional_id);
    p.init_transactions(READY).expect("init_transactions");
    let group = consumer(&bootstrap, "read_committed");
    p.begin_transaction().expect("begin_transaction");
    p.send(BaseRecord::<(), str>::to(OUTPUT).payload("processed"))
        .map_err(|(e, _)| e)
        .expect("enqueue");
    let meta = group.group_metadata().expect("group metadata");
    p.send_offsets_to_transaction(&source_partition(Offset::Offset(OFFSET)), &meta, TIMEOUT)
        .expect("send_offsets_to_transaction");
    drop(group);

    // The group coordinator dies with the offsets pending.
    cluster
        .node(coordinator.leader)
        .kill_hard()
        .expect("kill -9");
    let survivors: Vec<i32> = ALL
        .into_iter()
        .filter(|id| *id != coordinator.leader)
        .collect();
    wait_until(&cluster, "a new group coordinator", FAILOVER, || {
        let m = agreed(&cluster, &survivors)?;
        let now = &m.partitions("__consumer_offsets")[group_partition];
        (now.leader >= 0 && now.leader != coordinator.leader)
            .then_some(())
            .ok_or(format!("{now:?}"))
    });
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.pid().is_some())
        .map(|n| n.bootstrap().to_string())
        .collect();
    let bootstrap = bootstrap.join(",");
    // The new coordinator loaded the offsets as pending: without
    // require_stable (read_uncommitted) the group has no offset yet.
    let plain = consumer(&bootstrap, "read_uncommitted");
    let before = wait_until(&cluster, "the new coordinator answers", FAILOVER, || {
        committed(&plain)
    });
    assert_eq!(before, Offset::Invalid, "visible before the COMMIT");

    p.commit_transaction(TIMEOUT)
        .expect("commit_transaction with the group coordinator moved");
    let stable = consumer(&bootstrap, "read_committed");
    let after = wait_until(
        &cluster,
        "the committed offset",
        FAILOVER,
        || match committed(&stable)? {
            Offset::Offset(o) => Ok(o),
            other => Err(format!("{other:?}")),
        },
    );
    assert_eq!(after, OFFSET);
    assert_eq!(committed(&plain), Ok(Offset::Offset(OFFSET)));
}
