//! The HTTP listener against DNS rebinding: raw requests with a `Host` that
//! does not name the broker get 421; the broker's own names (its listener
//! address, `localhost`, loopback IPs) and `http.allowed.hosts` get their
//! answers; every response carries the security headers.

use crate::common;

use common::*;

/// Status line, lower-cased header names with values, body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

async fn request(addr: SocketAddr, method: &str, path: &str, host: Option<&str>) -> Answer {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let host = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
    let req = format!("{method} {path} HTTP/1.1\r\n{host}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("an answer within 20 s")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

fn assert_secure(a: &Answer, what: &str) {
    let csp = a
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    assert!(csp.contains("default-src 'self'"), "{what}: {csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(a.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(
        a.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_hosts_are_refused_and_every_answer_has_security_headers() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("http.listeners", "127.0.0.1:0"),
            ("http.allowed.hosts", "console.example.com"),
        ],
    )
    .await;
    let http = b.http_addr().unwrap();
    let port = http.port();
    let paths = ["/", "/api/overview", "/metrics", "/console/app.js"];

    // a rebinding page: its own name, the broker's address
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_string(),
        format!("127.0.0.1.nip.io:{port}"),
        format!("localhost.evil.example:{port}"),
    ] {
        for path in paths {
            let a = request(http, "GET", path, Some(&host)).await;
            assert_eq!(a.status, 421, "{host} {path}: {}", a.body);
            assert!(a.body.contains("Host"), "{}", a.body);
            assert!(!a.body.contains("weir_"), "{host} {path}: data leaked");
            assert_secure(&a, &format!("421 for {host}{path}"));
        }
    }

    // the broker's own names, and the allowed one
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "console.example.com".to_string(),
    ] {
        for path in paths {
            let a = request(http, "GET", path, Some(&host)).await;
            assert_eq!(a.status, 200, "{host} {path}: {}", a.body);
            assert_secure(&a, &format!("{host}{path}"));
        }
    }
    // Prometheus-style scrape by address
    let a = request(http, "GET", "/metrics", Some(&http.to_string())).await;
    assert_eq!(a.status, 200);
    assert!(a.body.contains("weir_connections_open"));
    // errors carry the headers too
    let a = request(http, "GET", "/nope", Some(&http.to_string())).await;
    assert_eq!(a.status, 404);
    assert_secure(&a, "404");
    let a = request(http, "POST", "/metrics", Some(&http.to_string())).await;
    assert_eq!(a.status, 405);
    assert_secure(&a, "405");
    b.shutdown().await.unwrap();
}
