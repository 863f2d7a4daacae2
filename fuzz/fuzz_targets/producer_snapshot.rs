//! Decoder of producer-state snapshots (`.snapshot` files), also with the CRC fixed;
//! what decodes must round-trip. Smoke run: `crates/broker/tests/decoders_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_broker::producer_state_io::fuzz_decode(data);
});
