//! `weir perf`: throughput and latency tools, the equivalents of Kafka's
//! `kafka-producer-perf-test` and `kafka-consumer-perf-test`, plus `e2e`
//! (end-to-end latency at a fixed rate, see [`e2e`]).

pub mod e2e;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use hdrhistogram::Histogram;
use weir_protocol::records::{BatchIter, DecompressLimits, RecordBatchBuilder};

use super::command_config::{COMMON_PROPERTIES, CommandConfig, check_supported, is_common};
use super::common::{
    Bootstrap, DEFAULT_MAX_BLOCK, now_ms, parse_acks, parse_compression, parse_kv, producer_topic,
    run_async,
};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    tool: Tool,
}

#[derive(clap::Subcommand)]
enum Tool {
    /// Produce records as fast as allowed and report throughput and latency.
    Produce(ProduceArgs),
    /// Consume records from the beginning and report throughput.
    Consume(ConsumeArgs),
    /// End-to-end latency at a fixed rate (producer and consumer in this
    /// process), measured from each record's intended send time.
    E2e(E2eArgs),
}

#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  weir perf e2e --topic lat --partitions 16 --throughput 50000 --record-size 1024 --duration 30"
)]
struct E2eArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    /// Records per second, sent on a fixed schedule.
    #[arg(long)]
    throughput: u64,
    /// Value bytes per record (at least 16: send time and sequence).
    #[arg(long = "record-size", default_value_t = 1024)]
    record_size: usize,
    /// Records to send (or give --duration).
    #[arg(long = "num-records", required_unless_present = "duration")]
    num_records: Option<u64>,
    /// Seconds to run (num-records = throughput × duration).
    #[arg(long)]
    duration: Option<f64>,
    /// Create the topic with this many partitions if it does not exist.
    #[arg(long)]
    partitions: Option<i32>,
    /// Producer properties: acks (default 1), batch.size (per partition and
    /// request, default 1048576), max.block.ms, and the common client
    /// properties; they override --command-config.
    #[arg(long = "producer-props", value_parser = parse_kv, num_args = 1..)]
    producer_props: Vec<(String, String)>,
    /// Stop waiting for missing records this long after the last one was sent.
    #[arg(long = "timeout", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  weir perf produce --topic perf --num-records 1000000 --record-size 1024 --throughput -1 \\\n      --producer-props acks=1 batch.size=1048576 linger.ms=5 compression.type=none"
)]
struct ProduceArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    #[arg(long = "num-records")]
    num_records: u64,
    #[arg(long = "record-size")]
    record_size: usize,
    /// Records per second at most; -1 for no limit.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    throughput: i64,
    /// Producer properties: acks, batch.size, linger.ms, compression.type,
    /// max.block.ms, and the common client properties; they override
    /// --command-config.
    #[arg(long = "producer-props", value_parser = parse_kv, num_args = 1..)]
    producer_props: Vec<(String, String)>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(after_help = "Example:\n  weir perf consume --topic perf --messages 1000000")]
struct ConsumeArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    /// Records to consume.
    #[arg(long)]
    messages: u64,
    /// Bytes per fetch request [default: fetch.max.bytes of
    /// --command-config, else 52428800]
    #[arg(long = "fetch-size")]
    fetch_size: Option<i32>,
    /// Give up after this long without data.
    #[arg(long = "timeout", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> ExitCode {
    match args.tool {
        Tool::Produce(a) => run_async(produce(a)),
        Tool::Consume(a) => run_async(consume(a)),
        Tool::E2e(a) => match run_e2e(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}

/// Properties `weir perf e2e` applies from `--command-config` and
/// `--producer-props`, besides the common ones.
const E2E_PROPERTIES: &[&str] = &["acks", "batch.size", "max.block.ms"];

fn run_e2e(a: E2eArgs) -> Result<()> {
    let config = producer_config(&a.bootstrap, &a.producer_props, E2E_PROPERTIES, &[])?;
    let acks = config.get("acks").map(parse_acks).transpose()?.unwrap_or(1);
    let batch_size = config.parse("batch.size")?.unwrap_or(1 << 20);
    let num_records = match (a.num_records, a.duration) {
        (Some(n), _) => n,
        (None, Some(d)) if d > 0.0 => (d * a.throughput as f64).ceil() as u64,
        _ => bail!("give --num-records or a positive --duration"),
    };
    let spec = e2e::E2eSpec {
        client: a.bootstrap.settings(&config)?,
        topic: a.topic,
        throughput: a.throughput,
        record_size: a.record_size,
        num_records,
        partitions: a.partitions,
        max_block: config.millis("max.block.ms")?.unwrap_or(DEFAULT_MAX_BLOCK),
        acks,
        batch_size,
        tail_timeout: Duration::from_millis(a.timeout_ms),
    };
    let summary = e2e::run(&spec)?;
    if a.json {
        println!("{}", summary.json());
    } else {
        println!("{}", summary.text());
    }
    if summary.received < summary.sent {
        bail!(
            "{} of {} records never arrived",
            summary.sent - summary.received,
            summary.sent
        );
    }
    Ok(())
}

/// Properties `weir perf produce` applies from `--command-config` and
/// `--producer-props`, besides the common ones.
const PRODUCER_PROPERTIES: &[&str] = &[
    "acks",
    "batch.size",
    "linger.ms",
    "compression.type",
    "max.block.ms",
];
/// Producer properties `--producer-props` accepts for command-line
/// compatibility with Kafka's tool and does not use.
const IGNORED_PRODUCER_PROPS: &[&str] = &[
    "buffer.memory",
    "enable.idempotence",
    "max.in.flight.requests.per.connection",
];

/// `--command-config` with `--producer-props` over it. Properties of the
/// file the tool does not apply are warned about; in `--producer-props`
/// they are an error (other than `ignored` ones), as before the file.
fn producer_config(
    bootstrap: &Bootstrap,
    props: &[(String, String)],
    applied: &[&str],
    ignored: &[&str],
) -> Result<CommandConfig> {
    let mut config = bootstrap.load_config()?;
    config.warn_unknown(applied);
    for (k, v) in props {
        let k = k.as_str();
        if ignored.contains(&k) {
            continue;
        }
        if !is_common(k) && !applied.contains(&k) {
            check_supported(k, v)?;
            bail!(
                "unsupported producer property {k:?} ({})",
                [COMMON_PROPERTIES, applied].concat().join(", ")
            );
        }
        config.set(k, v)?;
    }
    Ok(config)
}

struct ProducerProps {
    acks: i16,
    batch_size: usize,
    linger: Duration,
    compression: weir_protocol::records::Compression,
    max_block: Duration,
}

impl ProducerProps {
    fn new(config: &CommandConfig) -> Result<ProducerProps> {
        Ok(ProducerProps {
            acks: config
                .get("acks")
                .map(parse_acks)
                .transpose()?
                .unwrap_or(-1),
            batch_size: config.parse("batch.size")?.unwrap_or(16 * 1024),
            linger: config
                .millis("linger.ms")?
                .unwrap_or(Duration::from_millis(5)),
            compression: config
                .get("compression.type")
                .map(parse_compression)
                .transpose()?
                .unwrap_or(weir_protocol::records::Compression::None),
            max_block: config.millis("max.block.ms")?.unwrap_or(DEFAULT_MAX_BLOCK),
        })
    }
}

/// Periodic progress, one line every 5 s (Kafka's format), or a single
/// refreshing line on a terminal.
struct Progress {
    tty: bool,
    window_start: Instant,
    window_records: u64,
    window_bytes: u64,
    window_latency: Histogram<u64>,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            window_start: Instant::now(),
            window_records: 0,
            window_bytes: 0,
            window_latency: Histogram::new(3).expect("valid sigfig"),
        }
    }

    fn record(&mut self, records: u64, bytes: u64, latency_ms: u64) {
        self.window_records += records;
        self.window_bytes += bytes;
        self.window_latency.record_n(latency_ms, records).ok();
        let elapsed = self.window_start.elapsed();
        if elapsed >= Duration::from_secs(5) {
            let secs = elapsed.as_secs_f64();
            let line = format!(
                "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.1} ms avg latency, {:.1} ms max latency.",
                self.window_records,
                self.window_records as f64 / secs,
                self.window_bytes as f64 / secs / (1024.0 * 1024.0),
                self.window_latency.mean(),
                self.window_latency.max() as f64
            );
            if self.tty {
                eprint!("\r{line}");
            } else {
                eprintln!("{line}");
            }
            *self = Progress {
                tty: self.tty,
                ..Progress::new()
            };
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

async fn produce(a: ProduceArgs) -> Result<()> {
    let config = producer_config(
        &a.bootstrap,
        &a.producer_props,
        PRODUCER_PROPERTIES,
        IGNORED_PRODUCER_PROPS,
    )?;
    let props = ProducerProps::new(&config)?;
    let mut client = a.bootstrap.settings(&config)?.connect().await?;
    let topic = producer_topic(&mut client, &a.topic, props.max_block).await?;
    let partitions: Vec<(i32, i32)> = topic
        .partitions
        .iter()
        .map(|p| (p.partition, p.leader))
        .collect();
    if partitions.is_empty() {
        bail!("topic {} has no partitions", a.topic);
    }
    // One random payload, reused: the broker does not look into values.
    let payload = Bytes::from(
        (0..a.record_size)
            .map(|i| b'A' + (i % 26) as u8)
            .collect::<Vec<u8>>(),
    );
    let mut latency = Histogram::<u64>::new(3).expect("valid sigfig");
    let mut progress = Progress::new();
    let start = Instant::now();
    let mut sent = 0u64;
    let mut next_partition = 0usize;
    let mut counts: HashMap<i32, u64> = HashMap::new();
    while sent < a.num_records {
        let (partition, leader) = partitions[next_partition % partitions.len()];
        next_partition += 1;
        let mut b = RecordBatchBuilder::new(props.compression);
        let batch_start = Instant::now();
        let mut n = 0u64;
        while sent + n < a.num_records
            && (n == 0 || b.estimated_size() + a.record_size + 16 <= props.batch_size)
        {
            b.push(now_ms(), None, Some(payload.clone()), vec![])?;
            n += 1;
            if a.throughput > 0 {
                // Pace to the requested rate.
                let due = Duration::from_secs_f64((sent + n) as f64 / a.throughput as f64);
                let elapsed = start.elapsed();
                if due > elapsed {
                    tokio::time::sleep(due - elapsed).await;
                }
                if batch_start.elapsed() >= props.linger {
                    break;
                }
            }
        }
        let bytes = b.build()?.into_bytes();
        client
            .produce(&a.topic, partition, bytes, props.acks, leader)
            .await?;
        let ms = batch_start.elapsed().as_millis() as u64;
        latency.record_n(ms, n).ok();
        progress.record(n, n * a.record_size as u64, ms);
        *counts.entry(partition).or_default() += n;
        sent += n;
    }
    progress.finish();
    let secs = start.elapsed().as_secs_f64();
    let rate = sent as f64 / secs;
    let mb = rate * a.record_size as f64 / (1024.0 * 1024.0);
    let q = |p: f64| latency.value_at_quantile(p);
    if a.json {
        println!(
            "{{\"records\":{sent},\"records_per_sec\":{rate:.1},\"mb_per_sec\":{mb:.2},\"avg_latency_ms\":{:.2},\"max_latency_ms\":{},\"p50_ms\":{},\"p95_ms\":{},\"p99_ms\":{},\"p999_ms\":{}}}",
            latency.mean(),
            latency.max(),
            q(0.5),
            q(0.95),
            q(0.99),
            q(0.999)
        );
    } else {
        println!(
            "{sent} records sent, {rate:.1} records/sec ({mb:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
            latency.mean(),
            latency.max() as f64,
            q(0.5),
            q(0.95),
            q(0.99),
            q(0.999)
        );
    }
    Ok(())
}

/// Properties `weir perf consume` applies, besides the common ones.
const CONSUMER_PROPERTIES: &[&str] = &["fetch.max.bytes"];

async fn consume(a: ConsumeArgs) -> Result<()> {
    let config = a.bootstrap.load_config()?;
    config.warn_unknown(CONSUMER_PROPERTIES);
    let fetch_size = match a.fetch_size {
        Some(f) => f,
        None => config.parse("fetch.max.bytes")?.unwrap_or(50 * 1024 * 1024),
    };
    let mut client = a.bootstrap.settings(&config)?.connect().await?;
    let topic = client.topic(&a.topic).await?;
    let mut next: Vec<(i32, i32, i64)> = Vec::new();
    for p in &topic.partitions {
        let (start, _) = client
            .list_offset(&a.topic, p.partition, -2, p.leader)
            .await?;
        next.push((p.partition, p.leader, start));
    }
    let limits = DecompressLimits::default();
    let start_ms = now_ms();
    let start = Instant::now();
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut last_data = Instant::now();
    let mut fetch_time = Duration::ZERO;
    while records < a.messages {
        let mut got = false;
        for (partition, leader, offset) in next.iter_mut() {
            let t = Instant::now();
            let f = client
                .fetch(
                    &a.topic,
                    topic.topic_id,
                    *partition,
                    *offset,
                    fetch_size,
                    100,
                    *leader,
                )
                .await?;
            fetch_time += t.elapsed();
            if f.error_code != 0 {
                bail!("fetch error {} on partition {partition}", f.error_code);
            }
            for batch in BatchIter::new(f.records) {
                let Ok(batch) = batch else { break };
                for r in batch.records(&limits)? {
                    let r = r?;
                    if r.offset(batch.base_offset()) < *offset {
                        continue;
                    }
                    records += 1;
                    bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
                    got = true;
                }
                *offset = batch.next_offset();
            }
        }
        if got {
            last_data = Instant::now();
        } else if last_data.elapsed() >= Duration::from_millis(a.timeout_ms) {
            eprintln!("timed out after {} records", records);
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let mb = bytes as f64 / (1024.0 * 1024.0);
    let fetch_secs = fetch_time.as_secs_f64().max(1e-9);
    if a.json {
        println!(
            "{{\"records\":{records},\"mb\":{mb:.4},\"mb_per_sec\":{:.4},\"records_per_sec\":{:.1},\"fetch_time_ms\":{}}}",
            mb / secs,
            records as f64 / secs,
            fetch_time.as_millis()
        );
    } else {
        println!(
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        );
        println!(
            "{start_ms}, {}, {mb:.4}, {:.4}, {records}, {:.4}, 0, {}, {:.4}, {:.4}",
            now_ms(),
            mb / secs,
            records as f64 / secs,
            fetch_time.as_millis(),
            mb / fetch_secs,
            records as f64 / fetch_secs
        );
    }
    Ok(())
}
