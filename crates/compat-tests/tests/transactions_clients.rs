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

use std::process::Command;

use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, skip_or_fail, tools,
};

/// The checks' readers and processors each join a consumer group of their
/// own; without the initial rebalance delay each join is immediate.
fn start_broker() -> WeirProcess {
    WeirProcess::start_with_args(&["--set", "group.initial.rebalance.delay.ms=0"])
        .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

#[test]
fn kafka_python_transactional_producer() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = start_broker();
    let script = tools::python_dir().join("transactions_check.py");
    let out = run_with_timeout(
        Command::new(&python)
            .arg(&script)
            .args(["--bootstrap", broker.bootstrap()])
            .env("PYTHONUNBUFFERED", "1"),
        None,
        client_timeout(),
    )
    .expect("python spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "transactions_check.py");
}

#[test]
fn kafkajs_transactional_producer() {
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    if !tools::kafkajs_installed() {
        skip_or_fail("kafkajs (npm ci in tests/compat/js)");
        return;
    }
    let broker = start_broker();
    let dir = tools::js_dir();
    let out = run_with_timeout(
        Command::new(&node)
            .current_dir(&dir)
            .arg(dir.join("transactions_check.js"))
            .args(["--bootstrap", broker.bootstrap()]),
        None,
        client_timeout(),
    )
    .expect("node spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "transactions_check.js");
}
