//! Transactional producers with kafka-python and kafkajs against a real
//! `weir serve` and its transaction coordinator: committed transactions
//! visible to read_committed consumers and aborted ones not, a second
//! producer with the same transactional id fencing the first, and a
//! transaction left open past its timeout aborted by the coordinator. Runs
//! `txn_producer_check.py` / `txn_producer_check.js`. (librdkafka's side is
//! in `transactions.rs`.)

use weir_compat_tests::{WeirProcess, run_js_check, run_python_check};

/// The coordinator looks for expired transactions every 200 ms (Kafka's
/// default is 10 s), so the timeout check ends quickly.
fn start_broker() -> WeirProcess {
    WeirProcess::start_with_args(&[
        "--set",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        "--set",
        "group.initial.rebalance.delay.ms=0",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

#[test]
fn kafka_python_transactional_producer() {
    run_python_check(&start_broker(), "txn_producer_check.py");
}

#[test]
fn kafkajs_transactional_producer() {
    run_js_check(&start_broker(), "txn_producer_check.js");
}
