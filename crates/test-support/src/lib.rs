//! Helpers shared by weir's test suites (a dev-dependency only).
//!
//! - [`skip_or_fail`]: the one way a test gives up for a missing
//!   prerequisite (a client tool, the Python venv, Kafka's message
//!   definitions). Outside CI it prints a loud `SKIPPED` line and the test
//!   returns; with `CI` set (`.ci/run` exports `CI=true`) it panics, so CI
//!   can never pass a test that did not run.
//! - [`soak`] / [`scaled`]: long runs (hundreds of thousands of records)
//!   only with `WEIR_SOAK=1`; by default a short run that asserts the same.
//! - [`pki`]: a test CA and the certificates SSL listener tests need.
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

pub mod pki;

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

/// Runs a fuzz entry point without libFuzzer, for a bounded number of
/// inputs: every seed, then mutations of the seeds (bit flips, byte
/// changes, truncations, insertions, splices of two seeds) and random
/// bytes. `WEIR_FUZZ_SMOKE_CASES` overrides `cases`. A panic in `check` is
/// reported with the case number, the seed of the run and the input.
pub fn fuzz_smoke(name: &str, seeds: &[Vec<u8>], cases: usize, check: impl Fn(&[u8])) {
    let cases = std::env::var("WEIR_FUZZ_SMOKE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let run_seed = std::env::var("WEIR_FUZZ_SMOKE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_F00D_u64);
    let mut rng = XorShift(run_seed | 1);
    let run = |case: usize, input: &[u8]| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(input)));
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("panic");
            panic!(
                "{name}: case {case} (WEIR_FUZZ_SMOKE_SEED={run_seed}) panicked: {msg}\ninput ({} bytes): {input:?}",
                input.len()
            );
        }
    };
    for (i, s) in seeds.iter().enumerate() {
        run(i, s);
    }
    for case in 0..cases {
        let input = if seeds.is_empty() || rng.below(8) == 0 {
            let n = rng.below(64) as usize;
            (0..n).map(|_| rng.next() as u8).collect()
        } else {
            let mut v = seeds[rng.below(seeds.len() as u64) as usize].clone();
            for _ in 0..=rng.below(4) {
                mutate(&mut v, seeds, &mut rng);
            }
            v
        };
        run(seeds.len() + case, &input);
    }
}

fn mutate(v: &mut Vec<u8>, seeds: &[Vec<u8>], rng: &mut XorShift) {
    let len = v.len() as u64;
    match rng.below(7) {
        0 if len > 0 => {
            let i = rng.below(len) as usize;
            v[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len) as usize;
            v[i] = [0, 0xff, 0x7f, 0x80, 1][rng.below(5) as usize];
        }
        2 => v.truncate(rng.below(len + 1) as usize),
        3 => {
            let i = rng.below(len + 1) as usize;
            let b = rng.next() as u8;
            v.insert(i, b);
        }
        4 if len > 0 => {
            let i = rng.below(len) as usize;
            v.remove(i);
        }
        5 if !seeds.is_empty() => {
            let other = &seeds[rng.below(seeds.len() as u64) as usize];
            let cut = rng.below(len + 1) as usize;
            let from = rng.below(other.len() as u64 + 1) as usize;
            v.truncate(cut);
            v.extend_from_slice(&other[from..]);
        }
        _ => {
            // a length-like field: four bytes of a large or negative number
            let i = rng.below(len + 1) as usize;
            let n = [u32::MAX, 0x7fff_ffff, 0x8000_0000, 0xffff][rng.below(4) as usize];
            let tail = v.split_off(i.min(v.len()));
            v.extend_from_slice(&n.to_be_bytes());
            v.extend_from_slice(&tail);
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}
