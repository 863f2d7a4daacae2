//! `weir transactions`: list and describe transactions, like
//! `kafka-transactions.sh list` / `describe` (same columns). `list` asks
//! every broker (each lists the transactional ids it coordinates);
//! `describe` asks the transactional id's coordinator.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use weir_client::Client;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    DescribeTransactionsRequest, FindCoordinatorRequest, ListTransactionsRequest,
};

use super::common::{Bootstrap, now_ms, run_async};

/// FindCoordinator's key type of a transactional id.
const TRANSACTION_KEY_TYPE: i8 = 1;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir transactions list\n  weir transactions list --duration-filter 60000\n  weir transactions describe --transactional-id my-txn"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Transactional ids of every broker, with their coordinator, producer
    /// id and state.
    #[command(
        after_help = "Examples:\n  weir transactions list\n  weir transactions list --state Ongoing --duration-filter 60000\n\nColumns: TransactionalId, Coordinator (the broker coordinating it), ProducerId,\nTransactionState (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,\nCompleteAbort)."
    )]
    List {
        /// Only transactions running longer than this many milliseconds
        /// (negative: all).
        #[arg(long, allow_hyphen_values = true)]
        duration_filter: Option<i64>,
        /// Only these states (repeatable).
        #[arg(long = "state")]
        states: Vec<String>,
        /// Only these producer ids (repeatable).
        #[arg(long = "producer-id")]
        producer_ids: Vec<i64>,
    },
    /// The state of one transactional id and its open transaction.
    #[command(
        after_help = "Example:\n  weir transactions describe --transactional-id my-txn\n\nColumns: CoordinatorId, TransactionalId, ProducerId, ProducerEpoch,\nTransactionState, TransactionTimeoutMs, CurrentTransactionStartTimeMs and\nTransactionDurationMs (None without a transaction), TopicPartitions."
    )]
    Describe {
        #[arg(long)]
        transactional_id: String,
    },
}

pub fn run(args: Args) -> ExitCode {
    run_async(async move {
        let mut client = args.bootstrap.connect().await?;
        match args.command {
            Command::List {
                duration_filter,
                states,
                producer_ids,
            } => list(&mut client, duration_filter, states, producer_ids).await,
            Command::Describe { transactional_id } => {
                describe(&mut client, &transactional_id).await
            }
        }
    })
}

fn check(code: i16, what: impl FnOnce() -> String) -> Result<()> {
    match ErrorCode::from_code_lossy(code) {
        ErrorCode::None => Ok(()),
        e => bail!("{}: {}", what(), e.name()),
    }
}

/// Prints rows under headers, each column as wide as its widest cell
/// (Kafka's `prettyPrintTable`).
fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join(" ").trim_end());
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

async fn list(
    client: &mut Client,
    duration_filter: Option<i64>,
    states: Vec<String>,
    producer_ids: Vec<i64>,
) -> Result<()> {
    let req = ListTransactionsRequest {
        state_filters: states,
        producer_id_filters: producer_ids,
        duration_filter: duration_filter.unwrap_or(-1),
        ..Default::default()
    };
    let mut nodes: Vec<i32> = client.brokers().keys().copied().collect();
    nodes.sort_unstable();
    let mut rows = Vec::new();
    for node in nodes {
        let resp = client.node_connection(node).await?.send(&req).await?;
        check(resp.error_code, || {
            format!("list transactions on broker {node}")
        })?;
        for name in &resp.unknown_state_filters {
            eprintln!("warning: broker {node} knows no transaction state {name}");
        }
        for t in resp.transaction_states {
            rows.push(vec![
                t.transactional_id,
                node.to_string(),
                t.producer_id.to_string(),
                t.transaction_state,
            ]);
        }
    }
    rows.sort();
    print_table(
        &[
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "TransactionState",
        ],
        &rows,
    );
    Ok(())
}

/// The broker coordinating `transactional_id`.
async fn find_coordinator(client: &mut Client, transactional_id: &str) -> Result<i32> {
    let conn = client.any_connection().await?;
    let version = conn.version_for(weir_protocol::messages::ApiKey::FindCoordinator, (1, 6))?;
    let req = if version >= 4 {
        FindCoordinatorRequest {
            key_type: TRANSACTION_KEY_TYPE,
            coordinator_keys: vec![transactional_id.to_string()],
            ..Default::default()
        }
    } else {
        FindCoordinatorRequest {
            key: transactional_id.to_string(),
            key_type: TRANSACTION_KEY_TYPE,
            ..Default::default()
        }
    };
    let resp = conn.send_version(&req, version).await?;
    let (code, node) = match resp.coordinators.into_iter().next() {
        Some(c) => (c.error_code, c.node_id),
        None => (resp.error_code, resp.node_id),
    };
    check(code, || {
        format!("find the coordinator of transactional id {transactional_id}")
    })?;
    Ok(node)
}

async fn describe(client: &mut Client, transactional_id: &str) -> Result<()> {
    let node = find_coordinator(client, transactional_id).await?;
    let req = DescribeTransactionsRequest {
        transactional_ids: vec![transactional_id.to_string()],
        ..Default::default()
    };
    let resp = client.node_connection(node).await?.send(&req).await?;
    let t = resp
        .transaction_states
        .into_iter()
        .next()
        .context("empty DescribeTransactions response")?;
    check(t.error_code, || {
        format!("describe transactional id {transactional_id}")
    })?;
    let (start, duration) = if t.transaction_start_time_ms >= 0 {
        (
            t.transaction_start_time_ms.to_string(),
            (now_ms() - t.transaction_start_time_ms).max(0).to_string(),
        )
    } else {
        ("None".to_string(), "None".to_string())
    };
    let partitions: Vec<String> = t
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |p| format!("{}-{p}", topic.topic))
        })
        .collect();
    print_table(
        &[
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        &[vec![
            node.to_string(),
            t.transactional_id,
            t.producer_id.to_string(),
            t.producer_epoch.to_string(),
            t.transaction_state,
            t.transaction_timeout_ms.to_string(),
            start,
            duration,
            partitions.join(","),
        ]],
    );
    Ok(())
}
