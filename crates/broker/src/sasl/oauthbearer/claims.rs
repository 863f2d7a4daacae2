//! Reading a JWT's JSON parts and its claims the way Kafka's validators
//! do: NumericDate claims in seconds (fractions allowed), the principal a
//! non-blank string, scopes a string or a list of strings.

use base64::Engine;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value};

use super::TokenError;

/// base64url with or without padding (Java's URL decoder accepts both).
const B64URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub type Claims = Map<String, Value>;

/// Decodes one base64url part of a JWT holding a JSON object.
pub fn json_part(part: &str, what: &'static str) -> Result<Claims, TokenError> {
    let bytes = B64URL
        .decode(part)
        .map_err(|_| TokenError::Malformed(what))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(TokenError::Malformed(what)),
    }
}

/// A NumericDate claim in milliseconds; None when absent.
pub fn date_ms(claims: &Claims, name: &str) -> Result<Option<i64>, TokenError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|s| s.is_finite())
            // saturating: a date past year 292 million is "never"
            .map(|s| Some((s * 1000.0) as i64))
            .ok_or_else(|| TokenError::BadClaim(name.to_string())),
        Some(_) => Err(TokenError::BadClaim(name.to_string())),
    }
}

/// A NumericDate claim that must be present.
pub fn required_date_ms(claims: &Claims, name: &str) -> Result<i64, TokenError> {
    date_ms(claims, name)?.ok_or_else(|| TokenError::MissingClaim(name.to_string()))
}

/// The principal's claim: a string, trimmed, not blank.
pub fn principal(claims: &Claims, name: &str) -> Result<String, TokenError> {
    match claims.get(name) {
        None | Some(Value::Null) => Err(TokenError::MissingClaim(name.to_string())),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(_) => Err(TokenError::BadClaim(name.to_string())),
    }
}

/// The scope claim's values. `split` divides a string value at spaces (the
/// unsecured validator's reading, RFC 6749's scope syntax); otherwise a
/// string is one scope, as Kafka's signed-token validator takes it. Each
/// scope is trimmed, not blank and not repeated.
pub fn scopes(claims: &Claims, name: &str, split: bool) -> Result<Vec<String>, TokenError> {
    let bad = || TokenError::BadClaim(name.to_string());
    let raw: Vec<&str> = match claims.get(name) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if split => s.split(' ').filter(|s| !s.is_empty()).collect(),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad()),
    };
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for s in raw {
        let s = s.trim();
        if s.is_empty() || out.iter().any(|o| o == s) {
            return Err(bad());
        }
        out.push(s.to_string());
    }
    Ok(out)
}

/// The `aud` claim's values (a string or a list of strings).
pub fn audiences(claims: &Claims) -> Result<Vec<&str>, TokenError> {
    let bad = || TokenError::BadClaim("aud".to_string());
    match claims.get("aud") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.as_str()]),
        Some(Value::Array(items)) => items.iter().map(|v| v.as_str().ok_or_else(bad)).collect(),
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(v: Value) -> Claims {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn dates_principal_scopes() {
        let c = claims(json!({
            "exp": 1.5, "iat": 2, "bad": "x", "sub": "  alice ", "blank": " ",
            "n": 3, "scope": "a b  c", "list": ["a", "b"], "dup": ["a", "a"],
            "mixed": ["a", 1], "aud": ["k", "l"]
        }));
        assert_eq!(date_ms(&c, "exp"), Ok(Some(1500)));
        assert_eq!(required_date_ms(&c, "iat"), Ok(2000));
        assert_eq!(date_ms(&c, "nbf"), Ok(None));
        assert_eq!(
            required_date_ms(&c, "nbf"),
            Err(TokenError::MissingClaim("nbf".into()))
        );
        assert_eq!(date_ms(&c, "bad"), Err(TokenError::BadClaim("bad".into())));
        assert_eq!(principal(&c, "sub").unwrap(), "alice");
        assert!(matches!(
            principal(&c, "blank"),
            Err(TokenError::BadClaim(_))
        ));
        assert!(matches!(principal(&c, "n"), Err(TokenError::BadClaim(_))));
        assert!(matches!(
            principal(&c, "x"),
            Err(TokenError::MissingClaim(_))
        ));
        assert_eq!(scopes(&c, "scope", true).unwrap(), ["a", "b", "c"]);
        assert_eq!(scopes(&c, "scope", false).unwrap(), ["a b  c"]);
        assert_eq!(scopes(&c, "list", false).unwrap(), ["a", "b"]);
        assert!(scopes(&c, "missing", false).unwrap().is_empty());
        assert!(scopes(&c, "dup", false).is_err());
        assert!(scopes(&c, "mixed", false).is_err());
        assert_eq!(audiences(&c).unwrap(), ["k", "l"]);
        assert!(json_part("e30", "header").unwrap().is_empty());
        assert!(json_part("W10", "header").is_err()); // [] is not an object
        assert!(json_part("!!", "header").is_err());
    }
}
