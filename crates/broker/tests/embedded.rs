//! `EmbeddedBroker`: started and stopped from a plain test and from inside
//! tokio runtimes of both flavours, several at once, data directory
//! lifetime, a produce/fetch round trip over the wire, and settings.

use crate::common;

use std::io::{Read, Write};
use std::time::Instant;

use common::*;
use weir_broker::{BrokerError, EmbeddedBroker};

/// One ApiVersions request over a blocking socket (no runtime needed).
fn api_versions_blocking(addr: SocketAddr) -> i16 {
    let mut socket = std::net::TcpStream::connect(addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    let body = RequestBody::ApiVersions(ApiVersionsRequest::default());
    let header = RequestHeader {
        request_api_key: body.api_key() as i16,
        request_api_version: 3,
        correlation_id: 7,
        client_id: Some("weir-test".to_string()),
        ..Default::default()
    };
    let mut frame = BytesMut::new();
    encode_request(&mut frame, &header, &body).expect("encode");
    socket.write_all(&frame).expect("write");
    let mut len = [0u8; 4];
    socket.read_exact(&mut len).expect("response length");
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    socket.read_exact(&mut buf).expect("response");
    let (header, body) = decode_response(Bytes::from(buf), body.api_key(), 3).expect("decode");
    assert_eq!(header.correlation_id, 7);
    match body {
        ResponseBody::ApiVersions(r) => r.error_code,
        other => panic!("{other:?}"),
    }
}

/// True when nothing accepts connections at `addr` any more.
fn refused(addr: SocketAddr) -> bool {
    std::net::TcpStream::connect(addr).is_err()
}

#[test]
fn starts_and_stops_from_a_plain_test() {
    let begun = Instant::now();
    let b = EmbeddedBroker::start().expect("start");
    eprintln!("started in {:?}", begun.elapsed());
    let addr = b.local_addr();
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_ne!(addr.port(), 0);
    assert_eq!(b.bootstrap(), addr.to_string());
    assert_eq!(b.http_addr(), None, "HTTP is off unless asked for");
    assert_eq!(api_versions_blocking(addr), NONE);
    b.shutdown().expect("clean shutdown");
    assert!(refused(addr), "still listening after shutdown");
}

#[tokio::test(flavor = "current_thread")]
async fn starts_and_stops_inside_a_current_thread_runtime() {
    let b = EmbeddedBroker::start().expect("start");
    // The client runs on this test's single thread; the broker on its own.
    api_versions_ok(b.local_addr()).await;
    let addr = b.local_addr();
    b.shutdown().expect("clean shutdown");
    assert!(refused(addr));
    // and stopping by drop inside the runtime
    let b = EmbeddedBroker::start().expect("start again");
    api_versions_ok(b.local_addr()).await;
    let addr = b.local_addr();
    drop(b);
    assert!(refused(addr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_and_stops_inside_a_multi_thread_runtime() {
    let b = EmbeddedBroker::start().expect("start");
    api_versions_ok(b.local_addr()).await;
    let addr = b.local_addr();
    drop(b);
    assert!(refused(addr));
    let b = EmbeddedBroker::start().expect("start again");
    api_versions_ok(b.local_addr()).await;
    b.shutdown().expect("clean shutdown");
}

#[test]
fn two_brokers_run_at_once_on_their_own_ports_and_dirs() {
    let a = EmbeddedBroker::start().expect("first");
    let b = EmbeddedBroker::start().expect("second");
    assert_ne!(a.local_addr(), b.local_addr());
    assert_ne!(a.data_dir(), b.data_dir());
    assert_ne!(
        a.broker().meta.cluster_id,
        b.broker().meta.cluster_id,
        "two data dirs, two clusters"
    );
    assert_eq!(api_versions_blocking(a.local_addr()), NONE);
    assert_eq!(api_versions_blocking(b.local_addr()), NONE);
    // stopping one leaves the other serving
    let a_addr = a.local_addr();
    a.shutdown().expect("first stops");
    assert!(refused(a_addr));
    assert_eq!(api_versions_blocking(b.local_addr()), NONE);
    b.shutdown().expect("second stops");
}

#[test]
fn the_temporary_data_dir_is_removed_on_drop_and_on_shutdown() {
    let b = EmbeddedBroker::start().expect("start");
    let dir = b.data_dir().to_path_buf();
    assert!(dir.join("meta.properties").is_file(), "{}", dir.display());
    drop(b);
    assert!(!dir.exists(), "{} left behind by drop", dir.display());

    let b = EmbeddedBroker::start().expect("start");
    let dir = b.data_dir().to_path_buf();
    assert!(dir.is_dir());
    b.shutdown().expect("shutdown");
    assert!(!dir.exists(), "{} left behind by shutdown", dir.display());
}

#[test]
fn a_data_dir_given_in_log_dirs_is_kept_and_reopened() {
    let kept = tempfile::tempdir().expect("tempdir");
    let path = kept.path().display().to_string();
    let b = EmbeddedBroker::builder()
        .set("log.dirs", &path)
        .start()
        .expect("start");
    assert_eq!(b.data_dir(), kept.path());
    let cluster = b.broker().meta.cluster_id.clone();
    drop(b);
    assert!(kept.path().join("meta.properties").is_file());
    let b = EmbeddedBroker::builder()
        .set("log.dirs", &path)
        .start()
        .expect("restart on the same dir");
    assert_eq!(b.broker().meta.cluster_id, cluster);
    b.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "current_thread")]
async fn produce_and_fetch_round_trip_over_the_wire() {
    let b = EmbeddedBroker::start().expect("start");
    let mut c = Client::connect(b.local_addr()).await;
    assert_eq!(create_topic(&mut c, "rt", 1, &[]).await, NONE);
    let (err, base) = produce(
        &mut c,
        "rt",
        0,
        batch(&["a", "b", "c"], 1_700_000_000_000),
        -1,
    )
    .await;
    assert_eq!((err, base), (NONE, 0));
    let (err, base) = produce(&mut c, "rt", 0, batch(&["d"], 1_700_000_000_100), 1).await;
    assert_eq!((err, base), (NONE, 3));
    let id = metadata(&mut c, Some(vec!["rt"]), false).await.topics[0].topic_id;
    let (err, hw, values) = fetch(&mut c, 13, "rt", id, 0, 500).await;
    assert_eq!((err, hw), (NONE, 4));
    let values: Vec<&str> = values.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(values, ["a", "b", "c", "d"]);
    // a fetch from the second batch's offset returns that batch only
    let (err, _, values) = fetch(&mut c, 13, "rt", id, 3, 500).await;
    assert_eq!((err, values), (NONE, vec![(3, "d".to_string())]));
    drop(c);
    b.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "current_thread")]
async fn settings_use_kafka_names() {
    let b = EmbeddedBroker::builder()
        .set("num.partitions", "3")
        .set("http.listeners", "127.0.0.1:0")
        .start()
        .expect("start");
    let mut c = Client::connect(b.local_addr()).await;
    let m = metadata(&mut c, Some(vec!["auto"]), true).await;
    assert_eq!(m.topics[0].error_code, NONE);
    assert_eq!(
        m.topics[0].partitions.len(),
        3,
        "num.partitions not applied"
    );
    let http = b.http_addr().expect("HTTP listener asked for");
    assert!(http.ip().is_loopback() && http.port() != 0, "{http}");
    drop(c);
    b.shutdown().expect("shutdown");
}

#[test]
fn an_invalid_setting_is_a_readable_config_error() {
    let e = EmbeddedBroker::builder()
        .set("num.partitions", "zero")
        .start()
        .expect_err("num.partitions=zero accepted");
    let BrokerError::Config(message) = &e else {
        panic!("not a config error: {e:?}");
    };
    assert!(
        message.contains("num.partitions") && message.contains("zero") && !message.contains('\n'),
        "{message}"
    );
    let e = EmbeddedBroker::builder()
        .set("listeners", "SASL_PLAINTEXT://127.0.0.1:0")
        .start()
        .expect_err("SASL listener without mechanisms accepted");
    assert!(e.to_string().contains("sasl.enabled.mechanisms"), "{e}");
    let e = EmbeddedBroker::builder()
        .set("listeners", "SSL://127.0.0.1:0")
        .start()
        .expect_err("SSL listener without a keystore accepted");
    assert!(e.to_string().contains("ssl.keystore.location"), "{e}");
}

#[test]
fn a_taken_port_is_reported_not_ignored() {
    let a = EmbeddedBroker::start().expect("start");
    let e = EmbeddedBroker::builder()
        .set("listeners", a.bootstrap())
        .start()
        .expect_err("second broker on the same port");
    assert!(matches!(e, BrokerError::Bind { .. }), "{e:?}");
    a.shutdown().expect("shutdown");
}
