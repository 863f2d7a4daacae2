//! Signed tokens checked against a JWKS file, as Kafka's
//! `OAuthBearerValidatorCallbackHandler` (`BrokerJwtValidator`) checks them
//! against `sasl.oauthbearer.jwks.endpoint.url`:
//!
//! - the signature, with the key the header's `kid` names (or the only
//!   key fitting the algorithm when there is no `kid`); RSA (RS*, PS*),
//!   ECDSA (ES256, ES384) and Ed25519 keys. `alg: none` and HMAC are
//!   refused: a public key set holds no shared secrets;
//! - `exp` and `iat` present, `exp` not past and `nbf` (if present)
//!   reached, both give or take `sasl.oauthbearer.clock.skew.seconds`;
//! - `aud` containing one of `sasl.oauthbearer.expected.audience`; a token
//!   that names an audience is refused when none is expected (jose4j's
//!   rule, which Kafka inherits);
//! - `iss` equal to `sasl.oauthbearer.expected.issuer` when that is set;
//! - the principal claim (`sasl.oauthbearer.sub.claim.name`) a non-blank
//!   string, the scope claim (`sasl.oauthbearer.scope.claim.name`) a
//!   string or a list of distinct non-blank strings.
//!
//! The file is read at start (a missing or unusable file stops it) and
//! looked at again (one `stat`, a read only if its modification time or
//! length changed) at most once per `sasl.oauthbearer.jwks.endpoint.refresh.ms`,
//! or at most once a second while tokens name a key it does not have, so
//! rotated keys are picked up without a restart. A file that became
//! unreadable or invalid leaves the keys read before in place.
//!
//! Only `file://` URLs are served; weir does not fetch a JWKS over HTTP.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::claims::{self, Claims};
use super::{TokenError, TokenValidator, ValidToken};

/// How often, at most, a token naming an unknown key makes the file be
/// looked at again.
pub const UNKNOWN_KEY_RECHECK_MS: i64 = 1000;

/// The claim checks of a listener (`sasl.oauthbearer.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    pub clock_skew_ms: i64,
    /// Empty: a token must not name an audience.
    pub audience: Vec<String>,
    pub issuer: Option<String>,
    pub scope_claim: String,
    pub sub_claim: String,
}

impl Default for JwtSettings {
    fn default() -> Self {
        JwtSettings {
            clock_skew_ms: 30_000,
            audience: Vec::new(),
            issuer: None,
            scope_claim: "scope".into(),
            sub_claim: "sub".into(),
        }
    }
}

/// Why a JWKS could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("not a JWKS (a JSON object with a \"keys\" list): {0}")]
    Json(String),
    #[error("no usable signature key (RSA, EC P-256/P-384 or Ed25519) in the JWKS")]
    NoKeys,
}

/// One verification key of the set.
struct Key {
    kid: Option<String>,
    /// The algorithms it verifies: the JWK's `alg` alone, else its family's.
    algorithms: Vec<Algorithm>,
    key: DecodingKey,
}

/// The usable keys of a JWKS document.
pub struct KeySet {
    keys: Vec<Key>,
    /// Entries left out (encryption keys, symmetric keys, other curves).
    pub skipped: usize,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("keys", &self.keys.len())
            .field("skipped", &self.skipped)
            .finish()
    }
}

impl KeySet {
    /// Parses a JWKS (RFC 7517 section 5). Entries weir cannot verify
    /// with are skipped; none usable is an error.
    pub fn parse(json: &[u8]) -> Result<KeySet, JwksError> {
        let doc: Value =
            serde_json::from_slice(json).map_err(|e| JwksError::Json(e.to_string()))?;
        let entries = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| JwksError::Json("no \"keys\" list".into()))?;
        let mut set = KeySet {
            keys: Vec::new(),
            skipped: 0,
        };
        for entry in entries {
            match serde_json::from_value::<Jwk>(entry.clone())
                .ok()
                .and_then(|jwk| Key::from_jwk(&jwk))
            {
                Some(key) => set.keys.push(key),
                None => set.skipped += 1,
            }
        }
        if set.keys.is_empty() {
            return Err(JwksError::NoKeys);
        }
        Ok(set)
    }

    /// The key for a token signed with `alg`, named `kid`.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&Key> {
        let mut fitting = self
            .keys
            .iter()
            .filter(|k| k.algorithms.contains(&alg))
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid);
        let first = fitting.next()?;
        // without a kid, only an unambiguous key will do (jose4j's rule)
        if kid.is_none() && fitting.next().is_some() {
            return None;
        }
        Some(first)
    }
}

impl Key {
    fn from_jwk(jwk: &Jwk) -> Option<Key> {
        if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
            return None;
        }
        let family: &[Algorithm] = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => &[
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
            ],
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => &[Algorithm::ES256],
                EllipticCurve::P384 => &[Algorithm::ES384],
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                &[Algorithm::EdDSA]
            }
            _ => return None,
        };
        let algorithms = match jwk.common.key_algorithm {
            None => family.to_vec(),
            Some(a) => {
                let a = Algorithm::from_str(&a.to_string()).ok()?;
                family.contains(&a).then(|| vec![a])?
            }
        };
        Some(Key {
            kid: jwk.common.key_id.clone(),
            algorithms,
            key: DecodingKey::from_jwk(jwk).ok()?,
        })
    }
}

/// Validates a signed token against `keys` at `now_ms`. Pure.
pub fn validate_signed(
    token: &str,
    keys: &KeySet,
    settings: &JwtSettings,
    now_ms: i64,
) -> Result<ValidToken, TokenError> {
    if token.split('.').count() != 3 {
        return Err(TokenError::Malformed("not three dot-separated parts"));
    }
    let header_part = token.split('.').next().unwrap_or_default();
    let header = claims::json_part(header_part, "header is not base64url JSON")?;
    let alg = match header.get("alg") {
        Some(Value::String(a)) if a == "none" => return Err(TokenError::Unsigned),
        Some(Value::String(a)) => Algorithm::from_str(a).map_err(|_| TokenError::Algorithm)?,
        _ => return Err(TokenError::Malformed("header without alg")),
    };
    if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
        return Err(TokenError::Algorithm);
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(k)) => Some(k.as_str()),
        Some(_) => return Err(TokenError::Malformed("kid is not a string")),
    };
    let key = keys.find(kid, alg).ok_or(TokenError::UnknownKey)?;
    let mut validation = Validation::new(alg);
    // the claims are checked below, with the injected clock
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    let claims: Claims = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidSignature
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidEddsaKey
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidKeyFormat => TokenError::BadSignature,
            ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => TokenError::Algorithm,
            _ => TokenError::Malformed("payload is not base64url JSON"),
        })?
        .claims;
    check_claims(&claims, settings, now_ms)
}

fn check_claims(
    claims: &Claims,
    settings: &JwtSettings,
    now_ms: i64,
) -> Result<ValidToken, TokenError> {
    let skew = settings.clock_skew_ms;
    let expires_at_ms = claims::required_date_ms(claims, "exp")?;
    let issued_at_ms = claims::required_date_ms(claims, "iat")?;
    if expires_at_ms < 0 {
        return Err(TokenError::BadClaim("exp".into()));
    }
    if issued_at_ms < 0 {
        return Err(TokenError::BadClaim("iat".into()));
    }
    if now_ms.saturating_sub(skew) >= expires_at_ms {
        return Err(TokenError::Expired);
    }
    if claims::date_ms(claims, "nbf")?.is_some_and(|nbf| now_ms.saturating_add(skew) < nbf) {
        return Err(TokenError::NotYetValid);
    }
    let audiences = claims::audiences(claims)?;
    // no audience on either side is the only way to pass without a match
    let accepted = audiences
        .iter()
        .any(|a| settings.audience.iter().any(|e| e == a));
    if !accepted && (!audiences.is_empty() || !settings.audience.is_empty()) {
        return Err(TokenError::Audience);
    }
    if let Some(issuer) = &settings.issuer
        && claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str())
    {
        return Err(TokenError::Issuer);
    }
    let principal = claims::principal(claims, &settings.sub_claim)?;
    let scopes = claims::scopes(claims, &settings.scope_claim, false)?;
    Ok(ValidToken {
        principal,
        expires_at_ms,
        scopes,
    })
}

/// The local path of a `file:` URL (`file:///p`, `file://localhost/p`,
/// `file:/p`), percent-decoded.
pub fn file_url_path(url: &str) -> Result<PathBuf, String> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Err(
            "only file:// URLs are served: weir does not fetch a JWKS over HTTP(S); \
             save it to a file and give file:///<path>"
                .into(),
        );
    }
    let rest = url
        .get(..5)
        .filter(|s| s.eq_ignore_ascii_case("file:"))
        .and_then(|_| url.get(5..))
        .ok_or("not a file:// URL")?;
    let path = if let Some(r) = rest.strip_prefix("//") {
        let (host, path) = r.split_at(r.find('/').ok_or("no path")?);
        if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
            return Err(format!("host {host:?}: only local files are served"));
        }
        path
    } else if rest.starts_with('/') {
        rest
    } else {
        return Err("not an absolute path".into());
    };
    percent_decode(path).map(PathBuf::from)
}

fn percent_decode(s: &str) -> Result<String, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next(), bytes.next()];
            let [Some(h), Some(l)] = hex else {
                return Err("bad %-escape".into());
            };
            let hex = std::str::from_utf8(&[h, l])
                .map_err(|_| "bad %-escape")?
                .to_string();
            out.push(u8::from_str_radix(&hex, 16).map_err(|_| "bad %-escape")?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).map_err(|_| "path is not UTF-8".into())
}

/// What tells one version of the file from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileVersion {
    modified: Option<SystemTime>,
    len: u64,
}

#[derive(Debug)]
struct Cache {
    keys: Arc<KeySet>,
    version: FileVersion,
    /// When the file was last looked at; None: not since it was read.
    checked_at_ms: Option<i64>,
}

/// Whether to look at the file again at `now_ms`.
fn recheck_due(
    checked_at_ms: Option<i64>,
    now_ms: i64,
    refresh_ms: i64,
    unknown_key: bool,
) -> bool {
    let Some(t) = checked_at_ms else {
        return true;
    };
    let since = now_ms.saturating_sub(t);
    // a clock that went back counts as due
    since < 0
        || since >= refresh_ms
        || (unknown_key && since >= UNKNOWN_KEY_RECHECK_MS.min(refresh_ms))
}

/// A JWKS file and the keys last read from it.
#[derive(Debug)]
pub struct JwksFile {
    path: PathBuf,
    refresh_ms: i64,
    cache: Mutex<Cache>,
}

fn read(path: &Path) -> Result<(FileVersion, KeySet), JwksError> {
    let err = |source| JwksError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(err)?;
    let bytes = std::fs::read(path).map_err(err)?;
    let version = FileVersion {
        modified: meta.modified().ok(),
        len: meta.len(),
    };
    Ok((version, KeySet::parse(&bytes)?))
}

impl JwksFile {
    /// Reads the file; an unreadable file or one without usable keys is an
    /// error.
    pub fn open(path: PathBuf, refresh_ms: i64) -> Result<JwksFile, JwksError> {
        let (version, keys) = read(&path)?;
        Ok(JwksFile {
            path,
            refresh_ms,
            cache: Mutex::new(Cache {
                keys: Arc::new(keys),
                version,
                checked_at_ms: None,
            }),
        })
    }

    /// The current keys, looking at the file again first when that is due.
    /// The file is looked at without the cache's lock, through
    /// [`crate::handler::blocking`] (authentication runs on the async
    /// workers): other logins meanwhile use the keys read before.
    pub fn keys(&self, now_ms: i64, unknown_key: bool) -> Arc<KeySet> {
        let (keys, version) = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if !recheck_due(cache.checked_at_ms, now_ms, self.refresh_ms, unknown_key) {
                return cache.keys.clone();
            }
            cache.checked_at_ms = Some(now_ms);
            (cache.keys.clone(), cache.version)
        };
        let reread = crate::handler::blocking(|| {
            let current = std::fs::metadata(&self.path).map(|m| FileVersion {
                modified: m.modified().ok(),
                len: m.len(),
            });
            if matches!(current, Ok(v) if v == version) {
                return None;
            }
            Some(read(&self.path))
        });
        match reread {
            None => keys,
            Some(Ok((version, keys))) => {
                tracing::info!(
                    path = %self.path.display(),
                    keys = keys.keys.len(),
                    skipped = keys.skipped,
                    "OAUTHBEARER JWKS reloaded"
                );
                let keys = Arc::new(keys);
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                cache.keys = keys.clone();
                cache.version = version;
                keys
            }
            Some(Err(e)) => {
                tracing::warn!("OAUTHBEARER JWKS not reloaded, the keys read before stay: {e}");
                keys
            }
        }
    }
}

/// Signed tokens against a JWKS file.
#[derive(Debug)]
pub struct JwksValidator {
    file: JwksFile,
    settings: JwtSettings,
}

impl JwksValidator {
    pub fn new(file: JwksFile, settings: JwtSettings) -> JwksValidator {
        JwksValidator { file, settings }
    }
}

impl TokenValidator for JwksValidator {
    fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
        let keys = self.file.keys(now_ms, false);
        match validate_signed(token, &keys, &self.settings, now_ms) {
            Err(TokenError::UnknownKey) => {
                let again = self.file.keys(now_ms, true);
                if Arc::ptr_eq(&again, &keys) {
                    return Err(TokenError::UnknownKey);
                }
                validate_signed(token, &again, &self.settings, now_ms)
            }
            r => r,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
