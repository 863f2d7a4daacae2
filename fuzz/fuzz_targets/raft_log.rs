//! The metadata raft log reader (`raft.log` records: length, CRC32C, JSON).
//! Smoke run: `crates/raft/tests/fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_raft::log_store::fuzz_scan(data);
});
