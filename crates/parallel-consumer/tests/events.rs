//! The consumer's events that mean "this partition stopped" or "this work
//! will run again", each against a weir broker embedded in the test
//! process: `PartitionStopped` (a record failed every attempt),
//! `DeadLetterFailed` (its dead-letter copy could not be written),
//! `PartitionsLost` (the coordinator dropped the member) and
//! `TransactionAborted` (exactly-once). Each test also checks what the
//! event promises about commits: the stopped or failed record holds the
//! commit, a lost partition commits nothing, an aborted transaction's
//! records run again.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Log, TestBroker};
use tokio::sync::broadcast;
use weir_client::Connection;
use weir_parallel_consumer::driver::{
    ConsumerEvent, ExactlyOnceConfig, HandlerContext, HandlerError, ParallelConsumer,
    ParallelConsumerBuilder, TxnEvent,
};
use weir_parallel_consumer::exactly_once::OutputRecord;
use weir_parallel_consumer::metadata;
use weir_parallel_consumer::record::{FailurePolicy, Record};
use weir_parallel_consumer::scheduler::Ordering;
use weir_parallel_consumer::tracker::TopicPartition;
use weir_protocol::messages::LeaveGroupRequest;
use weir_protocol::messages::leave_group_request::MemberIdentity;

fn builder(
    bootstrap: &str,
    group: &str,
    topic: &str,
    ordering: Ordering,
) -> ParallelConsumerBuilder {
    ParallelConsumer::builder()
        .client(common::client(bootstrap, group))
        .topic(topic)
        .config(common::config(ordering, 8))
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// Every event received so far, without waiting.
fn drain(rx: &mut broadcast::Receiver<ConsumerEvent>) -> Vec<ConsumerEvent> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e),
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return out,
        }
    }
}

fn ran(log: &Log, partition: i32, offset: i64) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|e| **e == ("start", partition, offset))
        .count()
}

/// A record that fails every attempt (partition 0: retriable errors, 3
/// attempts; partition 1: a terminal error, 1 attempt) under
/// `FailurePolicy::StopPartition` is reported with its partition, offset,
/// attempts and last error; nothing after it in its partition runs, even
/// records produced after the stop, while partition 2 keeps consuming; the
/// commit stays at the failed record.
#[test]
fn a_record_failing_every_attempt_stops_its_partition_with_an_event() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("ev-stop"), common::unique("g-ev-stop"));
    broker.create_topic(&rt, &topic, 3);
    let log = Log::default();
    let l = log.clone();
    let pc = builder(b, &group, &topic, Ordering::Partition)
        .max_attempts(3)
        .retry_delay(|_| Duration::from_millis(5))
        .on_failure(FailurePolicy::StopPartition)
        .runtime(rt.handle().clone())
        .start(move |r: Record, cx: HandlerContext| {
            l.lock().unwrap().push(("start", r.partition, r.offset));
            async move {
                match r.payload.as_deref() {
                    Some(b"flaky") => Err(HandlerError::retriable(format!(
                        "unavailable (attempt {})",
                        cx.attempt()
                    ))),
                    Some(b"poison") => Err(HandlerError::terminal("malformed")),
                    _ => Ok(()),
                }
            }
        })
        .expect("start");
    let mut events = pc.events();
    common::produce(b, &topic, 0, &[(None, "ok"), (None, "flaky"), (None, "ok")]);
    common::produce(
        b,
        &topic,
        1,
        &[(None, "ok"), (None, "poison"), (None, "ok")],
    );
    let mut stopped: BTreeMap<i32, (i64, u32, String)> = BTreeMap::new();
    while stopped.len() < 2 {
        let (p, what) = rt.block_on(common::next_event(
            &mut events,
            "two partitions stopped",
            |e| match e {
                ConsumerEvent::PartitionStopped {
                    tp,
                    offset,
                    attempts,
                    error,
                } if *tp.topic == *topic => {
                    Some((tp.partition, (*offset, *attempts, error.clone())))
                }
                _ => None,
            },
        ));
        assert!(
            stopped.insert(p, what).is_none(),
            "partition {p} stopped twice"
        );
    }
    assert_eq!(
        stopped,
        BTreeMap::from([
            (0, (1, 3, "unavailable (attempt 3)".to_string())),
            (1, (1, 1, "malformed".to_string())),
        ])
    );
    // More records for the stopped partitions, then some for partition 2:
    // once partition 2 committed its records, the owner thread has gone
    // round its loop many times with the stopped partitions' records
    // available.
    common::produce(b, &topic, 0, &[(None, "ok")]);
    common::produce(b, &topic, 1, &[(None, "ok")]);
    common::produce(b, &topic, 2, &[(None, "ok"), (None, "ok")]);
    common::wait_until("partition 2 committed 2", || {
        common::committed(b, &group, &topic, 2).is_some_and(|(o, _)| o == 2)
    });
    for p in 0..2 {
        common::wait_until_or(
            &format!("partition {p}'s commit reached the failed record"),
            || common::stats_of(&pc, &topic, p).is_some_and(|s| s.committed == Some(1)),
            || format!("{:?}", common::stats_of(&pc, &topic, p)),
        );
        let s = common::stats_of(&pc, &topic, p).expect("owned");
        assert!(s.stopped, "{s:?}");
        assert_eq!((s.failed, s.effect_watermark), (1, 1), "{s:?}");
        assert_eq!(
            common::committed(b, &group, &topic, p).map(|(o, _)| o),
            Some(1),
            "partition {p}: the commit passed the failed record"
        );
        for o in 2..4 {
            assert_eq!(
                ran(&log, p, o),
                0,
                "partition {p}: record {o} ran after the stop: {:?}",
                log.lock().unwrap()
            );
        }
    }
    assert_eq!(ran(&log, 0, 1), 3, "{:?}", log.lock().unwrap());
    assert_eq!(ran(&log, 1, 1), 1, "{:?}", log.lock().unwrap());
    pc.shutdown_blocking().expect("shutdown");
    for p in 0..2 {
        assert_eq!(
            common::committed(b, &group, &topic, p).map(|(o, _)| o),
            Some(1),
            "partition {p}: the final commit passed the failed record"
        );
    }
}

/// A dead-letter producer that cannot write (its topic does not exist and
/// the broker creates none; the producer gives up after 2 s) reports the
/// record as `DeadLetterFailed`; the record is not resolved: commits made
/// after the later record 2 completed still stop at it.
#[test]
fn a_failed_dead_letter_write_is_an_event_and_holds_the_commit() {
    let broker = TestBroker::embedded(&[("auto.create.topics.enable", "false")]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, dlt, group) = (
        common::unique("ev-dlt"),
        common::unique("ev-dlt-missing"),
        common::unique("g-ev-dlt"),
    );
    broker.create_topic(&rt, &topic, 1);
    let mut config = common::config(Ordering::Unordered, 8);
    config.on_failure = FailurePolicy::DeadLetter { topic: dlt.clone() };
    config.dead_letter_timeout = Duration::from_secs(2);
    config.dead_letter_producer = Some(BTreeMap::from([
        ("bootstrap.servers".to_string(), b.to_string()),
        ("message.timeout.ms".to_string(), "2000".to_string()),
    ]));
    let pc = ParallelConsumer::builder()
        .client(common::client(b, &group))
        .topic(&topic)
        .config(config)
        .runtime(rt.handle().clone())
        .start(|r: Record, _cx| async move {
            match r.payload.as_deref() {
                Some(b"poison") => Err(HandlerError::terminal("malformed")),
                _ => Ok(()),
            }
        })
        .expect("start");
    let mut events = pc.events();
    common::produce(
        b,
        &topic,
        0,
        &[(None, "ok"), (None, "poison"), (None, "ok")],
    );
    let (offset, error) = rt.block_on(common::next_event(
        &mut events,
        "a failed dead-letter write",
        |e| match e {
            ConsumerEvent::DeadLetterFailed {
                tp: t,
                offset,
                error,
            } if *t == tp(&topic, 0) => Some((*offset, error.clone())),
            _ => None,
        },
    ));
    assert_eq!(offset, 1);
    assert!(!error.is_empty());
    eprintln!("dead-letter write failed: {error}");
    common::wait_until_or(
        "a commit with record 2 done",
        || {
            common::committed(b, &group, &topic, 0)
                .is_some_and(|(o, m)| o > 1 || metadata::decode(&m, o).is_ok_and(|s| s.contains(2)))
        },
        || format!("{:?}", common::stats_of(&pc, &topic, 0)),
    );
    let (offset, meta) = common::committed(b, &group, &topic, 0).expect("committed");
    assert_eq!(
        offset, 1,
        "the commit passed a record whose dead-letter write failed"
    );
    // The completed set above it: record 2 alone, as (start, end) runs.
    let runs = metadata::decode(&meta, 1)
        .map(|s| s.runs.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>());
    assert_eq!(runs, Ok(vec![(2, 3)]), "{meta}");
    let s = common::stats_of(&pc, &topic, 0).expect("owned");
    assert!(s.stopped, "{s:?}");
    assert_eq!((s.failed, s.effect_watermark), (1, 1), "{s:?}");
    pc.shutdown_blocking().expect("shutdown");
    assert_eq!(
        common::committed(b, &group, &topic, 0).map(|(o, _)| o),
        Some(1)
    );
}

/// Asks the coordinator (the only broker at `bootstrap`) to remove
/// `member_id` from `group`, as an administrator would (LeaveGroup v3 on
/// the member's behalf). Its next heartbeat is answered
/// UNKNOWN_MEMBER_ID, which librdkafka reports as a lost assignment.
fn remove_member(rt: &tokio::runtime::Runtime, bootstrap: &str, group: &str, member_id: &str) {
    let request = LeaveGroupRequest {
        group_id: group.to_string(),
        members: vec![MemberIdentity {
            member_id: member_id.to_string(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let r = rt
        .block_on(async {
            let mut conn = Connection::connect(bootstrap, "weir-pc-test-admin").await?;
            conn.send_version(&request, 3).await
        })
        .expect("LeaveGroup");
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(r.members.iter().all(|m| m.error_code == 0), "{r:?}");
}

/// The coordinator removes the member while record 0 runs and 1, 2 are
/// done, with no commit made yet (one-hour commit interval): librdkafka
/// reports the assignment lost, the event names the partition, record 0's
/// handler is cancelled, and nothing is committed for the lost
/// assignment (a revoke would commit 0 with {1, 2}): the member rejoins,
/// finds no commit and runs all three records again. The final commit at
/// shutdown shows commits do reach the broker.
#[test]
fn a_lost_assignment_is_an_event_and_commits_nothing() {
    let broker = TestBroker::embedded(&[("group.initial.rebalance.delay.ms", "0")]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("ev-lost"), common::unique("g-ev-lost"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "a"), (None, "b"), (None, "c")]);
    let log = Log::default();
    let first_run_of_0 = Arc::new(AtomicBool::new(true));
    let l = log.clone();
    let pc = builder(b, &group, &topic, Ordering::Unordered)
        .commit_interval(Duration::from_secs(3600))
        .runtime(rt.handle().clone())
        .start(move |r: Record, cx: HandlerContext| {
            let log = l.clone();
            let block = r.offset == 0 && first_run_of_0.swap(false, AtomicOrdering::SeqCst);
            async move {
                log.lock().unwrap().push(("start", r.partition, r.offset));
                if block {
                    cx.cancelled().await;
                    log.lock()
                        .unwrap()
                        .push(("cancelled", r.partition, r.offset));
                    return Err(HandlerError::retriable("assignment lost"));
                }
                log.lock().unwrap().push(("end", r.partition, r.offset));
                Ok(())
            }
        })
        .expect("start");
    let mut events = pc.events();
    common::wait_until("record 0 running, 1 and 2 done", || {
        common::stats_of(&pc, &topic, 0).is_some_and(|s| {
            s.position == 3 && s.in_flight == 1 && s.tracked == 3 && s.effect_watermark == 0
        })
    });
    let generation = common::stats_of(&pc, &topic, 0).expect("owned").generation;
    assert_eq!(common::committed(b, &group, &topic, 0), None);
    let (_, members) = common::group_members(b, &group).expect("DescribeGroups");
    let [member] = members.as_slice() else {
        panic!("one member expected: {members:?}")
    };
    remove_member(&rt, b, &group, member);
    let lost = rt.block_on(common::next_event(
        &mut events,
        "partitions lost",
        |e| match e {
            ConsumerEvent::PartitionsLost { partitions } => Some(partitions.clone()),
            _ => None,
        },
    ));
    assert_eq!(lost, vec![tp(&topic, 0)]);
    common::wait_until_or(
        "the member rejoined and ran every record again",
        || {
            common::stats_of(&pc, &topic, 0)
                .is_some_and(|s| s.generation != generation && s.effect_watermark == 3)
        },
        || {
            format!(
                "{:?}\n{:?}",
                common::stats_of(&pc, &topic, 0),
                log.lock().unwrap()
            )
        },
    );
    assert!(
        log.lock().unwrap().contains(&("cancelled", 0, 0)),
        "record 0's handler was not cancelled at the loss: {:?}",
        log.lock().unwrap()
    );
    let s = common::stats_of(&pc, &topic, 0).expect("owned");
    assert_eq!(
        s.skipped, 0,
        "the new assignment found records done in a commit made for the lost one: {s:?}"
    );
    for o in 0..3 {
        assert_eq!(ran(&log, 0, o), 2, "record {o}: {:?}", log.lock().unwrap());
    }
    assert_eq!(
        common::committed(b, &group, &topic, 0),
        None,
        "a commit was made for the lost assignment"
    );
    let failed: Vec<_> = drain(&mut events)
        .into_iter()
        .filter(|e| matches!(e, ConsumerEvent::CommitFailed { .. }))
        .collect();
    assert_eq!(
        failed.len(),
        0,
        "commits tried for the lost assignment: {failed:?}"
    );
    pc.shutdown_blocking().expect("shutdown");
    assert_eq!(
        common::committed(b, &group, &topic, 0).map(|(o, _)| o),
        Some(3)
    );
}

/// Exactly-once: the first run of record 5 writes to a partition the output
/// topic does not have, so its transaction aborts. The event receiver gets
/// `TransactionAborted` with the observer's error, every record of the
/// aborted transaction runs again, and all 10 are committed.
#[test]
fn an_aborted_transaction_is_an_event_and_its_records_run_again() {
    let broker = TestBroker::embedded(&[("group.initial.rebalance.delay.ms", "0")]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("ev-abort-in"),
        common::unique("ev-abort-out"),
        common::unique("g-ev-abort"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    let txns: Arc<Mutex<Vec<TxnEvent>>> = Arc::default();
    let mut eos = ExactlyOnceConfig::new(common::unique("ev-txn"));
    let t = txns.clone();
    eos.observer = Some(Arc::new(move |e: &TxnEvent| {
        t.lock().unwrap().push(e.clone())
    }));
    let runs: Arc<Mutex<HashMap<i64, usize>>> = Arc::default();
    let poisoned = Arc::new(AtomicBool::new(true));
    let (r2, out) = (runs.clone(), output.clone());
    let pc = builder(b, &group, &input, Ordering::Partition)
        .exactly_once(eos)
        .runtime(rt.handle().clone())
        .start_transform(move |r: Record, _cx| {
            *r2.lock().unwrap().entry(r.offset).or_insert(0) += 1;
            let mut o = OutputRecord::to(out.clone())
                .partition(0)
                .payload(r.payload.clone().unwrap_or_default());
            if r.offset == 5 && poisoned.swap(false, AtomicOrdering::SeqCst) {
                o = o.partition(99);
            }
            async move { Ok::<_, HandlerError>(vec![o]) }
        })
        .expect("start");
    let mut events = pc.events();
    let records: Vec<(Option<&str>, &str)> = (0..10).map(|_| (None, "x")).collect();
    common::produce(b, &input, 0, &records);
    let error = rt.block_on(common::next_event(
        &mut events,
        "a transaction aborted",
        |e| match e {
            ConsumerEvent::TransactionAborted { error } => Some(error.clone()),
            _ => None,
        },
    ));
    eprintln!("transaction aborted: {error}");
    common::wait_until_or(
        "10 committed",
        || common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 10),
        || format!("{:#?}", txns.lock().unwrap()),
    );
    pc.shutdown_blocking().expect("shutdown");
    let txns = txns.lock().unwrap().clone();
    let aborted: Vec<_> = txns
        .iter()
        .filter_map(|e| match e {
            TxnEvent::Aborted { summary, error } => Some((summary.clone(), error.clone())),
            _ => None,
        })
        .collect();
    let [(summary, observed)] = aborted.as_slice() else {
        panic!("one aborted transaction expected: {txns:#?}")
    };
    assert_eq!(&error, observed, "the event and the observer disagree");
    let aborted_to = summary.offsets[0].1;
    let committed_before = txns
        .iter()
        .filter_map(|e| match e {
            TxnEvent::Committed(s) if s.id < summary.id => Some(s.offsets[0].1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    assert!(
        committed_before <= 5 && aborted_to > 5,
        "the aborted transaction held record 5: {txns:#?}"
    );
    let runs = runs.lock().unwrap().clone();
    for o in 0..10 {
        let n = runs.get(&o).copied().unwrap_or(0);
        if (committed_before..aborted_to).contains(&o) {
            assert!(
                n >= 2,
                "record {o} of the aborted transaction ran {n} times"
            );
        } else {
            assert!(n >= 1, "record {o} never ran");
        }
    }
}

/// Exactly-once: an output refused when it is sent (the producer already
/// knows the output topic from an earlier transaction, so a partition it
/// does not have fails at once) while the transaction's earlier outputs
/// still wait for their delivery reports: the abort serves those first
/// and completes, the records run again, and all are committed. (Without
/// that the abort timed out and stopped the consumer.)
#[test]
fn an_output_refused_at_send_after_queued_outputs_aborts_cleanly() {
    let broker = TestBroker::embedded(&[("group.initial.rebalance.delay.ms", "0")]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("ev-abort2-in"),
        common::unique("ev-abort2-out"),
        common::unique("g-ev-abort2"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    let poisoned = Arc::new(AtomicBool::new(true));
    let out = output.clone();
    let pc = builder(b, &group, &input, Ordering::Partition)
        .exactly_once(ExactlyOnceConfig::new(common::unique("ev-txn2")))
        .runtime(rt.handle().clone())
        .start_transform(move |r: Record, _cx| {
            let mut o = OutputRecord::to(out.clone())
                .partition(0)
                .payload(r.payload.clone().unwrap_or_default());
            if r.offset == 5 && poisoned.swap(false, AtomicOrdering::SeqCst) {
                o = o.partition(99);
            }
            async move { Ok::<_, HandlerError>(vec![o]) }
        })
        .expect("start");
    let mut events = pc.events();
    // First transaction: records 0-2, committed.
    common::produce(b, &input, 0, &[(None, "a"), (None, "b"), (None, "c")]);
    common::wait_until("3 committed", || {
        common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 3)
    });
    // Second: 3 and 4 are sent, then 5 is refused.
    let records: Vec<(Option<&str>, &str)> = (3..10).map(|_| (None, "x")).collect();
    common::produce(b, &input, 0, &records);
    rt.block_on(common::next_event(
        &mut events,
        "a transaction aborted",
        |e| matches!(e, ConsumerEvent::TransactionAborted { .. }).then_some(()),
    ));
    common::wait_until("10 committed", || {
        common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 10)
    });
    assert!(pc.is_running(), "the consumer stopped");
    pc.shutdown_blocking().expect("shutdown");
}
