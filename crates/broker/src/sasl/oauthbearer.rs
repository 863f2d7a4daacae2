//! SASL/OAUTHBEARER (RFC 7628) as Kafka's broker serves it (KIP-255,
//! KIP-768): the client sends a bearer token, a JWT, in its first message;
//! the listener's [`TokenValidator`] decides whether it is acceptable and
//! whose it is.
//!
//! ```text
//! client   n,[a=<authzid>],\x01auth=Bearer <jwt>\x01[<key>=<value>\x01]*\x01
//! server   (empty: authenticated as User:<sub>)
//!
//! or, when the token is refused:
//! server   {"status":"invalid_token"}        (a challenge, no error code)
//! client   \x01
//! server   SASL_AUTHENTICATION_FAILED, message {"status":"invalid_token"}
//! ```
//!
//! The error status goes to the client as a challenge first because RFC
//! 7628 says so; the client acknowledges with `\x01` and only then is the
//! exchange failed, with the same JSON as the error message. Kafka's
//! clients and librdkafka both expect exactly this. Weir is stricter than
//! Kafka in one way: after the error challenge the exchange is over, a
//! second token on the same connection is not looked at.
//!
//! Two validators exist, chosen per listener ([`OAuthBearerSettings`]):
//! signed JWTs checked against a JWKS file ([`jwks`], the default once
//! `sasl.oauthbearer.jwks.endpoint.url` is set) and, only when the
//! listener's `oauthbearer.sasl.server.callback.handler.class` names
//! Kafka's unsecured validator, unsigned tokens ([`unsecured`]; for tests).
//! Kafka falls back to the unsecured validator when nothing is configured;
//! weir refuses to start instead.
//!
//! No I/O and no clock here: the caller passes `now`, and the JWKS file is
//! read behind [`TokenValidator`].

pub mod claims;
pub mod jwks;
pub mod unsecured;

use std::sync::Arc;

use super::jaas::JaasModule;

/// Kafka's class name for the OAUTHBEARER login module.
pub const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// Kafka's validator of unsecured (`alg: none`) tokens: weir uses it only
/// when a listener names it.
pub const UNSECURED_VALIDATOR_CLASS: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// Kafka's validator of signed tokens, under its current and its earlier
/// (KIP-768) name.
pub const JWKS_VALIDATOR_CLASSES: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];

pub const JWKS_ENDPOINT_URL: &str = "sasl.oauthbearer.jwks.endpoint.url";
pub const JWKS_ENDPOINT_REFRESH_MS: &str = "sasl.oauthbearer.jwks.endpoint.refresh.ms";
pub const CLOCK_SKEW_SECONDS: &str = "sasl.oauthbearer.clock.skew.seconds";
pub const EXPECTED_AUDIENCE: &str = "sasl.oauthbearer.expected.audience";
pub const EXPECTED_ISSUER: &str = "sasl.oauthbearer.expected.issuer";
pub const SCOPE_CLAIM_NAME: &str = "sasl.oauthbearer.scope.claim.name";
pub const SUB_CLAIM_NAME: &str = "sasl.oauthbearer.sub.claim.name";

/// Kafka 4's defaults, in its string form (also the config table's).
pub const DEFAULT_JWKS_ENDPOINT_REFRESH_MS: &str = "3600000";
pub const DEFAULT_CLOCK_SKEW_SECONDS: &str = "30";
pub const DEFAULT_SCOPE_CLAIM_NAME: &str = "scope";
pub const DEFAULT_SUB_CLAIM_NAME: &str = "sub";

/// The `sasl.oauthbearer.*` settings a listener reads: each may also be
/// given as `listener.name.<l>.<setting>` and
/// `listener.name.<l>.oauthbearer.<setting>` (the latter wins).
pub const SETTINGS: &[&str] = &[
    JWKS_ENDPOINT_URL,
    JWKS_ENDPOINT_REFRESH_MS,
    CLOCK_SKEW_SECONDS,
    EXPECTED_AUDIENCE,
    EXPECTED_ISSUER,
    SCOPE_CLAIM_NAME,
    SUB_CLAIM_NAME,
];

/// What a validator learned from an accepted token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The principal's name (the `sub` claim or the configured one),
    /// trimmed, never blank.
    pub principal: String,
    /// When the token expires, milliseconds since the epoch: the session
    /// must not outlive it (KIP-368).
    pub expires_at_ms: i64,
    pub scopes: Vec<String>,
}

/// Why a token was refused. For the broker's log: it names the check that
/// failed and the claim, never a claim's value, the token or a key id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("not a JWT: {0}")]
    Malformed(&'static str),
    /// `alg: none` where a signature is required.
    #[error("unsigned token (alg none) on a listener that requires signed tokens")]
    Unsigned,
    /// A signed token on the unsecured validator, or an algorithm weir does
    /// not verify (HMAC, unknown names).
    #[error("the token's algorithm is not accepted")]
    Algorithm,
    #[error("no key of the JWKS matches the token's key id and algorithm")]
    UnknownKey,
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token was issued in the future (iat)")]
    IssuedInFuture,
    #[error("the token expires before it was issued")]
    ExpiresBeforeIssued,
    #[error("claim {0:?} is missing")]
    MissingClaim(String),
    #[error("claim {0:?} has the wrong type, is blank or repeats a value")]
    BadClaim(String),
    #[error("audience (aud) not accepted")]
    Audience,
    #[error("issuer (iss) not accepted")]
    Issuer,
    /// The unsecured validator's `unsecuredValidatorRequiredScope`.
    #[error("scope {0:?} is required")]
    InsufficientScope(String),
}

impl TokenError {
    /// RFC 7628's error status, sent to the client as the challenge and
    /// then as the failure's message: `invalid_token` for every refusal but
    /// a missing required scope (Kafka's choice).
    pub fn status_json(&self) -> String {
        match self {
            TokenError::InsufficientScope(scope) => {
                format!(
                    "{{\"status\":\"insufficient_scope\", \"scope\":{}}}",
                    serde_json::Value::String(scope.clone())
                )
            }
            _ => "{\"status\":\"invalid_token\"}".to_string(),
        }
    }
}

/// Checks bearer tokens for a listener.
pub trait TokenValidator: std::fmt::Debug + Send + Sync {
    /// Validates `token` (the JWT's compact form) at `now_ms` (milliseconds
    /// since the epoch).
    fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError>;
}

/// Why an OAUTHBEARER exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthBearerError {
    #[error("malformed client message: {0}")]
    Malformed(&'static str),
    /// The token was refused; the client has had the error challenge.
    #[error("invalid token: {0}")]
    InvalidToken(TokenError),
    #[error("the authorization id differs from the token's principal")]
    AuthorizationId,
}

impl OAuthBearerError {
    /// What the client is told: Kafka's texts, without its names (the
    /// authorization id and principal it would quote).
    pub fn client_message(&self) -> String {
        match self {
            OAuthBearerError::Malformed(_) => "Authentication failed during authentication due to \
                 invalid credentials with SASL mechanism OAUTHBEARER"
                .to_string(),
            OAuthBearerError::InvalidToken(e) => e.status_json(),
            OAuthBearerError::AuthorizationId => "Authentication failed: Client requested an \
                 authorization id that is different from the token's principal name"
                .to_string(),
        }
    }
}

/// The client's first message, parsed (RFC 7628 section 3.1 with Kafka's
/// character rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientResponse<'a> {
    /// Empty when the GS2 header names none.
    pub authorization_id: &'a str,
    pub token: &'a str,
    /// `key=value` extensions (KIP-342): accepted and otherwise ignored,
    /// as Kafka's validators do.
    pub extensions: Vec<(&'a str, &'a str)>,
}

impl<'a> ClientResponse<'a> {
    pub fn parse(message: &'a [u8]) -> Result<ClientResponse<'a>, OAuthBearerError> {
        let malformed = OAuthBearerError::Malformed;
        let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        // GS2 header: no channel binding, optional authzid
        let rest = text
            .strip_prefix("n,")
            .ok_or(malformed("GS2 header is not n,"))?;
        let (authzid, rest) = rest.split_once(',').ok_or(malformed("GS2 header"))?;
        let authorization_id = if authzid.is_empty() {
            ""
        } else {
            let name = authzid
                .strip_prefix("a=")
                .ok_or(malformed("GS2 authzid is not a=<name>"))?;
            if !is_sasl_name(name) {
                return Err(malformed("GS2 authzid"));
            }
            name
        };
        let pairs = rest
            .strip_prefix('\u{1}')
            .and_then(|r| r.strip_suffix('\u{1}'))
            .ok_or(malformed("key-value pairs are not framed by %x01"))?;
        let mut auth = None;
        let mut extensions = Vec::new();
        if !pairs.is_empty() {
            let pairs = pairs
                .strip_suffix('\u{1}')
                .ok_or(malformed("key-value pair not ended by %x01"))?;
            for pair in pairs.split('\u{1}') {
                let (key, value) = pair
                    .split_once('=')
                    .ok_or(malformed("key-value pair without ="))?;
                if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
                    return Err(malformed("key is not letters"));
                }
                if value.is_empty()
                    || !value
                        .bytes()
                        .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b))
                {
                    return Err(malformed("value has characters RFC 7628 excludes"));
                }
                // a repeated key: the last one counts, as in Kafka
                if key == "auth" {
                    auth = Some(value);
                } else {
                    extensions.retain(|(k, _)| *k != key);
                    extensions.push((key, value));
                }
            }
        }
        let auth = auth.ok_or(malformed("no auth key"))?;
        let (scheme, token) = auth
            .split_once(' ')
            .ok_or(malformed("auth is not <scheme> <token>"))?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(malformed("auth scheme is not Bearer"));
        }
        let token = token.trim_start_matches(' ');
        if token.is_empty()
            || !token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(malformed("bearer token has characters a JWT cannot have"));
        }
        Ok(ClientResponse {
            authorization_id,
            token,
            extensions,
        })
    }
}

/// RFC 5801's `saslname`: ASCII without `=` and `,` unless escaped as
/// `=2C` / `=3D`.
fn is_sasl_name(s: &str) -> bool {
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        rest = match c {
            '=' => match rest.get(..3) {
                Some("=2C" | "=3D") => rest.get(3..).unwrap_or_default(),
                _ => return false,
            },
            ',' | '\0' => return false,
            c if !c.is_ascii() => return false,
            c => rest.get(c.len_utf8()..).unwrap_or_default(),
        };
    }
    !s.is_empty()
}

/// The answer to one client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthBearerStep {
    /// The token was refused: send this error status as a challenge; the
    /// client's `\x01` then ends the exchange with a failure.
    Challenge(Vec<u8>),
    /// Authenticated.
    Done(ValidToken),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Initial,
    /// The error challenge for this refusal was sent.
    Refused(TokenError),
    Over,
}

/// One OAUTHBEARER exchange, server side.
#[derive(Debug)]
pub struct OAuthBearerServer {
    state: State,
}

impl Default for OAuthBearerServer {
    fn default() -> Self {
        OAuthBearerServer {
            state: State::Initial,
        }
    }
}

impl OAuthBearerServer {
    /// Takes the client's next message at `now_ms`.
    pub fn step(
        &mut self,
        message: &[u8],
        now_ms: i64,
        validator: &dyn TokenValidator,
    ) -> Result<OAuthBearerStep, OAuthBearerError> {
        match std::mem::replace(&mut self.state, State::Over) {
            // `\x01` acknowledges the challenge; anything else is no
            // better: the exchange fails with the refusal either way.
            State::Refused(e) => Err(OAuthBearerError::InvalidToken(e)),
            State::Over => Err(OAuthBearerError::Malformed("message after the exchange")),
            State::Initial => {
                let response = ClientResponse::parse(message)?;
                match validator.validate(response.token, now_ms) {
                    Err(e) => {
                        let challenge = e.status_json().into_bytes();
                        self.state = State::Refused(e);
                        Ok(OAuthBearerStep::Challenge(challenge))
                    }
                    Ok(token) => {
                        if !response.authorization_id.is_empty()
                            && response.authorization_id != token.principal
                        {
                            return Err(OAuthBearerError::AuthorizationId);
                        }
                        Ok(OAuthBearerStep::Done(token))
                    }
                }
            }
        }
    }
}

/// How a listener validates tokens, from its settings: `get` as in
/// [`super::ListenerSasl::parse`], `lower` the listener's name in lower
/// case, `module` its `oauthbearer.sasl.jaas.config`.
pub struct OAuthBearerSettings;

impl OAuthBearerSettings {
    pub fn parse(
        listener: &str,
        lower: &str,
        get: &dyn Fn(&str) -> Option<String>,
        module: &JaasModule,
    ) -> Result<Arc<dyn TokenValidator>, String> {
        if module.class != OAUTHBEARER_LOGIN_MODULE {
            return Err(format!(
                "listener.name.{lower}.oauthbearer.sasl.jaas.config: login module {} is not \
                 {OAUTHBEARER_LOGIN_MODULE}",
                module.class
            ));
        }
        let handler_key =
            format!("listener.name.{lower}.oauthbearer.sasl.server.callback.handler.class");
        let handler = get(&handler_key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        let setting = |name: &str| {
            get(&format!("listener.name.{lower}.oauthbearer.{name}"))
                .or_else(|| get(name))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let url = setting(JWKS_ENDPOINT_URL);
        let secure = |url: String| -> Result<Arc<dyn TokenValidator>, String> {
            let number = |name: &str, default: &str| -> Result<i64, String> {
                let v = setting(name).unwrap_or_else(|| default.to_string());
                v.parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("{name}={v}: expected a non-negative integer"))
            };
            let claim_name = |name: &str, default: &str| setting(name).unwrap_or(default.into());
            let settings = jwks::JwtSettings {
                clock_skew_ms: number(CLOCK_SKEW_SECONDS, DEFAULT_CLOCK_SKEW_SECONDS)?
                    .saturating_mul(1000),
                audience: setting(EXPECTED_AUDIENCE)
                    .map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(String::from)
                            .collect()
                    })
                    .unwrap_or_default(),
                issuer: setting(EXPECTED_ISSUER),
                scope_claim: claim_name(SCOPE_CLAIM_NAME, DEFAULT_SCOPE_CLAIM_NAME),
                sub_claim: claim_name(SUB_CLAIM_NAME, DEFAULT_SUB_CLAIM_NAME),
            };
            let refresh_ms = number(JWKS_ENDPOINT_REFRESH_MS, DEFAULT_JWKS_ENDPOINT_REFRESH_MS)?;
            let path =
                jwks::file_url_path(&url).map_err(|e| format!("{JWKS_ENDPOINT_URL}={url}: {e}"))?;
            let file = jwks::JwksFile::open(path, refresh_ms)
                .map_err(|e| format!("{JWKS_ENDPOINT_URL}={url}: {e}"))?;
            Ok(Arc::new(jwks::JwksValidator::new(file, settings)))
        };
        match (handler.as_deref(), url) {
            (Some(UNSECURED_VALIDATOR_CLASS), None) => Ok(Arc::new(
                unsecured::UnsecuredValidator::from_jaas(module).map_err(|e| {
                    format!("listener.name.{lower}.oauthbearer.sasl.jaas.config: {e}")
                })?,
            )),
            (Some(UNSECURED_VALIDATOR_CLASS), Some(_)) => Err(format!(
                "{handler_key} names the unsecured validator, which ignores {JWKS_ENDPOINT_URL}: \
                 set only one of them"
            )),
            (Some(c), Some(url)) if JWKS_VALIDATOR_CLASSES.contains(&c) => secure(url),
            (None, Some(url)) => secure(url),
            (Some(c), None) if JWKS_VALIDATOR_CLASSES.contains(&c) => Err(format!(
                "{handler_key} validates signed tokens but {JWKS_ENDPOINT_URL} is not set \
                 (a file:// URL of a JWKS)"
            )),
            (None, None) => Err(format!(
                "listener {listener} offers OAUTHBEARER: set {JWKS_ENDPOINT_URL} to a file:// URL \
                 of a JWKS to accept signed tokens, or (tests only) set {handler_key} to \
                 {UNSECURED_VALIDATOR_CLASS} to accept unsigned ones; unlike Kafka, weir does not \
                 default to the latter"
            )),
            (Some(other), _) => Err(format!(
                "{handler_key}: {other} is not served ({} or {UNSECURED_VALIDATOR_CLASS} are)",
                JWKS_VALIDATOR_CLASSES[0]
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts the token "good" as alice until 1000, "scoped" needs a
    /// scope, anything else is expired.
    #[derive(Debug)]
    struct Fixed;

    impl TokenValidator for Fixed {
        fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
            match token {
                "good" if now_ms < 1000 => Ok(ValidToken {
                    principal: "alice".into(),
                    expires_at_ms: 1000,
                    scopes: vec![],
                }),
                "scoped" => Err(TokenError::InsufficientScope("kafka".into())),
                _ => Err(TokenError::Expired),
            }
        }
    }

    fn msg(authz: &str, pairs: &str) -> Vec<u8> {
        format!("n,{authz},\u{1}{pairs}\u{1}").into_bytes()
    }

    #[test]
    fn accepts_a_valid_token() {
        let mut s = OAuthBearerServer::default();
        let step = s
            .step(&msg("", "auth=Bearer good\u{1}"), 0, &Fixed)
            .unwrap();
        let OAuthBearerStep::Done(t) = step else {
            panic!("{step:?}")
        };
        assert_eq!((t.principal.as_str(), t.expires_at_ms), ("alice", 1000));
        // the authorization id may name the principal, and extensions are ignored
        let mut s = OAuthBearerServer::default();
        let m = msg("a=alice", "auth=bearer good\u{1}traceId=abc 1\u{1}");
        assert!(matches!(
            s.step(&m, 0, &Fixed),
            Ok(OAuthBearerStep::Done(_))
        ));
        // nothing more after the exchange
        assert!(s.step(b"\x01", 0, &Fixed).is_err());
    }

    #[test]
    fn refusal_is_a_challenge_then_a_failure() {
        for (token, json) in [
            ("good", r#"{"status":"invalid_token"}"#),
            (
                "scoped",
                r#"{"status":"insufficient_scope", "scope":"kafka"}"#,
            ),
        ] {
            let mut s = OAuthBearerServer::default();
            // "good" is expired at 1000
            let step = s
                .step(&msg("", &format!("auth=Bearer {token}\u{1}")), 1000, &Fixed)
                .unwrap();
            assert_eq!(step, OAuthBearerStep::Challenge(json.as_bytes().to_vec()));
            let e = s.step(b"\x01", 1000, &Fixed).unwrap_err();
            assert!(matches!(e, OAuthBearerError::InvalidToken(_)), "{e}");
            assert_eq!(e.client_message(), json);
        }
        // a second token after the challenge is not looked at
        let mut s = OAuthBearerServer::default();
        s.step(&msg("", "auth=Bearer bad\u{1}"), 0, &Fixed).unwrap();
        let again = s.step(&msg("", "auth=Bearer good\u{1}"), 0, &Fixed);
        assert_eq!(
            again,
            Err(OAuthBearerError::InvalidToken(TokenError::Expired))
        );
    }

    #[test]
    fn authorization_id_must_be_the_principal() {
        let mut s = OAuthBearerServer::default();
        let e = s
            .step(&msg("a=bob", "auth=Bearer good\u{1}"), 0, &Fixed)
            .unwrap_err();
        assert_eq!(e, OAuthBearerError::AuthorizationId);
        // the client is not told whose token it was
        assert!(!e.client_message().contains("alice"));
        assert!(!e.client_message().contains("bob"));
    }

    #[test]
    fn malformed_first_messages() {
        for (m, why) in [
            (&b"y,,\x01auth=Bearer good\x01\x01"[..], "GS2 header"),
            (b"p=tls-unique,,\x01auth=Bearer good\x01\x01", "GS2 header"),
            (b"n,,auth=Bearer good\x01\x01", "framed"),
            (b"n,,\x01auth=Bearer good\x01", "not ended by %x01"),
            (b"n,,\x01\x01", "no auth key"),
            (b"n,,\x01auth=Basic good\x01\x01", "not Bearer"),
            (b"n,,\x01auth=Bearer\x01\x01", "<scheme> <token>"),
            (b"n,,\x01auth=Bearer a+b\x01\x01", "characters a JWT"),
            (
                b"n,,\x01auth=Bearer good\x01k1=v\x01\x01",
                "key is not letters",
            ),
            (b"n,,\x01auth=Bearer good\x01k\x01\x01", "without ="),
            (b"n,a=x,y,\x01auth=Bearer good\x01\x01", "framed"),
            (b"n,a=,\x01auth=Bearer good\x01\x01", "GS2 authzid"),
            (b"n,,\x01auth=Bearer g\xffd\x01\x01", "UTF-8"),
        ] {
            let e = OAuthBearerServer::default().step(m, 0, &Fixed).unwrap_err();
            assert!(e.to_string().contains(why), "{m:?}: {e}");
            assert!(e.client_message().contains("OAUTHBEARER"));
        }
        let r = ClientResponse::parse(b"n,a=x=2Cy,\x01auth=Bearer  a.b.c\x01\x01").unwrap();
        assert_eq!((r.authorization_id, r.token), ("x=2Cy", "a.b.c"));
    }
}
