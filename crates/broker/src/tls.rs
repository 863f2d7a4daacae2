//! TLS for SSL listeners, with rustls (ring for the cryptography; no
//! OpenSSL).
//!
//! [`TlsSettings`] is what the configuration says for one listener (Kafka's
//! `ssl.*` names, each overridable per listener as
//! `listener.name.<name>.ssl.*`); parsing it reads no file. [`ListenerTls`]
//! loads the keystore and truststore it names into a rustls server
//! configuration, hands out acceptors for new connections, reloads when a
//! watched file changes (connections already open keep their session; new
//! ones get the new certificate) and maps a client certificate to its
//! principal.
//!
//! Keystores: `PEM` (a file with the certificate chain and the PKCS#8 key,
//! or the inline `ssl.keystore.certificate.chain` / `ssl.keystore.key`) and
//! `PKCS12` (with `ssl.keystore.password`). With `ssl.keystore.type` unset
//! the file's content decides (PEM text, else PKCS#12). Truststores: `PEM`
//! (a file, or inline `ssl.truststore.certificates`) and `PKCS12`. JKS is
//! refused with a hint to convert it.

mod dn;
mod principal;
mod store;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

pub use dn::subject_dn;
pub use principal::PrincipalRules;
pub(crate) use store::FileStamp;

use crate::session::Principal;

/// A configuration value that is never printed (passwords, inline keys).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// `ssl.keystore.type` / `ssl.truststore.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
}

/// Where a keystore comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStoreSource {
    /// `ssl.keystore.location`; `kind` None means "decide from the content".
    File {
        path: PathBuf,
        kind: Option<StoreType>,
        /// `ssl.keystore.password` (PKCS12).
        password: Option<Secret>,
    },
    /// `ssl.keystore.certificate.chain` and `ssl.keystore.key` (PEM text).
    Inline { chain: Secret, key: Secret },
}

/// Where trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStoreSource {
    /// `ssl.truststore.location`.
    File {
        path: PathBuf,
        kind: Option<StoreType>,
        /// `ssl.truststore.password` (PKCS12; may be empty).
        password: Option<Secret>,
    },
    /// `ssl.truststore.certificates` (PEM text).
    Inline(Secret),
}

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one connects as ANONYMOUS.
    Requested,
    /// A client without a certificate the truststore vouches for is refused.
    Required,
}

/// `ssl.enabled.protocols` entries rustls serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// The TLS settings of one SSL listener. Built by the configuration
/// ([`TlsSettings::parse`]); always names a keystore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The listener these are for (upper case).
    pub listener: String,
    pub keystore: KeyStoreSource,
    pub truststore: Option<TrustStoreSource>,
    pub client_auth: ClientAuth,
    pub principal_rules: PrincipalRules,
    /// Never empty.
    pub versions: Vec<TlsVersion>,
}

/// A setting that is not valid, with the name it was given under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub name: String,
    pub value: String,
    pub reason: String,
}

/// The `ssl.*` settings [`TlsSettings::parse`] reads.
pub const SSL_SETTINGS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.enabled.protocols",
];

impl TlsSettings {
    /// Reads the settings of `listener`. `get(name)` returns the value of
    /// an `ssl.*` setting and the name it was given under (the
    /// `listener.name.<l>.` form wins over the plain one), or None when
    /// neither is set.
    pub fn parse(
        listener: &str,
        get: &dyn Fn(&str) -> Option<(String, String)>,
    ) -> Result<TlsSettings, SettingError> {
        let fail = |(name, value): (String, String), reason: String| SettingError {
            name,
            value,
            reason,
        };
        let set = |name: &str| get(name).filter(|(_, v)| !v.trim().is_empty());
        let store_type = |name: &str| -> Result<Option<StoreType>, SettingError> {
            let Some((n, v)) = set(name) else {
                return Ok(None);
            };
            match v.trim().to_ascii_uppercase().as_str() {
                "PEM" => Ok(Some(StoreType::Pem)),
                "PKCS12" => Ok(Some(StoreType::Pkcs12)),
                "JKS" => Err(fail(
                    (n, v),
                    "JKS stores are not supported: convert with `keytool -importkeystore \
                     -deststoretype PKCS12` and set PKCS12"
                        .into(),
                )),
                _ => Err(fail((n, v), "expected PEM or PKCS12".into())),
            }
        };
        let secret = |name: &str| set(name).map(|(_, v)| Secret(v));
        let keystore_type = store_type("ssl.keystore.type")?;
        let keystore = match (
            set("ssl.keystore.location"),
            set("ssl.keystore.certificate.chain"),
            set("ssl.keystore.key"),
        ) {
            (Some((n, v)), Some(_), _) | (Some((n, v)), _, Some(_)) => {
                return Err(fail(
                    (n, v),
                    "give either ssl.keystore.location or ssl.keystore.certificate.chain and \
                     ssl.keystore.key, not both"
                        .into(),
                ));
            }
            (Some((_, path)), None, None) => KeyStoreSource::File {
                path: PathBuf::from(path.trim()),
                kind: keystore_type,
                password: secret("ssl.keystore.password"),
            },
            (None, Some((_, chain)), Some((_, key))) => {
                if keystore_type == Some(StoreType::Pkcs12) {
                    return Err(fail(
                        get("ssl.keystore.type").unwrap_or_default(),
                        "an inline keystore is PEM".into(),
                    ));
                }
                KeyStoreSource::Inline {
                    chain: Secret(chain),
                    key: Secret(key),
                }
            }
            (None, chain, key) => {
                let name = if chain.is_some() {
                    "ssl.keystore.key"
                } else if key.is_some() {
                    "ssl.keystore.certificate.chain"
                } else {
                    "ssl.keystore.location"
                };
                return Err(fail(
                    (name.to_string(), String::new()),
                    format!(
                        "SSL listener {listener} needs a keystore: ssl.keystore.location, or \
                         ssl.keystore.certificate.chain with ssl.keystore.key (each also as \
                         listener.name.{}.ssl.*)",
                        listener.to_ascii_lowercase()
                    ),
                ));
            }
        };
        if let Some(kv) = set("ssl.key.password") {
            // A key password protects an encrypted PKCS#8 key; weir reads
            // unencrypted keys (PEM) and the key under the store password
            // (PKCS12, where Kafka's tools use the same password).
            let same = match &keystore {
                KeyStoreSource::File { password, .. } => password.as_ref().map(|p| &p.0),
                KeyStoreSource::Inline { .. } => None,
            };
            if same != Some(&kv.1) {
                return Err(fail(
                    (kv.0, "[hidden]".into()),
                    "encrypted private keys are not supported: store the key unencrypted \
                     (PEM) or under the keystore password (PKCS12)"
                        .into(),
                ));
            }
        }
        let truststore_type = store_type("ssl.truststore.type")?;
        let truststore = match (
            set("ssl.truststore.location"),
            set("ssl.truststore.certificates"),
        ) {
            (Some((n, v)), Some(_)) => {
                return Err(fail(
                    (n, v),
                    "give either ssl.truststore.location or ssl.truststore.certificates, not both"
                        .into(),
                ));
            }
            (Some((_, path)), None) => Some(TrustStoreSource::File {
                path: PathBuf::from(path.trim()),
                kind: truststore_type,
                password: secret("ssl.truststore.password"),
            }),
            (None, Some((_, pem))) => Some(TrustStoreSource::Inline(Secret(pem))),
            (None, None) => None,
        };
        let client_auth = match set("ssl.client.auth") {
            None => ClientAuth::None,
            Some((n, v)) => match v.trim().to_ascii_lowercase().as_str() {
                "none" => ClientAuth::None,
                "requested" => ClientAuth::Requested,
                "required" => ClientAuth::Required,
                _ => return Err(fail((n, v), "expected none, requested or required".into())),
            },
        };
        if client_auth != ClientAuth::None && truststore.is_none() {
            let (n, v) = set("ssl.client.auth").unwrap_or_default();
            return Err(fail(
                (n, v),
                "client certificates are checked against a truststore: set \
                 ssl.truststore.location or ssl.truststore.certificates"
                    .into(),
            ));
        }
        let principal_rules = match get("ssl.principal.mapping.rules") {
            None => PrincipalRules::default(),
            Some((n, v)) => PrincipalRules::parse(&v).map_err(|e| fail((n, v), e))?,
        };
        let versions = match set("ssl.enabled.protocols") {
            None => vec![TlsVersion::Tls12, TlsVersion::Tls13],
            Some((n, v)) => {
                let mut out = Vec::new();
                for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    match p {
                        "TLSv1.2" => out.push(TlsVersion::Tls12),
                        "TLSv1.3" => out.push(TlsVersion::Tls13),
                        // older versions are not offered (rustls has none)
                        _ => tracing::warn!("{n}: {p} is not served (only TLSv1.2 and TLSv1.3)"),
                    }
                }
                out.dedup();
                if out.is_empty() {
                    return Err(fail((n, v), "names neither TLSv1.2 nor TLSv1.3".into()));
                }
                out
            }
        };
        Ok(TlsSettings {
            listener: listener.to_string(),
            keystore,
            truststore,
            client_auth,
            principal_rules,
            versions,
        })
    }
}

/// A keystore or truststore that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("listener {listener}: {what}: {reason}")]
pub struct TlsError {
    pub listener: String,
    /// The setting and file, e.g. `ssl.keystore.location /etc/weir/broker.p12`.
    pub what: String,
    pub reason: String,
}

/// The TLS side of one SSL listener: its current server configuration,
/// reloaded when a watched file changes.
pub struct ListenerTls {
    settings: TlsSettings,
    current: RwLock<Arc<ServerConfig>>,
    /// The files the configuration was loaded from, as last seen.
    stamps: Mutex<Vec<store::FileStamp>>,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("listener", &self.settings.listener)
            .finish_non_exhaustive()
    }
}

impl ListenerTls {
    /// Loads the stores (blocking file reads); every problem is a readable
    /// error naming the setting and file.
    pub fn load(settings: TlsSettings) -> Result<ListenerTls, TlsError> {
        let stamps = store::stamps(&settings);
        let config = server_config(&settings)?;
        Ok(ListenerTls {
            settings,
            current: RwLock::new(Arc::new(config)),
            stamps: Mutex::new(stamps),
        })
    }

    /// An acceptor with the current certificate, for one new connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        TlsAcceptor::from(config)
    }

    /// Reloads when a keystore or truststore file changed since the last
    /// look (blocking). `Ok(true)`: the new files are in use. On an error
    /// the previous certificate stays; the same files are not tried again
    /// until they change once more.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = store::stamps(&self.settings);
        {
            let mut seen = self.stamps.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == now {
                return Ok(false);
            }
            *seen = now;
        }
        let config = server_config(&self.settings)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
        Ok(true)
    }

    /// The principal of a connection that finished its handshake: the
    /// mapped subject DN of its client certificate, ANONYMOUS without one.
    /// An error (no mapping rule applies, a certificate that does not
    /// parse) refuses the client, as Kafka does.
    pub fn principal(&self, conn: &rustls::ServerConnection) -> Result<Principal, String> {
        let Some(cert) = conn.peer_certificates().and_then(|c| c.first()) else {
            return Ok(Principal::anonymous());
        };
        let dn = subject_dn(cert).ok_or("the client certificate's subject does not parse")?;
        match self.settings.principal_rules.map(&dn) {
            Some(name) => Ok(Principal::user(name)),
            None => Err(format!(
                "no ssl.principal.mapping.rules rule applies to {dn:?} (rules {:?})",
                self.settings.principal_rules.text()
            )),
        }
    }

    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }
}

/// Builds a rustls server configuration from the stores `s` names.
fn server_config(s: &TlsSettings) -> Result<ServerConfig, TlsError> {
    let err = |what: &str, reason: String| TlsError {
        listener: s.listener.clone(),
        what: what.to_string(),
        reason,
    };
    let (chain, key) = store::load_keystore(s)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = s
        .versions
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| err("ssl.enabled.protocols", e.to_string()))?;
    let builder = match (s.client_auth, &s.truststore) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(trust)) => {
            let roots = store::load_truststore(s, trust)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| err("ssl.truststore", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder.with_single_cert(chain, key).map_err(|e| {
        err(
            "ssl.keystore",
            format!("certificate and key do not fit: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<TlsSettings, SettingError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TlsSettings::parse("SSL", &|name| {
            map.get(name).map(|v| (name.to_string(), v.clone()))
        })
    }

    #[test]
    fn keystore_forms_and_their_errors() {
        let s = parse(&[("ssl.keystore.location", "/k.pem")]).unwrap();
        assert_eq!(
            s.keystore,
            KeyStoreSource::File {
                path: "/k.pem".into(),
                kind: None,
                password: None
            }
        );
        assert_eq!(s.client_auth, ClientAuth::None);
        assert_eq!(s.versions, vec![TlsVersion::Tls12, TlsVersion::Tls13]);
        let s = parse(&[
            ("ssl.keystore.certificate.chain", "-----BEGIN"),
            ("ssl.keystore.key", "-----BEGIN"),
            ("ssl.keystore.type", "pem"),
        ])
        .unwrap();
        assert!(matches!(s.keystore, KeyStoreSource::Inline { .. }));
        for (pairs, name, words) in [
            (vec![], "ssl.keystore.location", "needs a keystore"),
            (
                vec![("ssl.keystore.certificate.chain", "x")],
                "ssl.keystore.key",
                "needs a keystore",
            ),
            (
                vec![("ssl.keystore.location", "/k"), ("ssl.keystore.key", "x")],
                "ssl.keystore.location",
                "not both",
            ),
            (
                vec![
                    ("ssl.keystore.location", "/k"),
                    ("ssl.keystore.type", "JKS"),
                ],
                "ssl.keystore.type",
                "PKCS12",
            ),
            (
                vec![("ssl.keystore.location", "/k"), ("ssl.client.auth", "yes")],
                "ssl.client.auth",
                "requested",
            ),
            (
                vec![
                    ("ssl.keystore.location", "/k"),
                    ("ssl.client.auth", "required"),
                ],
                "ssl.client.auth",
                "truststore",
            ),
            (
                vec![
                    ("ssl.keystore.location", "/k"),
                    ("ssl.principal.mapping.rules", "DEFAULT/L"),
                ],
                "ssl.principal.mapping.rules",
                "invalid rule",
            ),
            (
                vec![
                    ("ssl.keystore.location", "/k"),
                    ("ssl.enabled.protocols", "TLSv1.1"),
                ],
                "ssl.enabled.protocols",
                "neither",
            ),
            (
                vec![
                    ("ssl.keystore.location", "/k"),
                    ("ssl.keystore.password", "a"),
                    ("ssl.key.password", "b"),
                ],
                "ssl.key.password",
                "encrypted private keys",
            ),
        ] {
            let e = parse(&pairs).unwrap_err();
            assert_eq!(e.name, name, "{pairs:?}: {e:?}");
            assert!(e.reason.contains(words), "{pairs:?}: {e:?}");
        }
    }

    #[test]
    fn secrets_are_not_printed() {
        let s = parse(&[
            ("ssl.keystore.location", "/k.p12"),
            ("ssl.keystore.password", "hunter2"),
        ])
        .unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
