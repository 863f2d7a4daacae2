//! `weir configs`: describe and alter topic, broker and group configs, like
//! `kafka-configs.sh`. Broker configs are altered dynamically, for one
//! broker (`--entity-name <id>`) or cluster-wide (`--entity-default`).

use std::process::ExitCode;

use anyhow::{Result, bail};
use weir_client::{ConfigOp, ConfigSource, ResourceType};

use super::common::{Bootstrap, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir configs describe --entity-type topics --entity-name orders\n  weir configs describe --entity-type topics --entity-name orders --all\n  weir configs describe --entity-type brokers --entity-name 1\n  weir configs describe --entity-type brokers --entity-default\n  weir configs alter --entity-type topics --entity-name orders --add-config retention.ms=3600000,cleanup.policy=[compact,delete]\n  weir configs alter --entity-type topics --entity-name orders --delete-config retention.ms\n  weir configs alter --entity-type brokers --entity-default --add-config log.retention.ms=86400000\n  weir configs alter --entity-type groups --entity-name my-group --add-config consumer.session.timeout.ms=50000"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum EntityType {
    Topics,
    Brokers,
    Groups,
}

impl EntityType {
    fn resource(self) -> ResourceType {
        match self {
            EntityType::Topics => ResourceType::Topic,
            EntityType::Brokers => ResourceType::Broker,
            EntityType::Groups => ResourceType::Group,
        }
    }
}

#[derive(clap::Subcommand)]
enum Action {
    /// Show configs: overrides only, or all with their sources (--all).
    #[command(
        after_help = "Examples:\n  weir configs describe --entity-type topics --entity-name orders\n  weir configs describe --entity-type brokers --all"
    )]
    Describe {
        #[arg(long = "entity-type", value_enum)]
        entity_type: EntityType,
        /// Topic name or broker id (for brokers, default: the lowest known broker id).
        #[arg(long = "entity-name", conflicts_with = "entity_default")]
        entity_name: Option<String>,
        /// Brokers: the cluster-wide dynamic configs (`<default>`).
        #[arg(long = "entity-default")]
        entity_default: bool,
        /// List every config with its value and source, not only overrides.
        #[arg(long)]
        all: bool,
    },
    /// Set or remove topic config overrides or dynamic broker configs
    /// (IncrementalAlterConfigs).
    #[command(
        after_help = "Examples:\n  weir configs alter --entity-type topics --entity-name orders --add-config retention.ms=3600000,segment.bytes=1048576\n  weir configs alter --entity-type topics --entity-name orders --add-config cleanup.policy=[compact,delete]\n  weir configs alter --entity-type topics --entity-name orders --delete-config retention.ms,segment.bytes\n  weir configs alter --entity-type brokers --entity-name 1 --add-config message.max.bytes=2097152\n  weir configs alter --entity-type brokers --entity-default --delete-config log.retention.ms\n\nOnly dynamic broker configs can be altered (docs/configuration.md lists them); the rest are set in the config file."
    )]
    Alter {
        #[arg(long = "entity-type", value_enum)]
        entity_type: EntityType,
        #[arg(long = "entity-name", required_unless_present = "entity_default")]
        entity_name: Option<String>,
        /// Brokers: alter the cluster-wide dynamic configs (`<default>`).
        #[arg(long = "entity-default", conflicts_with = "entity_name")]
        entity_default: bool,
        /// Configs to set: k=v,k2=v2 (a list value in brackets: k=[a,b]).
        #[arg(long = "add-config")]
        add_config: Option<String>,
        /// Config names to remove (back to the default): k,k2.
        #[arg(long = "delete-config", value_delimiter = ',')]
        delete_config: Vec<String>,
    },
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        match args.action {
            Action::Describe {
                entity_type,
                entity_name,
                entity_default,
                all,
            } => {
                if entity_type != EntityType::Brokers && entity_name.is_none() {
                    bail!("--entity-name is required for topics and groups");
                }
                if entity_type != EntityType::Brokers && entity_default {
                    bail!("--entity-default is for brokers only");
                }
                let mut client = args.bootstrap.connect().await?;
                // Without a name, a broker describes itself: ask the lowest
                // known node id.
                let name = match entity_name {
                    Some(n) => n,
                    None if entity_default => String::new(),
                    None => client
                        .brokers()
                        .keys()
                        .min()
                        .map(|id| id.to_string())
                        .unwrap_or_default(),
                };
                if entity_type == EntityType::Topics {
                    client.topic(&name).await?;
                }
                let configs = client
                    .describe_configs(entity_type.resource(), &name)
                    .await?;
                let kind = match entity_type {
                    EntityType::Topics => "topic",
                    EntityType::Brokers if entity_default => "default broker",
                    EntityType::Brokers => "broker",
                    EntityType::Groups => "group",
                };
                if entity_default {
                    println!("Default configs for brokers in the cluster are:");
                } else if all {
                    println!("All configs for {kind} {name} are:");
                } else {
                    println!("Non-default configs for {kind} {name} are:");
                }
                for c in configs {
                    if !all && c.source == ConfigSource::Default {
                        continue;
                    }
                    let value = if c.sensitive {
                        "null".to_string()
                    } else {
                        c.value.clone().unwrap_or_else(|| "null".into())
                    };
                    let synonyms = c
                        .synonyms
                        .iter()
                        .map(|(n, v, s)| {
                            format!("{}:{}={}", s.name(), n, v.as_deref().unwrap_or("null"))
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    println!(
                        "  {}={} source={} sensitive={} synonyms={{{}}}",
                        c.name,
                        value,
                        c.source.name(),
                        c.sensitive,
                        synonyms
                    );
                }
            }
            Action::Alter {
                entity_type,
                entity_name,
                entity_default,
                add_config,
                delete_config,
            } => {
                if entity_type != EntityType::Brokers && entity_default {
                    bail!("--entity-default is for brokers only");
                }
                // `<default>`: the empty broker resource name
                let entity_name = entity_name.unwrap_or_default();
                let mut ops: Vec<ConfigOp> = match &add_config {
                    Some(s) => parse_add_config(s)?
                        .into_iter()
                        .map(|(k, v)| ConfigOp::Set(k, v))
                        .collect(),
                    None => Vec::new(),
                };
                ops.extend(
                    delete_config
                        .iter()
                        .map(|k| k.trim())
                        .filter(|k| !k.is_empty())
                        .map(|k| ConfigOp::Delete(k.to_string())),
                );
                if ops.is_empty() {
                    bail!("nothing to alter: give --add-config and/or --delete-config");
                }
                let mut client = args.bootstrap.connect().await?;
                if entity_type == EntityType::Topics {
                    client.topic(&entity_name).await?;
                }
                client
                    .incremental_alter_configs(entity_type.resource(), &entity_name, &ops)
                    .await?;
                match entity_type {
                    EntityType::Topics => {
                        println!("Completed updating config for topic {entity_name}.")
                    }
                    EntityType::Brokers if entity_default => {
                        println!("Completed updating default config for brokers in the cluster.")
                    }
                    EntityType::Brokers => {
                        println!("Completed updating config for broker {entity_name}.")
                    }
                    EntityType::Groups => {
                        println!("Completed updating config for group {entity_name}.")
                    }
                }
            }
        }
        Ok(())
    })
}

/// Parses kafka-configs.sh's `--add-config` value: `k=v,k2=v2`, where a
/// value holding commas is written in brackets, `k=[a,b]`.
pub fn parse_add_config(s: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("invalid --add-config {s:?}: expected k=v[,k2=v2]"))?;
        let key = key.trim();
        if key.is_empty() {
            bail!("invalid --add-config {s:?}: empty config name");
        }
        let (value, next) = if let Some(inner) = after.strip_prefix('[') {
            let (v, n) = inner
                .split_once(']')
                .ok_or_else(|| anyhow::anyhow!("invalid --add-config {s:?}: missing ']'"))?;
            let n = n.trim_start();
            let n = match n.strip_prefix(',') {
                Some(n) => n,
                None if n.is_empty() => n,
                None => bail!("invalid --add-config {s:?}: expected ',' after ']'"),
            };
            (v, n)
        } else {
            match after.split_once(',') {
                Some((v, n)) => (v, n),
                None => (after, ""),
            }
        };
        out.push((key.to_string(), value.trim().to_string()));
        rest = next.trim();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_add_config;

    #[test]
    fn add_config_values() {
        let kv = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cases: &[(&str, Vec<(String, String)>)] = &[
            ("retention.ms=1000", kv(&[("retention.ms", "1000")])),
            (
                "retention.ms=1000,segment.bytes=2048",
                kv(&[("retention.ms", "1000"), ("segment.bytes", "2048")]),
            ),
            (
                "cleanup.policy=[compact,delete],retention.ms=5",
                kv(&[("cleanup.policy", "compact,delete"), ("retention.ms", "5")]),
            ),
            (
                "cleanup.policy=[compact]",
                kv(&[("cleanup.policy", "compact")]),
            ),
            ("a=", kv(&[("a", "")])),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_add_config(input).unwrap(), want, "{input}");
        }
        for bad in ["nokey", "=1", "a=[x,y", "a=[x]y"] {
            assert!(parse_add_config(bad).is_err(), "{bad}");
        }
    }
}
