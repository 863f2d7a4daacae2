//! `weir consume`: print records of a topic, like `kafka-console-consumer`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use weir_protocol::records::{BatchIter, DecompressLimits};

use super::common::{Bootstrap, parse_kv, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir consume --topic orders --from-beginning --max-messages 10\n  weir consume --topic orders --partition 2 --offset 100 --property print.key=true --property print.offset=true\n  weir consume --topic orders --from-beginning --timeout-ms 2000"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    /// Only this partition.
    #[arg(long)]
    partition: Option<i32>,
    /// Start at the earliest offset instead of the end.
    #[arg(long = "from-beginning")]
    from_beginning: bool,
    /// Start offset: a number, "earliest" or "latest" (needs --partition for a number).
    #[arg(long)]
    offset: Option<String>,
    /// Stop after this many records.
    #[arg(long = "max-messages")]
    max_messages: Option<u64>,
    /// Stop when no record arrived for this long.
    #[arg(long = "timeout-ms")]
    timeout_ms: Option<u64>,
    /// Consumer group (needs consumer-group support in the broker).
    #[arg(long)]
    group: Option<String>,
    /// Formatter properties: print.key, print.offset, print.partition, print.timestamp, print.headers, print.value (true/false), key.separator, line.separator.
    #[arg(long = "property", value_parser = parse_kv)]
    properties: Vec<(String, String)>,
}

struct Formatter {
    print_key: bool,
    print_value: bool,
    print_offset: bool,
    print_partition: bool,
    print_timestamp: bool,
    print_headers: bool,
    key_separator: String,
    line_separator: String,
}

impl Formatter {
    fn from_properties(props: &[(String, String)]) -> Result<Formatter> {
        let mut f = Formatter {
            print_key: false,
            print_value: true,
            print_offset: false,
            print_partition: false,
            print_timestamp: false,
            print_headers: false,
            key_separator: "\t".into(),
            line_separator: "\n".into(),
        };
        for (k, v) in props {
            let on = v == "true";
            match k.as_str() {
                "print.key" => f.print_key = on,
                "print.value" => f.print_value = on,
                "print.offset" => f.print_offset = on,
                "print.partition" => f.print_partition = on,
                "print.timestamp" => f.print_timestamp = on,
                "print.headers" => f.print_headers = on,
                "key.separator" => f.key_separator = v.clone(),
                "line.separator" => f.line_separator = v.clone(),
                other => bail!("unknown property {other:?}"),
            }
        }
        Ok(f)
    }
}

fn text(b: &Option<bytes::Bytes>) -> String {
    match b {
        None => "null".into(),
        Some(b) => String::from_utf8_lossy(b).into_owned(),
    }
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        if args.group.is_some() {
            bail!("--group is not supported yet: weir does not implement consumer groups");
        }
        let fmt = Formatter::from_properties(&args.properties)?;
        let mut client = args.bootstrap.connect().await?;
        let topic = client.topic(&args.topic).await?;
        let parts: Vec<_> = topic
            .partitions
            .iter()
            .filter(|p| args.partition.is_none_or(|want| want == p.partition))
            .cloned()
            .collect();
        if parts.is_empty() {
            bail!(
                "partition {:?} does not exist in topic {}",
                args.partition,
                args.topic
            );
        }
        // Start positions.
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for p in &parts {
            let start = match args.offset.as_deref() {
                Some("earliest") => {
                    client
                        .list_offset(&args.topic, p.partition, -2, p.leader)
                        .await?
                        .0
                }
                Some("latest") => {
                    client
                        .list_offset(&args.topic, p.partition, -1, p.leader)
                        .await?
                        .0
                }
                Some(n) => {
                    if args.partition.is_none() {
                        bail!("--offset N needs --partition");
                    }
                    n.parse::<i64>()
                        .map_err(|_| anyhow::anyhow!("invalid --offset {n:?}"))?
                }
                None => {
                    let at = if args.from_beginning { -2 } else { -1 };
                    client
                        .list_offset(&args.topic, p.partition, at, p.leader)
                        .await?
                        .0
                }
            };
            next.insert(p.partition, start);
        }
        let limits = DecompressLimits::default();
        let mut printed = 0u64;
        let mut last_data = Instant::now();
        let stdout = std::io::stdout();
        loop {
            let mut got_any = false;
            for p in &parts {
                let offset = next[&p.partition];
                let fetched = client
                    .fetch(
                        &args.topic,
                        topic.topic_id,
                        p.partition,
                        offset,
                        1024 * 1024,
                        100,
                        p.leader,
                    )
                    .await?;
                if fetched.error_code != 0 {
                    bail!(
                        "fetch from {}-{} at offset {offset}: {}",
                        args.topic,
                        p.partition,
                        weir_protocol::error_code::ErrorCode::from_code_lossy(fetched.error_code)
                    );
                }
                let mut out = stdout.lock();
                for batch in BatchIter::new(fetched.records) {
                    let Ok(batch) = batch else { break };
                    if batch.is_control() {
                        next.insert(p.partition, batch.next_offset());
                        continue;
                    }
                    let base = batch.base_offset();
                    let base_ts = batch.header().base_timestamp;
                    for r in batch.records(&limits)? {
                        let r = r?;
                        let o = r.offset(base);
                        if o < next[&p.partition] {
                            continue;
                        }
                        let mut line = String::new();
                        if fmt.print_timestamp {
                            let ts = if batch.header().is_log_append_time() {
                                format!("LogAppendTime:{}", batch.header().max_timestamp)
                            } else {
                                format!("CreateTime:{}", r.timestamp(base_ts))
                            };
                            line.push_str(&ts);
                            line.push_str(&fmt.key_separator);
                        }
                        if fmt.print_partition {
                            line.push_str(&format!(
                                "Partition:{}{}",
                                p.partition, fmt.key_separator
                            ));
                        }
                        if fmt.print_offset {
                            line.push_str(&format!("Offset:{o}{}", fmt.key_separator));
                        }
                        if fmt.print_headers {
                            let hs: Vec<String> = r
                                .headers
                                .iter()
                                .map(|h| format!("{}:{}", h.key, text(&h.value)))
                                .collect();
                            line.push_str(if hs.is_empty() { "NO_HEADERS" } else { "" });
                            line.push_str(&hs.join(","));
                            line.push_str(&fmt.key_separator);
                        }
                        if fmt.print_key {
                            line.push_str(&text(&r.key));
                            line.push_str(&fmt.key_separator);
                        }
                        if fmt.print_value {
                            line.push_str(&text(&r.value));
                        } else if line.ends_with(&fmt.key_separator) {
                            line.truncate(line.len() - fmt.key_separator.len());
                        }
                        write!(out, "{line}{}", fmt.line_separator)?;
                        next.insert(p.partition, o + 1);
                        printed += 1;
                        got_any = true;
                        if args.max_messages.is_some_and(|m| printed >= m) {
                            out.flush()?;
                            return Ok(());
                        }
                    }
                    next.insert(p.partition, next[&p.partition].max(batch.next_offset()));
                }
                out.flush()?;
            }
            if got_any {
                last_data = Instant::now();
            } else if args
                .timeout_ms
                .is_some_and(|t| last_data.elapsed() >= Duration::from_millis(t))
            {
                return Ok(());
            }
        }
    })
}
