//! `weir groups`: list, describe, reset offsets of and delete consumer
//! groups, like `kafka-consumer-groups.sh`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use weir_client::Client;
use weir_protocol::messages::{DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest};

use super::common::{Bootstrap, run_async};

mod consumer;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir groups list\n  weir groups describe my-group\n  weir groups reset-offsets my-group --topic orders --to-earliest --execute\n  weir groups delete my-group"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// List consumer groups and their states.
    #[command(after_help = "Example:\n  weir groups list")]
    List,
    /// Committed offsets, lag and members of a group.
    #[command(
        after_help = "Example:\n  weir groups describe billing\n\nPer partition: CURRENT-OFFSET (committed: the next offset the group reads),\nLOG-END-OFFSET (the high watermark), LAG (LOG-END-OFFSET - CURRENT-OFFSET),\nand the member owning it (CONSUMER-ID, HOST, CLIENT-ID)."
    )]
    Describe { group: String },
    /// Move a group's committed offsets (the group must be Empty).
    #[command(
        after_help = "Examples:\n  weir groups reset-offsets billing --topic orders --to-earliest --dry-run\n  weir groups reset-offsets billing --topic orders --to-offset 100 --execute\n  weir groups reset-offsets billing --topic orders --shift-by -10 --execute\n  weir groups reset-offsets billing --topic orders --to-datetime 2024-05-01T12:00:00Z --execute"
    )]
    ResetOffsets(ResetArgs),
    /// Delete an empty group and its committed offsets.
    #[command(after_help = "Example:\n  weir groups delete billing")]
    Delete { group: String },
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).multiple(false)))]
#[command(group(clap::ArgGroup::new("mode").required(true).multiple(false)))]
struct ResetArgs {
    group: String,
    #[arg(long)]
    topic: String,
    #[arg(long, group = "target")]
    to_earliest: bool,
    #[arg(long, group = "target")]
    to_latest: bool,
    /// ISO 8601, e.g. 2024-05-01T12:00:00Z or 2024-05-01T12:00:00.000+02:00.
    #[arg(long, group = "target")]
    to_datetime: Option<String>,
    #[arg(long, group = "target")]
    to_offset: Option<i64>,
    #[arg(long, group = "target", allow_hyphen_values = true)]
    shift_by: Option<i64>,
    /// Print the new offsets without committing them.
    #[arg(long, group = "mode")]
    dry_run: bool,
    /// Commit the new offsets.
    #[arg(long, group = "mode")]
    execute: bool,
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let mut client = args.bootstrap.connect().await?;
        match args.command {
            Command::List => list(&mut client).await,
            Command::Describe { group } => describe(&mut client, &group).await,
            Command::ResetOffsets(r) => reset(&mut client, r).await,
            Command::Delete { group } => delete(&mut client, &group).await,
        }
    })
}

fn check(code: i16, what: &str) -> Result<()> {
    if code != 0 {
        let name = weir_protocol::error_code::ErrorCode::from_code(code)
            .map(|e| format!("{e:?}"))
            .unwrap_or_else(|| format!("error {code}"));
        bail!("{what}: {name}");
    }
    Ok(())
}

async fn list(client: &mut Client) -> Result<()> {
    let resp = client
        .any_connection()
        .await?
        .send(&ListGroupsRequest::default())
        .await?;
    check(resp.error_code, "list groups")?;
    let mut groups = resp.groups;
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    println!("{:<40} {:<20} STATE", "GROUP", "PROTOCOL-TYPE");
    for g in groups {
        println!(
            "{:<40} {:<20} {}",
            g.group_id, g.protocol_type, g.group_state
        );
    }
    Ok(())
}

/// Committed offsets of a group: (topic, partition) → offset.
async fn committed(client: &mut Client, group: &str) -> Result<BTreeMap<(String, i32), i64>> {
    Ok(client.committed_offsets(group).await?)
}

/// Partitions in a consumer-protocol assignment (empty if undecodable).
fn assigned(assignment: &bytes::Bytes) -> Vec<(String, i32)> {
    weir_client::group::decode_assignment(assignment)
}

async fn high_watermark(client: &mut Client, topic: &str, partition: i32) -> Result<i64> {
    let leader = client.leader(topic, partition).await?;
    Ok(client.list_offset(topic, partition, -1, leader).await?.0)
}

/// The TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET and LAG columns of
/// one partition's row, with which both group types' tables start.
async fn offset_columns(
    client: &mut Client,
    offsets: &BTreeMap<(String, i32), i64>,
    topic: &str,
    partition: i32,
) -> String {
    let current = offsets.get(&(topic.to_string(), partition)).copied();
    let hw = high_watermark(client, topic, partition).await.ok();
    let lag = match (current, hw) {
        (Some(c), Some(h)) => (h - c).max(0).to_string(),
        _ => "-".to_string(),
    };
    format!(
        "{:<30} {:>9} {:>15} {:>15} {:>8}",
        topic,
        partition,
        current.map_or("-".to_string(), |c| c.to_string()),
        hw.map_or("-".to_string(), |h| h.to_string()),
        lag,
    )
}

async fn describe(client: &mut Client, group: &str) -> Result<()> {
    if let Some(g) = consumer::describe_consumer_group(client, group).await? {
        return consumer::print(client, &g).await;
    }
    let req = DescribeGroupsRequest {
        groups: vec![group.to_string()],
        ..Default::default()
    };
    let resp = client
        .coordinator_connection(group)
        .await?
        .send(&req)
        .await?;
    let g = resp
        .groups
        .into_iter()
        .next()
        .context("empty DescribeGroups response")?;
    check(g.error_code, &format!("describe {group}"))?;
    let offsets = committed(client, group).await?;
    if g.group_state == "Dead" && offsets.is_empty() {
        bail!("consumer group {group} does not exist");
    }
    // (topic, partition) → (member id, host, client id)
    let mut owners: BTreeMap<(String, i32), (String, String, String)> = BTreeMap::new();
    for m in &g.members {
        for tp in assigned(&m.member_assignment) {
            owners.insert(
                tp,
                (
                    m.member_id.clone(),
                    m.client_host.clone(),
                    m.client_id.clone(),
                ),
            );
        }
    }
    let mut rows: Vec<(String, i32)> = offsets.keys().cloned().collect();
    rows.extend(owners.keys().cloned());
    rows.sort();
    rows.dedup();
    println!(
        "GROUP {group}  TYPE classic  STATE {}  PROTOCOL {}  MEMBERS {}",
        g.group_state,
        if g.protocol_data.is_empty() {
            "-"
        } else {
            &g.protocol_data
        },
        g.members.len()
    );
    println!();
    println!(
        "{:<30} {:>9} {:>15} {:>15} {:>8} {:<45} {:<16} CLIENT-ID",
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"
    );
    for (topic, partition) in rows {
        let columns = offset_columns(client, &offsets, &topic, partition).await;
        let (member, host, client_id) = owners
            .get(&(topic, partition))
            .cloned()
            .unwrap_or_else(|| ("-".into(), "-".into(), "-".into()));
        println!("{columns} {member:<45} {host:<16} {client_id}");
    }
    if !g.members.is_empty() {
        println!();
        println!(
            "{:<45} {:<16} {:<20} #PARTITIONS",
            "CONSUMER-ID", "HOST", "CLIENT-ID"
        );
        for m in &g.members {
            println!(
                "{:<45} {:<16} {:<20} {}",
                m.member_id,
                m.client_host,
                m.client_id,
                assigned(&m.member_assignment).len()
            );
        }
    }
    Ok(())
}

async fn reset(client: &mut Client, r: ResetArgs) -> Result<()> {
    let group = r.group.as_str();
    let req = DescribeGroupsRequest {
        groups: vec![group.to_string()],
        ..Default::default()
    };
    let resp = client
        .coordinator_connection(group)
        .await?
        .send(&req)
        .await?;
    if let Some(g) = resp.groups.first() {
        check(g.error_code, &format!("describe {group}"))?;
        if g.group_state != "Empty" && g.group_state != "Dead" {
            bail!(
                "assignments can only be reset if the group '{group}' is inactive, but the current state is {}",
                g.group_state
            );
        }
    }
    let topic = client.topic(&r.topic).await?;
    check(topic.error_code, &format!("topic {}", r.topic))?;
    let current = committed(client, group).await?;
    let datetime = r.to_datetime.as_deref().map(parse_datetime).transpose()?;
    let mut targets = Vec::new();
    for p in &topic.partitions {
        let part = p.partition;
        let earliest = client.list_offset(&r.topic, part, -2, p.leader).await?.0;
        let latest = client.list_offset(&r.topic, part, -1, p.leader).await?.0;
        let wanted = if r.to_earliest {
            earliest
        } else if r.to_latest {
            latest
        } else if let Some(ts) = datetime {
            let (o, _) = client.list_offset(&r.topic, part, ts, p.leader).await?;
            if o < 0 { latest } else { o }
        } else if let Some(o) = r.to_offset {
            o
        } else if let Some(n) = r.shift_by {
            let base = current
                .get(&(r.topic.clone(), part))
                .copied()
                .unwrap_or(earliest);
            base.saturating_add(n)
        } else {
            bail!("no reset target given");
        };
        // like Kafka: out-of-range targets are clamped to the log
        targets.push((part, wanted.clamp(earliest, latest)));
    }
    println!("{:<30} {:>9} {:>12}", "TOPIC", "PARTITION", "NEW-OFFSET");
    for (p, o) in &targets {
        println!("{:<30} {:>9} {:>12}", r.topic, p, o);
    }
    if r.dry_run {
        return Ok(());
    }
    let offsets: BTreeMap<(String, i32), i64> = targets
        .iter()
        .map(|&(p, o)| ((r.topic.clone(), p), o))
        .collect();
    client.commit_offsets(group, -1, "", &offsets).await?;
    Ok(())
}

async fn delete(client: &mut Client, group: &str) -> Result<()> {
    let req = DeleteGroupsRequest {
        groups_names: vec![group.to_string()],
        ..Default::default()
    };
    let resp = client
        .coordinator_connection(group)
        .await?
        .send(&req)
        .await?;
    for r in resp.results {
        check(r.error_code, &format!("delete {}", r.group_id))?;
        println!("Deleted group {}", r.group_id);
    }
    Ok(())
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]` (no zone = UTC) into
/// milliseconds since the epoch.
pub fn parse_datetime(s: &str) -> Result<i64> {
    let bad = || {
        anyhow::anyhow!("invalid --to-datetime {s:?}: expected YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]")
    };
    let num = |t: &str| t.parse::<i64>().map_err(|_| bad());
    let (date, rest) = s.split_once('T').ok_or_else(bad)?;
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d.as_slice() else {
        return Err(bad());
    };
    let (y, mo, da) = (num(y)?, num(mo)?, num(da)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return Err(bad());
    }
    let (time, offset_ms) = if let Some(t) = rest.strip_suffix('Z') {
        (t, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (t, z) = rest.split_at(i);
        let sign = if z.starts_with('-') { -1 } else { 1 };
        let (h, m) = z[1..].split_once(':').ok_or_else(bad)?;
        (t, sign * (num(h)? * 3_600_000 + num(m)? * 60_000))
    } else {
        (rest, 0)
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<&str> = hms.split(':').collect();
    let [h, mi, se] = t.as_slice() else {
        return Err(bad());
    };
    let (h, mi, se) = (num(h)?, num(mi)?, num(se)?);
    if h > 23 || mi > 59 || se > 60 || frac.is_empty() || frac.len() > 9 {
        return Err(bad());
    }
    let ms = num(&format!("{frac:0<3}")[..3])?;
    let days = days_from_civil(y, mo, da);
    Ok(days * 86_400_000 + h * 3_600_000 + mi * 60_000 + se * 1000 + ms - offset_ms)
}

#[cfg(test)]
mod tests {
    use super::parse_datetime;

    #[test]
    fn datetimes_parse_to_epoch_millis() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("1970-01-01T00:00:01.5Z", 1500),
            ("2001-09-09T01:46:40Z", 1_000_000_000_000),
            ("2001-09-09T03:46:40+02:00", 1_000_000_000_000),
            ("2001-09-08T23:46:40.000-02:00", 1_000_000_000_000),
            ("2024-02-29T12:00:00", 1_709_208_000_000),
        ];
        for (s, want) in cases {
            assert_eq!(parse_datetime(s).unwrap(), want, "{s}");
        }
        for bad in [
            "2024-13-01T00:00:00Z",
            "2024-01-01",
            "yesterday",
            "2024-01-01T25:00:00Z",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
    }
}
