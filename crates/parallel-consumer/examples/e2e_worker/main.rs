//! One consumer process of the end-to-end test (`tests/end_to_end.rs`):
//! consumes a topic in key order with a random handler latency (0–5 ms),
//! applies each record's effect once through the SQLite helper
//! (`sqlite_effects/effects.rs`) into a database shared with the other
//! processes, and appends every handler invocation to its own log file.
//!
//! Records carry an `event-id` header `KEY/SEQ` (the key and its per-key
//! sequence number) and an `ACCOUNT:DELTA` payload.
//!
//! Log lines (one `write` each, so a SIGKILL loses at most a torn last line):
//!
//! ```text
//! S <partition> <offset> <event-id>            handler started
//! E <partition> <offset> <event-id> done|dup   effect applied / already there
//! F <partition> <offset> <event-id>            attempt failed (retried)
//! ```
//!
//! `--command-config FILE` adds librdkafka settings from a properties
//! file (`security.protocol`, `sasl.*`, `ssl.*` for a secured cluster).
//! Other settings come from the environment: `WEIR_BOOTSTRAP`, `WEIR_TOPIC`,
//! `WEIR_GROUP`, `WEIR_DB`, `WEIR_PC_LOG`, `WEIR_PC_SEED` (latency seed),
//! `WEIR_PC_CONCURRENCY` (default 64). The process shuts down cleanly
//! (bounded wait for in-flight work, final commit, leave the group) when its
//! standard input reaches end of file.

// Also compiled into the tests, which use more of it.
#[allow(dead_code)]
#[path = "../sqlite_effects/effects.rs"]
mod effects;

#[path = "../common/command_config.rs"]
mod command_config;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use effects::{Applied, Change, EffectStore};
use rdkafka::ClientConfig;
use weir_parallel_consumer::driver::{DriverConfig, ParallelConsumer};
use weir_parallel_consumer::record::{Record, RetryPolicy};
use weir_parallel_consumer::scheduler::Ordering;

/// Longest random handler latency.
const MAX_LATENCY_US: u64 = 5_000;

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

/// splitmix64: a well-mixed 64-bit value from a counter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What every handler shares in one process.
struct Worker {
    store: Mutex<EffectStore>,
    log: Mutex<File>,
    seed: u64,
    calls: AtomicU64,
}

impl Worker {
    /// One line, one `write`: lines of concurrent handlers never interleave
    /// and a killed process leaves at most its last line torn.
    fn log(&self, line: String) -> Result<(), String> {
        let mut f = self.log.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(line.as_bytes()).map_err(|e| e.to_string())
    }
}

async fn handle(worker: Arc<Worker>, record: Record) -> Result<(), String> {
    let event_id = record.event_id();
    let (p, o) = (record.partition, record.offset);
    worker.log(format!("S {p} {o} {event_id}\n"))?;
    match apply(&worker, &record, &event_id).await {
        Ok(applied) => {
            let what = match applied {
                Applied::Done => "done",
                Applied::Duplicate => "dup",
            };
            worker.log(format!("E {p} {o} {event_id} {what}\n"))
        }
        Err(e) => {
            // The attempt is over (the driver retries it).
            worker.log(format!("F {p} {o} {event_id}\n"))?;
            Err(e)
        }
    }
}

/// Waits the random latency, then applies the effect once.
async fn apply(worker: &Arc<Worker>, record: &Record, event_id: &str) -> Result<Applied, String> {
    let n = worker.calls.fetch_add(1, AtomicOrdering::Relaxed);
    let latency = mix(worker.seed ^ n) % (MAX_LATENCY_US + 1);
    tokio::time::sleep(Duration::from_micros(latency)).await;
    let change =
        Change::parse(record.payload.as_deref().unwrap_or_default()).map_err(|e| e.to_string())?;
    // SQLite blocks (and waits for other processes' locks): keep it off the
    // async workers.
    let w = worker.clone();
    let id = event_id.to_string();
    tokio::task::spawn_blocking(move || {
        let mut store = w.store.lock().unwrap_or_else(|p| p.into_inner());
        store.apply(&id, &change).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("effect task failed: {e}"))?
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let bootstrap = env("WEIR_BOOTSTRAP")?;
    let topic = env("WEIR_TOPIC")?;
    let group = env("WEIR_GROUP")?;
    let db = env("WEIR_DB")?;
    let log = env("WEIR_PC_LOG")?;
    let seed: u64 = env("WEIR_PC_SEED")?.parse()?;
    let concurrency: usize = std::env::var("WEIR_PC_CONCURRENCY")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(64);

    let worker = Arc::new(Worker {
        store: Mutex::new(EffectStore::open_shared(&db, Duration::from_secs(30))?),
        log: Mutex::new(OpenOptions::new().create(true).append(true).open(&log)?),
        seed,
        calls: AtomicU64::new(0),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("max.poll.interval.ms", "60000");
    command_config::apply_from_args(&mut client)?;
    let mut config = DriverConfig::default();
    config.engine.scheduler.ordering = Ordering::Key;
    config.engine.scheduler.max_concurrency = concurrency;
    config.commit_interval = Duration::from_millis(200);
    // Far above the handler latency: a revoke never abandons a task.
    config.revoke_timeout = Duration::from_secs(10);
    config.shutdown_timeout = Duration::from_secs(10);
    // SQLite busy beyond its own timeout is retried, never skipped.
    config.retry = RetryPolicy {
        max_attempts: 10,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_secs(1),
    };
    let handler_worker = worker.clone();
    let consumer = ParallelConsumer::start(
        client,
        &[topic.as_str()],
        config,
        runtime.handle().clone(),
        move |record| handle(handler_worker.clone(), record),
    )?;
    eprintln!(
        "e2e worker {} consuming {topic} as {group}",
        std::process::id()
    );

    // End of standard input is the stop signal.
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = stop_tx.send(());
    });
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
        stop_rx.recv_timeout(Duration::from_secs(5))
    {
        for p in consumer.stats() {
            eprintln!(
                "{}-{} gen={} position={} committed={:?} watermark={} in_flight={} waiting={} paused={}",
                p.topic,
                p.partition,
                p.generation,
                p.position,
                p.committed,
                p.effect_watermark,
                p.in_flight,
                p.waiting,
                p.paused
            );
        }
    }
    let report = consumer.shutdown_blocking()?;
    eprintln!("stopped: {report:?}");
    if let Some(e) = report.final_commit_error {
        return Err(format!("final commit failed: {e}").into());
    }
    Ok(())
}
