//! Which `Host` headers the HTTP listener answers (a defence against DNS
//! rebinding), and the security headers every response carries.
//!
//! A DNS-rebinding page makes a browser send requests for a name the
//! attacker controls (`evil.example`) to the broker's address; the browser
//! then treats the answers as that page's own. Such a name always has a
//! dot (a public DNS name), so the listener answers only requests whose
//! `Host` is an IP literal (`127.0.0.1`, `[::1]`, `10.0.0.5`), a name
//! without a dot (`localhost`, a short host name, which public DNS cannot
//! serve), the configured listener host, or a name in `http.allowed.hosts`
//! (`*` there turns the check off). The port is not compared: the page
//! reached the broker's port whatever it claims. A request without `Host`
//! (HTTP/1.0 tools) is not from a browser and is answered.

use std::net::IpAddr;

/// The `Content-Security-Policy` of every response: the page loads only
/// its own script, style and images and may only fetch from this origin;
/// no inline script, no plugins, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Decides whether a `Host` header names this broker.
#[derive(Debug, Clone, Default)]
pub struct HostCheck {
    /// Lower-case names accepted besides IP literals and dotless names.
    names: Vec<String>,
    /// `*` in `http.allowed.hosts`: every Host is accepted.
    any: bool,
}

impl HostCheck {
    /// `listener_host`: the host of `http.listeners` (a name or an IP, empty
    /// for all interfaces); `allowed`: `http.allowed.hosts`.
    pub fn new(listener_host: &str, allowed: &[String]) -> HostCheck {
        let mut names: Vec<String> = allowed
            .iter()
            .filter(|a| a.as_str() != "*")
            .filter_map(|a| normalise(a))
            .collect();
        names.extend(normalise(listener_host));
        HostCheck {
            names,
            any: allowed.iter().any(|a| a == "*"),
        }
    }

    /// Whether a request with this `Host` value (None: no header) is
    /// answered.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(value) = host else { return true };
        if self.any {
            return true;
        }
        let Some(name) = host_name(value) else {
            return false;
        };
        name.parse::<IpAddr>().is_ok() || !name.contains('.') || self.names.contains(&name)
    }
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]:port`),
/// lower-cased, without brackets or a trailing dot; None when malformed.
pub fn host_name(value: &str) -> Option<String> {
    let v = value.trim();
    let host = if let Some(rest) = v.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        inner.parse::<std::net::Ipv6Addr>().ok()?;
        inner
    } else {
        match v.rsplit_once(':') {
            Some((h, port)) if is_port(port) => h,
            Some(_) => return None,
            None => v,
        }
    };
    normalise(host)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// A host name or IP as compared: lower case, no brackets, no trailing
/// dot; None when empty or with characters no host name has.
fn normalise(host: &str) -> Option<String> {
    let h = host.trim().trim_start_matches('[').trim_end_matches(']');
    let h = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    if h.is_empty() {
        return None;
    }
    if h.parse::<IpAddr>().is_ok() {
        return Some(h);
    }
    h.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        .then_some(h)
}

/// Checks one `http.allowed.hosts` entry: `*`, a host name or an IP.
pub fn validate_allowed(entry: &str) -> Result<(), String> {
    if entry == "*" || normalise(entry).is_some() {
        Ok(())
    } else {
        Err(format!(
            "{entry:?} is not a host name, an IP address or * (no port, no scheme)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_values() {
        for (v, want) in [
            ("localhost:9644", Some("localhost")),
            ("LocalHost", Some("localhost")),
            ("127.0.0.1:9644", Some("127.0.0.1")),
            ("[::1]:9644", Some("::1")),
            ("[::1]", Some("::1")),
            ("broker.example.com.:80", Some("broker.example.com")),
            ("evil.example:x", None),
            ("[::1", None),
            ("[zz]:1", None),
            ("a b", None),
            ("", None),
            ("host:123456", None),
        ] {
            assert_eq!(host_name(v).as_deref(), want, "{v:?}");
        }
    }

    #[test]
    fn rebinding_names_are_refused_and_local_ones_allowed() {
        let c = HostCheck::new("127.0.0.1", &[]);
        for ok in [
            None,
            Some("127.0.0.1:9644"),
            Some("localhost:9644"),
            Some("localhost"),
            Some("[::1]:9644"),
            Some("10.1.2.3:9644"),
            Some("broker1:9644"),
        ] {
            assert!(c.allows(ok), "{ok:?}");
        }
        for bad in [
            "evil.example:9644",
            "evil.example",
            "127.0.0.1.nip.io:9644",
            "localhost.evil.example",
            "junk value",
        ] {
            assert!(!c.allows(Some(bad)), "{bad:?}");
        }
        let named = HostCheck::new("broker.internal", &["Console.Example.Com".to_string()]);
        assert!(named.allows(Some("broker.internal:9644")));
        assert!(named.allows(Some("console.example.com")));
        assert!(!named.allows(Some("evil.example")));
        assert!(HostCheck::new("", &["*".to_string()]).allows(Some("evil.example")));
    }

    #[test]
    fn allowed_entries_are_validated() {
        for ok in ["*", "broker.example.com", "10.0.0.1", "::1", "[::1]"] {
            assert!(validate_allowed(ok).is_ok(), "{ok}");
        }
        for bad in ["http://x", "a b", "x/y"] {
            assert!(validate_allowed(bad).is_err(), "{bad}");
        }
    }
}
