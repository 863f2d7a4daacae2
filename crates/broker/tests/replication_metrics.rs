//! The replication metrics and the console's follower view, against
//! hand-set cluster views: a leader whose followers fetch (Fetch with a
//! replica id) and whose ISR changes are answered, and two in-process
//! brokers where one follows the other.

use std::sync::Arc;

use prometheus_parse::{Scrape, Value as Sample};
use serde_json::Value;
use weir_broker::Broker;
use weir_broker::cluster::{
    BrokerNode, ClusterSnapshot, LocalTopicAdmin, PartitionView, TopicView,
};
use weir_broker::http::console;
use weir_storage::TopicPartition;

use crate::common::*;

fn scrape(b: &Broker) -> Scrape {
    let text = weir_broker::metrics::render(b);
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// The value of the sample `name` whose labels include `labels`; None
/// when there is no such sample.
fn sample(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let x = s
        .samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))?;
    match x.value {
        Sample::Gauge(v) | Sample::Counter(v) => Some(v),
        ref other => panic!("{name}: {other:?}"),
    }
}

fn value(s: &Scrape, name: &str) -> f64 {
    sample(s, name, &[]).unwrap_or_else(|| panic!("{name} missing"))
}

fn node(id: i32, host: &str, port: u16) -> BrokerNode {
    BrokerNode {
        id,
        host: host.into(),
        port,
        rack: None,
    }
}

/// One topic `name` (id `id`) of one partition led by `leader`.
fn one_partition(
    brokers: Vec<BrokerNode>,
    name: &str,
    id: [u8; 16],
    leader: i32,
    replicas: Vec<i32>,
) -> ClusterSnapshot {
    let t = TopicView {
        name: name.into(),
        id,
        partitions: vec![PartitionView {
            leader,
            leader_epoch: 1,
            partition_epoch: 1,
            isr: replicas.clone(),
            replicas,
            offline_replicas: vec![],
        }],
    };
    ClusterSnapshot::new(brokers, leader, vec![t])
}

/// A follower's fetch of partition 0 of topic `id` from `offset` (v15+:
/// the replica id in `ReplicaState`); the record bytes it got.
async fn follower_fetch(c: &mut Client, replica: i32, id: Uuid, offset: i64) -> usize {
    let req = follower_fetch_request(replica, id, offset, 1, -1);
    let ResponseBody::Fetch(r) = c.call(RequestBody::Fetch(req), 17).await else {
        panic!("not a Fetch response");
    };
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, NONE, "replica {replica}");
    p.records.as_ref().map_or(0, |r| r.len())
}

fn console_json(b: &Arc<Broker>, path: &str) -> Value {
    let r = console::handle(b, path, "").unwrap();
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_reports_its_followers_and_its_isr_changes() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_broker(dir.path(), &[]).await;
    let b = running.broker.clone();
    let me = b.config.node_id;
    let mut c = Client::connect(running.local_addr).await;
    let configs = [("min.insync.replicas", "3")];
    assert_eq!(create_topic(&mut c, "t", 1, &configs).await, NONE);
    let (err, _) = produce(&mut c, "t", 0, batch(&["a", "b", "c", "d", "e"], 1), 1).await;
    assert_eq!(err, NONE);
    let s = scrape(&b);
    assert_eq!(value(&s, "weir_under_replicated_partitions"), 0.0);
    // a single node leads with one in-sync replica: acks=all is refused
    assert_eq!(value(&s, "weir_under_min_isr_partitions"), 1.0);

    let id = b.topic("t").unwrap().id_bytes();
    let (host, port) = b.advertised();
    let brokers = vec![
        node(me, &host, port),
        node(2, "10.0.0.2", 1),
        node(3, "10.0.0.3", 1),
    ];
    let snap = one_partition(brokers, "t", id, me, vec![me, 2, 3]);
    b.set_cluster(FixedView::new(snap), Arc::new(LocalTopicAdmin));
    b.apply_leadership();

    // ISR members count as caught up from the leadership on; positions
    // are unknown until they fetch
    let s = scrape(&b);
    assert_eq!(value(&s, "weir_under_min_isr_partitions"), 0.0);
    let lag_ms = |s: &Scrape, r: &str| {
        sample(
            s,
            "weir_partition_replica_lag_ms",
            &[("topic", "t"), ("replica", r)],
        )
    };
    let lag = |s: &Scrape, r: &str| {
        sample(
            s,
            "weir_partition_replica_lag_messages",
            &[("partition", "0"), ("replica", r)],
        )
    };
    assert!(lag_ms(&s, "2").is_some_and(|ms| ms >= 0.0));
    assert_eq!((lag(&s, "2"), lag(&s, "3")), (None, None));
    let p0 = &console_json(&b, "/api/topics/t")["partitions"][0];
    assert_eq!(p0["followers"][0]["replica"], 2);
    assert!(p0["followers"][0]["lag_messages"].is_null(), "{p0}");

    // 2 fetches from 0 (gets the 5 records), 3 from the end
    let sent = follower_fetch(&mut c, 2, Uuid(id), 0).await;
    assert!(sent > 0);
    assert_eq!(follower_fetch(&mut c, 3, Uuid(id), 5).await, 0);
    let s = scrape(&b);
    assert_eq!((lag(&s, "2"), lag(&s, "3")), (Some(5.0), Some(0.0)));
    assert_eq!(value(&s, "weir_replication_bytes_out_total"), sent as f64);
    assert_eq!(value(&s, "weir_replication_bytes_in_total"), 0.0);
    // the same in the console's JSON, for the list and the topic page
    for path in ["/api/topics", "/api/topics/t"] {
        let v = console_json(&b, path);
        let p0 = if path == "/api/topics" {
            v["topics"][0]["partitions"][0].clone()
        } else {
            v["partitions"][0].clone()
        };
        let followers = p0["followers"].as_array().unwrap_or_else(|| panic!("{p0}"));
        let row = |i: usize| {
            let f = &followers[i];
            (
                f["replica"].as_i64().unwrap(),
                f["in_isr"].as_bool().unwrap(),
                f["log_end_offset"].as_i64().unwrap(),
                f["lag_messages"].as_i64().unwrap(),
            )
        };
        assert_eq!(
            (row(0), row(1)),
            ((2, true, 0, 5), (3, true, 5, 0)),
            "{path}"
        );
        assert!(followers[1]["lag_ms"].as_i64().unwrap() >= 0);
        assert_eq!(p0["leader_epoch"], 1);
    }

    // the controller commits a shrink, then an expansion; a stale answer
    // changes nothing
    let tp = TopicPartition::new("t", 0);
    b.replicas.isr_answered(&tp, Ok((1, 2, vec![me, 3])), 0);
    let s = scrape(&b);
    assert_eq!(value(&s, "weir_isr_shrinks_total"), 1.0);
    assert_eq!(value(&s, "weir_isr_expands_total"), 0.0);
    assert_eq!(value(&s, "weir_under_replicated_partitions"), 1.0);
    assert_eq!(value(&s, "weir_under_min_isr_partitions"), 1.0);
    let p0 = &console_json(&b, "/api/topics/t")["partitions"][0];
    assert_eq!(p0["followers"][0]["in_isr"], false, "{p0}");
    b.replicas.isr_answered(&tp, Ok((1, 1, vec![me])), 0);
    b.replicas.isr_answered(&tp, Ok((1, 3, vec![me, 3, 2])), 0);
    let s = scrape(&b);
    assert_eq!(value(&s, "weir_isr_shrinks_total"), 1.0);
    assert_eq!(value(&s, "weir_isr_expands_total"), 1.0);
    assert_eq!(value(&s, "weir_under_replicated_partitions"), 0.0);
    assert_eq!(value(&s, "weir_under_min_isr_partitions"), 0.0);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_counts_the_bytes_it_appends() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_broker(dir_a.path(), &[("node.id", "1")]).await;
    let b = start_broker(
        dir_b.path(),
        &[("node.id", "2"), ("replica.fetch.wait.max.ms", "50")],
    )
    .await;
    let mut ca = Client::connect(a.local_addr).await;
    let mut cb = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut ca, "r", 1, &[]).await, NONE);
    assert_eq!(create_topic(&mut cb, "r", 1, &[]).await, NONE);
    let (err, _) = produce(&mut ca, "r", 0, batch(&["x", "y", "z", "w"], 1), 1).await;
    assert_eq!(err, NONE);
    let id = a.broker.topic("r").unwrap().id_bytes();
    let (ha, pa) = a.broker.advertised();
    let (hb, pb) = b.broker.advertised();
    let snap = || {
        let brokers = vec![node(1, &ha, pa), node(2, &hb, pb)];
        one_partition(brokers, "r", id, 1, vec![1, 2])
    };
    a.broker
        .set_cluster(FixedView::new(snap()), Arc::new(LocalTopicAdmin));
    b.broker
        .set_cluster(FixedView::new(snap()), Arc::new(LocalTopicAdmin));
    let follower_log = b.broker.replicas.log("r", 0).unwrap();
    // the follower wakes what waits on the partition after each answer
    let appended = b
        .broker
        .replicas
        .wakeups()
        .register([TopicPartition::new("r", 0)]);
    a.broker.apply_leadership();
    b.broker.apply_leadership();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while follower_log.log_end_offset() < 4 {
        tokio::time::timeout_at(deadline, appended.notified())
            .await
            .expect("the follower did not catch up");
    }
    // one batch on either side: its bytes went out once and came in once
    let batch_bytes = a.broker.replicas.log("r", 0).unwrap().size_bytes() as f64;
    let (sa, sb) = (scrape(&a.broker), scrape(&b.broker));
    assert_eq!(value(&sb, "weir_replication_bytes_in_total"), batch_bytes);
    assert_eq!(value(&sa, "weir_replication_bytes_out_total"), batch_bytes);
    assert_eq!(value(&sa, "weir_replication_bytes_in_total"), 0.0);
    // a follower reports no lags of its own
    assert_eq!(
        sample(&sb, "weir_partition_replica_lag_ms", &[("topic", "r")]),
        None
    );
    drop(appended);
    b.broker.fetchers.stop();
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}
