//! Partition reassignment between `weir serve` processes: a topic whose
//! every partition lives only on broker X (RF=1) is moved with
//! `weir topics reassign` to the two other brokers; once Metadata shows the
//! new replicas, all in sync, X is killed with SIGKILL and every record is
//! read back from the new leaders (librdkafka). Its data reached them only
//! by replication, so the move itself is what this checks.

use std::process::Command;
use std::time::Duration;

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use weir_compat_tests::cluster::WeirCluster;
use weir_compat_tests::{CommandOutput, run_with_timeout, weir_binary};

use crate::cluster::{
    ALL, FAILOVER, PARTITIONS, RECORDS, admin, agreed, all_led, consume_with_rdkafka,
    produce_keyed, runtime, start_cluster, wait_until,
};

/// How long a move may take: the new replicas fetch a few hundred records
/// and join the ISR, and the completion reaches every node.
const MOVE: Duration = Duration::from_secs(60);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `weir topics <args>` against `bootstrap`.
fn weir_topics(bootstrap: &str, args: &[&str]) -> CommandOutput {
    let bin = weir_binary().unwrap_or_else(|e| panic!("{e}"));
    let out = run_with_timeout(
        Command::new(bin)
            .args(["topics", "--bootstrap-server", bootstrap])
            .args(args),
        None,
        CLIENT_TIMEOUT,
    )
    .expect("weir topics spawns");
    assert!(
        out.success(),
        "weir topics {args:?}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        out.stdout,
        out.stderr
    );
    out
}

/// A bootstrap string of the running nodes but `dead`.
fn bootstrap_without(cluster: &WeirCluster, dead: i32) -> String {
    (1..)
        .zip(&cluster.nodes)
        .filter(|(id, n)| *id != dead && n.pid().is_some())
        .map(|(_, n)| n.bootstrap().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_topic_moved_off_a_broker_survives_its_kill_9() {
    let (mut cluster, settled) = start_cluster();
    let topic = "moved";
    // X: a broker that is not the active controller, so that its kill is a
    // broker failure and not also a controller failover.
    let x = ALL
        .into_iter()
        .find(|&id| id != settled.controller_id)
        .expect("a broker besides the controller");
    let targets: Vec<i32> = ALL.into_iter().filter(|&id| id != x).collect();

    let on_x = [x];
    let assignment: Vec<&[i32]> = (0..PARTITIONS).map(|_| &on_x[..]).collect();
    let new_topic = NewTopic::new(topic, PARTITIONS, TopicReplication::Variable(&assignment));
    let opts = AdminOptions::new()
        .operation_timeout(Some(CLIENT_TIMEOUT))
        .request_timeout(Some(CLIENT_TIMEOUT));
    let results = runtime()
        .block_on(admin(&cluster.bootstrap()).create_topics([&new_topic], &opts))
        .expect("CreateTopics");
    assert!(results[0].is_ok(), "CreateTopics on [{x}]: {results:?}");
    wait_until(
        &cluster,
        "every node lists the topic on X",
        FAILOVER,
        || {
            let m = agreed(&cluster, &ALL)?;
            let on_x = m.partitions(topic).iter().all(|p| p.replicas == [x]);
            (all_led(&m, topic) && on_x)
                .then_some(())
                .ok_or(format!("{:?}", m.partitions(topic)))
        },
    );
    produce_keyed(&cluster.bootstrap(), topic, RECORDS);

    // Move every partition to the two other brokers.
    let replicas = format!("{},{}", targets[0], targets[1]);
    for p in 0..PARTITIONS {
        let out = weir_topics(
            &cluster.bootstrap(),
            &[
                "reassign",
                "--topic",
                topic,
                "--partition",
                &p.to_string(),
                "--replicas",
                &replicas,
            ],
        );
        assert!(out.stdout.contains("started"), "{}", out.stdout);
    }
    let want: Vec<i32> = targets.clone();
    wait_until(
        &cluster,
        &format!("every partition on {want:?}, all in sync"),
        MOVE,
        || {
            let m = agreed(&cluster, &ALL)?;
            let ps = m.partitions(topic);
            let moved = ps.len() == PARTITIONS as usize
                && ps.iter().all(|p| {
                    let mut isr = p.isr.clone();
                    isr.sort_unstable();
                    p.replicas == want && isr == want && want.contains(&p.leader)
                });
            moved.then_some(()).ok_or(format!("{ps:?}"))
        },
    );
    // Nothing left in progress, and describe shows no moving replicas.
    let out = weir_topics(&cluster.bootstrap(), &["reassignments"]);
    assert_eq!(out.stdout.trim(), "", "{}", out.stdout);
    let out = weir_topics(&cluster.bootstrap(), &["describe", "--topic", topic]);
    assert!(!out.stdout.contains("Adding Replicas"), "{}", out.stdout);

    // X goes away for good: its former data is on the new replicas only.
    cluster.node(x).kill_hard().expect("kill -9");
    // Once its session expired, clients no longer see X (librdkafka
    // reports a broker it cannot reach as a consume error).
    let survivors = targets.clone();
    wait_until(&cluster, "the survivors no longer list X", FAILOVER, || {
        let m = agreed(&cluster, &survivors)?;
        (!m.brokers.contains_key(&x) && all_led(&m, topic))
            .then_some(())
            .ok_or(format!("{m:?}"))
    });
    consume_with_rdkafka(&bootstrap_without(&cluster, x), topic, RECORDS);
}
