//! Throughput and CPU overhead of the parallel consumer against a real
//! broker, printed as Markdown tables:
//!
//! 1. A handler that sleeps 10 ms per record, at concurrency 1, 16 and 256
//!    (unordered and key order with 10 000 keys), versus a plain sequential
//!    rdkafka consumer (poll, sleep 10 ms, synchronous commit of that
//!    record). Each throughput is given as a ratio to the ideal
//!    (concurrency / 10 ms). The handler's sleep is exact (a timer thread
//!    of this benchmark, see [`PreciseTimer`], like the plain consumer's
//!    `std::thread::sleep`); the 256 rows are repeated with
//!    `tokio::time::sleep`, which lasts until the timer wheel's next
//!    millisecond tick after the 10 ms (about 11.1 ms).
//! 2. CPU time per record with a no-op handler (getrusage of this whole
//!    process: owner thread, librdkafka threads, handler runtime), versus a
//!    plain rdkafka consumer reading the same records.
//! 3. Exactly-once mode against at-least-once on the same records, with a
//!    handler returning one output per record (100 bytes, written in the
//!    transactions), both with the 10 ms handler at concurrency 256 and with
//!    a no-op handler.
//!
//! ```text
//! WEIR_BIN=target/release/weir cargo bench -p weir-parallel-consumer --bench throughput
//! ```
//!
//! `WEIR_PC_BENCH_SECTIONS` picks sections (comma-separated `sleep`,
//! `noop`, `eos`; all by default).
//!
//! The broker is `WEIR_PC_BOOTSTRAP` when set, else a `weir serve` started
//! like the tests start it (`WEIR_BIN` picks the binary).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::WeirProcess;
use weir_parallel_consumer::driver::{DriverConfig, ExactlyOnceConfig, ParallelConsumer};
use weir_parallel_consumer::exactly_once::OutputRecord;
use weir_parallel_consumer::record::Record;
use weir_parallel_consumer::scheduler::Ordering;

const PARTITIONS: i32 = 8;
const KEYS: u64 = 10_000;
const SLEEP: Duration = Duration::from_millis(10);
/// Records per run: about this long at the ideal rate.
const IDEAL_RUN: Duration = Duration::from_secs(4);
const NOOP_RECORDS: u64 = 200_000;
const RUN_WAIT: Duration = Duration::from_secs(180);

/// How a handler waits its 10 ms.
#[derive(Clone, Copy)]
enum Sleep {
    /// `tokio::time::sleep`: rounded up to the timer wheel's millisecond.
    Tokio(Duration),
    /// [`PreciseTimer`]: the kernel's high-resolution timer.
    Precise(Duration),
}

impl Sleep {
    async fn run(self) {
        match self {
            Sleep::Tokio(d) => tokio::time::sleep(d).await,
            Sleep::Precise(d) => PreciseTimer::get().sleep(d).await,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Sleep::Tokio(_) => "tokio",
            Sleep::Precise(_) => "exact",
        }
    }
}

/// One pending wake-up: ordered by deadline, then by arrival.
struct Wake(Instant, u64, tokio::sync::oneshot::Sender<()>);

impl PartialEq for Wake {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Wake {}
impl PartialOrd for Wake {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Wake {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

/// Wakes futures at their deadlines from a thread of its own that sleeps
/// on a condition variable until the earliest one (a futex wait with a
/// high-resolution timeout, timer slack set to 1 ns): tens of
/// microseconds late instead of up to a millisecond. The handler then
/// takes the 10 ms it is meant to, as the plain consumer's
/// `std::thread::sleep` does.
struct PreciseTimer {
    pending: Mutex<(BinaryHeap<Reverse<Wake>>, u64)>,
    changed: Condvar,
}

impl PreciseTimer {
    fn get() -> &'static PreciseTimer {
        static TIMER: OnceLock<&'static PreciseTimer> = OnceLock::new();
        TIMER.get_or_init(|| {
            let timer: &'static PreciseTimer = Box::leak(Box::new(PreciseTimer {
                pending: Mutex::default(),
                changed: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("bench-timer".into())
                .spawn(move || timer.run())
                .expect("timer thread");
            timer
        })
    }

    async fn sleep(&self, d: Duration) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let deadline = Instant::now() + d;
        {
            let mut g = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let earliest = g.0.peek().is_none_or(|Reverse(w)| deadline < w.0);
            g.1 += 1;
            let seq = g.1;
            g.0.push(Reverse(Wake(deadline, seq, tx)));
            if earliest {
                self.changed.notify_one();
            }
        }
        let _ = rx.await;
    }

    #[allow(unsafe_code)]
    fn run(&self) {
        // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only
        // this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        let mut g = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            while g.0.peek().is_some_and(|Reverse(w)| w.0 <= now) {
                if let Some(Reverse(w)) = g.0.pop() {
                    let _ = w.2.send(());
                }
            }
            g = match g.0.peek() {
                Some(Reverse(w)) => {
                    let wait = w.0 - now;
                    self.changed
                        .wait_timeout(g, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.changed.wait(g).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

fn unique(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("pc-bench-{name}-{nanos}")
}

/// CPU time (user + system) of this process so far, all threads.
#[allow(unsafe_code)]
fn process_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` into the pointer it is given,
    // which points to a zeroed, properly aligned `rusage` we own.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage failed");
    // SAFETY: an all-zero `rusage` (plain integers) is a valid value, and
    // getrusage filled it in.
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn create_topic(rt: &tokio::runtime::Runtime, bootstrap: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = rt
        .block_on(admin.create_topics(
            [&NewTopic::new(
                topic,
                PARTITIONS,
                TopicReplication::Fixed(1),
            )],
            &opts,
        ))
        .expect("create_topics");
    for r in results {
        r.unwrap_or_else(|(name, code)| panic!("creating {name}: {code:?}"));
    }
}

/// A fresh topic with `n` records keyed by `KEYS` values.
fn topic_with(rt: &tokio::runtime::Runtime, bootstrap: &str, n: u64) -> String {
    let topic = unique("t");
    create_topic(rt, bootstrap, &topic);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", "500000")
        .create()
        .expect("producer");
    let payload = [b'x'; 100];
    for i in 0..n {
        let key = format!("key-{}", i.wrapping_mul(7919) % KEYS);
        loop {
            let r = BaseRecord::<str, [u8]>::to(&topic)
                .key(&key)
                .payload(&payload);
            match producer.send(r) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(20));
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(120)).expect("flush");
    topic
}

fn client(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("group.id", unique("g"))
        .set("auto.offset.reset", "earliest");
    c
}

/// What a parallel run measured.
struct Run {
    records: u64,
    /// From the first handler start to the last handler end.
    elapsed: Duration,
    cpu: Duration,
    /// Mean time a handler call took (its sleep included), when measured.
    handler_mean: Option<Duration>,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
}

/// Consumes `records` records of `topic` with the parallel consumer; with
/// `output`, in exactly-once mode writing one output per record there.
#[allow(clippy::too_many_arguments)]
fn parallel(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    topic: &str,
    records: u64,
    ordering: Ordering,
    concurrency: usize,
    sleep: Option<Sleep>,
    output: Option<&str>,
) -> Run {
    let done = Arc::new(AtomicU64::new(0));
    let busy_nanos = Arc::new(AtomicU64::new(0));
    let first_start: Arc<OnceLock<Instant>> = Arc::default();
    let last_end: Arc<Mutex<Option<Instant>>> = Arc::default();
    let mut config = DriverConfig::default();
    config.engine.scheduler.ordering = ordering;
    config.engine.scheduler.max_concurrency = concurrency;
    let handler = {
        let (done, first_start, last_end) = (done.clone(), first_start.clone(), last_end.clone());
        let busy_nanos = busy_nanos.clone();
        let output = output.map(str::to_string);
        move |r: Record| {
            let (done, first_start, last_end) =
                (done.clone(), first_start.clone(), last_end.clone());
            let busy_nanos = busy_nanos.clone();
            let out: Vec<OutputRecord> = output
                .iter()
                .map(|o| OutputRecord::to(o.clone()).payload(r.payload.clone().unwrap_or_default()))
                .collect();
            async move {
                let started = Instant::now();
                first_start.get_or_init(|| started);
                if let Some(s) = sleep {
                    s.run().await;
                }
                let now = Instant::now();
                let took = u64::try_from((now - started).as_nanos()).unwrap_or(u64::MAX);
                busy_nanos.fetch_add(took, AtomicOrdering::Relaxed);
                let mut last = last_end.lock().unwrap_or_else(|p| p.into_inner());
                done.fetch_add(1, AtomicOrdering::SeqCst);
                *last = Some(last.map_or(now, |l| l.max(now)));
                Ok::<_, String>(out)
            }
        }
    };
    let cpu_before = process_cpu();
    let pc = match output {
        None => ParallelConsumer::start(
            client(bootstrap),
            &[topic],
            config,
            rt.handle().clone(),
            move |r: Record| {
                let f = handler(r);
                async move { f.await.map(|_| ()) }
            },
        ),
        Some(_) => ParallelConsumer::start_exactly_once(
            client(bootstrap),
            &[topic],
            config,
            ExactlyOnceConfig::new(unique("txn")),
            rt.handle().clone(),
            handler,
        ),
    }
    .expect("start");
    let deadline = Instant::now() + RUN_WAIT;
    while done.load(AtomicOrdering::SeqCst) < records {
        assert!(
            Instant::now() < deadline,
            "run did not finish: {} of {records}",
            done.load(AtomicOrdering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let cpu = process_cpu() - cpu_before;
    pc.shutdown_blocking().expect("shutdown");
    let start = *first_start.get().expect("a record ran");
    let end = last_end
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .expect("a record ended");
    Run {
        records,
        elapsed: end - start,
        cpu,
        handler_mean: Some(Duration::from_nanos(
            busy_nanos.load(AtomicOrdering::Relaxed) / records.max(1),
        )),
    }
}

/// A plain rdkafka consumer: poll one record, optionally sleep, optionally
/// commit that record synchronously.
fn plain(
    bootstrap: &str,
    topic: &str,
    records: u64,
    sleep: Option<Duration>,
    commit_each: bool,
) -> Run {
    let mut c = client(bootstrap);
    if commit_each {
        c.set("enable.auto.commit", "false");
    }
    let consumer: BaseConsumer = c.create().expect("consumer");
    let cpu_before = process_cpu();
    consumer.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + RUN_WAIT;
    let mut seen = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    while seen < records {
        assert!(Instant::now() < deadline, "plain run: {seen} of {records}");
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("record");
        first.get_or_insert_with(Instant::now);
        if let Some(d) = sleep {
            std::thread::sleep(d);
        }
        if commit_each {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(m.topic(), m.partition(), Offset::Offset(m.offset() + 1))
                .expect("tpl");
            consumer.commit(&tpl, CommitMode::Sync).expect("commit");
        }
        seen += 1;
        last = Instant::now();
    }
    let cpu = process_cpu() - cpu_before;
    Run {
        records,
        elapsed: last - first.expect("a record came"),
        cpu,
        handler_mean: None,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut weir = None;
    let bootstrap = match std::env::var("WEIR_PC_BOOTSTRAP") {
        Ok(b) if !b.is_empty() => b,
        _ => weir
            .insert(
                WeirProcess::start_with_args(&["--set", "group.initial.rebalance.delay.ms=0"])
                    .unwrap_or_else(|e| panic!("weir: {e}")),
            )
            .bootstrap()
            .to_string(),
    };
    println!(
        "broker {bootstrap}, {PARTITIONS} partitions, {KEYS} keys, handler sleeps {SLEEP:?}\n"
    );
    let sections = std::env::var("WEIR_PC_BENCH_SECTIONS").unwrap_or_default();
    let section = |name: &str| sections.is_empty() || sections.split(',').any(|s| s == name);

    // The ideal is concurrency / 10 ms; the handlers' own mean is given
    // too, with the rate as a share of concurrency / mean (a tokio sleep
    // of 10 ms lasts until the timer's next millisecond tick after it).
    let row = |name: &str, timer: &str, ordering: &str, c: usize, run: &Run| {
        let ideal = c as f64 / SLEEP.as_secs_f64();
        let (mean, of_mean) = match run.handler_mean {
            Some(m) if !m.is_zero() => (
                format!("{:.2}", m.as_secs_f64() * 1e3),
                format!("{:.3}", run.per_second() * m.as_secs_f64() / c as f64),
            ),
            _ => ("-".to_string(), "-".to_string()),
        };
        println!(
            "| {name} | {timer} | {ordering} | {c} | {} | {:.0} | {ideal:.0} | {:.3} | {mean} | {of_mean} |",
            run.records,
            run.per_second(),
            run.per_second() / ideal
        );
    };
    let per_run = |c: usize| (IDEAL_RUN.as_secs_f64() * c as f64 / SLEEP.as_secs_f64()) as u64;
    let header = || {
        println!(
            "| consumer | sleep | ordering | concurrency | records | records/s | ideal/s | ratio | handler mean ms | ratio to mean |"
        );
        println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    };
    if section("sleep") {
        header();
        let n = per_run(1);
        let topic = topic_with(&rt, &bootstrap, n);
        let run = plain(&bootstrap, &topic, n, Some(SLEEP), true);
        row(
            "plain rdkafka (poll, sleep, commit)",
            "thread",
            "partition",
            1,
            &run,
        );
        let runs = [1usize, 16, 256]
            .map(|c| (c, Sleep::Precise(SLEEP)))
            .into_iter()
            .chain([(256, Sleep::Tokio(SLEEP))]);
        for (c, sleep) in runs {
            let n = per_run(c);
            for (ordering, name) in [(Ordering::Unordered, "unordered"), (Ordering::Key, "key")] {
                let topic = topic_with(&rt, &bootstrap, n);
                let run = parallel(&rt, &bootstrap, &topic, n, ordering, c, Some(sleep), None);
                row("parallel consumer", sleep.name(), name, c, &run);
            }
        }
    }

    let cpu_header = || {
        println!("\n| consumer (no-op handler) | records | CPU ms | CPU µs/record | records/s |");
        println!("| --- | ---: | ---: | ---: | ---: |");
    };
    let cpu_row = |name: &str, run: &Run| {
        println!(
            "| {name} | {} | {:.0} | {:.2} | {:.0} |",
            run.records,
            run.cpu.as_secs_f64() * 1e3,
            run.cpu.as_secs_f64() * 1e6 / run.records as f64,
            run.per_second()
        );
    };
    if section("noop") {
        cpu_header();
        let topic = topic_with(&rt, &bootstrap, NOOP_RECORDS);
        let run = plain(&bootstrap, &topic, NOOP_RECORDS, None, false);
        cpu_row("plain rdkafka (poll loop, auto commit)", &run);
        for (ordering, name) in [(Ordering::Unordered, "unordered"), (Ordering::Key, "key")] {
            let run = parallel(
                &rt,
                &bootstrap,
                &topic,
                NOOP_RECORDS,
                ordering,
                256,
                None,
                None,
            );
            cpu_row(&format!("parallel consumer, {name}, concurrency 256"), &run);
        }
    }

    if section("eos") {
        // Same records for both modes; the exactly-once runs write one
        // output per record into a topic of their own.
        let modes = |rt: &tokio::runtime::Runtime, topic: &str, n: u64, sleep| {
            let at_least_once = parallel(rt, &bootstrap, topic, n, Ordering::Key, 256, sleep, None);
            let output = unique("out");
            create_topic(rt, &bootstrap, &output);
            let exactly_once = parallel(
                rt,
                &bootstrap,
                topic,
                n,
                Ordering::Key,
                256,
                sleep,
                Some(&output),
            );
            (at_least_once, exactly_once)
        };
        println!("\nExactly-once vs at-least-once, key order, concurrency 256:");
        header();
        let n = per_run(256);
        let topic = topic_with(&rt, &bootstrap, n);
        let sleep = Sleep::Precise(SLEEP);
        let (alo, eos) = modes(&rt, &topic, n, Some(sleep));
        row("at-least-once", sleep.name(), "key", 256, &alo);
        row(
            "exactly-once (1 output/record)",
            sleep.name(),
            "key",
            256,
            &eos,
        );
        cpu_header();
        let topic = topic_with(&rt, &bootstrap, NOOP_RECORDS);
        let (alo, eos) = modes(&rt, &topic, NOOP_RECORDS, None);
        cpu_row("at-least-once, key, concurrency 256", &alo);
        cpu_row("exactly-once (1 output/record), key, concurrency 256", &eos);
    }
}
