//! SASL authentication (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as pure
//! exchanges: bytes from the client in, bytes to send and finally a user
//! name out. The connection drives them through Kafka's SaslHandshake and
//! SaslAuthenticate requests; nothing here does I/O or reads the clock.
//!
//! ```
//! use weir_broker::sasl::{ListenerSasl, Mechanism, SaslStep};
//! let sasl = ListenerSasl::parse("SASL", &|name| match name {
//!     "sasl.enabled.mechanisms" => Some("PLAIN".into()),
//!     "listener.name.sasl.plain.sasl.jaas.config" => Some(
//!         "org.apache.kafka.common.security.plain.PlainLoginModule required \
//!          user_alice=\"alice-secret\";".into(),
//!     ),
//!     _ => None,
//! })
//! .unwrap();
//! let mut exchange = sasl.start(Mechanism::Plain, String::new()).unwrap();
//! let step = exchange.step(b"\0alice\0alice-secret").unwrap();
//! assert_eq!(step, SaslStep::Done { user: "alice".into(), response: vec![] });
//! ```

pub mod gate;
pub mod jaas;
pub mod plain;
pub mod scram;

use std::sync::Arc;

use plain::PlainUsers;
use scram::{
    LayeredScramCredentials, MIN_ITERATIONS, SCRAM_LOGIN_MODULE, ScramCredential, ScramCredentials,
    ScramHash, ScramServer, ScramStep, StaticScramCredentials,
};

/// A fresh SCRAM server nonce: 24 random bytes in base64 (printable, no
/// `,`).
pub fn server_nonce() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 24]>())
}

/// A SASL mechanism weir serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    /// The IANA name clients send.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// Mechanism names are case-sensitive (Kafka compares them exactly).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    fn scram_hash(self) -> Option<ScramHash> {
        match self {
            Mechanism::Plain => None,
            Mechanism::ScramSha256 => Some(ScramHash::Sha256),
            Mechanism::ScramSha512 => Some(ScramHash::Sha512),
        }
    }
}

/// Why an exchange failed. The text is for the broker's log; the client
/// only ever sees [`SaslError::client_message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// Well-formed, but the credentials are not accepted.
    #[error("authentication failed: {0}")]
    Failed(&'static str),
    /// Not a message of the mechanism.
    #[error("malformed message: {0}")]
    Malformed(&'static str),
}

impl SaslError {
    fn failed(reason: &'static str) -> SaslError {
        SaslError::Failed(reason)
    }

    fn malformed(reason: &'static str) -> SaslError {
        SaslError::Malformed(reason)
    }

    /// What the client is told: the same for every failure, so it learns
    /// nothing about which users exist or which check failed.
    pub fn client_message(&self) -> &'static str {
        "Authentication failed: Invalid username or password"
    }
}

/// The answer to one client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send these bytes and wait for the client's next message.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send `response` (possibly empty).
    Done { user: String, response: Vec<u8> },
}

/// A listener's SASL configuration: the mechanisms it offers and what each
/// checks against.
#[derive(Debug, Clone)]
pub struct ListenerSasl {
    /// `sasl.enabled.mechanisms`, in the configured order; never empty.
    pub mechanisms: Vec<Mechanism>,
    plain: PlainUsers,
    scram: Arc<dyn ScramCredentials>,
    /// Keys the made-up SCRAM salts of unknown users.
    secret: [u8; 32],
}

impl PartialEq for ListenerSasl {
    /// Same mechanisms (the credentials are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.mechanisms == other.mechanisms
    }
}

impl Eq for ListenerSasl {}

/// `sasl.*` settings with a per-listener form.
pub const SASL_SETTINGS: &[&str] = &["sasl.enabled.mechanisms"];

impl ListenerSasl {
    /// Reads the SASL settings of `listener` (upper case). `get(name)`
    /// returns a setting's value: for `sasl.enabled.mechanisms` the caller
    /// looks up `listener.name.<l>.sasl.enabled.mechanisms` first; the
    /// JAAS settings are asked for under their full per-listener names,
    /// `listener.name.<l>.<mechanism>.sasl.jaas.config`, as Kafka reads
    /// them for a broker.
    ///
    /// PLAIN needs a `PlainLoginModule` with `user_<name>="<password>"`
    /// options. Static SCRAM users come from a `ScramLoginModule` with the
    /// same `user_<name>` options (salted here with a random salt and 4096
    /// iterations); the broker puts the credentials set at run time in
    /// front of them ([`ListenerSasl::with_dynamic_scram`]).
    pub fn parse(
        listener: &str,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ListenerSasl, String> {
        let lower = listener.to_ascii_lowercase();
        let list = get("sasl.enabled.mechanisms").unwrap_or_default();
        let mut mechanisms = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let m = Mechanism::from_name(name).ok_or_else(|| {
                format!(
                    "sasl.enabled.mechanisms of listener {listener}: {name} is not served \
                     (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are)"
                )
            })?;
            if !mechanisms.contains(&m) {
                mechanisms.push(m);
            }
        }
        if mechanisms.is_empty() {
            return Err(format!(
                "SASL listener {listener} needs sasl.enabled.mechanisms (Kafka's default, GSSAPI, \
                 is not served)"
            ));
        }
        let mut plain = PlainUsers::default();
        let mut scram = StaticScramCredentials::default();
        for m in &mechanisms {
            let key = format!(
                "listener.name.{lower}.{}.sasl.jaas.config",
                m.name().to_ascii_lowercase()
            );
            let module = match get(&key).filter(|v| !v.trim().is_empty()) {
                Some(text) => Some(jaas::parse(&text).map_err(|e| format!("{key}: {e}"))?),
                None => None,
            };
            match (m.scram_hash(), module) {
                (None, Some(module)) => {
                    plain = PlainUsers::from_jaas(&module).map_err(|e| format!("{key}: {e}"))?;
                }
                (None, None) => {
                    return Err(format!(
                        "listener {listener} offers PLAIN but {key} is not set"
                    ));
                }
                (Some(hash), Some(module)) => {
                    if module.class != SCRAM_LOGIN_MODULE {
                        return Err(format!(
                            "{key}: login module {} is not {SCRAM_LOGIN_MODULE}",
                            module.class
                        ));
                    }
                    for (k, v) in &module.options {
                        if let Some(user) = k.strip_prefix("user_") {
                            let salt: [u8; 16] = rand::random();
                            let c = ScramCredential::from_password(hash, v, &salt, MIN_ITERATIONS);
                            scram.insert(hash, user, c);
                        }
                    }
                }
                // no users yet: every attempt fails
                (Some(_), None) => {}
            }
        }
        Ok(ListenerSasl {
            mechanisms,
            plain,
            scram: Arc::new(scram),
            secret: rand::random(),
        })
    }

    /// Replaces where SCRAM credentials come from.
    pub fn with_scram_credentials(mut self, source: Arc<dyn ScramCredentials>) -> ListenerSasl {
        self.scram = source;
        self
    }

    /// Puts `dynamic` (credentials set at run time with
    /// AlterUserScramCredentials) in front of the listener's SCRAM users:
    /// a user and mechanism it knows is checked against it alone, others
    /// against the static JAAS users.
    pub fn with_dynamic_scram(mut self, dynamic: Arc<dyn ScramCredentials>) -> ListenerSasl {
        self.scram = Arc::new(LayeredScramCredentials {
            first: dynamic,
            then: self.scram,
        });
        self
    }

    /// Starts an exchange with `mechanism`; None when the listener does
    /// not offer it. `server_nonce` is used by SCRAM (random, printable,
    /// without `,`).
    pub fn start(&self, mechanism: Mechanism, server_nonce: String) -> Option<Exchange> {
        if !self.mechanisms.contains(&mechanism) {
            return None;
        }
        let kind = match mechanism.scram_hash() {
            None => Kind::Plain,
            Some(hash) => Kind::Scram(Box::new(ScramServer::new(hash, server_nonce, self.secret))),
        };
        Some(Exchange {
            kind,
            plain: self.plain.clone(),
            scram: self.scram.clone(),
        })
    }
}

#[derive(Debug)]
enum Kind {
    Plain,
    Scram(Box<ScramServer>),
}

/// One authentication in progress on a connection.
#[derive(Debug)]
pub struct Exchange {
    kind: Kind,
    plain: PlainUsers,
    scram: Arc<dyn ScramCredentials>,
}

impl Exchange {
    /// Takes the client's next message.
    pub fn step(&mut self, message: &[u8]) -> Result<SaslStep, SaslError> {
        match &mut self.kind {
            Kind::Plain => self.plain.authenticate(message).map(|user| SaslStep::Done {
                user,
                response: Vec::new(),
            }),
            Kind::Scram(server) => Ok(match server.step(message, self.scram.as_ref())? {
                ScramStep::Continue(r) => SaslStep::Continue(r),
                ScramStep::Done { user, response } => SaslStep::Done { user, response },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<ListenerSasl, String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ListenerSasl::parse("SASL_PLAINTEXT", &move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn mechanisms_and_jaas_per_listener() {
        let s = settings(&[
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512, PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"p\";",
            ),
            (
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required user_b=\"q\";",
            ),
        ])
        .unwrap();
        assert_eq!(s.mechanisms, [Mechanism::ScramSha512, Mechanism::Plain]);
        assert!(s.start(Mechanism::ScramSha256, "n".into()).is_none());
        let mut e = s.start(Mechanism::Plain, String::new()).unwrap();
        assert!(matches!(e.step(b"\0a\0p"), Ok(SaslStep::Done { .. })));
        let mut e = s.start(Mechanism::ScramSha512, "n".into()).unwrap();
        assert!(matches!(e.step(b"n,,n=b,r=c"), Ok(SaslStep::Continue(_))));
    }

    #[test]
    fn refused_settings() {
        for (pairs, why) in [
            (vec![], "needs sasl.enabled.mechanisms"),
            (
                vec![("sasl.enabled.mechanisms", "GSSAPI")],
                "GSSAPI is not served",
            ),
            (
                vec![("sasl.enabled.mechanisms", "plain")],
                "plain is not served",
            ),
            (
                vec![("sasl.enabled.mechanisms", "PLAIN")],
                "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set",
            ),
            (
                vec![
                    ("sasl.enabled.mechanisms", "PLAIN"),
                    (
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                    ),
                ],
                "is not org.apache.kafka.common.security.plain.PlainLoginModule",
            ),
            (
                vec![
                    ("sasl.enabled.mechanisms", "PLAIN"),
                    (
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                        "X required",
                    ),
                ],
                "missing ';'",
            ),
        ] {
            let e = settings(&pairs).unwrap_err();
            assert!(e.contains(why), "{pairs:?}: {e}");
        }
    }
}
