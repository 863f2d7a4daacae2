//! kafka-python (pinned in tests/compat/python/requirements.txt) against a
//! real `weir serve`: records refused one by one are named in the Produce
//! response's `record_errors`, so kafka-python fails exactly those and lets
//! the others be resent (`record_errors_check.py`).

use std::process::Command;

use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, skip_or_fail, tools,
};

#[test]
fn kafka_python_fails_only_the_records_without_a_key() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let script = tools::python_dir().join("record_errors_check.py");
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
    assert_checks_passed(&out, &broker, "record_errors_check.py");
}
