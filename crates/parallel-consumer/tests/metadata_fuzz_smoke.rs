//! Fuzz smoke test of the commit-metadata decoder (the cargo-fuzz target
//! `commit_metadata` runs the same entry point): seeds from real encodings,
//! then mutations and random bytes.

use weir_parallel_consumer::metadata::{encode, fuzz_decode};

#[test]
fn commit_metadata_survives_mutation() {
    let mut seeds = Vec::new();
    for (base, done) in [
        (0i64, vec![2i64, 3, 5]),
        (1_000, vec![1_001, 1_002, 1_010, 1_011, 1_012, 5_000]),
        (7, (9..400).step_by(3).collect::<Vec<_>>()),
    ] {
        let e = encode(base, &done, 4096);
        let mut seed = base.to_be_bytes().to_vec();
        seed.extend_from_slice(e.text.as_bytes());
        seeds.push(seed);
    }
    weir_test_support::fuzz_smoke("commit_metadata", &seeds, 50_000, fuzz_decode);
}
