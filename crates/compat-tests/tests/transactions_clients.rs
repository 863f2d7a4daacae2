//! Transactional producers of kafka-python (3.0.12, which has them since
//! 2.1) and kafkajs (2.2.4) against a real `weir serve`, by running
//! `transactions_check.py` / `transactions_check.js`: a committed batch is
//! read by the same client's read_committed consumer and an aborted one is
//! not (read_uncommitted reads both); a second producer with the same
//! transactional id fences the first, at its commit and at its next send,
//! and nothing of the old one's open transaction is committed; for
//! kafka-python, the last stable offset while a transaction is open; for
//! kafkajs, `sendOffsets` in a consume-transform-produce loop moves the
//! group's committed offsets when its transaction commits and not when it
//! aborts. (`txn_producers.rs` has the coordinator's timeout with these
//! clients, `transactions.rs` librdkafka.)

use weir_compat_tests::{WeirProcess, run_js_check, run_python_check};

/// The checks' readers and processors each join a consumer group of their
/// own; without the initial rebalance delay each join is immediate.
fn start_broker() -> WeirProcess {
    WeirProcess::start_with_args(&["--set", "group.initial.rebalance.delay.ms=0"])
        .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

#[test]
fn kafka_python_transactional_producer() {
    run_python_check(&start_broker(), "transactions_check.py");
}

#[test]
fn kafkajs_transactional_producer() {
    run_js_check(&start_broker(), "transactions_check.js");
}
