//! `weir acls`: add, list and remove ACLs, like `kafka-acls.sh --add`,
//! `--list` and `--remove`, with its flag names and its output.
//!
//! A resource is named with `--topic`, `--group`, `--transactional-id` or
//! `--cluster` (repeatable, combined); `--resource-pattern-type` says
//! whether names are literal (default) or prefixes. `add` creates one
//! ALLOW per `--allow-principal` × `--allow-host` × `--operation` × resource
//! and one DENY likewise; `--producer` and `--consumer` add the operations
//! those clients need. `remove` and `list` select with the same flags;
//! what is not given matches anything.

use std::process::ExitCode;

use anyhow::{Result, bail};
use weir_acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, CLUSTER_NAME, Operation, PatternType,
    Permission, ResourcePattern, ResourceType,
};

use super::common::{Bootstrap, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir acls add --allow-principal User:alice --operation Read --operation Describe --topic orders\n  weir acls add --allow-principal User:alice --producer --topic pay- --resource-pattern-type prefixed\n  weir acls add --allow-principal User:bob --consumer --topic orders --group billing\n  weir acls add --deny-principal User:mallory --operation All --topic '*'\n  weir acls list --topic orders\n  weir acls remove --allow-principal User:alice --operation Read --topic orders\n\nThe broker needs authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n(docs/security.md); the client needs ALTER (add, remove) or DESCRIBE (list) on the cluster."
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create ACLs.
    Add(Selection),
    /// List ACLs (all, or those of the named resources and principals).
    List(Selection),
    /// Remove the ACLs the flags select.
    Remove(Selection),
}

#[derive(clap::Args, Default)]
struct Selection {
    /// Topic (repeatable; `*` = every topic)
    #[arg(long = "topic")]
    topics: Vec<String>,
    /// Consumer group (repeatable; `*` = every group)
    #[arg(long = "group")]
    groups: Vec<String>,
    /// Transactional id (repeatable; `*` = every one)
    #[arg(long = "transactional-id")]
    transactional_ids: Vec<String>,
    /// The cluster resource
    #[arg(long)]
    cluster: bool,
    /// LITERAL (default for add and remove), PREFIXED, and for list and
    /// remove also ANY or MATCH
    #[arg(long = "resource-pattern-type")]
    pattern_type: Option<String>,
    /// Principal to allow, e.g. User:alice (repeatable; User:* = everyone)
    #[arg(long = "allow-principal")]
    allow_principals: Vec<String>,
    /// Principal to deny (repeatable)
    #[arg(long = "deny-principal")]
    deny_principals: Vec<String>,
    /// Host of the allow ACLs [default: *]
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    /// Host of the deny ACLs [default: *]
    #[arg(long = "deny-host")]
    deny_hosts: Vec<String>,
    /// Operation (repeatable): Read, Write, Create, Delete, Alter, Describe,
    /// ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All
    #[arg(long = "operation")]
    operations: Vec<String>,
    /// Add what a producer needs: WRITE, DESCRIBE and CREATE on the
    /// topics, WRITE and DESCRIBE on the transactional ids
    #[arg(long)]
    producer: bool,
    /// Add what a consumer needs: READ and DESCRIBE on the topics, READ on
    /// the groups
    #[arg(long)]
    consumer: bool,
    /// List: only ACLs of this principal
    #[arg(long)]
    principal: Option<String>,
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let command = args.command;
        let mut client = args.bootstrap.connect().await?;
        match command {
            Command::Add(sel) => {
                let acls = bindings_to_add(&sel)?;
                let results = client.create_acls(&acls).await?;
                let mut failed = 0;
                for (b, r) in acls.iter().zip(results) {
                    match r {
                        Ok(()) => println!(
                            "Adding ACL for resource `{}`:\n \t{}",
                            pattern_text(&b.pattern),
                            entry_text(&b.entry)
                        ),
                        Err(e) => {
                            failed += 1;
                            eprintln!("error: {e}");
                        }
                    }
                }
                if failed > 0 {
                    bail!("{failed} of {} ACLs were not created", acls.len());
                }
                Ok(())
            }
            Command::List(sel) => {
                let mut all = Vec::new();
                for f in filters(&sel, true)? {
                    all.extend(client.describe_acls(&f).await?);
                }
                all.sort();
                all.dedup();
                print_grouped("Current ACLs for resource", &all);
                Ok(())
            }
            Command::Remove(sel) => {
                let filters = filters(&sel, false)?;
                let results = client.delete_acls(&filters).await?;
                let mut removed = Vec::new();
                for r in results {
                    removed.extend(r?);
                }
                removed.sort();
                if removed.is_empty() {
                    println!("No ACLs matched.");
                }
                print_grouped("Removed ACLs for resource", &removed);
                Ok(())
            }
        }
    })
}

/// `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`.
fn pattern_text(p: &ResourcePattern) -> String {
    format!(
        "ResourcePattern(resourceType={}, name={}, patternType={})",
        p.resource_type, p.name, p.pattern_type
    )
}

/// `(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`.
fn entry_text(e: &AccessControlEntry) -> String {
    format!(
        "(principal={}, host={}, operation={}, permissionType={})",
        e.principal, e.host, e.operation, e.permission
    )
}

/// kafka-acls' listing: the entries under their resource pattern.
fn print_grouped(title: &str, bindings: &[AclBinding]) {
    let mut last: Option<&ResourcePattern> = None;
    for b in bindings {
        if last != Some(&b.pattern) {
            if last.is_some() {
                println!();
            }
            println!("{title} `{}`:", pattern_text(&b.pattern));
            last = Some(&b.pattern);
        }
        println!(" \t{}", entry_text(&b.entry));
    }
}

/// The named resources as (type, name).
fn resources(sel: &Selection) -> Vec<(ResourceType, String)> {
    let mut out = Vec::new();
    out.extend(sel.topics.iter().map(|t| (ResourceType::Topic, t.clone())));
    out.extend(sel.groups.iter().map(|g| (ResourceType::Group, g.clone())));
    out.extend(
        sel.transactional_ids
            .iter()
            .map(|t| (ResourceType::TransactionalId, t.clone())),
    );
    if sel.cluster {
        out.push((ResourceType::Cluster, CLUSTER_NAME.to_string()));
    }
    out
}

fn operations(sel: &Selection) -> Result<Vec<Operation>> {
    sel.operations
        .iter()
        .map(|o| o.parse::<Operation>().map_err(anyhow::Error::msg))
        .collect()
}

/// The operations an ACL on a resource of type `rt` gets: the explicit
/// ones, plus `--producer` / `--consumer`'s for that type.
fn operations_for(sel: &Selection, rt: ResourceType, explicit: &[Operation]) -> Vec<Operation> {
    let mut ops = explicit.to_vec();
    if sel.producer {
        match rt {
            ResourceType::Topic => {
                ops.extend([Operation::Write, Operation::Describe, Operation::Create])
            }
            ResourceType::TransactionalId => ops.extend([Operation::Write, Operation::Describe]),
            _ => {}
        }
    }
    if sel.consumer {
        match rt {
            ResourceType::Topic => ops.extend([Operation::Read, Operation::Describe]),
            ResourceType::Group => ops.push(Operation::Read),
            _ => {}
        }
    }
    ops.sort();
    ops.dedup();
    ops
}

fn pattern_type(sel: &Selection, default: PatternType) -> Result<PatternType> {
    match &sel.pattern_type {
        None => Ok(default),
        Some(p) => p.parse().map_err(anyhow::Error::msg),
    }
}

fn hosts(given: &[String]) -> Vec<String> {
    if given.is_empty() {
        vec!["*".to_string()]
    } else {
        given.to_vec()
    }
}

fn bindings_to_add(sel: &Selection) -> Result<Vec<AclBinding>> {
    let resources = resources(sel);
    if resources.is_empty() {
        bail!("name a resource: --topic, --group, --transactional-id or --cluster");
    }
    if sel.allow_principals.is_empty() && sel.deny_principals.is_empty() {
        bail!("name a principal: --allow-principal or --deny-principal (e.g. User:alice)");
    }
    let pt = pattern_type(sel, PatternType::Literal)?;
    if !matches!(pt, PatternType::Literal | PatternType::Prefixed) {
        bail!("ACLs are added with --resource-pattern-type literal or prefixed, not {pt}");
    }
    let explicit = operations(sel)?;
    if explicit.is_empty() && !sel.producer && !sel.consumer {
        bail!("name an operation: --operation (repeatable), --producer or --consumer");
    }
    let mut out = Vec::new();
    for (rt, name) in &resources {
        let ops = operations_for(sel, *rt, &explicit);
        for (permission, principals, hosts) in [
            (
                Permission::Allow,
                &sel.allow_principals,
                hosts(&sel.allow_hosts),
            ),
            (
                Permission::Deny,
                &sel.deny_principals,
                hosts(&sel.deny_hosts),
            ),
        ] {
            for principal in principals {
                for host in &hosts {
                    for op in &ops {
                        let b = AclBinding {
                            pattern: ResourcePattern {
                                resource_type: *rt,
                                name: name.clone(),
                                pattern_type: pt,
                            },
                            entry: AccessControlEntry {
                                principal: principal.clone(),
                                host: host.clone(),
                                operation: *op,
                                permission,
                            },
                        };
                        b.validate()?;
                        out.push(b);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Filters selecting what the flags name; `listing`: MATCH-free ANY
/// default and `--principal`.
fn filters(sel: &Selection, listing: bool) -> Result<Vec<AclBindingFilter>> {
    let default = if listing {
        PatternType::Any
    } else {
        PatternType::Literal
    };
    let pt = pattern_type(sel, default)?;
    let resources: Vec<(ResourceType, Option<String>)> = match resources(sel) {
        r if r.is_empty() => vec![(ResourceType::Any, None)],
        r => r.into_iter().map(|(t, n)| (t, Some(n))).collect(),
    };
    if !listing && resources[0].0 == ResourceType::Any {
        bail!(
            "name the resource whose ACLs to remove: --topic, --group, --transactional-id or --cluster"
        );
    }
    let explicit = operations(sel)?;
    // (permission, principal, host) choices; none given: any.
    let mut entries: Vec<(Permission, Option<String>, Option<String>)> = Vec::new();
    for (perm, principals, hosts) in [
        (Permission::Allow, &sel.allow_principals, &sel.allow_hosts),
        (Permission::Deny, &sel.deny_principals, &sel.deny_hosts),
    ] {
        for p in principals {
            if hosts.is_empty() {
                entries.push((perm, Some(p.clone()), None));
            }
            for h in hosts {
                entries.push((perm, Some(p.clone()), Some(h.clone())));
            }
        }
    }
    if entries.is_empty() {
        entries.push((Permission::Any, sel.principal.clone(), None));
    }
    let mut out = Vec::new();
    for (rt, name) in &resources {
        let ops = match operations_for(sel, *rt, &explicit) {
            ops if ops.is_empty() => vec![Operation::Any],
            ops => ops,
        };
        for (perm, principal, host) in &entries {
            for op in &ops {
                out.push(AclBindingFilter {
                    resource_type: *rt,
                    name: name.clone(),
                    pattern_type: pt,
                    principal: principal.clone(),
                    host: host.clone(),
                    operation: *op,
                    permission: *perm,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_and_consumer_expand_like_kafka_acls() {
        let sel = Selection {
            topics: vec!["orders".into()],
            groups: vec!["billing".into()],
            allow_principals: vec!["User:alice".into()],
            consumer: true,
            ..Default::default()
        };
        let acls = bindings_to_add(&sel).unwrap();
        let got: Vec<(ResourceType, Operation)> = acls
            .iter()
            .map(|b| (b.pattern.resource_type, b.entry.operation))
            .collect();
        assert_eq!(
            got,
            vec![
                (ResourceType::Topic, Operation::Read),
                (ResourceType::Topic, Operation::Describe),
                (ResourceType::Group, Operation::Read),
            ]
        );
        assert!(acls.iter().all(|b| b.entry.host == "*"));
    }

    #[test]
    fn add_needs_a_resource_a_principal_and_an_operation() {
        let mut sel = Selection::default();
        assert!(bindings_to_add(&sel).is_err());
        sel.topics.push("t".into());
        assert!(bindings_to_add(&sel).is_err());
        sel.allow_principals.push("User:a".into());
        assert!(bindings_to_add(&sel).is_err());
        sel.operations.push("read".into());
        assert_eq!(bindings_to_add(&sel).unwrap().len(), 1);
        sel.allow_principals = vec!["alice".into()];
        assert!(bindings_to_add(&sel).is_err());
    }

    #[test]
    fn remove_without_principal_matches_every_entry_of_the_resource() {
        let sel = Selection {
            topics: vec!["orders".into()],
            ..Default::default()
        };
        let f = filters(&sel, false).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name.as_deref(), Some("orders"));
        assert_eq!(f[0].pattern_type, PatternType::Literal);
        assert_eq!(
            (f[0].operation, f[0].permission),
            (Operation::Any, Permission::Any)
        );
        assert!(filters(&Selection::default(), false).is_err());
        assert_eq!(
            filters(&Selection::default(), true).unwrap()[0].resource_type,
            ResourceType::Any
        );
    }
}
