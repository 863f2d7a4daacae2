//! `weir groups describe` of a consumer-protocol group (KIP-848), from
//! ConsumerGroupDescribe: the group and assignment epochs, each member's
//! epoch, and per partition the member that owns it now next to the member
//! the target assignment gives it to (they differ while a rebalance is
//! under way).

use std::collections::BTreeMap;

use anyhow::Result;
use weir_client::Client;
use weir_protocol::messages::ConsumerGroupDescribeRequest;
use weir_protocol::messages::consumer_group_describe_response::{Assignment, DescribedGroup};

use super::{committed, offset_columns};

/// The group if it is a consumer-protocol group; None for a classic or
/// unknown group, or a broker without ConsumerGroupDescribe.
pub async fn describe_consumer_group(
    client: &mut Client,
    group: &str,
) -> Result<Option<DescribedGroup>> {
    let req = ConsumerGroupDescribeRequest {
        group_ids: vec![group.to_string()],
        ..Default::default()
    };
    let Ok(resp) = client.coordinator_connection(group).await?.send(&req).await else {
        return Ok(None);
    };
    Ok(resp.groups.into_iter().next().filter(|g| g.error_code == 0))
}

fn partitions(a: &Assignment) -> impl Iterator<Item = (String, i32)> + '_ {
    a.topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.clone(), *p)))
}

pub async fn print(client: &mut Client, g: &DescribedGroup) -> Result<()> {
    let group = g.group_id.as_str();
    let offsets = committed(client, group).await?;
    // (topic, partition) → (owner now, owner in the target assignment)
    let mut owners: BTreeMap<(String, i32), (String, String)> = BTreeMap::new();
    for m in &g.members {
        for tp in partitions(&m.assignment) {
            owners
                .entry(tp)
                .or_insert_with(|| ("-".into(), "-".into()))
                .0 = m.member_id.clone();
        }
        for tp in partitions(&m.target_assignment) {
            owners
                .entry(tp)
                .or_insert_with(|| ("-".into(), "-".into()))
                .1 = m.member_id.clone();
        }
    }
    let mut rows: Vec<(String, i32)> = offsets.keys().cloned().collect();
    rows.extend(owners.keys().cloned());
    rows.sort();
    rows.dedup();
    println!(
        "GROUP {group}  TYPE consumer  STATE {}  GROUP-EPOCH {}  ASSIGNMENT-EPOCH {}  ASSIGNOR {}  MEMBERS {}",
        g.group_state,
        g.group_epoch,
        g.assignment_epoch,
        g.assignor_name,
        g.members.len()
    );
    println!();
    println!(
        "{:<30} {:>9} {:>15} {:>15} {:>8} {:<40} TARGET-CONSUMER-ID",
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"
    );
    for (topic, partition) in rows {
        let columns = offset_columns(client, &offsets, &topic, partition).await;
        let (now, target) = owners
            .get(&(topic, partition))
            .cloned()
            .unwrap_or_else(|| ("-".into(), "-".into()));
        println!("{columns} {now:<40} {target}");
    }
    if !g.members.is_empty() {
        println!();
        println!(
            "{:<40} {:>6} {:<16} {:<20} {:>9} {:>7}  SUBSCRIPTION",
            "CONSUMER-ID", "EPOCH", "HOST", "CLIENT-ID", "#ASSIGNED", "#TARGET"
        );
        for m in &g.members {
            let subscription = match &m.subscribed_topic_regex {
                Some(re) => format!("regex {re}"),
                None => m.subscribed_topic_names.join(","),
            };
            println!(
                "{:<40} {:>6} {:<16} {:<20} {:>9} {:>7}  {}",
                m.member_id,
                m.member_epoch,
                m.client_host,
                m.client_id,
                partitions(&m.assignment).count(),
                partitions(&m.target_assignment).count(),
                subscription
            );
        }
    }
    Ok(())
}
