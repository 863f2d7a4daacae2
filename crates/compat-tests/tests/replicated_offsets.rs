//! Committed offsets in a cluster: a commit is acknowledged only once every
//! in-sync replica of its `__consumer_offsets` partition has it, and then
//! survives kill -9 of the group coordinator.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::cluster::{
    ALL, FAILOVER, READY, agreed, all_led, create_topic, start_cluster, wait_until,
};

const GROUP: &str = "replicated-offsets";
const TOPIC: &str = "committed";

/// Kafka's partition of a group: `Utils.abs` of Java's `String.hashCode()`
/// of the group id (`Math.abs`, `Integer.MIN_VALUE` giving 0), modulo the
/// partition count.
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let h = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    (if h == i32::MIN { 0 } else { h.abs() }) % partitions
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("consumer")
}

fn offsets(at: i64) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Offset(at))
        .expect("partition");
    tpl
}

#[test]
fn an_offset_commit_waits_for_the_isr_and_survives_the_coordinator() {
    let (mut cluster, _) = start_cluster();
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, TOPIC, 1, 3).expect("CreateTopics");
    let m = wait_until(&cluster, "the topics are led", READY, || {
        let m = agreed(&cluster, &ALL)?;
        (all_led(&m, TOPIC) && all_led(&m, "__consumer_offsets"))
            .then_some(m)
            .ok_or("not yet".into())
    });
    let offsets_partitions = m.partitions("__consumer_offsets").len() as i32;
    let p = offsets_partition(GROUP, offsets_partitions);
    let coord = m.partitions("__consumer_offsets")[p as usize].clone();
    assert_eq!(coord.isr.len(), 3, "{coord:?}");
    let followers: Vec<i32> = coord
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != coord.leader)
        .collect();

    let c = consumer(&bootstrap);
    c.commit(&offsets(1), CommitMode::Sync)
        .expect("a first commit");

    // Followers stopped: the commit cannot reach the ISR and is not
    // acknowledged.
    for f in &followers {
        assert!(cluster.signal(*f, libc::SIGSTOP));
    }
    let stalled = c.commit(&offsets(7), CommitMode::Sync);
    for f in &followers {
        assert!(cluster.signal(*f, libc::SIGCONT));
    }
    assert!(
        stalled.is_err(),
        "a commit was acknowledged while no follower could have it"
    );

    // Once they are back, a commit is acknowledged, and kept by the next
    // coordinator after kill -9 of this one.
    c.commit(&offsets(42), CommitMode::Sync)
        .expect("a commit with the followers back");
    drop(c);
    cluster.node(coord.leader).kill_hard().expect("kill -9");
    let survivors: Vec<i32> = ALL.into_iter().filter(|id| *id != coord.leader).collect();
    wait_until(&cluster, "a new coordinator", FAILOVER, || {
        let m = agreed(&cluster, &survivors)?;
        let now = &m.partitions("__consumer_offsets")[p as usize];
        (now.leader >= 0 && now.leader != coord.leader)
            .then_some(())
            .ok_or(format!("{now:?}"))
    });
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.pid().is_some())
        .map(|n| n.bootstrap().to_string())
        .collect();
    let c = consumer(&bootstrap.join(","));
    let committed = wait_until(&cluster, "the committed offset", FAILOVER, || {
        c.committed_offsets(offsets(0), Duration::from_secs(10))
            .map_err(|e| e.to_string())
    });
    let at = committed
        .find_partition(TOPIC, 0)
        .map(|e| e.offset())
        .expect("the partition");
    assert_eq!(at, Offset::Offset(42));
}
