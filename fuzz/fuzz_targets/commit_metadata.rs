//! Decoder of the parallel consumer's commit metadata (completed offsets above the
//! committed one). Smoke run: `crates/parallel-consumer/tests/metadata_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_parallel_consumer::metadata::fuzz_decode(data);
});
