//! Helpers shared by weir's test suites (a dev-dependency only).
//!
//! - [`skip_or_fail`]: the one way a test gives up for a missing
//!   prerequisite (a client tool, the Python venv, Kafka's message
//!   definitions). Outside CI it prints a loud `SKIPPED` line and the test
//!   returns; with `CI` set (`.ci/run` exports `CI=true`) it panics, so CI
//!   can never pass a test that did not run.
//! - [`soak`] / [`scaled`]: long runs (hundreds of thousands of records)
//!   only with `WEIR_SOAK=1`; by default a short run that asserts the same.
//!
//! ```
//! use weir_test_support::{scaled, skip_or_fail};
//! fn kcat_available() -> bool { true }
//! if !kcat_available() {
//!     skip_or_fail("kcat (apt-get install kcat)");
//!     return;
//! }
//! let records = scaled("WEIR_COMPAT_KCAT_RECORDS", 5_000, 100_000);
//! assert!(records >= 5_000);
//! ```

use std::path::{Path, PathBuf};

/// True when running in CI (`CI` set to anything but empty/`false`/`0`).
pub fn in_ci() -> bool {
    std::env::var("CI")
        .map(|v| !v.is_empty() && v != "false" && v != "0")
        .unwrap_or(false)
}

/// Skips the test loudly (returns normally; the caller returns) or, in CI,
/// panics: a missing prerequisite must not pass silently there.
#[track_caller]
pub fn skip_or_fail(what: &str) {
    let msg = format!(
        "prerequisite missing: {what}. Run scripts/test (it installs everything), or see docs/testing.md."
    );
    if in_ci() {
        panic!("{msg} (CI is set, so this is a failure, not a skip)");
    }
    eprintln!("\n!!!!!!!! SKIPPED: {msg} !!!!!!!!\n");
}

/// True with `WEIR_SOAK=1` (or any value but empty/`0`/`false`): run the
/// long versions of the volume tests.
pub fn soak() -> bool {
    std::env::var("WEIR_SOAK")
        .map(|v| !v.is_empty() && v != "false" && v != "0")
        .unwrap_or(false)
}

/// A count from the environment variable `name`, else `soak_default` under
/// [`soak`], else `default`.
pub fn scaled(name: &str, default: usize, soak_default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(if soak() { soak_default } else { default })
}

/// Root of the cargo workspace.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest.to_path_buf())
}

/// The Python interpreter of the test venv with kafka-python:
/// `WEIR_COMPAT_PYTHON`, else `.test-deps/venv/bin/python` (what
/// `scripts/test` builds), when it exists and imports `kafka`.
pub fn kafka_python() -> Option<PathBuf> {
    let p = std::env::var_os("WEIR_COMPAT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".test-deps/venv/bin/python"));
    let ok = std::process::Command::new(&p)
        .args(["-c", "import kafka"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then_some(p)
}
