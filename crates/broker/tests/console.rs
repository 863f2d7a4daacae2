//! The web console's JSON API against an in-process broker with data
//! produced and committed through the wire protocol: values equal what was
//! produced and committed, bad input is a 400, unknown names a 404, limits
//! are capped, and no path or query panics.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::Value;
use weir_broker::Broker;
use weir_broker::http::console::{self, records::MAX_LIMIT};
use weir_protocol::codec::Encodable;
use weir_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use weir_protocol::records::RecordHeader;

const GROUP_CONFIG: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "3"),
    ("http.listeners", "127.0.0.1:0"),
];

/// Record timestamps start here; record `i` of a partition gets `T0 + i`.
const T0: i64 = 1_700_000_000_000;

fn get(b: &Arc<Broker>, path: &str, query: &str) -> (u16, Value) {
    let r =
        console::handle(b, path, query).unwrap_or_else(|| panic!("{path} is not a console path"));
    assert_eq!(r.content_type, "application/json", "{path}?{query}");
    let v: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{path}?{query}: body is not JSON: {e}"));
    (r.status, v)
}

fn ok(b: &Arc<Broker>, path: &str, query: &str) -> Value {
    let (status, v) = get(b, path, query);
    assert_eq!(status, 200, "{path}?{query}: {v}");
    v
}

fn status(b: &Arc<Broker>, path: &str, query: &str) -> u16 {
    let (status, v) = get(b, path, query);
    if status != 200 {
        assert!(
            v["error"].is_string(),
            "{path}?{query}: error without message: {v}"
        );
        assert_eq!(v["status"], u64::from(status));
    }
    status
}

/// A batch of records `first..first+n` with keys `k{i}`, values `v{i}` and
/// timestamps `T0 + i`, one header on every record.
fn numbered_batch(first: usize, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for i in first..first + n {
        b.push(
            T0 + i as i64,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from(format!("v{i}"))),
            vec![RecordHeader {
                key: "h".into(),
                value: Some(Bytes::from(format!("{i}"))),
            }],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

fn consumer_assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let a = weir_protocol::messages::ConsumerProtocolAssignment {
        assigned_partitions: vec![AssignedTopic {
            topic: topic.into(),
            partitions: partitions.to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    a.encode(&mut buf, 0).unwrap();
    buf.freeze()
}

async fn join_and_sync(c: &mut Client, group: &str, assignment: Bytes) -> (String, i32) {
    let join = |member_id: String| {
        RequestBody::JoinGroup(JoinGroupRequest {
            group_id: group.into(),
            session_timeout_ms: 30_000,
            rebalance_timeout_ms: 30_000,
            member_id,
            protocol_type: "consumer".into(),
            protocols: vec![join_group_request::JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: Bytes::from_static(b"meta"),
                ..Default::default()
            }],
            ..Default::default()
        })
    };
    let ResponseBody::JoinGroup(first) = c.call(join(String::new()), 7).await else {
        panic!("not a JoinGroup response");
    };
    let ResponseBody::JoinGroup(j) = c.call(join(first.member_id), 7).await else {
        panic!("not a JoinGroup response");
    };
    assert_eq!(j.error_code, NONE);
    let sync = SyncGroupRequest {
        group_id: group.into(),
        generation_id: j.generation_id,
        member_id: j.member_id.clone(),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: vec![sync_group_request::SyncGroupRequestAssignment {
            member_id: j.member_id.clone(),
            assignment,
            ..Default::default()
        }],
        ..Default::default()
    };
    let ResponseBody::SyncGroup(s) = c.call(RequestBody::SyncGroup(sync), 5).await else {
        panic!("not a SyncGroup response");
    };
    assert_eq!(s.error_code, NONE);
    (j.member_id, j.generation_id)
}

async fn commit(c: &mut Client, group: &str, member: &str, gen_id: i32, offsets: &[(i32, i64)]) {
    let req = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: gen_id,
        member_id: member.into(),
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: "orders".into(),
            partitions: offsets
                .iter()
                .map(
                    |&(p, o)| offset_commit_request::OffsetCommitRequestPartition {
                        partition_index: p,
                        committed_offset: o,
                        committed_leader_epoch: -1,
                        committed_metadata: Some("console-test".into()),
                        ..Default::default()
                    },
                )
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let ResponseBody::OffsetCommit(r) = c.call(RequestBody::OffsetCommit(req), 8).await else {
        panic!("not an OffsetCommit response");
    };
    for p in &r.topics[0].partitions {
        assert_eq!(
            p.error_code, NONE,
            "commit of partition {}",
            p.partition_index
        );
    }
}

/// Topic `orders` (300-byte segments, so a segment per batch): partition 0
/// gets records 0..30 in three batches, partition 1 gets 600 records,
/// partition 2 stays empty. Group `g` has one member assigned partitions 0
/// and 1 and has committed 12 on partition 0 and 600 on partition 1.
async fn broker_with_data(dir: &std::path::Path) -> (RunningBroker, Client) {
    let b = start_broker(dir, GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let topic_configs = [("segment.bytes", "300"), ("retention.ms", "86400000")];
    assert_eq!(
        create_topic(&mut c, "orders", 3, &topic_configs).await,
        NONE
    );
    for first in [0, 10, 20] {
        let (err, base) = produce(&mut c, "orders", 0, numbered_batch(first, 10), -1).await;
        assert_eq!((err, base), (NONE, first as i64));
    }
    // batches small enough for the tiny segments
    for first in (0..600).step_by(10) {
        let (err, _) = produce(&mut c, "orders", 1, numbered_batch(first, 10), -1).await;
        assert_eq!(err, NONE);
    }
    let (member, gen_id) = join_and_sync(&mut c, "g", consumer_assignment("orders", &[0, 1])).await;
    commit(&mut c, "g", &member, gen_id, &[(0, 12), (1, 600)]).await;
    (b, c)
}

fn partition(topic: &Value, p: usize) -> &Value {
    let v = &topic["partitions"][p];
    assert_eq!(v["partition"], p as u64);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_and_segments_match_what_was_produced() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _c) = broker_with_data(dir.path()).await;
    let broker = b.broker.clone();

    let overview = ok(&broker, "/api/overview", "");
    assert_eq!(overview["node_id"], 1);
    assert_eq!(overview["listener"], b.local_addr.to_string());
    assert_eq!(overview["groups"], 1);
    assert!(overview["uptime_ms"].is_u64(), "{overview}");
    assert!(overview["started_ms"].as_i64().unwrap() <= overview["now_ms"].as_i64().unwrap());
    assert_eq!(
        overview["data_dirs"][0],
        dir.path().display().to_string().as_str()
    );
    // a single node is the whole cluster and its controller
    assert_eq!(overview["controller_id"], 1);
    assert_eq!(overview["brokers"], 1);
    let cluster = ok(&broker, "/api/cluster", "");
    assert_eq!(cluster["node_id"], 1);
    assert_eq!(cluster["controller_id"], 1);
    let brokers = cluster["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1, "{cluster}");
    assert_eq!(brokers[0]["id"], 1);
    assert_eq!(brokers[0]["host"], b.local_addr.ip().to_string().as_str());
    assert_eq!(brokers[0]["port"], b.local_addr.port());
    assert!(brokers[0]["rack"].is_null());
    assert_eq!(brokers[0]["is_controller"], true);
    assert_eq!(brokers[0]["is_self"], true);
    assert_eq!(status(&broker, "/api/cluster", "x=1"), 400);

    let topics = ok(&broker, "/api/topics", "");
    let list = topics["topics"].as_array().unwrap();
    // user topics first; the offsets topic exists (the group created it)
    assert_eq!(list[0]["name"], "orders");
    assert!(
        list.iter()
            .any(|t| t["name"] == "__consumer_offsets" && t["internal"] == true)
    );
    let orders = &list[0];
    assert_eq!(orders["partition_count"], 3);
    assert_eq!(orders["config_overrides"]["segment.bytes"], "300");
    assert_eq!(orders["config_overrides"]["retention.ms"], "86400000");
    for (p, hw) in [(0, 30), (1, 600), (2, 0)] {
        let part = partition(orders, p);
        assert_eq!(part["log_start_offset"], 0, "partition {p}");
        assert_eq!(part["high_watermark"], hw, "partition {p}");
        assert_eq!(part["log_end_offset"], hw, "partition {p}");
        assert_eq!(part["online"], true);
        // led by this node at epoch 0, its only replica
        assert_eq!(part["local"], true);
        assert_eq!(part["leader"], 1);
        assert_eq!(part["leader_epoch"], 0);
        assert_eq!(part["replicas"], serde_json::json!([1]));
        assert_eq!(part["isr"], serde_json::json!([1]));
        assert_eq!(part["offline_replicas"], serde_json::json!([]));
    }
    assert_eq!(orders["hosted"], true);

    let detail = ok(&broker, "/api/topics/orders", "");
    assert_eq!(detail["name"], "orders");
    let p0 = partition(&detail, 0);
    assert_eq!(p0["high_watermark"], 30);
    assert_eq!(
        (p0["leader"].clone(), p0["local"].clone()),
        (1.into(), true.into())
    );
    let segments = p0["segments"].as_array().unwrap();
    // 300-byte segments: no two batches of partition 0 share one
    assert!(segments.len() > 1, "expected several segments: {p0}");
    assert_eq!(segments[0]["base_offset"], 0);
    let bases: Vec<i64> = segments
        .iter()
        .map(|s| s["base_offset"].as_i64().unwrap())
        .collect();
    assert!(bases.windows(2).all(|w| w[0] < w[1]), "{bases:?}");
    assert!(
        bases.iter().all(|b| [0, 10, 20, 30].contains(b)),
        "{bases:?}"
    );
    assert_eq!(segments.last().unwrap()["active"], true);
    assert!(
        segments[..segments.len() - 1]
            .iter()
            .all(|s| s["active"] == false)
    );
    // the listed .log files are exactly those in the partition directory,
    // and their sizes add up to the partition size
    let pdir = std::path::PathBuf::from(p0["dir"].as_str().unwrap());
    let mut on_disk: Vec<String> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = segments
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    assert_eq!(listed, on_disk);
    let log_bytes: u64 = segments
        .iter()
        .map(|s| s["log_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(log_bytes, p0["size_bytes"].as_u64().unwrap());
    assert!(log_bytes > 0);
    for s in segments {
        assert!(
            s["index_bytes"].is_u64() && s["timeindex_bytes"].is_u64(),
            "{s}"
        );
    }
    // resolved topic configs carry their source
    let configs = detail["configs"].as_array().unwrap();
    let seg = configs
        .iter()
        .find(|c| c["name"] == "segment.bytes")
        .unwrap();
    assert_eq!(seg["value"], "300");
    assert_eq!(seg["source"], "DYNAMIC_TOPIC_CONFIG");
    let cleanup = configs
        .iter()
        .find(|c| c["name"] == "cleanup.policy")
        .unwrap();
    assert_eq!(cleanup["value"], "delete");
    assert_eq!(cleanup["source"], "DEFAULT_CONFIG");

    let config = ok(&broker, "/api/config", "");
    let entry = |name: &str| {
        config["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    assert_eq!(entry("offsets.topic.num.partitions")["value"], "3");
    assert_eq!(
        entry("offsets.topic.num.partitions")["source"],
        "STATIC_BROKER_CONFIG"
    );
    assert_eq!(entry("log.segment.bytes")["source"], "DEFAULT_CONFIG");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_report_members_assignment_commits_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _c) = broker_with_data(dir.path()).await;
    let broker = b.broker.clone();

    let groups = ok(&broker, "/api/groups", "");
    let list = groups["groups"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["group_id"], "g");
    assert_eq!(list[0]["state"], "Stable");
    assert_eq!(list[0]["members"], 1);
    assert_eq!(list[0]["partitions"], 2);
    // HW 30 − committed 12, and 600 − 600
    assert_eq!(list[0]["total_lag"], 18);

    let g = ok(&broker, "/api/groups/g", "");
    assert_eq!(g["state"], "Stable");
    assert_eq!(g["protocol_type"], "consumer");
    assert_eq!(g["protocol"], "range");
    assert_eq!(g["generation"], 1);
    let m = &g["members"][0];
    assert_eq!(m["client_id"], "weir-test");
    assert_eq!(m["assignment"][0]["topic"], "orders");
    assert_eq!(m["assignment"][0]["partitions"], serde_json::json!([0, 1]));
    let offsets = g["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 2);
    for (o, (p, committed, hw, lag)) in offsets.iter().zip([(0, 12, 30, 18), (1, 600, 600, 0)]) {
        assert_eq!(o["topic"], "orders");
        assert_eq!(o["partition"], p);
        assert_eq!(o["committed_offset"], committed);
        assert_eq!(o["high_watermark"], hw);
        assert_eq!(o["lag"], lag);
        assert_eq!(o["metadata"], "console-test");
    }
    assert_eq!(g["total_lag"], 18);

    assert_eq!(status(&broker, "/api/groups/nope", ""), 404);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_groups_show_type_state_epochs_and_lag() {
    use crate::consumer_groups::{heartbeat, join};
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_data(dir.path()).await;
    let broker = b.broker.clone();
    // m1 owns all three partitions of `orders`; m2 joins: the target gives
    // it some of them, which m1 still owns (Reconciling).
    let r = heartbeat(&mut c, join("kg", "m1", &["orders"])).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
    let r = heartbeat(&mut c, join("kg", "m2", &["orders"])).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    // m1 commits offset 5 of partition 0 (HW 30) as a member, with v9
    assert_eq!(
        crate::consumer_groups::member_commit(&mut c, ("kg", "m1", 1), "orders", 5, 9).await,
        0
    );

    let groups = ok(&broker, "/api/groups", "");
    let list = groups["groups"].as_array().unwrap();
    let kg = list.iter().find(|g| g["group_id"] == "kg").unwrap();
    assert_eq!(kg["group_type"], "consumer");
    assert_eq!(kg["state"], "Reconciling");
    assert_eq!(kg["protocol_type"], "consumer");
    assert_eq!(kg["protocol"], "uniform");
    assert_eq!(kg["members"], 2);
    assert_eq!(kg["partitions"], 1);
    assert_eq!(kg["total_lag"], 25);
    let g = list.iter().find(|g| g["group_id"] == "g").unwrap();
    assert_eq!(g["group_type"], "classic");

    let d = ok(&broker, "/api/groups/kg", "");
    assert_eq!(d["group_type"], "consumer");
    assert_eq!(d["state"], "Reconciling");
    assert_eq!(d["group_epoch"], 2);
    assert_eq!(d["assignment_epoch"], 2);
    assert_eq!(d["generation"], 2);
    assert_eq!(d["assignor"], "uniform");
    let members = d["members"].as_array().unwrap();
    let m1 = members.iter().find(|m| m["member_id"] == "m1").unwrap();
    let m2 = members.iter().find(|m| m["member_id"] == "m2").unwrap();
    assert_eq!(m1["client_id"], "weir-test");
    assert_eq!(m1["subscribed_topic_names"], serde_json::json!(["orders"]));
    // m1 still owns every partition in epoch 1 (it has not heartbeated
    // since epoch 2)
    assert_eq!(m1["member_epoch"], 1);
    assert_eq!(m1["member_state"], "Stable");
    assert_eq!(m1["assignment"][0]["topic"], "orders");
    assert_eq!(
        m1["assignment"][0]["partitions"],
        serde_json::json!([0, 1, 2])
    );
    // m2 is in epoch 2 and waits for what its target gives it
    assert_eq!(m2["member_epoch"], 2);
    assert_eq!(m2["member_state"], "UnreleasedPartitions");
    let target = |m: &Value| -> usize {
        m["target_assignment"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["partitions"].as_array().unwrap().len())
            .sum()
    };
    assert_eq!(target(m1) + target(m2), 3);
    assert!(target(m2) >= 1);
    let o = &d["offsets"][0];
    assert_eq!(
        (o["partition"].clone(), o["committed_offset"].clone()),
        (0.into(), 5.into())
    );
    assert_eq!(o["lag"], 25);
    assert_eq!(d["total_lag"], 25);
    b.shutdown().await.unwrap();
}

fn values(page: &Value) -> Vec<(i64, String)> {
    page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["value"]["encoding"], "utf8");
            (
                r["offset"].as_i64().unwrap(),
                r["value"]["data"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_by_offset_and_timestamp_with_capped_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_data(dir.path()).await;
    let broker = b.broker.clone();

    // from an offset in the middle of a batch
    let page = ok(
        &broker,
        "/api/records",
        "topic=orders&partition=0&offset=12&limit=5",
    );
    let expect: Vec<(i64, String)> = (12..17).map(|i| (i, format!("v{i}"))).collect();
    assert_eq!(values(&page), expect);
    assert_eq!(page["next_offset"], 17);
    assert_eq!(page["high_watermark"], 30);
    let r = &page["records"][0];
    assert_eq!(r["key"]["data"], "k12");
    assert_eq!(r["timestamp"], T0 + 12);
    assert_eq!(r["timestamp_type"], "CreateTime");
    assert_eq!(r["headers"][0]["key"], "h");
    assert_eq!(r["headers"][0]["value"]["data"], "12");

    // by timestamp: the first record at or after it
    let page = ok(
        &broker,
        "/api/records",
        &format!("topic=orders&partition=0&timestamp={}&limit=3", T0 + 25),
    );
    assert_eq!(page["start_offset"], 25);
    assert_eq!(
        values(&page),
        vec![(25, "v25".into()), (26, "v26".into()), (27, "v27".into())]
    );
    // past every timestamp: nothing, starting at the HW
    let page = ok(
        &broker,
        "/api/records",
        &format!("topic=orders&partition=0&timestamp={}", T0 + 1_000_000),
    );
    assert_eq!(page["records"].as_array().unwrap().len(), 0);
    assert_eq!(page["start_offset"], 30);

    // no start: from the log start; up to the HW only
    let page = ok(
        &broker,
        "/api/records",
        "topic=orders&partition=0&limit=100",
    );
    assert_eq!(
        values(&page),
        (0..30).map(|i| (i, format!("v{i}"))).collect::<Vec<_>>()
    );
    assert_eq!(page["next_offset"], 30);

    // a huge limit is capped
    let page = ok(
        &broker,
        "/api/records",
        "topic=orders&partition=1&limit=1000000",
    );
    assert_eq!(page["limit"], MAX_LIMIT as u64);
    let got = values(&page);
    assert_eq!(got.len(), MAX_LIMIT);
    assert_eq!(got.last().unwrap().0, MAX_LIMIT as i64 - 1);
    assert_eq!(page["next_offset"], MAX_LIMIT as u64);
    // and the next page continues where it stopped
    let page = ok(
        &broker,
        "/api/records",
        &format!("topic=orders&partition=1&offset={MAX_LIMIT}&limit=500"),
    );
    assert_eq!(
        values(&page),
        (500..600).map(|i| (i, format!("v{i}"))).collect::<Vec<_>>()
    );

    // an empty partition
    let page = ok(&broker, "/api/records", "topic=orders&partition=2");
    assert_eq!(page["records"].as_array().unwrap().len(), 0);

    // binary keys and values are shown as hex, null values as null
    let mut batch = RecordBatchBuilder::new(Compression::None);
    batch
        .push(
            T0,
            Some(Bytes::from_static(&[0xff, 0x00, 0x10])),
            None,
            vec![],
        )
        .unwrap();
    let (err, base) = produce(&mut c, "orders", 2, batch.build().unwrap().into_bytes(), -1).await;
    assert_eq!((err, base), (NONE, 0));
    let page = ok(&broker, "/api/records", "topic=orders&partition=2");
    let r = &page["records"][0];
    assert_eq!(r["key"]["encoding"], "hex");
    assert_eq!(r["key"]["data"], "ff0010");
    assert_eq!(r["key"]["size"], 3);
    assert!(r["value"].is_null());
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_400_unknown_names_404_and_nothing_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _c) = broker_with_data(dir.path()).await;
    let broker = b.broker.clone();

    for q in [
        "",
        "partition=0",
        "topic=orders&partition=abc",
        "topic=orders&partition=99999999999",
        "topic=orders&offset=-1",
        "topic=orders&timestamp=-5",
        "topic=orders&offset=1&timestamp=1",
        "topic=orders&limit=0",
        "topic=orders&limit=-3",
        "topic=orders&limit=ten",
        "topic=orders&bogus=1",
        "topic=orders&topic=orders",
        "topic=%zz",
        "topic=%ff",
    ] {
        assert_eq!(status(&broker, "/api/records", q), 400, "query {q:?}");
    }
    assert_eq!(status(&broker, "/api/topics", "x=1"), 400);
    assert_eq!(status(&broker, "/api/groups/%", ""), 400);
    assert_eq!(status(&broker, "/api/groups/%C3%28", ""), 400);

    assert_eq!(status(&broker, "/api/topics/nope", ""), 404);
    assert_eq!(status(&broker, "/api/records", "topic=nope"), 404);
    assert_eq!(
        status(&broker, "/api/records", "topic=orders&partition=3"),
        404
    );
    assert_eq!(
        status(&broker, "/api/records", "topic=orders&partition=-1"),
        404
    );
    assert_eq!(status(&broker, "/api/nope", ""), 404);
    assert_eq!(status(&broker, "/api", ""), 404);
    assert_eq!(status(&broker, "/api/topics/orders/extra", ""), 404);
    assert_eq!(status(&broker, "/console/nope.js", ""), 404);

    // escaped names work
    assert_eq!(status(&broker, "/api/topics/%6Frders", ""), 200);
    assert_eq!(status(&broker, "/api/groups/%67", ""), 200);
    // offsets below the log start start at the log start; beyond the HW: empty
    let page = ok(
        &broker,
        "/api/records",
        "topic=orders&partition=0&offset=9999",
    );
    assert_eq!(page["records"].as_array().unwrap().len(), 0);

    // the page and its assets
    let page = console::handle(&broker, "/", "").unwrap();
    assert_eq!(page.status, 200);
    assert!(page.content_type.starts_with("text/html"));
    assert!(String::from_utf8_lossy(&page.body).contains("/console/app.js"));
    for (path, ct) in [
        ("/console/app.js", "text/javascript"),
        ("/console/style.css", "text/css"),
    ] {
        let r = console::handle(&broker, path, "").unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert!(r.content_type.starts_with(ct), "{path}: {}", r.content_type);
        assert!(!r.body.is_empty());
    }
    // not console paths
    for path in ["/metrics", "/favicon.ico", "/apix", "/other"] {
        assert!(console::handle(&broker, path, "").is_none(), "{path}");
    }

    // odd paths and queries: always an answer or None, never a panic
    let long = "a".repeat(10_000);
    let odd = [
        "/api/",
        "/api//",
        "/api/topics/",
        "/api/topics/%",
        "/api/topics/%2F",
        "/api/topics/..",
        "/api/records/",
        "/api/groups/",
        "/api/groups/a/b/c",
        "/console/",
        "/console/../index.html",
        "//",
        "",
        "api/topics",
    ];
    for path in odd {
        for query in ["", "&&&", "=", "==&=", "%", "topic", &long] {
            if let Some(r) = console::handle(&broker, path, query) {
                assert!((200..600).contains(&r.status));
            }
        }
    }
    b.shutdown().await.unwrap();
}

/// One HTTP/1.1 GET over a fresh connection: (status, content type, body).
async fn http_get(addr: SocketAddr, target: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .expect("HTTP response in time")
        .unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of the response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, raw[split + 4..].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_over_the_http_listener() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _c) = broker_with_data(dir.path()).await;
    let http = b.http_addr().expect("the HTTP listener is on");

    let (status, ct, body) = http_get(http, "/").await;
    assert_eq!(status, 200);
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(String::from_utf8_lossy(&body).contains("/console/app.js"));

    let (status, ct, body) = http_get(http, "/api/topics/orders").await;
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["partitions"][1]["high_watermark"], 600);

    // the query reaches the console apart from the path
    let (status, _, body) = http_get(
        http,
        "/api/records?topic=orders&partition=0&offset=3&limit=2",
    )
    .await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(values(&v), vec![(3, "v3".into()), (4, "v4".into())]);

    let (status, ct, body) = http_get(http, "/api/groups/nope").await;
    assert_eq!((status, ct.as_str()), (404, "application/json"));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("nope"), "{v}");
    let (status, _, _) = http_get(http, "/api/records?topic=orders&limit=x").await;
    assert_eq!(status, 400);
    b.shutdown().await.unwrap();
}
