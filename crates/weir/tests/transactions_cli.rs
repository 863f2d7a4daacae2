//! `weir transactions list` and `describe` against a real `weir serve`,
//! with transactional ids set up by raw requests (InitProducerId,
//! AddPartitionsToTxn) as a transactional producer would.

use crate::common;

use std::collections::HashMap;

use common::Broker;
use weir_client::Connection;
use weir_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use weir_protocol::messages::{
    AddPartitionsToTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
};

/// A transactional id's producer (id, epoch), after looking up its
/// coordinator as clients do.
async fn init(conn: &mut Connection, id: &str) -> (i64, i16) {
    let found = conn
        .send_version(
            &FindCoordinatorRequest {
                key: id.into(),
                key_type: 1,
                ..Default::default()
            },
            3,
        )
        .await
        .unwrap();
    assert_eq!(found.error_code, 0, "{:?}", found.error_message);
    let r = conn
        .send_version(
            &InitProducerIdRequest {
                transactional_id: Some(id.into()),
                transaction_timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            },
            4,
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, 0);
    (r.producer_id, r.producer_epoch)
}

async fn add(
    conn: &mut Connection,
    id: &str,
    (pid, epoch): (i64, i16),
    topic: &str,
    partitions: Vec<i32>,
) {
    let r = conn
        .send_version(
            &AddPartitionsToTxnRequest {
                v3_and_below_transactional_id: id.into(),
                v3_and_below_producer_id: pid,
                v3_and_below_producer_epoch: epoch,
                v3_and_below_topics: vec![AddPartitionsToTxnTopic {
                    name: topic.into(),
                    partitions,
                    ..Default::default()
                }],
                ..Default::default()
            },
            3,
        )
        .await
        .unwrap();
    for t in r.results_by_topic_v3_and_below {
        for p in t.results_by_partition {
            assert_eq!(
                p.partition_error_code, 0,
                "{}-{}",
                t.name, p.partition_index
            );
        }
    }
}

/// The rows of a table printed by `weir transactions`, by header.
fn table(text: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            // an empty last cell (no partitions) leaves nothing to split
            assert!(cells.len() + 1 >= header.len(), "{text}");
            header
                .iter()
                .enumerate()
                .map(|(i, h)| (h.to_string(), cells.get(i).unwrap_or(&"").to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn list_and_describe_transactions() {
    let b = Broker::start_with(&["--set", "transaction.state.log.num.partitions=2"]);
    assert_eq!(
        b.run(&["topics", "create", "--topic", "t", "--partitions", "3"])
            .code,
        0
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (open, idle) = rt.block_on(async {
        let mut conn = Connection::connect(&b.addr, "weir-test").await.unwrap();
        let open = init(&mut conn, "open-txn").await;
        add(&mut conn, "open-txn", open, "t", vec![2, 0]).await;
        let idle = init(&mut conn, "idle-txn").await;
        (open, idle)
    });

    let out = b.run(&["transactions", "list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows = table(&out.stdout);
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    assert_eq!(rows[0]["TransactionalId"], "idle-txn");
    assert_eq!(rows[0]["ProducerId"], idle.0.to_string());
    assert_eq!(rows[0]["TransactionState"], "Empty");
    assert_eq!(rows[1]["TransactionalId"], "open-txn");
    assert_eq!(rows[1]["TransactionState"], "Ongoing");
    assert_eq!(rows[1]["Coordinator"], "1");

    let out = b.run(&["transactions", "list", "--state", "Ongoing"]);
    assert_eq!(table(&out.stdout).len(), 1, "{}", out.stdout);
    let out = b.run(&["transactions", "list", "--duration-filter", "3600000"]);
    let rows = table(&out.stdout);
    assert!(
        rows.iter().all(|r| r["TransactionalId"] != "open-txn"),
        "{}",
        out.stdout
    );

    let out = b.run(&["transactions", "describe", "--transactional-id", "open-txn"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = &table(&out.stdout)[0];
    assert_eq!(row["CoordinatorId"], "1");
    assert_eq!(row["ProducerId"], open.0.to_string());
    assert_eq!(row["ProducerEpoch"], open.1.to_string());
    assert_eq!(row["TransactionState"], "Ongoing");
    assert_eq!(row["TransactionTimeoutMs"], "60000");
    assert_ne!(row["CurrentTransactionStartTimeMs"], "None");
    assert!(row["TransactionDurationMs"].parse::<i64>().unwrap() >= 0);
    assert_eq!(row["TopicPartitions"], "t-0,t-2");

    let out = b.run(&["transactions", "describe", "--transactional-id", "idle-txn"]);
    let row = &table(&out.stdout)[0];
    assert_eq!(row["CurrentTransactionStartTimeMs"], "None");
    assert_eq!(row["TransactionDurationMs"], "None");
    assert_eq!(row["TopicPartitions"], "");

    let out = b.run(&["transactions", "describe", "--transactional-id", "nobody"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("TRANSACTIONAL_ID_NOT_FOUND"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.trim().lines().count(),
        1,
        "one line: {}",
        out.stderr
    );
}
