//! Transactional producers of kafka-python (3.0.12, which has them since
//! 2.1) and kafkajs (2.2.4) against a real `weir serve` and its transaction
//! coordinator, by running `transactions_check.py` / `transactions_check.js`:
//! a committed batch is read by the same client's read_committed consumer
//! and an aborted one is not (read_uncommitted reads both, the markers'
//! offsets skipped); a second producer with the same transactional id
//! fences the first, at its commit, at its next send and, when the first
//! was idle, at its next transaction, and nothing of the old one's open
//! transaction is committed; a transaction left open past its timeout is
//! aborted by the coordinator; for kafka-python, the last stable offset
//! while a transaction is open and transactions over two partitions; for
//! kafkajs, `sendOffsets` in a consume-transform-produce loop moves the
//! group's committed offsets when its transaction commits and not when it
//! aborts. (`transactions.rs` has librdkafka.)

use weir_compat_tests::{WeirProcess, run_js_check, run_python_check};

/// The coordinator looks for expired transactions every 200 ms (Kafka's
/// default is 10 s), so the timeout checks end quickly; the checks'
/// readers and processors each join a consumer group of their own, and
/// without the initial rebalance delay each join is immediate.
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
    run_python_check(&start_broker(), "transactions_check.py");
}

#[test]
fn kafkajs_transactional_producer() {
    run_js_check(&start_broker(), "transactions_check.js");
}
