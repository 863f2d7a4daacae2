//! Kafka's JAAS configuration text, as given in `sasl.jaas.config`, for a
//! client (its credentials) and for a broker listener (its users):
//!
//! ```text
//! org.apache.kafka.common.security.scram.ScramLoginModule required
//!     username="alice" password="alice-secret";
//! ```
//!
//! One login module: its class name, a control flag (`required`,
//! `requisite`, `sufficient` or `optional`), options `key=value` (the value
//! quoted with `"` or a bare word) and a closing `;`. A client's and a
//! listener mechanism's `sasl.jaas.config` take exactly one module, as in
//! Kafka.
//!
//! ```
//! let m = weir_client::jaas::parse(
//!     "org.apache.kafka.common.security.plain.PlainLoginModule required \
//!      username=\"alice\" password=\"alice-secret\";",
//! )
//! .unwrap();
//! assert_eq!(m.option("username"), Some("alice"));
//! ```

/// One parsed login module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasModule {
    pub class: String,
    pub flag: String,
    /// Options in the order given (a repeated key keeps both).
    pub options: Vec<(String, String)>,
}

/// Why a JAAS text was refused. Option values are never quoted in it: they
/// hold passwords.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("no login module")]
    Empty,
    #[error(
        "login module {class}: missing or unknown control flag (required, requisite, sufficient or optional)"
    )]
    Flag { class: String },
    #[error("login module {class}: option at character {position} is not key=value")]
    Option { class: String, position: usize },
    #[error("login module {class}: unterminated quoted value")]
    Unterminated { class: String },
    #[error("login module {class}: missing ';' at the end")]
    NoSemicolon { class: String },
    #[error("more than one login module (sasl.jaas.config takes one)")]
    SeveralModules,
}

impl JaasModule {
    /// The value of option `key` (the first one when it is repeated).
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a `sasl.jaas.config` value holding exactly one login module.
pub fn parse(text: &str) -> Result<JaasModule, JaasError> {
    let mut p = Parser { s: text, pos: 0 };
    p.skip_space();
    let class = p.word();
    if class.is_empty() {
        return Err(JaasError::Empty);
    }
    p.skip_space();
    let flag = p.word();
    if !["required", "requisite", "sufficient", "optional"]
        .iter()
        .any(|f| f.eq_ignore_ascii_case(&flag))
    {
        return Err(JaasError::Flag { class });
    }
    let mut options = Vec::new();
    loop {
        p.skip_space();
        match p.peek() {
            Some(';') => {
                p.pos += 1;
                break;
            }
            None => return Err(JaasError::NoSemicolon { class }),
            Some(_) => {}
        }
        let position = p.pos;
        let key = p.word();
        if key.is_empty() || p.peek() != Some('=') {
            return Err(JaasError::Option { class, position });
        }
        p.pos += 1;
        let value = if p.peek() == Some('"') {
            p.pos += 1;
            match p.quoted() {
                Some(v) => v,
                None => return Err(JaasError::Unterminated { class }),
            }
        } else {
            let v = p.word();
            if v.is_empty() {
                return Err(JaasError::Option { class, position });
            }
            v
        };
        options.push((key, value));
    }
    p.skip_space();
    if p.peek().is_some() {
        return Err(JaasError::SeveralModules);
    }
    Ok(JaasModule {
        class,
        flag: flag.to_ascii_lowercase(),
        options,
    })
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        self.s.get(self.pos..).unwrap_or_default()
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// A run of characters up to white space, `=`, `;` or `"`.
    fn word(&mut self) -> String {
        let rest = self.rest();
        let end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '=' | ';' | '"'))
            .unwrap_or(rest.len());
        let w = rest.get(..end).unwrap_or_default().to_string();
        self.pos += end;
        w
    }

    /// The rest of a quoted value (the opening quote consumed); `\"` and
    /// `\\` escape. None when the closing quote is missing.
    fn quoted(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Some(out);
                }
                '\\' => out.push(chars.next()?.1),
                c => out.push(c),
            }
        }
        None
    }
}

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
