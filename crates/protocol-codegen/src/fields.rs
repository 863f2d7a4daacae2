//! Rust types, defaults and the encode/decode/random code of one field.

use crate::emit::Ctx;
use crate::spec::{Field, Type};
use crate::vset::VSet;
use anyhow::{Result, bail};

pub fn is_option(f: &Field) -> bool {
    matches!(f.ty, Type::Records) || !f.nullable.is_empty()
}

pub fn elem_type(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::Int8 => "i8".into(),
        Type::Int16 => "i16".into(),
        Type::Int32 => "i32".into(),
        Type::Int64 => "i64".into(),
        Type::Uint16 => "u16".into(),
        Type::Uint32 => "u32".into(),
        Type::Float64 => "f64".into(),
        Type::String => "String".into(),
        Type::Bytes | Type::Records => "Bytes".into(),
        Type::Uuid => "Uuid".into(),
        Type::Struct(n) => n.clone(),
        Type::Array(e) => format!("Vec<{}>", elem_type(e)),
    }
}

pub fn rust_type(f: &Field) -> String {
    let t = elem_type(&f.ty);
    if is_option(f) {
        format!("Option<{t}>")
    } else {
        t
    }
}

fn parse_int(s: &str) -> Result<i128> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i128::from_str_radix(h, 16)?
    } else {
        body.parse::<i128>()?
    };
    Ok(if neg { -v } else { v })
}

/// The default value expression of a field, and whether it equals the
/// type's `Default::default()`.
pub fn default_expr(f: &Field) -> Result<(String, bool)> {
    let d = f
        .default
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty());
    let null = d == Some("null");
    if null && !is_option(f) {
        bail!("field {} has a null default but is never nullable", f.name);
    }
    let wrap = |inner: String, trivial: bool| -> (String, bool) {
        if is_option(f) {
            (format!("Some({inner})"), false)
        } else {
            (inner, trivial)
        }
    };
    Ok(match &f.ty {
        Type::Bool => match d {
            None | Some("false") => ("false".into(), true),
            Some("true") => ("true".into(), false),
            Some(o) => bail!("bad bool default {o}"),
        },
        Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64 | Type::Uint16 | Type::Uint32 => {
            let v = match d {
                None => 0,
                Some(s) => parse_int(s)?,
            };
            let (lo, hi): (i128, i128) = match f.ty {
                Type::Int8 => (i8::MIN.into(), i8::MAX.into()),
                Type::Int16 => (i16::MIN.into(), i16::MAX.into()),
                Type::Int32 => (i32::MIN.into(), i32::MAX.into()),
                Type::Uint16 => (0, u16::MAX.into()),
                Type::Uint32 => (0, u32::MAX.into()),
                _ => (i64::MIN.into(), i64::MAX.into()),
            };
            if v < lo || v > hi {
                bail!("default {v} out of range for field {}", f.name);
            }
            let t = elem_type(&f.ty);
            if v == lo && lo < 0 {
                (format!("{t}::MIN"), false)
            } else {
                (v.to_string(), v == 0)
            }
        }
        Type::Float64 => match d {
            None => ("0.0".into(), true),
            Some(s) => {
                let v: f64 = s.parse()?;
                (format!("{v:?}"), v == 0.0 && v.is_sign_positive())
            }
        },
        Type::String => match d {
            _ if null => ("None".into(), true),
            None => wrap("String::new()".into(), true),
            Some(s) => wrap(format!("String::from({s:?})"), false),
        },
        Type::Bytes => match d {
            _ if null => ("None".into(), true),
            None => wrap("Bytes::new()".into(), true),
            Some(o) => bail!("bytes field {} cannot have default {o}", f.name),
        },
        Type::Records => ("None".into(), true),
        Type::Uuid => match d {
            None => ("Uuid::ZERO".into(), true),
            Some(o) => bail!("uuid field {} cannot have default {o}", f.name),
        },
        Type::Struct(n) => match d {
            _ if null => ("None".into(), true),
            None => wrap(format!("{n}::default()"), true),
            Some(o) => bail!("struct field {} cannot have default {o}", f.name),
        },
        Type::Array(_) => match d {
            _ if null => ("None".into(), true),
            None => wrap("Vec::new()".into(), true),
            Some(o) => bail!("array field {} cannot have default {o}", f.name),
        },
    })
}

/// Whether `access` differs from the field's default.
pub fn non_default(f: &Field, access: &str) -> Result<String> {
    let (d, _) = default_expr(f)?;
    Ok(match (&f.ty, d.as_str()) {
        (_, "None") => format!("{access}.is_some()"),
        (Type::Bool, "false") => access.to_string(),
        (Type::Bool, "true") => format!("!{access}"),
        (Type::String | Type::Bytes | Type::Array(_), _) if !is_option(f) => {
            format!("!{access}.is_empty()")
        }
        (Type::Float64, _) => format!("{access}.to_bits() != ({d}_f64).to_bits()"),
        _ => format!("{access} != {d}"),
    })
}

/// Code writing the value at place `a` of type `ty` to `w`.
/// `nullable` is a condition code; `opt` says whether `a` is an Option.
pub fn write_value(
    ctx: &Ctx<'_>,
    ty: &Type,
    a: &str,
    opt: bool,
    nullable: &str,
    compact: &str,
    label: &str,
) -> String {
    let _ = ctx;
    // Array items are written through a reference `x`.
    let (a, by_ref) = if a == "x" {
        ("*x", "x".to_string())
    } else {
        (a, format!("&{a}"))
    };
    let a_ref = if a == "*x" { "x" } else { a };
    match ty {
        Type::Bool => format!("w.put_bool({a});\n"),
        Type::Int8 => format!("w.put_i8({a});\n"),
        Type::Int16 => format!("w.put_i16({a});\n"),
        Type::Int32 => format!("w.put_i32({a});\n"),
        Type::Int64 => format!("w.put_i64({a});\n"),
        Type::Uint16 => format!("w.put_u16({a});\n"),
        Type::Uint32 => format!("w.put_u32({a});\n"),
        Type::Float64 => format!("w.put_f64({a});\n"),
        Type::Uuid => format!("w.put_uuid({by_ref});\n"),
        Type::String => {
            let v = if opt {
                format!("{a}.as_deref()")
            } else {
                format!("Some({a_ref}.as_str())")
            };
            let n = if opt { nullable } else { "false" };
            format!("rt::put_str(w, {v}, {compact}, {n}, {label:?}, version)?;\n")
        }
        Type::Bytes | Type::Records => {
            let v = if opt {
                format!("{a}.as_deref()")
            } else {
                format!("Some(&{a_ref}[..])")
            };
            let n = if opt { nullable } else { "false" };
            format!("rt::put_byte_slice(w, {v}, {compact}, true, {n}, {label:?}, version)?;\n")
        }
        Type::Struct(_) => {
            if !opt {
                format!("{a_ref}.write_to(w, version)?;\n")
            } else {
                let null_arm = match nullable {
                    "true" => "None => w.put_i8(-1),\n".to_string(),
                    "false" => String::new(),
                    c => format!("None if {c} => w.put_i8(-1),\n"),
                };
                let marker = match nullable {
                    "true" => "w.put_i8(1);\n".to_string(),
                    "false" => String::new(),
                    c => format!("if {c} {{\nw.put_i8(1);\n}}\n"),
                };
                let err_arm = if nullable == "true" {
                    String::new()
                } else {
                    format!(
                        "None => return Err(EncodeError::NullNotAllowed {{ field: {label:?}, version }}),\n"
                    )
                };
                format!(
                    "match &{a} {{\n{null_arm}{err_arm}\
                     Some(v) => {{\n{marker}v.write_to(w, version)?;\n}}\n\
                     }}\n"
                )
            }
        }
        Type::Array(e) => {
            let item = write_value(ctx, e, "x", false, "false", compact, label);
            if opt {
                format!(
                    "rt::put_array_len(w, {a}.as_ref().map(Vec::len), {compact}, {nullable}, {label:?}, version)?;\n\
                     if let Some(v) = &{a} {{\nfor x in v {{\n{item}}}\n}}\n"
                )
            } else {
                format!(
                    "rt::put_array_len(w, Some({a}.len()), {compact}, false, {label:?}, version)?;\n\
                     for x in &{a} {{\n{item}}}\n"
                )
            }
        }
    }
}

/// An expression reading a value of `ty` from `buf` (uses `?`).
pub fn read_value(
    ctx: &Ctx<'_>,
    ty: &Type,
    opt: bool,
    nullable: &VSet,
    compact: &str,
    label: &str,
) -> String {
    let wrap_null = |raw: String| -> String {
        if !opt {
            format!("rt::non_null({raw}, {label:?})?")
        } else if nullable.always() {
            raw
        } else if nullable.never() {
            format!("Some(rt::non_null({raw}, {label:?})?)")
        } else {
            format!(
                "{{\nlet v = {raw};\nif {} {{ v }} else {{ Some(rt::non_null(v, {label:?})?) }}\n}}",
                nullable.code()
            )
        }
    };
    match ty {
        Type::Bool => "rt::get_bool(buf)?".into(),
        Type::Int8 => "rt::get_i8(buf)?".into(),
        Type::Int16 => "rt::get_i16(buf)?".into(),
        Type::Int32 => "rt::get_i32(buf)?".into(),
        Type::Int64 => "rt::get_i64(buf)?".into(),
        Type::Uint16 => "rt::get_u16(buf)?".into(),
        Type::Uint32 => "rt::get_u32(buf)?".into(),
        Type::Float64 => "rt::get_f64(buf)?".into(),
        Type::Uuid => "rt::get_uuid(buf)?".into(),
        Type::String => wrap_null(format!("rt::get_str(buf, {compact})?")),
        Type::Bytes | Type::Records => wrap_null(format!("rt::get_bytes(buf, {compact})?")),
        Type::Struct(n) => {
            if !opt {
                format!("{n}::decode(buf, version)?")
            } else {
                let c = nullable.code();
                if nullable.always() {
                    format!(
                        "if rt::get_i8(buf)? < 0 {{ None }} else {{ Some({n}::decode(buf, version)?) }}"
                    )
                } else {
                    format!(
                        "if {c} && rt::get_i8(buf)? < 0 {{ None }} else {{ Some({n}::decode(buf, version)?) }}"
                    )
                }
            }
        }
        Type::Array(e) => {
            let min = match &**e {
                Type::Struct(n) => format!("{n}::min_len(version)"),
                Type::String => format!("if {compact} {{ 1 }} else {{ 2 }}"),
                Type::Bytes | Type::Records => format!("if {compact} {{ 1 }} else {{ 4 }}"),
                other => ctx.type_min(other, 0, false, false).to_string(),
            };
            let never = VSet::empty();
            let item = read_value(ctx, e, false, &never, compact, label);
            wrap_null(format!(
                "rt::get_array(buf, {compact}, {min}, |buf| Ok({item}))?"
            ))
        }
    }
}

/// A random value expression of the field's type.
pub fn random_value(ty: &Type, opt: bool, nullable: &VSet) -> String {
    let inner = match ty {
        Type::Bool => "rng.bool()".into(),
        Type::Int8 => "rng.i8()".into(),
        Type::Int16 => "rng.i16()".into(),
        Type::Int32 => "rng.i32()".into(),
        Type::Int64 => "rng.i64()".into(),
        Type::Uint16 => "rng.u16()".into(),
        Type::Uint32 => "rng.u32()".into(),
        Type::Float64 => "rng.f64()".into(),
        Type::Uuid => "rng.uuid()".into(),
        Type::String => "rng.string()".into(),
        Type::Bytes | Type::Records => "rng.bytes()".into(),
        Type::Struct(n) => format!("{n}::random(rng, version)"),
        Type::Array(e) => {
            let never = VSet::empty();
            let item = random_value(e, false, &never);
            format!("(0..rng.array_len()).map(|_| {item}).collect::<Vec<_>>()")
        }
    };
    if !opt {
        inner
    } else if nullable.never() {
        format!("Some({inner})")
    } else {
        format!(
            "if {} && rng.one_in(5) {{ None }} else {{ Some({inner}) }}",
            nullable.code()
        )
    }
}
