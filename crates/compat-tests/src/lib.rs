//! Test support for running real Kafka clients against a `weir serve` process.
