//! Real clients over SSL listeners of a `weir serve` process: librdkafka
//! (rdkafka crate, built with OpenSSL) producing and consuming with a
//! client certificate where one is required (and refused without it),
//! kafka-python and kcat with `security.protocol=SSL`, a PLAINTEXT and an
//! SSL listener on one broker serving the same records, and a keystore
//! replaced under a running broker: new connections get the new
//! certificate. Certificates are made by the test (rcgen).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{
    WeirProcess, client_timeout, run_python_check_with, run_with_timeout, skip_or_fail, tools,
};
use weir_test_support::pki::{Issued, TestPki};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A broker whose first listener is SSL (so `bootstrap()` is the SSL
/// address), with a PLAINTEXT listener beside it, and the PEM files its
/// clients use.
struct SslBroker {
    pki: TestPki,
    dir: tempfile::TempDir,
    process: WeirProcess,
}

impl SslBroker {
    fn start(client_auth: &str) -> SslBroker {
        let pki = TestPki::new();
        let dir = tempfile::tempdir().unwrap();
        let keystore = write(
            dir.path(),
            "broker.pem",
            pki.server("weir-broker-1", 1).keystore_pem(),
        );
        let ca = write(dir.path(), "ca.pem", pki.ca_pem());
        let client = pki.client("alice", Some("apps"));
        write(dir.path(), "client.crt", &client.cert_pem);
        write(dir.path(), "client.key", &client.key_pem);
        let set = |kv: String| ["--set".to_string(), kv];
        let args: Vec<String> = [
            set("listeners=SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0".into()),
            set(format!("ssl.keystore.location={keystore}")),
            set(format!("ssl.truststore.location={ca}")),
            set(format!("ssl.client.auth={client_auth}")),
        ]
        .concat();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let process = WeirProcess::start_with_args(&args)
            .unwrap_or_else(|e| panic!("weir did not start: {e}"));
        SslBroker { pki, dir, process }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// librdkafka settings for the SSL listener, with the client
    /// certificate when `with_cert`.
    fn rdkafka(&self, with_cert: bool) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.process.bootstrap())
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", self.path("ca.pem"))
            .set("ssl.endpoint.identification.algorithm", "https");
        if with_cert {
            c.set("ssl.certificate.location", self.path("client.crt"))
                .set("ssl.key.location", self.path("client.key"));
        }
        c
    }

    /// The bound address of listener `name`.
    fn listener_addr(&self, name: &str) -> SocketAddr {
        self.process
            .listener_addr(name)
            .unwrap_or_else(|| panic!("no {name} listener in the log"))
    }
}

fn write(dir: &Path, name: &str, data: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path.display().to_string()
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
            .unwrap_or_else(|(e, _)| panic!("produce over SSL: {e}"));
    }
}

fn consume(config: &ClientConfig, topic: &str, n: usize) -> Vec<String> {
    let consumer: BaseConsumer = config
        .clone()
        .set("group.id", format!("tls-{topic}"))
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

#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_over_ssl_with_a_required_client_certificate_and_plaintext_beside_it() {
    let b = SslBroker::start("required");
    let values: Vec<String> = (0..500)
        .map(|i| format!("ssl-{i}-{}", "v".repeat(i)))
        .collect();
    produce(&b.rdkafka(true), "tls-rd", &values).await;
    assert_eq!(consume(&b.rdkafka(true), "tls-rd", values.len()), values);

    // the PLAINTEXT listener of the same broker serves the same records
    let plain_addr = b.listener_addr("PLAINTEXT");
    let mut plain = ClientConfig::new();
    plain.set("bootstrap.servers", plain_addr.to_string());
    assert_eq!(consume(&plain, "tls-rd", values.len()), values);

    // without a client certificate: no metadata, ever
    let refused: BaseConsumer = b.rdkafka(false).create().expect("consumer");
    let r = refused.fetch_metadata(Some("tls-rd"), Duration::from_secs(5));
    assert!(r.is_err(), "served without a client certificate: {r:?}");
    assert!(b.process.stderr_tail().contains("TLS handshake failed"));
}

#[test]
fn kafka_python_over_ssl() {
    let b = SslBroker::start("required");
    let (ca, crt, key) = (b.path("ca.pem"), b.path("client.crt"), b.path("client.key"));
    run_python_check_with(
        &b.process,
        "tls_check.py",
        &["--cafile", &ca, "--certfile", &crt, "--keyfile", &key],
    );
    run_python_check_with(&b.process, "tls_check.py", &["--cafile", &ca, "--refused"]);
}

#[test]
fn kcat_over_ssl() {
    let Some(kcat) = tools::kcat() else {
        skip_or_fail("kcat (apt-get install kcat)");
        return;
    };
    let b = SslBroker::start("requested");
    let ssl = [
        "-X".to_string(),
        "security.protocol=SSL".to_string(),
        "-X".to_string(),
        format!("ssl.ca.location={}", b.path("ca.pem")),
    ];
    let run = |args: &[&str], stdin: Option<&[u8]>| {
        let mut cmd = std::process::Command::new(&kcat);
        cmd.arg("-b")
            .arg(b.process.bootstrap())
            .args(&ssl)
            .args(args);
        let out = run_with_timeout(&mut cmd, stdin, client_timeout()).expect("kcat spawns");
        assert!(
            out.success(),
            "{}\n--- weir stderr (tail) ---\n{}",
            out.describe("kcat"),
            b.process.stderr_tail()
        );
        out.stdout
    };
    let input: String = (0..300).map(|i| format!("kcat-{i}\n")).collect();
    run(&["-P", "-t", "tls-kcat", "-p", "0"], Some(input.as_bytes()));
    let out = run(
        &[
            "-C",
            "-t",
            "tls-kcat",
            "-p",
            "0",
            "-o",
            "beginning",
            "-c",
            "300",
            "-e",
        ],
        None,
    );
    assert_eq!(out, input);
}

/// The certificate a new TLS connection to `addr` is served.
fn served_certificate(addr: SocketAddr, pki: &TestPki) -> (Vec<u8>, String) {
    use std::io::Write;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der().to_vec().into()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    // an ApiVersions v0 request: the handshake completes on the write
    tls.write_all(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0])
        .unwrap();
    tls.flush().unwrap();
    let cert = tls.conn.peer_certificates().unwrap()[0].to_vec();
    use x509_parser::prelude::FromDer;
    let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(&cert).unwrap();
    (parsed.raw_serial().to_vec(), parsed.subject().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_keystore_is_served_to_new_connections() {
    let b = SslBroker::start("none");
    let addr: SocketAddr = b.process.bootstrap().parse().unwrap();
    let (serial, subject) = served_certificate(addr, &b.pki);
    assert_eq!(serial, vec![1]);
    assert!(subject.contains("weir-broker-1"), "{subject}");

    let next: Issued = b.pki.server("weir-broker-2", 2);
    let keystore = PathBuf::from(b.path("broker.pem"));
    let tmp = write(b.dir.path(), "broker.pem.tmp", next.keystore_pem());
    std::fs::rename(tmp, &keystore).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let (serial, subject) = served_certificate(addr, &b.pki);
        if serial == vec![2] {
            assert!(subject.contains("weir-broker-2"), "{subject}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still serving serial {serial:?} 30 s after the keystore was replaced\n{}",
            b.process.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // librdkafka connects and works with the new certificate
    let values: Vec<String> = (0..10).map(|i| format!("after-reload-{i}")).collect();
    produce(&b.rdkafka(false), "tls-reload", &values).await;
    assert_eq!(consume(&b.rdkafka(false), "tls-reload", 10), values);
}
