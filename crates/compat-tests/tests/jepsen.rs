//! The Jepsen-style replication check (`weir_compat_tests::jepsen`): a
//! three-node cluster, an idempotent acks=all producer of unique values,
//! two consumers, and a nemesis that kills leaders with -9, SIGSTOPs
//! followers, cuts a leader's link (network namespaces, root) and restarts
//! nodes; then every partition is read back and checked. Nothing may be
//! lost, acknowledged at another offset, or read by a consumer and later
//! lost, or written twice — with and without `flush.messages=1`.
//!
//! The short configuration runs in CI (20 s of faults each, about 40 s a
//! test; the two take turns, as together they would starve two cores of CI
//! and turn timeouts into failovers of their own). A longer run:
//! `WEIR_JEPSEN_SECS=600 WEIR_JEPSEN_NODES=5 cargo test -p weir-compat-tests
//! --test integration jepsen:: -- --nocapture --test-threads=1` (every knob
//! in docs/replication.md).

use std::sync::Mutex;

use weir_compat_tests::jepsen::{self, Config, Fault, Outcome};

/// Held by the running test: one cluster under the nemesis at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run_and_check(flush_every_message: bool) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = Config::short(flush_every_message).with_env();
    let outcome = jepsen::run(&config).unwrap_or_else(|e| {
        panic!(
            "the jepsen run did not complete (seed {}): {e}",
            config.seed
        )
    });
    let summary = outcome.summary();
    println!("{summary}");
    let context = || {
        format!(
            "{summary}\n--- nemesis ---\n{}\n{}",
            outcome.event_log(),
            outcome.logs
        )
    };
    // Acknowledged data is safe: nothing lost, nothing moved, nothing read
    // that was later lost, no value from nowhere, and nothing written twice
    // (the producer is idempotent).
    let r = &outcome.report;
    assert_eq!(r.anomalies(), 0, "replication anomalies\n{}", context());
    assert_eq!(
        outcome.report.unresolved,
        0,
        "records without a delivery report\n{}",
        context()
    );
    if !config.faults.is_empty() {
        assert_nemesis_bit(&outcome, &context());
    }
}

/// The run was not vacuous: the faults the short configuration promises
/// happened, and records were acknowledged in spite of them.
fn assert_nemesis_bit(outcome: &Outcome, context: &str) {
    for fault in [Fault::KillLeader, Fault::PauseFollower] {
        if outcome.faults.contains(&fault) {
            assert!(
                outcome.injected(fault) >= 1,
                "no {fault} fault was injected\n{context}"
            );
        }
    }
    assert!(
        outcome.acked_after_first_fault > 0,
        "no record sent after the first fault was acknowledged\n{context}"
    );
}

#[test]
fn no_acknowledged_record_is_lost_under_faults() {
    run_and_check(false);
}

#[test]
fn no_acknowledged_record_is_lost_under_faults_with_flush_messages_1() {
    run_and_check(true);
}
