//! Transactional producers with kafka-python and kafkajs against a real
//! `weir serve` and its transaction coordinator: committed transactions
//! visible to read_committed consumers and aborted ones not, a second
//! producer with the same transactional id fencing the first, and a
//! transaction left open past its timeout aborted by the coordinator. Runs
//! `txn_producer_check.py` / `txn_producer_check.js`. (librdkafka's side is
//! in `transactions.rs`.)

use std::process::Command;

use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, skip_or_fail, tools,
};

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
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = start_broker();
    let script = tools::python_dir().join("txn_producer_check.py");
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
    assert_checks_passed(&out, &broker, "txn_producer_check.py");
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
            .arg(dir.join("txn_producer_check.js"))
            .args(["--bootstrap", broker.bootstrap()]),
        None,
        client_timeout(),
    )
    .expect("node spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "txn_producer_check.js");
}
