//! The scenario table at the end of seed 004 against a real broker with
//! consumer groups: `WEIR_PC_BOOTSTRAP=host:port` if set (any
//! Kafka-compatible broker), otherwise a weir broker embedded in the test
//! process (`weir_broker::EmbeddedBroker`, one per test). Row 7 freezes the
//! broker with SIGSTOP, so it runs a `weir serve` process started by the
//! compat-tests harness.
//! The same scenarios run now against librdkafka's mock cluster
//! (`tests/mock_cluster.rs`).

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::time::Duration;

use common::TestBroker;
use tokio::sync::watch;
use weir_broker::metrics::error_slot_code;
use weir_compat_tests::WeirProcess;
use weir_parallel_consumer::driver::ParallelConsumer;
use weir_parallel_consumer::scheduler::Ordering;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::ApiKey;

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
    common::revoke_commits_completed_prefix(
        &TestBroker::from_env(),
        "range",
        common::RevokeCommit::Accepted,
    );
}

#[test]
fn row6_revoke_commits_completed_prefix_cooperative() {
    common::revoke_commits_completed_prefix(
        &TestBroker::from_env(),
        "cooperative-sticky",
        common::RevokeCommit::Accepted,
    );
}

/// Row 8 with `max.poll.interval.ms` of 3 s (the embedded broker accepts
/// sessions from 1 s; 6 s, Kafka's smallest, on an external broker).
#[test]
fn row8_paused_partition_keeps_its_membership() {
    let (broker, timeout) = match std::env::var("WEIR_PC_BOOTSTRAP") {
        Ok(b) if !b.is_empty() => (TestBroker::External(b), Duration::from_secs(6)),
        _ => (
            TestBroker::embedded(&[("group.min.session.timeout.ms", "1000")]),
            Duration::from_secs(3),
        ),
    };
    common::row8_paused_partition_keeps_its_membership(&broker, timeout);
}

#[test]
fn failing_record_goes_to_the_dead_letter_topic_with_its_reason() {
    common::failing_record_goes_to_the_dead_letter_topic_with_its_reason(&TestBroker::from_env());
}

/// OffsetCommit answers with OFFSET_METADATA_TOO_LARGE the embedded broker
/// has sent so far.
fn refused_commits(broker: &TestBroker) -> u64 {
    let TestBroker::Embedded(e) = broker else {
        unreachable!("row 4 runs on an embedded broker")
    };
    let counters = e
        .broker()
        .metrics
        .response_errors(i16::from(ApiKey::OffsetCommit))
        .expect("OffsetCommit error counters");
    let too_large = i16::from(ErrorCode::OffsetMetadataTooLarge);
    counters
        .iter()
        .enumerate()
        .filter(|(slot, _)| error_slot_code(*slot) == Some(too_large))
        .map(|(_, n)| n.load(AtomicOrdering::Relaxed))
        .sum()
}

/// Row 4 against weir: the broker refuses every commit that carries
/// metadata (`offset.metadata.max.bytes=4`), so while record 0 runs and 1, 2
/// are done, the commit (0, {1, 2}) fails. It is not recorded as a
/// checkpoint and does not stop commits (the driver sends it again and
/// again), and a crash at that point re-runs the finished records; the next
/// commit (3, no metadata) goes through.
#[test]
fn row4_refused_commit_is_not_a_checkpoint() {
    let broker = TestBroker::embedded(&[("offset.metadata.max.bytes", "4")]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("row4"), common::unique("g4"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "10"), (None, "11"), (None, "12")]);
    let log = common::Log::default();
    let (_closed, gate) = watch::channel(false);
    let pc = ParallelConsumer::start(
        common::client(b, &group),
        &[topic.as_str()],
        common::config(Ordering::Unordered, 8),
        rt.handle().clone(),
        common::gated_handler(log.clone(), [(0, 0)].into(), gate),
    )
    .expect("start");
    common::wait_until("1 and 2 done while 0 runs", || {
        common::stats_of(&pc, &topic, 0)
            .is_some_and(|s| s.position == 3 && s.in_flight == 1 && s.tracked == 3)
            && log.lock().unwrap().contains(&("end", 0, 1))
            && log.lock().unwrap().contains(&("end", 0, 2))
    });
    // Had a refusal been recorded as the checkpoint, or stopped commits,
    // the driver would not send (0, {1, 2}) again: see it refused over and
    // over (a commit round every 100 ms).
    let refused = refused_commits(&broker);
    common::wait_until("three more commits refused", || {
        refused_commits(&broker) >= refused + 3
    });
    let s = common::stats_of(&pc, &topic, 0).expect("stats");
    assert!(!s.commits_stopped, "a refused commit stopped commits");
    // What the group holds is at most offset 0 without metadata, from a
    // commit round that ran before 1 and 2 finished.
    let held = common::committed(b, &group, &topic, 0);
    assert!(
        held.as_ref().is_none_or(|(o, m)| *o == 0 && m.is_empty()),
        "{held:?}"
    );
    assert!(matches!(s.committed, None | Some(0)), "{s:?}");
    // Crash: the next owner runs everything again.
    pc.abort_blocking().expect("abort");
    let log2 = common::Log::default();
    let (_open, gate2) = watch::channel(true);
    let pc = ParallelConsumer::start(
        common::client(b, &group),
        &[topic.as_str()],
        common::config(Ordering::Unordered, 8),
        rt.handle().clone(),
        common::gated_handler(log2.clone(), HashSet::new(), gate2),
    )
    .expect("restart");
    common::wait_until("3 committed (no metadata left to refuse)", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    for offset in 0..3 {
        assert!(log2.lock().unwrap().contains(&("end", 0, offset)));
    }
    pc.shutdown_blocking().expect("shutdown");
}

/// Stops (SIGSTOP) a broker process until dropped (SIGCONT).
struct Frozen(u32);

impl Frozen {
    fn new(pid: u32) -> Frozen {
        signal("-STOP", pid);
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal("-CONT", self.0);
    }
}

fn signal(which: &str, pid: u32) {
    let status = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill {which} {pid}: {status}");
}

/// Row 7 against weir: the broker is frozen while record 0 runs (1 done and
/// committed as metadata); librdkafka sees its session time out and reports
/// the assignment lost. After the broker resumes, the member rejoins under a
/// new generation and runs 0 again; the first run's late result is
/// discarded, and record 1 is not run again.
#[test]
fn row7_lost_assignment_discards_the_late_result() {
    let weir = WeirProcess::start().unwrap_or_else(|e| panic!("weir: {e}"));
    let pid = weir.pid().expect("broker pid");
    let broker = TestBroker::Weir(weir);
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
    common::wait_until("0 committed with {1} in metadata", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, m)| o == 0 && !m.is_empty())
    });
    let first = common::stats_of(&pc, &topic, 0).expect("stats").generation;
    {
        let _frozen = Frozen::new(pid);
        common::wait_until("the assignment is lost", || {
            common::stats_of(&pc, &topic, 0).is_none()
        });
    }
    common::wait_until("reassigned and record 0 started again", || {
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
