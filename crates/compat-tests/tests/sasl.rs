//! Real clients over a SASL_PLAINTEXT listener of a `weir serve` process:
//! librdkafka (rdkafka crate) with `sasl.mechanism=PLAIN`, `SCRAM-SHA-256`
//! and `SCRAM-SHA-512` producing and consuming, and refused with an
//! authentication error for a wrong password or an unknown user;
//! kafka-python with PLAIN and SCRAM the same way; a raw connection that
//! asks for metadata before authenticating is closed unanswered; and
//! SCRAM-SHA-512 inside TLS on a SASL_SSL listener.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{WeirProcess, run_python_check_with};

const TIMEOUT: Duration = Duration::from_secs(30);

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_alice=\"alice-secret\" user_bob=\"bob-secret\";";
const SCRAM_JAAS: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
     user_carol=\"carol-secret\";";

/// A broker whose first listener is SASL_PLAINTEXT with PLAIN and both
/// SCRAM mechanisms, with an HTTP listener for its metrics.
fn start() -> WeirProcess {
    start_with(&[])
}

/// [`start`] with more `--set` values.
fn start_with(more: &[&str]) -> WeirProcess {
    let args: Vec<String> = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0".to_string(),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".to_string(),
        format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"),
        format!("listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={SCRAM_JAAS}"),
        format!("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}"),
        "http.listeners=127.0.0.1:0".to_string(),
    ]
    .into_iter()
    .chain(more.iter().map(|s| s.to_string()))
    .flat_map(|kv| ["--set".to_string(), kv])
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    WeirProcess::start_with_args(&args).unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

fn client(b: &WeirProcess, mechanism: &str, user: &str, password: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", b.bootstrap())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", mechanism)
        .set("sasl.username", user)
        .set("sasl.password", password);
    c
}

async fn produce(config: &ClientConfig, topic: &str, values: &[String]) {
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for v in values {
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(v).partition(0),
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce over SASL: {e}"));
    }
}

fn consume(config: &ClientConfig, topic: &str, n: usize) -> Vec<String> {
    let consumer: BaseConsumer = config
        .clone()
        .set("group.id", format!("sasl-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "consumed {} of {n}", got.len());
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    got
}

/// Keeps the errors librdkafka reports for the client (its error_cb).
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<String>>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.lock().unwrap().push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Errors {}

/// A client with wrong credentials gets an authentication error carrying
/// the broker's message and never a metadata answer.
fn assert_refused(config: &ClientConfig, what: &str) {
    let errors = Errors::default();
    let consumer: BaseConsumer<Errors> = config
        .create_with_context(errors.clone())
        .expect("consumer");
    let r = consumer.fetch_metadata(None, Duration::from_secs(3));
    assert!(r.is_err(), "{what}: served with wrong credentials: {r:?}");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        // errors reach the context from poll
        let _ = consumer.poll(Duration::from_millis(100));
        let seen = errors.0.lock().unwrap().clone();
        if seen
            .iter()
            .any(|e| e.contains("Authentication failed: Invalid username or password"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no authentication error, only {seen:?}"
        );
    }
}

/// The broker closes `s` without sending anything (a read timeout is a
/// failure: the connection stayed open).
fn assert_closed(s: &mut std::net::TcpStream, what: &str) {
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(n) => panic!("{what}: answered {:?}", &buf[..n]),
        Err(e) => panic!("{what}: not closed: {e}"),
    }
}

fn failures(b: &WeirProcess) -> f64 {
    b.metric("weir_sasl_authentication_failures_total", &[])
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_plain_and_scram_and_wrong_credentials_refused() {
    let b = start();
    for (mechanism, user, password) in [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "carol", "carol-secret"),
        ("SCRAM-SHA-512", "carol", "carol-secret"),
    ] {
        let topic = format!("sasl-rd-{}", mechanism.to_ascii_lowercase());
        let values: Vec<String> = (0..300).map(|i| format!("{mechanism}-{i}")).collect();
        let c = client(&b, mechanism, user, password);
        produce(&c, &topic, &values).await;
        assert_eq!(consume(&c, &topic, values.len()), values, "{mechanism}");
    }
    assert_eq!(failures(&b), 0.0);
    assert!(
        b.metric("weir_sasl_authentications_total", &[]).unwrap() >= 3.0,
        "successful authentications are counted"
    );

    for (mechanism, user, password) in [
        ("PLAIN", "alice", "bob-secret"),
        ("PLAIN", "mallory", "alice-secret"),
        ("SCRAM-SHA-256", "carol", "wrong"),
        ("SCRAM-SHA-512", "mallory", "carol-secret"),
        // a PLAIN user is not a SCRAM user
        ("SCRAM-SHA-256", "alice", "alice-secret"),
    ] {
        let before = failures(&b);
        assert_refused(
            &client(&b, mechanism, user, password),
            &format!("{mechanism} {user}"),
        );
        assert!(
            failures(&b) > before,
            "{mechanism} {user}: failure not counted"
        );
    }
    let log = b.stderr_tail();
    assert!(log.contains("SASL authentication failed"), "{log}");
    // the log says why; the password never appears in it
    assert!(
        !log.contains("bob-secret") && !log.contains("alice-secret"),
        "{log}"
    );
}

/// KIP-368: with `connections.max.reauth.ms`, librdkafka re-authenticates
/// its connections before their sessions end and keeps producing; no
/// session expires, nothing fails.
#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_reauthenticates_before_its_session_expires() {
    let b = start_with(&["connections.max.reauth.ms=1500"]);
    let reauths = || b.metric("weir_sasl_reauthentications_total", &[]).unwrap();
    for (mechanism, user, password) in [
        ("SCRAM-SHA-512", "carol", "carol-secret"),
        ("PLAIN", "alice", "alice-secret"),
    ] {
        let before = reauths();
        let topic = format!("sasl-reauth-{}", mechanism.to_ascii_lowercase());
        let producer: FutureProducer = client(&b, mechanism, user, password)
            .set("acks", "all")
            .set("message.timeout.ms", "30000")
            .create()
            .expect("producer");
        // produce (each send waits for its ack) until the connection has
        // re-authenticated twice
        let deadline = Instant::now() + TIMEOUT;
        let mut sent = 0;
        while reauths() < before + 2.0 {
            assert!(
                Instant::now() < deadline,
                "{mechanism}: {} re-authentications after {sent} records",
                reauths() - before
            );
            producer
                .send(
                    FutureRecord::<(), _>::to(&topic)
                        .payload(&format!("r-{sent}"))
                        .partition(0),
                    TIMEOUT,
                )
                .await
                .unwrap_or_else(|(e, _)| {
                    panic!("{mechanism}: produce across re-authentication: {e}")
                });
            sent += 1;
        }
        let values: Vec<String> = (0..sent).map(|i| format!("r-{i}")).collect();
        assert_eq!(
            consume(&client(&b, mechanism, user, password), &topic, sent),
            values,
            "{mechanism}"
        );
    }
    assert_eq!(failures(&b), 0.0);
    assert_eq!(
        b.metric("weir_sasl_sessions_expired_total", &[]).unwrap(),
        0.0,
        "a session expired instead of being renewed"
    );
}

/// A Metadata request before authenticating: the connection is closed
/// without an answer (Kafka's behaviour), as is a 100 MiB frame; a
/// SaslHandshake for a mechanism that is not enabled is closed after its
/// answer.
#[test]
fn nothing_is_served_before_authentication() {
    let b = start();
    let addr = b.bootstrap().to_string();
    // Metadata v1, no topics (null array): header + body
    let mut frame = vec![0, 3, 0, 1, 0, 0, 0, 7, 0, 0];
    frame.extend_from_slice(&(-1i32).to_be_bytes());
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(&(frame.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&frame).unwrap();
    assert_closed(&mut s, "a Metadata request before authenticating");
    assert!(failures(&b) >= 1.0, "refusal not counted");

    // a frame announced as 100 MiB before authenticating: closed without
    // reading it (the limit is 512 KiB until then)
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(&(100u32 << 20).to_be_bytes()).unwrap();
    s.write_all(&[0, 36, 0, 2]).unwrap();
    assert_closed(&mut s, "a 100 MiB frame before authenticating");

    // SaslHandshake v1 for GSSAPI: UNSUPPORTED_SASL_MECHANISM (33), then closed
    let mechanism = b"GSSAPI";
    let mut frame = vec![0, 17, 0, 1, 0, 0, 0, 9, 0, 0];
    frame.extend_from_slice(&(mechanism.len() as u16).to_be_bytes());
    frame.extend_from_slice(mechanism);
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(&(frame.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&frame).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    // size, correlation id 9, error code 33, then the enabled mechanisms
    assert!(answer.len() > 10, "{answer:?}");
    assert_eq!(&answer[4..8], &9i32.to_be_bytes());
    assert_eq!(&answer[8..10], &33i16.to_be_bytes());
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.contains("PLAIN") && text.contains("SCRAM-SHA-512"),
        "{text}"
    );
}

#[test]
fn kafka_python_plain_and_scram() {
    let b = start();
    let run = |mechanism: &str, user: &str, password: &str, refused: bool| {
        let mut args = vec![
            "--mechanism",
            mechanism,
            "--username",
            user,
            "--password",
            password,
        ];
        if refused {
            args.push("--refused");
        }
        run_python_check_with(&b, "sasl_check.py", &args);
    };
    run("PLAIN", "alice", "alice-secret", false);
    run("PLAIN", "alice", "wrong", true);
    run("SCRAM-SHA-256", "carol", "carol-secret", false);
    run("SCRAM-SHA-512", "carol", "wrong", true);
}

/// SASL_SSL: librdkafka verifies the broker's certificate, then
/// authenticates with SCRAM-SHA-512 inside TLS; a wrong password is
/// refused there too.
#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_scram_over_sasl_ssl() {
    let pki = weir_test_support::pki::TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, pki.server("weir-broker-1", 1).keystore_pem()).unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pki.ca_pem()).unwrap();
    let args: Vec<String> = [
        "listeners=SASL_SSL://127.0.0.1:0".to_string(),
        format!("ssl.keystore.location={}", keystore.display()),
        "sasl.enabled.mechanisms=SCRAM-SHA-512".to_string(),
        format!("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}"),
        "http.listeners=127.0.0.1:0".to_string(),
    ]
    .into_iter()
    .flat_map(|kv| ["--set".to_string(), kv])
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let b =
        WeirProcess::start_with_args(&args).unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let with_tls = |password: &str| {
        let mut c = client(&b, "SCRAM-SHA-512", "carol", password);
        c.set("security.protocol", "SASL_SSL")
            .set("ssl.ca.location", ca.display().to_string())
            .set("ssl.endpoint.identification.algorithm", "https");
        c
    };
    let values: Vec<String> = (0..200).map(|i| format!("sasl-ssl-{i}")).collect();
    produce(&with_tls("carol-secret"), "sasl-ssl", &values).await;
    assert_eq!(
        consume(&with_tls("carol-secret"), "sasl-ssl", values.len()),
        values
    );

    assert_refused(&with_tls("wrong"), "SCRAM-SHA-512 over TLS");
    assert!(failures(&b) >= 1.0);
}
