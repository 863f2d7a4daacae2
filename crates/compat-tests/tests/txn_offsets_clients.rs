//! Consumer group offsets committed in transactions with kafka-python
//! (`send_offsets_to_transaction`, and a read_committed consumer waiting
//! out UNSTABLE_OFFSET_COMMIT) and kafkajs (`sendOffsets`), against a real
//! `weir serve`, by running `txn_offsets_check.py` / `txn_offsets_check.js`.

use weir_compat_tests::{WeirProcess, run_js_check, run_python_check};

fn start_broker() -> WeirProcess {
    WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

#[test]
fn kafka_python_sends_offsets_to_transactions() {
    run_python_check(&start_broker(), "txn_offsets_check.py");
}

#[test]
fn kafkajs_sends_offsets_to_transactions() {
    run_js_check(&start_broker(), "txn_offsets_check.js");
}
