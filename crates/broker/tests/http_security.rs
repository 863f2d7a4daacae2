//! The HTTP listener's protection: `/metrics` and the console over HTTPS
//! (PEM and PKCS#12 keystores, a client trusting the test CA; plain HTTP
//! on the HTTPS port fails; a replaced keystore is served to new
//! connections), basic authentication (no, wrong and right credentials on
//! the console and `/metrics`, failures counted, `/metrics` exempted on
//! request, the users file reloaded), and the start refused for an address
//! other than loopback without TLS or authentication.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use prometheus_parse::Scrape;
use weir_broker::http::basic_auth::{CHALLENGE, MIN_ITERATIONS, PasswordHash};
use weir_test_support::pki::TestPki;

use crate::common::*;

type Answer = (u16, Vec<(String, String)>, Vec<u8>);

fn write(dir: &Path, name: &str, data: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path.display().to_string()
}

/// A users file line for `name` with `password` (the cheapest allowed
/// hash: the tests check who gets in, not the cost).
fn user(name: &str, password: &str) -> String {
    format!(
        "{name}:{}\n",
        PasswordHash::generate(password, MIN_ITERATIONS)
    )
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

async fn start_with(dir: &Path, pairs: &[(&str, &str)]) -> Result<RunningBroker, String> {
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.join("data").display().to_string());
    for (k, v) in pairs {
        s.set(k, v);
    }
    let config = s.build().map_err(|e| e.to_string())?;
    start(config).await.map_err(|e| e.to_string())
}

/// A TLS client configuration trusting the test CA only.
fn trusting(pki: &TestPki) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            pki.ca_der().to_vec(),
        ))
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    Arc::new(config)
}

fn request(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// Sends `req` on `s` and reads the whole answer; None when the server
/// closed without an HTTP answer.
async fn exchange<S>(mut s: S, req: &[u8]) -> Option<Answer>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    s.write_all(req).await.ok()?;
    let mut buf = Vec::new();
    // a TLS peer may close without close_notify: keep what was read
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("an answer or a close within 20 s");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()?
        .strip_prefix("HTTP/1.1 ")?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some((status, headers, buf[end + 4..].to_vec()))
}

async fn http(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    let s = TcpStream::connect(addr).await.unwrap();
    exchange(s, &request("GET", path, headers))
        .await
        .expect("an HTTP answer")
}

/// An HTTPS exchange; also the serial number of the served certificate.
async fn https(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
    path: &str,
    headers: &[(&str, &str)],
) -> (Answer, Vec<u8>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let s = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .expect("TLS handshake with a client trusting the test CA");
    let serial = {
        use x509_parser::prelude::FromDer;
        let der = s.get_ref().1.peer_certificates().unwrap()[0].clone();
        let (_, c) = x509_parser::certificate::X509Certificate::from_der(&der).unwrap();
        c.raw_serial().to_vec()
    };
    let answer = exchange(s, &request("GET", path, headers))
        .await
        .expect("an HTTPS answer");
    (answer, serial)
}

fn header<'a>(a: &'a Answer, name: &str) -> Option<&'a str> {
    a.1.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn scrape_value(body: &[u8], name: &str) -> f64 {
    let text = String::from_utf8_lossy(body);
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let s = scrape
        .samples
        .iter()
        .find(|s| s.metric == name)
        .unwrap_or_else(|| panic!("{name} is not exported"));
    match s.value {
        prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
        _ => panic!("{name} is not a number"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_over_https_with_a_pem_keystore_and_plain_http_fails_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "http.pem",
        pki.server("broker-1", 1).keystore_pem(),
    );
    let b = start_with(
        dir.path(),
        &[
            ("http.listeners", "https://127.0.0.1:0"),
            ("http.ssl.keystore.location", &ks),
        ],
    )
    .await
    .unwrap();
    let addr = b.http_addr().unwrap();
    let tls = trusting(&pki);

    let ((status, _, body), serial) = https(addr, &tls, "/metrics", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(serial, vec![1]);
    assert!(scrape_value(&body, "weir_http_requests_total") >= 1.0);
    let ((status, _, body), _) = https(addr, &tls, "/", &[]).await;
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("/console/app.js"));

    // plain HTTP on the HTTPS port gets no HTTP answer
    let s = TcpStream::connect(addr).await.unwrap();
    assert_eq!(exchange(s, &request("GET", "/metrics", &[])).await, None);

    // a client that does not trust the CA is refused by its own check
    let other = trusting(&TestPki::new());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    assert!(
        tokio_rustls::TlsConnector::from(other)
            .connect(name, tcp)
            .await
            .is_err()
    );

    // replaced as deployment tools do: new connections get the new one
    let tmp = write(
        dir.path(),
        "http.pem.new",
        pki.server("broker-2", 2).keystore_pem(),
    );
    std::fs::rename(&tmp, PathBuf::from(&ks)).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ((status, _, _), serial) = https(addr, &tls, "/metrics", &[]).await;
        assert_eq!(status, 200);
        if serial == vec![2] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new HTTP certificate was not served within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_pkcs12_keystore_and_basic_auth_on_all_interfaces() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(
        dir.path(),
        "http.p12",
        pki.server("broker", 7).pkcs12("changeit"),
    );
    let users = write(dir.path(), "users", user("ops", "s3cret"));
    let b = start_with(
        dir.path(),
        &[
            ("http.listeners", "https://0.0.0.0:0"),
            ("http.ssl.keystore.location", &ks),
            ("http.ssl.keystore.type", "PKCS12"),
            ("http.ssl.keystore.password", "changeit"),
            ("http.basic.auth.file", &users),
        ],
    )
    .await
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", b.http_addr().unwrap().port())
        .parse()
        .unwrap();
    let tls = trusting(&pki);
    let right = basic("ops", "s3cret");
    let ((status, _, _), serial) = https(addr, &tls, "/", &[]).await;
    assert_eq!((status, serial), (401, vec![7]));
    let ((status, _, body), _) = https(addr, &tls, "/", &[("Authorization", &right)]).await;
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("/console/app.js"));
    let ((status, _, _), _) = https(addr, &tls, "/metrics", &[("Authorization", &right)]).await;
    assert_eq!(status, 200);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_guards_the_console_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let users = write(
        dir.path(),
        "users",
        format!(
            "# console users\n{}{}",
            user("alice", "wonder"),
            user("bob", "builder")
        ),
    );
    let b = start_with(
        dir.path(),
        &[
            ("http.listeners", "127.0.0.1:0"),
            ("http.basic.auth.file", &users),
        ],
    )
    .await
    .unwrap();
    let addr = b.http_addr().unwrap();
    let right = basic("alice", "wonder");
    let wrong_refusals = [
        basic("alice", "builder"),
        basic("carol", "wonder"),
        basic("alice", ""),
        "Basic !!!".to_string(),
        "Bearer abc".to_string(),
    ];
    for path in ["/", "/console/app.js", "/api/topics", "/metrics", "/nope"] {
        let a = http(addr, path, &[]).await;
        assert_eq!(a.0, 401, "{path} without credentials");
        assert_eq!(header(&a, "www-authenticate"), Some(CHALLENGE), "{path}");
        assert_eq!(a.2, b"unauthorized\n", "{path}: no details");
        for wrong in &wrong_refusals {
            let a = http(addr, path, &[("Authorization", wrong)]).await;
            assert_eq!(a.0, 401, "{path} with {wrong}");
            assert_eq!(header(&a, "www-authenticate"), Some(CHALLENGE));
        }
        // two Authorization headers, one of them right, are not let in
        let a = http(
            addr,
            path,
            &[
                ("Authorization", &right),
                ("Authorization", &wrong_refusals[0]),
            ],
        )
        .await;
        assert_eq!(a.0, 401, "{path} with two Authorization headers");
    }
    let a = http(addr, "/", &[("Authorization", &right)]).await;
    assert_eq!(a.0, 200);
    assert!(String::from_utf8_lossy(&a.2).contains("/console/app.js"));
    let a = http(addr, "/api/topics", &[("Authorization", &right)]).await;
    assert_eq!(a.0, 200);
    let bob = basic("bob", "builder");
    let a = http(addr, "/console/app.js", &[("Authorization", &bob)]).await;
    assert_eq!(a.0, 200);
    // a path neither serves is still a 404 once authenticated
    assert_eq!(
        http(addr, "/nope", &[("Authorization", &right)]).await.0,
        404
    );

    // every request that presented wrong credentials is counted (five
    // paths × (five wrong values + the doubled header)); those without
    // any are the browser's first request and are not
    let a = http(addr, "/metrics", &[("Authorization", &right)]).await;
    assert_eq!(a.0, 200);
    assert_eq!(scrape_value(&a.2, "weir_http_auth_failures_total"), 30.0);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_be_exempted_and_the_users_file_is_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let users = write(dir.path(), "users", user("alice", "wonder"));
    let b = start_with(
        dir.path(),
        &[
            ("http.listeners", "127.0.0.1:0"),
            ("http.basic.auth.file", &users),
            ("http.basic.auth.metrics", "false"),
        ],
    )
    .await
    .unwrap();
    let addr = b.http_addr().unwrap();
    assert_eq!(http(addr, "/metrics", &[]).await.0, 200);
    assert_eq!(http(addr, "/", &[]).await.0, 401);
    let old = basic("alice", "wonder");
    assert_eq!(http(addr, "/", &[("Authorization", &old)]).await.0, 200);

    // a new password: written aside and renamed over the file
    let tmp = write(dir.path(), "users.new", user("alice", "looking-glass"));
    std::fs::rename(&tmp, dir.path().join("users")).unwrap();
    let new = basic("alice", "looking-glass");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while http(addr, "/", &[("Authorization", &new)]).await.0 != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new users file was not in force within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(http(addr, "/", &[("Authorization", &old)]).await.0, 401);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_interfaces_without_tls_or_authentication_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for listener in ["0.0.0.0:0", "http://[::]:0"] {
        let e = start_with(dir.path(), &[("http.listeners", listener)])
            .await
            .err()
            .unwrap_or_else(|| panic!("{listener} started unprotected"));
        for words in [
            "http.listeners",
            "reachable from other hosts",
            "http.ssl.keystore.location",
            "http.basic.auth.file",
            "http.insecure.allow=true",
        ] {
            assert!(e.contains(words), "{listener}: {e}");
        }
    }
    // the explicit opt-out serves it
    let b = start_with(
        dir.path(),
        &[
            ("http.listeners", "0.0.0.0:0"),
            ("http.insecure.allow", "true"),
        ],
    )
    .await
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", b.http_addr().unwrap().port())
        .parse()
        .unwrap();
    assert!(b.http_addr().unwrap().ip().is_unspecified());
    assert_eq!(http(addr, "/metrics", &[]).await.0, 200);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keystores_and_users_files_are_readable_start_up_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ks = write(dir.path(), "ok.pem", pki.server("b", 1).keystore_pem());
    let garbage = write(dir.path(), "garbage.pem", "not a keystore");
    let plain_users = write(dir.path(), "plain-users", "alice:wonder\n");
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        (
            vec![("http.listeners", "https://127.0.0.1:0")],
            vec!["http.ssl.keystore.location", "needs a keystore"],
        ),
        (
            vec![
                ("http.listeners", "https://127.0.0.1:0"),
                ("http.ssl.keystore.location", &garbage),
            ],
            vec!["HTTP", "garbage.pem"],
        ),
        (
            vec![
                ("http.listeners", "127.0.0.1:0"),
                ("http.ssl.keystore.location", &ks),
            ],
            vec!["http.ssl.keystore.location", "https://"],
        ),
        (
            vec![
                ("http.listeners", "127.0.0.1:0"),
                ("http.basic.auth.file", "/nonexistent/users"),
            ],
            vec!["http.basic.auth.file", "/nonexistent/users"],
        ),
        (
            vec![
                ("http.listeners", "127.0.0.1:0"),
                ("http.basic.auth.file", &plain_users),
            ],
            vec!["http.basic.auth.file", "line 1", "$pbkdf2-sha256$"],
        ),
    ];
    for (pairs, words) in cases {
        let e = match start_with(dir.path(), &pairs).await {
            Ok(b) => {
                b.shutdown().await.unwrap();
                panic!("{pairs:?} started");
            }
            Err(e) => e,
        };
        for w in &words {
            assert!(e.contains(w), "{pairs:?}: {e}");
        }
        assert!(!e.contains("wonder"), "a password in the message: {e}");
    }
}
