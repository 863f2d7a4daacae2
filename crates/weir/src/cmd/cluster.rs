//! `weir cluster describe`: the cluster as its brokers see it (cluster id,
//! controller, live brokers: DescribeCluster, or Metadata from a broker
//! without it) and, given `--bootstrap-controller`, the metadata quorum
//! (DescribeQuorum on a CONTROLLER listener), like Kafka's
//! `kafka-metadata-quorum.sh describe --status --replication`.
//!
//! The two parts are asked independently: one that fails is one `error:`
//! line on stderr, the other is still printed, and the exit status is 1.

use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use weir_client::{ClientError, Connection};
use weir_protocol::codec::Message;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_quorum_request::{
    PartitionData as QuorumPartitionRequest, TopicData as QuorumTopicRequest,
};
use weir_protocol::messages::describe_quorum_response::{PartitionData, ReplicaState};
use weir_protocol::messages::{
    ApiKey, DescribeClusterRequest, DescribeQuorumRequest, MetadataRequest,
};

use super::common::{Bootstrap, ClientSettings, DEFAULT_CLIENT_ID, one_line, run_async};

/// The metadata log's topic, as DescribeQuorum names it (Kafka's).
const METADATA_TOPIC: &str = "__cluster_metadata";

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir cluster describe --bootstrap-server 127.0.0.1:9092\n  weir cluster describe --bootstrap-server 127.0.0.1:9092 --bootstrap-controller 127.0.0.1:9093,127.0.0.1:9095,127.0.0.1:9097"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Print the cluster id, the controller, the live brokers and (with
    /// --bootstrap-controller) the metadata quorum.
    #[command(
        after_help = "The quorum part asks each --bootstrap-controller address in turn until the active\ncontroller (the raft leader) answers; name every voter of controller.quorum.voters\nto find it wherever it is. Lag is the leader's log end offset minus the voter's\n(\"-\" while the leader does not know a voter's log end)."
    )]
    Describe {
        /// CONTROLLER listener(s) to ask for the quorum, host:port[,host:port…].
        #[arg(long = "bootstrap-controller", value_name = "HOST:PORT")]
        bootstrap_controller: Option<String>,
    },
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let Action::Describe {
            bootstrap_controller,
        } = args.action;
        let config = args.bootstrap.load_config()?;
        config.warn_unknown(&[]);
        let settings = args.bootstrap.settings(&config)?;
        let mut errors = Vec::new();
        match describe_cluster(&settings).await {
            Ok(view) => print_cluster(&view),
            Err(e) => errors.push(e),
        }
        if let Some(addrs) = bootstrap_controller {
            match describe_quorum(&addrs, &settings).await {
                Ok((addr, partition)) => print_quorum(&addr, &partition),
                Err(e) => errors.push(e),
            }
        }
        // Every failure but the last is printed here; the last is the
        // command's error.
        let last = errors.pop();
        for e in errors {
            eprintln!("error: {}", one_line(&e));
        }
        match last {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

/// One live broker as the cluster reports it.
#[derive(Debug)]
struct BrokerEntry {
    id: i32,
    host: String,
    port: i32,
    rack: Option<String>,
}

/// What a broker says of its cluster.
#[derive(Debug)]
struct ClusterView {
    cluster_id: String,
    controller_id: i32,
    brokers: Vec<BrokerEntry>,
}

/// Asks a broker: DescribeCluster when it serves it, Metadata otherwise.
async fn describe_cluster(settings: &ClientSettings) -> Result<ClusterView> {
    let mut client = settings.connect().await?;
    let conn = client.any_connection().await?;
    let mut view = if conn
        .version_for(
            ApiKey::DescribeCluster,
            DescribeClusterRequest::VALID_VERSIONS,
        )
        .is_ok()
    {
        let resp = conn.send(&DescribeClusterRequest::default()).await?;
        ClientError::check(
            resp.error_code,
            || format!("DescribeCluster from {}", conn.addr()),
            resp.error_message,
        )?;
        ClusterView {
            cluster_id: resp.cluster_id,
            controller_id: resp.controller_id,
            brokers: resp
                .brokers
                .into_iter()
                .map(|b| BrokerEntry {
                    id: b.broker_id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                })
                .collect(),
        }
    } else {
        let req = MetadataRequest {
            topics: Some(Vec::new()),
            ..Default::default()
        };
        let resp = conn.send(&req).await?;
        ClusterView {
            cluster_id: resp.cluster_id.unwrap_or_default(),
            controller_id: resp.controller_id,
            brokers: resp
                .brokers
                .into_iter()
                .map(|b| BrokerEntry {
                    id: b.node_id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                })
                .collect(),
        }
    };
    view.brokers.sort_by_key(|b| b.id);
    Ok(view)
}

fn print_cluster(view: &ClusterView) {
    println!("ClusterId:        {}", view.cluster_id);
    println!(
        "ControllerId:     {}",
        if view.controller_id < 0 {
            "none".to_string()
        } else {
            view.controller_id.to_string()
        }
    );
    println!("Brokers:          {}", view.brokers.len());
    let rows = view
        .brokers
        .iter()
        .map(|b| {
            vec![
                b.id.to_string(),
                format!("{}:{}", b.host, b.port),
                b.rack.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect::<Vec<_>>();
    print_table(&["BrokerId", "Endpoint", "Rack"], &rows);
}

/// Asks each of `addrs` (comma-separated) for the metadata quorum until
/// the active controller answers; returns its address and the state of
/// `__cluster_metadata-0`.
async fn describe_quorum(
    addrs: &str,
    settings: &ClientSettings,
) -> Result<(String, PartitionData)> {
    let addrs: Vec<&str> = addrs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    if addrs.is_empty() {
        bail!("--bootstrap-controller names no address");
    }
    let mut refusals = Vec::new();
    for addr in &addrs {
        match quorum_of(addr, settings).await {
            Ok(p) => return Ok((addr.to_string(), p)),
            Err(e) => refusals.push(one_line(&e)),
        }
    }
    if addrs.len() == 1 {
        bail!("cannot describe the quorum: {}", refusals.join("; "));
    }
    bail!(
        "no active controller among {}: {}",
        addrs.join(","),
        refusals.join("; ")
    )
}

/// DescribeQuorum on one CONTROLLER listener.
async fn quorum_of(addr: &str, settings: &ClientSettings) -> Result<PartitionData> {
    let client_id = settings.client_id.as_deref().unwrap_or(DEFAULT_CLIENT_ID);
    let mut conn = Connection::connect_with(addr, client_id, &settings.options).await?;
    let req = DescribeQuorumRequest {
        topics: vec![QuorumTopicRequest {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![QuorumPartitionRequest {
                partition_index: 0,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = conn.send(&req).await?;
    if resp.error_code == ErrorCode::NotController.code() {
        // v2 says which node leads; earlier versions say nothing more.
        match resp.error_message.filter(|m| !m.is_empty()) {
            Some(m) => bail!("{addr}: {m}"),
            None => bail!("{addr} is not the active controller"),
        }
    }
    ClientError::check(
        resp.error_code,
        || format!("DescribeQuorum from {addr}"),
        resp.error_message,
    )?;
    let partition = resp
        .topics
        .into_iter()
        .filter(|t| t.topic_name == METADATA_TOPIC)
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == 0)
        .ok_or_else(|| anyhow!("{addr} answered DescribeQuorum without {METADATA_TOPIC}-0"))?;
    ClientError::check(
        partition.error_code,
        || format!("DescribeQuorum for {METADATA_TOPIC}-0 from {addr}"),
        partition.error_message.clone().filter(|m| !m.is_empty()),
    )?;
    Ok(partition)
}

/// The leader's log end offset minus `r`'s; None while `r`'s is unknown.
fn lag(leader_end: Option<i64>, r: &ReplicaState) -> Option<i64> {
    let leader_end = leader_end?;
    (r.log_end_offset >= 0).then(|| (leader_end - r.log_end_offset).max(0))
}

fn print_quorum(addr: &str, p: &PartitionData) {
    let leader_end = p
        .current_voters
        .iter()
        .find(|r| r.replica_id == p.leader_id)
        .map(|r| r.log_end_offset)
        .filter(|&o| o >= 0);
    let ids = |rs: &[ReplicaState]| {
        rs.iter()
            .map(|r| r.replica_id.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let max_lag = p
        .current_voters
        .iter()
        .filter(|r| r.replica_id != p.leader_id)
        .filter_map(|r| lag(leader_end, r))
        .max()
        .unwrap_or(0);
    println!();
    println!("Quorum:           {METADATA_TOPIC}-0 (active controller at {addr})");
    println!("LeaderId:         {}", p.leader_id);
    println!("LeaderEpoch:      {}", p.leader_epoch);
    println!("HighWatermark:    {}", p.high_watermark);
    println!("MaxFollowerLag:   {max_lag}");
    println!("CurrentVoters:    [{}]", ids(&p.current_voters));
    println!("CurrentObservers: [{}]", ids(&p.observers));
    let mut voters: Vec<&ReplicaState> = p.current_voters.iter().collect();
    // The leader first, then by id (as kafka-metadata-quorum.sh).
    voters.sort_by_key(|r| (r.replica_id != p.leader_id, r.replica_id));
    let row = |r: &ReplicaState, status: &str| {
        vec![
            r.replica_id.to_string(),
            r.log_end_offset.to_string(),
            lag(leader_end, r).map_or_else(|| "-".to_string(), |l| l.to_string()),
            r.last_fetch_timestamp.to_string(),
            r.last_caught_up_timestamp.to_string(),
            status.to_string(),
        ]
    };
    let rows = voters
        .iter()
        .map(|r| {
            let status = if r.replica_id == p.leader_id {
                "Leader"
            } else {
                "Follower"
            };
            row(r, status)
        })
        .chain(p.observers.iter().map(|r| row(r, "Observer")))
        .collect::<Vec<_>>();
    print_table(
        &[
            "NodeId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        ],
        &rows,
    );
}

/// Prints `rows` under `headers` in columns two spaces apart.
fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>();
        println!("{}", padded.join("  ").trim_end());
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
