//! `weir delete-records`: move the log start offset of partitions forward,
//! like `kafka-delete-records.sh`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::common::{Bootstrap, run_async};

#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["topic", "offset_json_file"])),
    after_help = "Examples:\n  weir delete-records --topic orders --partition 0 --offset 1000\n  weir delete-records --topic orders --partition 0 --offset -1      # everything below the high watermark\n  weir delete-records --offset-json-file offsets.json\n\noffsets.json, as kafka-delete-records.sh reads it:\n  {\"partitions\": [{\"topic\": \"orders\", \"partition\": 0, \"offset\": 1000}], \"version\": 1}"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[arg(long, requires_all = ["partition", "offset"], conflicts_with = "offset_json_file")]
    topic: Option<String>,
    #[arg(long)]
    partition: Option<i32>,
    /// Delete records below this offset (-1: up to the high watermark).
    #[arg(long, allow_hyphen_values = true)]
    offset: Option<i64>,
    /// A JSON file naming topic, partition and offset per partition.
    #[arg(long = "offset-json-file")]
    offset_json_file: Option<PathBuf>,
}

/// (topic, partition, offset) entries of a kafka-delete-records JSON file.
pub fn parse_offset_json(text: &str) -> Result<Vec<(String, i32, i64)>> {
    let v: serde_json::Value = serde_json::from_str(text).context("invalid JSON")?;
    let parts = v
        .get("partitions")
        .and_then(|p| p.as_array())
        .context("expected an object with a \"partitions\" array")?;
    let mut out = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let topic = p
            .get("topic")
            .and_then(|t| t.as_str())
            .with_context(|| format!("partitions[{i}]: missing \"topic\""))?;
        let partition = p
            .get("partition")
            .and_then(|t| t.as_i64())
            .and_then(|n| i32::try_from(n).ok())
            .with_context(|| format!("partitions[{i}]: missing or invalid \"partition\""))?;
        let offset = p
            .get("offset")
            .and_then(|t| t.as_i64())
            .with_context(|| format!("partitions[{i}]: missing or invalid \"offset\""))?;
        out.push((topic.to_string(), partition, offset));
    }
    if out.is_empty() {
        bail!("no partitions given");
    }
    Ok(out)
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let wanted: Vec<(String, i32, i64)> = match (&args.topic, &args.offset_json_file) {
            (Some(t), _) => {
                let (Some(p), Some(o)) = (args.partition, args.offset) else {
                    bail!("--topic needs --partition and --offset");
                };
                vec![(t.clone(), p, o)]
            }
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                parse_offset_json(&text).with_context(|| format!("in {}", path.display()))?
            }
            (None, None) => bail!("give --topic/--partition/--offset or --offset-json-file"),
        };
        let mut by_topic: BTreeMap<String, Vec<(i32, i64)>> = BTreeMap::new();
        for (t, p, o) in wanted {
            if o < -1 {
                bail!("invalid offset {o} for {t}-{p}: must be >= 0 or -1");
            }
            by_topic.entry(t).or_default().push((p, o));
        }
        let mut client = args.bootstrap.connect().await?;
        let mut lines = Vec::new();
        for (topic, parts) in by_topic {
            let result = client.delete_records(&topic, &parts).await?;
            for (p, low) in result {
                lines.push(format!("partition: {topic}-{p}\tlow_watermark: {low}"));
            }
        }
        println!("Records delete operation completed:");
        for l in lines {
            println!("{l}");
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::parse_offset_json;

    #[test]
    fn offset_json_files() {
        let ok = r#"{"partitions":[{"topic":"a","partition":0,"offset":5},{"topic":"b","partition":2,"offset":-1}],"version":1}"#;
        assert_eq!(
            parse_offset_json(ok).unwrap(),
            vec![("a".to_string(), 0, 5), ("b".to_string(), 2, -1)]
        );
        for bad in [
            "",
            "[]",
            r#"{"partitions":[]}"#,
            r#"{"partitions":[{"partition":0,"offset":1}]}"#,
            r#"{"partitions":[{"topic":"a","partition":"x","offset":1}]}"#,
            r#"{"partitions":[{"topic":"a","partition":4294967296,"offset":1}]}"#,
        ] {
            assert!(parse_offset_json(bad).is_err(), "{bad}");
        }
    }
}
