//! Consumer group offsets committed in transactions with kafka-python
//! (`send_offsets_to_transaction`, and a read_committed consumer waiting
//! out UNSTABLE_OFFSET_COMMIT) and kafkajs (`sendOffsets`), against a real
//! `weir serve`, by running `txn_offsets_check.py` / `txn_offsets_check.js`.

use std::process::Command;

use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, skip_or_fail, tools,
};

#[test]
fn kafka_python_sends_offsets_to_transactions() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let script = tools::python_dir().join("txn_offsets_check.py");
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
    assert_checks_passed(&out, &broker, "txn_offsets_check.py");
}

#[test]
fn kafkajs_sends_offsets_to_transactions() {
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    if !tools::kafkajs_installed() {
        skip_or_fail("kafkajs (npm ci in tests/compat/js)");
        return;
    }
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let dir = tools::js_dir();
    let out = run_with_timeout(
        Command::new(&node)
            .current_dir(&dir)
            .arg(dir.join("txn_offsets_check.js"))
            .args(["--bootstrap", broker.bootstrap()]),
        None,
        client_timeout(),
    )
    .expect("node spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "txn_offsets_check.js");
}
