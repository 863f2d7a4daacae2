//! Generates `weir-protocol`'s message code from Kafka's JSON message
//! definitions.
//!
//! ```text
//! cargo run -p weir-protocol-codegen -- \
//!     --spec ../shared/kafka-protocol-spec/message --out crates/protocol/src/messages [--check]
//! ```
//!
//! The coordinator record schemas are read from the `group-coordinator` and
//! `transaction-coordinator` directories (and the KRaft records from
//! `metadata`) beside `--spec` and written to
//! sub-modules of `--out`. See `docs/protocol-codegen.md`.

mod emit;
mod emit_mod;
mod fields;
mod spec;
mod vset;

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

struct Args {
    spec: PathBuf,
    out: PathBuf,
    check: bool,
}

fn parse_args() -> Result<Args> {
    parse_args_from(std::env::args().skip(1))
}

fn parse_args_from(mut it: impl Iterator<Item = String>) -> Result<Args> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut args = Args {
        spec: root.join("../shared/kafka-protocol-spec/message"),
        out: root.join("crates/protocol/src/messages"),
        check: false,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--spec" => args.spec = it.next().context("--spec needs a directory")?.into(),
            "--out" => args.out = it.next().context("--out needs a directory")?.into(),
            "--check" => args.check = true,
            "-h" | "--help" => {
                println!("usage: weir-protocol-codegen [--spec DIR] [--out DIR] [--check]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(args)
}

fn load_dir(dir: &Path) -> Result<Vec<spec::Message>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let src = std::fs::read_to_string(&p)?;
        let msg = spec::parse_message(&src).with_context(|| format!("parsing {}", p.display()))?;
        out.push(msg);
    }
    out.sort_by_key(|m| spec::snake_case(&m.name));
    Ok(out)
}

fn rustfmt(src: &str) -> Result<String> {
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running rustfmt")?;
    child
        .stdin
        .take()
        .context("rustfmt stdin")?
        .write_all(src.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("rustfmt failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Generates every file, keyed by path relative to the output directory.
fn generate(spec_dir: &Path) -> Result<BTreeMap<PathBuf, String>> {
    let mut files = BTreeMap::new();
    let msgs = load_dir(spec_dir)?;
    let mut subs: Vec<(&str, &str)> = Vec::new();
    let base = spec_dir.parent().context("spec dir has no parent")?;
    let coordinators = [
        (
            "group-coordinator",
            "group_coordinator",
            "Records of the group coordinator's `__consumer_offsets` topic.",
            "__weir_all_group_coordinator_records",
        ),
        (
            "transaction-coordinator",
            "transaction_coordinator",
            "Records of the transaction coordinator's `__transaction_state` topic.",
            "__weir_all_transaction_coordinator_records",
        ),
        (
            "metadata",
            "metadata",
            "KRaft metadata records of the `__cluster_metadata` log.",
            "__weir_all_metadata_records",
        ),
    ];
    for (dir, module, doc, mac) in coordinators {
        let d = base.join(dir);
        if !d.is_dir() {
            continue;
        }
        let recs = load_dir(&d)?;
        for m in &recs {
            let name = Path::new(module).join(format!("{}.rs", spec::snake_case(&m.name)));
            files.insert(name, emit::emit_message(m)?);
        }
        files.insert(
            Path::new(module).join("mod.rs"),
            emit_mod::emit_data_mod(&recs, doc, mac),
        );
        subs.push((module, doc));
    }
    for m in &msgs {
        files.insert(
            PathBuf::from(format!("{}.rs", spec::snake_case(&m.name))),
            emit::emit_message(m)?,
        );
    }
    files.insert(
        PathBuf::from("mod.rs"),
        emit_mod::emit_messages_mod(&msgs, &subs)?,
    );
    for (path, src) in files.iter_mut() {
        *src = rustfmt(src).with_context(|| format!("formatting {}", path.display()))?;
    }
    Ok(files)
}

fn existing(dir: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, String>) -> Result<()> {
    let Ok(rd) = std::fs::read_dir(dir.join(rel)) else {
        return Ok(());
    };
    for e in rd {
        let e = e?;
        let r = rel.join(e.file_name());
        if e.file_type()?.is_dir() {
            existing(dir, &r, out)?;
        } else if r.extension().is_some_and(|x| x == "rs") {
            out.insert(r, std::fs::read_to_string(e.path())?);
        }
    }
    Ok(())
}

fn run() -> Result<bool> {
    let args = parse_args()?;
    let files = generate(&args.spec)?;
    let mut on_disk = BTreeMap::new();
    existing(&args.out, Path::new(""), &mut on_disk)?;
    if args.check {
        let mut ok = true;
        for (p, src) in &files {
            if on_disk.get(p) != Some(src) {
                eprintln!("out of date: {}", p.display());
                ok = false;
            }
        }
        for p in on_disk.keys().filter(|p| !files.contains_key(*p)) {
            eprintln!("not generated: {}", p.display());
            ok = false;
        }
        if ok {
            eprintln!("{} generated files are up to date", files.len());
        }
        return Ok(ok);
    }
    for p in on_disk.keys().filter(|p| !files.contains_key(*p)) {
        std::fs::remove_file(args.out.join(p))?;
    }
    for (p, src) in &files {
        let path = args.out.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if on_disk.get(p) != Some(src) {
            std::fs::write(&path, src)?;
        }
    }
    eprintln!("wrote {} files to {}", files.len(), args.out.display());
    Ok(true)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed output is what the generator produces, when Kafka's
    /// definitions are available (they live outside the repository).
    #[test]
    fn committed_output_is_up_to_date() {
        let args = parse_args_from(std::iter::empty()).unwrap();
        if !args.spec.is_dir() {
            weir_test_support::skip_or_fail(&format!(
                "Kafka's message definitions at {}",
                args.spec.display()
            ));
            return;
        }
        let files = generate(&args.spec).unwrap();
        let mut on_disk = BTreeMap::new();
        existing(&args.out, Path::new(""), &mut on_disk).unwrap();
        assert_eq!(files.len(), on_disk.len());
        for (p, src) in &files {
            assert!(
                on_disk.get(p) == Some(src),
                "{} is out of date",
                p.display()
            );
        }
    }
}
