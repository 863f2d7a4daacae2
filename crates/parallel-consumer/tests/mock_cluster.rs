//! The seed 004 scenarios against librdkafka's built-in mock cluster (a
//! Kafka protocol implementation inside librdkafka with consumer groups and
//! offset commits), plus the rows that need error injection: a failed commit
//! (row 4) and a lost assignment with a late result (row 7).

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::{TestBroker, committed, wait_until};
use rdkafka::types::RDKafkaApiKey;
use rdkafka::types::RDKafkaRespErr;
use tokio::sync::watch;
use weir_parallel_consumer::driver::ParallelConsumer;
use weir_parallel_consumer::scheduler::Ordering;

#[test]
fn row1_unfinished_first_record_holds_the_commit() {
    common::row1_unfinished_first_record_holds_the_commit(&TestBroker::mock());
}

#[test]
fn row2_unsubmitted_record_holds_the_commit() {
    common::row2_unsubmitted_record_holds_the_commit(&TestBroker::mock());
}

#[test]
fn row3_crash_after_effect_before_commit_has_no_second_effect() {
    common::row3_crash_after_effect_before_commit_has_no_second_effect(&TestBroker::mock());
}

#[test]
fn row5_key_order_is_kept_while_other_keys_run() {
    common::row5_key_order_is_kept_while_other_keys_run(&TestBroker::mock());
}

#[test]
fn row6_revoke_commits_completed_prefix_eager() {
    common::revoke_commits_completed_prefix(
        &TestBroker::mock(),
        "range",
        common::RevokeCommit::RefusedByMockDuringEagerRebalance,
    );
}

#[test]
fn row6_revoke_commits_completed_prefix_cooperative() {
    common::revoke_commits_completed_prefix(
        &TestBroker::mock(),
        "cooperative-sticky",
        common::RevokeCommit::Accepted,
    );
}

#[test]
fn row8_paused_partition_keeps_its_membership() {
    common::row8_paused_partition_keeps_its_membership(&TestBroker::mock(), Duration::from_secs(3));
}

#[test]
fn failing_record_goes_to_the_dead_letter_topic_with_its_reason() {
    common::failing_record_goes_to_the_dead_letter_topic_with_its_reason(&TestBroker::mock());
}

fn mock_of(
    broker: &TestBroker,
) -> &rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    match broker {
        TestBroker::Mock(m) => m,
        _ => unreachable!("built with TestBroker::mock"),
    }
}

#[test]
fn row4_failed_commit_is_not_a_checkpoint_and_is_retried() {
    let broker = TestBroker::mock();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("row4"), common::unique("g4"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "10"), (None, "11"), (None, "12")]);
    // Every OffsetCommit fails until the errors are cleared.
    let mock = mock_of(&broker);
    mock.request_errors(
        RDKafkaApiKey::OffsetCommit,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE; 10_000],
    );
    let log = common::Log::default();
    let (_open, gate) = watch::channel(true);
    let pc = ParallelConsumer::start(
        common::client(b, &group),
        &[topic.as_str()],
        common::config(Ordering::Unordered, 8),
        rt.handle().clone(),
        common::gated_handler(log, HashSet::new(), gate),
    )
    .expect("start");
    wait_until("all three records done", || {
        common::stats_of(&pc, &topic, 0).is_some_and(|s| s.effect_watermark == 3)
    });
    // Let a few commit rounds fail.
    std::thread::sleep(Duration::from_millis(500));
    let s = common::stats_of(&pc, &topic, 0).expect("stats");
    assert_eq!(
        s.committed, None,
        "a failed commit was recorded as a checkpoint"
    );
    assert!(!s.commits_stopped, "a transient failure stopped commits");
    assert_eq!(committed(b, &group, &topic, 0), None);
    mock.clear_request_errors(RDKafkaApiKey::OffsetCommit);
    wait_until("3 committed after the errors stop", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    wait_until("the confirmed commit is visible in the stats", || {
        common::stats_of(&pc, &topic, 0).is_some_and(|s| s.committed == Some(3))
    });
    pc.shutdown_blocking().expect("shutdown");
}

#[test]
fn row7_lost_assignment_discards_the_late_result() {
    let broker = TestBroker::mock();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("row7"), common::unique("g7"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "10"), (None, "11")]);
    let log = common::Log::default();
    let (old_run, old_gate) = watch::channel(false);
    let (new_run, new_gate) = watch::channel(false);
    let mut client = common::client(b, &group);
    client.set("session.timeout.ms", "6000");
    let pc = ParallelConsumer::start(
        client,
        &[topic.as_str()],
        common::config(Ordering::Unordered, 8),
        rt.handle().clone(),
        common::run_gated_handler(log.clone(), (0, 0), vec![old_gate, new_gate]),
    )
    .expect("start");
    wait_until("0 committed with {1} in metadata", || {
        committed(b, &group, &topic, 0).is_some_and(|(o, m)| o == 0 && !m.is_empty())
    });
    let first = common::stats_of(&pc, &topic, 0).expect("stats").generation;
    // The coordinator forgets the member: librdkafka reports the assignment
    // lost, rejoins and gets the partition again under a new generation.
    mock_of(&broker).request_errors(
        RDKafkaApiKey::Heartbeat,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID],
    );
    wait_until("reassigned and record 0 started again", || {
        // record 1 came back but was restored as done
        common::stats_of(&pc, &topic, 0).is_some_and(|s| s.generation != first && s.skipped == 1)
            && log
                .lock()
                .unwrap()
                .iter()
                .filter(|e| **e == ("start", 0, 0))
                .count()
                == 2
    });
    let s = common::stats_of(&pc, &topic, 0).expect("stats");
    assert_eq!(s.skipped, 1, "record 1 came back but was restored as done");
    common::row7_only_the_new_run_moves_the_commit(&pc, b, &group, &topic, &log, old_run, new_run);
    pc.shutdown_blocking().expect("shutdown");
}
