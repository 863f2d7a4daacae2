//! `weir-compare`: drives any Kafka-compatible broker with librdkafka and
//! prints each result as a ratio to this machine's limit, measured in the
//! same run.
//!
//! ```text
//! cargo run --release --manifest-path bench/compare/Cargo.toml -- \
//!     --weir target/release/weir --scale small --json out.json
//! cargo run --release --manifest-path bench/compare/Cargo.toml -- \
//!     --bootstrap 127.0.0.1:9092 --broker-pid 4242 --workloads P1,P2
//! ```
//!
//! With `--weir` the broker runs under `taskset -c 0` on a temporary data
//! dir and the harness pins itself to core 1; P8's three-node cluster runs
//! on core 0 as well. See `docs/performance.md`.

mod broker;
mod cluster;
mod e2e;
mod limits;
mod report;
mod startup;
mod tls;
mod workloads;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use hdrhistogram::Histogram;

use crate::broker::{ProcSample, WeirProcess};
use crate::cluster::WeirCluster;
use crate::limits::{Cores, LimitSizes, Limits};
use crate::report::{Goal, Report, Row};
use crate::workloads::{
    Mode, ProduceOutcome, ProduceSpec, QUEUE_KIB_UNBOUNDED, TxnOutcome, consume, create_topic,
    produce,
};

#[derive(Parser)]
#[command(
    name = "weir-compare",
    about = "Drive a Kafka-compatible broker with librdkafka and compare to this machine's limits"
)]
struct Args {
    /// Bootstrap address of an already running broker (loopback only).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "weir")]
    bootstrap: Option<String>,
    /// Path to a weir binary to start (under taskset on the broker core).
    #[arg(long, value_name = "PATH")]
    weir: Option<PathBuf>,
    /// Pid of the external broker, for its CPU seconds and peak RSS.
    #[arg(long, value_name = "PID")]
    broker_pid: Option<u32>,
    /// Comma-separated subset of P1..P10 (P6 and P8 are compared with P1,
    /// P10 with P1 and P2, which they add when missing; P7, P8 and P10
    /// need --weir). P10 runs P1's 1-partition produce and P2 over the
    /// broker's SSL listener (not in the default set). P8 and P9 are
    /// not in the default set: P8 starts a three-node cluster, P9 produces
    /// twice P1's records (its own idempotent acks=all baseline and the
    /// transactions, 1 and 4 partitions each) and would add more than twice
    /// P1's time.
    #[arg(long, default_value = "P1,P2,P3,P4,P5,P6,P7", value_delimiter = ',')]
    workloads: Vec<String>,
    /// small: a quick smoke run (tens of MiB); full: the issue's sizes.
    #[arg(long, default_value = "small", value_parser = ["small", "full"])]
    scale: String,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Core for the broker (with --weir) and the broker side of the limits.
    #[arg(long, default_value_t = 0)]
    broker_core: usize,
    /// Core for this process (the client).
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Do not pin anything (e.g. on a 1-core machine).
    #[arg(long)]
    no_pin: bool,
    /// Directory for temporary files (data dir, dd target); default $TMPDIR.
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

/// Sizes of one scale.
struct Scale {
    limits: LimitSizes,
    p1_records: u64,
    p2_backlog_records: u64,
    p3_records: u64,
    p4_probe_records: u64,
    p4_paced_seconds: f64,
    p5_seconds: f64,
    p7_start_runs: usize,
    p7_unflushed_mib: u64,
    budget: Duration,
}

impl Scale {
    fn new(name: &str) -> Scale {
        match name {
            "full" => Scale {
                limits: LimitSizes {
                    dd_mib: 2048,
                    tcp_mib: 4096,
                    sendfile_mib: 2048,
                    rtt_iterations: 20_000,
                    fsync_iterations: 1_000,
                },
                p1_records: 1 << 20,         // 1 GiB of 1 KiB records
                p2_backlog_records: 2 << 20, // 2 GiB
                p3_records: 10_000_000,
                p4_probe_records: 200_000,
                p4_paced_seconds: 10.0,
                p5_seconds: 30.0,
                p7_start_runs: 10,
                p7_unflushed_mib: 2048,
                budget: Duration::from_secs(600),
            },
            _ => Scale {
                limits: LimitSizes {
                    dd_mib: 128,
                    tcp_mib: 512,
                    sendfile_mib: 64,
                    rtt_iterations: 5_000,
                    fsync_iterations: 200,
                },
                p1_records: 64 << 10,         // 64 MiB
                p2_backlog_records: 64 << 10, // 64 MiB
                p3_records: 1_000_000,
                p4_probe_records: 30_000,
                p4_paced_seconds: 3.0,
                p5_seconds: 5.0,
                p7_start_runs: 5,
                p7_unflushed_mib: 256,
                budget: Duration::from_secs(120),
            },
        }
    }
}

const KIB: usize = 1024;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-compare: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<()> {
    let scale = Scale::new(&args.scale);
    let workloads = workload_list(&args.workloads)?;
    let work = match &args.work_dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .context("create work dir")?;
    let cores = if args.no_pin {
        None
    } else {
        Some(Cores {
            broker: args.broker_core,
            client: args.client_core,
        })
    };

    let mut weir = None;
    // P10's SSL listener of the started broker.
    let mut ssl: Option<String> = None;
    let (bootstrap, broker_pid) = match (&args.bootstrap, &args.weir) {
        (Some(b), None) => {
            check_loopback(b)?;
            (b.clone(), args.broker_pid)
        }
        (None, Some(path)) => {
            let data = work.path().join("weir-data");
            std::fs::create_dir_all(&data)?;
            let sets = if workloads.iter().any(|w| w == "P10") {
                let l = tls::ssl_listener(work.path())?;
                workloads::register_security(&l.bootstrap, l.client);
                ssl = Some(l.bootstrap);
                l.sets
            } else {
                Vec::new()
            };
            let p = WeirProcess::start(path, cores.map_or(0, |c| c.broker), &data, &sets)
                .context("start weir")?;
            eprintln!("weir pid {} listening on {}", p.pid(), p.bootstrap);
            let r = (p.bootstrap.clone(), Some(p.pid()));
            weir = Some(p);
            r
        }
        _ => bail!("give exactly one of --bootstrap HOST:PORT or --weir PATH"),
    };
    if let Some(c) = cores {
        broker::pin_self(c.client).context("pin the harness to the client core")?;
        if weir.is_none() {
            eprintln!(
                "note: the external broker is not pinned by this harness; pin it to core {} yourself",
                c.broker
            );
        }
    }

    let load_at_start = report::load_average();
    eprintln!("load average at start: {load_at_start}");
    let limits = limits::measure(work.path(), &scale.limits, cores)?;
    eprintln!("{}", report::limits_text(&limits));

    let ticks = broker::clock_ticks();
    let run_id = format!("{}-{}", std::process::id(), report::unix_time());
    let mut rows = Vec::new();
    let mut created = Vec::new();
    for w in &workloads {
        if let Some(p) = weir.as_mut()
            && !p.alive()
        {
            rows.push(Row::failed(
                w,
                format!(
                    "broker process exited before this workload; log tail:\n{}",
                    broker::log_tail(&p.log_path)
                ),
            ));
            continue;
        }
        let ctx = Ctx {
            bootstrap: &bootstrap,
            run_id: &run_id,
            scale: &scale,
            limits: &limits,
            broker_pid,
            ticks,
            work: work.path(),
            cores,
        };
        let result = match w.as_str() {
            "P1" => run_p1(&ctx, 1, &mut created).and_then(|mut a| {
                a.extend(run_p1(&ctx, 4, &mut created)?);
                Ok(a)
            }),
            "P2" => run_p2(&ctx, &mut created),
            "P3" => run_p3(&ctx, &mut created),
            "P4" => run_p4(&ctx, &mut created),
            "P5" => run_p5(&ctx, &mut created),
            "P6" => p6_rows(&rows),
            "P7" => match &args.weir {
                // Its own broker processes, on the broker core.
                Some(path) => run_p7(&ctx, path, cores.map_or(0, |c| c.broker), work.path()),
                None => Err(anyhow::anyhow!(
                    "P7 starts and kills weir itself: give --weir PATH"
                )),
            },
            "P9" => run_p9(&ctx, &mut created),
            "P10" => match &ssl {
                Some(ssl_bootstrap) => run_p10(&ctx, ssl_bootstrap, &rows, &mut created),
                None => Err(anyhow::anyhow!(
                    "P10 needs the SSL listener of a broker this harness starts: give --weir PATH"
                )),
            },
            "P8" => match &args.weir {
                Some(path) => run_p8(
                    &ctx,
                    path,
                    cores.map_or(0, |c| c.broker),
                    work.path(),
                    &rows,
                ),
                None => Err(anyhow::anyhow!(
                    "P8 starts its own three-node cluster: give --weir PATH"
                )),
            },
            other => Err(anyhow::anyhow!("unknown workload {other}")),
        };
        match result {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("{w} failed: {e:#}");
                rows.push(Row::failed(w, format!("{e:#}")));
            }
        }
    }

    let broker_log_tail = weir.as_ref().map(|p| broker::log_tail(&p.log_path));
    if weir.is_none() && !created.is_empty() {
        let names: Vec<&str> = created.iter().map(String::as_str).collect();
        if let Err(e) = workloads::delete_topics(&bootstrap, &names) {
            eprintln!("could not delete the topics {names:?}: {e:#}");
        }
    }
    if let Some(mut p) = weir.take() {
        p.stop();
    }
    let rep = Report::new(
        load_at_start,
        &args.scale,
        &bootstrap,
        broker_pid,
        cores,
        limits,
        rows,
    );
    println!("{}", rep.table());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rep)?;
        std::fs::write(path, text).with_context(|| format!("write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(tail) = broker_log_tail.filter(|t| !t.trim().is_empty()) {
        eprintln!("broker log (tail):\n{tail}");
    }
    Ok(())
}

/// The workloads to run, in order, upper-cased; P6 and P8 (compared with
/// P1) pull in P1 before them when missing.
fn workload_list(given: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for w in given.iter().map(|w| w.trim().to_uppercase()) {
        if !["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10"].contains(&w.as_str()) {
            bail!("unknown workload {w}; expected P1 … P10");
        }
        if (w == "P6" || w == "P8" || w == "P10") && !out.iter().any(|x| x == "P1") {
            out.push("P1".into());
        }
        if w == "P10" && !out.iter().any(|x| x == "P2") {
            out.push("P2".into());
        }
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

/// Only loopback addresses are driven.
fn check_loopback(bootstrap: &str) -> Result<()> {
    let host = bootstrap.rsplit_once(':').map(|(h, _)| h).unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ok = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false);
    if !ok {
        bail!("--bootstrap must be a loopback address (127.0.0.1:PORT), got {bootstrap}");
    }
    Ok(())
}

/// Process samples at the start of a workload.
struct Mark {
    broker: Option<ProcSample>,
    client: Option<ProcSample>,
}

/// Resource use of one workload.
struct Usage {
    cpu: Option<f64>,
    rss: Option<u64>,
    client_cpu: Option<f64>,
}

impl Usage {
    fn apply(&self, mut row: Row) -> Row {
        row.client_cpu_seconds = self.client_cpu;
        row
    }
}

struct Ctx<'a> {
    bootstrap: &'a str,
    run_id: &'a str,
    scale: &'a Scale,
    limits: &'a Limits,
    broker_pid: Option<u32>,
    ticks: f64,
    /// The work directory (same file system as a started broker's data).
    work: &'a std::path::Path,
    cores: Option<Cores>,
}

impl Ctx<'_> {
    fn topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
        created: &mut Vec<String>,
    ) -> Result<String> {
        let t = format!("wc-{}-{name}", self.run_id);
        create_topic(self.bootstrap, &t, partitions, 1, configs)?;
        created.push(t.clone());
        Ok(t)
    }

    /// Starts measuring the broker and this process for one workload.
    fn begin(&self) -> Mark {
        let broker = self.broker_pid.and_then(|pid| {
            broker::reset_peak_rss(pid);
            broker::sample(pid, self.ticks).ok()
        });
        let client = broker::sample(std::process::id(), self.ticks).ok();
        Mark { broker, client }
    }

    /// Broker CPU seconds and peak RSS (KiB) since `mark`; this process's
    /// CPU seconds go into `row`.
    fn end(&self, mark: Mark) -> Usage {
        let client_cpu = match (mark.client, broker::sample(std::process::id(), self.ticks)) {
            (Some(b), Ok(a)) => Some(a.cpu_seconds - b.cpu_seconds),
            _ => None,
        };
        let (cpu, rss) = match (self.broker_pid, mark.broker) {
            (Some(pid), Some(b)) => match broker::sample(pid, self.ticks) {
                Ok(a) => (Some(a.cpu_seconds - b.cpu_seconds), Some(a.peak_rss_kib)),
                Err(_) => (None, None),
            },
            _ => (None, None),
        };
        Usage {
            cpu,
            rss,
            client_cpu,
        }
    }
}

/// P1: 1 KiB records, acks=1, linger 5 ms, 1 MiB batches; MiB/s against
/// page-cache append; target ≥ 60 %.
fn run_p1(ctx: &Ctx<'_>, partitions: i32, created: &mut Vec<String>) -> Result<Vec<Row>> {
    let name = format!("P1 produce 1KiB acks=1 {partitions}p");
    eprintln!("{name}: {} records", ctx.scale.p1_records);
    let topic = ctx.topic(&format!("p1-{partitions}"), partitions, &[], created)?;
    let before = ctx.begin();
    let out = produce(
        ctx.bootstrap,
        &ProduceSpec {
            topic: &topic,
            partitions,
            record_bytes: KIB,
            records: ctx.scale.p1_records,
            acks: "1",
            linger_ms: 5,
            rate: None,
            timed: false,
            budget: ctx.scale.budget,
            mode: Mode::Plain,
            queue_kib: QUEUE_KIB_UNBOUNDED,
        },
    )?;
    let usage = ctx.end(before);
    let (cpu, rss) = (usage.cpu, usage.rss);
    let limit = ctx.limits.page_cache_append_bytes_per_s;
    Ok(vec![usage.apply(Row::throughput(
        &name,
        out.bytes_per_s(),
        limit,
        "page-cache append (dd)",
        0.60,
        cpu,
        rss,
        serde_json::json!({
            "records": out.records,
            "payload_bytes": out.payload_bytes,
            "seconds": out.elapsed.as_secs_f64(),
            "records_per_s": out.records_per_s(),
        }),
    ))])
}

/// P2: consume a backlog from the beginning; MiB/s against sendfile to
/// loopback; target ≥ 70 %.
fn run_p2(ctx: &Ctx<'_>, created: &mut Vec<String>) -> Result<Vec<Row>> {
    let records = ctx.scale.p2_backlog_records;
    let name = format!("P2 consume {} MiB backlog", (records * KIB as u64) >> 20);
    eprintln!("{name}: producing the backlog");
    let topic = ctx.topic("p2", 1, &[], created)?;
    let fill = produce(
        ctx.bootstrap,
        &ProduceSpec {
            topic: &topic,
            partitions: 1,
            record_bytes: KIB,
            records,
            acks: "1",
            linger_ms: 5,
            rate: None,
            timed: false,
            budget: ctx.scale.budget,
            mode: Mode::Plain,
            queue_kib: QUEUE_KIB_UNBOUNDED,
        },
    )
    .context("produce the backlog")?;
    eprintln!("{name}: consuming");
    let before = ctx.begin();
    let out = consume(
        ctx.bootstrap,
        &topic,
        1,
        fill.records + fill.warmup_records,
        ctx.scale.budget,
    )?;
    let usage = ctx.end(before);
    let (cpu, rss) = (usage.cpu, usage.rss);
    Ok(vec![usage.apply(Row::throughput(
        &name,
        out.bytes_per_s(),
        ctx.limits.sendfile_loopback_bytes_per_s,
        "sendfile to loopback",
        0.70,
        cpu,
        rss,
        serde_json::json!({
            "records": out.records,
            "payload_bytes": out.payload_bytes,
            "seconds": out.elapsed.as_secs_f64(),
            "backlog_produce_bytes_per_s": fill.bytes_per_s(),
            "startup_seconds": out.startup.as_secs_f64(),
        }),
    ))])
}

/// P3: 100-byte records to one partition; target ≥ 1 M records/s.
fn run_p3(ctx: &Ctx<'_>, created: &mut Vec<String>) -> Result<Vec<Row>> {
    let name = "P3 produce 100B acks=1 1p";
    eprintln!("{name}: {} records", ctx.scale.p3_records);
    let topic = ctx.topic("p3", 1, &[], created)?;
    let before = ctx.begin();
    let out = produce(
        ctx.bootstrap,
        &ProduceSpec {
            topic: &topic,
            partitions: 1,
            record_bytes: 100,
            records: ctx.scale.p3_records,
            acks: "1",
            linger_ms: 5,
            rate: None,
            timed: false,
            budget: ctx.scale.budget,
            mode: Mode::Plain,
            queue_kib: QUEUE_KIB_UNBOUNDED,
        },
    )?;
    let usage = ctx.end(before);
    let (cpu, rss) = (usage.cpu, usage.rss);
    Ok(vec![usage.apply(Row::records_rate(
        name,
        out.records_per_s(),
        1_000_000.0,
        cpu,
        rss,
        serde_json::json!({
            "records": out.records,
            "seconds": out.elapsed.as_secs_f64(),
            "payload_bytes_per_s": out.bytes_per_s(),
        }),
    ))])
}

/// P4: acks=all on a flush.messages=1 topic with 4 partitions. Finds the max
/// rate, then runs at half of it and takes the p99 send-to-ack latency;
/// target p99 ≤ 2 × (loopback RTT p99 + 4 KiB fdatasync p99).
///
/// linger.ms is 0 here: the bound has no term for client-side lingering.
fn run_p4(ctx: &Ctx<'_>, created: &mut Vec<String>) -> Result<Vec<Row>> {
    let name = "P4 acks=all flush.messages=1 4p p99";
    let topic = ctx.topic("p4", 4, &[("flush.messages", "1")], created)?;
    eprintln!(
        "{name}: max-rate probe, {} records",
        ctx.scale.p4_probe_records
    );
    let before = ctx.begin();
    let spec = ProduceSpec {
        topic: &topic,
        partitions: 4,
        record_bytes: KIB,
        records: ctx.scale.p4_probe_records,
        acks: "all",
        linger_ms: 0,
        rate: None,
        timed: false,
        budget: ctx.scale.budget,
        mode: Mode::Plain,
        queue_kib: QUEUE_KIB_UNBOUNDED,
    };
    let probe = produce(ctx.bootstrap, &spec).context("max-rate probe")?;
    let max_rate = probe.records_per_s();
    let rate = max_rate / 2.0;
    let records = ((rate * ctx.scale.p4_paced_seconds) as u64).max(100);
    eprintln!("{name}: max {max_rate:.0} rec/s; {records} records at {rate:.0} rec/s");
    let paced = produce(
        ctx.bootstrap,
        &ProduceSpec {
            records,
            rate: Some(rate),
            timed: true,
            ..spec
        },
    )
    .context("half-rate run")?;
    let usage = ctx.end(before);
    let (cpu, rss) = (usage.cpu, usage.rss);
    let lat =
        limits::Latency::from_histogram(paced.latency.as_ref().context("no latency recorded")?);
    let limit_us = ctx.limits.loopback_rtt.p99_us + ctx.limits.fdatasync_4k.p99_us;
    // The issue's bound has no bandwidth term: measure what the disk alone
    // gives a group-committing writer at the paced rate (same files, record
    // size and duration), after the run so it does not disturb it.
    eprintln!("{name}: disk group commit alone at {rate:.0} rec/s");
    let disk = limits::group_commit_at(
        ctx.work,
        4,
        KIB,
        rate,
        ctx.scale.p4_paced_seconds,
        ctx.cores,
    )
    .context("group commit at the paced rate")?;
    eprintln!(
        "{name}: disk group commit alone p50 {:.0} us, p99 {:.0} us; P4 p99 / that {:.2}",
        disk.p50_us,
        disk.p99_us,
        lat.p99_us / disk.p99_us.max(1.0)
    );
    Ok(vec![usage.apply(Row::latency(
        name,
        lat.p99_us,
        limit_us,
        2.0,
        cpu,
        rss,
        serde_json::json!({
            "max_rate_records_per_s": max_rate,
            "paced_rate_records_per_s": rate,
            "paced_achieved_records_per_s": paced.records_per_s(),
            "paced_records": paced.records,
            "latency_us": lat,
            "disk_group_commit_at_paced_rate_us": disk,
            "p99_over_disk_group_commit_p99": lat.p99_us / disk.p99_us.max(1.0),
        }),
    ))])
}

/// P5: fixed rate (50 000 records/s of 1 KiB to 16 partitions), librdkafka
/// producer and consumer; end-to-end latency from the intended send time;
/// targets p99 ≤ 1 ms and p99.9 ≤ 5 ms.
fn run_p5(ctx: &Ctx<'_>, created: &mut Vec<String>) -> Result<Vec<Row>> {
    let rate = 50_000.0;
    let seconds = ctx.scale.p5_seconds;
    eprintln!("P5: {rate} records/s for {seconds} s, 1 KiB, 16 partitions");
    let topic = ctx.topic("p5", 16, &[], created)?;
    let before = ctx.begin();
    let out = e2e::run(
        ctx.bootstrap,
        &e2e::E2eSpec {
            topic: &topic,
            partitions: 16,
            record_bytes: KIB,
            rate,
            seconds,
            budget: ctx.scale.budget,
        },
    )?;
    let usage = ctx.end(before);
    let (cpu, rss) = (usage.cpu, usage.rss);
    let us = |q: f64| out.latency.value_at_quantile(q) as f64 / 1e3;
    let details = serde_json::json!({
        "target_records_per_s": rate,
        "achieved_records_per_s": out.achieved_rate,
        "sent": out.sent,
        "received": out.received,
        "duplicates": out.duplicates,
        "sent_more_than_1ms_late": out.sent_late,
        "latency_us": {
            "p50": us(0.5), "p95": us(0.95), "p99": us(0.99), "p999": us(0.999),
            "max": out.latency.max() as f64 / 1e3,
        },
    });
    if out.received < out.sent {
        bail!(
            "{} of {} records never arrived",
            out.sent - out.received,
            out.sent
        );
    }
    Ok(vec![
        usage.apply(Row::absolute(
            "P5 e2e 50k/s 1KiB 16p p99",
            us(0.99),
            "us",
            Goal::AtMost,
            1000.0,
            cpu,
            rss,
            details.clone(),
        )),
        usage.apply(Row::absolute(
            "P5 e2e 50k/s 1KiB 16p p99.9",
            us(0.999),
            "us",
            Goal::AtMost,
            5000.0,
            cpu,
            rss,
            details,
        )),
    ])
}

/// P6: broker CPU seconds per GB (10^9 bytes of payload) produced, from
/// the P1 rows of this run. Reported, no target.
/// P10: P1's 1-partition produce and P2's backlog consume over the SSL
/// listener of the same broker; MiB/s against the same run's PLAINTEXT
/// rows; target ≥ 60 %.
fn run_p10(
    ctx: &Ctx<'_>,
    ssl_bootstrap: &str,
    rows: &[Row],
    created: &mut Vec<String>,
) -> Result<Vec<Row>> {
    let plain = |prefix: &str| -> Result<f64> {
        rows.iter()
            .find(|r| r.workload.starts_with(prefix) && r.error.is_none())
            .and_then(|r| r.result)
            .map(|mib| mib * (KIB * KIB) as f64)
            .with_context(|| {
                format!(
                    "P10 compares with the row {prefix}… of this run, which failed or is missing"
                )
            })
    };
    let ssl_run = format!("{}-ssl", ctx.run_id);
    let ssl_ctx = Ctx {
        bootstrap: ssl_bootstrap,
        run_id: &ssl_run,
        ..*ctx
    };
    let mut out = Vec::new();
    for (prefix, run) in [
        ("P1 produce 1KiB acks=1 1p", run_p1(&ssl_ctx, 1, created)),
        ("P2 consume", run_p2(&ssl_ctx, created)),
    ] {
        let base = plain(prefix)?;
        for r in run? {
            let Some(mib) = r.result else {
                out.push(Row::failed(
                    &format!("P10 SSL {}", r.workload),
                    r.error.unwrap_or_default(),
                ));
                continue;
            };
            let mut row = Row::throughput(
                &format!("P10 SSL {}", r.workload),
                mib * (KIB * KIB) as f64,
                base,
                "same run over PLAINTEXT",
                0.60,
                r.broker_cpu_seconds,
                r.broker_peak_rss_kib,
                r.details.clone(),
            );
            row.client_cpu_seconds = r.client_cpu_seconds;
            out.push(row);
        }
    }
    Ok(out)
}

fn p6_rows(rows: &[Row]) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.workload.starts_with("P1 ")) {
        let bytes = r.details.get("payload_bytes").and_then(|v| v.as_f64());
        let (Some(cpu), Some(bytes)) = (r.broker_cpu_seconds, bytes) else {
            continue;
        };
        let per_gb = cpu / (bytes / 1e9);
        out.push(Row::absolute(
            &format!("P6 broker CPU per GB ({})", r.workload),
            per_gb,
            "CPU s/GB",
            Goal::Report,
            0.0,
            Some(cpu),
            r.broker_peak_rss_kib,
            serde_json::json!({
                "payload_bytes": bytes,
                "broker_cpu_seconds": cpu,
                "client_cpu_s_per_gb": r.client_cpu_seconds.map(|c| c / (bytes / 1e9)),
            }),
        ));
    }
    if out.is_empty() {
        bail!("no P1 row with broker CPU seconds (P6 needs P1 and the broker pid)");
    }
    Ok(out)
}

/// P7: (a) best of N starts on an empty data dir, spawn → first ApiVersions
/// answer, target < 50 ms; (b) produce a large log (acks=1, nothing
/// flushed), `kill -9`, restart: bytes recovery had to scan / time to
/// ready, target ≥ 1 GB/s.
fn run_p7(
    ctx: &Ctx<'_>,
    weir: &std::path::Path,
    core: usize,
    work: &std::path::Path,
) -> Result<Vec<Row>> {
    let runs = ctx.scale.p7_start_runs;
    eprintln!("P7: {runs} starts on an empty data dir");
    let mut starts = Vec::new();
    for i in 0..runs {
        let dir = work.join(format!("p7-empty-{i}"));
        std::fs::create_dir_all(&dir)?;
        let (mut p, t) = startup::start_until_ready(weir, core, &dir)?;
        p.stop();
        starts.push(t.as_secs_f64() * 1e3);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let best = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let mut rows = vec![Row::absolute(
        &format!("P7 start, empty data dir (best of {runs})"),
        best,
        "ms",
        Goal::AtMost,
        50.0,
        None,
        None,
        serde_json::json!({ "start_ms": starts }),
    )];

    let mib = ctx.scale.p7_unflushed_mib;
    eprintln!("P7: {mib} MiB unflushed, then kill -9 and restart");
    let dir = work.join("p7-recovery");
    std::fs::create_dir_all(&dir)?;
    let (mut p, _) = startup::start_until_ready(weir, core, &dir)?;
    let topic = format!("wc-{}-p7", ctx.run_id);
    create_topic(&p.bootstrap, &topic, 1, 1, &[])?;
    let fill = produce(
        &p.bootstrap,
        &ProduceSpec {
            topic: &topic,
            partitions: 1,
            record_bytes: KIB,
            records: mib << 10,
            acks: "1",
            linger_ms: 5,
            rate: None,
            timed: false,
            budget: ctx.scale.budget,
            mode: Mode::Plain,
            queue_kib: QUEUE_KIB_UNBOUNDED,
        },
    )
    .context("produce the log to recover")?;
    p.kill9()?;
    let bytes = startup::unflushed_bytes(&dir, &topic, 0)?;
    let (mut p2, ready) = startup::start_until_ready(weir, core, &dir)?;
    let ticks = broker::clock_ticks();
    let cpu = broker::sample(p2.pid(), ticks).ok().map(|s| s.cpu_seconds);
    p2.stop();
    let secs = ready.as_secs_f64();
    rows.push(Row::absolute(
        &format!("P7 recovery after kill -9 ({mib} MiB unflushed)"),
        bytes as f64 / secs / 1e6,
        "MB/s",
        Goal::AtLeast,
        1000.0,
        cpu,
        None,
        serde_json::json!({
            "bytes_to_recover": bytes,
            "ready_seconds": secs,
            "best_empty_start_ms": best,
            "produced_records": fill.records + fill.warmup_records,
            "note": "the killed broker's page cache still holds the log (a process crash, not a power loss)",
        }),
    ));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rows)
}

/// Nodes of P8's cluster, and the replication factor of its topics.
const P8_NODES: usize = 3;
/// How long P8's nodes may take to form a quorum and all register.
const P8_REGISTER_TIMEOUT: Duration = Duration::from_secs(60);

/// P8: P1's produce (1 KiB records, linger 5 ms, 1 MiB batches, 1 and 4
/// partitions) with acks=all on a three-node cluster, topics with
/// replication factor 3; MiB/s against the single-node P1 row (acks=1) of
/// the same run, target ≥ 50 %. Then, like P4, send→ack latency of acks=all
/// (linger 0) at half the 4-partition rate, p50 and p99 reported. Broker
/// CPU seconds and peak RSS are summed over the three nodes.
fn run_p8(
    ctx: &Ctx<'_>,
    weir: &std::path::Path,
    core: usize,
    work: &std::path::Path,
    rows: &[Row],
) -> Result<Vec<Row>> {
    eprintln!("P8: starting {P8_NODES} nodes on core {core}");
    let mut cluster = WeirCluster::start(weir, core, work, P8_NODES)?;
    let bootstrap = cluster.bootstrap();
    workloads::wait_for_brokers(&bootstrap, P8_NODES, P8_REGISTER_TIMEOUT)
        .with_context(|| cluster.describe())?;
    let replication = P8_NODES as i32;
    let mut out = Vec::new();
    let mut rate_4p = None;
    for partitions in [1, 4] {
        let p1_name = format!("P1 produce 1KiB acks=1 {partitions}p");
        let p1 = rows
            .iter()
            .find(|r| r.workload == p1_name)
            .and_then(|r| r.result)
            .with_context(|| format!("no result of {p1_name} in this run to compare with"))?;
        let name = format!("P8 produce 1KiB acks=all RF=3 3 nodes {partitions}p");
        eprintln!("{name}: {} records", ctx.scale.p1_records);
        let topic = format!("wc-{}-p8-{partitions}", ctx.run_id);
        create_topic(&bootstrap, &topic, partitions, replication, &[])
            .with_context(|| cluster.describe())?;
        let before = ClusterMark::take(&cluster, ctx.ticks);
        let run = produce(
            &bootstrap,
            &ProduceSpec {
                topic: &topic,
                partitions,
                record_bytes: KIB,
                records: ctx.scale.p1_records,
                acks: "all",
                linger_ms: 5,
                rate: None,
                timed: false,
                budget: ctx.scale.budget,
                mode: Mode::Plain,
                queue_kib: QUEUE_KIB_UNBOUNDED,
            },
        )
        .with_context(|| cluster.describe())?;
        let usage = before.end(&cluster, ctx.ticks);
        if partitions == 4 {
            rate_4p = Some((topic.clone(), run.records_per_s()));
        }
        let row = Row::throughput(
            &name,
            run.bytes_per_s(),
            p1 * MIB,
            &format!("single-node {p1_name}, this run"),
            0.50,
            Some(usage.cpu),
            Some(usage.rss_kib),
            serde_json::json!({
                "records": run.records,
                "payload_bytes": run.payload_bytes,
                "seconds": run.elapsed.as_secs_f64(),
                "records_per_s": run.records_per_s(),
                "broker_cpu_seconds_per_node": usage.cpu_per_node,
                "broker_peak_rss_kib_per_node": usage.rss_per_node,
                "broker_cpu_s_per_gb": usage.cpu / (run.payload_bytes as f64 / 1e9),
            }),
        );
        out.push(Row {
            client_cpu_seconds: Some(usage.client_cpu),
            ..row
        });
    }

    let (topic, max_rate) = rate_4p.context("no 4-partition run")?;
    let rate = max_rate / 2.0;
    let records = ((rate * ctx.scale.p4_paced_seconds) as u64).max(100);
    eprintln!("P8 latency: {records} records at {rate:.0} rec/s, acks=all, 4 partitions");
    let before = ClusterMark::take(&cluster, ctx.ticks);
    let paced = produce(
        &bootstrap,
        &ProduceSpec {
            topic: &topic,
            partitions: 4,
            record_bytes: KIB,
            records,
            acks: "all",
            linger_ms: 0,
            rate: Some(rate),
            timed: true,
            budget: ctx.scale.budget,
            mode: Mode::Plain,
            queue_kib: QUEUE_KIB_UNBOUNDED,
        },
    )
    .with_context(|| cluster.describe())?;
    let usage = before.end(&cluster, ctx.ticks);
    let hist = paced.latency.as_ref().context("no latency recorded")?;
    let lat = limits::Latency::from_histogram(hist);
    let details = serde_json::json!({
        "max_rate_records_per_s": max_rate,
        "paced_rate_records_per_s": rate,
        "paced_achieved_records_per_s": paced.records_per_s(),
        "paced_records": paced.records,
        "linger_ms": 0,
        "latency_us": {
            "p50": lat.p50_us,
            "p95": hist.value_at_quantile(0.95) as f64 / 1e3,
            "p99": lat.p99_us,
            "p999": hist.value_at_quantile(0.999) as f64 / 1e3,
            "max": lat.max_us,
        },
        "broker_cpu_seconds_per_node": usage.cpu_per_node,
    });
    for (label, us) in [("p50", lat.p50_us), ("p99", lat.p99_us)] {
        let row = Row::absolute(
            &format!("P8 acks=all RF=3 4p send→ack {label} at half max"),
            us,
            "us",
            Goal::Report,
            0.0,
            Some(usage.cpu),
            Some(usage.rss_kib),
            details.clone(),
        );
        out.push(Row {
            client_cpu_seconds: Some(usage.client_cpu),
            ..row
        });
    }
    if let Some(e) = cluster.first_exited() {
        bail!("P8 cluster {e}");
    }
    drop(cluster);
    Ok(out)
}

const MIB: f64 = 1024.0 * 1024.0;

/// P9: how long each transaction sends before it commits.
const P9_COMMIT_INTERVAL: Duration = Duration::from_millis(100);
/// P9's runs: idempotent (false) and transactional (true) in turn, each
/// producer [`P9_RUNS_EACH`] times and at the same mean position, so a
/// steady drift of the machine cancels.
const P9_ORDER: [bool; 8] = [false, true, true, false, true, false, false, true];
/// How many runs of each producer [`P9_ORDER`] holds; together they send
/// P1's record count.
const P9_RUNS_EACH: u64 = 4;
/// P9's producer queue (librdkafka's `queue.buffering.max.kbytes`) in
/// all its runs: a Java producer's default `buffer.memory`, 32 MiB.
/// With P1's 1 GiB a whole small run would be queued within the first
/// 100 ms and go out in one transaction.
const P9_QUEUE_KIB: u64 = 32 << 10;

/// P9: the cost of transactions. P1's produce (1 KiB records, linger 5 ms,
/// 1 MiB batches, P1's record count, 1 and 4 partitions) with acks=all,
/// by an idempotent producer and by a transactional one that commits
/// every 100 ms (begin, send for 100 ms, commit, repeat). Each producer
/// sends its records in [`P9_ORDER`]'s interleaved runs, so that the
/// machine's drifts and bursts of other load weigh on both alike. Reports
/// both MiB/s (bytes over the time of all its runs), the transactional one
/// as a ratio to the idempotent one, and the commit latency p50 / p99 (from
/// the end of a transaction's sending to commit_transaction's return). No
/// targets.
fn run_p9(ctx: &Ctx<'_>, created: &mut Vec<String>) -> Result<Vec<Row>> {
    // The first transactional id creates `__transaction_state` (50
    // partitions); that is set-up, not the cost of transactions.
    workloads::init_transactional_id(ctx.bootstrap, &format!("wc-{}-p9-setup", ctx.run_id))
        .context("set up the transaction coordinator")?;
    let mut out = Vec::new();
    for partitions in [1, 4] {
        let base_name = format!("P9 produce 1KiB acks=all idempotent {partitions}p");
        let name = format!("P9 produce 1KiB transactional commit/100ms {partitions}p");
        let idem_topic = ctx.topic(&format!("p9-idem-{partitions}"), partitions, &[], created)?;
        let txn_topic = ctx.topic(&format!("p9-txn-{partitions}"), partitions, &[], created)?;
        let per_run = ctx.scale.p1_records / P9_RUNS_EACH;
        let mut idem = P9Runs::default();
        let mut txn = P9Runs::default();
        for (step, transactional) in P9_ORDER.into_iter().enumerate() {
            let runs = if transactional { &mut txn } else { &mut idem };
            let nth = runs.runs.len() as u64 + 1;
            // The last run of each producer takes the remainder.
            let records = if nth == P9_RUNS_EACH {
                ctx.scale.p1_records - per_run * (P9_RUNS_EACH - 1)
            } else {
                per_run
            };
            let id = format!("wc-{}-p9-{partitions}-{step}", ctx.run_id);
            let (topic, mode, label) = if transactional {
                let mode = Mode::Transactional {
                    id: &id,
                    commit_interval: P9_COMMIT_INTERVAL,
                };
                (&txn_topic, mode, &name)
            } else {
                (&idem_topic, Mode::Idempotent, &base_name)
            };
            eprintln!("{label}: {records} records (run {nth} of {P9_RUNS_EACH})");
            write_back_dirty_pages()?;
            let before = ctx.begin();
            let run = produce(
                ctx.bootstrap,
                &ProduceSpec {
                    topic,
                    partitions,
                    record_bytes: KIB,
                    records,
                    acks: "all",
                    linger_ms: 5,
                    rate: None,
                    timed: false,
                    budget: ctx.scale.budget,
                    mode,
                    queue_kib: P9_QUEUE_KIB,
                },
            )?;
            runs.add(run, ctx.end(before))?;
        }

        let base_bytes_per_s = idem.bytes_per_s();
        out.push(
            idem.usage()
                .apply(Row::throughput(
                    &base_name,
                    base_bytes_per_s,
                    ctx.limits.page_cache_append_bytes_per_s,
                    "page-cache append (dd)",
                    0.0,
                    idem.cpu,
                    idem.rss,
                    idem.details(),
                ))
                .report_only(),
        );
        let t = txn.txn.as_ref().context("no transactions recorded")?;
        let ms = |h: &Histogram<u64>| {
            let q = |q: f64| h.value_at_quantile(q) as f64 / 1e6;
            serde_json::json!({ "p50": q(0.5), "p99": q(0.99), "max": h.max() as f64 / 1e6 })
        };
        let mut details = txn.details();
        details["commit_interval_ms"] = (P9_COMMIT_INTERVAL.as_millis() as u64).into();
        details["transactions"] = t.transactions.into();
        details["records_per_transaction"] = (txn.records as f64 / t.transactions as f64).into();
        details["transaction_ms"] = ms(&t.period);
        details["commit_ms"] = ms(&t.commit);
        details["commit_drain_ms"] = ms(&t.drain);
        details["commit_end_txn_ms"] = ms(&t.end_txn);
        details["first_record_ack_ms"] = ms(&t.first_ack);
        out.push(
            txn.usage()
                .apply(Row::throughput(
                    &name,
                    txn.bytes_per_s(),
                    base_bytes_per_s,
                    &format!("{base_name}, this run"),
                    0.0,
                    txn.cpu,
                    txn.rss,
                    details.clone(),
                ))
                .report_only(),
        );
        for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
            out.push(txn.usage().apply(Row::absolute(
                &format!(
                    "P9 commit latency {partitions}p {label} ({} transactions)",
                    t.transactions
                ),
                t.commit.value_at_quantile(q) as f64 / 1e6,
                "ms",
                Goal::Report,
                0.0,
                txn.cpu,
                txn.rss,
                details.clone(),
            )));
        }
    }
    Ok(out)
}

/// Writes every dirty page of the machine back (`sync`) and waits for it.
/// Before each P9 run, outside its clock: once a few GiB are dirty the
/// kernel's writeback slows the broker's appends down, and the run that
/// crosses that line would pay for the runs before it.
fn write_back_dirty_pages() -> Result<()> {
    let status = std::process::Command::new("sync")
        .status()
        .context("run sync")?;
    if !status.success() {
        bail!("sync failed: {status}");
    }
    Ok(())
}

/// The runs of one P9 producer (idempotent or transactional), summed.
#[derive(Default)]
struct P9Runs {
    runs: Vec<serde_json::Value>,
    records: u64,
    payload_bytes: u64,
    seconds: f64,
    cpu: Option<f64>,
    rss: Option<u64>,
    client_cpu: Option<f64>,
    /// The transactions of all runs, merged.
    txn: Option<TxnOutcome>,
}

impl P9Runs {
    fn add(&mut self, run: ProduceOutcome, usage: Usage) -> Result<()> {
        let add = |sum: Option<f64>, x: Option<f64>| match (sum, x) {
            (None, x) if self.runs.is_empty() => x,
            (Some(s), Some(x)) => Some(s + x),
            _ => None,
        };
        self.cpu = add(self.cpu, usage.cpu);
        self.client_cpu = add(self.client_cpu, usage.client_cpu);
        self.rss = self.rss.max(usage.rss);
        self.runs.push(serde_json::json!({
            "records": run.records,
            "seconds": run.elapsed.as_secs_f64(),
            "mib_per_s": run.bytes_per_s() / MIB,
            "broker_cpu_seconds": usage.cpu,
            "transactions": run.txn.as_ref().map(|t| t.transactions),
        }));
        self.records += run.records;
        self.payload_bytes += run.payload_bytes;
        self.seconds += run.elapsed.as_secs_f64();
        match (&mut self.txn, run.txn) {
            (Some(sum), Some(t)) => sum.merge(&t)?,
            (None, t) => self.txn = t,
            (Some(_), None) => {}
        }
        Ok(())
    }

    fn bytes_per_s(&self) -> f64 {
        self.payload_bytes as f64 / self.seconds
    }

    fn usage(&self) -> Usage {
        Usage {
            cpu: self.cpu,
            rss: self.rss,
            client_cpu: self.client_cpu,
        }
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "records": self.records,
            "payload_bytes": self.payload_bytes,
            "seconds": self.seconds,
            "records_per_s": self.records as f64 / self.seconds,
            "queue_kib": P9_QUEUE_KIB,
            "broker_cpu_s_per_gb": self.cpu.map(|c| c / (self.payload_bytes as f64 / 1e9)),
            "client_cpu_s_per_gb": self.client_cpu.map(|c| c / (self.payload_bytes as f64 / 1e9)),
            "runs": self.runs,
        })
    }
}

/// CPU seconds of every node of a cluster and of this process at one
/// moment; peak RSS is reset so that [`ClusterMark::end`] reads the peak of
/// one run.
struct ClusterMark {
    nodes: Vec<Option<ProcSample>>,
    client: Option<ProcSample>,
}

/// What a cluster used between two marks, summed over the nodes.
struct ClusterUsage {
    cpu: f64,
    cpu_per_node: Vec<f64>,
    rss_kib: u64,
    rss_per_node: Vec<u64>,
    client_cpu: f64,
}

impl ClusterMark {
    fn take(cluster: &WeirCluster, ticks: f64) -> ClusterMark {
        let nodes = cluster
            .pids()
            .into_iter()
            .map(|pid| {
                broker::reset_peak_rss(pid);
                broker::sample(pid, ticks).ok()
            })
            .collect();
        let client = broker::sample(std::process::id(), ticks).ok();
        ClusterMark { nodes, client }
    }

    /// A node that could not be sampled counts as 0.
    fn end(self, cluster: &WeirCluster, ticks: f64) -> ClusterUsage {
        let mut cpu_per_node = Vec::new();
        let mut rss_per_node = Vec::new();
        for (pid, before) in cluster.pids().into_iter().zip(self.nodes) {
            match (before, broker::sample(pid, ticks)) {
                (Some(b), Ok(a)) => {
                    cpu_per_node.push(a.cpu_seconds - b.cpu_seconds);
                    rss_per_node.push(a.peak_rss_kib);
                }
                _ => {
                    cpu_per_node.push(0.0);
                    rss_per_node.push(0);
                }
            }
        }
        let client_cpu = match (self.client, broker::sample(std::process::id(), ticks)) {
            (Some(b), Ok(a)) => a.cpu_seconds - b.cpu_seconds,
            _ => 0.0,
        };
        ClusterUsage {
            cpu: cpu_per_node.iter().sum(),
            cpu_per_node,
            rss_kib: rss_per_node.iter().sum(),
            rss_per_node,
            client_cpu,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p6_and_p8_pull_in_p1_once() {
        let w = |l: &[&str]| {
            workload_list(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
        };
        assert_eq!(w(&["P8"]), ["P1", "P8"]);
        assert_eq!(w(&["p8", "P6"]), ["P1", "P8", "P6"]);
        assert_eq!(w(&["P1", "P8"]), ["P1", "P8"]);
        assert_eq!(w(&["P2"]), ["P2"]);
        // P9 brings its own baseline.
        assert_eq!(w(&["p9"]), ["P9"]);
        assert!(workload_list(&["P10".to_string()]).is_err());
    }

    #[test]
    fn p9_order_is_balanced() {
        let positions = |mode: bool| -> Vec<usize> {
            (0..P9_ORDER.len())
                .filter(|&i| P9_ORDER[i] == mode)
                .collect()
        };
        let (idem, txn) = (positions(false), positions(true));
        assert_eq!(idem.len() as u64, P9_RUNS_EACH);
        assert_eq!(txn.len() as u64, P9_RUNS_EACH);
        assert_eq!(idem.iter().sum::<usize>(), txn.iter().sum::<usize>());
    }
}
