//! `weir topics`: create, list, describe and delete topics.

use std::process::ExitCode;

use anyhow::{Result, bail};

use super::common::{Bootstrap, parse_kv, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir topics create --topic orders --partitions 6\n  weir topics list\n  weir topics describe --topic orders\n  weir topics delete --topic orders"
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
    },
    /// List topic names.
    List,
    /// Show partitions, leaders and replicas of one or all topics.
    Describe {
        #[arg(long)]
        topic: Option<String>,
    },
    /// Delete a topic.
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
            } => {
                client
                    .create_topic(&topic, partitions, replication_factor, &configs)
                    .await?;
                println!("Created topic {topic}.");
            }
            Action::List => {
                let mut topics = client.metadata(None, false).await?;
                topics.sort_by(|a, b| a.name.cmp(&b.name));
                for t in topics {
                    println!("{}", t.name);
                }
            }
            Action::Describe { topic } => describe(&mut client, topic).await?,
            Action::Delete { topic } => {
                client.delete_topic(&topic).await?;
                println!("Deleted topic {topic}.");
            }
        }
        Ok(())
    })
}

async fn describe(client: &mut weir_client::Client, topic: Option<String>) -> Result<()> {
    let mut topics = match &topic {
        Some(t) => vec![client.topic(t).await?],
        None => client.metadata(None, false).await?,
    };
    if topics.is_empty() && topic.is_some() {
        bail!("unknown topic");
    }
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for t in topics {
        println!(
            "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}",
            t.name,
            t.topic_id,
            t.partitions.len(),
            t.partitions.first().map_or(0, |p| p.replicas.len())
        );
        for p in &t.partitions {
            let (start, _) = client
                .list_offset(&t.name, p.partition, -2, p.leader)
                .await?;
            let (end, _) = client
                .list_offset(&t.name, p.partition, -1, p.leader)
                .await?;
            println!(
                "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\tLogStartOffset: {}\tHighWatermark: {}",
                t.name,
                p.partition,
                p.leader,
                join(&p.replicas),
                join(&p.isr),
                start,
                end
            );
        }
    }
    Ok(())
}

fn join(v: &[i32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
