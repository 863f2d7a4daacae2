//! Signed-token validation with keys made here: an RSA key (rsa crate) and
//! EC P-256 keys (rcgen), their JWKS written to a temporary file.

use super::*;
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::json;

/// A signing key and its public JWK.
pub(crate) struct TestKey {
    pub alg: Algorithm,
    pub kid: String,
    pub encoding: EncodingKey,
    pub jwk: Value,
}

impl TestKey {
    pub fn es256(kid: &str) -> TestKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let encoding = EncodingKey::from_ec_der(&pair.serialize_der());
        TestKey::with(Algorithm::ES256, kid, encoding)
    }

    pub fn rs256(kid: &str) -> TestKey {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        let key = rsa::PrivateKey::new(&mut rand::rng(), 2048).unwrap();
        let der = key.to_pkcs1_der().unwrap();
        TestKey::with(
            Algorithm::RS256,
            kid,
            EncodingKey::from_rsa_der(der.as_bytes()),
        )
    }

    fn with(alg: Algorithm, kid: &str, encoding: EncodingKey) -> TestKey {
        let mut jwk =
            serde_json::to_value(Jwk::from_encoding_key(&encoding, alg).unwrap()).unwrap();
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        TestKey {
            alg,
            kid: kid.to_string(),
            encoding,
            jwk,
        }
    }

    /// A token with `claims`, signed by this key, its kid in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        encode(&header, claims, &self.encoding).unwrap()
    }
}

pub(crate) fn jwks(keys: &[&TestKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}).to_string()
}

/// Now, in milliseconds, for the tests: 2026-01-01.
const NOW_MS: i64 = 1_767_225_600_000;
const NOW_S: i64 = NOW_MS / 1000;

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iat": NOW_S - 10, "exp": NOW_S + 300, "scope": "kafka"})
}

fn set(keys: &[&TestKey]) -> KeySet {
    KeySet::parse(jwks(keys).as_bytes()).unwrap()
}

#[test]
fn accepts_rs256_and_es256() {
    let rsa = TestKey::rs256("r1");
    let ec = TestKey::es256("e1");
    let keys = set(&[&rsa, &ec]);
    let s = JwtSettings::default();
    for k in [&rsa, &ec] {
        let t = validate_signed(&k.sign(&claims("alice")), &keys, &s, NOW_MS).unwrap();
        assert_eq!(t.principal, "alice");
        assert_eq!(t.expires_at_ms, (NOW_S + 300) * 1000);
        assert_eq!(t.scopes, ["kafka"]);
    }
    // without a kid, the one key fitting the algorithm
    let mut header = Header::new(Algorithm::ES256);
    header.kid = None;
    let t = encode(&header, &claims("bob"), &ec.encoding).unwrap();
    assert_eq!(
        validate_signed(&t, &keys, &s, NOW_MS).unwrap().principal,
        "bob"
    );
}

#[test]
fn refusals() {
    let good = TestKey::es256("k1");
    let other = TestKey::es256("k1"); // same kid, another key
    let keys = set(&[&good]);
    let s = JwtSettings {
        audience: vec!["kafka".into(), "other".into()],
        issuer: Some("https://issuer".into()),
        ..JwtSettings::default()
    };
    let base = json!({
        "sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 300,
        "aud": "kafka", "iss": "https://issuer"
    });
    let with = |k: &str, v: Value| {
        let mut c = base.clone();
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v;
        }
        c
    };
    // accepted as is, and with the audience in a list
    validate_signed(&good.sign(&base), &keys, &s, NOW_MS).unwrap();
    validate_signed(
        &good.sign(&with("aud", json!(["x", "other"]))),
        &keys,
        &s,
        NOW_MS,
    )
    .unwrap();
    // within the 30 s skew
    validate_signed(
        &good.sign(&with("exp", json!(NOW_S - 29))),
        &keys,
        &s,
        NOW_MS,
    )
    .unwrap();

    let unsigned = {
        use base64::Engine;
        let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.",
            b.encode(json!({"alg": "none"}).to_string()),
            b.encode(base.to_string())
        )
    };
    let hmac = encode(
        &Header::new(Algorithm::HS256),
        &base,
        &EncodingKey::from_secret(b"secret").unwrap(),
    )
    .unwrap();
    let mut tampered = good.sign(&base);
    {
        use base64::Engine;
        let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<&str> = tampered.split('.').collect();
        let forged = b.encode(with("sub", json!("mallory")).to_string());
        tampered = format!("{}.{forged}.{}", parts[0], parts[2]);
    }
    let unknown = TestKey::es256("k2");
    for (token, want) in [
        (
            good.sign(&with("exp", json!(NOW_S - 30))),
            TokenError::Expired,
        ),
        (
            good.sign(&with("exp", Value::Null)),
            TokenError::MissingClaim("exp".into()),
        ),
        (
            good.sign(&with("iat", Value::Null)),
            TokenError::MissingClaim("iat".into()),
        ),
        (
            good.sign(&with("nbf", json!(NOW_S + 31))),
            TokenError::NotYetValid,
        ),
        (
            good.sign(&with("aud", json!("elsewhere"))),
            TokenError::Audience,
        ),
        (good.sign(&with("aud", Value::Null)), TokenError::Audience),
        (
            good.sign(&with("iss", json!("https://evil"))),
            TokenError::Issuer,
        ),
        (good.sign(&with("iss", Value::Null)), TokenError::Issuer),
        (
            good.sign(&with("sub", Value::Null)),
            TokenError::MissingClaim("sub".into()),
        ),
        (
            good.sign(&with("sub", json!(" "))),
            TokenError::BadClaim("sub".into()),
        ),
        (
            good.sign(&with("scope", json!(["a", "a"]))),
            TokenError::BadClaim("scope".into()),
        ),
        (other.sign(&base), TokenError::BadSignature),
        (tampered, TokenError::BadSignature),
        (unknown.sign(&base), TokenError::UnknownKey),
        (unsigned, TokenError::Unsigned),
        (hmac, TokenError::Algorithm),
        (
            "a.b".into(),
            TokenError::Malformed("not three dot-separated parts"),
        ),
    ] {
        assert_eq!(validate_signed(&token, &keys, &s, NOW_MS), Err(want));
    }
    // a token naming an audience when none is expected (jose4j's rule)
    let no_aud = JwtSettings::default();
    let e = validate_signed(&good.sign(&base), &keys, &no_aud, NOW_MS);
    assert_eq!(e, Err(TokenError::Audience));
    validate_signed(
        &good.sign(&with("aud", Value::Null)),
        &keys,
        &no_aud,
        NOW_MS,
    )
    .unwrap();
}

#[test]
fn claim_names_are_configurable() {
    let k = TestKey::es256("k");
    let keys = set(&[&k]);
    let s = JwtSettings {
        sub_claim: "email".into(),
        scope_claim: "scp".into(),
        ..JwtSettings::default()
    };
    let c = json!({"email": "a@x", "iat": NOW_S, "exp": NOW_S + 60, "scp": ["r", "w"]});
    let t = validate_signed(&k.sign(&c), &keys, &s, NOW_MS).unwrap();
    assert_eq!(
        (t.principal.as_str(), t.scopes),
        ("a@x", vec!["r".into(), "w".into()])
    );
    assert_eq!(
        validate_signed(&k.sign(&claims("alice")), &keys, &s, NOW_MS),
        Err(TokenError::MissingClaim("email".into()))
    );
}

#[test]
fn jwks_parsing_skips_what_cannot_verify() {
    let k = TestKey::es256("k");
    let doc = json!({"keys": [
        k.jwk,
        {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
        {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB", "kid": "enc"},
        {"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"},
        {"kty": "XYZ"}
    ]});
    let set = KeySet::parse(doc.to_string().as_bytes()).unwrap();
    assert_eq!((set.keys.len(), set.skipped), (1, 4));
    assert!(matches!(
        KeySet::parse(b"{\"keys\": []}"),
        Err(JwksError::NoKeys)
    ));
    assert!(matches!(KeySet::parse(b"[]"), Err(JwksError::Json(_))));
    assert!(matches!(KeySet::parse(b"{"), Err(JwksError::Json(_))));
}

#[test]
fn file_urls() {
    assert_eq!(
        file_url_path("file:///etc/j.json").unwrap(),
        PathBuf::from("/etc/j.json")
    );
    assert_eq!(
        file_url_path("FILE://localhost/a%20b.json").unwrap(),
        PathBuf::from("/a b.json")
    );
    assert_eq!(file_url_path("file:/x").unwrap(), PathBuf::from("/x"));
    let e = file_url_path("https://idp/jwks").unwrap_err();
    assert!(e.contains("only file:// URLs are served"), "{e}");
    assert!(file_url_path("file://host/x").is_err());
    assert!(file_url_path("file:x").is_err());
    assert!(file_url_path("ftp://x/y").is_err());
}

#[test]
fn recheck_schedule() {
    assert!(recheck_due(None, 0, 60_000, false));
    assert!(!recheck_due(Some(0), 59_999, 60_000, false));
    assert!(recheck_due(Some(0), 60_000, 60_000, false));
    // an unknown key: at most once a second
    assert!(!recheck_due(Some(0), 999, 60_000, true));
    assert!(recheck_due(Some(0), 1000, 60_000, true));
    // a clock that went back
    assert!(recheck_due(Some(10_000), 0, 60_000, false));
    // refresh 0: every time
    assert!(recheck_due(Some(5), 5, 0, false));
}

#[test]
fn file_is_reread_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    let a = TestKey::es256("a");
    let b = TestKey::es256("b");
    std::fs::write(&path, jwks(&[&a])).unwrap();
    let v = JwksValidator::new(
        JwksFile::open(path.clone(), 60_000).unwrap(),
        JwtSettings::default(),
    );
    let tb = b.sign(&claims("bob"));
    let t0 = NOW_MS;
    assert_eq!(v.validate(&tb, t0), Err(TokenError::UnknownKey));
    // key b added: an unknown kid looks again, but not within the second
    std::fs::write(&path, jwks(&[&a, &b])).unwrap();
    assert_eq!(v.validate(&tb, t0 + 500), Err(TokenError::UnknownKey));
    assert_eq!(v.validate(&tb, t0 + 1000).unwrap().principal, "bob");
    // key a removed: seen at the next refresh, not before
    let ta = a.sign(&claims("alice"));
    std::fs::write(&path, jwks(&[&b])).unwrap();
    assert!(v.validate(&ta, t0 + 30_000).is_ok());
    assert_eq!(v.validate(&ta, t0 + 61_000), Err(TokenError::UnknownKey));
    // a broken file keeps the keys read before
    std::fs::write(&path, "{not json").unwrap();
    assert!(v.validate(&tb, t0 + 200_000).is_ok());
    // a missing or useless file at start is an error
    std::fs::write(&path, "{\"keys\":[]}").unwrap();
    assert!(matches!(
        JwksFile::open(path.clone(), 0),
        Err(JwksError::NoKeys)
    ));
    assert!(matches!(
        JwksFile::open(dir.path().join("missing"), 0),
        Err(JwksError::Read { .. })
    ));
}
