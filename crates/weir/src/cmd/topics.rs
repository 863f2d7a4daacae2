//! `weir topics`: create, list, describe, alter and delete topics, like
//! `kafka-topics.sh`, and move partitions to other brokers
//! (AlterPartitionReassignments / ListPartitionReassignments, like
//! `kafka-reassign-partitions.sh`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Result, bail};
use weir_client::{Client, ClientError, ConfigSource, PartitionInfo, ResourceType, TopicInfo};
use weir_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use weir_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use weir_protocol::messages::{
    AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest,
};

use super::common::{Bootstrap, parse_kv, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir topics create --topic orders --partitions 6 --config retention.ms=86400000\n  weir topics list\n  weir topics describe --topic orders\n  weir topics alter --topic orders --partitions 12\n  weir topics reassign --topic orders --partition 0 --replicas 2,3\n  weir topics reassignments\n  weir topics delete --topic orders"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Create a topic.
    #[command(
        after_help = "Example:\n  weir topics create --topic orders --partitions 6 --config cleanup.policy=compact"
    )]
    Create {
        #[arg(long)]
        topic: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long = "replication-factor", default_value_t = 1)]
        replication_factor: i16,
        /// Topic config override, name=value (repeatable).
        #[arg(long = "config", value_parser = parse_kv)]
        configs: Vec<(String, String)>,
        /// Succeed without change if the topic already exists.
        #[arg(long = "if-not-exists")]
        if_not_exists: bool,
    },
    /// List topic names.
    #[command(after_help = "Example:\n  weir topics list --exclude-internal")]
    List {
        /// Leave out internal topics such as __consumer_offsets.
        #[arg(long = "exclude-internal")]
        exclude_internal: bool,
    },
    /// Show partitions with leader, replicas, ISR, offsets and size, and
    /// non-default configs.
    #[command(
        after_help = "Examples:\n  weir topics describe --topic orders\n  weir topics describe --under-replicated-partitions\n\nPer partition: Leader (\"none\" when the partition has no live leader), Replicas,\nIsr, Offline (replicas on brokers that are not live; empty when none),\nLogStartOffset, HighWatermark, LogEndOffset (the latest offset ListOffsets\nreports; equal to the high watermark on a single broker), Size (bytes on disk,\nfrom DescribeLogDirs) and Segments (number of segment files, from weir's\nDescribeLogDirs extension). \"-\" stands for a value the leader did not report\n(no leader, or a Kafka broker without the extension)."
    )]
    Describe {
        /// Only this topic (default: all).
        #[arg(long)]
        topic: Option<String>,
        #[arg(long = "exclude-internal")]
        exclude_internal: bool,
        /// Only partitions whose ISR is smaller than their replica set.
        #[arg(long = "under-replicated-partitions")]
        under_replicated: bool,
        /// Only partitions without a live leader.
        #[arg(long = "unavailable-partitions")]
        unavailable: bool,
    },
    /// Raise the partition count of a topic (CreatePartitions). Configs are
    /// changed with `weir configs alter`.
    #[command(after_help = "Example:\n  weir topics alter --topic orders --partitions 12")]
    Alter {
        #[arg(long)]
        topic: String,
        /// New total number of partitions (must be larger than now).
        #[arg(long)]
        partitions: i32,
    },
    /// Move a partition to other brokers (AlterPartitionReassignments), or
    /// cancel its move in progress.
    #[command(
        after_help = "Examples:\n  weir topics reassign --topic orders --partition 0 --replicas 2,3\n  weir topics reassign --topic orders --partition 0 --cancel\n\nThe new replicas (the first is the preferred leader) fetch the partition from its\nleader; once all are in the ISR the move completes and the replicas left out stop\nbeing replicas. `weir topics reassignments` lists the moves in progress. --cancel\ngoes back to the original replicas."
    )]
    Reassign {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        /// The target replicas, broker ids separated by commas.
        #[arg(
            long,
            value_delimiter = ',',
            required_unless_present = "cancel",
            conflicts_with = "cancel"
        )]
        replicas: Vec<i32>,
        /// Cancel the reassignment in progress.
        #[arg(long)]
        cancel: bool,
    },
    /// List the partition reassignments in progress
    /// (ListPartitionReassignments).
    #[command(
        after_help = "Example:\n  weir topics reassignments --topic orders\n\nOne line per partition being moved: its current replicas (the target first, then\nthe replicas being removed), the replicas being added and those being removed.\nNothing is printed when no move is in progress."
    )]
    Reassignments {
        /// Only this topic (default: all).
        #[arg(long)]
        topic: Option<String>,
    },
    /// Delete a topic.
    #[command(after_help = "Example:\n  weir topics delete --topic orders")]
    Delete {
        #[arg(long)]
        topic: String,
    },
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let mut client = args.bootstrap.connect().await?;
        match args.action {
            Action::Create {
                topic,
                partitions,
                replication_factor,
                configs,
                if_not_exists,
            } => {
                if if_not_exists && client.topic(&topic).await.is_ok() {
                    return Ok(());
                }
                client
                    .create_topic(&topic, partitions, replication_factor, &configs)
                    .await?;
                println!("Created topic {topic}.");
            }
            Action::List { exclude_internal } => {
                let mut topics = client.metadata(None, false).await?;
                topics.sort_by(|a, b| a.name.cmp(&b.name));
                for t in topics {
                    if !(exclude_internal && t.is_internal) {
                        println!("{}", t.name);
                    }
                }
            }
            Action::Describe {
                topic,
                exclude_internal,
                under_replicated,
                unavailable,
            } => {
                let filter = PartitionFilter {
                    under_replicated,
                    unavailable,
                };
                describe(&mut client, topic, exclude_internal, filter).await?
            }
            Action::Alter { topic, partitions } => {
                let current = client.topic(&topic).await?.partitions.len();
                if partitions as i64 <= current as i64 {
                    bail!(
                        "topic {topic} has {current} partitions; --partitions must be larger (partitions cannot be removed)"
                    );
                }
                client.create_partitions(&topic, partitions).await?;
                println!("Topic {topic} now has {partitions} partitions.");
            }
            Action::Reassign {
                topic,
                partition,
                replicas,
                cancel,
            } => {
                let target = (!cancel).then_some(replicas);
                reassign(&mut client, &topic, partition, target.clone()).await?;
                match target {
                    Some(r) => println!(
                        "Reassignment of {topic}-{partition} to replicas {} started.",
                        join(&r)
                    ),
                    None => println!("Reassignment of {topic}-{partition} cancelled."),
                }
            }
            Action::Reassignments { topic } => {
                for r in reassignments(&mut client, topic.as_deref()).await? {
                    println!(
                        "Topic: {}\tPartition: {}\tReplicas: {}\tAdding Replicas: {}\tRemoving Replicas: {}",
                        r.topic,
                        r.partition,
                        join(&r.replicas),
                        join(&r.adding),
                        join(&r.removing)
                    );
                }
            }
            Action::Delete { topic } => {
                client.topic(&topic).await?;
                client.delete_topic(&topic).await?;
                println!("Deleted topic {topic}.");
            }
        }
        Ok(())
    })
}

/// Non-default configs of a topic as `k=v,k=v` (sensitive values hidden).
async fn overrides(client: &mut Client, topic: &str) -> Result<String> {
    let configs = client.describe_configs(ResourceType::Topic, topic).await?;
    Ok(configs
        .into_iter()
        .filter(|c| c.source == ConfigSource::DynamicTopic)
        .map(|c| {
            let v = if c.sensitive {
                "<sensitive>".to_string()
            } else {
                c.value.unwrap_or_else(|| "null".into())
            };
            format!("{}={}", c.name, v)
        })
        .collect::<Vec<_>>()
        .join(","))
}

/// Size in bytes and segment count of one partition (DescribeLogDirs).
#[derive(Debug)]
struct DiskUsage {
    size_bytes: i64,
    /// None when the broker did not report segment counts.
    segments: Option<u64>,
}

/// Partition → size and segments, asked of each leader.
async fn sizes(client: &mut Client, t: &TopicInfo) -> BTreeMap<i32, DiskUsage> {
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in &t.partitions {
        by_leader.entry(p.leader).or_default().push(p.partition);
    }
    let mut out = BTreeMap::new();
    for (leader, parts) in by_leader {
        // Sizes are informative: a broker without DescribeLogDirs leaves "-".
        if let Ok(dirs) = client.describe_log_dirs(leader, &t.name, &parts).await {
            for (p, replicas) in dirs {
                let segments = replicas
                    .iter()
                    .map(|r| r.segment_count)
                    .sum::<Option<u64>>();
                out.insert(
                    p,
                    DiskUsage {
                        size_bytes: replicas.iter().map(|r| r.size_bytes).sum(),
                        segments,
                    },
                );
            }
        }
    }
    out
}

/// Which partitions `describe` prints: all, or only those matching a
/// set flag (either flag matching is enough, as kafka-topics.sh).
#[derive(Debug, Clone, Copy, Default)]
struct PartitionFilter {
    under_replicated: bool,
    unavailable: bool,
}

impl PartitionFilter {
    fn is_set(self) -> bool {
        self.under_replicated || self.unavailable
    }

    fn keeps(self, p: &PartitionInfo) -> bool {
        if !self.is_set() {
            return true;
        }
        (self.under_replicated && p.isr.len() < p.replicas.len())
            || (self.unavailable && p.leader < 0)
    }
}

async fn describe(
    client: &mut Client,
    topic: Option<String>,
    exclude_internal: bool,
    filter: PartitionFilter,
) -> Result<()> {
    let mut topics = match &topic {
        Some(t) => vec![client.topic(t).await?],
        None => client.metadata(None, false).await?,
    };
    topics.retain(|t| !(exclude_internal && t.is_internal));
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for t in topics {
        // A filter prints only matching partitions, without the topic line
        // (as kafka-topics.sh does).
        if !filter.is_set() {
            let configs = overrides(client, &t.name).await?;
            println!(
                "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
                t.name,
                t.topic_id,
                t.partitions.len(),
                t.partitions.first().map_or(0, |p| p.replicas.len()),
                configs
            );
        }
        let sizes = sizes(client, &t).await;
        // Moves in progress are informative: a broker that cannot list
        // them leaves them out.
        let moving: BTreeMap<i32, Reassignment> = reassignments(client, Some(&t.name))
            .await
            .map(|rs| rs.into_iter().map(|r| (r.partition, r)).collect())
            .unwrap_or_default();
        for p in t.partitions.iter().filter(|p| filter.keeps(p)) {
            let offsets = log_offsets(client, &t.name, p).await;
            let usage = sizes.get(&p.partition);
            let dash = || "-".to_string();
            println!(
                "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\tOffline: {}\tLogStartOffset: {}\tHighWatermark: {}\tLogEndOffset: {}\tSize: {}\tSegments: {}{}",
                t.name,
                p.partition,
                if p.leader < 0 {
                    "none".to_string()
                } else {
                    p.leader.to_string()
                },
                join(&p.replicas),
                join(&p.isr),
                join(&p.offline_replicas),
                offsets.map_or_else(dash, |(start, _)| start.to_string()),
                offsets.map_or_else(dash, |(_, end)| end.to_string()),
                offsets.map_or_else(dash, |(_, end)| end.to_string()),
                usage.map_or_else(dash, |u| u.size_bytes.to_string()),
                usage
                    .and_then(|u| u.segments)
                    .map_or_else(dash, |n| n.to_string()),
                moving
                    .get(&p.partition)
                    .map_or_else(String::new, |r| format!(
                        "\tAdding Replicas: {}\tRemoving Replicas: {}",
                        join(&r.adding),
                        join(&r.removing)
                    )),
            );
        }
    }
    Ok(())
}

/// Log start and end offsets of a partition, asked of its leader; None
/// when it has no leader or the leader does not answer (the partition is
/// described all the same).
async fn log_offsets(client: &mut Client, topic: &str, p: &PartitionInfo) -> Option<(i64, i64)> {
    if p.leader < 0 {
        return None;
    }
    let (start, _) = client
        .list_offset(topic, p.partition, -2, p.leader)
        .await
        .ok()?;
    let (end, _) = client
        .list_offset(topic, p.partition, -1, p.leader)
        .await
        .ok()?;
    Some((start, end))
}

fn join(v: &[i32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A partition reassignment in progress.
#[derive(Debug, Clone)]
struct Reassignment {
    topic: String,
    partition: i32,
    /// The target replicas, then the ones being removed.
    replicas: Vec<i32>,
    adding: Vec<i32>,
    removing: Vec<i32>,
}

/// AlterPartitionReassignments for one partition; `None` cancels.
async fn reassign(
    client: &mut Client,
    topic: &str,
    partition: i32,
    target: Option<Vec<i32>>,
) -> Result<()> {
    let req = AlterPartitionReassignmentsRequest {
        timeout_ms: i32::try_from(client.request_timeout().as_millis()).unwrap_or(i32::MAX),
        topics: vec![ReassignableTopic {
            name: topic.to_string(),
            partitions: vec![ReassignablePartition {
                partition_index: partition,
                replicas: target,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = client.controller_connection().await?.send(&req).await?;
    let context = || format!("reassign {topic}-{partition}");
    ClientError::check(resp.error_code, context, resp.error_message)?;
    for p in resp.responses.into_iter().flat_map(|t| t.partitions) {
        ClientError::check(p.error_code, context, p.error_message)?;
    }
    Ok(())
}

/// ListPartitionReassignments, of one topic or all, by topic and
/// partition.
async fn reassignments(client: &mut Client, topic: Option<&str>) -> Result<Vec<Reassignment>> {
    // A topic's partitions are named: the request has no "all partitions
    // of this topic" form.
    let topics = match topic {
        Some(name) => {
            let t = client.topic(name).await?;
            Some(vec![ListPartitionReassignmentsTopics {
                name: name.to_string(),
                partition_indexes: t.partitions.iter().map(|p| p.partition).collect(),
                ..Default::default()
            }])
        }
        None => None,
    };
    let req = ListPartitionReassignmentsRequest {
        timeout_ms: i32::try_from(client.request_timeout().as_millis()).unwrap_or(i32::MAX),
        topics,
        ..Default::default()
    };
    let resp = client.controller_connection().await?.send(&req).await?;
    ClientError::check(
        resp.error_code,
        || "list partition reassignments".to_string(),
        resp.error_message,
    )?;
    let mut out: Vec<Reassignment> = resp
        .topics
        .into_iter()
        .flat_map(|t| {
            let name = t.name;
            t.partitions.into_iter().map(move |p| Reassignment {
                topic: name.clone(),
                partition: p.partition_index,
                replicas: p.replicas,
                adding: p.adding_replicas,
                removing: p.removing_replicas,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(out)
}
