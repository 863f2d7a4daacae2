//! The metadata raft snapshot file reader. Smoke run:
//! `crates/raft/tests/fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_raft::state_machine::fuzz_decode_snapshot(data);
});
