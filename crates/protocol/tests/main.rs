//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-protocol --test integration <module>::`.

mod messages_crosscheck;
mod messages_fuzz_smoke;
mod messages_roundtrip;
mod messages_semantics;
mod partitioner;
mod records_fuzz_smoke;
mod records_kafka_protocol;
mod records_roundtrip;
mod records_validate;
