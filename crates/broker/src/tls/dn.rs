//! A certificate subject as the RFC 2253 string Kafka's principal mapping
//! sees (Java's `X500Principal.getName()`): the most specific RDN first,
//! `,` between RDNs and `+` inside one, the keywords CN, L, ST, O, OU, C,
//! STREET, DC and UID, any other attribute as its dotted OID with `#` and
//! the hex of its DER value, and `,+"\<>;` plus a leading `#` or space and
//! a trailing space escaped with `\`.

use x509_parser::der_parser::asn1_rs::ToDer;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::X509Name;

/// The subject DN of a DER certificate; None when it does not parse.
pub fn subject_dn(cert_der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(cert_der).ok()?;
    Some(rfc2253(cert.subject()))
}

/// The RFC 2253 form of `name`.
pub fn rfc2253(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let oid = atv.attr_type().to_id_string();
                    let value = atv.attr_value();
                    match keyword(&oid) {
                        Some(k) => match value.as_str() {
                            Ok(s) => format!("{k}={}", escape(s)),
                            Err(_) => format!("{k}=#{}", der_hex(value)),
                        },
                        None => format!("{oid}=#{}", der_hex(value)),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// RFC 2253's keyword for an attribute type (Java emits exactly these).
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.6" => "C",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn der_hex(value: &x509_parser::der_parser::asn1_rs::Any<'_>) -> String {
    value
        .to_der_vec()
        .unwrap_or_default()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Escapes an attribute value as RFC 2253 section 2.4 asks.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let last = s.chars().count().saturating_sub(1);
    for (i, c) in s.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_special_characters() {
        assert_eq!(escape("Tkac, Adam"), r"Tkac\, Adam");
        assert_eq!(escape("#x "), r"\#x\ ");
        assert_eq!(escape("a+b=c"), r"a\+b=c");
    }
}
