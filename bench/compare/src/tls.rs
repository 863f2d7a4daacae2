//! P10's SSL listener: a self-signed certificate for 127.0.0.1 made here
//! (rcgen), the broker's PEM keystore and the client's CA file, and a free
//! port for the listener.

use std::path::Path;

use anyhow::{Context, Result};

use crate::workloads::Settings;

/// The SSL listener as the harness uses it.
pub struct SslListener {
    /// The broker's `--set` values: a PLAINTEXT listener (reported first,
    /// the harness's bootstrap) and the SSL one.
    pub sets: Vec<String>,
    /// The SSL listener's address.
    pub bootstrap: String,
    /// librdkafka's settings for it.
    pub client: Settings,
}

pub fn ssl_listener(work: &Path) -> Result<SslListener> {
    let key = rcgen::KeyPair::generate().context("generate a key")?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .context("certificate parameters")?;
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress(std::net::IpAddr::from([
            127, 0, 0, 1,
        ])));
    let cert = params.self_signed(&key).context("self-sign")?;
    let keystore = work.join("p10-broker.pem");
    let ca = work.join("p10-ca.pem");
    std::fs::write(&keystore, format!("{}{}", cert.pem(), key.serialize_pem()))
        .context("write the keystore")?;
    std::fs::write(&ca, cert.pem()).context("write the CA file")?;
    // A port free now; the broker binds it a moment later.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("find a free port")?
        .port();
    let sets = vec![
        format!("listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{port}"),
        format!("ssl.keystore.location={}", keystore.display()),
    ];
    let client = vec![
        ("security.protocol".to_string(), "ssl".to_string()),
        ("ssl.ca.location".to_string(), ca.display().to_string()),
    ];
    Ok(SslListener {
        sets,
        bootstrap: format!("127.0.0.1:{port}"),
        client,
    })
}
