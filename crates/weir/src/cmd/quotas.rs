//! `weir quotas`: set, remove and list client quotas, like
//! `kafka-configs.sh --entity-type users|clients|ips` (AlterClientQuotas,
//! DescribeClientQuotas).
//!
//! An entity is one or two `--entity-type`s (`users` and `clients` may be
//! combined, `ips` stands alone); `--entity-name`s pair with them in
//! order and `--entity-default` names the default of the types left over.
//! `describe` without a name lists every entity of the types given (all
//! entities without `--entity-type`); with names it shows exactly that
//! entity.

use std::process::ExitCode;

use anyhow::{Result, bail};
use weir_client::quotas::{QuotaAlteration, QuotaMatch, QuotaOp, describe_entity};

use super::common::{Bootstrap, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir quotas alter --entity-type users --entity-name alice --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152\n  weir quotas alter --entity-type users --entity-name alice --entity-type clients --entity-name app --add-config request_percentage=50\n  weir quotas alter --entity-type clients --entity-default --add-config producer_byte_rate=524288\n  weir quotas alter --entity-type users --entity-name alice --delete-config consumer_byte_rate\n  weir quotas describe\n  weir quotas describe --entity-type users --entity-name alice\n  weir quotas describe --entity-type clients --entity-default\n\nKeys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage\n(percent of one request thread), controller_mutation_rate (stored, not\nenforced) for users and clients; connection_creation_rate (stored, not\nenforced) for ips. The client needs ALTER_CONFIGS (alter) or DESCRIBE_CONFIGS\n(describe) on the cluster."
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum EntityType {
    Users,
    Clients,
    Ips,
}

impl EntityType {
    fn wire(self) -> &'static str {
        match self {
            EntityType::Users => "user",
            EntityType::Clients => "client-id",
            EntityType::Ips => "ip",
        }
    }
}

#[derive(clap::Args, Debug, Default)]
struct EntityArgs {
    /// users, clients or ips (repeatable: users with clients)
    #[arg(long = "entity-type", value_enum)]
    entity_types: Vec<EntityType>,
    /// Name of the entity, paired with the --entity-type at the same place
    #[arg(long = "entity-name")]
    entity_names: Vec<String>,
    /// The default (`<default>`) of the types without a name
    #[arg(long = "entity-default")]
    entity_default: bool,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Show quotas: every entity, those of a type, or one entity.
    Describe {
        #[command(flatten)]
        entity: EntityArgs,
    },
    /// Set or remove quotas of one entity.
    Alter {
        #[command(flatten)]
        entity: EntityArgs,
        /// Quotas to set: key=value[,key=value…]
        #[arg(long = "add-config")]
        add_config: Option<String>,
        /// Quotas to remove: key[,key…] (repeatable)
        #[arg(long = "delete-config")]
        delete_config: Vec<String>,
    },
}

/// The entity's (type, name-or-default) pairs; `None` in the name
/// position means no name was given (describe: any name).
fn pairs(e: &EntityArgs) -> Result<Vec<(EntityType, Option<Option<String>>)>> {
    if e.entity_names.len() > e.entity_types.len() {
        bail!("more --entity-name than --entity-type");
    }
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (i, t) in e.entity_types.iter().enumerate() {
        if seen.contains(t) {
            bail!("--entity-type {t:?} given twice");
        }
        seen.push(*t);
        let name = match e.entity_names.get(i) {
            Some(n) => Some(Some(n.clone())),
            None if e.entity_default => Some(None),
            None => None,
        };
        out.push((*t, name));
    }
    if seen.contains(&EntityType::Ips) && seen.len() > 1 {
        bail!("--entity-type ips cannot be combined with users or clients");
    }
    if e.entity_default && e.entity_names.len() == e.entity_types.len() {
        bail!("--entity-default with a name for every --entity-type");
    }
    Ok(out)
}

/// `key=value,key=value` into quota values.
fn parse_add_config(s: &str) -> Result<Vec<(String, f64)>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let Some((k, v)) = p.split_once('=') else {
                bail!("--add-config wants key=value, got {p:?}");
            };
            let value: f64 = v
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("quota {k} is not a number: {v:?}"))?;
            Ok((k.trim().to_string(), value))
        })
        .collect()
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let action = args.action;
        let mut client = args.bootstrap.connect().await?;
        match action {
            Action::Describe { entity } => {
                let pairs = pairs(&entity)?;
                let strict = !pairs.is_empty() && pairs.iter().all(|(_, n)| n.is_some());
                let components: Vec<(String, QuotaMatch)> = pairs
                    .into_iter()
                    .map(|(t, n)| {
                        let m = match n {
                            Some(Some(name)) => QuotaMatch::Exact(name),
                            Some(None) => QuotaMatch::Default,
                            None => QuotaMatch::Specified,
                        };
                        (t.wire().to_string(), m)
                    })
                    .collect();
                let mut found = client.describe_client_quotas(&components, strict).await?;
                found.sort_by_key(|e| describe_entity(&e.entity));
                for e in found {
                    let values: Vec<String> =
                        e.quotas.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                    println!(
                        "Quota configs for {} are {}",
                        describe_entity(&e.entity),
                        values.join(", ")
                    );
                }
                Ok(())
            }
            Action::Alter {
                entity,
                add_config,
                delete_config,
            } => {
                let pairs = pairs(&entity)?;
                if pairs.is_empty() {
                    bail!("alter needs --entity-type with --entity-name or --entity-default");
                }
                let mut entity_pairs = Vec::new();
                for (t, n) in pairs {
                    let Some(name) = n else {
                        bail!("--entity-type {t:?} needs --entity-name or --entity-default");
                    };
                    entity_pairs.push((t.wire().to_string(), name));
                }
                let mut ops: Vec<QuotaOp> = match &add_config {
                    Some(s) => parse_add_config(s)?
                        .into_iter()
                        .map(|(k, v)| QuotaOp::Set(k, v))
                        .collect(),
                    None => Vec::new(),
                };
                ops.extend(
                    delete_config
                        .iter()
                        .flat_map(|d| d.split(','))
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                        .map(|k| QuotaOp::Remove(k.to_string())),
                );
                if ops.is_empty() {
                    bail!("nothing to change: give --add-config and/or --delete-config");
                }
                let alteration = QuotaAlteration {
                    entity: entity_pairs,
                    ops,
                };
                let results = client
                    .alter_client_quotas(std::slice::from_ref(&alteration), false)
                    .await?;
                for r in results {
                    r?;
                }
                println!(
                    "Completed updating quota configs for {}.",
                    describe_entity(&alteration.entity)
                );
                Ok(())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_pair_with_types_in_order() {
        let e = EntityArgs {
            entity_types: vec![EntityType::Users, EntityType::Clients],
            entity_names: vec!["alice".into()],
            entity_default: true,
        };
        let p = pairs(&e).unwrap();
        assert_eq!(
            p,
            [
                (EntityType::Users, Some(Some("alice".to_string()))),
                (EntityType::Clients, Some(None))
            ]
        );
        let ips = EntityArgs {
            entity_types: vec![EntityType::Ips, EntityType::Users],
            ..Default::default()
        };
        assert!(pairs(&ips).is_err());
        assert_eq!(
            parse_add_config("producer_byte_rate=1024, request_percentage=12.5").unwrap(),
            [
                ("producer_byte_rate".to_string(), 1024.0),
                ("request_percentage".to_string(), 12.5)
            ]
        );
        assert!(parse_add_config("producer_byte_rate").is_err());
    }
}
