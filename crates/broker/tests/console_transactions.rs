//! The console's `/api/transactions` against an in-process broker driven
//! through the transaction coordinator's requests: nothing before
//! `__transaction_state` exists, then every transactional id with the
//! producer, state, timeout and partitions its requests gave it, an open
//! transaction first with its age, and counts equal to the
//! `weir_transaction*` metrics.

use std::sync::Arc;
use std::time::Instant;

use prometheus_parse::{Scrape, Value as Sample};
use serde_json::{Value, json};
use weir_broker::Broker;
use weir_broker::http::console;

use crate::common::*;
use crate::transactions::{add_partitions, end_txn, init_txn, wait_for_state};

const CONFIG: &[(&str, &str)] = &[
    ("transaction.state.log.num.partitions", "3"),
    ("offsets.topic.num.partitions", "3"),
];

fn get(b: &Arc<Broker>, query: &str) -> (u16, Value) {
    let r = console::handle(b, "/api/transactions", query).expect("a console path");
    assert_eq!(r.content_type, "application/json");
    (r.status, serde_json::from_slice(&r.body).expect("JSON"))
}

fn ok(b: &Arc<Broker>) -> Value {
    let (status, v) = get(b, "");
    assert_eq!(status, 200, "{v}");
    v
}

/// The value of metric `name` (no labels) in `/metrics`.
fn metric(b: &Broker, name: &str) -> f64 {
    let text = weir_broker::metrics::render(b);
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    match s
        .samples
        .iter()
        .find(|x| x.metric == name)
        .map(|x| &x.value)
    {
        Some(Sample::Gauge(v)) | Some(Sample::Counter(v)) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_are_listed_with_their_producer_state_partitions_and_age() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), CONFIG).await;
    let broker = b.broker.clone();
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);

    // Until a transactional id is looked up the topic does not exist and
    // this broker coordinates nothing.
    let v = ok(&broker);
    assert_eq!(v["coordinated_partitions"], json!([]));
    assert_eq!(v["transactions"], json!([]));
    assert_eq!(v["total"], 0);

    let (_, idle_pid, idle_epoch) = init_txn(&mut c, "idle", 60_000).await;
    let (_, done_pid, done_epoch) = init_txn(&mut c, "done", 60_000).await;
    add_partitions(&mut c, "done", (done_pid, done_epoch), &[("t", 0)], 3).await;
    assert_eq!(
        end_txn(&mut c, "done", (done_pid, done_epoch), true).await,
        NONE
    );
    wait_for_state(&mut c, "done", &["CompleteCommit"]).await;
    let (_, gone_pid, gone_epoch) = init_txn(&mut c, "gone", 60_000).await;
    add_partitions(&mut c, "gone", (gone_pid, gone_epoch), &[("t", 1)], 3).await;
    assert_eq!(
        end_txn(&mut c, "gone", (gone_pid, gone_epoch), false).await,
        NONE
    );
    wait_for_state(&mut c, "gone", &["CompleteAbort"]).await;
    let (_, open_pid, open_epoch) = init_txn(&mut c, "open", 45_000).await;
    let before_start = Instant::now();
    let added = add_partitions(
        &mut c,
        "open",
        (open_pid, open_epoch),
        &[("t", 1), ("t", 0)],
        3,
    )
    .await;
    assert!(added.iter().all(|(_, _, e)| *e == NONE), "{added:?}");

    let v = ok(&broker);
    let since_start = i64::try_from(before_start.elapsed().as_millis()).unwrap();
    assert_eq!(v["coordinated_partitions"], json!([0, 1, 2]));
    assert_eq!(v["loading_partitions"], json!([]));
    assert_eq!(v["total"], 4);
    let listed: Vec<&str> = v["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["transactional_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["open", "done", "gone", "idle"],
        "open first, then by id"
    );

    let open = &v["transactions"][0];
    assert_eq!(open["producer_id"], open_pid);
    assert_eq!(open["producer_epoch"], open_epoch);
    assert_eq!(open["state"], "Ongoing");
    assert_eq!(open["pending_state"], Value::Null);
    assert_eq!(open["timeout_ms"], 45_000);
    assert_eq!(
        open["partitions"],
        json!([{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}])
    );
    let age = open["open_age_ms"]
        .as_i64()
        .expect("an open transaction has an age");
    // both ends are whole milliseconds of the broker's clock: one more
    // than the elapsed time measured here is rounding
    assert!(
        (0..=since_start + 1).contains(&age),
        "{age} ms, started {since_start} ms ago"
    );
    assert_eq!(
        open["start_ms"].as_i64().unwrap() + age,
        v["now_ms"].as_i64().unwrap()
    );

    for (i, id, pid, epoch, state) in [
        (1, "done", done_pid, done_epoch, "CompleteCommit"),
        (2, "gone", gone_pid, gone_epoch, "CompleteAbort"),
        (3, "idle", idle_pid, idle_epoch, "Empty"),
    ] {
        let t = &v["transactions"][i];
        assert_eq!(
            (&t["producer_id"], &t["producer_epoch"], &t["state"]),
            (&json!(pid), &json!(epoch), &json!(state)),
            "{id}: {t}"
        );
        assert_eq!(t["open_age_ms"], Value::Null, "{id}: no open transaction");
        assert_eq!(t["partitions"], json!([]), "{id}");
        assert_eq!(t["timeout_ms"], 60_000, "{id}");
    }
    assert_eq!(
        v["transactions"][3]["start_ms"],
        Value::Null,
        "never started"
    );

    let counts = &v["counts"];
    assert_eq!(
        counts,
        &json!({
            "transactional_ids": 4,
            "open": 1,
            "oldest_open_age_ms": age,
            "completing": 0,
            "committed": 1,
            "aborted": 1,
            "timed_out": 0,
        })
    );
    for (name, count) in [
        ("weir_transactional_ids", "transactional_ids"),
        ("weir_transactions_open", "open"),
        ("weir_transactions_completing", "completing"),
        ("weir_transactions_committed_total", "committed"),
        ("weir_transactions_aborted_total", "aborted"),
        ("weir_transactions_timed_out_total", "timed_out"),
    ] {
        assert_eq!(
            metric(&broker, name),
            counts[count].as_f64().unwrap(),
            "{name}"
        );
    }
    assert!(metric(&broker, "weir_transactions_oldest_open_age_seconds") * 1000.0 >= age as f64);

    // strict query parameters, as every console path
    assert_eq!(get(&broker, "state=Ongoing").0, 400);
    b.shutdown().await.unwrap();
}
