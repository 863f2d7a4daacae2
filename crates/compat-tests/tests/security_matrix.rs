//! The security client matrix: Debian's kcat (librdkafka 2.0.2), librdkafka
//! through the rdkafka crate, kafka-python and kafkajs against one
//! `weir serve` with an SSL listener that requires a client certificate, a
//! SASL_SSL and a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512 on both). Each row of [`CASES`] is one client over one
//! listener and mechanism: it produces records to a topic of its own and
//! consumes them back (content and order checked), or is refused — a wrong
//! password with the client's authentication error carrying the broker's
//! message, no client certificate with a failed connection.
//!
//! The rows fill the gaps of `tls.rs` and `sasl.rs` (librdkafka with
//! SCRAM-SHA-512 over SASL_SSL, kafka-python over SSL with a client
//! certificate and over SASL_PLAINTEXT are there). They run a few at a
//! time on worker threads against the one broker, each client run bounded
//! by [`CLIENT_LIMIT`]; every row is reported, then the test fails if any
//! row did.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{CommandOutput, WeirProcess, run_with_timeout, skip_or_fail, tools};
use weir_test_support::pki::TestPki;

/// Time one client process (or one librdkafka produce or consume) may take.
const CLIENT_LIMIT: Duration = Duration::from_secs(60);
/// Records each round trip produces and reads back.
const RECORDS: usize = 100;
/// Rows run at once: the clients share two cores with the broker.
const WORKERS: usize = 4;

const PLAIN_USER: (&str, &str) = ("alice", "alice-secret");
const SCRAM_USER: (&str, &str) = ("carol", "carol-secret");
const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_alice=\"alice-secret\";";
const SCRAM_JAAS: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
     user_carol=\"carol-secret\";";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Kcat,
    Librdkafka,
    KafkaPython,
    Kafkajs,
}

/// A listener of the matrix broker; its name is also its security protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listener {
    Ssl,
    SaslSsl,
    SaslPlaintext,
}

impl Listener {
    fn name(self) -> &'static str {
        match self {
            Listener::Ssl => "SSL",
            Listener::SaslSsl => "SASL_SSL",
            Listener::SaslPlaintext => "SASL_PLAINTEXT",
        }
    }

    fn tls(self) -> bool {
        self != Listener::SaslPlaintext
    }
}

/// How the client proves who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    /// A client certificate (SSL listener, `ssl.client.auth=required`).
    Certificate,
    /// A SASL mechanism with its user's password.
    Sasl(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Produce [`RECORDS`] records, consume the same back in order.
    RoundTrip,
    /// Refused: with a wrong password for SASL, without the client
    /// certificate for SSL.
    Refused,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    client: Client,
    listener: Listener,
    auth: Auth,
    expect: Expect,
}

const fn case(client: Client, listener: Listener, auth: Auth, expect: Expect) -> Case {
    Case {
        client,
        listener,
        auth,
        expect,
    }
}

use Auth::{Certificate, Sasl};
use Client::{KafkaPython, Kafkajs, Kcat, Librdkafka};
use Expect::{Refused, RoundTrip};
use Listener::{SaslPlaintext, SaslSsl, Ssl};

const CASES: &[Case] = &[
    case(Kcat, SaslSsl, Sasl("SCRAM-SHA-512"), RoundTrip),
    case(Kcat, SaslSsl, Sasl("PLAIN"), RoundTrip),
    case(Kcat, Ssl, Certificate, RoundTrip),
    case(Kcat, SaslSsl, Sasl("SCRAM-SHA-512"), Refused),
    case(Kcat, Ssl, Certificate, Refused),
    case(Kafkajs, SaslSsl, Sasl("SCRAM-SHA-256"), RoundTrip),
    case(Kafkajs, SaslSsl, Sasl("PLAIN"), RoundTrip),
    case(Kafkajs, Ssl, Certificate, RoundTrip),
    case(Kafkajs, SaslPlaintext, Sasl("SCRAM-SHA-512"), RoundTrip),
    case(Kafkajs, SaslSsl, Sasl("SCRAM-SHA-256"), Refused),
    case(Kafkajs, SaslPlaintext, Sasl("PLAIN"), Refused),
    case(Kafkajs, Ssl, Certificate, Refused),
    case(KafkaPython, SaslSsl, Sasl("SCRAM-SHA-512"), RoundTrip),
    case(KafkaPython, SaslSsl, Sasl("PLAIN"), RoundTrip),
    case(KafkaPython, SaslSsl, Sasl("SCRAM-SHA-512"), Refused),
    case(Librdkafka, SaslSsl, Sasl("SCRAM-SHA-256"), RoundTrip),
    case(Librdkafka, SaslSsl, Sasl("PLAIN"), RoundTrip),
];

impl Case {
    fn label(&self) -> String {
        let auth = match self.auth {
            Certificate => "client certificate".to_string(),
            Sasl(m) => m.to_string(),
        };
        let expect = match (self.expect, self.auth) {
            (RoundTrip, _) => "round trip",
            (Refused, Certificate) => "refused without a certificate",
            (Refused, Sasl(_)) => "refused with a wrong password",
        };
        format!(
            "{:?} {} {auth}: {expect}",
            self.client,
            self.listener.name()
        )
    }

    /// The topic of a round trip, unique per row.
    fn topic(&self) -> String {
        let auth = match self.auth {
            Certificate => "cert",
            Sasl(m) => m,
        };
        format!("{:?}-{}-{auth}", self.client, self.listener.name())
            .to_ascii_lowercase()
            .replace('_', "-")
    }

    /// The user and password the client logs in with (a wrong password
    /// for a refused row).
    fn credentials(&self) -> (&'static str, &'static str) {
        let (user, password) = match self.auth {
            Sasl("PLAIN") => PLAIN_USER,
            _ => SCRAM_USER,
        };
        match self.expect {
            RoundTrip => (user, password),
            Refused => (user, "not-the-password"),
        }
    }

    /// Whether the client presents the client certificate.
    fn with_certificate(&self) -> bool {
        self.auth == Certificate && self.expect == RoundTrip
    }
}

/// The broker and the PEM files its clients use.
struct Matrix {
    _dir: tempfile::TempDir,
    ca: String,
    cert: String,
    key: String,
    process: WeirProcess,
}

impl Matrix {
    fn start() -> Matrix {
        let pki = TestPki::new();
        let dir = tempfile::tempdir().unwrap();
        let keystore = write(
            dir.path(),
            "broker.pem",
            pki.server("weir-broker-1", 1).keystore_pem(),
        );
        let ca = write(dir.path(), "ca.pem", pki.ca_pem());
        let client = pki.client("matrix", Some("apps"));
        let cert = write(dir.path(), "client.crt", &client.cert_pem);
        let key = write(dir.path(), "client.key", &client.key_pem);
        let mut settings = vec![
            "listeners=SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
                .to_string(),
            format!("ssl.keystore.location={keystore}"),
            // mTLS on the SSL listener only, as Kafka scopes it
            "listener.name.ssl.ssl.client.auth=required".to_string(),
            format!("listener.name.ssl.ssl.truststore.location={ca}"),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".to_string(),
            // kafkajs only consumes in a group: no wait for more members
            "group.initial.rebalance.delay.ms=0".to_string(),
            "http.listeners=127.0.0.1:0".to_string(),
        ];
        for l in ["sasl_ssl", "sasl_plaintext"] {
            settings.push(format!(
                "listener.name.{l}.plain.sasl.jaas.config={PLAIN_JAAS}"
            ));
            for m in ["scram-sha-256", "scram-sha-512"] {
                settings.push(format!(
                    "listener.name.{l}.{m}.sasl.jaas.config={SCRAM_JAAS}"
                ));
            }
        }
        let args: Vec<String> = settings
            .into_iter()
            .flat_map(|kv| ["--set".to_string(), kv])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let process = WeirProcess::start_with_args(&args)
            .unwrap_or_else(|e| panic!("weir did not start: {e}"));
        Matrix {
            _dir: dir,
            ca,
            cert,
            key,
            process,
        }
    }

    fn addr(&self, listener: Listener) -> SocketAddr {
        self.process
            .listener_addr(listener.name())
            .unwrap_or_else(|| {
                panic!(
                    "no {} listener in the log\n{}",
                    listener.name(),
                    self.process.stderr_tail()
                )
            })
    }
}

fn write(dir: &Path, name: &str, data: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path.display().to_string()
}

/// Runs one row; `Err` says what went wrong.
fn run_case(m: &Matrix, c: &Case, addr: SocketAddr, tools: &Tools) -> Result<(), String> {
    match c.client {
        Kcat => kcat_case(m, c, addr, tools.kcat.as_deref().expect("checked")),
        Librdkafka => librdkafka_case(m, c, addr),
        KafkaPython => python_case(m, c, addr, tools.python.as_deref().expect("checked")),
        Kafkajs => kafkajs_case(m, c, addr, tools.node.as_deref().expect("checked")),
    }
}

// ---------------------------------------------------------------- kcat

fn kcat_case(m: &Matrix, c: &Case, addr: SocketAddr, kcat: &Path) -> Result<(), String> {
    let mut settings = vec![format!("security.protocol={}", c.listener.name())];
    if c.listener.tls() {
        settings.push(format!("ssl.ca.location={}", m.ca));
    }
    if c.with_certificate() {
        settings.push(format!("ssl.certificate.location={}", m.cert));
        settings.push(format!("ssl.key.location={}", m.key));
    }
    if let Sasl(mechanism) = c.auth {
        let (user, password) = c.credentials();
        settings.push(format!("sasl.mechanisms={mechanism}"));
        settings.push(format!("sasl.username={user}"));
        settings.push(format!("sasl.password={password}"));
    }
    let run = |args: &[&str], stdin: Option<&[u8]>| -> CommandOutput {
        let mut cmd = Command::new(kcat);
        cmd.arg("-b").arg(addr.to_string());
        for s in &settings {
            cmd.arg("-X").arg(s);
        }
        cmd.args(args);
        run_with_timeout(&mut cmd, stdin, CLIENT_LIMIT).expect("kcat spawns")
    };
    match c.expect {
        RoundTrip => {
            let topic = c.topic();
            let input: String = (0..RECORDS)
                .map(|i| format!("{}-{i}\n", c.topic()))
                .collect();
            let out = run(&["-P", "-t", &topic, "-p", "0"], Some(input.as_bytes()));
            if !out.success() {
                return Err(out.describe("kcat -P"));
            }
            let count = RECORDS.to_string();
            let out = run(
                &[
                    "-C",
                    "-t",
                    &topic,
                    "-p",
                    "0",
                    "-o",
                    "beginning",
                    "-c",
                    &count,
                    "-e",
                ],
                None,
            );
            if !out.success() {
                return Err(out.describe("kcat -C"));
            }
            if out.stdout != input {
                return Err(format!(
                    "consumed other records than produced\n{}",
                    out.describe("kcat -C")
                ));
            }
            Ok(())
        }
        Refused => {
            // a metadata listing: librdkafka gives up after -m seconds
            let out = run(&["-L", "-m", "5"], None);
            if out.success() {
                return Err(format!("served: {}", out.describe("kcat -L")));
            }
            let expected = match c.auth {
                Sasl(_) => "Authentication failed: Invalid username or password",
                Certificate => "certificate required",
            };
            if !out.stderr.contains(expected) {
                return Err(format!(
                    "refused, but without `{expected}`\n{}",
                    out.describe("kcat -L")
                ));
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------- librdkafka

/// The errors of deliveries that failed.
#[derive(Clone, Default)]
struct Deliveries(Arc<Mutex<Vec<String>>>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.0.lock().unwrap().push(e.to_string());
        }
    }
}

fn librdkafka_case(m: &Matrix, c: &Case, addr: SocketAddr) -> Result<(), String> {
    assert_eq!(c.expect, RoundTrip, "librdkafka refusals are in sasl.rs");
    let Sasl(mechanism) = c.auth else {
        panic!("librdkafka over SSL is in tls.rs");
    };
    let (user, password) = c.credentials();
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", addr.to_string())
        .set("security.protocol", c.listener.name())
        .set("sasl.mechanism", mechanism)
        .set("sasl.username", user)
        .set("sasl.password", password);
    if c.listener.tls() {
        config
            .set("ssl.ca.location", &m.ca)
            .set("ssl.endpoint.identification.algorithm", "https");
    }
    let topic = c.topic();
    let values: Vec<String> = (0..RECORDS).map(|i| format!("{topic}-{i}")).collect();

    let deliveries = Deliveries::default();
    let producer: BaseProducer<Deliveries> = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create_with_context(deliveries.clone())
        .map_err(|e| format!("producer: {e}"))?;
    for v in &values {
        let mut record = BaseRecord::<(), _>::to(&topic).payload(v).partition(0);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => return Err(format!("produce: {e}")),
            }
        }
    }
    producer
        .flush(CLIENT_LIMIT)
        .map_err(|e| format!("flush: {e}"))?;
    let failed = deliveries.0.lock().unwrap().clone();
    if !failed.is_empty() {
        return Err(format!("deliveries failed: {failed:?}"));
    }

    let consumer: BaseConsumer = config
        .set("group.id", format!("{topic}-group"))
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| format!("consumer: {e}"))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
    let deadline = Instant::now() + CLIENT_LIMIT;
    let mut got = Vec::new();
    while got.len() < values.len() {
        if Instant::now() >= deadline {
            return Err(format!("consumed {} of {}", got.len(), values.len()));
        }
        if let Some(msg) = consumer.poll(Duration::from_millis(200)) {
            let msg = msg.map_err(|e| format!("consume: {e}"))?;
            got.push(String::from_utf8_lossy(msg.payload().unwrap_or_default()).into_owned());
        }
    }
    if got != values {
        return Err("consumed other records than produced".into());
    }
    Ok(())
}

// ---------------------------------------------------------------- scripts

/// A check script's verdict: it exited 0, passed at least one check and
/// failed none (the lines `PASS …` / `FAIL …`).
fn script_verdict(out: &CommandOutput, script: &str) -> Result<(), String> {
    let passes = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("PASS "))
        .count();
    let failed = out.stdout.lines().any(|l| l.starts_with("FAIL "));
    if out.success() && passes > 0 && !failed {
        Ok(())
    } else {
        Err(out.describe(script))
    }
}

fn python_case(m: &Matrix, c: &Case, addr: SocketAddr, python: &Path) -> Result<(), String> {
    let Sasl(mechanism) = c.auth else {
        panic!("kafka-python over SSL is in tls.rs");
    };
    let (user, password) = c.credentials();
    let addr = addr.to_string();
    let mut args = vec![
        "--bootstrap",
        &addr,
        "--mechanism",
        mechanism,
        "--username",
        user,
        "--password",
        password,
    ];
    if c.listener.tls() {
        args.extend(["--cafile", &m.ca]);
    }
    if c.expect == Refused {
        args.push("--refused");
    }
    let out = run_with_timeout(
        Command::new(python)
            .arg(tools::python_dir().join("sasl_check.py"))
            .args(&args)
            .env("PYTHONUNBUFFERED", "1"),
        None,
        CLIENT_LIMIT,
    )
    .expect("python spawns");
    script_verdict(&out, "sasl_check.py")
}

fn kafkajs_case(m: &Matrix, c: &Case, addr: SocketAddr, node: &Path) -> Result<(), String> {
    let dir = tools::js_dir();
    let addr = addr.to_string();
    let records = RECORDS.to_string();
    let mut args = vec![
        "--bootstrap",
        &addr,
        "--protocol",
        c.listener.name(),
        "--records",
        &records,
    ];
    if c.listener.tls() {
        args.extend(["--ca", &m.ca]);
    }
    if c.with_certificate() {
        args.extend(["--cert", &m.cert, "--key", &m.key]);
    }
    if let Sasl(mechanism) = c.auth {
        let (user, password) = c.credentials();
        args.extend([
            "--mechanism",
            mechanism,
            "--username",
            user,
            "--password",
            password,
        ]);
    }
    if c.expect == Refused {
        args.push("--refused");
    }
    let out = run_with_timeout(
        Command::new(node)
            .current_dir(&dir)
            .arg(dir.join("security_check.js"))
            .args(&args),
        None,
        CLIENT_LIMIT,
    )
    .expect("node spawns");
    script_verdict(&out, "security_check.js")
}

// ---------------------------------------------------------------- the matrix

/// The client programs found; a row whose program is missing is skipped
/// (a failure in CI, see `skip_or_fail`).
struct Tools {
    kcat: Option<PathBuf>,
    python: Option<PathBuf>,
    node: Option<PathBuf>,
}

impl Tools {
    fn find() -> Tools {
        let kcat = tools::kcat();
        if kcat.is_none() {
            skip_or_fail("kcat (apt-get install kcat)");
        }
        let python = tools::python();
        if python.is_none() {
            skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        }
        let mut node = tools::node();
        if node.is_none() {
            skip_or_fail("node (Node.js)");
        } else if !tools::kafkajs_installed() {
            skip_or_fail("kafkajs (npm ci in tests/compat/js)");
            node = None;
        }
        Tools { kcat, python, node }
    }

    fn has(&self, client: Client) -> bool {
        match client {
            Kcat => self.kcat.is_some(),
            Librdkafka => true,
            KafkaPython => self.python.is_some(),
            Kafkajs => self.node.is_some(),
        }
    }
}

#[test]
fn security_client_matrix() {
    let tools = Tools::find();
    let m = Matrix::start();
    let cases: Vec<Case> = CASES
        .iter()
        .copied()
        .filter(|c| tools.has(c.client))
        .collect();
    let addrs = [Ssl, SaslSsl, SaslPlaintext].map(|l| (l, m.addr(l)));
    let addr = |l: Listener| addrs.iter().find(|(x, _)| *x == l).unwrap().1;

    let next = AtomicUsize::new(0);
    // (row, how long it took, its verdict)
    type Outcome = (usize, Duration, Result<(), String>);
    let results: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = cases.get(i) else { break };
                    let started = Instant::now();
                    let r = run_case(&m, c, addr(c.listener), &tools);
                    results.lock().unwrap().push((i, started.elapsed(), r));
                }
            });
        }
    });

    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _, _)| *i);
    let mut failures = Vec::new();
    for (i, elapsed, r) in &results {
        let label = cases[*i].label();
        match r {
            Ok(()) => println!("ok      {label} ({elapsed:.1?})"),
            Err(e) => {
                println!("FAILED  {label} ({elapsed:.1?})");
                failures.push(format!("{label}:\n{e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n\n{}\n\n--- weir stderr (tail) ---\n{}",
        failures.len(),
        results.len(),
        failures.join("\n\n"),
        m.process.stderr_tail()
    );
}
