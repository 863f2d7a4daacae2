//! kafka-python consumer-group scenarios against a real `weir serve`, by
//! running `tests/compat/python/group_scenarios.py`:
//!
//! - three members join one by one on a 6-partition topic, one leaves with
//!   `close()`, one is SIGKILLed and its partitions move after the session
//!   timeout; every record is consumed, commits never move backwards, and a
//!   restarted consumer resumes exactly at the committed offset;
//! - `auto_offset_reset` earliest and latest with no committed offset;
//! - a static member (`group_instance_id`) restarts without a rebalance;
//! - acknowledged commits survive a clean restart and a SIGKILL of the broker.

use std::path::PathBuf;
use std::process::Command;

use weir_compat_tests::{
    CommandOutput, WeirProcess, assert_checks_passed, client_timeout, run_with_timeout,
    skip_or_fail, tools,
};

fn python_or_skip() -> Option<PathBuf> {
    let python = tools::python();
    if python.is_none() {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
    }
    python
}

fn run_script(python: &PathBuf, broker: &WeirProcess, args: &[&str]) -> CommandOutput {
    let script = tools::python_dir().join("group_scenarios.py");
    let out = run_with_timeout(
        Command::new(python)
            .arg(&script)
            .args(["--bootstrap", broker.bootstrap()])
            .args(args)
            .env("PYTHONUNBUFFERED", "1"),
        None,
        client_timeout(),
    )
    .expect("python spawns");
    // Shown by the test harness only when the test fails (or with --nocapture).
    println!("{}", out.stdout);
    out
}

fn scenario(name: &str) {
    let Some(python) = python_or_skip() else {
        return;
    };
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let out = run_script(&python, &broker, &["--scenario", name]);
    assert_checks_passed(&out, &broker, "group_scenarios.py");
}

#[test]
fn kafka_python_members_join_leave_and_die() {
    scenario("members");
}

#[test]
fn kafka_python_auto_offset_reset_without_commit() {
    scenario("reset");
}

#[test]
fn kafka_python_static_member_restarts_without_rebalance() {
    scenario("static");
}

/// Commits known offsets for a fresh group and returns `(topic, group, "p:o,...")`.
fn commit_known_offsets(
    python: &PathBuf,
    broker: &WeirProcess,
    name: &str,
) -> (String, String, String) {
    let topic = format!("pyg-durable-{name}");
    let group = format!("pyg-durable-{name}");
    let out = run_script(
        python,
        broker,
        &["--scenario", "commit", "--topic", &topic, "--group", &group],
    );
    assert_checks_passed(&out, broker, "group_scenarios.py");
    let expected: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("COMMITTED "))
        .filter_map(|rest| {
            let mut it = rest.split_whitespace();
            Some(format!("{}:{}", it.next()?, it.next()?))
        })
        .collect();
    assert_eq!(
        expected.len(),
        3,
        "commit printed {} COMMITTED lines, expected 3",
        expected.len()
    );
    (topic, group, expected.join(","))
}

fn verify_offsets(python: &PathBuf, broker: &WeirProcess, commits: &[(String, String, String)]) {
    for (topic, group, expected) in commits {
        let out = run_script(
            python,
            broker,
            &[
                "--scenario",
                "verify",
                "--topic",
                topic,
                "--group",
                group,
                "--expect",
                expected,
            ],
        );
        assert_checks_passed(&out, broker, "group_scenarios.py");
    }
}

#[test]
fn kafka_python_commits_survive_clean_restart_and_sigkill() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let mut broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let mut commits = vec![commit_known_offsets(&python, &broker, "clean")];
    broker
        .restart()
        .unwrap_or_else(|e| panic!("clean restart failed: {e}"));
    verify_offsets(&python, &broker, &commits);

    commits.push(commit_known_offsets(&python, &broker, "killed"));
    broker
        .kill_hard()
        .unwrap_or_else(|e| panic!("SIGKILL of the broker: {e}"));
    broker
        .restart()
        .unwrap_or_else(|e| panic!("weir did not start again after SIGKILL: {e}"));
    verify_offsets(&python, &broker, &commits);
}
