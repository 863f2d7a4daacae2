//! SSL listeners in process: a PLAINTEXT and an SSL listener on one broker
//! (Metadata answers each with its own address), PEM and PKCS#12 stores,
//! client certificates (required, requested, the principal from the DN),
//! fetches over TLS (the copy path), readable start-up errors for bad
//! stores, and certificate reload when the files change.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_test_support::pki::{Issued, TestPki, pkcs12_truststore};

use crate::common::*;

/// A TLS client configuration trusting the test CA, with a client
/// certificate when given.
fn client_config(pki: &TestPki, cert: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            pki.ca_der().to_vec(),
        ))
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match cert {
        None => builder.with_no_client_auth(),
        Some(c) => builder
            .with_client_auth_cert(
                vec![c.cert_der.clone().into(), pki.ca_der().to_vec().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(c.key_der.clone().into()),
            )
            .unwrap(),
    };
    Arc::new(config)
}

fn write(dir: &Path, name: &str, data: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path.display().to_string()
}

async fn start_with(dir: &Path, pairs: &[(&str, String)]) -> Result<RunningBroker, String> {
    let mut s = ConfigSources::default();
    s.set("log.dirs", &dir.join("data").display().to_string());
    s.set("http.listeners", "");
    for (k, v) in pairs {
        s.set(k, v);
    }
    let config = s.build().map_err(|e| e.to_string())?;
    start(config).await.map_err(|e| e.to_string())
}

fn two_listeners(keystore: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0".to_string(),
        ),
        ("ssl.keystore.location", keystore.to_string()),
    ]
}

fn serial_of(cert: &[u8]) -> Vec<u8> {
    use x509_parser::prelude::FromDer;
    let (_, c) = x509_parser::certificate::X509Certificate::from_der(cert).unwrap();
    c.raw_serial().to_vec()
}

/// Whether a request on `c` is answered (false: the broker closed it).
async fn answers(c: &mut Client) -> bool {
    let corr = c
        .send_only(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await;
    match tokio::time::timeout(Duration::from_secs(20), c.read_frame()).await {
        Ok(Some(frame)) => {
            let (h, _) = decode_response(frame, ApiKey::ApiVersions, 3).unwrap();
            h.correlation_id == corr
        }
        Ok(None) => false,
        Err(_) => panic!("no answer and no close within 20 s"),
    }
}

#[tokio::test]
async fn plaintext_and_ssl_listeners_each_advertise_their_own_address() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "broker.pem",
        pki.server("broker", 1).keystore_pem(),
    );
    let b = start_with(dir.path(), &two_listeners(&ks)).await.unwrap();
    let plain_addr = b.listener_addr("PLAINTEXT").unwrap();
    let ssl_addr = b.listener_addr("ssl").unwrap();
    assert_ne!(plain_addr, ssl_addr);

    let mut plain = Client::connect(plain_addr).await;
    let m = metadata(&mut plain, None, false).await;
    assert_eq!(m.brokers[0].port, i32::from(plain_addr.port()));

    let (mut tls, cert) = Client::connect_tls(ssl_addr, client_config(&pki, None))
        .await
        .unwrap();
    assert_eq!(serial_of(&cert), vec![1]);
    let m = metadata(&mut tls, None, false).await;
    assert_eq!(m.brokers[0].port, i32::from(ssl_addr.port()));
    assert_eq!(m.brokers[0].host, "127.0.0.1");
    // every answer that names a broker names it on the client's listener
    let find = RequestBody::FindCoordinator(FindCoordinatorRequest {
        key_type: 0,
        coordinator_keys: vec!["g".into()],
        ..Default::default()
    });
    for (c, addr) in [(&mut plain, plain_addr), (&mut tls, ssl_addr)] {
        match c.call(find.clone(), 4).await {
            ResponseBody::FindCoordinator(r) => {
                assert_eq!(r.coordinators[0].error_code, NONE);
                assert_eq!(r.coordinators[0].port, i32::from(addr.port()));
            }
            other => panic!("{other:?}"),
        }
        let describe = RequestBody::DescribeCluster(DescribeClusterRequest::default());
        match c.call(describe, 1).await {
            ResponseBody::DescribeCluster(r) => {
                assert_eq!(r.brokers[0].port, i32::from(addr.port()))
            }
            other => panic!("{other:?}"),
        }
    }

    // a plaintext client on the TLS port gets at most a TLS alert, then
    // the connection closes
    let mut wrong = Client::connect(ssl_addr).await;
    wrong
        .send_only(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), wrong.stream.read_to_end(&mut got))
        .await
        .expect("closed within 20 s")
        .ok();
    assert!(
        got.first().is_none_or(|b| *b == 0x15),
        "a plaintext request on the SSL listener got {got:?}"
    );
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn records_produced_over_plaintext_are_fetched_over_tls_whole() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "broker.pem",
        pki.server("broker", 1).keystore_pem(),
    );
    let mut pairs = two_listeners(&ks);
    // every fetch takes the file path (sendfile on PLAINTEXT, the copy
    // path on SSL), none the small-response inline path
    pairs.push(("fetch.inline.max.bytes", "0".into()));
    let b = start_with(dir.path(), &pairs).await.unwrap();
    let mut plain = Client::connect(b.listener_addr("PLAINTEXT").unwrap()).await;
    assert_eq!(create_topic(&mut plain, "t", 1, &[]).await, NONE);
    let big = "x".repeat(100_000);
    let mut expected = Vec::new();
    for i in 0..20 {
        let values = [format!("{i}-{big}"), format!("small-{i}")];
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let (err, _) = produce(&mut plain, "t", 0, batch(&refs, 1), 1).await;
        assert_eq!(err, NONE);
        expected.extend(values);
    }
    let (mut tls, _) =
        Client::connect_tls(b.listener_addr("SSL").unwrap(), client_config(&pki, None))
            .await
            .unwrap();
    let id = metadata(&mut tls, Some(vec!["t"]), false).await.topics[0].topic_id;
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let (err, _, values) = fetch(&mut tls, 13, "t", id, got.len() as i64, 100).await;
        assert_eq!(err, NONE);
        assert!(!values.is_empty());
        got.extend(values.into_iter().map(|(_, v)| v));
    }
    assert_eq!(got, expected);
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn pkcs12_stores_and_required_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "broker.p12",
        pki.server("broker", 5).pkcs12("ks-pass"),
    );
    let ts = write(
        dir.path(),
        "trust.p12",
        pkcs12_truststore(pki.ca_der(), "ts-pass"),
    );
    let pairs = vec![
        ("listeners", "SSL://127.0.0.1:0".to_string()),
        ("ssl.keystore.type", "PKCS12".into()),
        ("ssl.keystore.location", ks),
        ("ssl.keystore.password", "ks-pass".into()),
        ("ssl.truststore.type", "PKCS12".into()),
        ("ssl.truststore.location", ts),
        ("ssl.truststore.password", "ts-pass".into()),
        ("ssl.client.auth", "required".into()),
    ];
    let b = start_with(dir.path(), &pairs).await.unwrap();
    let addr = b.local_addr;
    let alice = pki.client("alice", None);
    let (mut c, cert) = Client::connect_tls(addr, client_config(&pki, Some(&alice)))
        .await
        .unwrap();
    assert_eq!(serial_of(&cert), vec![5]);
    assert!(answers(&mut c).await);

    // without a client certificate: refused (in TLS 1.3 the client learns
    // it after its side of the handshake, at its first read)
    match Client::connect_tls(addr, client_config(&pki, None)).await {
        Err(_) => {}
        Ok((mut c, _)) => assert!(!answers(&mut c).await, "served without a certificate"),
    }
    // a certificate from another CA: refused too
    let other = TestPki::new().client("mallory", None);
    match Client::connect_tls(addr, client_config(&pki, Some(&other))).await {
        Err(_) => {}
        Ok((mut c, _)) => assert!(!answers(&mut c).await, "served a foreign certificate"),
    }
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn principal_mapping_rules_refuse_a_client_no_rule_applies_to() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "broker.pem",
        pki.server("broker", 1).keystore_pem(),
    );
    let pairs = vec![
        ("listeners", "SSL://127.0.0.1:0".to_string()),
        ("ssl.keystore.location", ks),
        ("ssl.truststore.certificates", pki.ca_pem().to_string()),
        ("ssl.client.auth", "requested".into()),
        // only service users are mapped; there is no DEFAULT
        (
            "ssl.principal.mapping.rules",
            "RULE:^CN=([a-z]+),OU=services,O=weir$/$1/U".into(),
        ),
    ];
    let b = start_with(dir.path(), &pairs).await.unwrap();
    let service = pki.client("billing", Some("services"));
    let (mut c, _) = Client::connect_tls(b.local_addr, client_config(&pki, Some(&service)))
        .await
        .unwrap();
    assert!(answers(&mut c).await);
    // no certificate: requested, not required, so ANONYMOUS is served
    let (mut c, _) = Client::connect_tls(b.local_addr, client_config(&pki, None))
        .await
        .unwrap();
    assert!(answers(&mut c).await);
    // a certificate whose DN no rule maps
    let person = pki.client("bob", Some("people"));
    let refused = match Client::connect_tls(b.local_addr, client_config(&pki, Some(&person))).await
    {
        Err(_) => true,
        Ok((mut c, _)) => !answers(&mut c).await,
    };
    assert!(refused, "a client no mapping rule applies to was served");
    b.shutdown().await.unwrap();
}

#[test]
fn principals_come_from_the_certificate_dn_through_the_rules() {
    use weir_broker::tls::{ListenerTls, TlsSettings};
    let pki = TestPki::new();
    let server = pki.server("broker", 1);
    let settings = |rules: &str| {
        let chain = server.chain_pem();
        let key = server.key_pem.clone();
        let ca = pki.ca_pem().to_string();
        let rules = rules.to_string();
        TlsSettings::parse("SSL", &move |name| {
            let v = match name {
                "ssl.keystore.certificate.chain" => chain.clone(),
                "ssl.keystore.key" => key.clone(),
                "ssl.truststore.certificates" => ca.clone(),
                "ssl.client.auth" => "requested".into(),
                "ssl.principal.mapping.rules" => rules.clone(),
                _ => return None,
            };
            Some((name.to_string(), v))
        })
        .unwrap()
    };
    // one in-memory handshake; the server side's principal
    let principal = |tls: &ListenerTls, client: Option<&Issued>| {
        let mut server = rustls::ServerConnection::new(tls.acceptor().config().clone()).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(client_config(&pki, client), name).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
            }
            server.process_new_packets().unwrap();
            let mut buf = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).unwrap();
            }
            client.process_new_packets().unwrap();
        }
        assert!(!server.is_handshaking());
        tls.principal(&server).map(|p| p.to_string())
    };
    let alice = pki.client("alice", Some("people"));
    let default = ListenerTls::load(settings("DEFAULT")).unwrap();
    assert_eq!(
        principal(&default, Some(&alice)).unwrap(),
        "User:CN=alice,OU=people,O=weir"
    );
    assert_eq!(principal(&default, None).unwrap(), "User:ANONYMOUS");
    let mapped = ListenerTls::load(settings("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U")).unwrap();
    assert_eq!(
        principal(&mapped, Some(&alice)).unwrap(),
        "User:ALICE@PEOPLE"
    );
    let strict = ListenerTls::load(settings("RULE:^CN=x$/x/")).unwrap();
    assert!(
        principal(&strict, Some(&alice))
            .unwrap_err()
            .contains("CN=alice,OU=people,O=weir")
    );
}

#[tokio::test]
async fn bad_stores_are_readable_start_up_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server = pki.server("broker", 1);
    let p12 = write(dir.path(), "broker.p12", server.pkcs12("right"));
    let cert_only = write(dir.path(), "cert.pem", &server.cert_pem);
    let other_key = write(
        dir.path(),
        "mismatch.pem",
        server.chain_pem() + &pki.client("x", None).key_pem,
    );
    let missing = dir.path().join("missing.pem").display().to_string();
    let ssl = |extra: Vec<(&'static str, String)>| {
        let mut v = vec![("listeners", "SSL://127.0.0.1:0".to_string())];
        v.extend(extra);
        v
    };
    for (pairs, words) in [
        (
            ssl(vec![("ssl.keystore.location", missing.clone())]),
            vec!["ssl.keystore.location", "missing.pem", "cannot read"],
        ),
        (
            ssl(vec![
                ("ssl.keystore.location", p12.clone()),
                ("ssl.keystore.password", "wrong".into()),
            ]),
            vec!["ssl.keystore.location", "broker.p12", "wrong password"],
        ),
        (
            ssl(vec![("ssl.keystore.location", cert_only)]),
            vec!["cert.pem", "no PRIVATE KEY"],
        ),
        (
            ssl(vec![("ssl.keystore.location", other_key)]),
            vec!["ssl.keystore", "do not fit"],
        ),
        (
            ssl(vec![
                ("ssl.keystore.location", p12.clone()),
                ("ssl.keystore.password", "right".into()),
                ("ssl.truststore.location", missing.clone()),
                ("ssl.client.auth", "required".into()),
            ]),
            vec!["ssl.truststore.location", "cannot read"],
        ),
        (ssl(vec![]), vec!["needs a keystore"]),
    ] {
        let e = match start_with(dir.path(), &pairs).await {
            Ok(b) => {
                b.shutdown().await.unwrap();
                panic!("{pairs:?} started")
            }
            Err(e) => e,
        };
        for w in &words {
            assert!(e.contains(w), "{pairs:?}: {e}");
        }
        assert!(!e.contains('\n'), "{e}");
    }
}

#[tokio::test]
async fn a_changed_keystore_is_used_by_new_connections() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "broker.pem",
        pki.server("broker-1", 1).keystore_pem(),
    );
    let pairs = vec![
        ("listeners", "SSL://127.0.0.1:0".to_string()),
        ("ssl.keystore.location", ks.clone()),
    ];
    let b = start_with(dir.path(), &pairs).await.unwrap();
    let config = client_config(&pki, None);
    let (mut old, cert) = Client::connect_tls(b.local_addr, config.clone())
        .await
        .unwrap();
    assert_eq!(serial_of(&cert), vec![1]);
    // replaced as deployment tools do: written aside, renamed over it
    let tmp = write(
        dir.path(),
        "broker.pem.new",
        pki.server("broker-2", 2).keystore_pem(),
    );
    std::fs::rename(&tmp, PathBuf::from(&ks)).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (mut c, cert) = Client::connect_tls(b.local_addr, config.clone())
            .await
            .unwrap();
        if serial_of(&cert) == vec![2] {
            assert!(answers(&mut c).await);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate was not served within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // the open connection keeps working
    assert!(answers(&mut old).await);
    b.shutdown().await.unwrap();
}

#[test]
fn a_broken_replacement_keeps_the_current_certificate() {
    use weir_broker::tls::{KeyStoreSource, ListenerTls, TlsSettings};
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(dir.path(), "k.pem", pki.server("b", 1).keystore_pem());
    let settings = TlsSettings::parse("SSL", &|name| {
        (name == "ssl.keystore.location").then(|| (name.to_string(), ks.clone()))
    })
    .unwrap();
    assert!(matches!(settings.keystore, KeyStoreSource::File { .. }));
    let tls = ListenerTls::load(settings).unwrap();
    let served = |tls: &ListenerTls| {
        let config = tls.acceptor();
        let key = config.config().cert_resolver.clone();
        format!("{key:?}")
    };
    let before = served(&tls);
    assert!(!tls.reload_if_changed().unwrap(), "nothing changed yet");
    std::fs::write(&ks, "not a keystore").unwrap();
    let e = tls.reload_if_changed().unwrap_err().to_string();
    assert!(e.contains("k.pem"), "{e}");
    assert_eq!(served(&tls), before);
    // the same broken file is not tried again; a good one is
    assert!(!tls.reload_if_changed().unwrap());
    write(dir.path(), "k.pem", pki.server("b", 3).keystore_pem());
    assert!(tls.reload_if_changed().unwrap());
}
