//! Partition replication between `weir serve` processes: followers fetch
//! from their leaders, acks=all waits for the in-sync replicas, and a
//! record acknowledged that way survives kill -9 of its leader.

use weir_compat_tests::cluster::WeirCluster;

use crate::cluster::{
    ALL, FAILOVER, PARTITIONS, READY, RECORDS, agreed, all_led, consume_with_rdkafka, create_topic,
    produce_keyed, start_cluster, wait_new_leaders, wait_until,
};

/// A bootstrap string of the running nodes but `dead`.
fn bootstrap_without(cluster: &WeirCluster, dead: i32) -> String {
    cluster
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| *i as i32 + 1 != dead && n.pid().is_some())
        .map(|(_, n)| n.bootstrap().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn acks_all_records_survive_kill_9_of_their_leader() {
    let (mut cluster, settled) = start_cluster();
    let topic = "durable";
    create_topic(&cluster.bootstrap(), topic, PARTITIONS, 3).expect("CreateTopics RF=3");
    let m = wait_until(&cluster, "every node lists the led topic", READY, || {
        let m = agreed(&cluster, &ALL)?;
        all_led(&m, topic).then_some(m).ok_or("not yet".into())
    });
    // acks=all: each record is acknowledged once all three replicas have it.
    produce_keyed(&cluster.bootstrap(), topic, RECORDS);

    // A broker that leads some of the topic, not the controller (so the
    // metadata quorum keeps its leader and the failover is the broker's).
    let dead = ALL
        .into_iter()
        .find(|&id| id != settled.controller_id && !m.led_by(id).is_empty())
        .expect("a non-controller leading partitions");
    let survivors: Vec<i32> = ALL.into_iter().filter(|&id| id != dead).collect();
    let led = m.led_by(dead);
    cluster.node(dead).kill_hard().expect("kill -9");
    wait_new_leaders(&cluster, &survivors, dead, &led, FAILOVER);

    // Every acknowledged record is on the new leaders, once each.
    let bootstrap = bootstrap_without(&cluster, dead);
    consume_with_rdkafka(&bootstrap, topic, RECORDS);
}
