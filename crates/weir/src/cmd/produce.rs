//! `weir produce`: read records from stdin, one per line, and produce them,
//! like `kafka-console-producer`.

use std::collections::HashMap;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use weir_protocol::partitioner::partition_for_key;
use weir_protocol::records::{Compression, RecordBatchBuilder, RecordHeader};

use super::command_config::CommandConfig;
use super::common::{
    Bootstrap, DEFAULT_MAX_BLOCK, now_ms, parse_acks, parse_compression, parse_kv, producer_topic,
    progress_bar, run_async, unescape,
};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  echo hello | weir produce --topic orders\n  printf 'k1:v1\\nk2:v2\\n' | weir produce --topic orders --property parse.key=true --property key.separator=:\n  weir produce --topic orders --compression-codec zstd --header source=cli < records.txt\n  weir produce --topic orders --command-config producer.properties < records.txt\n\nA missing topic is created by the broker when it auto-creates topics\n(auto.create.topics.enable), which is said on stderr."
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    /// Produce to this partition instead of choosing by key (murmur2, as the Java client does).
    #[arg(long)]
    partition: Option<i32>,
    /// Reader properties: parse.key=true, key.separator=<sep>, parse.headers=true, headers.delimiter, headers.separator, headers.key.separator.
    #[arg(long = "property", value_parser = parse_kv)]
    properties: Vec<(String, String)>,
    /// Header added to every record, key=value (repeatable).
    #[arg(long = "header", value_parser = parse_kv)]
    headers: Vec<(String, String)>,
    /// none, gzip, snappy, lz4 or zstd [default: compression.type of
    /// --command-config, else none]
    #[arg(long = "compression-codec")]
    compression: Option<String>,
    /// 0, 1 or -1 (all) [default: acks of --command-config, else -1]
    #[arg(long = "request-required-acks", allow_hyphen_values = true, value_parser = parse_acks)]
    acks: Option<i16>,
    /// Largest batch, in bytes, before it is sent [default: batch.size of
    /// --command-config, else 1048576]
    #[arg(long = "batch-size")]
    batch_size: Option<usize>,
}

/// `--command-config` properties `weir produce` applies, besides the
/// common ones.
const PRODUCER_PROPERTIES: &[&str] = &["acks", "batch.size", "compression.type", "max.block.ms"];

/// Producer settings: flags, then `--command-config`, then defaults.
struct Producer {
    acks: i16,
    batch_size: usize,
    compression: Compression,
    max_block: Duration,
}

impl Producer {
    fn new(args: &Args, config: &CommandConfig) -> Result<Producer> {
        let acks = match args.acks {
            Some(a) => a,
            None => config
                .get("acks")
                .map(parse_acks)
                .transpose()?
                .unwrap_or(-1),
        };
        let compression = args
            .compression
            .as_deref()
            .or(config.get("compression.type"))
            .map(parse_compression)
            .transpose()?
            .unwrap_or(Compression::None);
        Ok(Producer {
            acks,
            batch_size: match args.batch_size {
                Some(b) => b,
                None => config.parse("batch.size")?.unwrap_or(1024 * 1024),
            },
            compression,
            max_block: config.millis("max.block.ms")?.unwrap_or(DEFAULT_MAX_BLOCK),
        })
    }
}

struct Format {
    parse_key: bool,
    key_separator: String,
    parse_headers: bool,
    headers_delimiter: String,
    headers_separator: String,
    headers_key_separator: String,
}

impl Format {
    fn from_properties(props: &[(String, String)]) -> Result<Format> {
        let mut f = Format {
            parse_key: false,
            key_separator: "\t".into(),
            parse_headers: false,
            headers_delimiter: "\t".into(),
            headers_separator: ",".into(),
            headers_key_separator: ":".into(),
        };
        for (k, v) in props {
            match k.as_str() {
                "parse.key" => f.parse_key = v == "true",
                "key.separator" => f.key_separator = unescape(v),
                "parse.headers" => f.parse_headers = v == "true",
                "headers.delimiter" => f.headers_delimiter = unescape(v),
                "headers.separator" => f.headers_separator = unescape(v),
                "headers.key.separator" => f.headers_key_separator = unescape(v),
                other => bail!("unknown property {other:?}"),
            }
        }
        Ok(f)
    }

    /// Splits a line into (headers, key, value).
    fn parse(&self, line: &str) -> Result<(Vec<RecordHeader>, Option<Bytes>, Bytes)> {
        let mut rest = line;
        let mut headers = Vec::new();
        if self.parse_headers {
            let (h, r) = rest
                .split_once(self.headers_delimiter.as_str())
                .with_context(|| format!("no headers delimiter in {line:?}"))?;
            for pair in h
                .split(self.headers_separator.as_str())
                .filter(|p| !p.is_empty())
            {
                let (k, v) = pair
                    .split_once(self.headers_key_separator.as_str())
                    .unwrap_or((pair, ""));
                headers.push(RecordHeader {
                    key: k.to_string(),
                    value: Some(Bytes::copy_from_slice(v.as_bytes())),
                });
            }
            rest = r;
        }
        if self.parse_key {
            let (k, v) = rest
                .split_once(self.key_separator.as_str())
                .with_context(|| {
                    format!("no key separator {:?} in {line:?}", self.key_separator)
                })?;
            Ok((
                headers,
                Some(Bytes::copy_from_slice(k.as_bytes())),
                Bytes::copy_from_slice(v.as_bytes()),
            ))
        } else {
            Ok((headers, None, Bytes::copy_from_slice(rest.as_bytes())))
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let format = Format::from_properties(&args.properties)?;
        let config = args.bootstrap.load_config()?;
        config.warn_unknown(PRODUCER_PROPERTIES);
        let producer = Producer::new(&args, &config)?;
        let mut client = args.bootstrap.settings(&config)?.connect().await?;
        let topic = producer_topic(&mut client, &args.topic, producer.max_block).await?;
        let partitions = topic.partitions.len() as u32;
        if partitions == 0 {
            bail!("topic {} has no partitions", args.topic);
        }
        if let Some(p) = args.partition
            && (p < 0 || p as u32 >= partitions)
        {
            bail!(
                "partition {p} does not exist (topic {} has {partitions})",
                args.topic
            );
        }
        let leaders: HashMap<i32, i32> = topic
            .partitions
            .iter()
            .map(|p| (p.partition, p.leader))
            .collect();
        let mut builders: HashMap<i32, RecordBatchBuilder> = HashMap::new();
        // Null keys stick to one partition per batch, like the Java client.
        let mut sticky = 0u32;
        let mut sent = 0u64;
        // A file on stdin has a known size: show bytes read of it.
        let stdin_size = std::fs::metadata("/dev/stdin")
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let bar = match stdin_size {
            Some(len) => progress_bar(Some(len), "bytes"),
            None => progress_bar(None, "records"),
        };
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line.context("reading stdin")?;
            if stdin_size.is_some() {
                bar.inc(line.len() as u64 + 1);
            }
            let (mut headers, key, value) = format.parse(&line)?;
            for (k, v) in &args.headers {
                headers.push(RecordHeader {
                    key: k.clone(),
                    value: Some(Bytes::copy_from_slice(v.as_bytes())),
                });
            }
            let partition = match (args.partition, &key) {
                (Some(p), _) => p,
                (None, Some(k)) => partition_for_key(k, partitions).unwrap_or(0) as i32,
                (None, None) => sticky as i32,
            };
            let b = builders
                .entry(partition)
                .or_insert_with(|| RecordBatchBuilder::new(producer.compression));
            b.push(now_ms(), key, Some(value), headers)?;
            if stdin_size.is_none() {
                bar.inc(1);
            }
            if b.estimated_size() >= producer.batch_size {
                let full = builders.remove(&partition).expect("present");
                send(
                    &mut client,
                    &args.topic,
                    partition,
                    full,
                    producer.acks,
                    leaders.get(&partition).copied().unwrap_or(-1),
                )
                .await?;
                sent += 1;
                if args.partition.is_none() {
                    sticky = (sticky + 1) % partitions;
                }
            }
        }
        let mut rest: Vec<_> = builders.into_iter().collect();
        rest.sort_by_key(|(p, _)| *p);
        for (partition, b) in rest {
            if !b.is_empty() {
                send(
                    &mut client,
                    &args.topic,
                    partition,
                    b,
                    producer.acks,
                    leaders.get(&partition).copied().unwrap_or(-1),
                )
                .await?;
                sent += 1;
            }
        }
        bar.finish_and_clear();
        tracing::debug!(batches = sent, "produced");
        Ok(())
    })
}

async fn send(
    client: &mut weir_client::Client,
    topic: &str,
    partition: i32,
    builder: RecordBatchBuilder,
    acks: i16,
    leader: i32,
) -> Result<()> {
    let batch = builder.build()?;
    client
        .produce(topic, partition, batch.into_bytes(), acks, leader)
        .await?;
    Ok(())
}
