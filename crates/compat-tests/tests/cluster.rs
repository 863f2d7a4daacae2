//! A three-node weir cluster (three `weir serve` processes of combined
//! nodes on loopback) seen by real clients, and its failover: kill -9 of the
//! active controller and of a broker, SIGSTOP of the controller, restarts,
//! and wrong configurations that must not start.
//!
//! Cluster state is read with a Metadata v7 request written out in the
//! harness ([`weir_compat_tests::cluster::fetch_metadata`]), so leader
//! epochs and the controller id come from the wire, not from weir's codec.
//! Every wait polls an observable condition against a deadline.
//!
//! `cluster::failover_times` measures controller and partition-leader
//! failover over `WEIR_FAILOVER_KILLS` kills (default 2) and prints
//! min/median/max; run it alone with `--nocapture` for the numbers.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::cluster::{ClusterMetadata, FAST_FAILOVER, PartitionMetadata, WeirCluster};
use weir_compat_tests::{
    CommandOutput, HarnessError, WeirProcess, assert_checks_passed, client_timeout, env_count,
    partition_for_key, run_with_timeout, skip_or_fail, tools, weir_binary,
};

const NODES: usize = 3;
pub(crate) const ALL: [i32; 3] = [1, 2, 3];
pub(crate) const PARTITIONS: i32 = 6;
pub(crate) const RECORDS: usize = 600;
/// Start-up of a whole cluster: raft election, three registrations and
/// `__consumer_offsets`.
pub(crate) const READY: Duration = Duration::from_secs(60);
/// A failover: raft election (1–2 s) or a session timeout (3 s) and the
/// metadata reaching every survivor, with room for a loaded machine.
pub(crate) const FAILOVER: Duration = Duration::from_secs(30);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);

// --- waiting and reading the cluster ---------------------------------------

/// Polls `probe` until it returns `Ok` or `limit` passes; then fails with
/// what it last saw and the nodes' log tails.
pub(crate) fn wait_until<T>(
    cluster: &WeirCluster,
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            panic!(
                "{what}: not within {limit:?}; last seen: {last}\n{}",
                log_tails(cluster)
            );
        }
        thread::sleep(POLL);
    }
}

/// Log lines left out of failure reports.
const QUIET: &[&str] = &["openraft::", "hosting partition", "coordinating the groups"];

/// The last lines of every node's log.
fn log_tails(cluster: &WeirCluster) -> String {
    (1..)
        .zip(&cluster.nodes)
        .map(|(id, n)| {
            let tail = n.stderr_tail();
            // openraft's retries and per-partition hosting lines would
            // crowd out the lifecycle ones (registration, fencing).
            let lines: Vec<&str> = tail
                .lines()
                .filter(|l| !QUIET.iter().any(|q| l.contains(q)))
                .collect();
            let start = lines.len().saturating_sub(40);
            format!(
                "--- node {id} log (tail) ---\n{}",
                lines[start..].join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Metadata from every node of `ids`, when they all answer the same.
pub(crate) fn agreed(cluster: &WeirCluster, ids: &[i32]) -> Result<ClusterMetadata, String> {
    let mut first: Option<(i32, ClusterMetadata)> = None;
    for &id in ids {
        let m = cluster
            .metadata_from(id)
            .map_err(|e| format!("Metadata from node {id}: {e}"))?;
        match &first {
            None => first = Some((id, m)),
            Some((fid, f)) if *f != m => {
                return Err(format!(
                    "nodes {fid} and {id} disagree:\n{fid}: {f:?}\n{id}: {m:?}"
                ));
            }
            Some(_) => {}
        }
    }
    first
        .map(|(_, m)| m)
        .ok_or_else(|| "no node asked".to_string())
}

/// True when every partition of `topic` has a leader among the listed
/// brokers.
pub(crate) fn all_led(m: &ClusterMetadata, topic: &str) -> bool {
    let ps = m.partitions(topic);
    !ps.is_empty()
        && ps
            .iter()
            .all(|p| p.error_code == 0 && m.brokers.contains_key(&p.leader))
}

/// Waits until the nodes `ids` agree that exactly they are the brokers (each
/// at the address its current process listens on, so a restarted node counts
/// only once it registered again, not while its old session lives on), that
/// one of them is the controller, and that `__consumer_offsets` is led.
pub(crate) fn wait_settled(cluster: &WeirCluster, ids: &[i32], limit: Duration) -> ClusterMetadata {
    let want: BTreeMap<i32, String> = ids
        .iter()
        .map(|&id| (id, cluster.nodes[(id - 1) as usize].bootstrap().to_string()))
        .collect();
    wait_until(
        cluster,
        &format!("nodes {ids:?} agree on brokers {want:?}, a controller and led offsets"),
        limit,
        || {
            let m = agreed(cluster, ids)?;
            if m.brokers == want
                && want.contains_key(&m.controller_id)
                && all_led(&m, "__consumer_offsets")
            {
                Ok(m)
            } else {
                Err(format!("{m:?}"))
            }
        },
    )
}

pub(crate) fn start_cluster() -> (WeirCluster, ClusterMetadata) {
    let cluster = WeirCluster::start(NODES, FAST_FAILOVER)
        .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    let m = wait_settled(&cluster, &ALL, READY);
    (cluster, m)
}

// --- clients ---------------------------------------------------------------

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub(crate) fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("admin client")
}

/// CreateTopics through librdkafka's admin client; the topic's error code
/// when it is refused.
pub(crate) fn create_topic(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication: i32,
) -> Result<(), RDKafkaErrorCode> {
    let opts = AdminOptions::new()
        .operation_timeout(Some(CLIENT_TIMEOUT))
        .request_timeout(Some(CLIENT_TIMEOUT));
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    let results = runtime()
        .block_on(admin(bootstrap).create_topics([&topic], &opts))
        .unwrap_or_else(|e| panic!("CreateTopics {name}: the request failed: {e}"));
    assert_eq!(results.len(), 1, "{results:?}");
    results[0].clone().map(|_| ()).map_err(|(_, code)| code)
}

/// The controller id librdkafka learned from Metadata.
#[allow(unsafe_code)]
pub(crate) fn rdkafka_controller_id(admin: &AdminClient<DefaultClientContext>) -> i32 {
    // SAFETY: the pointer is the live handle `admin` owns and keeps alive
    // for the duration of the call; rd_kafka_controllerid only reads it.
    unsafe { rdkafka::bindings::rd_kafka_controllerid(admin.inner().native_ptr(), 10_000) }
}

fn key(i: usize) -> String {
    format!("key-{i}")
}

fn value(i: usize) -> String {
    format!("value-{i}")
}

pub(crate) fn produce_keyed(bootstrap: &str, topic: &str, n: usize) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    let rt = runtime();
    rt.block_on(async {
        let sends: Vec<_> = (0..n)
            .map(|i| {
                let (k, v) = (key(i), value(i));
                let producer = &producer;
                async move {
                    producer
                        .send(
                            FutureRecord::to(topic).key(&k).payload(&v),
                            Duration::from_secs(30),
                        )
                        .await
                        .map_err(|(e, _)| format!("record {i}: {e}"))
                }
            })
            .collect();
        for send in sends {
            send.await.unwrap_or_else(|e| panic!("produce: {e}"));
        }
    });
}

/// Reads `n` records of `topic` from the start of every partition and
/// checks each is on its key's partition with its value.
pub(crate) fn consume_with_rdkafka(bootstrap: &str, topic: &str, n: usize) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "unused-assign-only")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("add partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while seen.len() < n && Instant::now() < deadline {
        let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let msg = msg.expect("consume");
        let k = String::from_utf8_lossy(msg.key().unwrap_or_default()).into_owned();
        let i: usize = k
            .strip_prefix("key-")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("unexpected key {k:?}"));
        assert_eq!(msg.payload(), Some(value(i).as_bytes()), "value of {k}");
        assert_eq!(
            u32::try_from(msg.partition()).ok(),
            Some(partition_for_key(k.as_bytes(), PARTITIONS as u32)),
            "{k} is not on its murmur2 partition"
        );
        assert!(seen.insert(i), "{k} delivered twice");
    }
    assert_eq!(seen.len(), n, "librdkafka consumed {} of {n}", seen.len());
}

/// Arguments shared by cluster_check.py and cluster_check.js.
fn check_args(bootstrap: &str, m: &ClusterMetadata, topic: &str) -> Vec<String> {
    let brokers = m
        .brokers
        .keys()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    [
        ("--bootstrap", bootstrap.to_string()),
        ("--brokers", brokers),
        ("--controller", m.controller_id.to_string()),
        ("--topic", topic.to_string()),
        ("--partitions", PARTITIONS.to_string()),
        ("--replicas", NODES.to_string()),
        ("--records", RECORDS.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect()
}

fn run_kafka_python(cluster: &WeirCluster, args: &[String]) {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let script = tools::python_dir().join("cluster_check.py");
    let out = run_with_timeout(
        Command::new(&python).arg(&script).args(args),
        None,
        client_timeout(),
    )
    .expect("python spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &cluster.nodes[0], "cluster_check.py");
}

fn run_kafkajs(cluster: &WeirCluster, args: &[String]) {
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    if !tools::kafkajs_installed() {
        skip_or_fail("kafkajs (npm ci in tests/compat/js)");
        return;
    }
    let dir = tools::js_dir();
    let out = run_with_timeout(
        Command::new(&node)
            .current_dir(&dir)
            .arg(dir.join("cluster_check.js"))
            .args(args),
        None,
        client_timeout(),
    )
    .expect("node spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &cluster.nodes[0], "cluster_check.js");
}

/// `weir cluster describe` against node `id`'s client listener, asking
/// DescribeQuorum of the CONTROLLER listeners `controllers`.
fn describe_quorum(cluster: &WeirCluster, id: i32, controllers: &[i32]) -> CommandOutput {
    let addrs = controllers
        .iter()
        .filter_map(|&c| cluster.controller_address(c))
        .collect::<Vec<_>>()
        .join(",");
    let bin = weir_binary().unwrap_or_else(|e| panic!("{e}"));
    run_with_timeout(
        Command::new(bin).args([
            "cluster",
            "describe",
            "--bootstrap-server",
            cluster.nodes[(id - 1) as usize].bootstrap(),
            "--bootstrap-controller",
            &addrs,
        ]),
        None,
        CLIENT_TIMEOUT,
    )
    .expect("weir cluster describe spawns")
}

/// The `LeaderId:` that `weir cluster describe` printed for the quorum.
fn quorum_leader(out: &CommandOutput) -> Option<i32> {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("LeaderId:"))
        .and_then(|s| s.trim().parse().ok())
}

/// Checks that the survivors' quorum has one leader, `controller`, and that
/// asked one by one, only that node's CONTROLLER listener answers as the
/// active controller.
fn single_quorum_leader(cluster: &WeirCluster, ids: &[i32], controller: i32) -> Result<(), String> {
    let mut leaders = Vec::new();
    for &id in ids {
        let out = describe_quorum(cluster, id, &[id]);
        if out.success() {
            leaders.push((id, quorum_leader(&out)));
        }
    }
    if leaders == [(controller, Some(controller))] {
        Ok(())
    } else {
        Err(format!(
            "answering as the active controller (node, LeaderId): {leaders:?}; want only ({controller}, {controller})"
        ))
    }
}

// --- 1, 2: real clients see the cluster ------------------------------------

#[test]
fn three_brokers_and_an_rf3_topic_seen_by_librdkafka_kafka_python_and_kafkajs() {
    let (cluster, settled) = start_cluster();
    let bootstrap = cluster.bootstrap();

    // librdkafka: every broker and the controller.
    let admin = admin(&bootstrap);
    let md = admin
        .inner()
        .fetch_metadata(None, CLIENT_TIMEOUT)
        .expect("librdkafka metadata");
    let ids: BTreeSet<i32> = md.brokers().iter().map(|b| b.id()).collect();
    assert_eq!(ids, BTreeSet::from(ALL), "brokers librdkafka sees");
    assert_eq!(rdkafka_controller_id(&admin), settled.controller_id);

    // An RF=3 topic: leaders spread evenly, three distinct replicas each.
    let topic = "spread";
    create_topic(&bootstrap, topic, PARTITIONS, 3).expect("CreateTopics RF=3");
    let m = wait_until(&cluster, "every node lists the led topic", READY, || {
        let m = agreed(&cluster, &ALL)?;
        all_led(&m, topic).then_some(m).ok_or("not yet".into())
    });
    let mut led: BTreeMap<i32, usize> = BTreeMap::new();
    for p in m.partitions(topic) {
        let replicas: BTreeSet<i32> = p.replicas.iter().copied().collect();
        assert_eq!(replicas, BTreeSet::from(ALL), "replicas of {p:?}");
        assert_eq!(p.replicas.len(), 3, "{p:?}");
        assert_eq!(p.leader, p.replicas[0], "preferred leader of {p:?}");
        *led.entry(p.leader).or_default() += 1;
    }
    assert_eq!(
        led,
        BTreeMap::from([(1, 2), (2, 2), (3, 2)]),
        "partitions led per broker: {:?}",
        m.partitions(topic)
    );
    let md = admin
        .inner()
        .fetch_metadata(Some(topic), CLIENT_TIMEOUT)
        .expect("librdkafka topic metadata");
    for p in md.topics()[0].partitions() {
        let want = &m.partitions(topic)[p.id() as usize];
        assert_eq!(
            (p.leader(), p.replicas()),
            (want.leader, want.replicas.as_slice())
        );
    }

    // RF above the brokers is refused.
    assert_eq!(
        create_topic(&bootstrap, "too-many-replicas", 1, 4),
        Err(RDKafkaErrorCode::InvalidReplicationFactor)
    );

    produce_keyed(&bootstrap, topic, RECORDS);
    consume_with_rdkafka(&bootstrap, topic, RECORDS);
    let args = check_args(&bootstrap, &m, topic);
    run_kafka_python(&cluster, &args);
    run_kafkajs(&cluster, &args);
}

// --- 3: kill -9 of the active controller -----------------------------------

#[test]
fn kill_9_of_the_controller_elects_another_and_the_node_comes_back() {
    let (mut cluster, settled) = start_cluster();
    create_topic(&cluster.bootstrap(), "before", PARTITIONS, 3).expect("CreateTopics RF=3");
    wait_until(&cluster, "every node lists `before`", READY, || {
        let m = agreed(&cluster, &ALL)?;
        all_led(&m, "before").then_some(()).ok_or("not yet".into())
    });

    let dead = settled.controller_id;
    let survivors: Vec<i32> = ALL.into_iter().filter(|&id| id != dead).collect();
    cluster.node(dead).kill_hard().expect("kill -9");
    let m = wait_until(
        &cluster,
        &format!("survivors {survivors:?} elect a controller and drop node {dead}"),
        FAILOVER,
        || {
            let m = agreed(&cluster, &survivors)?;
            let ok = survivors.contains(&m.controller_id)
                && !m.brokers.contains_key(&dead)
                && all_led(&m, "before");
            ok.then_some(m.clone()).ok_or(format!("{m:?}"))
        },
    );
    for p in m.partitions("before") {
        assert_ne!(p.leader, dead, "{p:?}");
    }

    // Topic admin through a survivor, forwarded to the new controller. RF
    // counts live brokers: 3 is refused now, 2 works.
    let bootstrap = cluster.bootstrap();
    assert_eq!(
        create_topic(&bootstrap, "after-rf3", 2, 3),
        Err(RDKafkaErrorCode::InvalidReplicationFactor)
    );
    create_topic(&bootstrap, "after", PARTITIONS, 2).expect("CreateTopics RF=2 after failover");
    let m = wait_until(&cluster, "survivors agree on `after`", FAILOVER, || {
        let m = agreed(&cluster, &survivors)?;
        all_led(&m, "after")
            .then_some(m.clone())
            .ok_or(format!("{m:?}"))
    });
    for p in m.partitions("after") {
        assert!(!p.replicas.contains(&dead), "{p:?}");
    }
    // The quorum agrees with Metadata: the survivors' CONTROLLER listeners
    // name the same leader, and only it answers as the active controller.
    let out = describe_quorum(&cluster, survivors[0], &survivors);
    assert_eq!(
        quorum_leader(&out),
        Some(m.controller_id),
        "{}",
        out.describe("weir cluster describe")
    );
    wait_until(
        &cluster,
        "a single quorum leader among the survivors",
        FAILOVER,
        || single_quorum_leader(&cluster, &survivors, m.controller_id),
    );

    // The killed node restarts on its data, registers again and hosts its
    // replicas' logs.
    cluster.node(dead).restart().expect("restart");
    let m = wait_settled(&cluster, &ALL, READY);
    let hosted: Vec<String> = m
        .topics
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t, p)))
        .filter(|(_, p)| p.replicas.contains(&dead))
        .map(|(t, p)| format!("{t}-{}", p.partition))
        .collect();
    assert!(
        hosted.iter().any(|d| d.starts_with("before-")),
        "{hosted:?}"
    );
    let data_dir = cluster.node(dead).data_dir().to_path_buf();
    wait_until(
        &cluster,
        "the restarted node hosts its replicas' logs",
        FAILOVER,
        || {
            let missing: Vec<&String> = hosted
                .iter()
                .filter(|d| !data_dir.join(d).is_dir())
                .collect();
            missing
                .is_empty()
                .then_some(())
                .ok_or(format!("missing in {}: {missing:?}", data_dir.display()))
        },
    );
}

// --- 4: kill -9 of a broker ------------------------------------------------

/// Waits until every partition of `before` (led by `dead`) has a leader
/// other than `dead` from its ISR at the time, with a higher leader epoch.
pub(crate) fn wait_new_leaders(
    cluster: &WeirCluster,
    survivors: &[i32],
    dead: i32,
    before: &[(String, PartitionMetadata)],
    limit: Duration,
) -> ClusterMetadata {
    wait_until(
        cluster,
        &format!("partitions led by node {dead} move to their ISR"),
        limit,
        || {
            let m = agreed(cluster, survivors)?;
            for (topic, old) in before {
                let now = m
                    .partitions(topic)
                    .iter()
                    .find(|p| p.partition == old.partition)
                    .ok_or(format!("{topic}-{} gone", old.partition))?;
                let moved = now.leader != dead
                    && old.isr.contains(&now.leader)
                    && m.brokers.contains_key(&now.leader)
                    && now.leader_epoch > old.leader_epoch;
                if !moved {
                    return Err(format!("{topic}: was {old:?}, now {now:?}"));
                }
            }
            Ok(m)
        },
    )
}

#[test]
fn kill_9_of_a_broker_gives_its_partitions_leaders_from_the_isr() {
    let (mut cluster, settled) = start_cluster();
    create_topic(&cluster.bootstrap(), "moves", PARTITIONS, 3).expect("CreateTopics RF=3");
    let m = wait_until(&cluster, "every node lists `moves`", READY, || {
        let m = agreed(&cluster, &ALL)?;
        all_led(&m, "moves")
            .then_some(m.clone())
            .ok_or("not yet".into())
    });
    let dead = ALL
        .into_iter()
        .find(|&id| id != settled.controller_id)
        .expect("a non-controller");
    let survivors: Vec<i32> = ALL.into_iter().filter(|&id| id != dead).collect();
    let led = m.led_by(dead);
    assert!(
        led.iter().any(|(t, _)| t == "moves"),
        "node {dead} leads none of `moves`: {m:?}"
    );

    cluster.node(dead).kill_hard().expect("kill -9");
    let m = wait_new_leaders(&cluster, &survivors, dead, &led, FAILOVER);
    assert!(!m.brokers.contains_key(&dead), "{m:?}");
    assert_eq!(
        m.controller_id, settled.controller_id,
        "the controller did not change"
    );
}

// --- 5: SIGSTOP of the controller ------------------------------------------

#[test]
fn sigstop_of_the_controller_elects_another_and_sigcont_rejoins_under_one_controller() {
    let (mut cluster, settled) = start_cluster();
    let paused = settled.controller_id;
    let others: Vec<i32> = ALL.into_iter().filter(|&id| id != paused).collect();
    assert!(
        cluster.signal(paused, libc::SIGSTOP),
        "SIGSTOP node {paused}"
    );
    let m = wait_until(
        &cluster,
        &format!("nodes {others:?} elect a controller and fence node {paused}"),
        FAILOVER,
        || {
            let m = agreed(&cluster, &others)?;
            let ok = others.contains(&m.controller_id) && !m.brokers.contains_key(&paused);
            ok.then_some(m.clone()).ok_or(format!("{m:?}"))
        },
    );
    wait_until(
        &cluster,
        "a single quorum leader while one node is stopped",
        FAILOVER,
        || single_quorum_leader(&cluster, &others, m.controller_id),
    );

    assert!(
        cluster.signal(paused, libc::SIGCONT),
        "SIGCONT node {paused}"
    );
    let m = wait_settled(&cluster, &ALL, READY);
    wait_until(
        &cluster,
        "exactly one active controller of three",
        FAILOVER,
        || single_quorum_leader(&cluster, &ALL, m.controller_id),
    );
}

// --- 6: failover timing ----------------------------------------------------

/// min / median / max of `samples`, in milliseconds.
fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "n={} min={:.0} ms median={:.0} ms max={:.0} ms",
        samples.len(),
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1])
    )
}

/// Kills node `dead` with SIGKILL and returns when it was killed.
fn kill_at(cluster: &mut WeirCluster, dead: i32) -> Instant {
    let at = Instant::now();
    cluster.node(dead).kill_hard().expect("kill -9");
    at
}

/// Restarts node `id` and waits until the cluster lists it again.
fn restart_and_settle(cluster: &mut WeirCluster, id: i32) -> ClusterMetadata {
    cluster.node(id).restart().expect("restart");
    wait_settled(cluster, &ALL, READY)
}

#[test]
fn failover_times() {
    let kills = env_count("WEIR_FAILOVER_KILLS", 2);
    let (mut cluster, mut m) = start_cluster();
    let mut controller_times = Vec::new();
    let mut leader_times = Vec::new();
    for round in 0..kills {
        // (a) Controller: from kill -9 to a survivor naming another one.
        let dead = m.controller_id;
        let survivors: Vec<i32> = ALL.into_iter().filter(|&id| id != dead).collect();
        let killed = kill_at(&mut cluster, dead);
        wait_until(
            &cluster,
            "a survivor names a new controller",
            FAILOVER,
            || {
                for &id in &survivors {
                    if let Ok(m) = cluster.metadata_from(id)
                        && m.controller_id >= 0
                        && m.controller_id != dead
                    {
                        return Ok(());
                    }
                }
                Err("no survivor names a new controller".into())
            },
        );
        controller_times.push(killed.elapsed());
        restart_and_settle(&mut cluster, dead);

        // (b) Partition leaders: a fresh RF=3 topic spreads leadership, then
        // a broker that leads some of it dies.
        let topic = format!("timing-{round}");
        create_topic(&cluster.bootstrap(), &topic, PARTITIONS, 3).expect("CreateTopics");
        m = wait_until(&cluster, "every node lists the timing topic", READY, || {
            let m = agreed(&cluster, &ALL)?;
            all_led(&m, &topic)
                .then_some(m.clone())
                .ok_or("not yet".into())
        });
        for p in m.partitions(&topic) {
            if p.isr.len() < p.replicas.len() {
                println!(
                    "round {round}: note: a fresh {topic}-{} has ISR {:?} of {:?}",
                    p.partition, p.isr, p.replicas
                );
            }
        }
        // A partition whose ISR is only its leader has no leader to move to
        // (no unclean election); one whose ISR is not full may grow it
        // between this snapshot and the kill (a restarted node catching
        // up), and its new leader may then be one the snapshot did not list
        // in the ISR: time the partitions with a full ISR.
        let movable = |id: i32| -> Vec<(String, PartitionMetadata)> {
            m.led_by(id)
                .into_iter()
                .filter(|(_, p)| p.isr.iter().any(|&r| r != id) && p.isr.len() == p.replicas.len())
                .collect()
        };
        let Some(dead) = ALL
            .into_iter()
            .find(|&id| id != m.controller_id && !movable(id).is_empty())
        else {
            println!(
                "round {round}: no broker but the controller leads a partition with a follower in its ISR"
            );
            continue;
        };
        let survivors: Vec<i32> = ALL.into_iter().filter(|&id| id != dead).collect();
        let led = movable(dead);
        let killed = kill_at(&mut cluster, dead);
        wait_new_leaders(&cluster, &survivors, dead, &led, FAILOVER);
        leader_times.push(killed.elapsed());
        m = restart_and_settle(&mut cluster, dead);
        println!(
            "round {round}: controller failover {:?}, leader failover {:?} ({} partitions of node {dead})",
            controller_times.last().copied().unwrap_or_default(),
            leader_times.last().copied().unwrap_or_default(),
            led.len()
        );
    }
    if kills > 0 {
        println!(
            "controller failover (kill -9 to a new controller in Metadata): {}",
            summary(&mut controller_times)
        );
        println!(
            "partition leader failover (kill -9 to new leaders for all its partitions): {}",
            summary(&mut leader_times)
        );
    }
}

// --- 7: wrong configurations -----------------------------------------------

#[test]
fn a_second_node_2_on_the_same_controller_port_exits_with_one_clear_line() {
    let (cluster, _) = start_cluster();
    let voters = cluster.voters();
    let port = cluster
        .controller_address(2)
        .expect("node 2's CONTROLLER address");
    let sets = [
        "node.id=2".to_string(),
        "process.roles=broker,controller".into(),
        format!("controller.quorum.voters={voters}"),
        format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://{port}"),
        "controller.listener.names=CONTROLLER".into(),
    ];
    let args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s.as_str()]).collect();
    match WeirProcess::start_with_args(&args) {
        Err(HarnessError::ExitedEarly { status, stderr, .. }) => {
            assert!(!status.success(), "{status}");
            let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
            assert_eq!(errors.len(), 1, "one error line, got:\n{stderr}");
            assert!(
                errors[0].contains(&port),
                "the line names {port}: {}",
                errors[0]
            );
        }
        Ok(p) => panic!("a second node 2 started: {p:?}"),
        Err(e) => panic!("unexpected harness error: {e}"),
    }
    // The cluster is unaffected.
    wait_settled(&cluster, &ALL, FAILOVER);
}
