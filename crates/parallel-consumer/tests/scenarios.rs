//! The scenario table at the end of seed 004 against a real broker with
//! consumer groups: `WEIR_PC_BOOTSTRAP=host:port` if set (any
//! Kafka-compatible broker), otherwise a `weir serve` started by the
//! compat-tests harness.
//! The same scenarios run now against librdkafka's mock cluster
//! (`tests/mock_cluster.rs`).

mod common;

use common::TestBroker;

#[test]
fn row1_unfinished_first_record_holds_the_commit() {
    common::row1_unfinished_first_record_holds_the_commit(&TestBroker::from_env());
}

#[test]
fn row2_unsubmitted_record_holds_the_commit() {
    common::row2_unsubmitted_record_holds_the_commit(&TestBroker::from_env());
}

#[test]
fn row3_crash_after_effect_before_commit_has_no_second_effect() {
    common::row3_crash_after_effect_before_commit_has_no_second_effect(&TestBroker::from_env());
}

#[test]
fn row5_key_order_is_kept_while_other_keys_run() {
    common::row5_key_order_is_kept_while_other_keys_run(&TestBroker::from_env());
}

#[test]
fn row6_revoke_commits_completed_prefix_eager() {
    common::revoke_commits_completed_prefix(&TestBroker::from_env(), "range");
}

#[test]
fn row6_revoke_commits_completed_prefix_cooperative() {
    common::revoke_commits_completed_prefix(&TestBroker::from_env(), "cooperative-sticky");
}

#[test]
fn row8_paused_partition_keeps_its_membership() {
    common::row8_paused_partition_keeps_its_membership(&TestBroker::from_env());
}

#[test]
fn failing_record_goes_to_the_dead_letter_topic_with_its_reason() {
    common::failing_record_goes_to_the_dead_letter_topic_with_its_reason(&TestBroker::from_env());
}
