//! Parsing of the security properties: what each protocol reads, and the
//! refusals (naming the property, never printing a secret).

use super::*;

fn parse(pairs: &[(&str, &str)]) -> Result<SecuritySettings, SecurityError> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    SecuritySettings::parse(&move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
}

const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                     username=\"alice\" password=\"s3cret\";";

#[test]
fn protocols_and_what_each_reads() {
    let s = parse(&[]).unwrap();
    assert_eq!(s, SecuritySettings::default());
    // ssl.* means nothing without TLS
    let s = parse(&[("ssl.truststore.location", "/ca.pem")]).unwrap();
    assert_eq!(s.tls, None);
    let s = parse(&[("security.protocol", "ssl")]).unwrap();
    let tls = s.tls.unwrap();
    assert_eq!(tls.truststore, TrustStoreSource::System);
    assert!(tls.verify_hostname);
    assert_eq!(tls.keystore, None);
    assert_eq!(s.sasl, None);
    let s = parse(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.jaas.config", SCRAM),
        ("ssl.truststore.location", "/ca.pem"),
        ("ssl.truststore.type", "pem"),
        ("ssl.endpoint.identification.algorithm", ""),
        ("ssl.keystore.location", "/me.pem"),
    ])
    .unwrap();
    let tls = s.tls.unwrap();
    assert_eq!(
        tls.truststore,
        TrustStoreSource::File {
            path: "/ca.pem".into(),
            kind: Some(StoreType::Pem),
            password: None
        }
    );
    assert!(!tls.verify_hostname);
    assert!(matches!(tls.keystore, Some(KeyStoreSource::File { .. })));
    let sasl = s.sasl.unwrap();
    assert_eq!(sasl.mechanism, SaslMechanism::ScramSha512);
    assert_eq!(
        (sasl.username.as_str(), sasl.password.0.as_str()),
        ("alice", "s3cret")
    );
    let s = parse(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "bob"),
        ("sasl.password", "pw"),
    ])
    .unwrap();
    assert_eq!(s.tls, None);
    assert_eq!(s.sasl.unwrap().username, "bob");
}

#[test]
fn refusals_name_the_property_and_hide_secrets() {
    let sasl = |extra: &[(&'static str, &'static str)]| {
        let mut v = vec![("security.protocol", "SASL_PLAINTEXT")];
        v.extend_from_slice(extra);
        v
    };
    for (pairs, name, words) in [
        (
            vec![("security.protocol", "KERBEROS")],
            "security.protocol",
            "not supported",
        ),
        (
            sasl(&[("sasl.mechanism", "GSSAPI")]),
            "sasl.mechanism",
            "SCRAM-SHA-512",
        ),
        (
            sasl(&[("sasl.mechanism", "OAUTHBEARER")]),
            "sasl.mechanism",
            "PLAIN",
        ),
        (
            sasl(&[("sasl.mechanism", "plain")]),
            "sasl.mechanism",
            "not supported",
        ),
        (sasl(&[]), "sasl.mechanism", "GSSAPI, is not supported"),
        (
            sasl(&[("sasl.mechanism", "PLAIN")]),
            "sasl.jaas.config",
            "needs a user name",
        ),
        (
            sasl(&[("sasl.mechanism", "PLAIN"), ("sasl.username", "u")]),
            "sasl.password",
            "not set",
        ),
        (
            sasl(&[
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "u"),
                ("sasl.jaas.config", SCRAM),
            ]),
            "sasl.jaas.config",
            "not both",
        ),
        (
            sasl(&[
                ("sasl.mechanism", "PLAIN"),
                (
                    "sasl.jaas.config",
                    "com.sun.security.auth.module.Krb5LoginModule required;",
                ),
            ]),
            "sasl.jaas.config",
            "Krb5LoginModule is not supported",
        ),
        (
            sasl(&[
                ("sasl.mechanism", "SCRAM-SHA-256"),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.scram.ScramLoginModule required \
                     username=\"a\" password=\"s3cret\" tokenauth=\"true\";",
                ),
            ]),
            "sasl.jaas.config",
            "delegation tokens",
        ),
        (
            sasl(&[
                ("sasl.mechanism", "PLAIN"),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \
                     password=\"s3cret\";",
                ),
            ]),
            "sasl.jaas.config",
            "needs username",
        ),
        (
            sasl(&[
                ("sasl.mechanism", "PLAIN"),
                ("sasl.jaas.config", "x required password=\"s3cret"),
            ]),
            "sasl.jaas.config",
            "unterminated",
        ),
        (
            vec![("security.protocol", "SSL"), ("ssl.truststore.type", "JKS")],
            "ssl.truststore.type",
            "PKCS12",
        ),
        (
            vec![
                ("security.protocol", "SSL"),
                ("ssl.endpoint.identification.algorithm", "http"),
            ],
            "ssl.endpoint.identification.algorithm",
            "expected https",
        ),
        (
            vec![
                ("security.protocol", "SSL"),
                ("ssl.truststore.location", "/a"),
                ("ssl.truststore.certificates", "-----BEGIN"),
            ],
            "ssl.truststore.location",
            "not both",
        ),
        (
            vec![
                ("security.protocol", "SSL"),
                ("ssl.keystore.key", "-----BEGIN"),
            ],
            "ssl.keystore.certificate.chain",
            "not set",
        ),
        (
            vec![
                ("security.protocol", "SSL"),
                ("ssl.keystore.location", "/k.pem"),
                ("ssl.key.password", "s3cret"),
            ],
            "ssl.key.password",
            "encrypted private keys",
        ),
        (
            vec![
                ("security.protocol", "SSL"),
                ("ssl.enabled.protocols", "TLSv1.1"),
            ],
            "ssl.enabled.protocols",
            "neither",
        ),
    ] {
        let e = parse(&pairs).unwrap_err();
        let SecurityError::Setting { name: n, .. } = &e else {
            panic!("{pairs:?}: {e:?}");
        };
        assert_eq!(n, name, "{pairs:?}: {e}");
        let text = e.to_string();
        assert!(text.starts_with(name), "{text}");
        assert!(text.contains(words), "{pairs:?}: {text}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!format!("{e:?}").contains("s3cret"), "{e:?}");
    }
}

#[test]
fn single_values_are_checked_alone() {
    check_property("security.protocol", "sasl_ssl").unwrap();
    check_property("sasl.mechanism", "SCRAM-SHA-256").unwrap();
    check_property("acks", "all").unwrap();
    check_property("ssl.endpoint.identification.algorithm", "").unwrap();
    let e = check_property("sasl.mechanism", "GSSAPI").unwrap_err();
    assert_eq!(
        e.to_string(),
        "sasl.mechanism=GSSAPI: not supported (weir's client speaks PLAIN, SCRAM-SHA-256 and \
         SCRAM-SHA-512)"
    );
}

#[test]
fn secrets_are_not_printed() {
    let s = parse(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "u"),
        ("sasl.password", "s3cret"),
        ("ssl.keystore.location", "/k.p12"),
        ("ssl.keystore.password", "s3cret"),
    ])
    .unwrap();
    assert!(!format!("{s:?}").contains("s3cret"));
    let security = Security {
        protocol: s.protocol,
        tls: None,
        sasl: s.sasl,
    };
    assert!(!format!("{security:?}").contains("s3cret"));
}
