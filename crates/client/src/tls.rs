//! The TLS side of SSL and SASL_SSL connections, with rustls (ring for the
//! cryptography; no OpenSSL): reading the truststore and keystore the
//! settings name into a rustls client configuration, and the handshake.
//!
//! Stores: PEM (a file, or the inline `ssl.truststore.certificates` /
//! `ssl.keystore.certificate.chain` + `ssl.keystore.key`) and PKCS12 (with
//! its password). With the type unset the file's content decides (PEM
//! text, else PKCS12), as the broker's listeners read theirs.

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::security::{
    KeyStoreSource, SecurityError, StoreType, TlsSettings, TlsVersion, TrustStoreSource,
};

type Chain = Vec<CertificateDer<'static>>;

/// Where the system's CA bundle is looked for when no truststore is set
/// (after `SSL_CERT_FILE`): Debian/Ubuntu/Alpine, Fedora/RHEL, openSUSE,
/// macOS/BSD.
const SYSTEM_CA_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Builds the rustls configuration of `s` (blocking file reads).
pub(crate) fn client_config(s: &TlsSettings) -> Result<Arc<ClientConfig>, SecurityError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = s
        .versions
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let store_err = |what: &str, reason: String| SecurityError::Store {
        what: what.to_string(),
        reason,
    };
    let roots = Arc::new(load_truststore(&s.truststore)?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| store_err("truststore", e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| store_err("ssl.enabled.protocols", e.to_string()))?;
    let builder = if s.verify_hostname {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier(verifier)))
    };
    let config = match &s.keystore {
        None => builder.with_no_client_auth(),
        Some(keystore) => {
            let (chain, key) = load_keystore(keystore)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                store_err(
                    "ssl.keystore",
                    format!("certificate and key do not fit: {e}"),
                )
            })?
        }
    };
    Ok(Arc::new(config))
}

/// Opens TLS over `tcp` to `addr` (`host:port`), checking the broker's
/// certificate as the configuration says.
pub(crate) async fn handshake(
    config: &Arc<ClientConfig>,
    addr: &str,
    tcp: TcpStream,
) -> std::io::Result<TlsStream<TcpStream>> {
    let name = server_name(addr).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr:?} has no host name or address to check the certificate against"),
        )
    })?;
    TlsConnector::from(config.clone()).connect(name, tcp).await
}

/// The host of `host:port` or `[v6]:port`, as the name the certificate
/// must carry.
fn server_name(addr: &str) -> Option<ServerName<'static>> {
    let host = match addr.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.0,
        None => addr.rsplit_once(':').map_or(addr, |(h, _)| h),
    };
    ServerName::try_from(host.to_string()).ok()
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain must lead to
/// a trusted CA and be valid now, but the certificate need not name the
/// host. webpki checks the chain before the name, so a name error means
/// the chain passed.
#[derive(Debug)]
struct ChainOnlyVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The trust anchors of the truststore.
fn load_truststore(trust: &TrustStoreSource) -> Result<RootCertStore, SecurityError> {
    let err = |what: &str, reason: String| SecurityError::Store {
        what: what.to_string(),
        reason,
    };
    let (what, certs) = match trust {
        TrustStoreSource::Inline(pem) => {
            let what = "ssl.truststore.certificates".to_string();
            let certs = crate::pem::certs(pem.0.as_bytes()).map_err(|e| err(&what, e))?;
            (what, certs)
        }
        TrustStoreSource::File {
            path,
            kind,
            password,
        } => {
            let what = format!("ssl.truststore.location {}", path.display());
            let data = read(path).map_err(|e| err(&what, e))?;
            let certs = match kind.unwrap_or_else(|| sniff(&data)) {
                StoreType::Pem => crate::pem::certs(&data).map_err(|e| err(&what, e))?,
                StoreType::Pkcs12 => {
                    let password = password.as_ref().map_or("", |p| p.0.as_str());
                    p12_keystore::Pkcs12Archive::from_pkcs12(&data, password)
                        .map_err(|e| err(&what, crate::pem::pkcs12_reason(&e)))?
                        .certs
                        .iter()
                        .map(|bag| CertificateDer::from(bag.cert.as_der().to_vec()))
                        .collect()
                }
            };
            (what, certs)
        }
        TrustStoreSource::System => {
            let file = std::env::var_os("SSL_CERT_FILE")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    SYSTEM_CA_FILES
                        .iter()
                        .map(std::path::PathBuf::from)
                        .find(|p| p.is_file())
                })
                .ok_or_else(|| {
                    err(
                        "ssl.truststore.location",
                        "not set, and no system CA bundle was found: set it to the PEM file \
                         of the CA that signed the brokers' certificates"
                            .into(),
                    )
                })?;
            let what = format!("system CA bundle {}", file.display());
            let data = read(&file).map_err(|e| err(&what, e))?;
            let certs = crate::pem::certs(&data).map_err(|e| err(&what, e))?;
            (what, certs)
        }
    };
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(err(
            &what,
            format!("no usable CA certificate in it ({ignored} could not be used)"),
        ));
    }
    Ok(roots)
}

/// The client's certificate chain (leaf first) and private key.
fn load_keystore(
    source: &KeyStoreSource,
) -> Result<(Chain, PrivateKeyDer<'static>), SecurityError> {
    let err = |what: &str, reason: String| SecurityError::Store {
        what: what.to_string(),
        reason,
    };
    match source {
        KeyStoreSource::Inline { chain, key } => {
            let what = "ssl.keystore.certificate.chain";
            let certs = crate::pem::certs(chain.0.as_bytes()).map_err(|e| err(what, e))?;
            if certs.is_empty() {
                return Err(err(what, "no CERTIFICATE in it".into()));
            }
            let key = crate::pem::key(key.0.as_bytes()).map_err(|e| err("ssl.keystore.key", e))?;
            Ok((certs, key))
        }
        KeyStoreSource::File {
            path,
            kind,
            password,
        } => {
            let what = format!("ssl.keystore.location {}", path.display());
            let data = read(path).map_err(|e| err(&what, e))?;
            match kind.unwrap_or_else(|| sniff(&data)) {
                StoreType::Pem => {
                    let certs = crate::pem::certs(&data).map_err(|e| err(&what, e))?;
                    if certs.is_empty() {
                        return Err(err(&what, "no CERTIFICATE in the PEM file".into()));
                    }
                    let key = crate::pem::key(&data).map_err(|e| err(&what, e))?;
                    Ok((certs, key))
                }
                StoreType::Pkcs12 => {
                    let password = password.as_ref().map_or("", |p| p.0.as_str());
                    let store = p12_keystore::KeyStore::from_pkcs12(
                        &data,
                        password,
                        p12_keystore::Pkcs12ImportPolicy::Strict,
                    )
                    .map_err(|e| err(&what, crate::pem::pkcs12_reason(&e)))?;
                    let (_, entry) = store.private_key_chain().ok_or_else(|| {
                        err(
                            &what,
                            "no private key with its certificate chain in it".into(),
                        )
                    })?;
                    let certs = entry
                        .certs()
                        .iter()
                        .map(|c| CertificateDer::from(c.as_der().to_vec()))
                        .collect();
                    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                        entry.key().as_der().to_vec(),
                    ));
                    Ok((certs, key))
                }
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))
}

/// PEM text holds `-----BEGIN `; anything else is taken as PKCS12 DER.
fn sniff(data: &[u8]) -> StoreType {
    let head = data.get(..data.len().min(64 * 1024)).unwrap_or(data);
    if String::from_utf8_lossy(head).contains("-----BEGIN ") {
        StoreType::Pem
    } else {
        StoreType::Pkcs12
    }
}

/// A handshake failure in words that say what to change.
pub(crate) fn explain(e: &std::io::Error) -> String {
    let text = e.to_string();
    let hint = match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        )) => {
            " (the broker's certificate is not signed by a CA in the truststore: check \
             ssl.truststore.location)"
        }
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => {
            " (the broker's certificate does not name the host connected to; connect by a name \
             it has, or set ssl.endpoint.identification.algorithm= to skip this check)"
        }
        Some(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired
            | rustls::AlertDescription::BadCertificate
            | rustls::AlertDescription::UnknownCA,
        )) => {
            " (the broker requires a client certificate signed by a CA it trusts: set \
             ssl.keystore.location)"
        }
        _ if e.kind() == std::io::ErrorKind::UnexpectedEof
            || e.kind() == std::io::ErrorKind::ConnectionReset =>
        {
            " (the broker closed the connection: is it an SSL or SASL_SSL listener, and does \
             it require a client certificate?)"
        }
        _ => "",
    };
    format!("{text}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_test_support::pki::TestPki;

    /// The verifier `client_config` builds, for a truststore of `ca_pem`.
    fn verifier(ca_pem: &str, verify_hostname: bool) -> Arc<dyn ServerCertVerifier> {
        let roots = load_truststore(&TrustStoreSource::Inline(crate::security::Secret(
            ca_pem.to_string(),
        )))
        .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        if verify_hostname {
            webpki
        } else {
            Arc::new(ChainOnlyVerifier(webpki))
        }
    }

    fn verify(
        v: &dyn ServerCertVerifier,
        cert: &weir_test_support::pki::Issued,
        host: &str,
    ) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(host.to_string()).unwrap();
        v.verify_server_cert(
            &CertificateDer::from(cert.cert_der.clone()),
            &[],
            &name,
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
    }

    #[test]
    fn without_hostname_verification_the_chain_is_still_checked() {
        let pki = TestPki::new();
        // named for 127.0.0.1 and localhost
        let cert = pki.server("broker", 1);
        let strict = verifier(pki.ca_pem(), true);
        let chain_only = verifier(pki.ca_pem(), false);
        verify(strict.as_ref(), &cert, "localhost").unwrap();
        verify(strict.as_ref(), &cert, "127.0.0.1").unwrap();
        let wrong_name = verify(strict.as_ref(), &cert, "broker.example").unwrap_err();
        assert!(
            matches!(
                wrong_name,
                rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                        | CertificateError::NotValidForNameContext { .. }
                )
            ),
            "{wrong_name:?}"
        );
        verify(chain_only.as_ref(), &cert, "broker.example").unwrap();
        // A certificate of another CA is refused either way (that CA has
        // the same name as the trusted one, so its signature fails).
        let stranger = TestPki::new().server("broker", 1);
        for v in [&strict, &chain_only] {
            let e = verify(v.as_ref(), &stranger, "localhost").unwrap_err();
            assert!(
                matches!(
                    e,
                    rustls::Error::InvalidCertificate(
                        CertificateError::UnknownIssuer | CertificateError::BadSignature
                    )
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn server_names_of_addresses() {
        let name = |a: &str| server_name(a).map(|n| n.to_str().into_owned());
        assert_eq!(
            name("broker-1.example:9093").as_deref(),
            Some("broker-1.example")
        );
        assert_eq!(name("127.0.0.1:9093").as_deref(), Some("127.0.0.1"));
        assert_eq!(name("[::1]:9093").as_deref(), Some("::1"));
        assert_eq!(name("localhost").as_deref(), Some("localhost"));
        assert_eq!(name("[::1"), None);
        assert_eq!(name("bad name:1"), None);
    }
}
