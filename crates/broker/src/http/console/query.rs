//! Query-string and path-segment decoding for the console API.
//!
//! Strict on purpose: unknown or repeated parameters are errors, so a typo
//! in a hand-written URL gives a 400 instead of silently ignored input.

use std::collections::BTreeMap;

use super::ConsoleError;

/// Longest query string accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`). The
/// result must be UTF-8.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, ConsoleError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                // Exactly two hex digits (`from_str_radix` alone would also
                // take a sign, as in `%+f`).
                let hex = bytes
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        ConsoleError::BadRequest(format!("bad percent escape at byte {i}"))
                    })?;
                out.push(hex);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| ConsoleError::BadRequest("escaped text is not UTF-8".into()))
}

/// The parameters of a query string, each present at most once and each
/// one of `allowed`.
#[derive(Debug, Default)]
pub struct Query {
    params: BTreeMap<String, String>,
}

impl Query {
    pub fn parse(query: &str, allowed: &[&str]) -> Result<Query, ConsoleError> {
        if query.len() > MAX_QUERY_BYTES {
            return Err(ConsoleError::BadRequest(format!(
                "query longer than {MAX_QUERY_BYTES} bytes"
            )));
        }
        let mut params = BTreeMap::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = percent_decode(k, true)?;
            let v = percent_decode(v, true)?;
            if !allowed.contains(&k.as_str()) {
                return Err(ConsoleError::BadRequest(format!(
                    "unknown parameter {k:?} (allowed: {})",
                    allowed.join(", ")
                )));
            }
            if params.insert(k.clone(), v).is_some() {
                return Err(ConsoleError::BadRequest(format!(
                    "parameter {k:?} given twice"
                )));
            }
        }
        Ok(Query { params })
    }

    /// A parameter's value; an empty value counts as absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn required(&self, name: &str) -> Result<&str, ConsoleError> {
        self.get(name)
            .ok_or_else(|| ConsoleError::BadRequest(format!("parameter {name:?} is required")))
    }

    /// An optional integer parameter.
    pub fn int<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, ConsoleError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
                ConsoleError::BadRequest(format!("parameter {name:?}: {v:?} is not a valid number"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_plus() {
        assert_eq!(percent_decode("a%20b+c", true).unwrap(), "a b c");
        assert_eq!(percent_decode("a+b", false).unwrap(), "a+b");
        assert_eq!(percent_decode("%E2%82%AC", false).unwrap(), "€");
    }

    #[test]
    fn rejects_bad_escapes() {
        for bad in ["%", "%4", "%zz", "%FF", "%C3%28", "a%2", "%+f", "%-1"] {
            assert!(percent_decode(bad, false).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn query_rejects_unknown_and_repeated_parameters() {
        assert!(Query::parse("topic=a&nope=1", &["topic"]).is_err());
        assert!(Query::parse("topic=a&topic=b", &["topic"]).is_err());
        let q = Query::parse("topic=a%2Eb&limit=&offset=7", &["topic", "limit", "offset"]).unwrap();
        assert_eq!(q.get("topic"), Some("a.b"));
        assert_eq!(q.get("limit"), None);
        assert_eq!(q.int::<i64>("offset").unwrap(), Some(7));
    }

    #[test]
    fn numbers_must_parse() {
        let q = Query::parse("offset=12x&partition=99999999999", &["offset", "partition"]).unwrap();
        assert!(q.int::<i64>("offset").is_err());
        assert!(q.int::<i32>("partition").is_err());
        assert!(q.required("missing").is_err());
    }

    #[test]
    fn overlong_query_is_refused() {
        let long = "a".repeat(MAX_QUERY_BYTES + 1);
        assert!(Query::parse(&long, &["a"]).is_err());
    }
}
