//! kafka-python (pure Python, pinned in tests/compat/python/requirements.txt)
//! against a real `weir serve`, by running `compat_check.py`.
//!
//! Records per codec: `WEIR_COMPAT_PY_RECORDS` (default 5000; 100000 with `WEIR_SOAK=1`).

use std::process::Command;

use weir_compat_tests::segment::verify_reported_topics;
use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, scaled, skip_or_fail,
    tools,
};

#[test]
fn kafka_python_admin_produce_consume_offsets_configs() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let records = scaled("WEIR_COMPAT_PY_RECORDS", 5_000, 100_000).to_string();
    let script = tools::python_dir().join("compat_check.py");
    let out = run_with_timeout(
        Command::new(&python)
            .arg(&script)
            .args([
                "--bootstrap",
                broker.bootstrap(),
                "--records",
                &records,
                "--keep-topics",
            ])
            .env("PYTHONUNBUFFERED", "1"),
        None,
        client_timeout(),
    )
    .expect("python spawns");
    // Shown by the test harness only when the test fails (or with --nocapture).
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "compat_check.py");
    // The broker stored each batch exactly as the client compressed it.
    match verify_reported_topics(broker.data_dir(), &out.stdout) {
        Ok(n) => assert!(n > 0, "the script reported no topics to inspect"),
        Err(e) => panic!("kafka-python: {e}"),
    }
}
