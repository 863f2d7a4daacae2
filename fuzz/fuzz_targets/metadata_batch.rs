//! The raft entry payload decoder (a batch of KRaft metadata records); what
//! weir encodes must decode back the same. Smoke run:
//! `crates/cluster/tests/batch_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_cluster::batch::fuzz_decode_batch(data);
});
