//! Decoder of offset checkpoint files and `partition.metadata`; what decodes must
//! round-trip. Smoke run: `crates/storage/tests/checkpoint_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_storage::checkpoint::fuzz_decode(data);
});
