//! The console and `/metrics` with a cluster view installed: three brokers
//! (broker 3 the controller), topic `t` with a partition led here with an
//! offline replica, one led by broker 2 and one without a leader that is
//! not hosted here, and a topic hosted only elsewhere. The API lists every
//! broker and every partition's leadership, offsets only where the log is
//! local; the cluster gauges count from the same snapshot.

use std::sync::{Arc, RwLock};

use prometheus_parse::{Scrape, Value as Sample};
use serde_json::{Value, json};
use weir_broker::Broker;
use weir_broker::cluster::{
    BrokerNode, ClusterSnapshot, ClusterView, LocalTopicAdmin, PartitionView, TopicView,
};
use weir_broker::http::console;

use crate::common::*;

/// A view the test sets by hand.
struct FixedView(RwLock<Arc<ClusterSnapshot>>);

impl ClusterView for FixedView {
    fn snapshot(&self) -> Arc<ClusterSnapshot> {
        self.0.read().unwrap().clone()
    }
}

/// The id of the topic hosted only on other brokers.
const REMOTE_ID: [u8; 16] = [5; 16];

fn ok(b: &Arc<Broker>, path: &str) -> Value {
    let r = console::handle(b, path, "").unwrap_or_else(|| panic!("{path}: not a console path"));
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 200, "{path}: {v}");
    v
}

fn gauge(s: &Scrape, name: &str) -> f64 {
    let found = s.samples.iter().find(|x| x.metric == name);
    match found.map(|x| &x.value) {
        Some(Sample::Gauge(v)) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

fn scrape(b: &Broker) -> Scrape {
    let text = weir_broker::metrics::render(b);
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// The cluster as the test installs it, `t` with id `t_id`.
fn snapshot(b: &Broker, t_id: [u8; 16]) -> ClusterSnapshot {
    let me = b.config.node_id;
    let (host, port) = b.advertised();
    let node = |id: i32, host: &str, port: u16| BrokerNode {
        id,
        host: host.into(),
        port,
        rack: Some(format!("rack-{id}")),
    };
    // out of order: the API sorts by id
    let brokers = vec![
        node(3, "10.0.0.3", 29_092),
        node(me, &host, port),
        node(2, "10.0.0.2", 19_092),
    ];
    let t = TopicView {
        name: "t".into(),
        id: t_id,
        partitions: vec![
            PartitionView {
                leader: me,
                leader_epoch: 3,
                partition_epoch: 0,
                replicas: vec![me, 2, 3],
                isr: vec![me, 2],
                offline_replicas: vec![3],
            },
            PartitionView {
                leader: 2,
                leader_epoch: 7,
                partition_epoch: 0,
                replicas: vec![2, me],
                isr: vec![2, me],
                offline_replicas: vec![],
            },
            PartitionView {
                leader: -1,
                leader_epoch: 4,
                partition_epoch: 0,
                replicas: vec![2, 3],
                isr: vec![3],
                offline_replicas: vec![2, 3],
            },
        ],
    };
    let remote = TopicView {
        name: "remote".into(),
        id: REMOTE_ID,
        partitions: vec![PartitionView::single(2), PartitionView::single(3)],
    };
    ClusterSnapshot::new(brokers, 3, vec![t, remote])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_leadership_and_gauges_come_from_the_installed_view() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_broker(dir.path(), &[]).await;
    let b = running.broker.clone();
    let me = b.config.node_id;
    let mut c = Client::connect(running.local_addr).await;
    // t has two local partitions; the view gives it a third, hosted elsewhere
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let (err, _) = produce(&mut c, "t", 0, batch(&["a", "b"], 1_700_000_000_000), -1).await;
    assert_eq!(err, NONE);
    let t_id = b.topic("t").unwrap().id_bytes();
    let view = Arc::new(FixedView(RwLock::new(Arc::new(snapshot(&b, t_id)))));
    b.set_cluster(view.clone(), Arc::new(LocalTopicAdmin));

    let cluster = ok(&b, "/api/cluster");
    assert_eq!(cluster["node_id"], me);
    assert_eq!(cluster["controller_id"], 3);
    let brokers = cluster["brokers"].as_array().unwrap();
    let row = |i: usize| {
        let x = &brokers[i];
        (
            x["id"].as_i64().unwrap(),
            x["is_controller"].as_bool().unwrap(),
            x["is_self"].as_bool().unwrap(),
        )
    };
    assert_eq!(brokers.len(), 3, "{cluster}");
    let me64 = i64::from(me);
    assert_eq!(
        (row(0), row(1), row(2)),
        ((me64, false, true), (2, false, false), (3, true, false))
    );
    assert_eq!(brokers[1]["host"], "10.0.0.2");
    assert_eq!(brokers[1]["port"], 19_092);
    assert_eq!(brokers[2]["rack"], "rack-3");

    let overview = ok(&b, "/api/overview");
    assert_eq!(overview["controller_id"], 3);
    assert_eq!(overview["brokers"], 3);

    let topics = ok(&b, "/api/topics");
    let list = topics["topics"].as_array().unwrap();
    let topic = |name: &str| {
        list.iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {topics}"))
            .clone()
    };
    let t = topic("t");
    assert_eq!(t["hosted"], true);
    assert_eq!(t["partition_count"], 3);
    let p = |t: &Value, i: usize| t["partitions"][i].clone();
    let p0 = p(&t, 0);
    assert_eq!(
        (p0["local"].clone(), p0["online"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(p0["leader"], me);
    assert_eq!(p0["leader_epoch"], 3);
    assert_eq!(p0["replicas"], json!([me, 2, 3]));
    assert_eq!(p0["isr"], json!([me, 2]));
    assert_eq!(p0["offline_replicas"], json!([3]));
    assert_eq!(p0["high_watermark"], 2);
    // a follower replica here: led elsewhere, its log still local
    let p1 = p(&t, 1);
    assert_eq!(
        (p1["leader"].clone(), p1["leader_epoch"].clone()),
        (json!(2), json!(7))
    );
    assert_eq!(p1["local"], true);
    assert_eq!(p1["log_end_offset"], 0);
    // no leader, no replica here: leadership shown, no offsets
    let p2 = p(&t, 2);
    assert_eq!(p2["leader"], -1);
    assert_eq!(p2["offline_replicas"], json!([2, 3]));
    assert_eq!(p2["local"], false);
    assert_eq!(p2["online"], true);
    for k in [
        "log_start_offset",
        "high_watermark",
        "log_end_offset",
        "size_bytes",
        "segment_count",
    ] {
        assert!(p2[k].is_null(), "{k}: {p2}");
    }
    assert_eq!(
        t["size_bytes"].as_u64().unwrap(),
        p0["size_bytes"].as_u64().unwrap() + p1["size_bytes"].as_u64().unwrap()
    );
    assert!(t["size_bytes"].as_u64().unwrap() > 0);

    let remote = topic("remote");
    assert_eq!(remote["id"], weir_protocol::Uuid(REMOTE_ID).to_string());
    assert_eq!(remote["hosted"], false);
    assert_eq!(remote["config_overrides"], json!({}));
    assert_eq!(remote["size_bytes"], 0);
    let leaders: Vec<&Value> = remote["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["leader"])
        .collect();
    assert_eq!(leaders, [&json!(2), &json!(3)]);
    assert!(
        remote["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["local"] == false)
    );
    assert_eq!(overview["topics"].as_u64().unwrap(), list.len() as u64);

    // the topic page: segments and configs only where known here
    let detail = ok(&b, "/api/topics/remote");
    assert_eq!(detail["hosted"], false);
    assert_eq!(detail["configs"], json!([]));
    assert!(detail["partitions"][0]["dir"].is_null());
    assert_eq!(detail["partitions"][0]["segments"], json!([]));
    let detail = ok(&b, "/api/topics/t");
    assert!(!detail["configs"].as_array().unwrap().is_empty());
    assert_eq!(detail["partitions"][2]["leader"], -1);
    assert_eq!(detail["partitions"][2]["segments"], json!([]));
    assert!(
        !detail["partitions"][0]["segments"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let s = scrape(&b);
    assert_eq!(gauge(&s, "weir_cluster_brokers"), 3.0);
    assert_eq!(gauge(&s, "weir_cluster_controller_id"), 3.0);
    assert_eq!(gauge(&s, "weir_cluster_active_controller"), 0.0);
    assert_eq!(gauge(&s, "weir_cluster_offline_partitions"), 1.0);
    assert_eq!(gauge(&s, "weir_cluster_under_replicated_partitions"), 1.0);
    assert_eq!(gauge(&s, "weir_cluster_leader_partitions"), 1.0);

    // t deleted and created again elsewhere: the local logs are the old
    // topic's and are not shown as the new one's
    *view.0.write().unwrap() = Arc::new(snapshot(&b, [8; 16]));
    let t = ok(&b, "/api/topics/t");
    assert_eq!(t["hosted"], false);
    assert_eq!(t["id"], weir_protocol::Uuid([8; 16]).to_string());
    assert!(
        t["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["local"] == false && p["high_watermark"].is_null()),
        "{t}"
    );
    running.shutdown().await.unwrap();
}
