//! Seeded smoke run of the stateful storage fuzz target
//! (`weir_storage::fuzz_ops`, also `fuzz/fuzz_targets/storage_ops.rs`):
//! random operation sequences against the in-memory model, with crashes and
//! injected faults. `WEIR_FUZZ_OPS_CASES` (default 2000, 1000 for the
//! variant with truncations, which runs every operation) sets the number of
//! inputs, `WEIR_FUZZ_OPS_SEED` the first seed (default: random, printed).
//! A failure prints its seed, the input bytes and the operations.

use rand::{Rng, RngExt, SeedableRng, rngs::StdRng};
use weir_storage::fuzz_ops::Options;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn run_seeds(options: weir_storage::fuzz_ops::Options, default_cases: u64) {
    let cases = env_u64("WEIR_FUZZ_OPS_CASES").unwrap_or(default_cases);
    let first = env_u64("WEIR_FUZZ_OPS_SEED").unwrap_or_else(|| rand::random::<u32>().into());
    eprintln!(
        "fuzz_ops: {cases} inputs from seed {first} (WEIR_FUZZ_OPS_SEED={first} repeats them)"
    );
    for seed in first..first + cases {
        let mut rng = StdRng::seed_from_u64(seed);
        let len = rng.random_range(1..600);
        let mut data = vec![0u8; len];
        rng.fill_bytes(&mut data);
        let result = std::panic::catch_unwind(|| weir_storage::fuzz_ops::run_with(&data, options));
        if std::env::var_os("WEIR_FUZZ_OPS_SURVEY").is_some() {
            // Lists every failing seed with its first line, then goes on.
            match &result {
                Ok(Ok(())) => {}
                Ok(Err(f)) => eprintln!(
                    "FAIL seed {seed}: {}",
                    f.message.chars().take(160).collect::<String>()
                ),
                Err(_) => eprintln!("FAIL seed {seed}: panicked"),
            }
            continue;
        }
        match result {
            Ok(Ok(())) => {}
            Ok(Err(failure)) => panic!(
                "seed {seed} (WEIR_FUZZ_OPS_SEED={seed} WEIR_FUZZ_OPS_CASES=1): {failure}\ninput: {data:?}"
            ),
            Err(p) => {
                eprintln!(
                    "seed {seed} (WEIR_FUZZ_OPS_SEED={seed} WEIR_FUZZ_OPS_CASES=1) panicked; input: {data:?}"
                );
                std::panic::resume_unwind(p);
            }
        }
    }
}

/// Appends, reads, high watermark, DeleteRecords, flushes, ticks (rolls),
/// retention, checkpoints, clean restarts and crashes of every kind.
#[test]
fn storage_operation_sequences_match_the_model() {
    run_seeds(
        Options {
            truncate: false,
            faults: false,
        },
        2000,
    );
}

/// With injected write/sync failures too (failed rolls, failed checkpoints,
/// torn crashes after a fault).
#[test]
fn storage_operation_sequences_with_faults_match_the_model() {
    run_seeds(
        Options {
            truncate: false,
            faults: true,
        },
        2000,
    );
}

/// Everything, truncations (`LogManager::truncate_to`) included: a
/// truncation below the checkpointed recovery point followed by appends and
/// a crash is what once made recovery take a torn append for damage of
/// synced data (see docs/testing.md).
#[test]
fn storage_operation_sequences_with_truncation_match_the_model() {
    run_seeds(Options::default(), 1000);
}
