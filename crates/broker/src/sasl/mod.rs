//! SASL authentication (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)
//! as pure exchanges: bytes from the client in, bytes to send and finally a
//! user name out. The connection drives them through Kafka's SaslHandshake
//! and SaslAuthenticate requests. Nothing here does I/O but OAUTHBEARER's
//! look at its JWKS file (see [`oauthbearer::jwks`]); the clock is the
//! listener's [`Clock`], replaceable in tests.
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
//! assert_eq!(
//!     step,
//!     SaslStep::Done { user: "alice".into(), response: vec![], expires_at_ms: None }
//! );
//! ```

pub mod gate;
pub mod jaas;
pub mod oauthbearer;
pub mod plain;
pub mod scram;
pub mod throttle;

use std::sync::Arc;

use oauthbearer::{OAuthBearerError, OAuthBearerServer, OAuthBearerStep, TokenValidator};
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
    OAuthBearer,
}

impl Mechanism {
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
        Mechanism::OAuthBearer,
    ];

    /// The IANA name clients send.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Mechanism names are case-sensitive (Kafka compares them exactly).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    fn scram_hash(self) -> Option<ScramHash> {
        match self {
            Mechanism::Plain | Mechanism::OAuthBearer => None,
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
    #[error(transparent)]
    OAuthBearer(#[from] OAuthBearerError),
}

impl SaslError {
    fn failed(reason: &'static str) -> SaslError {
        SaslError::Failed(reason)
    }

    fn malformed(reason: &'static str) -> SaslError {
        SaslError::Malformed(reason)
    }

    /// What the client is told: for PLAIN and SCRAM the same for every
    /// failure, so it learns nothing about which users exist or which check
    /// failed; for OAUTHBEARER Kafka's texts (RFC 7628's error status for a
    /// refused token), which say nothing about the token either.
    pub fn client_message(&self) -> String {
        match self {
            SaslError::OAuthBearer(e) => e.client_message(),
            _ => "Authentication failed: Invalid username or password".to_string(),
        }
    }
}

/// The answer to one client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send these bytes and wait for the client's next message.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send `response` (possibly empty).
    /// `expires_at_ms`: when the credential stops being valid (an
    /// OAUTHBEARER token's `exp`, milliseconds since the epoch), so that
    /// re-authentication can end the session then; None for passwords.
    Done {
        user: String,
        response: Vec<u8>,
        expires_at_ms: Option<i64>,
    },
}

/// Where an exchange gets the time: milliseconds since the epoch.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> i64 + Send + Sync>);

impl Clock {
    pub fn new(now_ms: impl Fn() -> i64 + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(now_ms))
    }

    /// The system clock.
    pub fn system() -> Clock {
        Clock::new(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        })
    }

    pub fn now_ms(&self) -> i64 {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
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
    /// Set when OAUTHBEARER is among the mechanisms.
    oauthbearer: Option<Arc<dyn TokenValidator>>,
    clock: Clock,
    /// `connections.max.reauth.ms` (KIP-368): how long an authenticated
    /// session lasts before the client must re-authenticate; 0: forever.
    pub max_reauth_ms: i64,
}

impl PartialEq for ListenerSasl {
    /// Same mechanisms (the credentials are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.mechanisms == other.mechanisms
    }
}

impl Eq for ListenerSasl {}

/// `sasl.*` settings with a per-listener form
/// (`listener.name.<l>.<setting>`).
pub const SASL_SETTINGS: &[&str] = &[
    "sasl.enabled.mechanisms",
    oauthbearer::JWKS_ENDPOINT_URL,
    oauthbearer::JWKS_ENDPOINT_REFRESH_MS,
    oauthbearer::CLOCK_SKEW_SECONDS,
    oauthbearer::EXPECTED_AUDIENCE,
    oauthbearer::EXPECTED_ISSUER,
    oauthbearer::SCOPE_CLAIM_NAME,
    oauthbearer::SUB_CLAIM_NAME,
];

/// Settings a listener takes per mechanism,
/// `listener.name.<l>.<mechanism>.<setting>`, besides `sasl.jaas.config`:
/// which of them a mechanism reads.
pub fn mechanism_setting(mechanism: Mechanism, setting: &str) -> bool {
    setting == "sasl.jaas.config"
        || (mechanism == Mechanism::OAuthBearer
            && (setting == "sasl.server.callback.handler.class"
                || oauthbearer::SETTINGS.contains(&setting)))
}

impl ListenerSasl {
    /// Reads the SASL settings of `listener` (upper case). `get(name)`
    /// returns a setting's value: for `sasl.enabled.mechanisms` the caller
    /// looks up `listener.name.<l>.sasl.enabled.mechanisms` first; the
    /// JAAS settings are asked for under their full per-listener names,
    /// `listener.name.<l>.<mechanism>.sasl.jaas.config`, as Kafka reads
    /// them for a broker.
    ///
    /// OAUTHBEARER needs an `OAuthBearerLoginModule` and either a JWKS
    /// (`sasl.oauthbearer.jwks.endpoint.url`) or Kafka's unsecured
    /// validator named explicitly ([`oauthbearer::OAuthBearerSettings`]).
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
                     (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)"
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
        let mut oauthbearer = None;
        for m in &mechanisms {
            let key = format!(
                "listener.name.{lower}.{}.sasl.jaas.config",
                m.name().to_ascii_lowercase()
            );
            let module = match get(&key).filter(|v| !v.trim().is_empty()) {
                Some(text) => Some(jaas::parse(&text).map_err(|e| format!("{key}: {e}"))?),
                None => None,
            };
            if *m == Mechanism::OAuthBearer {
                let module = module.ok_or_else(|| {
                    format!("listener {listener} offers OAUTHBEARER but {key} is not set")
                })?;
                oauthbearer = Some(oauthbearer::OAuthBearerSettings::parse(
                    listener, &lower, get, &module,
                )?);
                continue;
            }
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
            oauthbearer,
            clock: Clock::system(),
            max_reauth_ms: get("connections.max.reauth.ms")
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
                .max(0),
        })
    }

    /// How long a session that authenticated at `now_ms` with a
    /// credential valid until `expires_at_ms` lasts (KIP-368: the smaller
    /// of `connections.max.reauth.ms` and the credential's remaining life);
    /// None without `connections.max.reauth.ms`, as in Kafka.
    pub fn session_lifetime_ms(&self, now_ms: i64, expires_at_ms: Option<i64>) -> Option<i64> {
        (self.max_reauth_ms > 0).then(|| {
            let left = expires_at_ms.map_or(i64::MAX, |e| e.saturating_sub(now_ms).max(0));
            self.max_reauth_ms.min(left)
        })
    }

    /// Replaces the clock exchanges read (tests).
    pub fn with_clock(mut self, clock: Clock) -> ListenerSasl {
        self.clock = clock;
        self
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
        let kind = match (mechanism, mechanism.scram_hash()) {
            (Mechanism::OAuthBearer, _) => {
                Kind::OAuthBearer(OAuthBearerServer::default(), self.oauthbearer.clone()?)
            }
            (_, None) => Kind::Plain,
            (_, Some(hash)) => {
                Kind::Scram(Box::new(ScramServer::new(hash, server_nonce, self.secret)))
            }
        };
        Some(Exchange {
            kind,
            plain: self.plain.clone(),
            scram: self.scram.clone(),
            clock: self.clock.clone(),
        })
    }
}

#[derive(Debug)]
enum Kind {
    Plain,
    Scram(Box<ScramServer>),
    OAuthBearer(OAuthBearerServer, Arc<dyn TokenValidator>),
}

/// One authentication in progress on a connection.
#[derive(Debug)]
pub struct Exchange {
    kind: Kind,
    plain: PlainUsers,
    scram: Arc<dyn ScramCredentials>,
    clock: Clock,
}

impl Exchange {
    /// Takes the client's next message.
    pub fn step(&mut self, message: &[u8]) -> Result<SaslStep, SaslError> {
        match &mut self.kind {
            Kind::Plain => self.plain.authenticate(message).map(|user| SaslStep::Done {
                user,
                response: Vec::new(),
                expires_at_ms: None,
            }),
            Kind::Scram(server) => Ok(match server.step(message, self.scram.as_ref())? {
                ScramStep::Continue(r) => SaslStep::Continue(r),
                ScramStep::Done { user, response } => SaslStep::Done {
                    user,
                    response,
                    expires_at_ms: None,
                },
            }),
            Kind::OAuthBearer(server, validator) => {
                let now_ms = self.clock.now_ms();
                Ok(match server.step(message, now_ms, validator.as_ref())? {
                    OAuthBearerStep::Challenge(c) => SaslStep::Continue(c),
                    OAuthBearerStep::Done(token) => SaslStep::Done {
                        user: token.principal,
                        response: Vec::new(),
                        expires_at_ms: Some(token.expires_at_ms),
                    },
                })
            }
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

    const OAUTH_JAAS: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;";
    const JAAS_KEY: &str = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config";
    const HANDLER_KEY: &str =
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class";

    #[test]
    fn oauthbearer_settings_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = format!("file://{}/missing.json", dir.path().display());
        let m = ("sasl.enabled.mechanisms", "OAUTHBEARER");
        let jaas = (JAAS_KEY, OAUTH_JAAS);
        for (pairs, why) in [
            (vec![m], "oauthbearer.sasl.jaas.config is not set"),
            (
                vec![m, (JAAS_KEY, "org.example.Other required;")],
                "is not org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
            ),
            // neither validator: say what to set, and that Kafka's default differs
            (vec![m, jaas], "set sasl.oauthbearer.jwks.endpoint.url"),
            (vec![m, jaas], "weir does not default"),
            (
                vec![
                    m,
                    jaas,
                    ("sasl.oauthbearer.jwks.endpoint.url", "https://idp/jwks"),
                ],
                "only file:// URLs are served",
            ),
            (
                vec![m, jaas, ("sasl.oauthbearer.jwks.endpoint.url", &missing)],
                "cannot read",
            ),
            (
                vec![
                    m,
                    jaas,
                    (HANDLER_KEY, oauthbearer::JWKS_VALIDATOR_CLASSES[0]),
                ],
                "sasl.oauthbearer.jwks.endpoint.url is not set",
            ),
            (
                vec![
                    m,
                    jaas,
                    (HANDLER_KEY, oauthbearer::UNSECURED_VALIDATOR_CLASS),
                    ("sasl.oauthbearer.jwks.endpoint.url", "file:///x"),
                ],
                "set only one of them",
            ),
            (
                vec![m, jaas, (HANDLER_KEY, "org.example.Handler")],
                "org.example.Handler is not served",
            ),
        ] {
            let e = settings(&pairs).unwrap_err();
            assert!(e.contains(why), "{pairs:?}: {e}");
        }
    }

    /// Signed tokens through a listener, with its settings global and
    /// per listener and mechanism, and a clock the test sets.
    #[test]
    fn oauthbearer_signed_tokens_through_a_listener() {
        use oauthbearer::jwks::tests::{TestKey, jwks};
        use serde_json::json;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let key = TestKey::es256("k1");
        std::fs::write(&path, jwks(&[&key])).unwrap();
        let url = format!("file://{}", path.display());
        let s = settings(&[
            ("sasl.enabled.mechanisms", "OAUTHBEARER"),
            (JAAS_KEY, OAUTH_JAAS),
            ("sasl.oauthbearer.jwks.endpoint.url", &url),
            ("sasl.oauthbearer.expected.audience", "kafka, other"),
            (
                "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.sub.claim.name",
                "email",
            ),
        ])
        .unwrap()
        .with_clock(Clock::new(|| 1_000_000_000));
        let token = |exp: i64| {
            key.sign(&json!({"email": "alice", "aud": "kafka", "iat": 999_000, "exp": exp}))
        };
        let first = |t: &str| format!("n,,\x01auth=Bearer {t}\x01\x01").into_bytes();
        let mut e = s.start(Mechanism::OAuthBearer, String::new()).unwrap();
        assert_eq!(
            e.step(&first(&token(1_000_100))),
            Ok(SaslStep::Done {
                user: "alice".into(),
                response: vec![],
                expires_at_ms: Some(1_000_100_000),
            })
        );
        // expired (beyond the 30 s skew): the error status, then the failure
        let mut e = s.start(Mechanism::OAuthBearer, String::new()).unwrap();
        let json = br#"{"status":"invalid_token"}"#.to_vec();
        assert_eq!(
            e.step(&first(&token(999_970))),
            Ok(SaslStep::Continue(json))
        );
        let err = e.step(b"\x01").unwrap_err();
        assert_eq!(err.client_message(), r#"{"status":"invalid_token"}"#);
        assert!(err.to_string().contains("expired"), "{err}");
    }

    #[test]
    fn oauthbearer_unsecured_only_when_named() {
        use base64::Engine;
        let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let s = settings(&[
            ("sasl.enabled.mechanisms", "OAUTHBEARER,PLAIN"),
            (JAAS_KEY, OAUTH_JAAS),
            (HANDLER_KEY, oauthbearer::UNSECURED_VALIDATOR_CLASS),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"p\";",
            ),
        ])
        .unwrap()
        .with_clock(Clock::new(|| 5_000));
        assert_eq!(s.mechanisms, [Mechanism::OAuthBearer, Mechanism::Plain]);
        let token = format!(
            "{}.{}.",
            b.encode(r#"{"alg":"none"}"#),
            b.encode(r#"{"sub":"alice","exp":10}"#)
        );
        let mut e = s.start(Mechanism::OAuthBearer, String::new()).unwrap();
        let step = e.step(format!("n,,\x01auth=Bearer {token}\x01\x01").as_bytes());
        assert!(
            matches!(&step, Ok(SaslStep::Done { user, .. }) if user == "alice"),
            "{step:?}"
        );
    }
}
