//! Kafka's JAAS configuration text, as given in `sasl.jaas.config`:
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required
//!     user_admin="admin-secret" user_alice="alice-secret";
//! ```
//!
//! One login module: its class name, a control flag (`required`,
//! `requisite`, `sufficient` or `optional`), options `key=value` (the value
//! quoted with `"` or a bare word) and a closing `;`. A broker listener's
//! mechanism takes exactly one module, as in Kafka. The parser is the
//! client's (`weir_client::jaas`), which reads the same text from a
//! client's `sasl.jaas.config`.

pub use weir_client::jaas::{JaasError, JaasModule, parse};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_plain_config() {
        let m = parse(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"admin-secret\"\n user_admin=\"admin-secret\" \
             user_alice=\"a b;c=\\\"d\";",
        )
        .unwrap();
        assert_eq!(
            m.class,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(m.flag, "required");
        assert_eq!(
            m.options,
            [
                ("username", "admin"),
                ("password", "admin-secret"),
                ("user_admin", "admin-secret"),
                ("user_alice", "a b;c=\"d"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn bare_values_and_no_options() {
        let m = parse("M optional a=b c=1 ;").unwrap();
        assert_eq!(m.options.len(), 2);
        assert_eq!(parse(" M Required;").unwrap().flag, "required");
    }

    #[test]
    fn refusals() {
        assert_eq!(parse("  "), Err(JaasError::Empty));
        assert!(matches!(parse("M always;"), Err(JaasError::Flag { .. })));
        assert!(matches!(
            parse("M required a=\"b"),
            Err(JaasError::Unterminated { .. })
        ));
        assert!(matches!(
            parse("M required a=b"),
            Err(JaasError::NoSemicolon { .. })
        ));
        assert!(matches!(
            parse("M required a;"),
            Err(JaasError::Option { .. })
        ));
        assert!(matches!(
            parse("M required a=;"),
            Err(JaasError::Option { .. })
        ));
        assert_eq!(
            parse("M required; N required;"),
            Err(JaasError::SeveralModules)
        );
        // the secret is not in the message
        let e = parse("M required user_a=\"secret").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}
