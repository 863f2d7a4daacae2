//! Version sets and the conditions over `version` they turn into.

use crate::spec::Versions;
use std::fmt::Write;

/// A set of versions within the message's valid range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VSet {
    lo: i16,
    bits: Vec<bool>,
}

impl VSet {
    /// The empty set (for array items, which are never null).
    pub fn empty() -> VSet {
        VSet {
            lo: 0,
            bits: vec![false],
        }
    }

    pub fn of(v: Versions, valid: Versions) -> VSet {
        VSet {
            lo: valid.lo,
            bits: valid.iter().map(|x| v.contains(x)).collect(),
        }
    }
    pub fn and(&self, o: &VSet) -> VSet {
        VSet {
            lo: self.lo,
            bits: self
                .bits
                .iter()
                .zip(&o.bits)
                .map(|(a, b)| *a && *b)
                .collect(),
        }
    }
    pub fn or(&self, o: &VSet) -> VSet {
        VSet {
            lo: self.lo,
            bits: self
                .bits
                .iter()
                .zip(&o.bits)
                .map(|(a, b)| *a || *b)
                .collect(),
        }
    }
    /// Lowest and highest member, if any.
    pub fn bounds(&self) -> Option<(i16, i16)> {
        let runs = self.runs();
        Some((runs.first()?.0, runs.last()?.1))
    }
    pub fn not(&self) -> VSet {
        VSet {
            lo: self.lo,
            bits: self.bits.iter().map(|a| !a).collect(),
        }
    }
    pub fn always(&self) -> bool {
        self.bits.iter().all(|b| *b)
    }
    pub fn never(&self) -> bool {
        self.bits.iter().all(|b| !*b)
    }
    pub fn contains(&self, v: i16) -> bool {
        v >= self.lo
            && self
                .bits
                .get((v - self.lo) as usize)
                .copied()
                .unwrap_or(false)
    }
    /// Contiguous runs of member versions.
    fn runs(&self) -> Vec<(i16, i16)> {
        let mut out: Vec<(i16, i16)> = Vec::new();
        for (i, b) in self.bits.iter().enumerate() {
            let v = self.lo + i as i16;
            if *b {
                match out.last_mut() {
                    Some(last) if last.1 + 1 == v => last.1 = v,
                    _ => out.push((v, v)),
                }
            }
        }
        out
    }
    /// A boolean Rust expression over `version`.
    pub fn code(&self) -> String {
        if self.always() {
            return "true".into();
        }
        if self.never() {
            return "false".into();
        }
        let first = self.lo;
        let last = self.lo + self.bits.len() as i16 - 1;
        let runs = self.runs();
        if runs.len() == 1 {
            let (a, b) = runs[0];
            return if a == b {
                format!("version == {a}")
            } else if a == first {
                format!("version <= {b}")
            } else if b == last {
                format!("version >= {a}")
            } else {
                format!("version >= {a} && version <= {b}")
            };
        }
        let pats: Vec<String> = runs
            .iter()
            .map(|&(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}..={b}")
                }
            })
            .collect();
        format!("matches!(version, {})", pats.join(" | "))
    }
}

/// `if cond { body } else { other }`, folded when `cond` is constant.
pub fn emit_if(out: &mut String, cond: &VSet, body: &str, other: &str) {
    if body.is_empty() && !other.is_empty() && !cond.always() && !cond.never() {
        let _ = writeln!(out, "if {} {{\n{other}}}", cond.not().code());
        return;
    }
    if body.is_empty() && other.is_empty() {
        return;
    }
    if cond.always() {
        out.push_str(body);
    } else if cond.never() {
        out.push_str(other);
    } else if other.is_empty() {
        let _ = writeln!(out, "if {} {{\n{body}}}", cond.code());
    } else {
        let _ = writeln!(out, "if {} {{\n{body}}} else {{\n{other}}}", cond.code());
    }
}

/// Whether `code` mentions identifier `ident` outside string literals.
pub fn uses(code: &str, ident: &str) -> bool {
    let mut plain = String::with_capacity(code.len());
    let mut in_str = false;
    let mut escaped = false;
    for c in code.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            plain.push(' ');
        } else if c == '"' {
            in_str = true;
            plain.push(' ');
        } else {
            plain.push(c);
        }
    }
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_';
    plain.match_indices(ident).any(|(i, _)| {
        let before = plain[..i].chars().next_back();
        let after = plain[i + ident.len()..].chars().next();
        !before.is_some_and(|c| is_id(c) || c == '.') && !after.is_some_and(is_id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions() {
        let valid = Versions { lo: 0, hi: 12 };
        let c = |lo, hi| VSet::of(Versions { lo, hi }, valid).code();
        assert_eq!(c(0, i16::MAX), "true");
        assert_eq!(c(13, i16::MAX), "false");
        assert_eq!(c(9, i16::MAX), "version >= 9");
        assert_eq!(c(0, 3), "version <= 3");
        assert_eq!(c(8, 10), "version >= 8 && version <= 10");
        assert_eq!(c(4, 4), "version == 4");
        let a = VSet::of(Versions { lo: 1, hi: 3 }, valid);
        let b = VSet::of(Versions { lo: 2, hi: 2 }, valid);
        assert_eq!(a.and(&b.not()).code(), "matches!(version, 1 | 3)");
    }

    #[test]
    fn finds_identifiers_outside_strings() {
        assert!(uses("w.put_i8(version)", "version"));
        assert!(!uses("\"a version\" this.version _version", "version"));
    }
}
