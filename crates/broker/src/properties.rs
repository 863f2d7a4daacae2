//! Java properties files (`java.util.Properties::load`): Kafka's
//! `server.properties` and its clients' `--command-config` files.
//! [`parse_properties`] reads them as Java does (`key=value`,
//! `key: value`, `key value`, `#`/`!` comments, backslash escapes and
//! continuation lines); [`parse_properties_strict`] also refuses a line
//! without `=` or `:`, which in a broker's config file is a mistake rather
//! than a key with an empty value.

/// A syntax error in a properties file, at a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesError {
    pub line: usize,
    pub reason: &'static str,
}

impl std::fmt::Display for PropertiesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for PropertiesError {}

/// Whitespace as `java.util.Properties` sees it.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Parses the text of a Java properties file into (key, value) pairs in
/// file order (a later duplicate overrides an earlier one when collected).
///
/// As `java.util.Properties::load`: leading whitespace of a line is
/// skipped; a line whose first other character is `#` or `!` is a comment;
/// the key ends at the first unescaped `=`, `:` or whitespace, then
/// whitespace and one `=` or `:` (with whitespace around it) separate it
/// from the value; a line ending in an odd number of backslashes continues
/// on the next one (whose leading whitespace is skipped); `\t`, `\n`, `\r`,
/// `\f`, `\uXXXX` are escapes and a backslash before any other character
/// stands for that character. The value keeps trailing whitespace here.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, PropertiesError> {
    Ok(parse(text)?
        .into_iter()
        .map(|(k, v, _, _)| (k, v))
        .collect())
}

/// [`parse_properties`], refusing a logical line whose key is not followed
/// by `=` or `:` ("expected name=value").
pub fn parse_properties_strict(text: &str) -> Result<Vec<(String, String)>, PropertiesError> {
    parse(text)?
        .into_iter()
        .map(|(k, v, separated, line)| {
            if separated && !k.is_empty() {
                Ok((k, v))
            } else {
                Err(PropertiesError {
                    line,
                    reason: "expected name=value",
                })
            }
        })
        .collect()
}

/// Key, value, whether `=` or `:` separated them and the 1-based line, per
/// logical line.
fn parse(text: &str) -> Result<Vec<(String, String, bool, usize)>, PropertiesError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, first)) = lines.next() {
        let first = first.trim_start_matches(is_space);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines into one logical line.
        let mut logical = String::from(first);
        while ends_in_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_space)),
                None => break,
            }
        }
        let line = index + 1;
        let (key, value, separated) = split_key_value(&logical);
        out.push((
            unescape(key, line)?,
            unescape(value, line)?,
            separated,
            line,
        ));
    }
    Ok(out)
}

fn ends_in_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Splits a logical line (no leading whitespace) into its raw key and raw
/// value, both still escaped.
fn split_key_value(line: &str) -> (&str, &str, bool) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_space(c) {
            key_end = i;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start_matches(is_space);
    let separated = match rest.strip_prefix(['=', ':']) {
        Some(r) => {
            rest = r.trim_start_matches(is_space);
            true
        }
        None => false,
    };
    (key, rest, separated)
}

fn unescape(raw: &str, line: usize) -> Result<String, PropertiesError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let bad = PropertiesError {
                    line,
                    reason: "malformed \\uXXXX escape",
                };
                let mut code = hex4(&mut chars).ok_or(bad.clone())?;
                // A character outside the BMP is written as a UTF-16
                // surrogate pair of two escapes.
                if (0xD800..0xDC00).contains(&code) {
                    let low = match (chars.next(), chars.next()) {
                        (Some('\\'), Some('u')) => hex4(&mut chars),
                        _ => None,
                    };
                    match low {
                        Some(low) if (0xDC00..0xE000).contains(&low) => {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                        }
                        _ => return Err(bad),
                    }
                }
                out.push(char::from_u32(code).ok_or(bad)?);
            }
            Some(other) => out.push(other),
            // A lone trailing backslash (the last line continued into
            // nothing) stands for nothing, as in Java.
            None => {}
        }
    }
    Ok(out)
}

/// Four hex digits of a `\\u` escape.
fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let hex: String = chars.by_ref().take(4).collect();
    if hex.len() != 4 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(&hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn properties_syntax_as_java_reads_it() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("a=1", &[("a", "1")]),
            ("a:1", &[("a", "1")]),
            ("a 1", &[("a", "1")]),
            ("  a = 1", &[("a", "1")]),
            ("\ta\t:\t1", &[("a", "1")]),
            // The value keeps trailing whitespace and further separators.
            ("a=1  ", &[("a", "1  ")]),
            ("a==1", &[("a", "=1")]),
            ("a = b = c", &[("a", "b = c")]),
            ("url=http://h:1/x", &[("url", "http://h:1/x")]),
            ("a", &[("a", "")]),
            ("a=", &[("a", "")]),
            ("# c=1\n! d=2\n\n   \n  # e", &[]),
            ("a=1 # not a comment", &[("a", "1 # not a comment")]),
            ("a=1\r\nb=2\r\n", &[("a", "1"), ("b", "2")]),
            // Escapes in keys and values.
            ("a\\=b=c", &[("a=b", "c")]),
            ("a\\ b=c", &[("a b", "c")]),
            ("a=\\ x", &[("a", " x")]),
            ("a=x\\ty\\\\z", &[("a", "x\ty\\z")]),
            ("a=\\u00e9\\q", &[("a", "éq")]),
            ("a=\\ud83d\\ude00", &[("a", "\u{1f600}")]),
            // Continuation lines, leading whitespace of the next one skipped.
            ("a=1,\\\n   2,\\\n  3\nb=4", &[("a", "1,2,3"), ("b", "4")]),
            ("a=x\\\\\nb=y", &[("a", "x\\"), ("b", "y")]),
            ("a=x\\", &[("a", "x")]),
            ("a=1\na=2", &[("a", "1"), ("a", "2")]),
        ];
        for (text, want) in cases {
            assert_eq!(parse_properties(text).unwrap(), pairs(want), "{text:?}");
        }
        for (text, line) in [
            ("a=1\nb=\\u12", 2),
            ("a=\\uzzzz", 1),
            ("a=\\u+041", 1),
            ("a=\\ud800", 1),
            ("a=\\ud800\\u0041", 1),
            ("a=\\ude00", 1),
        ] {
            assert_eq!(parse_properties(text).unwrap_err().line, line, "{text:?}");
        }
    }

    #[test]
    fn strict_refuses_a_line_without_separator() {
        assert_eq!(
            parse_properties_strict("a=1\nb \\\n  =2\nc\n")
                .unwrap_err()
                .line,
            4
        );
        assert_eq!(
            parse_properties_strict("a = 1\nb: x \\\n  y\n").unwrap(),
            pairs(&[("a", "1"), ("b", "x y")])
        );
    }
}
