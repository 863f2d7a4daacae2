//! One librdkafka consumer-group member as its own OS process, driven by the
//! group tests (`tests/rdkafka_groups_members.rs`), which can close it
//! cleanly (close its stdin) or SIGKILL it (a member that dies without
//! leaving the group).
//!
//! ```text
//! rdkafka-group-member --bootstrap HOST:PORT --group G --topic T
//!     [--strategy range|roundrobin|cooperative-sticky] [--reset earliest|latest]
//!     [--session-timeout-ms MS] [--instance-id ID] [--max-records N] [--max-secs S]
//!     [--protocol classic|consumer] [--remote-assignor uniform|range]
//!     [--record-delay-ms MS]
//! ```
//!
//! `--record-delay-ms` makes it a slow consumer: it "processes" each
//! record for that long between printing it and committing it, so records
//! are in flight while partitions move.
//!
//! With `--protocol consumer` the member uses the KIP-848 consumer protocol
//! (`group.protocol=consumer`): the broker assigns, the session timeout and
//! heartbeat interval are the broker's, `--strategy` is ignored, a topic
//! starting with `^` is a regex subscription, and there is no JoinGroup
//! (the generation in `OWN` lines stays -1; `JOINED` is not printed).
//!
//! It consumes `T` in group `G` and, after each record, commits the offset of
//! the next record to read (last processed + 1) synchronously. It stops on
//! stdin EOF, after `--max-records` records, or after `--max-secs` (a bound
//! for a forgotten process); stopping closes the consumer, which leaves the
//! group unless the member is static. Everything it does is printed on
//! stdout, one event per line:
//!
//! | line | meaning |
//! | --- | --- |
//! | `JOINED <generation> <member id>` | a JoinGroup response without error (from librdkafka's `cgrp` debug log) |
//! | `OWN <generation> <p,p,…>` | the assignment changed (or a new generation began); the full set of owned partitions |
//! | `REC <partition> <offset> <value>` | a record was processed |
//! | `COMMIT <partition> <offset>` | the broker acknowledged offset `offset` (the next to read) |
//! | `COMMITFAIL <partition> <offset> <error>` | the commit was refused |
//! | `CLOSED` | the consumer was closed (printed last on a clean stop) |
//! | `ERROR <text>` | a consumer error (the process keeps running) |
//!
//! The generation comes from librdkafka's debug log because the client
//! exposes no accessor for it; it is the generation of the last successful
//! JoinGroup, so an `OWN` line states which partitions this member owned in
//! that generation.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// What librdkafka logs (facility `JOINGROUP`) on a JoinGroup response.
const JOIN_RESPONSE_PREFIX: &str = "JoinGroup response: GenerationId ";

struct Options {
    bootstrap: String,
    group: String,
    topic: String,
    strategy: String,
    reset: String,
    session_timeout_ms: u32,
    instance_id: Option<String>,
    max_records: Option<u64>,
    max_secs: u64,
    protocol: String,
    remote_assignor: Option<String>,
    record_delay_ms: u64,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut bootstrap = None;
    let mut group = None;
    let mut topic = None;
    let mut strategy = String::from("range");
    let mut reset = String::from("earliest");
    let mut session_timeout_ms = 6000;
    let mut instance_id = None;
    let mut max_records = None;
    let mut max_secs = 300;
    let mut protocol = String::from("classic");
    let mut remote_assignor = None;
    let mut record_delay_ms = 0;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .clone();
        let number = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--bootstrap" => bootstrap = Some(value),
            "--group" => group = Some(value),
            "--topic" => topic = Some(value),
            "--strategy" => strategy = value,
            "--reset" => reset = value,
            "--session-timeout-ms" => {
                session_timeout_ms =
                    u32::try_from(number(&value)?).map_err(|e| format!("{flag} {value}: {e}"))?;
            }
            "--instance-id" => instance_id = Some(value),
            "--max-records" => max_records = Some(number(&value)?),
            "--max-secs" => max_secs = number(&value)?,
            "--protocol" => protocol = value,
            "--remote-assignor" => remote_assignor = Some(value),
            "--record-delay-ms" => record_delay_ms = number(&value)?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Options {
        bootstrap: bootstrap.ok_or("--bootstrap is required")?,
        group: group.ok_or("--group is required")?,
        topic: topic.ok_or("--topic is required")?,
        strategy,
        reset,
        session_timeout_ms,
        instance_id,
        max_records,
        max_secs,
        protocol,
        remote_assignor,
        record_delay_ms,
    })
}

/// Prints one event line and flushes, so a SIGKILL loses nothing printed.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (the test is gone) leaves nothing to report to.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Tracks the generation (from the log) and the last `OWN` line printed.
struct MemberContext {
    generation: AtomicI32,
    last_owned: Mutex<Option<(i32, BTreeSet<i32>)>>,
}

impl MemberContext {
    /// Prints `OWN` if the generation or the owned set changed since the last one.
    fn report_ownership(&self, consumer: &BaseConsumer<MemberContext>) {
        let owned: BTreeSet<i32> = match consumer.assignment() {
            Ok(list) => list.elements().iter().map(|e| e.partition()).collect(),
            Err(e) => {
                emit(&format!("ERROR assignment: {e}"));
                return;
            }
        };
        let generation = self.generation.load(Ordering::SeqCst);
        let mut last = self
            .last_owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = (generation, owned);
        if last.as_ref() != Some(&current) {
            let parts: Vec<String> = current.1.iter().map(i32::to_string).collect();
            emit(&format!("OWN {} {}", current.0, parts.join(",")));
            *last = Some(current);
        }
    }
}

impl ClientContext for MemberContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        // Messages start with the thread name (`[thrd:main]: `).
        let join_response = log_message
            .find(JOIN_RESPONSE_PREFIX)
            .map(|at| &log_message[at + JOIN_RESPONSE_PREFIX.len()..]);
        if let Some(rest) = join_response {
            // "<gen>, Protocol <p>, LeaderId <l>[ (me)], my MemberId <m>, member metadata count <n>: (no error)"
            if !rest.ends_with("(no error)") {
                return;
            }
            let generation = rest.split(',').next().and_then(|g| g.trim().parse().ok());
            let member = rest
                .split("my MemberId ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .unwrap_or("?");
            if let Some(generation) = generation {
                self.generation.store(generation, Ordering::SeqCst);
                emit(&format!("JOINED {generation} {member}"));
            }
        } else if matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
        ) {
            eprintln!("librdkafka {fac}: {log_message}");
        }
    }
}

impl ConsumerContext for MemberContext {
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        self.report_ownership(consumer);
    }
}

fn run(options: &Options) -> Result<(), String> {
    let context = MemberContext {
        generation: AtomicI32::new(-1),
        last_owned: Mutex::new(None),
    };
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &options.bootstrap)
        .set("group.id", &options.group)
        .set("auto.offset.reset", &options.reset)
        .set("enable.auto.commit", "false");
    if options.protocol == "consumer" {
        // The broker decides assignment, session timeout and heartbeat
        // interval; librdkafka refuses the classic settings here.
        config.set("group.protocol", "consumer");
        if let Some(a) = &options.remote_assignor {
            config.set("group.remote.assignor", a);
        }
    } else {
        config
            .set("partition.assignment.strategy", &options.strategy)
            .set("session.timeout.ms", options.session_timeout_ms.to_string())
            .set("heartbeat.interval.ms", "500");
    }
    config
        // The JoinGroup response line (with the generation) is a cgrp debug message.
        .set("debug", "cgrp")
        .set_log_level(RDKafkaLogLevel::Debug);
    if let Some(id) = &options.instance_id {
        config.set("group.instance.id", id);
    }
    let consumer: BaseConsumer<MemberContext> = config
        .create_with_context(context)
        .map_err(|e| format!("consumer: {e}"))?;
    consumer
        .subscribe(&[&options.topic])
        .map_err(|e| format!("subscribe: {e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            // Any line or EOF on stdin asks for a clean stop.
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            stop.store(true, Ordering::SeqCst);
        });
    }

    let deadline = Instant::now() + Duration::from_secs(options.max_secs);
    let mut processed = 0u64;
    while !stop.load(Ordering::SeqCst)
        && Instant::now() < deadline
        && options.max_records.is_none_or(|max| processed < max)
    {
        let polled = consumer.poll(Duration::from_millis(100));
        consumer.context().report_ownership(&consumer);
        let message = match polled {
            None => continue,
            Some(Err(e)) => {
                emit(&format!("ERROR {e}"));
                continue;
            }
            Some(Ok(m)) => m,
        };
        let value = message
            .payload()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        let (partition, offset) = (message.partition(), message.offset());
        emit(&format!("REC {partition} {offset} {value}"));
        processed += 1;
        if options.record_delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(options.record_delay_ms));
        }
        let next = offset + 1;
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(message.topic(), partition, Offset::Offset(next))
            .map_err(|e| format!("offset list: {e}"))?;
        match consumer.commit(&list, CommitMode::Sync) {
            Ok(()) => emit(&format!("COMMIT {partition} {next}")),
            Err(e) => emit(&format!("COMMITFAIL {partition} {next} {e}")),
        }
    }
    // Dropping closes the consumer: a dynamic member sends LeaveGroup, a
    // static one does not (its place waits for its session timeout).
    drop(consumer);
    emit("CLOSED");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rdkafka-group-member: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdkafka-group-member: {e}");
            emit(&format!("ERROR {e}"));
            ExitCode::FAILURE
        }
    }
}
