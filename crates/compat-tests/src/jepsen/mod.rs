//! A Jepsen-style check of partition replication: a cluster of `weir
//! serve` processes, a workload of real librdkafka clients, a nemesis that
//! kills, stops, cuts off and restarts nodes, and a checker that reads
//! everything back.
//!
//! [`run`] does, in order:
//!
//! 1. starts [`Config::nodes`] combined nodes, on loopback, or each in its
//!    own network namespace when the partition fault is enabled and
//!    namespaces can be made (root); the run's clients then live in the hub
//!    namespace (the thread that drives everything enters it, and
//!    librdkafka's threads are born there);
//! 2. creates one topic, replication factor 3, `min.insync.replicas=2`,
//!    `unclean.leader.election.enable=false`, optionally `flush.messages=1`,
//!    and waits until every partition has a leader and a full ISR;
//! 3. starts the workload ([`workload`]): an idempotent acks=all producer
//!    writing unique values `w-<n>` and recording every delivery report,
//!    and consumers recording every record they see;
//! 4. runs the [`nemesis`](nemesis::Nemesis) for [`Config::duration`], one
//!    fault at a time, each healed before the next;
//! 5. heals everything, lets the producer resolve every record, waits for
//!    a leader and a full ISR everywhere and for the high watermarks to
//!    settle, stops the consumers;
//! 6. reads every partition from its start to its high watermark and hands
//!    history and log to the [`checker`].
//!
//! ```no_run
//! use weir_compat_tests::jepsen::{self, Config};
//!
//! let outcome = jepsen::run(&Config::short(true).with_env()).expect("the run completes");
//! println!("{}", outcome.summary());
//! assert_eq!(outcome.report.anomalies(), 0);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod checker;
mod nemesis;
mod nodes;
mod outcome;
mod workload;

pub use checker::{Acked, History, Read, Report, check};
pub use nemesis::{Event, Fault};
pub use outcome::Outcome;

use crate::netns::{Netns, NetnsError};
use crate::{HarnessError, skip_or_fail, weir_binary};
use nemesis::Nemesis;
use nodes::Cluster;
use workload::{ProducerShared, Watermarks};

/// The replication factor of the topic (the issue's RF=3).
pub const REPLICATION_FACTOR: usize = 3;
/// `min.insync.replicas` of the topic.
pub const MIN_INSYNC_REPLICAS: usize = 2;
const TOPIC: &str = "jepsen";
/// Start-up: elections, registrations, `__consumer_offsets`.
const READY: Duration = Duration::from_secs(90);
/// After healing: leaders and full ISRs everywhere, high watermarks still.
const SETTLE: Duration = Duration::from_secs(90);
/// The final read of every partition.
const FINAL_READ: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(200);

/// What one run does. Build it with [`Config::short`], adjust it with
/// [`Config::with_env`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Combined nodes (at least [`REPLICATION_FACTOR`]).
    pub nodes: usize,
    pub partitions: i32,
    /// How long the nemesis runs (the workload runs a little longer).
    pub duration: Duration,
    /// Seeds the nemesis schedule (kinds, victims, durations).
    pub seed: u64,
    /// The fault kinds enabled.
    pub faults: Vec<Fault>,
    /// `flush.messages=1` on the topic: an fsync per append.
    pub flush_every_message: bool,
    /// Consumers reading while the nemesis runs.
    pub consumers: usize,
    /// Records the producer sends per second.
    pub rate_per_sec: u32,
}

impl Config {
    /// The CI configuration: 3 nodes, 4 partitions, 20 s of every fault
    /// kind, 2 consumers, 200 records/s, a seed from the clock.
    pub fn short(flush_every_message: bool) -> Config {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Config {
            nodes: 3,
            partitions: 4,
            duration: Duration::from_secs(20),
            seed,
            faults: Fault::ALL.to_vec(),
            flush_every_message,
            consumers: 2,
            rate_per_sec: 200,
        }
    }

    /// Overrides from the environment: `WEIR_JEPSEN_SECS`,
    /// `WEIR_JEPSEN_NODES`, `WEIR_JEPSEN_PARTITIONS`, `WEIR_JEPSEN_SEED`,
    /// `WEIR_JEPSEN_RATE`, `WEIR_JEPSEN_CONSUMERS`, `WEIR_JEPSEN_NEMESES`
    /// (comma-separated: `kill,pause,partition,restart`; empty for none).
    pub fn with_env(mut self) -> Config {
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok()?.trim().parse().ok()
        }
        if let Some(s) = var::<u64>("WEIR_JEPSEN_SECS") {
            self.duration = Duration::from_secs(s);
        }
        self.nodes = var("WEIR_JEPSEN_NODES").unwrap_or(self.nodes);
        self.partitions = var("WEIR_JEPSEN_PARTITIONS").unwrap_or(self.partitions);
        self.seed = var("WEIR_JEPSEN_SEED").unwrap_or(self.seed);
        self.rate_per_sec = var("WEIR_JEPSEN_RATE").unwrap_or(self.rate_per_sec);
        self.consumers = var("WEIR_JEPSEN_CONSUMERS").unwrap_or(self.consumers);
        if let Ok(list) = std::env::var("WEIR_JEPSEN_NEMESES") {
            self.faults = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Fault::from_name(s).unwrap_or_else(|| {
                        panic!("WEIR_JEPSEN_NEMESES: unknown fault {s:?} (kill, pause, partition, restart)")
                    })
                })
                .collect();
        }
        self
    }

    pub fn validate(&self) -> Result<(), JepsenError> {
        let bad = |why: String| Err(JepsenError::Setup(why));
        if !(REPLICATION_FACTOR..=9).contains(&self.nodes) {
            return bad(format!("nodes = {}: 3 to 9", self.nodes));
        }
        if !(1..=64).contains(&self.partitions) {
            return bad(format!("partitions = {}: 1 to 64", self.partitions));
        }
        if !(1..=4).contains(&self.consumers) {
            return bad(format!("consumers = {}: 1 to 4", self.consumers));
        }
        if !(1..=10_000).contains(&self.rate_per_sec) {
            return bad(format!("rate = {}/s: 1 to 10000", self.rate_per_sec));
        }
        Ok(())
    }

    /// `--set` values every node gets besides its identity and listeners.
    fn broker_settings(&self) -> Vec<String> {
        [
            // Fast failover (the harness's FAST_FAILOVER).
            "broker.heartbeat.interval.ms=200",
            "broker.session.timeout.ms=3000",
            // A stopped follower leaves the ISR within a pause.
            "replica.lag.time.max.ms=3000",
            "min.insync.replicas=2",
        ]
        .into_iter()
        .map(String::from)
        .collect()
    }

    /// `--config` values of the topic.
    fn topic_configs(&self) -> Vec<String> {
        let mut c = vec![
            format!("min.insync.replicas={MIN_INSYNC_REPLICAS}"),
            "unclean.leader.election.enable=false".to_string(),
        ];
        if self.flush_every_message {
            c.push("flush.messages=1".to_string());
        }
        c
    }

    fn faults_text(&self, faults: &[Fault]) -> String {
        if faults.is_empty() {
            return "none".into();
        }
        faults
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why a run could not be completed (anomalies are not errors: they are
/// in the [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum JepsenError {
    #[error("jepsen setup: {0}")]
    Setup(String),
    #[error("node {id}: {reason}")]
    Node { id: i32, reason: String },
    #[error("{what}: not within {limit:?}; last seen: {last}\n{logs}")]
    Stuck {
        what: String,
        limit: Duration,
        last: String,
        logs: String,
    },
    #[error("{source}\nthe nodes' directories are kept: {kept:?}")]
    Kept {
        source: Box<JepsenError>,
        kept: Vec<std::path::PathBuf>,
    },
    #[error("client: {0}")]
    Client(#[from] rdkafka::error::KafkaError),
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The seeded generator of the nemesis (SplitMix64).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..=hi`, to the millisecond.
    pub(crate) fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.below(span + 1))
    }
}

/// Runs the whole check once (see the module doc) and reports what it found.
pub fn run(config: &Config) -> Result<Outcome, JepsenError> {
    config.validate()?;
    let bin = weir_binary()?.canonicalize()?;
    let mut faults = config.faults.clone();
    let netns = if faults.contains(&Fault::Partition) {
        if namespaces_supported() {
            Some(Netns::create(config.nodes, [78, 0])?)
        } else {
            skip_or_fail("ip netns (root) for the network-partition fault");
            eprintln!("jepsen: no network namespaces here: the partition fault is left out");
            faults.retain(|f| *f != Fault::Partition);
            None
        }
    } else {
        None
    };
    match &netns {
        Some(net) => thread::scope(|s| {
            let driver = s.spawn(|| {
                nodes::enter_namespace(&net.hub_ns())?;
                run_in(config, faults, &bin, Some(net))
            });
            driver
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
        None => run_in(config, faults, &bin, None),
    }
}

/// Polls `probe` until it returns `Ok` or `limit` passes.
fn wait_for<T>(
    cluster: &Cluster<'_>,
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T, JepsenError> {
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(JepsenError::Stuck {
                what: what.to_string(),
                limit,
                last,
                logs: cluster.log_tails(40),
            });
        }
        thread::sleep(POLL);
    }
}

/// Every node answers with every node registered, a controller, and every
/// partition of the topic (when `topic_partitions > 0`) led with a full ISR.
fn healthy(cluster: &Cluster<'_>, topic_partitions: i32) -> Result<(), String> {
    let ids = cluster.ids();
    for m in cluster.metadata_from_all()? {
        let brokers: Vec<i32> = m.brokers.keys().copied().collect();
        if brokers != ids || m.controller_id < 1 {
            return Err(format!(
                "brokers {brokers:?}, controller {}",
                m.controller_id
            ));
        }
        let parts = m.partitions(TOPIC);
        if parts.len() != topic_partitions.max(0) as usize {
            return Err(format!("{} partitions listed", parts.len()));
        }
        for p in parts {
            let mut isr = p.isr.clone();
            isr.sort_unstable();
            let mut replicas = p.replicas.clone();
            replicas.sort_unstable();
            if p.leader < 1 || replicas.len() != REPLICATION_FACTOR || isr != replicas {
                return Err(format!("{p:?}"));
            }
        }
    }
    Ok(())
}

/// [`Netns::supported`], asked by one run at a time and again after a
/// failure: its probe namespace is named after the process, so two runs in
/// one test binary probing at once can make each other's probe fail.
fn namespaces_supported() -> bool {
    static PROBE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = PROBE.lock().unwrap_or_else(|p| p.into_inner());
    (0..3).any(|attempt| {
        if attempt > 0 {
            thread::sleep(Duration::from_millis(300));
        }
        Netns::supported()
    })
}

fn run_in(
    config: &Config,
    faults: Vec<Fault>,
    bin: &std::path::Path,
    netns: Option<&Netns>,
) -> Result<Outcome, JepsenError> {
    let started = Instant::now();
    let mut cluster = Cluster::start(config, bin, netns)?;
    // A run that cannot finish leaves its nodes' directories for a look.
    exercise(config, faults, &mut cluster, started).map_err(|e| JepsenError::Kept {
        kept: cluster.keep_dirs(),
        source: Box::new(e),
    })
}

/// Steps 2 to 6 of the module doc, on a started cluster.
fn exercise(
    config: &Config,
    faults: Vec<Fault>,
    cluster: &mut Cluster<'_>,
    started: Instant,
) -> Result<Outcome, JepsenError> {
    let bootstrap = cluster.bootstrap();
    wait_for(cluster, "every node registered", READY, || {
        healthy(cluster, 0)
    })?;
    let partitions = config.partitions.to_string();
    let replication = REPLICATION_FACTOR.to_string();
    let mut args = vec![
        "topics",
        "--bootstrap-server",
        &bootstrap,
        "create",
        "--topic",
        TOPIC,
        "--partitions",
        &partitions,
        "--replication-factor",
        &replication,
        "--if-not-exists",
    ];
    let configs = config.topic_configs();
    for c in &configs {
        args.extend(["--config", c.as_str()]);
    }
    wait_for(cluster, "CreateTopics", READY, || {
        let out = cluster.cli(&args).map_err(|e| e.to_string())?;
        out.success()
            .then_some(())
            .ok_or_else(|| out.describe("weir topics create"))
    })?;
    wait_for(cluster, "leaders and full ISRs", READY, || {
        healthy(cluster, config.partitions)
    })?;

    let shared = Arc::new(ProducerShared::new());
    let consumers_stop = AtomicBool::new(false);
    let never = AtomicBool::new(false);
    let mut nemesis = Nemesis::new(faults.clone(), config.seed);
    let mut first_fault_value = None;
    let (driven, produced, consumed) = thread::scope(|s| {
        let producer = s.spawn(|| {
            workload::produce(
                &shared,
                &bootstrap,
                TOPIC,
                config.partitions,
                config.rate_per_sec,
            )
        });
        let consumers: Vec<_> = (0..config.consumers)
            .map(|_| {
                s.spawn(|| workload::consume(&bootstrap, TOPIC, config.partitions, &consumers_stop))
            })
            .collect();
        let driven = wait_for(
            cluster,
            "the first acknowledgements",
            READY,
            || match shared.acked() {
                0 => Err("none".into()),
                _ => Ok(()),
            },
        )
        .and_then(|()| {
            nemesis.run(cluster, TOPIC, config.duration, &never, || {
                first_fault_value = Some(shared.next.load(Ordering::Relaxed));
            })
        });
        // Whatever happened, heal, let every record resolve, and stop the
        // clients, so the scope can end.
        let healed = nemesis
            .restart_exited(cluster)
            .and_then(|()| cluster.heal_all());
        shared.stop.store(true, Ordering::Relaxed);
        let produced = join(producer);
        let settled = driven.and(healed).and_then(|()| {
            wait_for(
                cluster,
                "leaders and full ISRs after healing",
                SETTLE,
                || healthy(cluster, config.partitions),
            )
        });
        let marks = settled.and_then(|()| settle_high_watermarks(cluster, &bootstrap, config));
        consumers_stop.store(true, Ordering::Relaxed);
        let consumed: Vec<_> = consumers.into_iter().map(join).collect();
        (marks, produced, consumed)
    });
    let marks = driven?;
    produced?;
    let mut consumer_reads = Vec::new();
    let mut consumer_errors = 0;
    for c in consumed {
        let (reads, errors) = c?;
        consumer_reads.extend(reads);
        consumer_errors += errors;
    }
    let log = workload::read_all(&bootstrap, TOPIC, &marks, FINAL_READ).map_err(|last| {
        JepsenError::Stuck {
            what: "the final read".into(),
            limit: FINAL_READ,
            last,
            logs: cluster.log_tails(40),
        }
    })?;

    let deliveries = &shared.deliveries;
    let acked = deliveries
        .acked
        .lock()
        .map(|a| a.clone())
        .unwrap_or_default();
    let failed_reports = deliveries
        .failed
        .lock()
        .map(|f| f.clone())
        .unwrap_or_default();
    // Per partition and error: how many, first and last (nemesis time).
    let mut failures: BTreeMap<String, (usize, f64, f64)> = BTreeMap::new();
    let origin = nemesis.started();
    for f in &failed_reports {
        let at = f.at.saturating_duration_since(origin).as_secs_f64();
        let e = failures
            .entry(format!("partition {}: {}", f.partition, f.error))
            .or_insert((0, at, at));
        *e = (e.0 + 1, e.1.min(at), e.2.max(at));
    }
    let history = History {
        sent: shared.next.load(Ordering::Relaxed),
        acked,
        failed: failed_reports.iter().map(|f| f.value).collect(),
        consumer_reads,
    };
    let report = check(&history, &log);
    let keep = report.anomalies() > 0 || std::env::var_os("WEIR_JEPSEN_KEEP").is_some();
    let kept = if keep {
        cluster.keep_dirs()
    } else {
        Vec::new()
    };
    let logs = if report.anomalies() > 0 {
        cluster.log_tails(60)
    } else {
        String::new()
    };
    let producer_fatal = shared.fatal.lock().map(|f| f.clone()).unwrap_or_default();
    Ok(Outcome {
        config: config.clone(),
        network: cluster.network(),
        acked_after_first_fault: first_fault_value.map_or(0, |n| shared.acked_from(n)),
        injected: nemesis.counts(),
        exits: nemesis.exits,
        events: nemesis.events,
        faults,
        report,
        failures,
        producer_fatal,
        consumer_errors,
        elapsed: started.elapsed(),
        logs,
        kept,
    })
}

/// Waits until two readings of the high watermarks a second apart agree
/// (a new leader's high watermark has caught up with its followers), and
/// returns them.
fn settle_high_watermarks(
    cluster: &Cluster<'_>,
    bootstrap: &str,
    config: &Config,
) -> Result<Watermarks, JepsenError> {
    const APART: Duration = Duration::from_secs(1);
    let mut last: Option<(Instant, Watermarks)> = None;
    wait_for(cluster, "the high watermarks to settle", SETTLE, || {
        if last.as_ref().is_some_and(|(at, _)| at.elapsed() < APART) {
            return Err("waiting for the next reading".into());
        }
        let marks = workload::high_watermarks(bootstrap, TOPIC, config.partitions)
            .map_err(|e| e.to_string())?;
        if let Some((_, before)) = &last
            && *before == marks
        {
            return Ok(marks);
        }
        let seen = format!("{marks:?}");
        last = Some((Instant::now(), marks));
        Err(seen)
    })
}

/// Joins a scoped thread, passing its panic on.
fn join<T>(handle: thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
