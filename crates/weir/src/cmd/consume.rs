//! `weir consume`: print records of a topic, like `kafka-console-consumer`.
//!
//! Without `--group` the tool reads the chosen partitions on its own and
//! commits nothing. With `--group` it joins the consumer group (range
//! assignor), starts each assigned partition at the group's committed
//! offset (or at the beginning / end when none is committed), commits the
//! next offset to read about once a second and on exit, and leaves the
//! group when it stops (after --max-messages, --timeout-ms or Ctrl-C).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::Bytes;
use indicatif::ProgressBar;
use weir_client::{Client, GroupMember, HeartbeatStatus, TopicInfo};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::records::{BatchIter, DecompressLimits, RecordsError};

use super::command_config::CommandConfig;
use super::common::{Bootstrap, parse_kv, progress_bar, run_async, unescape};

/// `--command-config` properties `weir consume` applies, besides the
/// common ones; [`Consumer`] holds them.
const CONSUMER_PROPERTIES: &[&str] = &[
    "group.id",
    "auto.offset.reset",
    "fetch.max.bytes",
    "fetch.max.wait.ms",
    "session.timeout.ms",
    "max.poll.interval.ms",
    "heartbeat.interval.ms",
    "auto.commit.interval.ms",
];

/// Consumer settings: flags, then `--command-config`, then these defaults.
#[derive(Debug, Clone, PartialEq)]
struct Consumer {
    /// `--group`, else `group.id`.
    group: Option<String>,
    /// `--from-beginning`, else `auto.offset.reset=earliest`: where a
    /// partition without a committed offset starts.
    from_beginning: bool,
    fetch_max_bytes: i32,
    /// Longest wait of one fetch for new data.
    fetch_max_wait_ms: i32,
    /// None: [`GroupMember`]'s default, as for the rebalance timeout
    /// (Kafka's `max.poll.interval.ms`).
    session_timeout: Option<Duration>,
    rebalance_timeout: Option<Duration>,
    /// How often a group member heartbeats and commits.
    heartbeat_interval: Duration,
    commit_interval: Duration,
}

impl Consumer {
    fn new(args: &Args, config: &CommandConfig) -> Result<Consumer> {
        let from_beginning = args.from_beginning
            || match config.get("auto.offset.reset") {
                None | Some("latest") => false,
                Some("earliest") => true,
                Some(other) => bail!("invalid auto.offset.reset={other:?} (earliest, latest)"),
            };
        Ok(Consumer {
            group: args
                .group
                .clone()
                .or_else(|| config.get("group.id").map(str::to_string)),
            from_beginning,
            fetch_max_bytes: config.parse("fetch.max.bytes")?.unwrap_or(1024 * 1024),
            fetch_max_wait_ms: config.parse("fetch.max.wait.ms")?.unwrap_or(100),
            session_timeout: config.millis("session.timeout.ms")?,
            rebalance_timeout: config.millis("max.poll.interval.ms")?,
            heartbeat_interval: config
                .millis("heartbeat.interval.ms")?
                .unwrap_or(Duration::from_secs(3)),
            commit_interval: config
                .millis("auto.commit.interval.ms")?
                .unwrap_or(Duration::from_secs(1)),
        })
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir consume --topic orders --from-beginning --max-messages 10\n  weir consume --topic orders --partition 2 --offset 100 --property print.key=true --property print.offset=true\n  weir consume --topic orders --from-beginning --timeout-ms 2000 --property print.timestamp=true --property print.headers=true\n  weir consume --topic orders --group billing --from-beginning --max-messages 100\n  weir consume --topic orders --command-config consumer.properties   # group.id, client.id, …\n\nFormatter properties (--property name=value): print.key, print.value, print.offset,\nprint.partition, print.timestamp, print.headers (true/false), key.separator (default TAB),\nline.separator (default newline), headers.separator (default ','),\nheaders.key.separator (default ':'), null.literal (default 'null')."
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    /// Only this partition.
    #[arg(long, conflicts_with = "group")]
    partition: Option<i32>,
    /// Start at the earliest offset instead of the end (with --group: when
    /// the group has no committed offset).
    #[arg(long = "from-beginning")]
    from_beginning: bool,
    /// Start offset: a number (needs --partition), "earliest" or "latest".
    #[arg(long, conflicts_with = "group")]
    offset: Option<String>,
    /// Stop after this many records.
    #[arg(long = "max-messages")]
    max_messages: Option<u64>,
    /// Stop when no record arrived for this long.
    #[arg(long = "timeout-ms")]
    timeout_ms: Option<u64>,
    /// Consume as a member of this consumer group and commit offsets.
    #[arg(long)]
    group: Option<String>,
    /// Formatter property name=value (repeatable), see below.
    #[arg(long = "property", value_parser = parse_kv)]
    properties: Vec<(String, String)>,
}

/// How records are printed (Kafka's DefaultMessageFormatter options).
#[derive(Debug, Clone, PartialEq)]
pub struct Formatter {
    print_key: bool,
    print_value: bool,
    print_offset: bool,
    print_partition: bool,
    print_timestamp: bool,
    print_headers: bool,
    key_separator: String,
    line_separator: String,
    headers_separator: String,
    headers_key_separator: String,
    null_literal: String,
}

impl Formatter {
    pub fn from_properties(props: &[(String, String)]) -> Result<Formatter> {
        let mut f = Formatter {
            print_key: false,
            print_value: true,
            print_offset: false,
            print_partition: false,
            print_timestamp: false,
            print_headers: false,
            key_separator: "\t".into(),
            line_separator: "\n".into(),
            headers_separator: ",".into(),
            headers_key_separator: ":".into(),
            null_literal: "null".into(),
        };
        for (k, v) in props {
            let flag = || -> Result<bool> {
                match v.as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    _ => bail!("property {k} must be true or false, got {v:?}"),
                }
            };
            match k.as_str() {
                "print.key" => f.print_key = flag()?,
                "print.value" => f.print_value = flag()?,
                "print.offset" => f.print_offset = flag()?,
                "print.partition" => f.print_partition = flag()?,
                "print.timestamp" => f.print_timestamp = flag()?,
                "print.headers" => f.print_headers = flag()?,
                "key.separator" => f.key_separator = unescape(v),
                "line.separator" => f.line_separator = unescape(v),
                "headers.separator" => f.headers_separator = unescape(v),
                "headers.key.separator" => f.headers_key_separator = unescape(v),
                "null.literal" => f.null_literal = v.clone(),
                other => bail!("unknown formatter property {other:?}"),
            }
        }
        Ok(f)
    }

    fn text(&self, b: &Option<Bytes>) -> String {
        match b {
            None => self.null_literal.clone(),
            Some(b) => String::from_utf8_lossy(b).into_owned(),
        }
    }

    /// One record as a line (without the line separator), in Kafka's field
    /// order: timestamp, partition, offset, headers, key, value.
    pub fn format(&self, r: &Printable<'_>) -> String {
        let mut fields: Vec<String> = Vec::new();
        if self.print_timestamp {
            fields.push(match r.timestamp {
                Some((true, ts)) => format!("LogAppendTime:{ts}"),
                Some((false, ts)) => format!("CreateTime:{ts}"),
                None => "NO_TIMESTAMP".into(),
            });
        }
        if self.print_partition {
            fields.push(format!("Partition:{}", r.partition));
        }
        if self.print_offset {
            fields.push(format!("Offset:{}", r.offset));
        }
        if self.print_headers {
            fields.push(if r.headers.is_empty() {
                "NO_HEADERS".into()
            } else {
                r.headers
                    .iter()
                    .map(|(k, v)| format!("{k}{}{}", self.headers_key_separator, self.text(v)))
                    .collect::<Vec<_>>()
                    .join(&self.headers_separator)
            });
        }
        if self.print_key {
            fields.push(self.text(r.key));
        }
        if self.print_value {
            fields.push(self.text(r.value));
        }
        fields.join(&self.key_separator)
    }
}

/// The parts of a record the formatter prints.
pub struct Printable<'a> {
    pub partition: i32,
    pub offset: i64,
    /// (is LogAppendTime, milliseconds)
    pub timestamp: Option<(bool, i64)>,
    pub headers: Vec<(&'a str, &'a Option<Bytes>)>,
    pub key: &'a Option<Bytes>,
    pub value: &'a Option<Bytes>,
}

/// Reading state shared by the plain and the group modes.
struct Reader {
    topic: TopicInfo,
    fmt: Formatter,
    /// partition → next offset to read
    positions: BTreeMap<i32, i64>,
    printed: u64,
    max_messages: Option<u64>,
    from_beginning: bool,
    fetch_max_bytes: i32,
    /// Longest wait of one fetch for new data.
    fetch_max_wait_ms: i32,
    bar: ProgressBar,
    limits: DecompressLimits,
}

impl Reader {
    fn done(&self) -> bool {
        self.max_messages.is_some_and(|m| self.printed >= m)
    }

    fn leader(&self, partition: i32) -> i32 {
        self.topic
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map_or(-1, |p| p.leader)
    }

    /// The reset position of a partition: earliest with --from-beginning,
    /// else latest (Kafka's auto.offset.reset of the console consumer).
    async fn reset_position(&self, client: &mut Client, partition: i32) -> Result<i64> {
        let at = if self.from_beginning { -2 } else { -1 };
        let leader = self.leader(partition);
        Ok(client
            .list_offset(&self.topic.name, partition, at, leader)
            .await?
            .0)
    }

    /// Fetches each partition in `positions` once and prints what came
    /// back. Returns whether any record was printed.
    async fn poll(&mut self, client: &mut Client) -> Result<bool> {
        let mut got_any = false;
        let partitions: Vec<i32> = self.positions.keys().copied().collect();
        for partition in partitions {
            if self.done() {
                break;
            }
            let offset = self.positions[&partition];
            let leader = self.leader(partition);
            let fetched = client
                .fetch(
                    &self.topic.name,
                    self.topic.topic_id,
                    partition,
                    offset,
                    self.fetch_max_bytes,
                    self.fetch_max_wait_ms,
                    leader,
                )
                .await?;
            if fetched.error_code == ErrorCode::OffsetOutOfRange.code() {
                let to = self.reset_position(client, partition).await?;
                tracing::debug!(partition, offset, to, "offset out of range, reset");
                self.positions.insert(partition, to);
                continue;
            }
            if fetched.error_code != 0 {
                bail!(
                    "fetch from {}-{partition} at offset {offset}: {}",
                    self.topic.name,
                    ErrorCode::from_code_lossy(fetched.error_code)
                );
            }
            got_any |= self.print(partition, fetched.records)?;
        }
        Ok(got_any)
    }

    fn print(&mut self, partition: i32, records: Bytes) -> Result<bool> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let mut got_any = false;
        let mut next = self.positions[&partition];
        let topic = self.topic.name.clone();
        // Bad data (a CRC mismatch, an unreadable header or record) is an
        // error naming where it is; what came before it is printed first.
        let bad = |out: &mut std::io::StdoutLock<'_>, offset: i64, e: &dyn std::fmt::Display| {
            let _ = out.flush();
            anyhow::anyhow!(
                "cannot read topic {topic} partition {partition} at offset {offset}: {e}"
            )
        };
        'batches: for batch in BatchIter::new(records) {
            let batch = match batch {
                Ok(b) => b,
                // A partial batch at the end of a fetch is normal: stop there.
                Err(e) if e.is_incomplete() => break,
                Err(e) => {
                    let offset = match e {
                        RecordsError::CrcMismatch { base_offset, .. } => base_offset,
                        _ => next,
                    };
                    return Err(bad(&mut out, offset, &e));
                }
            };
            if batch.is_control() {
                next = next.max(batch.next_offset());
                continue;
            }
            let base = batch.base_offset();
            let header = batch.header();
            let log_append = header.is_log_append_time();
            let records = batch
                .records(&self.limits)
                .map_err(|e| bad(&mut out, base, &e))?;
            for r in records {
                let r = r.map_err(|e| bad(&mut out, base, &e))?;
                let o = r.offset(base);
                if o < next {
                    continue;
                }
                let ts = if log_append {
                    header.max_timestamp
                } else {
                    r.timestamp(header.base_timestamp)
                };
                let line = self.fmt.format(&Printable {
                    partition,
                    offset: o,
                    timestamp: (ts >= 0).then_some((log_append, ts)),
                    headers: r
                        .headers
                        .iter()
                        .map(|h| (h.key.as_str(), &h.value))
                        .collect(),
                    key: &r.key,
                    value: &r.value,
                });
                write!(out, "{line}{}", self.fmt.line_separator)?;
                next = o + 1;
                self.printed += 1;
                self.bar.inc(1);
                got_any = true;
                if self.done() {
                    break 'batches;
                }
            }
            next = next.max(batch.next_offset());
        }
        out.flush()?;
        self.positions.insert(partition, next);
        Ok(got_any)
    }
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let fmt = Formatter::from_properties(&args.properties)?;
        if args.offset.is_some() && args.from_beginning {
            bail!("--offset and --from-beginning cannot be used together");
        }
        let config = args.bootstrap.load_config()?;
        config.warn_unknown(CONSUMER_PROPERTIES);
        let consumer = Consumer::new(&args, &config)?;
        if consumer.group.is_some() && (args.partition.is_some() || args.offset.is_some()) {
            bail!(
                "--partition and --offset cannot be used with a group (group.id of --command-config)"
            );
        }
        let mut client = args.bootstrap.settings(&config)?.connect().await?;
        let topic = client.topic(&args.topic).await?;
        if let Some(want) = args.partition
            && !topic.partitions.iter().any(|p| p.partition == want)
        {
            bail!(
                "partition {want} does not exist in topic {} ({} partitions)",
                args.topic,
                topic.partitions.len()
            );
        }
        let bar = if std::io::stdout().is_terminal() {
            ProgressBar::hidden()
        } else {
            progress_bar(args.max_messages, "records")
        };
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = stop.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    stop.store(true, Ordering::SeqCst);
                }
            });
        }
        let mut reader = Reader {
            topic,
            fmt,
            positions: BTreeMap::new(),
            printed: 0,
            max_messages: args.max_messages,
            from_beginning: consumer.from_beginning,
            fetch_max_bytes: consumer.fetch_max_bytes,
            fetch_max_wait_ms: consumer.fetch_max_wait_ms,
            bar,
            limits: DecompressLimits::default(),
        };
        let idle = args.timeout_ms.map(Duration::from_millis);
        let result = match &consumer.group {
            Some(group) => {
                consume_group(&mut client, &mut reader, &consumer, group, idle, &stop).await
            }
            None => consume_plain(&mut client, &mut reader, &args, idle, &stop).await,
        };
        reader.bar.finish_and_clear();
        result
    })
}

async fn consume_plain(
    client: &mut Client,
    reader: &mut Reader,
    args: &Args,
    idle: Option<Duration>,
    stop: &AtomicBool,
) -> Result<()> {
    let partitions: Vec<(i32, i32)> = reader
        .topic
        .partitions
        .iter()
        .filter(|p| args.partition.is_none_or(|want| want == p.partition))
        .map(|p| (p.partition, p.leader))
        .collect();
    for (partition, leader) in partitions {
        let start = match args.offset.as_deref() {
            Some("earliest") => {
                client
                    .list_offset(&args.topic, partition, -2, leader)
                    .await?
                    .0
            }
            Some("latest") => {
                client
                    .list_offset(&args.topic, partition, -1, leader)
                    .await?
                    .0
            }
            Some(n) => {
                if args.partition.is_none() {
                    bail!("--offset N needs --partition");
                }
                match n.parse::<i64>() {
                    Ok(o) if o >= 0 => o,
                    _ => bail!("invalid --offset {n:?}: a number >= 0, earliest or latest"),
                }
            }
            None => reader.reset_position(client, partition).await?,
        };
        reader.positions.insert(partition, start);
    }
    let mut last_data = Instant::now();
    while !reader.done() && !stop.load(Ordering::SeqCst) {
        if reader.poll(client).await? {
            last_data = Instant::now();
        } else if idle.is_some_and(|t| last_data.elapsed() >= t) {
            break;
        }
    }
    Ok(())
}

async fn consume_group(
    client: &mut Client,
    reader: &mut Reader,
    consumer: &Consumer,
    group: &str,
    idle: Option<Duration>,
    stop: &AtomicBool,
) -> Result<()> {
    let topic = reader.topic.name.clone();
    let mut member = GroupMember::new(group, std::slice::from_ref(&topic));
    if let Some(t) = consumer.session_timeout {
        member.session_timeout = t;
    }
    if let Some(t) = consumer.rebalance_timeout {
        member.rebalance_timeout = t;
    }
    let mut last_data = Instant::now();
    let result: Result<()> = async {
        'generation: loop {
            member.join(client).await?;
            let committed = client.committed_offsets(group).await?;
            reader.positions.clear();
            let assigned: Vec<i32> = member
                .assignment
                .iter()
                .filter(|(t, _)| *t == topic)
                .map(|(_, p)| *p)
                .collect();
            for p in assigned {
                let start = match committed.get(&(topic.clone(), p)) {
                    Some(&o) => o,
                    None => reader.reset_position(client, p).await?,
                };
                reader.positions.insert(p, start);
            }
            let mut committed_now = positions_of(&topic, &reader.positions);
            let mut last_heartbeat = Instant::now();
            let mut last_commit = Instant::now();
            loop {
                if reader.done() || stop.load(Ordering::SeqCst) {
                    break 'generation;
                }
                let got = if reader.positions.is_empty() {
                    let wait = reader.fetch_max_wait_ms.max(0) as u64;
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                    false
                } else {
                    reader.poll(client).await?
                };
                if got {
                    last_data = Instant::now();
                } else if idle.is_some_and(|t| last_data.elapsed() >= t) {
                    break 'generation;
                }
                let now_positions = positions_of(&topic, &reader.positions);
                if now_positions != committed_now
                    && last_commit.elapsed() >= consumer.commit_interval
                {
                    member.commit(client, &now_positions).await?;
                    committed_now = now_positions;
                    last_commit = Instant::now();
                }
                if last_heartbeat.elapsed() >= consumer.heartbeat_interval {
                    last_heartbeat = Instant::now();
                    if member.heartbeat(client).await? == HeartbeatStatus::Rebalance {
                        // Commit what was read before giving partitions up;
                        // a refused commit is retried by the next owner's
                        // reading, so it is not fatal here.
                        let positions = positions_of(&topic, &reader.positions);
                        if let Err(e) = member.commit(client, &positions).await {
                            tracing::debug!("commit before rebalance: {e}");
                        }
                        continue 'generation;
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    // Final commit and leave, also after an error in the loop.
    let positions = positions_of(&topic, &reader.positions);
    let commit = member.commit(client, &positions).await;
    let leave = member.leave(client).await;
    result?;
    commit?;
    leave?;
    Ok(())
}

fn positions_of(topic: &str, positions: &BTreeMap<i32, i64>) -> BTreeMap<(String, i32), i64> {
    positions
        .iter()
        .map(|(&p, &o)| ((topic.to_string(), p), o))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn formatter_lines() {
        let key = Some(Bytes::from_static(b"k1"));
        let value = Some(Bytes::from_static(b"v1"));
        let hv = Some(Bytes::from_static(b"x"));
        let none: Option<Bytes> = None;
        let rec = Printable {
            partition: 2,
            offset: 7,
            timestamp: Some((false, 1000)),
            headers: vec![("h1", &hv), ("h2", &none)],
            key: &key,
            value: &value,
        };
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "v1"),
            (&[("print.key", "true")], "k1\tv1"),
            (
                &[
                    ("print.key", "true"),
                    ("print.offset", "true"),
                    ("print.partition", "true"),
                    ("print.timestamp", "true"),
                    ("print.headers", "true"),
                    ("key.separator", "|"),
                ],
                "CreateTime:1000|Partition:2|Offset:7|h1:x,h2:null|k1|v1",
            ),
            (&[("print.value", "false"), ("print.key", "true")], "k1"),
            (
                &[("print.key", "true"), ("key.separator", "\\t=")],
                "k1\t=v1",
            ),
        ];
        for (p, want) in cases {
            let f = Formatter::from_properties(&props(p)).unwrap();
            assert_eq!(f.format(&rec), *want, "{p:?}");
        }
        let no_headers = Printable {
            headers: vec![],
            key: &none,
            ..rec
        };
        let f =
            Formatter::from_properties(&props(&[("print.headers", "true"), ("print.key", "true")]))
                .unwrap();
        assert_eq!(f.format(&no_headers), "NO_HEADERS\tnull\tv1");
        assert!(Formatter::from_properties(&props(&[("print.key", "yes")])).is_err());
        assert!(Formatter::from_properties(&props(&[("bogus", "1")])).is_err());
    }
}
