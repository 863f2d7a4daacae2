//! Stateful fuzzing of the storage engine: the input is decoded into a
//! sequence of log operations (appends, reads, truncation, DeleteRecords,
//! flushes, ticks that roll, retention, checkpoints, clean restarts,
//! crashes, injected write and sync failures) on in-memory storage and
//! checked against a model after every step (`weir_storage::fuzz_ops`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = weir_storage::fuzz_ops::run(data) {
        panic!("{failure}");
    }
});
