//! Unsecured tokens (`alg: none`, an empty signature), checked as Kafka's
//! `OAuthBearerUnsecuredValidatorCallbackHandler` checks them: the
//! principal claim present, `exp` not past (less the allowed skew), `iat`
//! if present not in the future and before `exp`, and the required scopes
//! granted. Anyone can make such a token for any principal: a listener
//! uses this only when configured to, for tests.
//!
//! Options come from the listener's `OAuthBearerLoginModule` JAAS text,
//! with Kafka's names: `unsecuredValidatorPrincipalClaimName` (`sub`),
//! `unsecuredValidatorScopeClaimName` (`scope`),
//! `unsecuredValidatorRequiredScope` (space-separated, none) and
//! `unsecuredValidatorAllowableClockSkewMs` (0).

use super::claims::{self, Claims};
use super::{TokenError, TokenValidator, ValidToken};
use crate::sasl::jaas::JaasModule;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredValidator {
    pub principal_claim: String,
    pub scope_claim: String,
    pub required_scope: Vec<String>,
    pub clock_skew_ms: i64,
}

impl Default for UnsecuredValidator {
    fn default() -> Self {
        UnsecuredValidator {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            clock_skew_ms: 0,
        }
    }
}

impl UnsecuredValidator {
    pub fn from_jaas(module: &JaasModule) -> Result<UnsecuredValidator, String> {
        let option = |name: &str| {
            module
                .options
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim())
                .filter(|v| !v.is_empty())
        };
        let mut v = UnsecuredValidator::default();
        if let Some(c) = option("unsecuredValidatorPrincipalClaimName") {
            v.principal_claim = c.to_string();
        }
        if let Some(c) = option("unsecuredValidatorScopeClaimName") {
            v.scope_claim = c.to_string();
        }
        if let Some(s) = option("unsecuredValidatorRequiredScope") {
            v.required_scope = s
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(ms) = option("unsecuredValidatorAllowableClockSkewMs") {
            v.clock_skew_ms = ms.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                format!("unsecuredValidatorAllowableClockSkewMs={ms}: expected a non-negative integer")
            })?
            .into();
        }
        Ok(v)
    }

    fn check(&self, claims: &Claims, now_ms: i64) -> Result<ValidToken, TokenError> {
        let principal = claims::principal(claims, &self.principal_claim)?;
        let issued_at = claims::date_ms(claims, "iat")?;
        if issued_at.is_some_and(|iat| iat > now_ms.saturating_add(self.clock_skew_ms)) {
            return Err(TokenError::IssuedInFuture);
        }
        let expires_at_ms = claims::required_date_ms(claims, "exp")?;
        if now_ms.saturating_sub(self.clock_skew_ms) >= expires_at_ms {
            return Err(TokenError::Expired);
        }
        if issued_at.is_some_and(|iat| expires_at_ms <= iat) {
            return Err(TokenError::ExpiresBeforeIssued);
        }
        let scopes = claims::scopes(claims, &self.scope_claim, true)?;
        if self.required_scope.iter().any(|r| !scopes.contains(r)) {
            return Err(TokenError::InsufficientScope(self.required_scope.join(" ")));
        }
        Ok(ValidToken {
            principal,
            expires_at_ms,
            scopes,
        })
    }
}

impl TokenValidator for UnsecuredValidator {
    fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("not three dot-separated parts"));
        };
        let header = claims::json_part(header, "header is not base64url JSON")?;
        if header.get("alg").and_then(|a| a.as_str()) != Some("none") || !signature.is_empty() {
            return Err(TokenError::Algorithm);
        }
        let claims = claims::json_part(payload, "payload is not base64url JSON")?;
        self.check(&claims, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::jaas;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::{Value, json};

    /// An unsecured token as librdkafka and Kafka's login module make it.
    fn token(header: Value, payload: Value) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(payload.to_string())
        )
    }

    fn none(payload: Value) -> String {
        token(json!({"alg": "none"}), payload)
    }

    #[test]
    fn accepts_unexpired_tokens() {
        let v = UnsecuredValidator::default();
        let t = v
            .validate(&none(json!({"sub": "alice", "iat": 10, "exp": 20})), 15_000)
            .unwrap();
        assert_eq!(t.principal, "alice");
        assert_eq!(t.expires_at_ms, 20_000);
    }

    #[test]
    fn refusals() {
        let v = UnsecuredValidator::default();
        let now = 15_000;
        for (t, want) in [
            (none(json!({"sub": "a", "exp": 15})), TokenError::Expired),
            (
                none(json!({"sub": "a"})),
                TokenError::MissingClaim("exp".into()),
            ),
            (
                none(json!({"exp": 20})),
                TokenError::MissingClaim("sub".into()),
            ),
            (
                none(json!({"sub": 7, "exp": 20})),
                TokenError::BadClaim("sub".into()),
            ),
            (
                none(json!({"sub": "a", "iat": 16, "exp": 20})),
                TokenError::IssuedInFuture,
            ),
            (
                none(json!({"sub": "a", "iat": 10, "exp": 10.0})),
                TokenError::Expired,
            ),
            (
                token(json!({"alg": "RS256"}), json!({"sub": "a", "exp": 20})),
                TokenError::Algorithm,
            ),
            (
                format!("{}sig", none(json!({"sub": "a", "exp": 20}))),
                TokenError::Algorithm,
            ),
            (
                "a.b".to_string(),
                TokenError::Malformed("not three dot-separated parts"),
            ),
        ] {
            assert_eq!(v.validate(&t, now), Err(want));
        }
    }

    #[test]
    fn jaas_options() {
        let m = jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredValidatorPrincipalClaimName=\"email\" \
             unsecuredValidatorRequiredScope=\"kafka admin\" \
             unsecuredValidatorAllowableClockSkewMs=\"2000\";",
        )
        .unwrap();
        let v = UnsecuredValidator::from_jaas(&m).unwrap();
        assert_eq!(v.clock_skew_ms, 2000);
        let ok = none(json!({"email": "e@x", "exp": 14, "scope": "admin kafka"}));
        assert_eq!(v.validate(&ok, 15_000).unwrap().principal, "e@x");
        let missing = none(json!({"email": "e@x", "exp": 20, "scope": "kafka"}));
        let e = v.validate(&missing, 15_000).unwrap_err();
        assert_eq!(e, TokenError::InsufficientScope("kafka admin".into()));
        assert_eq!(
            e.status_json(),
            r#"{"status":"insufficient_scope", "scope":"kafka admin"}"#
        );
        let bad = jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredValidatorAllowableClockSkewMs=\"-1\";",
        )
        .unwrap();
        assert!(UnsecuredValidator::from_jaas(&bad).is_err());
    }
}
