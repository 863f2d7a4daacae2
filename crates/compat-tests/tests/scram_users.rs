//! SCRAM credentials set at run time with `weir users scram`, used by a real
//! client: librdkafka (rdkafka crate) logs in with SCRAM-SHA-512 on the
//! SASL_PLAINTEXT listener of a `weir serve` process with a credential that
//! `weir users scram set` created over its PLAINTEXT listener (the broker
//! has no static JAAS users), produces and consumes; a wrong password is
//! refused; the credential survives a restart of the process; after
//! `weir users scram delete` the login is refused.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{CommandOutput, WeirProcess, run_with_timeout, weir_binary};

const TIMEOUT: Duration = Duration::from_secs(30);

/// SASL_PLAINTEXT first (the process's bootstrap address), PLAINTEXT for
/// the CLI; SCRAM-SHA-512 without any JAAS users.
fn start() -> WeirProcess {
    let args: Vec<String> = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]
    .into_iter()
    .flat_map(|kv| ["--set".to_string(), kv.to_string()])
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    WeirProcess::start_with_args(&args).unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

/// The bound address of listener `name` of the running process (a
/// restart binds new ports).
fn listener_addr(b: &WeirProcess, name: &str) -> SocketAddr {
    b.listener_addr(name)
        .unwrap_or_else(|| panic!("no {name} listener in the log:\n{}", b.stderr_tail()))
}

/// `weir users scram ARGS…` against the PLAINTEXT listener.
fn users(b: &WeirProcess, args: &[&str], stdin: Option<&[u8]>) -> CommandOutput {
    let bin = weir_binary().unwrap_or_else(|e| panic!("{e}"));
    let addr = listener_addr(b, "PLAINTEXT").to_string();
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["users", "scram"])
        .args(args)
        .args(["--bootstrap-server", &addr]);
    run_with_timeout(&mut cmd, stdin, TIMEOUT).expect("weir users scram runs")
}

fn client(b: &WeirProcess, password: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", b.bootstrap())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", "dave")
        .set("sasl.password", password);
    c
}

async fn produce_and_consume(config: &ClientConfig, topic: &str) {
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    let values: Vec<String> = (0..50).map(|i| format!("{topic}-{i}")).collect();
    for v in &values {
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(v).partition(0),
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce over SCRAM: {e}"));
    }
    let consumer: BaseConsumer = config
        .clone()
        .set("group.id", format!("g-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    while got.len() < values.len() {
        assert!(Instant::now() < deadline, "consumed {} of 50", got.len());
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    assert_eq!(got, values);
}

/// The login is refused: metadata never comes (librdkafka retries an
/// authentication failure, so a short wait is the refusal).
fn refused(b: &WeirProcess, password: &str) -> bool {
    let consumer: BaseConsumer = client(b, password).create().expect("consumer");
    consumer
        .fetch_metadata(None, Duration::from_secs(3))
        .is_err()
}

#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_logs_in_with_a_credential_set_by_weir_users_scram() {
    let mut b = start();
    assert!(refused(&b, "dave-secret"), "no credential yet");

    let out = users(
        &b,
        &[
            "set",
            "--user",
            "dave",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password-stdin",
            "--iterations",
            "8192",
        ],
        Some(b"dave-secret\n"),
    );
    assert!(out.success(), "{}", out.describe("weir users scram set"));
    assert!(
        out.stdout
            .contains("Completed updating config for user dave."),
        "{}",
        out.stdout
    );
    let out = users(&b, &["list"], None);
    assert!(out.success(), "{}", out.describe("weir users scram list"));
    assert_eq!(
        out.stdout.trim(),
        "SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-512=iterations=8192"
    );
    // the broker refuses too few iterations, with Kafka's error
    let out = users(
        &b,
        &[
            "set",
            "--user",
            "erin",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password",
            "x",
            "--iterations",
            "100",
        ],
        None,
    );
    assert!(!out.success());
    assert!(
        out.stderr.contains("UNACCEPTABLE_CREDENTIAL") && out.stderr.contains("Too few iterations"),
        "{}",
        out.stderr
    );

    produce_and_consume(&client(&b, "dave-secret"), "scram-users-1").await;
    assert!(refused(&b, "wrong"), "a wrong password was accepted");

    // durable: the restarted process knows dave
    b.restart().unwrap_or_else(|e| panic!("restart: {e}"));
    produce_and_consume(&client(&b, "dave-secret"), "scram-users-2").await;

    let out = users(
        &b,
        &["delete", "--user", "dave", "--mechanism", "SCRAM-SHA-512"],
        None,
    );
    assert!(out.success(), "{}", out.describe("weir users scram delete"));
    assert!(
        refused(&b, "dave-secret"),
        "a deleted credential was accepted"
    );
    let out = users(&b, &["list", "--user", "dave"], None);
    assert!(!out.success());
    assert!(out.stderr.contains("RESOURCE_NOT_FOUND"), "{}", out.stderr);
}
