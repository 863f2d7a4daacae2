//! The HTTP listener and `/metrics`: scraped before and after Kafka traffic
//! and parsed with a Prometheus text parser; HTTP error cases; the listener
//! disabled or its address taken.

use crate::common;

use common::*;
use prometheus_parse::{Scrape, Value};
use weir_broker::metrics::text::{Kind, TextWriter};

const GROUP_CONFIG: &[(&str, &str)] = &[
    ("http.listeners", "127.0.0.1:0"),
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "1"),
];

/// One HTTP/1.1 exchange over a fresh connection (`Connection: close`):
/// the raw request bytes in, (status, headers, body) out.
async fn http_raw(
    addr: SocketAddr,
    request: &[u8],
) -> Option<(u16, Vec<(String, String)>, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // the server may answer before reading a long request and close
    let _ = s.write_all(request).await;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("HTTP response within 20 s")
        .ok()?;
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = status_line.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some((status, headers, buf[end + 4..].to_vec()))
}

async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let req = format!("{method} {path} HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n");
    http_raw(addr, req.as_bytes())
        .await
        .expect("an HTTP response")
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Scrapes `/metrics` and parses it as Prometheus text.
async fn scrape(b: &RunningBroker) -> Scrape {
    let addr = b.http_addr().expect("HTTP listener");
    let (status, headers, body) = http(addr, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = String::from_utf8(body).expect("UTF-8 exposition text");
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    // the parser skips lines it cannot read: every family that has a TYPE
    // line must have come through with samples of that type
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let typed = scrape.samples.iter().any(|s| {
                s.metric == name
                    && matches!(
                        (kind, &s.value),
                        ("counter", Value::Counter(_))
                            | ("gauge", Value::Gauge(_))
                            | ("histogram", Value::Histogram(_))
                    )
            });
            let empty = !text
                .lines()
                .any(|l| l.starts_with(name) && !l.starts_with('#'));
            assert!(typed || empty, "family {name} ({kind}) did not parse");
        }
    }
    scrape
}

/// The value of a counter or gauge with exactly these labels.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| {
            x.metric == name
                && x.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v))
        })
        .and_then(|x| match x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
            _ => None,
        })
}

/// The `+Inf` bucket (the count) of a histogram with these labels.
fn histogram_count(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .and_then(|x| match &x.value {
            Value::Histogram(b) => b
                .iter()
                .find(|c| c.less_than == f64::INFINITY)
                .map(|c| c.count),
            _ => None,
        })
}

async fn commit(c: &mut Client, group: &str, topic: &str, partition: i32, offset: i64) -> i16 {
    let req = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                partition_index: partition,
                committed_offset: offset,
                committed_leader_epoch: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetCommit(req), 8).await {
        ResponseBody::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_with_traffic_and_state_gauges_match_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "m", 1, &[]).await, NONE);

    let before = scrape(&b).await;
    let produce_api = [("api", "Produce")];
    let fetch_api = [("api", "Fetch")];
    assert_eq!(
        value(&before, "weir_requests_total", &produce_api),
        Some(0.0)
    );

    let b1 = batch(&["a", "b", "c"], 1_700_000_000_000);
    let b2 = batch(&["d", "e", "f"], 1_700_000_000_100);
    let log_bytes = (b1.len() + b2.len()) as f64;
    assert_eq!(produce(&mut c, "m", 0, b1, -1).await, (NONE, 0));
    assert_eq!(produce(&mut c, "m", 0, b2, -1).await, (NONE, 3));
    let (err, hw, values) = fetch(&mut c, 12, "m", Uuid::ZERO, 0, 0).await;
    assert_eq!((err, hw, values.len()), (NONE, 6, 6));
    assert_eq!(commit(&mut c, "g", "m", 0, 2).await, NONE);

    let after = scrape(&b).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels).unwrap() - value(&before, name, labels).unwrap()
    };
    assert_eq!(delta("weir_requests_total", &produce_api), 2.0);
    assert_eq!(delta("weir_requests_total", &fetch_api), 1.0);
    assert_eq!(delta("weir_request_failures_total", &produce_api), 0.0);
    let hist = |s: &Scrape, api| {
        histogram_count(s, "weir_request_duration_seconds", &[("api", api)]).unwrap()
    };
    assert_eq!(hist(&after, "Produce") - hist(&before, "Produce"), 2.0);
    assert_eq!(hist(&after, "Fetch") - hist(&before, "Fetch"), 1.0);
    // the produce requests carried the batches in; the fetch sent them out
    assert!(delta("weir_bytes_in_total", &[]) > log_bytes);
    assert!(delta("weir_bytes_out_total", &[]) > log_bytes);
    assert!(value(&after, "weir_connections_open", &[]).unwrap() >= 1.0);
    assert!(value(&after, "weir_connections_accepted_total", &[]).unwrap() >= 1.0);

    let tp = [("topic", "m"), ("partition", "0")];
    assert_eq!(
        value(&after, "weir_partition_high_watermark", &tp),
        Some(6.0)
    );
    assert_eq!(
        value(&after, "weir_partition_log_end_offset", &tp),
        Some(6.0)
    );
    assert_eq!(
        value(&after, "weir_partition_log_start_offset", &tp),
        Some(0.0)
    );
    assert_eq!(value(&after, "weir_partition_segments", &tp), Some(1.0));
    assert_eq!(
        value(&after, "weir_partition_size_bytes", &tp),
        Some(log_bytes)
    );

    let gtp = [("group", "g"), ("topic", "m"), ("partition", "0")];
    assert_eq!(
        value(&after, "weir_group_committed_offset", &gtp),
        Some(2.0)
    );
    assert_eq!(value(&after, "weir_group_lag", &gtp), Some(4.0));
    assert_eq!(
        value(&after, "weir_group_members", &[("group", "g")]),
        Some(0.0)
    );
    assert_eq!(
        value(
            &after,
            "weir_group_state",
            &[("group", "g"), ("state", "Empty")]
        ),
        Some(1.0)
    );

    // lag follows the high watermark
    produce(&mut c, "m", 0, batch(&["g"], 1_700_000_000_200), -1).await;
    let later = scrape(&b).await;
    assert_eq!(value(&later, "weir_group_lag", &gtp), Some(5.0));
    assert!(value(&later, "weir_recovery_seconds", &[]).is_some());
    assert!(value(&later, "weir_uptime_seconds", &[]).is_some());
    assert!(value(&later, "weir_cleaner_cleanings_total", &[]).is_some());
    assert!(value(&later, "weir_retention_segments_deleted_total", &[]).is_some());
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_is_the_whole_cluster_and_extra_families_follow() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let before = scrape(&b).await;
    assert_eq!(value(&before, "weir_cluster_brokers", &[]), Some(1.0));
    assert_eq!(value(&before, "weir_cluster_controller_id", &[]), Some(1.0));
    assert_eq!(
        value(&before, "weir_cluster_active_controller", &[]),
        Some(1.0)
    );
    let led = value(&before, "weir_cluster_leader_partitions", &[]).unwrap();
    assert_eq!(create_topic(&mut c, "m", 3, &[]).await, NONE);
    let after = scrape(&b).await;
    // every partition of a single node is led here with a full ISR
    assert_eq!(
        value(&after, "weir_cluster_leader_partitions", &[]),
        Some(led + 3.0)
    );
    let all: i32 = b.broker.all_topics().iter().map(|t| t.partitions).sum();
    assert_eq!(led + 3.0, f64::from(all));
    for name in [
        "weir_cluster_offline_partitions",
        "weir_cluster_under_replicated_partitions",
    ] {
        assert_eq!(value(&after, name, &[]), Some(0.0), "{name}");
    }
    assert_eq!(value(&after, "weir_controller_fenced_brokers", &[]), None);

    // the wiring layer's families come after the broker's, parsed as typed
    b.broker
        .metrics
        .set_extra_metrics(std::sync::Arc::new(|w: &mut TextWriter| {
            w.family(
                "weir_controller_leader_elections_total",
                Kind::Counter,
                "Leader elections.",
            );
            w.sample_int("weir_controller_leader_elections_total", &[], 7);
            w.family("weir_controller_fenced_brokers", Kind::Gauge, "Fenced.");
            w.sample_int("weir_controller_fenced_brokers", &[], 2);
        }));
    let extra = scrape(&b).await;
    assert_eq!(
        value(&extra, "weir_controller_leader_elections_total", &[]),
        Some(7.0)
    );
    assert_eq!(
        value(&extra, "weir_controller_fenced_brokers", &[]),
        Some(2.0)
    );
    assert_eq!(value(&extra, "weir_cluster_brokers", &[]), Some(1.0));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_http_requests_get_error_responses_and_the_broker_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("http.listeners", "127.0.0.1:0")]).await;
    let addr = b.http_addr().unwrap();

    let (status, _, body) = http(addr, "GET", "/no/such/path").await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    let (status, headers, _) = http(addr, "POST", "/metrics").await;
    assert_eq!(status, 405);
    assert_eq!(header(&headers, "allow"), Some("GET, HEAD"));
    let (status, _, _) = http(addr, "DELETE", "/").await;
    assert_eq!(status, 405);

    // HEAD: the headers of GET, no body
    let (status, headers, body) = http(addr, "HEAD", "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        header(&headers, "content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(body.is_empty());

    // not HTTP at all: an error status or a closed connection, never a hang
    if let Some((status, _, _)) = http_raw(addr, b"\x00\x01\x02garbage\xff\r\n\r\n").await {
        assert!((400..500).contains(&status), "{status}");
    }
    // a request head larger than the bound
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: weir\r\nX-Big: {}\r\n\r\n",
        "x".repeat(64 * 1024)
    );
    if let Some((status, _, _)) = http_raw(addr, big.as_bytes()).await {
        assert!((400..500).contains(&status), "{status}");
    }
    // a declared body on GET is never read
    let (status, _, _) = http_raw(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: weir\r\nContent-Length: 1000000000\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(status, 200);

    // still serving HTTP and Kafka
    let s = scrape(&b).await;
    assert!(value(&s, "weir_http_requests_total", &[]).unwrap() >= 5.0);
    api_versions_ok(b.local_addr).await;
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_http_listeners_disables_http() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("http.listeners", "")]).await;
    assert_eq!(b.http_addr(), None);
    api_versions_ok(b.local_addr).await;
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_http_address_in_use_fails_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.path().display().to_string());
    s.set("http.listeners", &addr);
    match start(s.build().unwrap()).await {
        Err(weir_broker::BrokerError::Bind { addr: a, .. }) => assert_eq!(a, addr),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("started although {addr} is taken"),
    }
}

fn keyed(records: &[(&str, &str)], ts: i64) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for (k, v) in records {
        b.push(
            ts,
            Some(Bytes::from(k.to_string())),
            Some(Bytes::from(v.to_string())),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleaner_and_retention_activity_shows_in_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("http.listeners", "127.0.0.1:0"),
            ("log.cleaner.backoff.ms", "10"),
            ("log.retention.check.interval.ms", "10"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    let compact = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "200"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(create_topic(&mut c, "cmp", 1, &compact).await, NONE);
    let delete = [("segment.bytes", "200"), ("retention.ms", "1000")];
    assert_eq!(create_topic(&mut c, "old", 1, &delete).await, NONE);
    // timestamps from 2023: older than retention.ms on any clock of today
    let ts = 1_700_000_000_000;
    for round in 0..10 {
        let (a, bv) = (format!("a{round}"), format!("b{round}"));
        let recs = [("a", a.as_str()), ("b", bv.as_str())];
        assert_eq!(
            produce(&mut c, "cmp", 0, keyed(&recs, ts), -1).await.0,
            NONE
        );
        assert_eq!(
            produce(&mut c, "old", 0, keyed(&recs, ts), -1).await.0,
            NONE
        );
    }
    let old = [("topic", "old"), ("partition", "0")];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = scrape(&b).await;
        let v = |name: &str| value(&s, name, &[]).unwrap();
        let cleaned = v("weir_cleaner_cleanings_total") >= 1.0
            && v("weir_cleaner_records_dropped_total") >= 1.0
            && v("weir_cleaner_read_bytes_total") > 0.0;
        let retained = v("weir_retention_segments_deleted_total") >= 1.0;
        if cleaned && retained {
            assert!(v("weir_cleaner_written_bytes_total") > 0.0);
            assert!(v("weir_cleaner_records_kept_total") >= 2.0);
            assert!(v("weir_retention_runs_total") >= 1.0);
            assert!(v("weir_retention_deleted_bytes_total") > 0.0);
            // retention moved the log start of the deleting topic
            let start = value(&s, "weir_partition_log_start_offset", &old).unwrap();
            assert!(start > 0.0, "log start {start}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cleaner/retention metrics did not move within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.shutdown().await.unwrap();
}

/// Sum of `weir_request_errors_total` samples of `api` (all errors).
fn api_errors(s: &Scrape, api: &str) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == "weir_request_errors_total" && x.labels.get("api") == Some(api))
        .map(|x| match x.value {
            Value::Counter(v) => v,
            _ => panic!("{x:?}"),
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes_in_responses_are_counted_per_api_and_error() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "m", 1, &[]).await, NONE);
    assert_eq!(
        produce(&mut c, "m", 0, batch(&["a"], 1), -1).await,
        (NONE, 0)
    );
    // the group coordinator answers (and has loaded) before the group error
    assert_eq!(commit(&mut c, "g", "m", 0, 1).await, NONE);

    let before = scrape(&b).await;
    let count = |s: &Scrape, api: &str, error: &str| {
        value(
            s,
            "weir_request_errors_total",
            &[("api", api), ("error", error)],
        )
        .unwrap_or(0.0)
    };
    let produce_before = api_errors(&before, "Produce");

    // a successful produce adds nothing (NONE is not counted)
    assert_eq!(
        produce(&mut c, "m", 0, batch(&["b"], 2), -1).await,
        (NONE, 1)
    );

    // one Produce request, three partitions of a topic that does not exist
    let req = ProduceRequest {
        acks: -1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: "no-such-topic".into(),
            partition_data: (0..3)
                .map(|i| produce_request::PartitionProduceData {
                    index: i,
                    records: Some(batch(&["x"], 1)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::Produce(req), 9).await {
        ResponseBody::Produce(r) => {
            let codes: Vec<i16> = r.responses[0]
                .partition_responses
                .iter()
                .map(|p| p.error_code)
                .collect();
            assert_eq!(codes, [3, 3, 3]);
        }
        other => panic!("{other:?}"),
    }

    // two fetches beyond the log end
    for _ in 0..2 {
        let (err, _, _) = fetch(&mut c, 12, "m", Uuid::ZERO, 100, 0).await;
        assert_eq!(err, 1);
    }

    // a heartbeat from a member the group does not know
    let req = HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 1,
        member_id: "nobody".into(),
        ..Default::default()
    };
    let heartbeat_error = match c.call(RequestBody::Heartbeat(req), 4).await {
        ResponseBody::Heartbeat(r) => r.error_code,
        other => panic!("{other:?}"),
    };
    assert_eq!(heartbeat_error, 25);

    // ApiVersions in a version the broker does not know: answered in v0
    // with UNSUPPORTED_VERSION (35) by the connection itself
    let mut frame = 10i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&18i16.to_be_bytes());
    frame.extend_from_slice(&99i16.to_be_bytes());
    frame.extend_from_slice(&4242i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    c.stream.write_all(&frame).await.unwrap();
    let answer = c.read_frame().await.expect("ApiVersions answer");
    assert_eq!(answer[..4], 4242i32.to_be_bytes());
    assert_eq!(answer[4..6], 35i16.to_be_bytes());

    let after = scrape(&b).await;
    let delta = |api: &str, error: &str| count(&after, api, error) - count(&before, api, error);
    assert_eq!(delta("ApiVersions", "UNSUPPORTED_VERSION"), 1.0);
    assert_eq!(delta("Produce", "UNKNOWN_TOPIC_OR_PARTITION"), 3.0);
    assert_eq!(api_errors(&after, "Produce") - produce_before, 3.0);
    assert_eq!(delta("Fetch", "OFFSET_OUT_OF_RANGE"), 2.0);
    assert_eq!(
        api_errors(&after, "Fetch") - api_errors(&before, "Fetch"),
        2.0
    );
    assert_eq!(delta("Heartbeat", "UNKNOWN_MEMBER_ID"), 1.0);
    assert_eq!(
        api_errors(&after, "Heartbeat") - api_errors(&before, "Heartbeat"),
        1.0
    );
    // NONE never appears as a series
    assert!(
        !after
            .samples
            .iter()
            .any(|x| x.metric == "weir_request_errors_total"
                && x.labels.get("error") == Some("NONE"))
    );
    b.shutdown().await.unwrap();
}

/// The value of the sample line `name{labels} value` in rendered text.
fn sample(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name_and_labels} in\n{text}"))
        .parse()
        .unwrap()
}

/// A Produce's time split into its stages: a sync asked for by
/// `flush.messages=1` shows as `wait`; each stage counts every answered
/// request once, and the stages add up to no more than the whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_time_is_split_into_stages() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "synced", 1, &[("flush.messages", "1")]).await,
        NONE
    );
    for _ in 0..20 {
        assert_eq!(
            produce(&mut c, "synced", 0, batch(&["v"], 1), -1).await.0,
            NONE
        );
    }
    // The last answer's metrics are recorded just after it is written.
    let produces = |text: &str| {
        let total = sample(text, "weir_request_duration_seconds_count{api=\"Produce\"}");
        let stages = sample(
            text,
            "weir_request_stage_seconds_count{api=\"Produce\",stage=\"write\"}",
        );
        total.min(stages)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut text = weir_broker::metrics::render(&b.broker);
    while produces(&text) < 20.0 {
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
        text = weir_broker::metrics::render(&b.broker);
    }
    let total = sample(&text, "weir_request_duration_seconds_sum{api=\"Produce\"}");
    let count = sample(
        &text,
        "weir_request_duration_seconds_count{api=\"Produce\"}",
    );
    assert_eq!(count, 20.0);
    let mut stages = 0.0;
    for stage in ["handle", "wait", "queue", "write"] {
        let labels = format!("{{api=\"Produce\",stage=\"{stage}\"}}");
        assert_eq!(
            sample(&text, &format!("weir_request_stage_seconds_count{labels}")),
            count,
            "{stage}"
        );
        stages += sample(&text, &format!("weir_request_stage_seconds_sum{labels}"));
    }
    let wait = sample(
        &text,
        "weir_request_stage_seconds_sum{api=\"Produce\",stage=\"wait\"}",
    );
    assert!(wait > 0.0, "the syncs took no time: {wait}");
    assert!(stages <= total + 1e-6, "stages {stages} > total {total}");
    // An API nobody used has no stage series.
    assert!(!text.contains("weir_request_stage_seconds_count{api=\"DeleteGroups\""));
    b.shutdown().await.unwrap();
}

/// The runtime watchdog measures how long a task waits to start: probes
/// arrive while the broker idles, and blocking every worker thread (as a
/// file read or an fsync on a worker would) shows as a stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_workers_show_as_runtime_stalls() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let rt = b.broker.metrics.runtime.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rt.delay.snapshot().count == 0 {
        assert!(std::time::Instant::now() < deadline, "no probe arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while rt.stalls.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "no stall seen");
        // Both workers blocked at once for 100 ms.
        let blockers: Vec<_> = (0..2)
            .map(|_| tokio::spawn(async { std::thread::sleep(Duration::from_millis(100)) }))
            .collect();
        for t in blockers {
            t.await.unwrap();
        }
    }
    let text = weir_broker::metrics::render(&b.broker);
    assert!(sample(&text, "weir_runtime_stalls_total") >= 1.0, "{text}");
    assert!(
        sample(&text, "weir_runtime_max_schedule_delay_seconds") > 0.01,
        "{text}"
    );
    b.shutdown().await.unwrap();
}

/// A ConsumerGroupHeartbeat leaving the group.
fn leave(group: &str, member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        member_epoch: epoch,
        topic_partitions: None,
        subscribed_topic_names: None,
        rebalance_timeout_ms: -1,
        ..crate::consumer_groups::join(group, member, &[])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_groups_show_state_members_lag_and_rebalances() {
    use crate::consumer_groups::{heartbeat, join};
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "cv", 4, &[]).await, 0);
    let b1 = batch(&["a", "b", "c", "d", "e"], 1_700_000_000_000);
    assert_eq!(produce(&mut c, "cv", 0, b1, -1).await, (NONE, 0));
    let before = scrape(&b).await;
    let rebalances = |s: &Scrape| value(s, "weir_consumer_group_rebalances_total", &[]).unwrap();
    let assignments =
        |s: &Scrape| histogram_count(s, "weir_consumer_group_assignment_seconds", &[]).unwrap();
    let state = |s: &Scrape| -> Vec<String> {
        ["Empty", "Assigning", "Reconciling", "Stable", "Dead"]
            .into_iter()
            .filter(|st| {
                value(s, "weir_group_state", &[("group", "cg"), ("state", st)]) == Some(1.0)
            })
            .map(String::from)
            .collect()
    };
    let members = |s: &Scrape| value(s, "weir_group_members", &[("group", "cg")]);

    // m1 joins: epoch 1, all four partitions, Stable.
    let r = heartbeat(&mut c, join("cg", "m1", &["cv"])).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
    let s = scrape(&b).await;
    assert_eq!(state(&s), ["Stable"]);
    assert_eq!(members(&s), Some(1.0));
    assert_eq!(
        value(
            &s,
            "weir_group_type",
            &[("group", "cg"), ("type", "consumer")]
        ),
        Some(1.0)
    );
    // a consumer group lists its own states, not the classic ones
    assert_eq!(
        value(
            &s,
            "weir_group_state",
            &[("group", "cg"), ("state", "PreparingRebalance")]
        ),
        None
    );

    // m2 joins: epoch 2; m1 still owns what the target gives m2.
    let r = heartbeat(&mut c, join("cg", "m2", &["cv"])).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let s = scrape(&b).await;
    assert_eq!(state(&s), ["Reconciling"]);
    assert_eq!(members(&s), Some(2.0));

    // m1 leaves: epoch 3, whose assignment waits for the next heartbeat.
    let r = heartbeat(&mut c, leave("cg", "m1", -1)).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let s = scrape(&b).await;
    assert_eq!(state(&s), ["Assigning"]);
    assert_eq!(members(&s), Some(1.0));

    // m2's heartbeat computes it: all four, nobody else owns them.
    let r = heartbeat(
        &mut c,
        ConsumerGroupHeartbeatRequest {
            member_epoch: 2,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            topic_partitions: Some(Vec::new()),
            ..join("cg", "m2", &[])
        },
    )
    .await;
    assert_eq!((r.error_code, r.member_epoch), (0, 3), "{r:?}");
    let s = scrape(&b).await;
    assert_eq!(state(&s), ["Stable"]);

    // a commit by the member: committed offset and lag like a classic group
    assert_eq!(
        crate::consumer_groups::member_commit(&mut c, ("cg", "m2", 3), "cv", 2, 9).await,
        0
    );
    let s = scrape(&b).await;
    let gtp = [("group", "cg"), ("topic", "cv"), ("partition", "0")];
    assert_eq!(value(&s, "weir_group_committed_offset", &gtp), Some(2.0));
    assert_eq!(value(&s, "weir_group_lag", &gtp), Some(3.0));

    // three epoch bumps (two joins, a leave), three assignments computed
    assert_eq!(rebalances(&s) - rebalances(&before), 3.0);
    assert_eq!(assignments(&s) - assignments(&before), 3.0);
    b.shutdown().await.unwrap();
}
