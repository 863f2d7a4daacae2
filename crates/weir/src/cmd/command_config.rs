//! `--command-config FILE`: client properties in a Java properties file,
//! as Kafka's tools take them.
//!
//! [`parse_properties`] (shared with the broker's config file) reads the
//! file format (`key=value`, `key: value`,
//! `key value`, `#`/`!` comments, blank lines, backslash escapes and
//! continuation lines). [`CommandConfig`] holds the result with values
//! trimmed, as Kafka's `ConfigDef` trims them; it reads the security
//! settings (`security.protocol`, `ssl.*`, `sasl.*`, see
//! [`weir_client::security`]) for every command's connections, refusing
//! values weir's client does not speak, and each command reports the
//! properties it does not apply, like Kafka's "supplied but isn't a known
//! config" warning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, anyhow};
use weir_broker::properties::parse_properties;
use weir_client::Security;
use weir_client::security::{SECURITY_PROPERTIES, SecurityProtocol, SecuritySettings};

/// Properties every client command applies (see `common::Bootstrap`),
/// besides the security ones ([`SECURITY_PROPERTIES`]).
pub const COMMON_PROPERTIES: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
];

/// Whether every client command applies `key`: a common or a security
/// property.
pub fn is_common(key: &str) -> bool {
    COMMON_PROPERTIES.contains(&key) || SECURITY_PROPERTIES.contains(&key)
}

/// Client properties from `--command-config`, values trimmed; empty when
/// no file was given.
#[derive(Debug, Clone, Default)]
pub struct CommandConfig {
    /// The file the properties came from (for messages).
    path: Option<PathBuf>,
    props: BTreeMap<String, String>,
}

impl CommandConfig {
    /// Reads and parses `path`; a security setting with a value weir's
    /// client does not speak is refused (see [`check_supported`]).
    pub fn load(path: &Path) -> Result<CommandConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --command-config {}", path.display()))?;
        let pairs = parse_properties(&text)
            .map_err(|e| anyhow!("--command-config {}: {e}", path.display()))?;
        let mut config = CommandConfig {
            path: Some(path.to_path_buf()),
            props: BTreeMap::new(),
        };
        for (key, value) in pairs {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// Sets a property (one from the file, or a command-line override such
    /// as `--producer-props`), trimming its value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        check_supported(key, value).map_err(|e| anyhow!("{}{e}", self.origin()))?;
        self.props.insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// `FILE: ` for messages about a property from the file.
    fn origin(&self) -> String {
        self.path
            .as_ref()
            .map(|p| format!("{}: ", p.display()))
            .unwrap_or_default()
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(String::as_str)
    }

    /// The value of `key` parsed as `T`; an error names the property.
    pub fn parse<T: FromStr>(&self, key: &str) -> Result<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        self.get(key)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|e| anyhow!("{}invalid {key}={v:?}: {e}", self.origin()))
            })
            .transpose()
    }

    /// A millisecond property as a duration.
    pub fn millis(&self, key: &str) -> Result<Option<std::time::Duration>> {
        Ok(self
            .parse::<u64>(key)?
            .map(std::time::Duration::from_millis))
    }

    /// Properties that are neither common ones nor in `applied`: the ones
    /// the command ignores.
    pub fn unknown<'a>(&'a self, applied: &[&str]) -> Vec<&'a str> {
        self.props
            .keys()
            .map(String::as_str)
            .filter(|k| !is_common(k) && !applied.contains(k))
            .collect()
    }

    /// Security properties that `security.protocol` (PLAINTEXT when unset)
    /// does not use: `ssl.*` without TLS, `sasl.*` without SASL.
    pub fn unused_security(&self) -> Vec<&str> {
        let protocol = self
            .get("security.protocol")
            .and_then(SecurityProtocol::from_name)
            .unwrap_or_default();
        self.props
            .keys()
            .map(String::as_str)
            .filter(|k| SECURITY_PROPERTIES.contains(k))
            .filter(|k| {
                (k.starts_with("ssl.") && !protocol.uses_tls())
                    || (k.starts_with("sasl.") && !protocol.uses_sasl())
            })
            .collect()
    }

    /// One warning on stderr per ignored property, in Kafka's words, and
    /// one per security property the protocol does not use (a forgotten
    /// `security.protocol` is the likely cause).
    pub fn warn_unknown(&self, applied: &[&str]) {
        for key in self.unknown(applied) {
            eprintln!(
                "warning: the configuration '{key}' was supplied but isn't a known config (ignored)"
            );
        }
        let protocol = self.get("security.protocol").unwrap_or("PLAINTEXT");
        for key in self.unused_security() {
            let layer = if key.starts_with("ssl.") {
                "TLS"
            } else {
                "SASL"
            };
            eprintln!(
                "warning: the configuration '{key}' is ignored: security.protocol={protocol} does not use {layer}"
            );
        }
    }

    /// The security of the command's connections: the settings parsed and
    /// the stores they name read. Errors name the file.
    pub fn security(&self) -> Result<Security> {
        SecuritySettings::parse(&|key| self.get(key).map(str::to_string))
            .and_then(|s| s.load())
            .map_err(|e| anyhow!("{}{e}", self.origin()))
    }
}

/// Refuses a value weir's client cannot honour (a `security.protocol`,
/// `sasl.mechanism` or store type it does not speak): running without it
/// would connect without the TLS or authentication the broker expects, so
/// it is an error, not a warning. Other properties pass.
pub fn check_supported(key: &str, value: &str) -> Result<()> {
    weir_client::security::check_property(key, value).map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_trims_overrides_and_lists_what_it_ignores() {
        let mut c = CommandConfig::default();
        c.set("client.id", "  cli  ").unwrap();
        c.set("acks", "all").unwrap();
        c.set("acks", "1").unwrap();
        c.set("linger.ms", " 5").unwrap();
        c.set("retries", "3").unwrap();
        assert_eq!(c.get("client.id"), Some("cli"));
        assert_eq!(c.parse::<i16>("acks").unwrap(), Some(1));
        assert_eq!(
            c.millis("linger.ms").unwrap(),
            Some(std::time::Duration::from_millis(5))
        );
        assert_eq!(c.parse::<u64>("missing").unwrap(), None);
        assert_eq!(c.unknown(&["acks"]), vec!["linger.ms", "retries"]);
        c.set("linger.ms", "soon").unwrap();
        let e = c.millis("linger.ms").unwrap_err().to_string();
        assert!(e.contains("linger.ms=\"soon\""), "{e}");
    }

    #[test]
    fn security_values_weir_does_not_speak_are_refused() {
        for (k, v) in [
            ("security.protocol", "PLAINTEXT"),
            ("security.protocol", "sasl_ssl"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("ssl.truststore.location", "/x"),
            ("ssl.truststore.type", "PEM"),
        ] {
            check_supported(k, v).unwrap();
        }
        for (k, v) in [
            ("security.protocol", "KERBEROS"),
            ("sasl.mechanism", "GSSAPI"),
            ("ssl.truststore.type", "JKS"),
        ] {
            let e = check_supported(k, v).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{k}={v}: ")), "{e}");
            assert!(e.contains("not supported"), "{e}");
        }
    }

    #[test]
    fn security_properties_are_common_and_unused_ones_listed() {
        let mut c = CommandConfig::default();
        c.set("ssl.truststore.location", "/ca.pem").unwrap();
        c.set("sasl.mechanism", "PLAIN").unwrap();
        c.set("ssl.cipher.suites", "x").unwrap();
        assert_eq!(c.unknown(&[]), vec!["ssl.cipher.suites"]);
        assert_eq!(
            c.unused_security(),
            vec!["sasl.mechanism", "ssl.truststore.location"]
        );
        c.set("security.protocol", "SSL").unwrap();
        assert_eq!(c.unused_security(), vec!["sasl.mechanism"]);
        c.set("security.protocol", "SASL_SSL").unwrap();
        assert!(c.unused_security().is_empty());
        // SASL_SSL without credentials: the error names the file's
        // property (no file here, so no file name).
        let e = c.security().unwrap_err().to_string();
        assert!(e.starts_with("sasl.jaas.config: not set"), "{e}");
    }

    #[test]
    fn load_names_the_file_in_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.properties");
        let e = format!("{:#}", CommandConfig::load(&missing).unwrap_err());
        assert!(e.contains("nope.properties"), "{e}");
        let bad = dir.path().join("bad.properties");
        std::fs::write(&bad, "client.id=x\nsasl.mechanism=GSSAPI\n").unwrap();
        let e = format!("{:#}", CommandConfig::load(&bad).unwrap_err());
        assert!(e.contains("bad.properties: sasl.mechanism=GSSAPI"), "{e}");
        let good = dir.path().join("good.properties");
        std::fs::write(&good, "# client\nclient.id = x \n").unwrap();
        assert_eq!(
            CommandConfig::load(&good).unwrap().get("client.id"),
            Some("x")
        );
    }
}
