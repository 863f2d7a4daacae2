//! What the producers the driver creates next to the consumer (the
//! dead-letter producer, the exactly-once transactional producer) take from
//! the consumer's configuration: where the cluster is and how to connect and
//! authenticate. A cluster that asks the consumer for TLS or SASL asks them
//! too; copying only the address would leave them refused.
//!
//! The consumer itself is created from the caller's configuration as given:
//! every librdkafka setting, security ones included, reaches it.
//!
//! ```
//! use rdkafka::ClientConfig;
//! use weir_parallel_consumer::driver::connection::producer_base;
//!
//! let mut consumer = ClientConfig::new();
//! consumer
//!     .set("bootstrap.servers", "broker:9093")
//!     .set("group.id", "billing")
//!     .set("security.protocol", "SASL_SSL")
//!     .set("sasl.mechanisms", "SCRAM-SHA-512")
//!     .set("sasl.username", "billing")
//!     .set("sasl.password", "secret")
//!     .set("ssl.ca.location", "/etc/ca.pem");
//! let producer = producer_base(&consumer);
//! assert_eq!(producer.get("sasl.username"), Some("billing"));
//! assert_eq!(producer.get("ssl.ca.location"), Some("/etc/ca.pem"));
//! assert_eq!(producer.get("group.id"), None);
//! ```

use rdkafka::ClientConfig;

/// Settings copied by name (librdkafka's names).
const COPIED: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "client.id",
    "security.protocol",
    // TLS and SASL settings without the ssl./sasl. prefix
    "enable.ssl.certificate.verification",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "https.ca.location",
    "https.ca.pem",
    // how broker addresses are resolved
    "broker.address.family",
    "client.dns.lookup",
];

/// Settings copied by prefix: every TLS (`ssl.keystore.location`,
/// `ssl.ca.location`, `ssl.endpoint.identification.algorithm`, …) and SASL
/// (`sasl.mechanisms`, `sasl.username`, `sasl.password`,
/// `sasl.oauthbearer.*`, `sasl.kerberos.*`, …) setting.
const COPIED_PREFIXES: &[&str] = &["ssl.", "sasl."];

/// Whether a producer created next to the consumer takes `key` from it.
pub fn is_connection_setting(key: &str) -> bool {
    COPIED.contains(&key) || COPIED_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// A producer configuration with the consumer's connection settings (see
/// [`is_connection_setting`]) and nothing else of it.
pub fn producer_base(consumer: &ClientConfig) -> ClientConfig {
    let mut p = ClientConfig::new();
    // `config_map` lists every key but hides the values of passwords
    // (`sasl.password`, `ssl.key.password`, …): values come from `get`.
    for key in consumer.config_map().into_keys() {
        if is_connection_setting(key)
            && let Some(value) = consumer.get(key)
        {
            p.set(key, value);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A consumer of a SASL_SSL cluster, with consumer-only settings that
    /// a producer must not get.
    fn sasl_ssl_consumer() -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in [
            ("bootstrap.servers", "b1:9093,b2:9093"),
            ("client.id", "billing-1"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "billing"),
            ("sasl.password", "secret"),
            ("sasl.oauthbearer.method", "oidc"),
            ("ssl.ca.location", "/etc/weir/ca.pem"),
            ("ssl.certificate.location", "/etc/weir/client.pem"),
            ("ssl.key.location", "/etc/weir/client.key"),
            ("ssl.key.password", "kp"),
            ("ssl.keystore.password", "ksp"),
            ("sasl.oauthbearer.client.secret", "cs"),
            ("ssl.endpoint.identification.algorithm", "none"),
            ("enable.ssl.certificate.verification", "false"),
            ("broker.address.family", "v4"),
            ("group.id", "billing"),
            ("enable.auto.commit", "false"),
            ("isolation.level", "read_committed"),
            ("auto.offset.reset", "earliest"),
            ("session.timeout.ms", "10000"),
        ] {
            c.set(k, v);
        }
        c
    }

    #[test]
    fn every_connection_setting_is_copied_and_nothing_else() {
        let consumer = sasl_ssl_consumer();
        let p = producer_base(&consumer);
        for k in consumer.config_map().into_keys() {
            let v = consumer.get(k).unwrap();
            let consumer_only = matches!(
                k,
                "group.id"
                    | "enable.auto.commit"
                    | "isolation.level"
                    | "auto.offset.reset"
                    | "session.timeout.ms"
            );
            if consumer_only {
                assert_eq!(p.get(k), None, "{k} copied");
            } else {
                assert_eq!(p.get(k), Some(v), "{k} not copied");
            }
        }
    }

    /// The producers the driver makes start from [`producer_base`].
    #[test]
    fn the_dead_letter_and_exactly_once_producers_get_them() {
        let consumer = sasl_ssl_consumer();
        let dlq = super::super::dead_letter_config(&consumer, None).unwrap();
        let eos = super::super::ExactlyOnceConfig::new("billing-0").producer_config(&consumer);
        for p in [&dlq, &eos] {
            for k in [
                "bootstrap.servers",
                "security.protocol",
                "sasl.mechanisms",
                "sasl.username",
                "sasl.password",
                "sasl.oauthbearer.client.secret",
                "ssl.key.password",
                "ssl.keystore.password",
                "ssl.ca.location",
                "ssl.certificate.location",
                "ssl.key.location",
                "enable.ssl.certificate.verification",
            ] {
                assert_eq!(p.get(k), consumer.get(k), "{k}");
            }
            assert_eq!(p.get("group.id"), None);
        }
        assert_eq!(dlq.get("acks"), Some("all"));
        assert_eq!(eos.get("transactional.id"), Some("billing-0"));
    }

    /// A dead-letter producer configuration set by the user is used as
    /// given (nothing of the consumer's is added), with `acks=all`.
    #[test]
    fn a_dead_letter_producer_config_is_used_as_given() {
        let consumer = sasl_ssl_consumer();
        let settings: std::collections::BTreeMap<String, String> = [
            ("bootstrap.servers", "dlq:9092"),
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/etc/dlq/ca.pem"),
            ("linger.ms", "5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let dlq = super::super::dead_letter_config(&consumer, Some(&settings)).unwrap();
        let mut got: Vec<(String, String)> = dlq
            .config_map()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        got.sort();
        let mut want: Vec<(String, String)> = settings.clone().into_iter().collect();
        want.push(("acks".into(), "all".into()));
        want.sort();
        assert_eq!(got, want);
        let mut weak = settings;
        weak.insert("acks".into(), "1".into());
        assert!(matches!(
            super::super::dead_letter_config(&consumer, Some(&weak)),
            Err(super::super::DriverError::ForbiddenSetting { .. })
        ));
    }
}
