//! Decoder of KRaft metadata records (`__cluster_metadata` framing and
//! bodies); what decodes must round-trip. Smoke run:
//! `crates/metadata/tests/records.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_protocol::metadata_record::fuzz_metadata_record(data);
});
