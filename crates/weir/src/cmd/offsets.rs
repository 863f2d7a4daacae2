//! `weir offsets`: earliest, latest or by-time offsets per partition, like
//! `kafka-get-offsets`.

use std::process::ExitCode;

use anyhow::bail;

use super::common::{Bootstrap, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir offsets --topic orders\n  weir offsets --topic orders --time earliest\n  weir offsets --topic orders --time 1700000000000"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long)]
    topic: String,
    /// Only these partitions (comma separated).
    #[arg(long, value_delimiter = ',')]
    partitions: Vec<i32>,
    /// latest (-1), earliest (-2), max-timestamp (-3), or a timestamp in ms.
    #[arg(long, default_value = "latest", allow_hyphen_values = true)]
    time: String,
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let ts: i64 = match args.time.as_str() {
            "latest" => -1,
            "earliest" => -2,
            "max-timestamp" => -3,
            n => match n.parse() {
                Ok(v) => v,
                Err(_) => {
                    bail!("invalid --time {n:?}: latest, earliest, max-timestamp or milliseconds")
                }
            },
        };
        let mut client = args.bootstrap.connect().await?;
        let topic = client.topic(&args.topic).await?;
        for p in &topic.partitions {
            if !args.partitions.is_empty() && !args.partitions.contains(&p.partition) {
                continue;
            }
            let (offset, _) = client
                .list_offset(&args.topic, p.partition, ts, p.leader)
                .await?;
            println!("{}:{}:{}", args.topic, p.partition, offset);
        }
        Ok(())
    })
}
