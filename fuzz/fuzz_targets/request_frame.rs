//! Request frames: decode, and if that works, re-encode and re-decode.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_protocol::frame::fuzz_request_frame(data);
});
