//! The scenario table at the end of seed 004 as functions over a broker;
//! `tests/scenarios.rs` runs them against weir (an `EmbeddedBroker` in the
//! test process, or `WEIR_PC_BOOTSTRAP`), `tests/mock_cluster.rs` against
//! librdkafka's mock cluster.
//!
//! Offsets here start at 0 where the seed's table starts at 10 (row 1's
//! records 10, 11, 12 are 0, 1, 2).

// Each test binary uses a different part of these helpers.
#![allow(dead_code)]
// Completed sets are compared as lists of ranges.
#![allow(clippy::single_range_in_vec_init)]

#[path = "../../examples/sqlite_effects/effects.rs"]
#[allow(dead_code)]
pub mod effects;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use effects::{Applied, Change, EffectStore};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::watch;
use weir_broker::EmbeddedBroker;
use weir_compat_tests::WeirProcess;
use weir_parallel_consumer::driver::{DriverConfig, ParallelConsumer};
use weir_parallel_consumer::engine::PartitionStats;
use weir_parallel_consumer::metadata;
use weir_parallel_consumer::record::{self, FailurePolicy, Record, RetryPolicy};
use weir_parallel_consumer::scheduler::Ordering;
use weir_protocol::messages::ApiKey;

const WAIT: Duration = Duration::from_secs(60);

/// Where the scenarios run.
pub enum TestBroker {
    /// Any Kafka-compatible broker (`WEIR_PC_BOOTSTRAP`).
    External(String),
    /// A weir broker on its own thread in the test process.
    Embedded(EmbeddedBroker),
    /// A `weir serve` process started by the compat-tests harness, for tests
    /// that stop the broker process itself (SIGSTOP).
    Weir(WeirProcess),
    /// librdkafka's built-in mock cluster (groups, commits, fetch; error
    /// injection).
    Mock(MockCluster<'static, DefaultProducerContext>),
}

impl TestBroker {
    /// `WEIR_PC_BOOTSTRAP` if set, else a fresh embedded weir broker.
    pub fn from_env() -> TestBroker {
        match std::env::var("WEIR_PC_BOOTSTRAP") {
            Ok(b) if !b.is_empty() => TestBroker::External(b),
            _ => TestBroker::embedded(&[]),
        }
    }

    /// A fresh embedded weir broker with `settings` (Kafka config names).
    pub fn embedded(settings: &[(&str, &str)]) -> TestBroker {
        let builder = settings
            .iter()
            .fold(EmbeddedBroker::builder(), |b, (k, v)| b.set(*k, *v));
        TestBroker::Embedded(builder.start().unwrap_or_else(|e| panic!("weir: {e}")))
    }

    pub fn mock() -> TestBroker {
        TestBroker::Mock(MockCluster::new(1).expect("mock cluster"))
    }

    pub fn bootstrap(&self) -> String {
        match self {
            TestBroker::External(b) => b.clone(),
            TestBroker::Embedded(e) => e.bootstrap(),
            TestBroker::Weir(w) => w.bootstrap().to_string(),
            TestBroker::Mock(m) => m.bootstrap_servers(),
        }
    }

    /// Heartbeat requests the broker has answered so far, where the test
    /// can see inside the broker (the embedded one).
    pub fn heartbeats(&self) -> Option<u64> {
        match self {
            TestBroker::Embedded(e) => e
                .broker()
                .metrics
                .api(i16::from(ApiKey::Heartbeat))
                .map(|a| a.requests.load(AtomicOrdering::Relaxed)),
            _ => None,
        }
    }

    pub fn create_topic(&self, rt: &tokio::runtime::Runtime, topic: &str, partitions: i32) {
        match self {
            // The mock cluster does not implement CreateTopics.
            TestBroker::Mock(m) => m.create_topic(topic, partitions, 1).expect("mock topic"),
            _ => create_topic(rt, &self.bootstrap(), topic, partitions),
        }
    }
}

/// The example binary `name` (a consumer process of the end-to-end
/// tests): `$env` if set, else `target/<profile>/examples/<name>`, which
/// `cargo test` builds with the tests; when missing (`cargo test --test
/// integration` alone does not build examples) it is built into
/// `target/pc-e2e-worker-build`.
pub fn example_binary(name: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // .../target/<profile>/deps/<test>  ->  .../target/<profile>
    let profile = exe
        .parent()
        .filter(|d| d.ends_with("deps"))
        .and_then(Path::parent)
        .expect("test binary under target/<profile>/deps");
    let candidate = profile.join("examples").join(name);
    if candidate.is_file() {
        return candidate;
    }
    // The outer cargo holds the lock on its target dir: build elsewhere.
    let target = profile
        .parent()
        .map(|t| t.join("pc-e2e-worker-build"))
        .expect("target dir");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "no {name} next to the tests; building it into {}",
        target.display()
    );
    let status = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "-p",
            "weir-parallel-consumer",
            "--example",
            name,
            "--target-dir",
        ])
        .arg(&target)
        .stdin(Stdio::null())
        .status()
        .expect("running cargo");
    assert!(status.success(), "building {name} failed: {status}");
    target.join("debug").join("examples").join(name)
}

pub fn unique(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("pc-{name}-{}-{nanos}", std::process::id())
}

/// Logs of the driver on the test's output (`RUST_LOG` filters, default
/// `info`); shown for failing tests.
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}

pub fn runtime() -> tokio::runtime::Runtime {
    init_logs();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

fn create_topic(rt: &tokio::runtime::Runtime, bootstrap: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = rt
        .block_on(admin.create_topics(
            [&NewTopic::new(
                topic,
                partitions,
                TopicReplication::Fixed(1),
            )],
            &opts,
        ))
        .expect("create_topics");
    for r in results {
        r.unwrap_or_else(|(name, code)| panic!("creating {name}: {code:?}"));
    }
}

/// Produces `(key, payload)` records to one partition, in order.
pub fn produce(bootstrap: &str, topic: &str, partition: i32, records: &[(Option<&str>, &str)]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    for (key, payload) in records {
        let mut r = BaseRecord::<str, str>::to(topic)
            .partition(partition)
            .payload(payload);
        if let Some(k) = key {
            r = r.key(k);
        }
        producer.send(r).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// The group's committed offset and metadata for a partition (OffsetFetch,
/// without joining the group).
pub fn committed(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partition: i32,
) -> Option<(i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let list = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("OffsetFetch");
    let e = list.find_partition(topic, partition)?;
    match e.offset() {
        Offset::Offset(o) => Some((o, e.metadata().to_string())),
        _ => None,
    }
}

pub fn wait_until(what: &str, f: impl FnMut() -> bool) {
    wait_until_or(what, f, String::new);
}

/// [`wait_until`], with `diagnose()` in the failure message.
pub fn wait_until_or(what: &str, mut f: impl FnMut() -> bool, diagnose: impl Fn() -> String) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for: {what}\n{}",
            diagnose()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn client(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500");
    c
}

pub fn config(ordering: Ordering, max_concurrency: usize) -> DriverConfig {
    let mut c = DriverConfig::default();
    c.engine.scheduler.ordering = ordering;
    c.engine.scheduler.max_concurrency = max_concurrency;
    c.commit_interval = Duration::from_millis(100);
    c.revoke_timeout = Duration::from_millis(500);
    c.shutdown_timeout = Duration::from_millis(500);
    c.retry = RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
    };
    c
}

pub fn stats_of(pc: &ParallelConsumer, topic: &str, partition: i32) -> Option<PartitionStats> {
    pc.stats()
        .into_iter()
        .find(|s| s.topic == topic && s.partition == partition)
}

/// What handlers saw: ("start" | "end", partition, offset).
pub type Log = Arc<Mutex<Vec<(&'static str, i32, i64)>>>;

pub type BoxFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// What an exactly-once (transform) handler returns.
pub type OutputFuture = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<Vec<weir_parallel_consumer::exactly_once::OutputRecord>, String>,
            > + Send,
    >,
>;

/// A handler that logs, and blocks the offsets in `blocked` until `gate`
/// turns true.
pub fn gated_handler(
    log: Log,
    blocked: HashSet<(i32, i64)>,
    gate: watch::Receiver<bool>,
) -> impl Fn(Record) -> BoxFuture + Send + Sync + 'static {
    move |r: Record| {
        let log = log.clone();
        let mut gate = gate.clone();
        let blocked = blocked.contains(&(r.partition, r.offset));
        Box::pin(async move {
            log.lock().unwrap().push(("start", r.partition, r.offset));
            if blocked {
                gate.wait_for(|open| *open)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            log.lock().unwrap().push(("end", r.partition, r.offset));
            Ok(())
        })
    }
}

/// A handler that logs, and blocks the `k`-th run of record `blocked`
/// (counted from 0) until `gates[k]` turns true: each run of the record
/// has its own gate (runs beyond the list are not blocked).
pub fn run_gated_handler(
    log: Log,
    blocked: (i32, i64),
    gates: Vec<watch::Receiver<bool>>,
) -> impl Fn(Record) -> BoxFuture + Send + Sync + 'static {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    move |r: Record| {
        let log = log.clone();
        let gate = if (r.partition, r.offset) == blocked {
            let k = runs.fetch_add(1, AtomicOrdering::SeqCst);
            gates.get(k).cloned()
        } else {
            None
        };
        Box::pin(async move {
            log.lock().unwrap().push(("start", r.partition, r.offset));
            if let Some(mut gate) = gate {
                gate.wait_for(|open| *open)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            log.lock().unwrap().push(("end", r.partition, r.offset));
            Ok(())
        })
    }
}

/// Row 7's end, once record 0's run of the lost assignment (blocked on
/// `old`) and its run under the new assignment (blocked on `new`) both
/// started and record 1 was restored as done: only the old run is
/// released. Its result must be discarded: the watermark stays at 0, and a
/// commit made after it (once record 2, produced now, completed) still
/// says 0 with {1, 2} done. Then the new run finishes and 3 is committed.
pub fn row7_only_the_new_run_moves_the_commit(
    pc: &ParallelConsumer,
    bootstrap: &str,
    group: &str,
    topic: &str,
    log: &Log,
    old: watch::Sender<bool>,
    new: watch::Sender<bool>,
) {
    let starts_of_0 = || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| **e == ("start", 0, 0))
            .count()
    };
    assert_eq!(starts_of_0(), 2, "{:?}", log.lock().unwrap());
    old.send(true).expect("release the old run");
    wait_until_or(
        "the old run's result reached the owner thread",
        || {
            log.lock().unwrap().contains(&("end", 0, 0))
                && stats_of(pc, topic, 0)
                    .is_some_and(|s| s.stale_results >= 1 || s.effect_watermark > 0)
        },
        || format!("{:?}", stats_of(pc, topic, 0)),
    );
    let s = stats_of(pc, topic, 0).expect("stats");
    assert_eq!(
        (s.effect_watermark, s.in_flight, s.stale_results),
        (0, 1, 1),
        "the old generation's result of record 0 was applied: {s:?}"
    );
    produce(bootstrap, topic, 0, &[(None, "12")]);
    wait_until("a commit that has record 2 done", || {
        committed(bootstrap, group, topic, 0)
            .is_some_and(|(o, m)| o > 0 || metadata::decode(&m, o).is_ok_and(|s| s.contains(2)))
    });
    let (offset, meta) = committed(bootstrap, group, topic, 0).expect("committed");
    assert_eq!(
        offset, 0,
        "the commit moved past record 0 while only its old run had finished"
    );
    assert_eq!(
        metadata::decode(&meta, 0).ok().map(|s| s.runs),
        Some(vec![1..3]),
        "{meta:?}"
    );
    assert_eq!(starts_of_0(), 2, "record 0 ran a third time");
    new.send(true).expect("release the new run");
    wait_until("3 committed", || {
        committed(bootstrap, group, topic, 0).is_some_and(|(o, _)| o == 3)
    });
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| **e == ("start", 0, 1))
            .count(),
        1,
        "record 1 ran again"
    );
}

pub fn row1_unfinished_first_record_holds_the_commit(broker: &TestBroker) {
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, group) = (unique("row1"), unique("g1"));
    broker.create_topic(&rt, &topic, 1);
    produce(b, &topic, 0, &[(None, "10"), (None, "11"), (None, "12")]);
    let log = Log::default();
    let (open, gate) = watch::channel(false);
    let pc = ParallelConsumer::start(
        client(b, &group),
        &[topic.as_str()],
        config(Ordering::Unordered, 8),
        rt.handle().clone(),
        gated_handler(log.clone(), [(0, 0)].into(), gate),
    )
    .expect("start");
    // 11 and 12 done, 10 running: position 3, committed stays 0, with the
    // completed set {1, 2} in the metadata.
    wait_until("0 committed with {1,2} in metadata", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, m)| {
            o == 0 && metadata::decode(&m, 0).is_ok_and(|s| s.runs == vec![1..3])
        })
    });
    let s = stats_of(&pc, &topic, 0).expect("stats");
    assert_eq!((s.position, s.effect_watermark, s.in_flight), (3, 0, 1));
    open.send(true).expect("open gate");
    wait_until("3 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    pc.shutdown_blocking().expect("shutdown");
}

pub fn row2_unsubmitted_record_holds_the_commit(broker: &TestBroker) {
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, group) = (unique("row2"), unique("g2"));
    broker.create_topic(&rt, &topic, 1);
    produce(b, &topic, 0, &[(None, "10"), (None, "11"), (None, "12")]);
    let log = Log::default();
    let (open, gate) = watch::channel(false);
    // Partition order, one worker: while 1 runs, 2 is delivered and waits.
    let pc = ParallelConsumer::start(
        client(b, &group),
        &[topic.as_str()],
        config(Ordering::Partition, 1),
        rt.handle().clone(),
        gated_handler(log.clone(), [(0, 1)].into(), gate),
    )
    .expect("start");
    wait_until("record 2 delivered and waiting", || {
        stats_of(&pc, &topic, 0).is_some_and(|s| s.position == 3 && s.waiting == 1)
    });
    wait_until("1 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 1)
    });
    assert!(!log.lock().unwrap().contains(&("start", 0, 2)));
    open.send(true).expect("open gate");
    wait_until("3 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    pc.shutdown_blocking().expect("shutdown");
}

pub fn row3_crash_after_effect_before_commit_has_no_second_effect(broker: &TestBroker) {
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, group) = (unique("row3"), unique("g3"));
    broker.create_topic(&rt, &topic, 1);
    produce(
        b,
        &topic,
        0,
        &[(None, "alice:-30"), (None, "bob:10"), (None, "alice:5")],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("effects.db");
    let db = db.to_str().expect("utf-8 path").to_string();
    let outcomes: Arc<Mutex<Vec<Applied>>> = Arc::default();
    let handler = {
        let (db, outcomes) = (db.clone(), outcomes.clone());
        move |r: Record| {
            let (db, outcomes) = (db.clone(), outcomes.clone());
            async move {
                let change = Change::parse(r.payload.as_deref().unwrap_or_default())
                    .map_err(|e| e.to_string())?;
                let mut store = EffectStore::open(&db).map_err(|e| e.to_string())?;
                let applied = store
                    .apply(&r.event_id(), &change)
                    .map_err(|e| e.to_string())?;
                outcomes.lock().unwrap().push(applied);
                Ok::<(), String>(())
            }
        }
    };
    // First run: effects written, no commit (the interval is never reached),
    // then the process "dies".
    let mut no_commit = config(Ordering::Key, 4);
    no_commit.commit_interval = Duration::from_secs(3600);
    let pc = ParallelConsumer::start(
        client(b, &group),
        &[topic.as_str()],
        no_commit,
        rt.handle().clone(),
        handler.clone(),
    )
    .expect("start");
    wait_until("three effects", || outcomes.lock().unwrap().len() == 3);
    let report = pc.abort_blocking().expect("abort");
    assert!(report.final_commits.is_empty());
    assert_eq!(committed(b, &group, &topic, 0), None);
    // Second run: everything comes again; the event ids absorb it.
    let pc = ParallelConsumer::start(
        client(b, &group),
        &[topic.as_str()],
        config(Ordering::Key, 4),
        rt.handle().clone(),
        handler,
    )
    .expect("restart");
    wait_until("3 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    pc.shutdown_blocking().expect("shutdown");
    let outcomes = outcomes.lock().unwrap().clone();
    assert_eq!(&outcomes[..3], &[Applied::Done; 3]);
    assert_eq!(&outcomes[3..], &[Applied::Duplicate; 3]);
    let store = EffectStore::open(&db).expect("db");
    assert_eq!(store.balance("alice").expect("balance"), Some(-25));
}

pub fn row5_key_order_is_kept_while_other_keys_run(broker: &TestBroker) {
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, group) = (unique("row5"), unique("g5"));
    broker.create_topic(&rt, &topic, 1);
    produce(
        b,
        &topic,
        0,
        &[
            (Some("acct-1"), "debit"),
            (Some("acct-1"), "refund"),
            (Some("acct-2"), "x"),
        ],
    );
    let log = Log::default();
    let (open, gate) = watch::channel(false);
    let pc = ParallelConsumer::start(
        client(b, &group),
        &[topic.as_str()],
        config(Ordering::Key, 8),
        rt.handle().clone(),
        gated_handler(log.clone(), [(0, 0)].into(), gate),
    )
    .expect("start");
    wait_until("acct-2 done while acct-1's first record runs", || {
        log.lock().unwrap().contains(&("end", 0, 2))
    });
    assert!(
        !log.lock().unwrap().contains(&("start", 0, 1)),
        "the refund started before the debit finished"
    );
    open.send(true).expect("open gate");
    wait_until("3 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    let log = log.lock().unwrap().clone();
    let end0 = log.iter().position(|e| *e == ("end", 0, 0));
    let start1 = log.iter().position(|e| *e == ("start", 0, 1));
    assert!(end0 < start1, "{log:?}");
    pc.shutdown_blocking().expect("shutdown");
}

/// Whether the broker accepts the revoke's commit in row 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeCommit {
    Accepted,
    /// librdkafka's mock cluster answers REBALANCE_IN_PROGRESS to every
    /// commit once a new member's JoinGroup started an eager rebalance
    /// (Kafka and weir accept commits of the current generation until the
    /// rebalance completes): the new owner then runs every record again.
    RefusedByMockDuringEagerRebalance,
}

/// Row 6: a second member joins while record 0 runs and 1 is done on every
/// partition. The first member commits nothing periodically (an interval
/// of one hour), so the only commit that can write 0 with {1} in its
/// metadata is the revoke's; the new owner runs 0 and 2 again but not 1.
pub fn revoke_commits_completed_prefix(broker: &TestBroker, strategy: &str, expect: RevokeCommit) {
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, group) = (unique("row6"), unique("g6"));
    let partitions = 2;
    broker.create_topic(&rt, &topic, partitions);
    for p in 0..partitions {
        produce(b, &topic, p, &[(None, "a"), (None, "b"), (None, "c")]);
    }
    let mut c = client(b, &group);
    c.set("partition.assignment.strategy", strategy);
    let first_log = Log::default();
    let (_first_open, first_gate) = watch::channel(false);
    let blocked: HashSet<(i32, i64)> = (0..partitions).flat_map(|p| [(p, 0), (p, 2)]).collect();
    let mut no_periodic_commit = config(Ordering::Unordered, 8);
    no_periodic_commit.commit_interval = Duration::from_secs(3600);
    let first = ParallelConsumer::start(
        c.clone(),
        &[topic.as_str()],
        no_periodic_commit,
        rt.handle().clone(),
        gated_handler(first_log.clone(), blocked, first_gate),
    )
    .expect("first member");
    wait_until("offset 1 done on every partition", || {
        let log = first_log.lock().unwrap();
        (0..partitions).all(|p| log.contains(&("end", p, 1)))
    });
    wait_until("the first member saw 1 done on every partition", || {
        let s = first.stats();
        s.len() == partitions as usize
            && s.iter()
                .all(|s| s.position == 3 && s.in_flight == 2 && s.tracked == 3)
    });
    for p in 0..partitions {
        assert_eq!(
            committed(b, &group, &topic, p),
            None,
            "partition {p} committed before the revoke"
        );
    }
    let second_log = Log::default();
    let (_second_open, second_gate) = watch::channel(true);
    let second = ParallelConsumer::start(
        c,
        &[topic.as_str()],
        config(Ordering::Unordered, 8),
        rt.handle().clone(),
        gated_handler(second_log.clone(), HashSet::new(), second_gate),
    )
    .expect("second member");
    wait_until_or(
        "the second member owns a partition and finished it",
        || second.stats().iter().any(|s| s.effect_watermark == 3),
        || {
            format!(
                "first: {:#?}\nsecond: {:#?}\ncommitted: {:?}\nsecond log: {:?}",
                first.stats(),
                second.stats(),
                (0..partitions)
                    .map(|p| committed(b, &group, &topic, p))
                    .collect::<Vec<_>>(),
                second_log.lock().unwrap()
            )
        },
    );
    let moved: Vec<_> = second
        .stats()
        .into_iter()
        .filter(|s| s.effect_watermark == 3)
        .collect();
    let log = second_log.lock().unwrap().clone();
    assert!(!moved.is_empty());
    for s in &moved {
        let p = s.partition;
        if expect == RevokeCommit::RefusedByMockDuringEagerRebalance {
            assert_eq!(s.skipped, 0, "{s:?}");
            assert!(log.contains(&("end", p, 1)), "{log:?}");
            continue;
        }
        assert_eq!(
            s.skipped, 1,
            "partition {p}: the new owner did not find record 1 done in the revoke's commit: {s:?}\n{log:?}"
        );
        assert!(log.contains(&("end", p, 0)), "{log:?}");
        assert!(log.contains(&("end", p, 2)), "{log:?}");
        assert!(
            !log.contains(&("start", p, 1)),
            "record 1 ran again although the commit metadata said it was done: {log:?}"
        );
    }
    second.shutdown_blocking().expect("shutdown second");
    first.shutdown_blocking().expect("shutdown first");
}

/// The group's state and member ids as the coordinator describes them
/// (DescribeGroups), or `None` where the broker does not answer it (the
/// mock cluster).
pub fn group_members(bootstrap: &str, group: &str) -> Option<(String, Vec<String>)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("group reader");
    let list = c
        .fetch_group_list(Some(group), Duration::from_secs(10))
        .ok()?;
    let g = list.groups().iter().find(|g| g.name() == group)?;
    Some((
        g.state().to_string(),
        g.members().iter().map(|m| m.id().to_string()).collect(),
    ))
}

/// Row 8: a partition paused (its buffer is full while record 0 runs) for
/// longer than `max.poll.interval.ms` keeps its member in the group,
/// because the owner thread keeps polling while partitions are paused.
/// librdkafka leaves the group by itself when the application does not
/// poll for `max.poll.interval.ms`, even while its own thread keeps
/// heartbeating; so the pause lasts `timeout` + 2 s with
/// `max.poll.interval.ms` = `session.timeout.ms` = `timeout` (librdkafka
/// wants the poll interval at least the session timeout, and the broker's
/// `group.min.session.timeout.ms` bounds the session from below).
///
/// Seen from outside: the same member id is the group's only member after
/// the pause (where the broker answers DescribeGroups), heartbeats kept
/// coming after the timeouts ran out (where the broker's counters are
/// visible), and the partition's generation never changed (a member that
/// had left would rejoin under a new one).
pub fn row8_paused_partition_keeps_its_membership(broker: &TestBroker, timeout: Duration) {
    const HEARTBEAT: Duration = Duration::from_millis(500);
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, group) = (unique("row8"), unique("g8"));
    broker.create_topic(&rt, &topic, 1);
    let records: Vec<(Option<&str>, &str)> = (0..20).map(|_| (None, "x")).collect();
    produce(b, &topic, 0, &records);
    let log = Log::default();
    let (open, gate) = watch::channel(false);
    let mut cfg = config(Ordering::Partition, 1);
    cfg.engine.scheduler.max_buffered_per_partition = 4;
    cfg.engine.scheduler.resume_at_buffered = 1;
    let mut c = client(b, &group);
    let timeout_ms = timeout.as_millis().to_string();
    c.set("session.timeout.ms", &timeout_ms)
        .set("max.poll.interval.ms", &timeout_ms)
        .set("heartbeat.interval.ms", HEARTBEAT.as_millis().to_string());
    let pc = ParallelConsumer::start(
        c,
        &[topic.as_str()],
        cfg,
        rt.handle().clone(),
        gated_handler(log.clone(), [(0, 0)].into(), gate),
    )
    .expect("start");
    wait_until("paused", || {
        stats_of(&pc, &topic, 0).is_some_and(|s| s.paused)
    });
    let at_pause = stats_of(&pc, &topic, 0).expect("stats");
    let generation = at_pause.generation;
    assert!(
        at_pause.oldest_unfinished_age_ms.is_some(),
        "record 0 is unfinished"
    );
    let paused_at = Instant::now();
    let members_at_pause = group_members(b, &group);
    if let Some((state, members)) = &members_at_pause {
        assert_eq!(state, "Stable", "{members:?}");
        assert_eq!(members.len(), 1, "{members:?}");
    }
    // Stay paused for `window`, longer than `max.poll.interval.ms`; where
    // the broker's counters are visible, also wait for heartbeats after the
    // timeouts had run out.
    let window = timeout + Duration::from_secs(2);
    const LATE_HEARTBEATS: u64 = 3;
    let mut heartbeats_at_timeout = None;
    let deadline = paused_at + window + Duration::from_secs(20);
    loop {
        let s = stats_of(&pc, &topic, 0).expect("the partition was lost while paused");
        assert!(s.paused, "resumed while record 0 runs: {s:?}");
        assert_eq!(
            s.generation, generation,
            "a rebalance happened while paused"
        );
        let waited = paused_at.elapsed() >= window;
        // None: not visible (mock cluster, external broker)
        let late_heartbeats = broker.heartbeats().map(|now| {
            if paused_at.elapsed() < timeout {
                return 0;
            }
            now - *heartbeats_at_timeout.get_or_insert(now)
        });
        if waited && late_heartbeats.is_none_or(|n| n >= LATE_HEARTBEATS) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the member did not stay alive while paused: {late_heartbeats:?} heartbeats after the {timeout:?} timeouts ran out ({LATE_HEARTBEATS} wanted)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(paused_at.elapsed() > timeout);
    if let Some((_, before)) = &members_at_pause {
        let now = group_members(b, &group);
        assert_eq!(
            now,
            Some(("Stable".to_string(), before.clone())),
            "after {:?} paused (max.poll.interval.ms {timeout_ms}), the coordinator no longer has the member that was there at the pause",
            paused_at.elapsed()
        );
    }
    open.send(true).expect("open gate");
    wait_until("20 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 20)
    });
    // A member that had left the group while paused would have rejoined
    // under a new generation once it polled again.
    let s = stats_of(&pc, &topic, 0).expect("still owned");
    assert_eq!(
        s.generation, generation,
        "the member rejoined after the pause"
    );
    if let Some((_, before)) = &members_at_pause {
        assert_eq!(
            group_members(b, &group).map(|(_, m)| m).as_ref(),
            Some(before),
            "the member rejoined after the pause"
        );
    }
    pc.shutdown_blocking().expect("shutdown");
}

pub fn failing_record_goes_to_the_dead_letter_topic_with_its_reason(broker: &TestBroker) {
    let b = &broker.bootstrap();
    let rt = runtime();
    let (topic, dlt, group) = (unique("dlq"), unique("dlq-dead"), unique("gd"));
    broker.create_topic(&rt, &topic, 1);
    broker.create_topic(&rt, &dlt, 1);
    produce(
        b,
        &topic,
        0,
        &[(Some("k"), "ok"), (Some("k"), "poison"), (Some("k"), "ok")],
    );
    let mut cfg = config(Ordering::Partition, 1);
    cfg.on_failure = FailurePolicy::DeadLetter { topic: dlt.clone() };
    let pc = ParallelConsumer::start(
        client(b, &group),
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
    wait_until("3 committed", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    pc.shutdown_blocking().expect("shutdown");
    let m = first_record(b, &dlt);
    assert_eq!(m.payload(), Some(b"poison".as_slice()));
    assert_eq!(m.key(), Some(b"k".as_slice()));
    let headers = m.headers().expect("headers");
    let get = |name: &str| {
        headers
            .iter()
            .find(|h: &Header<'_, &[u8]>| h.key == name)
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).to_string())
    };
    assert_eq!(get(record::DLT_TOPIC).as_deref(), Some(topic.as_str()));
    assert_eq!(get(record::DLT_OFFSET).as_deref(), Some("1"));
    assert_eq!(get(record::DLT_ATTEMPTS).as_deref(), Some("2"));
    assert_eq!(
        get(record::DLT_ERROR).as_deref(),
        Some("cannot parse poison")
    );
}

/// The first record of partition 0 of `topic` (waiting up to a minute for
/// one).
pub fn first_record(bootstrap: &str, topic: &str) -> rdkafka::message::OwnedMessage {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("reader"))
        .create()
        .expect("reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    reader.assign(&tpl).expect("assign");
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "nothing in {topic}");
        if let Some(m) = reader.poll(Duration::from_millis(200)) {
            break m.expect("record").detach();
        }
    }
}

/// The first event `pick` accepts, within [`WAIT`].
pub async fn next_event<T>(
    rx: &mut tokio::sync::broadcast::Receiver<weir_parallel_consumer::driver::ConsumerEvent>,
    what: &str,
    mut pick: impl FnMut(&weir_parallel_consumer::driver::ConsumerEvent) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(WAIT, async {
        loop {
            match rx.recv().await {
                Ok(e) => {
                    if let Some(t) = pick(&e) {
                        return t;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    panic!("events closed before {what}")
                }
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no event: {what}"))
}
