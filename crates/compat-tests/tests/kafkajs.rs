//! kafkajs (pinned in tests/compat/js/package-lock.json) against a real
//! `weir serve`, by running `compat_check.js`.
//!
//! Records per codec: `WEIR_COMPAT_JS_RECORDS` (default 5000; 100000 with `WEIR_SOAK=1`).

use std::process::Command;

use weir_compat_tests::segment::verify_reported_topics;
use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, scaled, skip_or_fail,
    tools,
};

fn run_script(mode: &str) {
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    if !tools::kafkajs_installed() {
        skip_or_fail("kafkajs (npm ci in tests/compat/js)");
        return;
    }
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let records = scaled("WEIR_COMPAT_JS_RECORDS", 5_000, 100_000).to_string();
    let dir = tools::js_dir();
    let out = run_with_timeout(
        Command::new(&node)
            .current_dir(&dir)
            .arg(dir.join("compat_check.js"))
            .args([
                "--bootstrap",
                broker.bootstrap(),
                "--records",
                &records,
                "--keep-topics",
                "--mode",
                mode,
            ]),
        None,
        client_timeout(),
    )
    .expect("node spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "compat_check.js");
    if mode != "admin-produce" {
        return;
    }
    // The broker stored each batch exactly as the client compressed it
    // (only the produce mode reports its topics).
    match verify_reported_topics(broker.data_dir(), &out.stdout) {
        Ok(n) => assert!(n > 0, "the script reported no topics to inspect"),
        Err(e) => panic!("kafkajs: {e}"),
    }
}

#[test]
fn kafkajs_admin_and_idempotent_produce() {
    run_script("admin-produce");
}

#[test]
fn kafkajs_group_consumer() {
    run_script("consume");
}
