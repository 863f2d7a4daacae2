//! `ssl.principal.mapping.rules`: Kafka's rules that turn a client
//! certificate's distinguished name into a principal name.
//!
//! The syntax is Kafka's (`SslPrincipalMapper`): a comma-separated list of
//! `DEFAULT` (the DN unchanged) and `RULE:pattern/replacement/[L|U]`, where
//! `\` escapes a `/` or a comma inside a pattern or replacement. Rules are
//! tried in order; the first whose pattern matches the whole DN gives the
//! name, with `$1`… replaced by its groups and `L`/`U` lower- or
//! upper-casing the result. When no rule matches the client is refused, as
//! Kafka refuses it.
//!
//! The list is split with the same regular expressions Kafka uses, so a
//! rule list that Kafka accepts splits the same way here.
//!
//! ```
//! use weir_broker::tls::PrincipalRules;
//! let rules = PrincipalRules::parse("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT").unwrap();
//! assert_eq!(rules.map("CN=Duke,OU=ServiceUsers,O=Org,C=US").as_deref(), Some("duke"));
//! assert_eq!(rules.map("CN=Other,O=Org").as_deref(), Some("CN=Other,O=Org"));
//! ```

use std::sync::LazyLock;

use regex::Regex;

/// Kafka's `RULE_PATTERN`: group 1 DEFAULT, 2 the pattern, 4 the
/// replacement, 6 the case flag, 7 anything else (an invalid rule).
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

// Both are constants, compiled once; a test builds them.
#[allow(clippy::expect_used)]
static SPLITTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"\s*({RULE_PATTERN})\s*(,\s*|$)")).expect("constant regex")
});
#[allow(clippy::expect_used)]
static PARSER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^(?:{RULE_PATTERN})")).expect("constant regex"));

/// One rule of the list.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        /// The pattern as written, anchored to match the whole DN.
        whole: Regex,
        /// The pattern as written, for the replacement.
        pattern: Regex,
        /// The replacement in the `regex` crate's syntax.
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A parsed `ssl.principal.mapping.rules` value.
#[derive(Debug, Clone)]
pub struct PrincipalRules {
    text: String,
    rules: Vec<Rule>,
}

impl PartialEq for PrincipalRules {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for PrincipalRules {}

impl Default for PrincipalRules {
    fn default() -> Self {
        PrincipalRules {
            text: "DEFAULT".to_string(),
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalRules {
    /// Parses a rule list; the error names the rule that is not valid.
    pub fn parse(text: &str) -> Result<PrincipalRules, String> {
        let mut rules = Vec::new();
        for caps in SPLITTER.captures_iter(text.trim()) {
            let rule = caps.get(1).map_or("", |m| m.as_str());
            let Some(m) = PARSER.captures(rule) else {
                return Err(format!("invalid rule {rule:?}"));
            };
            let end = m.get(0).map_or(0, |m| m.end());
            if end != rule.len() {
                return Err(format!(
                    "invalid rule {rule:?}: unmatched {:?}",
                    rule.get(end..).unwrap_or_default()
                ));
            }
            if m.get(1).is_some() {
                rules.push(Rule::Default);
            } else if let Some(pattern) = m.get(2) {
                let pattern = pattern.as_str();
                let replacement = m.get(4).map_or("", |r| r.as_str());
                let case = match m.get(6).map(|c| c.as_str()) {
                    Some("L") => Case::Lower,
                    Some("U") => Case::Upper,
                    _ => Case::Keep,
                };
                let compile = |p: &str| {
                    Regex::new(p).map_err(|e| format!("invalid pattern in rule {rule:?}: {e}"))
                };
                let compiled = compile(pattern)?;
                let groups = compiled.captures_len() - 1;
                rules.push(Rule::Replace {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    pattern: compiled,
                    replacement: java_replacement(replacement, groups),
                    case,
                });
            } else if m.get(7).is_some_and(|r| !r.as_str().is_empty()) {
                return Err(format!("invalid rule {rule:?}"));
            }
            // an empty entry (",,") is ignored, as in Kafka
        }
        Ok(PrincipalRules {
            text: text.to_string(),
            rules,
        })
    }

    /// The principal name for `dn`, None when no rule applies.
    pub fn map(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_string()),
            Rule::Replace {
                whole,
                pattern,
                replacement,
                case,
            } => {
                if !whole.is_match(dn) {
                    return None;
                }
                let out = pattern.replace_all(dn, replacement.as_str()).into_owned();
                Some(match case {
                    Case::Keep => out,
                    Case::Lower => out.to_lowercase(),
                    Case::Upper => out.to_uppercase(),
                })
            }
        })
    }

    /// The rules as configured.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Translates a Java replacement string (`$1` group references, `\x` a
/// literal `x`) for a pattern with `groups` groups into the `regex`
/// crate's syntax. As Java does, a reference takes as many digits as still
/// name a group, and one that names no group stays literal text (Kafka
/// escapes those first).
fn java_replacement(java: &str, groups: usize) -> String {
    let mut out = String::with_capacity(java.len() + 8);
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') | None => out.push_str("$$"),
                Some(other) => out.push(other),
            },
            '$' => {
                let Some(first) = chars.peek().and_then(|d| d.to_digit(10)) else {
                    out.push_str("$$");
                    continue;
                };
                let first = first as usize;
                if first > groups {
                    out.push_str("$$");
                    continue;
                }
                chars.next();
                let mut n = first;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    let next = n * 10 + d as usize;
                    if next > groups {
                        break;
                    }
                    n = next;
                    chars.next();
                }
                out.push_str(&format!("${{{n}}}"));
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_valid_and_invalid_rules() {
        for ok in [
            "DEFAULT",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
            "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "",
            ",   , ,",
        ] {
            assert!(PrincipalRules::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        ] {
            assert!(PrincipalRules::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kafka_mapping_examples() {
        let rules = PrincipalRules::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, \
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, \
             RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, \
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, \
             DEFAULT",
        )
        .unwrap();
        for (dn, want) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
            ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(rules.map(dn).as_deref(), Some(want), "{dn}");
        }
    }

    #[test]
    fn escaped_comma_in_a_pattern_and_no_match_refuses() {
        let rules = PrincipalRules::parse(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT").unwrap();
        assert_eq!(
            rules
                .map(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz")
                .as_deref(),
            Some(r"Tkac\, Adam")
        );
        let only = PrincipalRules::parse("RULE:^CN=([a-z]+)$/$1/").unwrap();
        assert_eq!(only.map("CN=abc").as_deref(), Some("abc"));
        assert_eq!(only.map("CN=ABC"), None);
        assert_eq!(PrincipalRules::parse("").unwrap().map("CN=x"), None);
    }

    #[test]
    fn replacement_references_follow_java() {
        // a reference beyond the groups stays literal; digits extend a
        // reference only while they name a group
        assert_eq!(java_replacement("$1@$4", 3), "${1}@$$4");
        assert_eq!(java_replacement("$12", 1), "${1}2");
        assert_eq!(java_replacement("$12", 12), "${12}");
        assert_eq!(java_replacement(r"a\$b$", 1), "a$$b$$");
        let rules = PrincipalRules::parse("RULE:^CN=(.*)$/user-$1-x/").unwrap();
        assert_eq!(rules.map("CN=bob").as_deref(), Some("user-bob-x"));
    }
}
