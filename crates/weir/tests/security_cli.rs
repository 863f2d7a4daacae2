//! The client commands over TLS and SASL, set up with `--command-config`
//! as Kafka's tools are: `topics create/list`, `produce` and `consume`
//! against a real `weir serve` with an SSL listener that requires a client
//! certificate, a SASL_PLAINTEXT listener with PLAIN, and a SASL_SSL
//! listener with SCRAM-SHA-512; a wrong password, a missing client
//! certificate, an untrusted broker certificate and a mechanism the broker
//! does not offer each end the command with one readable line.

use crate::common;

use std::path::PathBuf;

use common::{Broker, Output};
use weir_test_support::pki::TestPki;

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_alice=\"alice-secret\";";
const SCRAM_JAAS: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
     user_carol=\"carol-secret\";";

/// Writes `text` to `name` in the broker's temporary directory.
fn file(b: &Broker, name: &str, text: &str) -> String {
    let path: PathBuf = b.dir().join(name);
    std::fs::write(&path, text).expect("write file");
    path.display().to_string()
}

/// `--set` pairs for `weir serve`.
fn sets(pairs: &[String]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|kv| ["--set".to_string(), kv.clone()])
        .collect()
}

fn start(pairs: &[String]) -> Broker {
    let args = sets(pairs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start_with(&args)
}

/// The broker's keystore and truststore, written before it starts (in a
/// directory of their own: the broker's exists only once it runs).
struct BrokerStores {
    _dir: tempfile::TempDir,
    keystore: String,
    truststore: String,
}

fn broker_stores(pki: &TestPki) -> BrokerStores {
    let dir = tempfile::tempdir().expect("tempdir");
    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, pki.server("weir-broker-1", 1).keystore_pem()).expect("keystore");
    let truststore = dir.path().join("ca.pem");
    std::fs::write(&truststore, pki.ca_pem()).expect("ca");
    BrokerStores {
        keystore: keystore.display().to_string(),
        truststore: truststore.display().to_string(),
        _dir: dir,
    }
}

/// Creates a topic, lists it, produces two records and consumes them, all
/// with `config` (and `bootstrap` for --bootstrap-server when given).
fn round_trip(b: &Broker, config: &str, topic: &str, bootstrap: Option<&str>) {
    let ok = |what: &str, out: Output| {
        assert_eq!(out.code, 0, "{what}: {}", out.stderr);
        assert_eq!(out.stderr, "", "{what}");
        out.stdout
    };
    let mut cc = vec!["--command-config", config];
    if let Some(bootstrap) = bootstrap {
        cc.extend(["--bootstrap-server", bootstrap]);
    }
    ok(
        "topics create",
        b.run(&[&["topics", "create", "--topic", topic][..], &cc].concat()),
    );
    let listed = ok(
        "topics list",
        b.run(&[&["topics", "list"][..], &cc].concat()),
    );
    assert!(listed.lines().any(|l| l == topic), "{listed}");
    ok(
        "produce",
        b.run_stdin(
            &[&["produce", "--topic", topic][..], &cc].concat(),
            "one\ntwo\n",
        ),
    );
    let consumed = ok(
        "consume",
        b.run(
            &[
                &[
                    "consume",
                    "--topic",
                    topic,
                    "--from-beginning",
                    "--max-messages",
                    "2",
                ][..],
                &cc,
            ]
            .concat(),
        ),
    );
    assert_eq!(consumed, "one\ntwo\n");
}

/// A failed `topics list` with `config`: status 1, one line on stderr,
/// which is returned.
fn refused(b: &Broker, config: &str) -> String {
    let out = b.run(&["topics", "list", "--command-config", config]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    out.stderr
}

#[test]
fn ssl_with_the_test_ca_and_a_client_certificate() {
    let pki = TestPki::new();
    let stores = broker_stores(&pki);
    let b = start(&[
        "listeners=SSL://127.0.0.1:0".into(),
        format!("ssl.keystore.location={}", stores.keystore),
        format!("ssl.truststore.location={}", stores.truststore),
        "ssl.client.auth=required".into(),
    ]);
    let ca = file(&b, "ca.pem", pki.ca_pem());
    let me = file(
        &b,
        "client.pem",
        &pki.client("alice", Some("apps")).keystore_pem(),
    );
    let config = file(
        &b,
        "ssl.properties",
        &format!(
            "security.protocol=SSL\nssl.truststore.location={ca}\nssl.truststore.type=PEM\n\
             ssl.keystore.location={me}\n"
        ),
    );
    round_trip(&b, &config, "over-tls", None);

    // The inline forms, and no host name check (the chain still is).
    let client = pki.client("alice", None);
    let inline = file(
        &b,
        "inline.properties",
        &format!(
            "security.protocol=SSL\nssl.endpoint.identification.algorithm=\n\
             ssl.truststore.certificates={}\nssl.keystore.certificate.chain={}\n\
             ssl.keystore.key={}\n",
            escape_lines(pki.ca_pem()),
            escape_lines(&client.chain_pem()),
            escape_lines(&client.key_pem)
        ),
    );
    let out = b.run(&["topics", "list", "--command-config", &inline]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{}", out.stderr);
    assert!(
        out.stdout.lines().any(|l| l == "over-tls"),
        "{}",
        out.stdout
    );

    // No client certificate: the broker requires one.
    let no_cert = file(
        &b,
        "no-cert.properties",
        &format!("security.protocol=SSL\nssl.truststore.location={ca}\n"),
    );
    let e = refused(&b, &no_cert);
    assert!(
        e.starts_with(&format!("error: TLS handshake with {} failed: ", b.addr)),
        "{e}"
    );
    assert!(e.contains("set ssl.keystore.location"), "{e}");

    // A truststore of another CA: the broker's certificate is not trusted.
    let other_ca = file(&b, "other-ca.pem", TestPki::new().ca_pem());
    let wrong_ca = file(
        &b,
        "wrong-ca.properties",
        &format!(
            "security.protocol=SSL\nssl.truststore.location={other_ca}\nssl.keystore.location={me}\n"
        ),
    );
    let e = refused(&b, &wrong_ca);
    assert!(
        e.starts_with(&format!("error: TLS handshake with {} failed: ", b.addr)),
        "{e}"
    );
    assert!(e.contains("invalid peer certificate"), "{e}");
    assert!(e.contains("check ssl.truststore.location"), "{e}");

    // PLAINTEXT against the SSL listener says what is wrong.
    let e = refused(&b, &file(&b, "plain.properties", "client.id=x\n"));
    assert_eq!(
        e,
        format!(
            "error: {} answered with TLS: it is an SSL or SASL_SSL listener (set \
             security.protocol to match)\n",
            b.addr
        )
    );
}

/// A PEM text as one properties line (`\n` escapes).
fn escape_lines(pem: &str) -> String {
    pem.trim_end().replace('\n', "\\n")
}

#[test]
fn sasl_plaintext_with_plain() {
    let b = start(&[
        "listeners=SASL_PLAINTEXT://127.0.0.1:0".into(),
        "sasl.enabled.mechanisms=PLAIN".into(),
        format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"),
    ]);
    let config = file(
        &b,
        "plain.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n\
         \x20   username=\"alice\" password=\"alice-secret\";\n",
    );
    round_trip(&b, &config, "over-sasl", None);

    // librdkafka's names for the credentials.
    let rd = file(
        &b,
        "rd.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.username=alice\nsasl.password=alice-secret\n",
    );
    let out = b.run(&["topics", "list", "--command-config", &rd]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "over-sasl\n"),
        "{}",
        out.stderr
    );

    let wrong = file(
        &b,
        "wrong.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.username=alice\nsasl.password=guess\n",
    );
    let e = refused(&b, &wrong);
    assert_eq!(
        e,
        format!(
            "error: SASL authentication with PLAIN at {} failed: Authentication failed: \
             Invalid username or password\n",
            b.addr
        )
    );
    assert!(!e.contains("guess"), "{e}");

    let scram = file(
        &b,
        "scram.properties",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n\
         sasl.username=alice\nsasl.password=alice-secret\n",
    );
    let e = refused(&b, &scram);
    assert_eq!(
        e,
        format!(
            "error: {} does not offer SASL mechanism SCRAM-SHA-256 (it offers: PLAIN)\n",
            b.addr
        )
    );

    // Without security.protocol the broker closes the connection before
    // answering anything but ApiVersions and SASL.
    let plain = file(&b, "none.properties", "client.id=x\n");
    let out = b.run(&["topics", "list", "--command-config", &plain]);
    assert_eq!(out.code, 1, "{}", out.stdout);
}

#[test]
fn sasl_ssl_with_scram_sha_512() {
    let pki = TestPki::new();
    let stores = broker_stores(&pki);
    let b = start(&[
        "listeners=SASL_SSL://127.0.0.1:0".into(),
        format!("ssl.keystore.location={}", stores.keystore),
        "sasl.enabled.mechanisms=SCRAM-SHA-512".into(),
        format!("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}"),
    ]);
    let ca = file(&b, "ca.pem", pki.ca_pem());
    let with_password = |name: &str, password: &str| {
        file(
            &b,
            name,
            &format!(
                "security.protocol=SASL_SSL\nssl.truststore.location={ca}\n\
                 sasl.mechanism=SCRAM-SHA-512\n\
                 sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \
                 required username=\"carol\" password=\"{password}\";\n"
            ),
        )
    };
    // Bootstrapping through "localhost", the commands reach the broker a
    // second time at the address it advertises (127.0.0.1): that
    // connection authenticates too.
    let port = b.addr.rsplit_once(':').expect("host:port").1;
    round_trip(
        &b,
        &with_password("ok.properties", "carol-secret"),
        "over-sasl-ssl",
        Some(&format!("localhost:{port}")),
    );

    let e = refused(&b, &with_password("wrong.properties", "not-carols"));
    assert_eq!(
        e,
        format!(
            "error: SASL authentication with SCRAM-SHA-512 at {} failed: Authentication \
             failed: Invalid username or password\n",
            b.addr
        )
    );
    assert!(!e.contains("not-carols"), "{e}");
}

#[test]
fn security_values_weir_does_not_speak_are_refused_by_name() {
    let b = Broker::start();
    for (text, named) in [
        (
            "security.protocol=KERBEROS\n",
            "security.protocol=KERBEROS: not supported",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n",
            "sasl.mechanism=GSSAPI: not supported",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n",
            "sasl.jaas.config: not set",
        ),
        (
            "security.protocol=SSL\nssl.truststore.type=JKS\n",
            "ssl.truststore.type=JKS: JKS stores are not supported",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n",
            "ssl.truststore.location /nonexistent/ca.pem: cannot read it",
        ),
    ] {
        let path = file(&b, "secure.properties", text);
        for args in [
            vec!["topics", "list", "--command-config", &path],
            vec!["groups", "list", "--command-config", &path],
            vec!["consume", "--topic", "t", "--command-config", &path],
        ] {
            let out = b.run(&args);
            assert_eq!(out.code, 1, "{args:?}");
            assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
            assert!(
                out.stderr.starts_with(&format!("error: {path}: {named}")),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
    // ssl.* without TLS is said to be ignored; the command goes on.
    let path = file(&b, "forgot.properties", "ssl.truststore.location=/ca.pem\n");
    let out = b.run(&["topics", "list", "--command-config", &path]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "warning: the configuration 'ssl.truststore.location' is ignored: \
         security.protocol=PLAINTEXT does not use TLS\n"
    );
}
