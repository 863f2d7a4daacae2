//! Kafka's JSON message definitions, parsed into a typed model.

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use std::collections::BTreeMap;

/// An inclusive version range; `lo > hi` means "no versions".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    pub lo: i16,
    pub hi: i16,
}

impl Versions {
    pub const NONE: Versions = Versions { lo: 1, hi: 0 };
    pub const ALL: Versions = Versions {
        lo: 0,
        hi: i16::MAX,
    };

    /// Parses Kafka's version syntax: `none`, `N`, `N+`, `N-M`.
    pub fn parse(s: &str) -> Result<Versions> {
        let s = s.trim();
        if s == "none" {
            return Ok(Versions::NONE);
        }
        let num = |t: &str| -> Result<i16> {
            t.trim()
                .parse::<i16>()
                .with_context(|| format!("bad version number {t:?}"))
        };
        if let Some(lo) = s.strip_suffix('+') {
            return Ok(Versions {
                lo: num(lo)?,
                hi: i16::MAX,
            });
        }
        if let Some((lo, hi)) = s.split_once('-') {
            return Ok(Versions {
                lo: num(lo)?,
                hi: num(hi)?,
            });
        }
        let v = num(s)?;
        Ok(Versions { lo: v, hi: v })
    }

    pub fn is_empty(&self) -> bool {
        self.lo > self.hi
    }

    pub fn contains(&self, v: i16) -> bool {
        self.lo <= v && v <= self.hi
    }

    pub fn iter(&self) -> impl Iterator<Item = i16> {
        let (lo, hi) = (self.lo, self.hi);
        (lo..=hi).take_while(move |_| lo <= hi)
    }
}

/// A field's wire type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint16,
    Uint32,
    Float64,
    String,
    Bytes,
    Uuid,
    Records,
    Struct(String),
    Array(Box<Type>),
}

impl Type {
    pub fn parse(s: &str) -> Result<Type> {
        if let Some(inner) = s.strip_prefix("[]") {
            let t = Type::parse(inner)?;
            if matches!(t, Type::Array(_) | Type::Records) {
                bail!("unsupported array element type {inner}");
            }
            return Ok(Type::Array(Box::new(t)));
        }
        Ok(match s {
            "bool" => Type::Bool,
            "int8" => Type::Int8,
            "int16" => Type::Int16,
            "int32" => Type::Int32,
            "int64" => Type::Int64,
            "uint16" => Type::Uint16,
            "uint32" => Type::Uint32,
            "float64" => Type::Float64,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "uuid" => Type::Uuid,
            "records" => Type::Records,
            s if s.starts_with(|c: char| c.is_ascii_uppercase())
                && s.chars().all(|c| c.is_ascii_alphanumeric()) =>
            {
                Type::Struct(s.to_string())
            }
            other => bail!("unknown field type {other:?}"),
        })
    }

    /// Types that may be null on the wire in some version.
    pub fn can_be_nullable(&self) -> bool {
        matches!(
            self,
            Type::String | Type::Bytes | Type::Records | Type::Struct(_) | Type::Array(_)
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMessage {
    #[serde(rename = "type")]
    kind: String,
    name: String,
    api_key: Option<i16>,
    valid_versions: String,
    flexible_versions: String,
    #[serde(default)]
    fields: Vec<RawField>,
    #[serde(default)]
    common_structs: Vec<RawCommonStruct>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCommonStruct {
    name: String,
    #[serde(default)]
    fields: Vec<RawField>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawField {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    versions: Option<String>,
    nullable_versions: Option<String>,
    tagged_versions: Option<String>,
    tag: Option<serde_json::Value>,
    default: Option<serde_json::Value>,
    #[serde(default)]
    ignorable: bool,
    flexible_versions: Option<String>,
    fields: Option<Vec<RawField>>,
    #[serde(default)]
    about: String,
}

/// One field of a struct.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ty: Type,
    pub versions: Versions,
    pub nullable: Versions,
    pub tagged: Versions,
    pub tag: Option<u32>,
    /// The JSON default as written (number or string), if any.
    pub default: Option<String>,
    pub ignorable: bool,
    /// Per-field override of the message's flexible versions (strings/bytes).
    pub flexible: Option<Versions>,
    pub about: String,
}

/// A struct: the message itself, an inline struct or a common struct.
#[derive(Debug, Clone)]
pub struct StructDef {
    pub name: String,
    pub fields: Vec<Field>,
}

/// The kind of a JSON definition file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Response,
    Header,
    Data,
    /// A KRaft metadata record (`__cluster_metadata`); its `apiKey` is the
    /// record type.
    Metadata,
}

/// One JSON file.
#[derive(Debug, Clone)]
pub struct Message {
    pub kind: Kind,
    pub name: String,
    pub api_key: Option<i16>,
    pub valid: Versions,
    pub flexible: Versions,
    /// All structs; the first is the message's top-level struct.
    pub structs: Vec<StructDef>,
}

impl Message {
    pub fn struct_def(&self, name: &str) -> Option<&StructDef> {
        self.structs.iter().find(|s| s.name == name)
    }
}

/// Removes `//` comments, leaving `//` inside JSON strings alone.
pub fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '/' && chars.peek() == Some(&'/') {
            for n in chars.by_ref() {
                if n == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn parse_message(src: &str) -> Result<Message> {
    // Via `Value`: like Kafka's JSON reader, a repeated key keeps its last
    // value (DescribeTopicPartitionsRequest repeats a `versions`).
    let value: serde_json::Value = serde_json::from_str(&strip_comments(src))?;
    let raw: RawMessage = serde_json::from_value(value)?;
    let kind = match raw.kind.as_str() {
        "request" => Kind::Request,
        "response" => Kind::Response,
        "header" => Kind::Header,
        "data" => Kind::Data,
        "metadata" => Kind::Metadata,
        other => bail!("unknown message type {other:?}"),
    };
    let valid = Versions::parse(&raw.valid_versions)?;
    let flexible = Versions::parse(&raw.flexible_versions)?;
    let mut structs: BTreeMap<String, StructDef> = BTreeMap::new();
    let mut order = Vec::new();
    let top = StructDef {
        name: raw.name.clone(),
        fields: convert_fields(&raw.fields, &mut structs, &mut order)?,
    };
    for cs in &raw.common_structs {
        let def = StructDef {
            name: cs.name.clone(),
            fields: convert_fields(&cs.fields, &mut structs, &mut order)?,
        };
        add_struct(def, &mut structs, &mut order)?;
    }
    let mut all = vec![top];
    for name in order {
        if let Some(s) = structs.remove(&name) {
            all.push(s);
        }
    }
    let msg = Message {
        kind,
        name: raw.name,
        api_key: raw.api_key,
        valid,
        flexible,
        structs: all,
    };
    // Every referenced struct type must be defined.
    for s in &msg.structs {
        for f in &s.fields {
            if let Some(n) = struct_name(&f.ty)
                && msg.struct_def(n).is_none()
            {
                bail!("{}: struct type {n} is not defined", msg.name);
            }
        }
    }
    Ok(msg)
}

/// The struct type a field refers to, directly or as array element.
pub fn struct_name(ty: &Type) -> Option<&str> {
    match ty {
        Type::Struct(n) => Some(n),
        Type::Array(inner) => struct_name(inner),
        _ => None,
    }
}

fn add_struct(
    def: StructDef,
    structs: &mut BTreeMap<String, StructDef>,
    order: &mut Vec<String>,
) -> Result<()> {
    if let Some(prev) = structs.get(&def.name) {
        let same = prev.fields.len() == def.fields.len()
            && prev
                .fields
                .iter()
                .zip(&def.fields)
                .all(|(a, b)| a.name == b.name && a.ty == b.ty);
        if !same {
            bail!("struct {} defined twice with different fields", def.name);
        }
        return Ok(());
    }
    order.push(def.name.clone());
    structs.insert(def.name.clone(), def);
    Ok(())
}

fn convert_fields(
    raw: &[RawField],
    structs: &mut BTreeMap<String, StructDef>,
    order: &mut Vec<String>,
) -> Result<Vec<Field>> {
    let mut out = Vec::new();
    for f in raw {
        let ty = Type::parse(&f.ty).with_context(|| format!("field {}", f.name))?;
        let tagged = match &f.tagged_versions {
            Some(v) => Versions::parse(v)?,
            None => Versions::NONE,
        };
        let versions = match (&f.versions, &f.tagged_versions) {
            (Some(v), _) => Versions::parse(v)?,
            (None, Some(_)) => tagged,
            (None, None) => bail!("field {} has no versions", f.name),
        };
        let nullable = match &f.nullable_versions {
            Some(v) => Versions::parse(v)?,
            None => Versions::NONE,
        };
        if !nullable.is_empty() && !ty.can_be_nullable() {
            bail!("field {} of type {} cannot be nullable", f.name, f.ty);
        }
        let tag = match &f.tag {
            None => None,
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse::<u64>().ok(),
            Some(other) => bail!("bad tag {other}"),
        }
        .map(|t| u32::try_from(t).map_err(|_| anyhow!("tag {t} too large")))
        .transpose()?;
        if tag.is_some() == tagged.is_empty() {
            bail!(
                "field {}: tag and taggedVersions must come together",
                f.name
            );
        }
        let default = match &f.default {
            None => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            Some(serde_json::Value::Bool(b)) => Some(b.to_string()),
            Some(serde_json::Value::Null) => Some("null".to_string()),
            Some(other) => bail!("field {}: bad default {other}", f.name),
        };
        let flexible = f
            .flexible_versions
            .as_deref()
            .map(Versions::parse)
            .transpose()?;
        if let Some(sub) = &f.fields {
            let name = struct_name(&ty)
                .ok_or_else(|| anyhow!("field {} has fields but is not a struct", f.name))?
                .to_string();
            let fields = convert_fields(sub, structs, order)?;
            add_struct(StructDef { name, fields }, structs, order)?;
        }
        out.push(Field {
            name: f.name.clone(),
            ty,
            versions,
            nullable,
            tagged,
            tag,
            default,
            ignorable: f.ignorable,
            flexible,
            about: f.about.clone(),
        });
    }
    Ok(out)
}

/// `TopicId` → `topic_id`, `IsKRaftController` → `is_k_raft_controller`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                let prev = chars[i - 1];
                let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
                if prev.is_ascii_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_ascii_uppercase() && next_lower)
                {
                    out.push('_');
                }
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield",
];

/// The Rust identifier for a JSON field name.
pub fn field_ident(name: &str) -> String {
    let s = snake_case(name);
    if KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_outside_strings() {
        let src = "{ \"a\": \"x//y\", // comment\n \"b\": 1 }";
        let v: serde_json::Value = serde_json::from_str(&strip_comments(src)).unwrap();
        assert_eq!(v["a"], "x//y");
        assert_eq!(v["b"], 1);
    }

    #[test]
    fn versions() {
        assert_eq!(
            Versions::parse("3+").unwrap(),
            Versions {
                lo: 3,
                hi: i16::MAX
            }
        );
        assert_eq!(Versions::parse("1-4").unwrap(), Versions { lo: 1, hi: 4 });
        assert_eq!(Versions::parse("2").unwrap(), Versions { lo: 2, hi: 2 });
        assert!(Versions::parse("none").unwrap().is_empty());
    }

    #[test]
    fn names() {
        assert_eq!(field_ident("TopicId"), "topic_id");
        assert_eq!(field_ident("IsKRaftController"), "is_k_raft_controller");
        assert_eq!(field_ident("leaderEpoch"), "leader_epoch");
        assert_eq!(field_ident("Type"), "r#type");
    }
}
