//! Partition replication between `weir serve` processes, as clients see
//! it: followers fetch from their leaders, acks=all waits for the in-sync
//! replicas, a follower that stops fetching leaves the ISR after
//! `replica.lag.time.max.ms` and comes back once caught up, the high
//! watermark waits for every ISR member, `min.insync.replicas` refuses
//! acks=all writes, a returning leader drops the suffix its successor never
//! had, and records acknowledged with acks=all survive kill -9 of their
//! leader (librdkafka, kafka-python, kafkajs).
//!
//! Most tests use a single-partition topic with its replicas assigned as
//! `[leader, follower, controller]` ([`Roles`]): the leader and the
//! follower that is stopped or killed are not the active controller, so
//! the metadata quorum keeps its leader and each failover is the
//! partition's own.
//!
//! The SIGSTOP tests give brokers a session timeout well above
//! `replica.lag.time.max.ms` and check that the stopped broker is still
//! registered when its ISR shrinks: the shrink came from the leader
//! (AlterPartition), not from the controller fencing the broker.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::cluster::{ClusterMetadata, FAST_FAILOVER, PartitionMetadata, WeirCluster};
use weir_compat_tests::segment::stored_batches;
use weir_compat_tests::{skip_or_fail, tools};

use crate::cluster::{
    ALL, FAILOVER, PARTITIONS, READY, RECORDS, admin, agreed, all_led, consume_with_rdkafka,
    create_topic, produce_keyed, runtime, start_cluster, wait_new_leaders, wait_settled,
    wait_until,
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

// --- the cluster, the topic and its roles ----------------------------------

/// Settings of the SIGSTOP tests: a follower that stops fetching leaves
/// the ISR after 2 s, while a broker that stops heartbeating is fenced
/// only after 10 s, so the ISR change is the leader's.
const LAGGING: &[(&str, &str)] = &[
    ("broker.heartbeat.interval.ms", "200"),
    ("broker.session.timeout.ms", "10000"),
    ("replica.lag.time.max.ms", "2000"),
];

/// How long an ISR change may take to show: the lag, a shrink-loop period,
/// the AlterPartition round trip and the metadata reaching every node,
/// with room for a loaded machine.
const ISR_CHANGE: Duration = Duration::from_secs(30);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The nodes of a test's single-partition topic, replicas assigned in this
/// order: `leader` leads it, `follower` is the replica the test stops or
/// kills, `controller` is the active controller (the third replica, when
/// there is one).
#[derive(Debug, Clone, Copy)]
struct Roles {
    leader: i32,
    follower: i32,
    controller: i32,
}

impl Roles {
    fn of(settled: &ClusterMetadata) -> Self {
        let controller = settled.controller_id;
        let others: Vec<i32> = ALL.into_iter().filter(|&id| id != controller).collect();
        Roles {
            leader: others[0],
            follower: others[1],
            controller,
        }
    }

    fn replicas(self) -> [i32; 3] {
        [self.leader, self.follower, self.controller]
    }
}

fn start(settings: &[(&str, &str)]) -> (WeirCluster, Roles) {
    let cluster = WeirCluster::start(ALL.len(), settings)
        .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    let settled = wait_settled(&cluster, &ALL, READY);
    (cluster, Roles::of(&settled))
}

/// Creates `name` with one partition on `replicas` (the first leads) and
/// the topic `configs`.
pub(crate) fn create_assigned(
    bootstrap: &str,
    name: &str,
    replicas: &[i32],
    configs: &[(&str, &str)],
) {
    let assignment: &[&[i32]] = &[replicas];
    let mut topic = NewTopic::new(name, 1, TopicReplication::Variable(assignment));
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let opts = AdminOptions::new()
        .operation_timeout(Some(CLIENT_TIMEOUT))
        .request_timeout(Some(CLIENT_TIMEOUT));
    let results = runtime()
        .block_on(admin(bootstrap).create_topics([&topic], &opts))
        .unwrap_or_else(|e| panic!("CreateTopics {name}: the request failed: {e}"));
    if let Err((_, code)) = &results[0] {
        panic!("CreateTopics {name} on {replicas:?}: {code:?}");
    }
}

/// Partition 0 of `topic` as the nodes `ids` agree on it, once `want`
/// holds of it.
fn wait_partition(
    cluster: &WeirCluster,
    ids: &[i32],
    topic: &str,
    what: &str,
    limit: Duration,
    want: impl Fn(&ClusterMetadata, &PartitionMetadata) -> bool,
) -> (ClusterMetadata, PartitionMetadata) {
    wait_until(cluster, &format!("{topic}-0: {what}"), limit, || {
        let m = agreed(cluster, ids)?;
        let p = m
            .partitions(topic)
            .first()
            .cloned()
            .ok_or(format!("{topic} not listed"))?;
        if want(&m, &p) {
            Ok((m, p))
        } else {
            Err(format!("{p:?}"))
        }
    })
}

fn isr_of(p: &PartitionMetadata) -> BTreeSet<i32> {
    p.isr.iter().copied().collect()
}

fn set(ids: &[i32]) -> BTreeSet<i32> {
    ids.iter().copied().collect()
}

/// Waits until `ids` agree that `leader` leads `topic`-0 with the ISR
/// `isr`.
fn wait_isr(
    cluster: &WeirCluster,
    ids: &[i32],
    topic: &str,
    leader: i32,
    isr: &[i32],
    limit: Duration,
) -> (ClusterMetadata, PartitionMetadata) {
    let want = set(isr);
    wait_partition(
        cluster,
        ids,
        topic,
        &format!("leader {leader}, ISR {want:?}"),
        limit,
        |_, p| p.leader == leader && isr_of(p) == want,
    )
}

// --- clients ---------------------------------------------------------------

/// A librdkafka producer with `acks` and `extra` settings on top.
fn producer(bootstrap: &str, acks: &str, extra: &[(&str, &str)]) -> FutureProducer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c.create().expect("producer")
}

/// Sends `values` to partition 0 of `topic`, all queued at once, and
/// returns each one's offset or error, in order.
fn send(producer: &FutureProducer, topic: &str, values: &[String]) -> Vec<Result<i64, KafkaError>> {
    runtime().block_on(async {
        let deliveries: Vec<_> = values
            .iter()
            .map(|v| {
                producer
                    .send_result(FutureRecord::<(), _>::to(topic).partition(0).payload(v))
                    .map_err(|(e, _)| e)
            })
            .collect();
        let mut out = Vec::with_capacity(values.len());
        for d in deliveries {
            out.push(match d {
                Ok(f) => match f.await {
                    Ok(Ok(delivery)) => Ok(delivery.offset),
                    Ok(Err((e, _))) => Err(e),
                    Err(_) => Err(KafkaError::Canceled),
                },
                Err(e) => Err(e),
            });
        }
        out
    })
}

/// Sends `values` and fails on any error; the offset of each value.
fn send_ok(producer: &FutureProducer, topic: &str, values: &[String]) -> BTreeMap<i64, String> {
    values
        .iter()
        .zip(send(producer, topic, values))
        .map(|(v, r)| {
            let offset = r.unwrap_or_else(|e| panic!("produce {v} to {topic}: {e}"));
            (offset, v.clone())
        })
        .collect()
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A read_uncommitted consumer that only assigns partitions.
fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "unused-assign-only")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_uncommitted")
        .create()
        .expect("consumer")
}

/// `(low, high)` watermarks of `topic`-0 (ListOffsets to its leader).
fn watermarks(c: &BaseConsumer, topic: &str) -> (i64, i64) {
    c.fetch_watermarks(topic, 0, CLIENT_TIMEOUT)
        .unwrap_or_else(|e| panic!("watermarks of {topic}-0: {e}"))
}

/// Every record of `topic`-0 below its high watermark, by offset, once
/// the high watermark reached `end` (a new leader learns it from its
/// followers' fetches).
fn read_all(bootstrap: &str, topic: &str, end: i64) -> BTreeMap<i64, String> {
    let c = consumer(bootstrap);
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let (low, high) = loop {
        let (low, high) = watermarks(&c, topic);
        if high >= end {
            break (low, high);
        }
        assert!(
            Instant::now() < deadline,
            "{topic}-0: the high watermark is {high}, not {end}, after {CLIENT_TIMEOUT:?}"
        );
        thread::sleep(Duration::from_millis(50));
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(low))
        .expect("add partition");
    c.assign(&tpl).expect("assign");
    let mut out = BTreeMap::new();
    let mut next = low;
    while next < high {
        assert!(
            Instant::now() < deadline,
            "{topic}-0: read up to {next} of [{low}, {high}) within {CLIENT_TIMEOUT:?}"
        );
        let Some(msg) = c.poll(Duration::from_millis(200)) else {
            continue;
        };
        let msg = msg.unwrap_or_else(|e| panic!("consume {topic}-0: {e}"));
        let v = String::from_utf8_lossy(msg.payload().unwrap_or_default()).into_owned();
        assert!(
            out.insert(msg.offset(), v).is_none(),
            "offset {} delivered twice",
            msg.offset()
        );
        next = msg.offset() + 1;
    }
    out
}

/// The offset after the last of `records`.
fn end_of(records: &BTreeMap<i64, String>) -> i64 {
    records.keys().next_back().map_or(0, |o| o + 1)
}

/// Checks that each `(offset, value)` of `acked` is in `log` at its offset.
fn assert_acked_in(log: &BTreeMap<i64, String>, acked: &BTreeMap<i64, String>, whose: &str) {
    let missing: Vec<String> = acked
        .iter()
        .filter(|(o, v)| log.get(o) != Some(v))
        .map(|(o, v)| format!("{v}@{o} (found {:?})", log.get(o)))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged records are not at their offsets in {whose}: {missing:?}",
        missing.len(),
        acked.len()
    );
}

// --- the ISR ----------------------------------------------------------------

/// A follower stopped with SIGSTOP leaves the ISR after
/// `replica.lag.time.max.ms` (2 s), while still registered; acks=all
/// writes go on with the two others (`min.insync.replicas=2`); after
/// SIGCONT it catches up and rejoins the ISR; then the leader is killed
/// and the returned follower, now the leader, serves every acknowledged
/// record at its offset.
#[test]
fn a_stopped_follower_leaves_the_isr_and_rejoins_it_with_every_record() {
    let (mut cluster, r) = start(LAGGING);
    let topic = "isr";
    create_assigned(
        &cluster.bootstrap(),
        topic,
        &r.replicas(),
        &[("min.insync.replicas", "2")],
    );
    wait_isr(&cluster, &ALL, topic, r.leader, &ALL, READY);
    let all = producer(
        &cluster.bootstrap(),
        "all",
        &[("enable.idempotence", "true")],
    );
    let mut acked = send_ok(&all, topic, &values("before", 100));

    assert!(cluster.signal(r.follower, libc::SIGSTOP), "SIGSTOP");
    let live = [r.leader, r.controller];
    let (m, _) = wait_isr(&cluster, &live, topic, r.leader, &live, ISR_CHANGE);
    assert!(
        m.brokers.contains_key(&r.follower),
        "node {} was fenced before its ISR shrank: the shrink is not the leader's; brokers {:?}, {topic}: {:?}",
        r.follower,
        m.brokers,
        m.partitions(topic)
    );
    acked.extend(send_ok(&all, topic, &values("during", 100)));

    assert!(cluster.signal(r.follower, libc::SIGCONT), "SIGCONT");
    wait_isr(&cluster, &ALL, topic, r.leader, &ALL, ISR_CHANGE);

    // The follower is back in the ISR, so it has every acknowledged
    // record: kill the leader, and it (first of the ISR in replica order)
    // leads.
    cluster.node(r.leader).kill_hard().expect("kill -9");
    let survivors = [r.follower, r.controller];
    wait_partition(
        &cluster,
        &survivors,
        topic,
        &format!("node {} leads after node {} died", r.follower, r.leader),
        FAILOVER,
        |_, p| p.leader == r.follower,
    );
    let log = read_all(
        &bootstrap_without(&cluster, r.leader),
        topic,
        end_of(&acked),
    );
    assert_acked_in(&log, &acked, &format!("node {}'s log", r.follower));
    assert_eq!(log.len(), acked.len(), "records beyond those acknowledged");
}

/// With `min.insync.replicas=3`, an acks=all write is refused with
/// NOT_ENOUGH_REPLICAS once a stopped follower left the ISR, and not
/// written; acks=1 still works; once the follower is back, acks=all works
/// again.
#[test]
fn acks_all_is_refused_with_not_enough_replicas_while_the_isr_is_short() {
    let (mut cluster, r) = start(LAGGING);
    let topic = "min-isr-3";
    create_assigned(
        &cluster.bootstrap(),
        topic,
        &r.replicas(),
        &[("min.insync.replicas", "3")],
    );
    wait_isr(&cluster, &ALL, topic, r.leader, &ALL, READY);
    // No retries, no idempotence: the broker's error is the answer.
    let all = producer(
        &cluster.bootstrap(),
        "all",
        &[
            ("enable.idempotence", "false"),
            ("message.send.max.retries", "0"),
        ],
    );
    send_ok(&all, topic, &values("full", 1));

    assert!(cluster.signal(r.follower, libc::SIGSTOP), "SIGSTOP");
    let live = [r.leader, r.controller];
    wait_isr(&cluster, &live, topic, r.leader, &live, ISR_CHANGE);
    // Bootstrapped from the running nodes only: a stopped one accepts
    // connections and never answers.
    let one = producer(&bootstrap_without(&cluster, r.follower), "1", &[]);
    let refused = send(&all, topic, &values("refused", 1));
    assert!(
        matches!(
            refused[0],
            Err(KafkaError::MessageProduction(
                RDKafkaErrorCode::NotEnoughReplicas
            ))
        ),
        "acks=all with ISR {live:?} of min.insync.replicas=3: {refused:?}"
    );
    let leader_only = send_ok(&one, topic, &values("acks-1", 1));

    assert!(cluster.signal(r.follower, libc::SIGCONT), "SIGCONT");
    wait_isr(&cluster, &ALL, topic, r.leader, &ALL, ISR_CHANGE);
    let again = send_ok(&all, topic, &values("again", 1));
    // The refused record took no offset.
    assert_eq!(
        leader_only.keys().chain(again.keys()).collect::<Vec<_>>(),
        [&1, &2],
        "offsets of the acks=1 and the later acks=all record"
    );
    let log = read_all(&cluster.bootstrap(), topic, 3);
    assert_eq!(
        log.values().collect::<Vec<_>>(),
        ["full-0", "acks-1-0", "again-0"],
        "the log of {topic}-0"
    );
}

/// The high watermark is the smallest log end offset of the ISR: records
/// written with acks=1 while a follower is stopped stay invisible to a
/// read_uncommitted consumer (ListOffsets and Fetch) although the other
/// follower has them, until the stopped one leaves the ISR.
#[test]
fn a_stopped_follower_holds_the_high_watermark_until_it_leaves_the_isr() {
    // The shrink cannot come before the lag since the follower's last
    // fetch; a longer lag gives a wide window to look in.
    const LAG: Duration = Duration::from_secs(8);
    // The follower's last fetch may have reached the leader up to
    // replica.fetch.wait.max.ms (a parked fetch) before SIGSTOP, and some.
    const FETCH_WAIT: Duration = Duration::from_millis(1_000);
    let (mut cluster, r) = start(&[
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "20000"),
        ("replica.lag.time.max.ms", "8000"),
        ("replica.fetch.wait.max.ms", "500"),
    ]);
    let topic = "hw";
    create_assigned(&cluster.bootstrap(), topic, &r.replicas(), &[]);
    wait_isr(&cluster, &ALL, topic, r.leader, &ALL, READY);
    let all = producer(
        &cluster.bootstrap(),
        "all",
        &[("enable.idempotence", "true")],
    );
    send_ok(&all, topic, &values("replicated", 10));
    let c = consumer(&cluster.bootstrap());
    assert_eq!(watermarks(&c, topic), (0, 10), "after 10 acks=all records");

    let stopped = Instant::now();
    assert!(cluster.signal(r.follower, libc::SIGSTOP), "SIGSTOP");
    let one = producer(&bootstrap_without(&cluster, r.follower), "1", &[]);
    let held = send_ok(&one, topic, &values("held", 10));
    assert_eq!(
        held.keys().copied().collect::<Vec<_>>(),
        (10..20).collect::<Vec<_>>()
    );
    // The other follower has them.
    let other = cluster.node(r.controller).data_dir().to_path_buf();
    wait_until(
        &cluster,
        "the running follower has offsets 10..20",
        ISR_CHANGE,
        || {
            let end = stored_batches(&other, topic, 0)
                .map_err(|e| e.to_string())?
                .iter()
                .map(|b| b.base_offset + i64::from(b.last_offset_delta) + 1)
                .max()
                .unwrap_or(0);
            (end >= 20)
                .then_some(())
                .ok_or(format!("its log ends at {end}"))
        },
    );

    // Until the shrink can happen, neither ListOffsets nor a consumer
    // sees past offset 10.
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(10))
        .expect("add partition");
    c.assign(&tpl).expect("assign");
    // A sample counts when all of it was seen before the window ended.
    let window_end = stopped + LAG - FETCH_WAIT;
    let mut samples = 0;
    loop {
        let isr = cluster
            .metadata_from(r.leader)
            .expect("Metadata")
            .partitions(topic)
            .first()
            .map(isr_of);
        let marks = watermarks(&c, topic);
        let read = c.poll(Duration::from_millis(100));
        let at = stopped.elapsed();
        if Instant::now() >= window_end {
            break;
        }
        assert_eq!(
            isr,
            Some(set(&ALL)),
            "the ISR shrank before replica.lag.time.max.ms ({at:?} after SIGSTOP)"
        );
        assert_eq!(
            marks,
            (0, 10),
            "the high watermark passed the stopped follower {at:?} after SIGSTOP"
        );
        if let Some(msg) = read {
            let msg = msg.expect("consume");
            panic!(
                "a consumer read offset {} above the high watermark {at:?} after SIGSTOP",
                msg.offset()
            );
        }
        samples += 1;
    }
    assert!(
        samples > 0,
        "no time left to look before the ISR may shrink: the running follower had the records {:?} after SIGSTOP",
        stopped.elapsed()
    );

    // Then the follower leaves the ISR and the records become visible.
    let live = [r.leader, r.controller];
    wait_isr(&cluster, &live, topic, r.leader, &live, ISR_CHANGE);
    wait_until(
        &cluster,
        "the high watermark reaches 20",
        ISR_CHANGE,
        || {
            let w = watermarks(&c, topic);
            (w == (0, 20)).then_some(()).ok_or(format!("{w:?}"))
        },
    );
    let mut seen = BTreeMap::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while seen.len() < held.len() && Instant::now() < deadline {
        if let Some(msg) = c.poll(Duration::from_millis(200)) {
            let msg = msg.expect("consume");
            let v = String::from_utf8_lossy(msg.payload().unwrap_or_default()).into_owned();
            seen.insert(msg.offset(), v);
        }
    }
    assert_eq!(seen, held, "records 10..20 after the shrink");
    assert!(cluster.signal(r.follower, libc::SIGCONT), "SIGCONT");
}

// --- divergence --------------------------------------------------------------

/// A leader that wrote records its follower never got (acks=1, follower
/// stopped) and then died comes back behind a new leader that wrote other
/// records at those offsets: it drops its divergent suffix, takes the new
/// leader's records, rejoins the ISR, and when it leads again its log is the
/// new leader's, record for record.
#[test]
fn a_returning_leader_truncates_the_records_its_successor_never_had() {
    // The follower must stay in the ISR while stopped (a long lag), and be
    // stopped for less than a session; a short fetch wait drains the fetch
    // it had parked at the leader before the records it must miss.
    let (mut cluster, r) = start(&[
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "6000"),
        ("replica.lag.time.max.ms", "60000"),
        ("replica.fetch.wait.max.ms", "100"),
    ]);
    let (old, new) = (r.leader, r.follower);
    let topic = "diverge";
    create_assigned(&cluster.bootstrap(), topic, &[old, new], &[]);
    let (_, before) = wait_isr(&cluster, &ALL, topic, old, &[old, new], READY);
    let all = producer(
        &cluster.bootstrap(),
        "all",
        &[("enable.idempotence", "true")],
    );
    let kept = send_ok(&all, topic, &values("kept", 5));

    assert!(cluster.signal(new, libc::SIGSTOP), "SIGSTOP");
    let one = producer(&bootstrap_without(&cluster, new), "1", &[]);
    // A fetch the follower had parked would carry this record, not the
    // next ones (each is acknowledged before the next is sent).
    send_ok(&one, topic, &values("in-flight", 1));
    let lost = send_ok(&one, topic, &values("lost", 3));
    cluster.node(old).kill_hard().expect("kill -9");
    assert!(cluster.signal(new, libc::SIGCONT), "SIGCONT");

    let survivors = [new, r.controller];
    wait_partition(
        &cluster,
        &survivors,
        topic,
        &format!("node {new} leads after node {old} died"),
        FAILOVER,
        |_, p| p.leader == new && p.leader_epoch > before.leader_epoch,
    );
    let bootstrap = bootstrap_without(&cluster, old);
    let all = producer(&bootstrap, "all", &[("enable.idempotence", "true")]);
    let written = send_ok(&all, topic, &values("new", 3));
    let successor = read_all(&bootstrap, topic, end_of(&written));
    assert_acked_in(&successor, &kept, &format!("node {new}"));
    assert_acked_in(&successor, &written, &format!("node {new}"));
    let overwritten: Vec<&i64> = lost.keys().filter(|o| written.contains_key(o)).collect();
    assert!(
        !overwritten.is_empty(),
        "the scenario did not diverge: node {new} got the records written while it was stopped \
         ({lost:?}); its log: {successor:?}"
    );

    // The old leader returns, follows, and rejoins the ISR.
    cluster.node(old).restart().expect("restart");
    wait_settled(&cluster, &ALL, READY);
    wait_isr(&cluster, &ALL, topic, new, &[old, new], ISR_CHANGE);

    // Its log: make it the leader (stop the other replica) and read it.
    cluster.node(new).stop().expect("SIGTERM");
    let others = [old, r.controller];
    wait_partition(
        &cluster,
        &others,
        topic,
        &format!("node {old} leads again"),
        FAILOVER,
        |_, p| p.leader == old,
    );
    let returned = read_all(&bootstrap_without(&cluster, new), topic, end_of(&successor));
    assert_eq!(
        returned, successor,
        "node {old}'s log (after it led with {lost:?}) differs from node {new}'s"
    );
}

// --- other clients through a leader kill -------------------------------------

/// Records each producer script sends.
const SCRIPT_RECORDS: usize = 400;
/// Acknowledgements the test waits for before it kills the leader.
const KILL_AFTER: usize = 100;
/// Bound on one producer script run, failover included.
const SCRIPT_LIMIT: Duration = Duration::from_secs(90);

/// A producer script running as a child process, its stdout read line by
/// line while it runs; killed when dropped.
struct Script {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<thread::JoinHandle<String>>,
    /// Every stdout line read so far.
    seen: Vec<String>,
}

impl Script {
    fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().expect("piped stderr");
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Script {
            child,
            lines,
            stderr: Some(stderr),
            seen: Vec::new(),
        }
    }

    fn acks(&self) -> usize {
        self.seen.iter().filter(|l| l.starts_with("ACK ")).count()
    }

    /// Reads lines until `enough` acknowledgements were printed; false if
    /// the output ended or `deadline` passed first.
    fn wait_for_acks(&mut self, enough: usize, deadline: Instant) -> bool {
        while self.acks() < enough {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads the rest of the output and waits for the exit, up to
    /// `deadline` (then kills the script); whether it exited with success,
    /// and its stderr.
    fn finish(mut self, deadline: Instant) -> (bool, Vec<String>, String) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break Some(s);
            }
            if Instant::now() >= deadline {
                break None;
            }
            thread::sleep(Duration::from_millis(20));
        };
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let ok = status.is_some_and(|s| s.success());
        (ok, std::mem::take(&mut self.seen), stderr)
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a producer script printed: `ACK <value> <offset>` per
/// acknowledged record, `ERR <value> <error>` per failed one, and
/// `DONE … idempotent=<true|false>` at the end.
#[derive(Debug, Default)]
struct Produced {
    acked: BTreeMap<i64, String>,
    failed: Vec<String>,
    idempotent: Option<bool>,
}

fn parse_produced(lines: &[String]) -> Produced {
    let mut out = Produced::default();
    for line in lines {
        if let Some(rest) = line.strip_prefix("ACK ") {
            let (value, offset) = rest
                .split_once(' ')
                .and_then(|(v, o)| Some((v.to_string(), o.trim().parse::<i64>().ok()?)))
                .unwrap_or_else(|| panic!("malformed line {line:?}"));
            if let Some(other) = out.acked.insert(offset, value.clone()) {
                panic!("{other} and {value} were both acknowledged at offset {offset}");
            }
        } else if let Some(rest) = line.strip_prefix("ERR ") {
            out.failed.push(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("DONE ") {
            out.idempotent = rest
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix("idempotent="))
                .map(|v| v == "true");
        }
    }
    out
}

/// Runs a producer script (`--bootstrap --topic --records --prefix`) that
/// sends unique values with acks=all to partition 0 of an RF=3 topic, kills
/// -9 the partition's leader once `KILL_AFTER` are acknowledged, and checks
/// that every acknowledged value is on the new leader at its offset. A
/// value stored twice is reported, and fails the test when the producer was
/// idempotent.
fn acks_all_through_a_leader_kill(client: &str, command: &mut Command, prefix: &str) {
    let (mut cluster, r) = start(FAST_FAILOVER);
    let topic = format!("{prefix}-failover");
    create_assigned(
        &cluster.bootstrap(),
        &topic,
        &r.replicas(),
        &[("min.insync.replicas", "2")],
    );
    wait_isr(&cluster, &ALL, &topic, r.leader, &ALL, READY);

    let records = SCRIPT_RECORDS.to_string();
    command.args([
        "--bootstrap",
        &cluster.bootstrap(),
        "--topic",
        &topic,
        "--records",
        &records,
        "--prefix",
        prefix,
    ]);
    let deadline = Instant::now() + SCRIPT_LIMIT;
    let mut script = Script::spawn(command);
    let started = script.wait_for_acks(KILL_AFTER, deadline);
    let before_kill = script.acks();
    if started {
        cluster.node(r.leader).kill_hard().expect("kill -9");
    }
    let (ok, lines, stderr) = script.finish(deadline);
    let report = format!(
        "{client}: exit ok={ok}\n--- stdout (tail) ---\n{}\n--- stderr ---\n{stderr}",
        lines[lines.len().saturating_sub(20)..].join("\n")
    );
    assert!(
        started,
        "{client} never had {KILL_AFTER} records acknowledged\n{report}"
    );
    assert!(ok, "{report}");
    let produced = parse_produced(&lines);
    assert!(
        before_kill < SCRIPT_RECORDS,
        "{client} finished before the leader was killed\n{report}"
    );
    assert!(
        produced.failed.is_empty(),
        "{client}: {} of {SCRIPT_RECORDS} records failed through the failover: {:?}\n{report}",
        produced.failed.len(),
        &produced.failed[..produced.failed.len().min(10)]
    );
    assert_eq!(produced.acked.len(), SCRIPT_RECORDS, "{report}");

    let survivors = [r.follower, r.controller];
    wait_partition(
        &cluster,
        &survivors,
        &topic,
        &format!("a new leader after node {} died", r.leader),
        FAILOVER,
        |_, p| p.leader != r.leader && p.leader >= 0,
    );
    let log = read_all(
        &bootstrap_without(&cluster, r.leader),
        &topic,
        end_of(&produced.acked),
    );
    assert_acked_in(&log, &produced.acked, "the new leader's log");
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in log.values() {
        *counts.entry(v.as_str()).or_default() += 1;
    }
    let strangers: Vec<&&str> = counts
        .keys()
        .filter(|v| {
            v.strip_prefix(prefix)
                .and_then(|s| s.strip_prefix('-'))
                .and_then(|s| s.parse::<usize>().ok())
                .is_none_or(|i| i >= SCRIPT_RECORDS)
        })
        .collect();
    assert!(strangers.is_empty(), "values never sent: {strangers:?}");
    let duplicates: Vec<(&&str, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    println!(
        "{client}: {} acknowledged ({before_kill} before the kill), {} stored, idempotent={:?}, duplicates: {duplicates:?}",
        produced.acked.len(),
        log.len(),
        produced.idempotent
    );
    if produced.idempotent == Some(true) {
        assert!(
            duplicates.is_empty(),
            "{client} (idempotent) stored values twice: {duplicates:?}"
        );
    }
}

#[test]
fn kafka_python_acks_all_records_survive_a_leader_kill() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let mut command = Command::new(python);
    command.arg(tools::python_dir().join("acks_all_failover.py"));
    acks_all_through_a_leader_kill("kafka-python", &mut command, "py");
}

#[test]
fn kafkajs_acks_all_records_survive_a_leader_kill() {
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    if !tools::kafkajs_installed() {
        skip_or_fail("kafkajs (npm ci in tests/compat/js)");
        return;
    }
    let dir = tools::js_dir();
    let mut command = Command::new(node);
    command
        .current_dir(&dir)
        .arg(dir.join("acks_all_failover.js"));
    acks_all_through_a_leader_kill("kafkajs", &mut command, "js");
}

/// A leader killed with -9 and started again at once, well within its
/// broker session, takes up none of its previous incarnation's
/// leadership: until the controller has its new registration, the
/// metadata it replays still names it leader, but its log may lack what
/// that incarnation acknowledged (here the page cache keeps it; a power
/// loss would not). A produce sent straight to it is refused with
/// NOT_LEADER_OR_FOLLOWER, never appended, until the partition has moved.
#[test]
fn a_restarted_leader_takes_up_no_leadership_before_its_new_registration() {
    // A 10 s session: the old incarnation stays registered (and the
    // partition's leader) for seconds after the kill.
    let (mut cluster, roles) = start(LAGGING);
    let topic = "incarnation";
    create_assigned(&cluster.bootstrap(), topic, &roles.replicas(), &[]);
    wait_partition(
        &cluster,
        &ALL,
        topic,
        "led with a full ISR",
        ISR_CHANGE,
        |_, p| p.leader == roles.leader && isr_of(p) == set(&roles.replicas()),
    );
    cluster.node(roles.leader).kill_hard().expect("kill -9");
    cluster.node(roles.leader).restart().expect("start again");
    let addr = cluster.node(roles.leader).bootstrap().to_string();
    let answers = runtime().block_on(produce_until_refused(&addr, topic));
    assert!(
        answers.iter().all(|(code, _)| *code != 0),
        "the restarted node appended as its previous incarnation's leader: {answers:?}"
    );
}

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// Sends one record (acks=1) to partition 0 of `topic` straight to `addr`
/// every 100 ms until the answer is NOT_LEADER_OR_FOLLOWER or a record is
/// appended; returns every answer (error code, message).
async fn produce_until_refused(addr: &str, topic: &str) -> Vec<(i16, Option<String>)> {
    let deadline = Instant::now() + ISR_CHANGE;
    let mut answers = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "{addr} never refused the produce: {answers:?}"
        );
        if let Ok(answer) = produce_one(addr, topic, 1, 5_000, b"zombie").await {
            answers.push(answer.clone());
            if answer.0 == NOT_LEADER_OR_FOLLOWER || answer.0 == 0 {
                return answers;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One produce of one record `value` to partition 0 of `topic`, sent
/// straight to `addr` with `acks` and `timeout_ms`: the partition's error
/// code and message, or why no answer came.
async fn produce_one(
    addr: &str,
    topic: &str,
    acks: i16,
    timeout_ms: i32,
    value: &'static [u8],
) -> Result<(i16, Option<String>), String> {
    use weir_protocol::messages::ProduceRequest;
    use weir_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use weir_protocol::records::{Compression, RecordBatchBuilder};
    let mut batch = RecordBatchBuilder::new(Compression::None);
    batch
        .push(0, None, Some(bytes::Bytes::from_static(value)), vec![])
        .unwrap();
    let req = ProduceRequest {
        acks,
        timeout_ms,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(batch.build().unwrap().as_bytes().clone()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut conn = weir_client::Connection::connect(addr, "replication-test")
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let resp = conn.send(&req).await.map_err(|e| format!("produce: {e}"))?;
    resp.responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .map(|p| (p.error_code, p.error_message.clone()))
        .ok_or_else(|| "no partition in the answer".to_string())
}

/// A leader stopped with SIGTERM answers an acks=all produce waiting on a
/// follower with NOT_LEADER_OR_FOLLOWER before it exits: its leadership
/// moves in the controlled shutdown while it still follows the metadata,
/// and whatever it still leads after that it gives up. Holding the produce
/// to its timeout instead (REQUEST_TIMED_OUT) leaves an idempotent producer
/// unsure whether the batch was written; librdkafka then renumbers it under
/// a new epoch after the next out-of-order answer, and a batch that was
/// written is written twice. Started again, the node is taken back at once.
#[test]
fn a_leader_stopped_with_sigterm_answers_its_waiting_acks_all_produces() {
    // The stopped follower stays in the ISR (and registered) for the whole
    // test: the produce waits on it.
    let (mut cluster, r) = start(&[
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "60000"),
        ("replica.lag.time.max.ms", "60000"),
    ]);
    let topic = "sigterm";
    create_assigned(&cluster.bootstrap(), topic, &r.replicas(), &[]);
    wait_isr(&cluster, &ALL, topic, r.leader, &ALL, READY);
    let addr = cluster.node(r.leader).bootstrap().to_string();
    let leader_dir = cluster.node(r.leader).data_dir().to_path_buf();

    assert!(cluster.signal(r.follower, libc::SIGSTOP), "SIGSTOP");
    // A timeout far beyond the test's wait: only an early answer counts.
    let (answered, answer) = mpsc::channel();
    let waiting = thread::spawn(move || {
        let r = runtime().block_on(produce_one(&addr, topic, -1, 120_000, b"held"));
        let _ = answered.send(r);
    });
    wait_until(&cluster, "the leader appended the record", READY, || {
        let batches = stored_batches(&leader_dir, topic, 0).map_err(|e| e.to_string())?;
        (!batches.is_empty())
            .then_some(())
            .ok_or("no batch yet".to_string())
    });
    assert!(!waiting.is_finished(), "answered before SIGTERM");

    assert!(cluster.signal(r.leader, libc::SIGTERM), "SIGTERM");
    let answer = answer
        .recv_timeout(ISR_CHANGE)
        .expect("no answer to the waiting produce within 30 s of SIGTERM");
    assert!(cluster.signal(r.follower, libc::SIGCONT), "SIGCONT");
    assert_eq!(
        answer.map(|(code, _)| code),
        Ok(NOT_LEADER_OR_FOLLOWER),
        "the answer of the stopped leader"
    );

    // Its controlled shutdown ended with it fenced: started again at once,
    // the node registers and is unfenced long before its old session (60 s)
    // would have expired, instead of being refused as a duplicate.
    cluster
        .node(r.leader)
        .restart()
        .expect("clean exit, start again");
    let listed = cluster.node(r.leader).bootstrap().to_string();
    wait_until(
        &cluster,
        "the restarted node is a live broker again",
        ISR_CHANGE,
        || {
            let m = cluster
                .metadata_from(r.controller)
                .map_err(|e| e.to_string())?;
            (m.brokers.get(&r.leader) == Some(&listed))
                .then_some(())
                .ok_or(format!("brokers {:?}", m.brokers))
        },
    );
}
