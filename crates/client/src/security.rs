//! How a client secures its connections: Kafka's `security.protocol`
//! (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) with the client's `ssl.*`
//! and `sasl.*` properties.
//!
//! [`SecuritySettings::parse`] reads the properties (no file is read) and
//! [`SecuritySettings::load`] reads the stores they name into a
//! [`Security`], which every connection of a [`Client`](crate::Client)
//! uses, the bootstrap one and those to the brokers Metadata names.
//!
//! - TLS: the brokers' certificates are checked against
//!   `ssl.truststore.location` (PEM or PKCS12) or the inline
//!   `ssl.truststore.certificates`, else the system's CA bundle; the host
//!   name is checked unless `ssl.endpoint.identification.algorithm` is
//!   empty (the chain still is). A client certificate (mutual TLS) comes
//!   from `ssl.keystore.location` (PEM chain and PKCS#8 key, or PKCS12) or
//!   `ssl.keystore.certificate.chain` with `ssl.keystore.key`.
//! - SASL: `sasl.mechanism` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with
//!   the credentials of `sasl.jaas.config` (`PlainLoginModule` or
//!   `ScramLoginModule` with `username` and `password`) or librdkafka's
//!   `sasl.username` and `sasl.password`.
//!
//! ```
//! use weir_client::security::{SecurityProtocol, SecuritySettings};
//! let props = [
//!     ("security.protocol", "SASL_PLAINTEXT"),
//!     ("sasl.mechanism", "SCRAM-SHA-512"),
//!     (
//!         "sasl.jaas.config",
//!         "org.apache.kafka.common.security.scram.ScramLoginModule required \
//!          username=\"alice\" password=\"alice-secret\";",
//!     ),
//! ];
//! let get = |k: &str| props.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
//! let settings = SecuritySettings::parse(&get).unwrap();
//! assert_eq!(settings.protocol, SecurityProtocol::SaslPlaintext);
//! assert_eq!(settings.sasl.as_ref().unwrap().username, "alice");
//! let security = settings.load().unwrap();
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use crate::jaas;

/// The properties [`SecuritySettings::parse`] reads.
pub const SECURITY_PROPERTIES: &[&str] = &[
    "security.protocol",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.endpoint.identification.algorithm",
    "ssl.enabled.protocols",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
];

/// Properties whose values are never printed.
const SECRET_PROPERTIES: &[&str] = &[
    "ssl.truststore.password",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "sasl.jaas.config",
    "sasl.password",
];

/// Kafka's class names of the login modules whose options carry a user
/// name and password.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Case-insensitive, as Kafka reads it.
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// `sasl.mechanism` values weir's client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ];

    /// The IANA name sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// Case-sensitive, as Kafka compares mechanism names.
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name.trim())
    }
}

/// A value that is never printed (passwords, inline keys).
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

/// Where the client certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStoreSource {
    /// `ssl.keystore.location`; `kind` None means "decide from the content".
    File {
        path: PathBuf,
        kind: Option<StoreType>,
        password: Option<Secret>,
    },
    /// `ssl.keystore.certificate.chain` and `ssl.keystore.key` (PEM text).
    Inline { chain: Secret, key: Secret },
}

/// Where the CA certificates that vouch for brokers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStoreSource {
    /// `ssl.truststore.location`.
    File {
        path: PathBuf,
        kind: Option<StoreType>,
        password: Option<Secret>,
    },
    /// `ssl.truststore.certificates` (PEM text).
    Inline(Secret),
    /// Neither is set: the system's CA bundle (`SSL_CERT_FILE`, else the
    /// distribution's file).
    System,
}

/// `ssl.enabled.protocols` entries rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// TLS settings of an SSL or SASL_SSL client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub truststore: TrustStoreSource,
    /// A client certificate, for brokers with `ssl.client.auth`.
    pub keystore: Option<KeyStoreSource>,
    /// `ssl.endpoint.identification.algorithm=https` (the default): the
    /// broker's certificate must name the host connected to.
    pub verify_hostname: bool,
    /// Never empty.
    pub versions: Vec<TlsVersion>,
}

/// SASL settings of a SASL_PLAINTEXT or SASL_SSL client.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslSettings {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Secret,
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The security properties of a client, parsed. `tls` is set exactly when
/// the protocol uses TLS, `sasl` exactly when it uses SASL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecuritySettings {
    pub protocol: SecurityProtocol,
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

/// A security setting or store that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// A property that is not valid, alone or with the others. `value` is
    /// None for secrets and for a missing property.
    #[error("{name}{}: {reason}", value.as_deref().map(|v| format!("={v}")).unwrap_or_default())]
    Setting {
        name: String,
        value: Option<String>,
        reason: String,
    },
    /// A keystore or truststore that cannot be read or used.
    #[error("{what}: {reason}")]
    Store { what: String, reason: String },
}

impl SecurityError {
    fn setting(name: &str, value: &str, reason: impl Into<String>) -> SecurityError {
        SecurityError::Setting {
            name: name.to_string(),
            value: (!SECRET_PROPERTIES.contains(&name)).then(|| value.to_string()),
            reason: reason.into(),
        }
    }

    fn missing(name: &str, reason: impl Into<String>) -> SecurityError {
        SecurityError::Setting {
            name: name.to_string(),
            value: None,
            reason: reason.into(),
        }
    }
}

/// Checks the value of one property on its own (the checks that need no
/// other property), so that a bad value is reported where it is read.
/// Properties that are not security ones pass.
pub fn check_property(name: &str, value: &str) -> Result<(), SecurityError> {
    let value = value.trim();
    match name {
        "security.protocol" if SecurityProtocol::from_name(value).is_none() => {
            Err(SecurityError::setting(
                name,
                value,
                "not supported (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)",
            ))
        }
        "sasl.mechanism" if SaslMechanism::from_name(value).is_none() => {
            Err(SecurityError::setting(
                name,
                value,
                "not supported (weir's client speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)",
            ))
        }
        "ssl.keystore.type" | "ssl.truststore.type" => store_type(name, value).map(|_| ()),
        "ssl.endpoint.identification.algorithm" => verify_hostname(value).map(|_| ()),
        "ssl.enabled.protocols" => tls_versions(value).map(|_| ()),
        _ => Ok(()),
    }
}

fn store_type(name: &str, value: &str) -> Result<Option<StoreType>, SecurityError> {
    match value.trim().to_ascii_uppercase().as_str() {
        "" => Ok(None),
        "PEM" => Ok(Some(StoreType::Pem)),
        "PKCS12" => Ok(Some(StoreType::Pkcs12)),
        "JKS" => Err(SecurityError::setting(
            name,
            value,
            "JKS stores are not supported: convert with `keytool -importkeystore \
             -deststoretype PKCS12` and set PKCS12, or use PEM",
        )),
        _ => Err(SecurityError::setting(
            name,
            value,
            "expected PEM or PKCS12",
        )),
    }
}

fn verify_hostname(value: &str) -> Result<bool, SecurityError> {
    match value.trim() {
        "" => Ok(false),
        v if v.eq_ignore_ascii_case("https") => Ok(true),
        v => Err(SecurityError::setting(
            "ssl.endpoint.identification.algorithm",
            v,
            "expected https (check the host name) or empty (do not)",
        )),
    }
}

fn tls_versions(value: &str) -> Result<Vec<TlsVersion>, SecurityError> {
    let mut out = Vec::new();
    for p in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p {
            "TLSv1.2" => out.push(TlsVersion::Tls12),
            "TLSv1.3" => out.push(TlsVersion::Tls13),
            // older versions are not spoken (rustls has none)
            _ => {}
        }
    }
    out.dedup();
    if out.is_empty() {
        return Err(SecurityError::setting(
            "ssl.enabled.protocols",
            value,
            "names neither TLSv1.2 nor TLSv1.3",
        ));
    }
    Ok(out)
}

impl SecuritySettings {
    /// Reads the security properties; `get(name)` returns a property's
    /// value. Settings the protocol does not use are not read (as in
    /// Kafka: `ssl.*` means nothing to a SASL_PLAINTEXT client).
    pub fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<SecuritySettings, SecurityError> {
        // Empty counts as unset, as Kafka's empty strings do for these.
        let set = |name: &str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        for name in SECURITY_PROPERTIES {
            if let Some(v) = get(name) {
                check_property(name, &v)?;
            }
        }
        let protocol = match set("security.protocol") {
            Some(v) => SecurityProtocol::from_name(&v).unwrap_or_default(),
            None => SecurityProtocol::Plaintext,
        };
        let tls = if protocol.uses_tls() {
            Some(Self::parse_tls(&set, get)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(Self::parse_sasl(&set)?)
        } else {
            None
        };
        Ok(SecuritySettings {
            protocol,
            tls,
            sasl,
        })
    }

    fn parse_tls(
        set: &dyn Fn(&str) -> Option<String>,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<TlsSettings, SecurityError> {
        let secret = |name: &str| set(name).map(Secret);
        let keystore_type = store_type(
            "ssl.keystore.type",
            &set("ssl.keystore.type").unwrap_or_default(),
        )?;
        let keystore = match (
            set("ssl.keystore.location"),
            set("ssl.keystore.certificate.chain"),
            set("ssl.keystore.key"),
        ) {
            (Some(path), Some(_), _) | (Some(path), _, Some(_)) => {
                return Err(SecurityError::setting(
                    "ssl.keystore.location",
                    &path,
                    "give either ssl.keystore.location or ssl.keystore.certificate.chain and \
                     ssl.keystore.key, not both",
                ));
            }
            (Some(path), None, None) => Some(KeyStoreSource::File {
                path: PathBuf::from(path),
                kind: keystore_type,
                password: secret("ssl.keystore.password"),
            }),
            (None, Some(chain), Some(key)) => {
                if keystore_type == Some(StoreType::Pkcs12) {
                    return Err(SecurityError::setting(
                        "ssl.keystore.type",
                        "PKCS12",
                        "an inline keystore is PEM",
                    ));
                }
                Some(KeyStoreSource::Inline {
                    chain: Secret(chain),
                    key: Secret(key),
                })
            }
            (None, Some(_), None) => {
                return Err(SecurityError::missing(
                    "ssl.keystore.key",
                    "not set, but ssl.keystore.certificate.chain is",
                ));
            }
            (None, None, Some(_)) => {
                return Err(SecurityError::missing(
                    "ssl.keystore.certificate.chain",
                    "not set, but ssl.keystore.key is",
                ));
            }
            (None, None, None) => None,
        };
        if let Some(key_password) = set("ssl.key.password") {
            // An encrypted PKCS#8 key is not read; a PKCS12 key under the
            // store password is (Kafka's tools use the same password).
            let same = match &keystore {
                Some(KeyStoreSource::File { password, .. }) => password.as_ref().map(|p| &p.0),
                _ => None,
            };
            if same != Some(&key_password) {
                return Err(SecurityError::missing(
                    "ssl.key.password",
                    "encrypted private keys are not supported: store the key unencrypted \
                     (PEM) or under the keystore password (PKCS12)",
                ));
            }
        }
        let truststore_type = store_type(
            "ssl.truststore.type",
            &set("ssl.truststore.type").unwrap_or_default(),
        )?;
        let truststore = match (
            set("ssl.truststore.location"),
            set("ssl.truststore.certificates"),
        ) {
            (Some(path), Some(_)) => {
                return Err(SecurityError::setting(
                    "ssl.truststore.location",
                    &path,
                    "give either ssl.truststore.location or ssl.truststore.certificates, not both",
                ));
            }
            (Some(path), None) => TrustStoreSource::File {
                path: PathBuf::from(path),
                kind: truststore_type,
                password: secret("ssl.truststore.password"),
            },
            (None, Some(pem)) => TrustStoreSource::Inline(Secret(pem)),
            (None, None) => TrustStoreSource::System,
        };
        // Set but empty turns the check off, as in Kafka; unset is https.
        let verify_hostname = match get("ssl.endpoint.identification.algorithm") {
            Some(v) => verify_hostname(&v)?,
            None => true,
        };
        let versions = match set("ssl.enabled.protocols") {
            Some(v) => tls_versions(&v)?,
            None => vec![TlsVersion::Tls12, TlsVersion::Tls13],
        };
        Ok(TlsSettings {
            truststore,
            keystore,
            verify_hostname,
            versions,
        })
    }

    fn parse_sasl(set: &dyn Fn(&str) -> Option<String>) -> Result<SaslSettings, SecurityError> {
        let mechanism = match set("sasl.mechanism") {
            Some(m) => SaslMechanism::from_name(&m)
                .ok_or_else(|| SecurityError::setting("sasl.mechanism", &m, "not supported"))?,
            None => {
                return Err(SecurityError::missing(
                    "sasl.mechanism",
                    "not set (Kafka's default, GSSAPI, is not supported: set PLAIN, \
                     SCRAM-SHA-256 or SCRAM-SHA-512)",
                ));
            }
        };
        let (username, password) = match (
            set("sasl.jaas.config"),
            set("sasl.username"),
            set("sasl.password"),
        ) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(SecurityError::missing(
                    "sasl.jaas.config",
                    "give either sasl.jaas.config or sasl.username and sasl.password, not both",
                ));
            }
            (Some(text), None, None) => credentials_from_jaas(&text)?,
            (None, Some(user), Some(password)) => (user, password),
            (None, None, Some(_)) => {
                return Err(SecurityError::missing(
                    "sasl.username",
                    "not set, but sasl.password is",
                ));
            }
            (None, Some(_), None) => {
                return Err(SecurityError::missing(
                    "sasl.password",
                    "not set, but sasl.username is",
                ));
            }
            (None, None, None) => {
                return Err(SecurityError::missing(
                    "sasl.jaas.config",
                    format!(
                        "not set: {} needs a user name and password (sasl.jaas.config, or \
                         sasl.username and sasl.password)",
                        mechanism.name()
                    ),
                ));
            }
        };
        Ok(SaslSettings {
            mechanism,
            username,
            password: Secret(password),
        })
    }

    /// Reads the stores the settings name (blocking file reads) into what
    /// connections use. Every problem names the property and file.
    pub fn load(&self) -> Result<Security, SecurityError> {
        let tls = self
            .tls
            .as_ref()
            .map(crate::tls::client_config)
            .transpose()?;
        Ok(Security {
            protocol: self.protocol,
            tls,
            sasl: self.sasl.clone(),
        })
    }
}

/// The user name and password of a `PlainLoginModule` or
/// `ScramLoginModule`.
fn credentials_from_jaas(text: &str) -> Result<(String, String), SecurityError> {
    let bad = |reason: String| SecurityError::missing("sasl.jaas.config", reason);
    let module = jaas::parse(text).map_err(|e| bad(e.to_string()))?;
    if module.class != PLAIN_LOGIN_MODULE && module.class != SCRAM_LOGIN_MODULE {
        return Err(bad(format!(
            "login module {} is not supported ({PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE})",
            module.class
        )));
    }
    if module
        .option("tokenauth")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err(bad(
            "delegation tokens (tokenauth=true) are not supported".into()
        ));
    }
    match (module.option("username"), module.option("password")) {
        (Some(user), Some(password)) if !user.is_empty() => {
            Ok((user.to_string(), password.to_string()))
        }
        _ => Err(bad(format!(
            "login module {} needs username=\"...\" and password=\"...\"",
            module.class
        ))),
    }
}

/// What a client's connections do to be secure, loaded and ready: cheap to
/// clone (the TLS configuration is shared). The default is PLAINTEXT.
#[derive(Clone, Default)]
pub struct Security {
    protocol: SecurityProtocol,
    /// Set exactly when the protocol uses TLS.
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    /// Set exactly when the protocol uses SASL.
    pub(crate) sasl: Option<SaslSettings>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("protocol", &self.protocol)
            .field("sasl", &self.sasl)
            .finish_non_exhaustive()
    }
}

impl Security {
    /// PLAINTEXT: no TLS, no authentication.
    pub fn plaintext() -> Security {
        Security::default()
    }

    /// Parses and loads the security properties `get` returns.
    pub fn from_properties(
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Security, SecurityError> {
        SecuritySettings::parse(get)?.load()
    }

    pub fn protocol(&self) -> SecurityProtocol {
        self.protocol
    }
}

#[cfg(test)]
mod tests;
