//! The `mod.rs` files: module list, `ApiKey`, `RequestBody`, `ResponseBody`.

use crate::emit::HEADER;
use crate::spec::{Kind, Message, Versions, snake_case};
use crate::vset::VSet;
use anyhow::{Result, bail};
use std::fmt::Write;

/// `mod.rs` for the protocol messages (`messages/`).
pub fn emit_messages_mod(msgs: &[Message], submodules: &[(&str, &str)]) -> Result<String> {
    let mut out = String::from(HEADER);
    out.push_str(
        "//! Every Kafka request and response, the request and response headers,\n\
         //! and Kafka's other versioned data structures, generated from Kafka's\n\
         //! JSON message definitions (see `docs/protocol-codegen.md`).\n\n",
    );
    out.push_str(
        "#![allow(\n\
         clippy::collapsible_else_if,\n\
         clippy::collapsible_if,\n\
         clippy::needless_question_mark,\n\
         clippy::explicit_auto_deref,\n\
         clippy::field_reassign_with_default,\n\
         clippy::manual_range_contains,\n\
         clippy::redundant_closure,\n\
         clippy::match_single_binding,\n\
         clippy::nonminimal_bool,\n\
         clippy::too_many_lines\n\
         )]\n\n",
    );
    out.push_str("use crate::codec::{Decodable, DecodeError, Encodable, EncodeError};\nuse bytes::{Bytes, BytesMut};\n\n");
    for (m, doc) in submodules {
        let _ = writeln!(out, "/// {doc}\npub mod {m};");
    }
    emit_module_list(&mut out, msgs);

    // Pair requests with responses by api key.
    let mut apis: Vec<(i16, &Message, &Message)> = Vec::new();
    for req in msgs.iter().filter(|m| m.kind == Kind::Request) {
        let Some(key) = req.api_key else {
            bail!("{} has no apiKey", req.name)
        };
        let base = req.name.trim_end_matches("Request");
        let resp_name = format!("{base}Response");
        let Some(resp) = msgs.iter().find(|m| m.name == resp_name) else {
            bail!("{} has no response", req.name)
        };
        if resp.api_key != Some(key) || resp.valid != req.valid {
            bail!(
                "{} and {} disagree on api key or versions",
                req.name,
                resp.name
            );
        }
        apis.push((key, req, resp));
    }
    apis.sort_by_key(|a| a.0);
    for w in apis.windows(2) {
        if w[0].0 == w[1].0 {
            bail!("api key {} used twice", w[0].0);
        }
    }
    let var = |m: &Message| m.name.trim_end_matches("Request").to_string();

    // ApiKey
    out.push_str("\n/// A Kafka API: the first field of every request header.\n");
    out.push_str("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(i16)]\npub enum ApiKey {\n");
    for (k, req, _) in &apis {
        let _ = writeln!(out, "    {} = {k},", var(req));
    }
    out.push_str("}\n\n");
    out.push_str("/// An api key this code does not know.\n#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]\n#[error(\"unknown api key {0}\")]\npub struct UnknownApiKey(pub i16);\n\n");
    out.push_str("impl TryFrom<i16> for ApiKey {\n    type Error = UnknownApiKey;\n    fn try_from(v: i16) -> Result<Self, UnknownApiKey> {\n        Ok(match v {\n");
    for (k, req, _) in &apis {
        let _ = writeln!(out, "{k} => ApiKey::{},", var(req));
    }
    out.push_str("_ => return Err(UnknownApiKey(v)),\n})\n}\n}\n\n");
    out.push_str("impl From<ApiKey> for i16 {\n    fn from(k: ApiKey) -> i16 {\n        k as i16\n    }\n}\n\n");

    out.push_str("impl ApiKey {\n");
    let _ = writeln!(
        out,
        "    /// Every api key, in numeric order.\n    pub const ALL: [ApiKey; {}] = [",
        apis.len()
    );
    for (_, req, _) in &apis {
        let _ = writeln!(out, "ApiKey::{},", var(req));
    }
    out.push_str("];\n\n");
    out.push_str("    /// The API's name as Kafka spells it (`Produce`, `ApiVersions`, …).\n    pub fn name(&self) -> &'static str {\n        match self {\n");
    for (_, req, _) in &apis {
        let _ = writeln!(out, "ApiKey::{v} => {v:?},", v = var(req));
    }
    out.push_str("}\n}\n\n");
    out.push_str("    /// The (lowest, highest) version this code can encode and decode.\n    pub fn valid_versions(&self) -> (i16, i16) {\n        match self {\n");
    for (_, req, _) in &apis {
        let _ = writeln!(
            out,
            "ApiKey::{} => ({}, {}),",
            var(req),
            req.valid.lo,
            req.valid.hi
        );
    }
    out.push_str("}\n}\n\n");
    let flex_fn = |out: &mut String,
                   name: &str,
                   doc: &str,
                   pick: &dyn Fn(&(i16, &Message, &Message)) -> Versions| {
        let _ = writeln!(
            out,
            "    /// {doc}\n    pub fn {name}(&self, api_version: i16) -> bool {{\n        match self {{"
        );
        for a in &apis {
            let v = pick(a);
            let set = VSet::of(v, Versions::ALL);
            let code = if v.is_empty() {
                "false".to_string()
            } else if v.hi == i16::MAX {
                format!("api_version >= {}", v.lo)
            } else {
                set.code().replace("version", "api_version")
            };
            let _ = writeln!(out, "ApiKey::{} => {code},", var(a.1));
        }
        out.push_str("}\n}\n\n");
    };
    flex_fn(
        &mut out,
        "is_request_flexible",
        "Whether requests of `api_version` use the flexible encoding.",
        &|a| a.1.flexible,
    );
    flex_fn(
        &mut out,
        "is_response_flexible",
        "Whether responses of `api_version` use the flexible encoding.",
        &|a| a.2.flexible,
    );
    out.push_str(
        "    /// The request header version used with `api_version` of this API.\n\
         pub fn request_header_version(&self, api_version: i16) -> i16 {\n\
         // Version 0 of the header (no client id) is only used by ControlledShutdown v0.\n\
         if *self == ApiKey::ControlledShutdown && api_version == 0 {\n\
         0\n\
         } else if self.is_request_flexible(api_version) {\n\
         2\n\
         } else {\n\
         1\n\
         }\n\
         }\n\n\
         /// The response header version used with `api_version` of this API.\n\
         pub fn response_header_version(&self, api_version: i16) -> i16 {\n\
         // ApiVersions responses always use header v0 so that a client can read\n\
         // them whatever version it asked for.\n\
         if *self == ApiKey::ApiVersions {\n\
         0\n\
         } else if self.is_response_flexible(api_version) {\n\
         1\n\
         } else {\n\
         0\n\
         }\n\
         }\n}\n\n",
    );

    emit_body_enum(&mut out, "RequestBody", "request", &apis, |a| a.1, &var);
    emit_body_enum(&mut out, "ResponseBody", "response", &apis, |a| a.2, &var);

    let _ = writeln!(
        out,
        "/// Calls `$m!` with every top-level message type of this module.\n#[doc(hidden)]\n#[macro_export]\nmacro_rules! __weir_all_messages {{\n    ($m:ident) => {{\n        $m! {{ {} }}\n    }};\n}}",
        msgs.iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(out)
}

fn emit_module_list(out: &mut String, msgs: &[Message]) {
    out.push('\n');
    for m in msgs {
        let _ = writeln!(out, "pub mod {};", snake_case(&m.name));
    }
    out.push('\n');
    for m in msgs {
        let _ = writeln!(out, "pub use {}::{};", snake_case(&m.name), m.name);
    }
    out.push_str(
        "\n/// Per module: top-level name and the `__LAYOUT` of its structs.\n\
         #[doc(hidden)]\n\
         #[allow(clippy::type_complexity)]\n\
         pub const __ALL_LAYOUTS: &[(&str, &[(&str, (i16, i16), usize, fn(i16) -> usize)])] = &[\n",
    );
    for m in msgs {
        let _ = writeln!(out, "({:?}, {}::__LAYOUT),", m.name, snake_case(&m.name));
    }
    out.push_str("];\n");
}

fn emit_body_enum<'a>(
    out: &mut String,
    name: &str,
    what: &str,
    apis: &[(i16, &'a Message, &'a Message)],
    pick: impl Fn(&(i16, &'a Message, &'a Message)) -> &'a Message,
    var: &dyn Fn(&Message) -> String,
) {
    let _ = writeln!(
        out,
        "/// The body of any {what}.\n#[derive(Debug, Clone, PartialEq)]\npub enum {name} {{"
    );
    for a in apis {
        let _ = writeln!(out, "    {}({}),", var(a.1), pick(a).name);
    }
    out.push_str("}\n\n");
    let _ = writeln!(out, "impl {name} {{");
    let _ = writeln!(
        out,
        "    /// Decodes the body of a {what} of `api_key` at `version`.\n    pub fn decode(api_key: ApiKey, version: i16, buf: &mut Bytes) -> Result<Self, DecodeError> {{\n        Ok(match api_key {{"
    );
    for a in apis {
        let _ = writeln!(
            out,
            "ApiKey::{v} => {name}::{v}({}::decode(buf, version)?),",
            pick(a).name,
            v = var(a.1)
        );
    }
    out.push_str("})\n}\n\n");
    out.push_str("    /// Appends the encoding of this body at `version`.\n    pub fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {\n        match self {\n");
    for a in apis {
        let _ = writeln!(out, "{name}::{}(m) => m.encode(buf, version),", var(a.1));
    }
    out.push_str("}\n}\n\n");
    out.push_str("    /// The encoded size of this body at `version`.\n    pub fn encoded_len(&self, version: i16) -> Result<usize, EncodeError> {\n        match self {\n");
    for a in apis {
        let _ = writeln!(out, "{name}::{}(m) => m.encoded_len(version),", var(a.1));
    }
    out.push_str("}\n}\n\n");
    out.push_str("    /// The API this body belongs to.\n    pub fn api_key(&self) -> ApiKey {\n        match self {\n");
    for a in apis {
        let _ = writeln!(out, "{name}::{v}(_) => ApiKey::{v},", v = var(a.1));
    }
    out.push_str("}\n}\n\n");
    if name == "ResponseBody" {
        out.push_str(
            "    /// Calls `f` with every `ErrorCode` field of this response, nested\n    /// ones included (one call per array element), in definition order.\n    pub fn for_each_error_code(&self, f: &mut impl FnMut(i16)) {\n        match self {\n",
        );
        for a in apis {
            let _ = writeln!(out, "{name}::{}(m) => m.for_each_error_code(f),", var(a.1));
        }
        out.push_str("}\n}\n\n");
    }
    out.push_str(
        "    /// A random body of `api_key` valid in `version` (property tests).\n    #[cfg(any(test, feature = \"arbitrary\"))]\n    pub fn random(api_key: ApiKey, rng: &mut crate::codec::arbitrary::Rng, version: i16) -> Self {\n        use crate::codec::arbitrary::Random;\n        match api_key {\n",
    );
    for a in apis {
        let _ = writeln!(
            out,
            "ApiKey::{v} => {name}::{v}({}::random(rng, version)),",
            pick(a).name,
            v = var(a.1)
        );
    }
    out.push_str("}\n}\n}\n\n");
    for a in apis {
        let _ = writeln!(
            out,
            "impl From<{t}> for {name} {{\n    fn from(m: {t}) -> Self {{\n        {name}::{v}(m)\n    }}\n}}\n",
            t = pick(a).name,
            v = var(a.1)
        );
    }
}

/// `mod.rs` for a directory of data schemas (coordinator records).
pub fn emit_data_mod(msgs: &[Message], doc: &str, macro_name: &str) -> String {
    let mut out = String::from(HEADER);
    let _ = writeln!(out, "//! {doc}");
    emit_module_list(&mut out, msgs);
    let _ = writeln!(
        out,
        "\n/// Calls `$m!` with every top-level type of this module.\n#[doc(hidden)]\n#[macro_export]\nmacro_rules! {macro_name} {{\n    ($m:ident) => {{\n        $m! {{ {} }}\n    }};\n}}",
        msgs.iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}
