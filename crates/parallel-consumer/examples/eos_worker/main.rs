//! One consumer process of the exactly-once end-to-end test
//! (`tests/exactly_once_e2e.rs`): reads an input topic in key order in
//! exactly-once mode and writes one output per input record (same key and
//! payload, header `from: PARTITION/OFFSET`) after a random handler latency
//! (1–8 ms), so that work is in flight when the test kills it.
//!
//! `--command-config FILE` adds librdkafka settings from a properties
//! file (`security.protocol`, `sasl.*`, `ssl.*` for a secured cluster).
//! Other settings come from the environment: `WEIR_BOOTSTRAP`, `WEIR_INPUT`,
//! `WEIR_OUTPUT`, `WEIR_GROUP`, `WEIR_TXN_ID` (its `transactional.id`),
//! `WEIR_PC_SEED` (latency seed), `WEIR_PC_CONCURRENCY` (default 32) and
//! `WEIR_PC_HOLD_AT`: from the transaction with this number on (counted
//! from 1 in this process), the first one that writes outputs is held: the
//! process stops in the middle of it, its outputs written and its offsets
//! sent but not committed, until it is killed (it exits with status 3 after
//! two minutes).
//!
//! Standard output, one line per transaction event:
//!
//! ```text
//! committed <txn> <outputs>
//! aborted <txn> <outputs>
//! holding <txn> <outputs>           the transaction is open; nothing more happens
//! ```
//!
//! The process shuts down cleanly (bounded wait for in-flight work, final
//! transaction, leave the group) when its standard input reaches end of
//! file.

#[path = "../common/command_config.rs"]
mod command_config;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use weir_parallel_consumer::driver::{
    DriverConfig, ExactlyOnceConfig, ParallelConsumer, TxnEvent, TxnObserver,
};
use weir_parallel_consumer::exactly_once::OutputRecord;
use weir_parallel_consumer::record::Record;
use weir_parallel_consumer::scheduler::Ordering;

const MIN_LATENCY_US: u64 = 1_000;
const MAX_LATENCY_US: u64 = 8_000;
/// How long a held transaction waits to be killed.
const HOLD_LIMIT: Duration = Duration::from_secs(120);

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

/// One line on standard output, flushed at once (the test reads it while
/// the process runs).
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn observer(hold_at: Option<u64>) -> TxnObserver {
    Arc::new(move |event: &TxnEvent| match event {
        TxnEvent::Committing(s) if hold_at.is_some_and(|n| s.id >= n) && s.outputs > 0 => {
            say(format!("holding {} {}", s.id, s.outputs));
            let since = Instant::now();
            while since.elapsed() < HOLD_LIMIT {
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("held transaction {} was not killed", s.id);
            std::process::exit(3);
        }
        TxnEvent::Committing(_) => {}
        TxnEvent::Committed(s) => say(format!("committed {} {}", s.id, s.outputs)),
        TxnEvent::Aborted { summary, error } => {
            eprintln!("transaction {} aborted: {error}", summary.id);
            say(format!("aborted {} {}", summary.id, summary.outputs));
        }
    })
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
    let input = env("WEIR_INPUT")?;
    let output = env("WEIR_OUTPUT")?;
    let group = env("WEIR_GROUP")?;
    let txn_id = env("WEIR_TXN_ID")?;
    let seed: u64 = env("WEIR_PC_SEED")?.parse()?;
    let concurrency: usize = std::env::var("WEIR_PC_CONCURRENCY")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(32);
    let hold_at: Option<u64> = std::env::var("WEIR_PC_HOLD_AT")
        .ok()
        .map(|v| v.parse())
        .transpose()?;

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
    config.commit_interval = Duration::from_millis(100);
    config.revoke_timeout = Duration::from_secs(10);
    config.shutdown_timeout = Duration::from_secs(10);
    let mut eos = ExactlyOnceConfig::new(txn_id);
    eos.transaction_timeout = Duration::from_secs(20);
    eos.observer = Some(observer(hold_at));
    let calls = Arc::new(AtomicU64::new(0));
    let consumer = ParallelConsumer::start_exactly_once(
        client,
        &[input.as_str()],
        config,
        eos,
        runtime.handle().clone(),
        move |record: Record| {
            let n = calls.fetch_add(1, AtomicOrdering::Relaxed);
            let latency = MIN_LATENCY_US + mix(seed ^ n) % (MAX_LATENCY_US - MIN_LATENCY_US + 1);
            let mut out = OutputRecord::to(output.clone())
                .payload(record.payload.clone().unwrap_or_default())
                .header(
                    "from",
                    Some(format!("{}/{}", record.partition, record.offset).into_bytes()),
                );
            if let Some(key) = &record.key {
                out = out.key(key.clone());
            }
            async move {
                tokio::time::sleep(Duration::from_micros(latency)).await;
                Ok::<_, String>(vec![out])
            }
        },
    )?;
    eprintln!(
        "eos worker {} consuming {input} as {group}",
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
        if !consumer.is_running() {
            break;
        }
        for p in consumer.stats() {
            eprintln!(
                "{}-{} gen={} position={} committed={:?} watermark={} in_flight={} waiting={}",
                p.topic,
                p.partition,
                p.generation,
                p.position,
                p.committed,
                p.effect_watermark,
                p.in_flight,
                p.waiting,
            );
        }
    }
    let report = consumer.shutdown_blocking()?;
    eprintln!("stopped: {report:?}");
    if let Some(e) = report.final_commit_error {
        return Err(format!("final transaction failed: {e}").into());
    }
    Ok(())
}
