//! How the HTTP listener is protected (weir-specific settings; Kafka has
//! no HTTP listener): TLS with `https://` in `http.listeners` and the
//! keystore of `http.ssl.*`, HTTP basic authentication with the users of
//! `http.basic.auth.file`, and the rule that an address other than
//! loopback is served only with one of them (or `http.insecure.allow`).
//!
//! Parsing reads no file; [`super::Protection::load`] loads the stores.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::Listener;
use crate::tls::{SettingError, TlsSettings};

/// The TLS settings of the HTTP listener: Kafka's `ssl.*` names under
/// `http.` (`ssl.principal.mapping.rules` has no use here).
pub const HTTP_SSL_SETTINGS: &[&str] = &[
    "http.ssl.keystore.type",
    "http.ssl.keystore.location",
    "http.ssl.keystore.password",
    "http.ssl.key.password",
    "http.ssl.keystore.certificate.chain",
    "http.ssl.keystore.key",
    "http.ssl.truststore.type",
    "http.ssl.truststore.location",
    "http.ssl.truststore.password",
    "http.ssl.truststore.certificates",
    "http.ssl.client.auth",
    "http.ssl.enabled.protocols",
];

/// The listener name TLS errors and reload messages carry.
pub const LISTENER_NAME: &str = "HTTP";

/// `http://` (the default) or `https://` in `http.listeners`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Parses `http.listeners`: `host:port`, `http://host:port` or
/// `https://host:port` (the first of a comma-separated list); the empty
/// string disables the listener. The host must resolve.
pub fn parse_listener(s: &str) -> Result<Option<(Listener, Scheme)>, String> {
    let Some(first) = s.split(',').map(str::trim).find(|e| !e.is_empty()) else {
        return Ok(None);
    };
    let (scheme, rest) = match first.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (Scheme::Http, rest),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (Scheme::Https, rest),
        Some((scheme, _)) => {
            return Err(format!("unsupported scheme {scheme:?} (http or https)"));
        }
        None => (Scheme::Http, first),
    };
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port, got {rest:?}"))?;
    let port: u16 = port.parse().map_err(|_| format!("invalid port {port:?}"))?;
    let l = Listener {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    };
    l.bind_addr()?;
    Ok(Some((l, scheme)))
}

/// `http.basic.auth.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuthSettings {
    /// `http.basic.auth.file`: the users (see [`super::basic_auth`]).
    pub file: PathBuf,
    /// `http.basic.auth.metrics`: whether `/metrics` asks for credentials
    /// too (true by default; false lets scrapers without credentials in).
    pub metrics: bool,
}

/// How the HTTP listener is protected. Built by the configuration
/// ([`HttpSecurity::parse`]); `tls` is Some exactly for `https://`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpSecurity {
    pub tls: Option<TlsSettings>,
    pub basic_auth: Option<BasicAuthSettings>,
    /// `http.insecure.allow`: an address other than loopback may be served
    /// without TLS and without authentication.
    pub insecure_allow: bool,
}

impl HttpSecurity {
    /// Reads the settings for the listener `http.listeners` names (None:
    /// no listener). `get(name)` returns an explicitly set value.
    pub fn parse(
        listener: Option<&(Listener, Scheme)>,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpSecurity, SettingError> {
        let fail = |name: &str, value: String, reason: String| SettingError {
            name: name.to_string(),
            value,
            reason,
        };
        let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let flag = |name: &str, default: bool| match set(name) {
            None => Ok(default),
            Some(v) if v.trim().eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.trim().eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(fail(name, v, "expected true or false".into())),
        };
        let insecure_allow = flag("http.insecure.allow", false)?;
        let basic_auth = match set("http.basic.auth.file") {
            None => None,
            Some(file) => Some(BasicAuthSettings {
                file: PathBuf::from(file.trim()),
                metrics: flag("http.basic.auth.metrics", true)?,
            }),
        };
        let Some((l, scheme)) = listener else {
            return Ok(HttpSecurity {
                tls: None,
                basic_auth,
                insecure_allow,
            });
        };
        let tls = match scheme {
            Scheme::Http => {
                if let Some(name) = HTTP_SSL_SETTINGS.iter().find(|n| set(n).is_some()) {
                    return Err(fail(
                        name,
                        set(name).unwrap_or_default(),
                        format!(
                            "http.listeners is {}:{} without https://: the http.ssl.* settings \
                             apply to an https:// listener only",
                            l.host, l.port
                        ),
                    ));
                }
                None
            }
            Scheme::Https => Some(tls_settings(get)?),
        };
        let security = HttpSecurity {
            tls,
            basic_auth,
            insecure_allow,
        };
        let addr = l
            .bind_addr()
            .map_err(|e| fail("http.listeners", String::new(), e))?;
        security
            .check_exposure(addr)
            .map_err(|reason| fail("http.listeners", format!("{}:{}", l.host, l.port), reason))?;
        Ok(security)
    }

    /// Whether clients must show a certificate the truststore vouches for
    /// (`http.ssl.client.auth=required`): authentication without basic
    /// auth.
    pub fn client_certificates_required(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|t| t.client_auth == crate::tls::ClientAuth::Required)
    }

    /// Refuses to serve `addr` unprotected: an address other than loopback
    /// needs TLS or authentication, or `http.insecure.allow`. The console
    /// shows record contents and configuration; anyone who reaches the
    /// port could read them.
    pub fn check_exposure(&self, addr: SocketAddr) -> Result<(), String> {
        let protected = self.tls.is_some() || self.basic_auth.is_some();
        if addr.ip().is_loopback() || protected || self.insecure_allow {
            return Ok(());
        }
        Err(format!(
            "{} is reachable from other hosts and the console shows record contents: serve it \
             with TLS (https:// and http.ssl.keystore.location) and/or basic authentication \
             (http.basic.auth.file), bind it to loopback (127.0.0.1), or set \
             http.insecure.allow=true to serve it unprotected",
            addr.ip()
        ))
    }

    /// What is missing, for a warning at start (None: nothing, or loopback).
    pub fn weakness(&self, addr: SocketAddr) -> Option<&'static str> {
        if addr.ip().is_loopback() {
            return None;
        }
        let authenticated = self.basic_auth.is_some() || self.client_certificates_required();
        match (self.tls.is_some(), authenticated) {
            (true, true) => None,
            (true, false) => Some(
                "served with TLS but without authentication: anyone who reaches the port reads the console",
            ),
            (false, true) => Some(
                "basic authentication over plain HTTP: passwords cross the network in clear (use https://)",
            ),
            (false, false) => {
                Some("served without TLS and without authentication (http.insecure.allow=true)")
            }
        }
    }
}

/// The TLS settings of an `https://` listener, read from `http.ssl.*`
/// with the Kafka listeners' parser.
fn tls_settings(get: &dyn Fn(&str) -> Option<String>) -> Result<TlsSettings, SettingError> {
    let keyed = |config: &str| -> Option<(String, String)> {
        let name = format!("http.{config}");
        if !HTTP_SSL_SETTINGS.contains(&name.as_str()) {
            return None;
        }
        get(&name).map(|v| (name, v))
    };
    let has = |n: &str| keyed(n).is_some_and(|(_, v)| !v.trim().is_empty());
    if !has("ssl.keystore.location") && !has("ssl.keystore.certificate.chain") {
        return Err(SettingError {
            name: "http.ssl.keystore.location".into(),
            value: String::new(),
            reason: "an https:// HTTP listener needs a keystore: http.ssl.keystore.location, or \
                     http.ssl.keystore.certificate.chain with http.ssl.keystore.key"
                .into(),
        });
    }
    TlsSettings::parse(LISTENER_NAME, &keyed).map_err(|mut e| {
        if e.name.starts_with("ssl.") {
            e.name = format!("http.{}", e.name);
        }
        e
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(listener: &str, pairs: &[(&str, &str)]) -> Result<HttpSecurity, SettingError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let l = parse_listener(listener).unwrap();
        HttpSecurity::parse(l.as_ref(), &|n| map.get(n).cloned())
    }

    #[test]
    fn listener_forms() {
        let (l, s) = parse_listener("https://127.0.0.1:8443").unwrap().unwrap();
        assert_eq!(
            (l.host.as_str(), l.port, s),
            ("127.0.0.1", 8443, Scheme::Https)
        );
        let (l, s) = parse_listener("HTTP://[::1]:1").unwrap().unwrap();
        assert_eq!((l.host.as_str(), s), ("::1", Scheme::Http));
        assert_eq!(
            parse_listener("127.0.0.1:2").unwrap().unwrap().1,
            Scheme::Http
        );
        assert_eq!(parse_listener(" ").unwrap(), None);
        for bad in ["ftp://127.0.0.1:1", "127.0.0.1", "127.0.0.1:x"] {
            assert!(parse_listener(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loopback_is_served_as_before() {
        let s = parse("127.0.0.1:9644", &[]).unwrap();
        assert_eq!(s, HttpSecurity::default());
        assert!(parse("[::1]:9644", &[]).is_ok());
        assert!(parse("localhost:9644", &[]).is_ok());
    }

    #[test]
    fn other_addresses_need_protection_or_an_explicit_allow() {
        for addr in ["0.0.0.0:9644", "http://[::]:9644"] {
            let e = parse(addr, &[]).unwrap_err();
            assert_eq!(e.name, "http.listeners");
            for w in [
                "http.ssl.keystore.location",
                "http.basic.auth.file",
                "http.insecure.allow",
            ] {
                assert!(e.reason.contains(w), "{e:?}");
            }
        }
        let auth = parse("0.0.0.0:9644", &[("http.basic.auth.file", "/u")]).unwrap();
        assert_eq!(
            auth.basic_auth,
            Some(BasicAuthSettings {
                file: "/u".into(),
                metrics: true
            })
        );
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        assert!(auth.weakness(any).unwrap().contains("in clear"));
        let tls = parse(
            "https://0.0.0.0:9644",
            &[("http.ssl.keystore.location", "/k.pem")],
        )
        .unwrap();
        assert!(
            tls.weakness(any)
                .unwrap()
                .contains("without authentication")
        );
        let open = parse("0.0.0.0:9644", &[("http.insecure.allow", "true")]).unwrap();
        assert!(open.insecure_allow && open.tls.is_none() && open.basic_auth.is_none());
        assert!(open.weakness(any).is_some());
        let both = parse(
            "https://0.0.0.0:9644",
            &[
                ("http.ssl.keystore.location", "/k.pem"),
                ("http.basic.auth.file", "/u"),
                ("http.basic.auth.metrics", "false"),
            ],
        )
        .unwrap();
        assert_eq!(both.weakness(any), None);
        assert!(!both.basic_auth.unwrap().metrics);
    }

    #[test]
    fn https_reads_the_http_ssl_settings() {
        let s = parse(
            "https://127.0.0.1:0",
            &[
                ("http.ssl.keystore.location", "/k.p12"),
                ("http.ssl.keystore.type", "PKCS12"),
                ("http.ssl.keystore.password", "pw"),
                // the Kafka listeners' settings are not the HTTP ones
                ("ssl.keystore.location", "/kafka.pem"),
            ],
        )
        .unwrap();
        let tls = s.tls.unwrap();
        assert_eq!(tls.listener, LISTENER_NAME);
        assert_eq!(
            tls.keystore,
            crate::tls::KeyStoreSource::File {
                path: "/k.p12".into(),
                kind: Some(crate::tls::StoreType::Pkcs12),
                password: Some(crate::tls::Secret("pw".into())),
            }
        );
        for (listener, pairs, name, words) in [
            (
                "https://127.0.0.1:0",
                vec![("ssl.keystore.location", "/kafka.pem")],
                "http.ssl.keystore.location",
                "needs a keystore",
            ),
            (
                "127.0.0.1:0",
                vec![("http.ssl.keystore.location", "/k.pem")],
                "http.ssl.keystore.location",
                "https://",
            ),
            (
                "https://127.0.0.1:0",
                vec![
                    ("http.ssl.keystore.location", "/k.pem"),
                    ("http.ssl.keystore.type", "JKS"),
                ],
                "http.ssl.keystore.type",
                "PKCS12",
            ),
            (
                "127.0.0.1:0",
                vec![
                    ("http.basic.auth.file", "/u"),
                    ("http.basic.auth.metrics", "maybe"),
                ],
                "http.basic.auth.metrics",
                "true or false",
            ),
        ] {
            let e = parse(listener, &pairs).unwrap_err();
            assert_eq!(e.name, name, "{pairs:?}: {e:?}");
            assert!(e.reason.contains(words), "{pairs:?}: {e:?}");
        }
    }

    #[test]
    fn required_client_certificates_count_as_authentication() {
        let s = parse(
            "https://0.0.0.0:0",
            &[
                ("http.ssl.keystore.location", "/k.pem"),
                ("http.ssl.truststore.location", "/ca.pem"),
                ("http.ssl.client.auth", "required"),
            ],
        )
        .unwrap();
        assert!(s.client_certificates_required());
        assert_eq!(s.weakness("0.0.0.0:1".parse().unwrap()), None);
    }
}
