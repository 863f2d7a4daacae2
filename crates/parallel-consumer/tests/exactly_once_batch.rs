//! Batch handlers in exactly-once mode (`start_transform_batch`) against
//! weir: a batch's outputs and the offsets of all its records commit in one
//! transaction (never an offset between its first and last record), an
//! aborted transaction runs the whole batch again, a shutdown while a
//! record inside a batch's span still runs commits no part of the batch,
//! and a failed batch's records are dead-lettered one by one in the
//! transaction.

use crate::common;
use crate::exactly_once::{assert_key_order, not_exactly_once, produce_keyed, read_all};

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestBroker;
use weir_parallel_consumer::driver::{
    ExactlyOnceConfig, HandlerError, ParallelConsumer, ParallelConsumerBuilder, TxnEvent,
};
use weir_parallel_consumer::exactly_once::OutputRecord;
use weir_parallel_consumer::record::{FailurePolicy, Record};
use weir_parallel_consumer::scheduler::Ordering;

/// One handler call: the partition and the offsets of its records.
type Call = (i32, Vec<i64>);

fn broker() -> TestBroker {
    TestBroker::embedded(&[("group.initial.rebalance.delay.ms", "0")])
}

fn builder(
    b: &str,
    group: &str,
    input: &str,
    ordering: Ordering,
    max_concurrency: usize,
) -> ParallelConsumerBuilder {
    ParallelConsumer::builder()
        .client(common::client(b, group))
        .topic(input)
        .config(common::config(ordering, max_concurrency))
}

/// The output of one input record: its key and payload, to `topic`.
fn output_of(topic: &str, r: &Record) -> OutputRecord {
    let mut out = OutputRecord::to(topic).payload(r.payload.clone().unwrap_or_default());
    if let Some(k) = &r.key {
        out = out.key(k.clone());
    }
    out
}

fn observer(events: &Arc<Mutex<Vec<TxnEvent>>>) -> weir_parallel_consumer::driver::TxnObserver {
    let events = events.clone();
    Arc::new(move |e: &TxnEvent| events.lock().unwrap().push(e.clone()))
}

fn all_delivered(pc: &ParallelConsumer, partitions: usize, end: i64) -> bool {
    let s = pc.stats();
    s.len() == partitions && s.iter().all(|p| p.position == end)
}

/// Key order, batches of up to 8 over three partitions: the first call of
/// every partition waits until all 100 records of each were delivered, so
/// its key's later records wait behind it and run in batches. Every input
/// is in the read_committed output exactly once, in key order; every
/// output went out in a committed transaction; and no committed offset
/// ever fell between a batch's first and last record.
#[test]
fn batch_outputs_are_every_input_exactly_once() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eosb-in"),
        common::unique("eosb-out"),
        common::unique("eosb-g"),
    );
    broker.create_topic(&rt, &input, 3);
    broker.create_topic(&rt, &output, 2);
    let want = produce_keyed(b, &input, 3, 100, 5);
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut eos = ExactlyOnceConfig::new(common::unique("txn"));
    eos.observer = Some(observer(&events));
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let (open, gate) = tokio::sync::watch::channel(false);
    let handler = {
        let (calls, output) = (calls.clone(), output.clone());
        move |records: Vec<Record>, _cx| {
            let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
            let first = offsets.first() == Some(&0);
            calls.lock().unwrap().push((records[0].partition, offsets));
            let outputs: Vec<OutputRecord> =
                records.iter().map(|r| output_of(&output, r)).collect();
            let mut gate = gate.clone();
            async move {
                if first {
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(HandlerError::terminal)?;
                }
                Ok(outputs)
            }
        }
    };
    let pc = builder(b, &group, &input, Ordering::Key, 4)
        .max_batch(8)
        .exactly_once(eos)
        .runtime(rt.handle().clone())
        .start_transform_batch(handler)
        .expect("start");
    common::wait_until("300 delivered", || all_delivered(&pc, 3, 100));
    open.send(true).expect("open the gate");
    common::wait_until_or(
        "every input offset committed",
        || (0..3).all(|p| common::committed(b, &group, &input, p).is_some_and(|(o, _)| o == 100)),
        || format!("{:#?}", events.lock().unwrap()),
    );
    let report = pc.shutdown_blocking().expect("shutdown");
    assert_eq!(report.final_commit_error, None);
    let got = read_all(b, &output, 2, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
    assert_key_order(&got);
    let calls = calls.lock().unwrap().clone();
    assert!(
        calls.iter().any(|(_, c)| c.len() > 1),
        "no call got more than one record: {calls:?}"
    );
    assert!(calls.iter().all(|(_, c)| c.len() <= 8), "{calls:?}");
    let mut seen: Vec<(i32, i64)> = calls
        .iter()
        .flat_map(|(p, c)| c.iter().map(move |o| (*p, *o)))
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 300, "every record in one call: {calls:?}");
    seen.dedup();
    assert_eq!(seen.len(), 300, "every record in one call: {calls:?}");
    let events = events.lock().unwrap();
    assert!(
        !events.iter().any(|e| matches!(e, TxnEvent::Aborted { .. })),
        "{events:?}"
    );
    let mut outputs = 0;
    for e in events.iter() {
        let TxnEvent::Committed(s) = e else { continue };
        outputs += s.outputs;
        for (tp, o) in &s.offsets {
            for (p, c) in &calls {
                let (first, last) = (c[0], c[c.len() - 1]);
                assert!(
                    !(*p == tp.partition && first < *o && *o <= last),
                    "transaction {} committed {}-{o} inside batch {p} {c:?}",
                    s.id,
                    tp.partition
                );
            }
        }
    }
    assert_eq!(
        outputs, 300,
        "every output went out in a committed transaction"
    );
}

/// Partition order, batches of up to 4. The first run of the batch
/// holding record 5 writes 5's output to a partition the output topic does
/// not have, so the transaction carrying the batch aborts: every record of
/// that batch runs again, and the output still holds every input once.
#[test]
fn an_aborted_transaction_runs_the_whole_batch_again() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eosb-abort-in"),
        common::unique("eosb-abort-out"),
        common::unique("eosb-abort-g"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    let want = produce_keyed(b, &input, 1, 20, 5);
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut eos = ExactlyOnceConfig::new(common::unique("txn"));
    eos.observer = Some(observer(&events));
    let calls: Arc<Mutex<Vec<Vec<i64>>>> = Arc::default();
    let poisoned = Arc::new(AtomicBool::new(true));
    let (open, gate) = tokio::sync::watch::channel(false);
    let handler = {
        let (calls, poisoned, output) = (calls.clone(), poisoned.clone(), output.clone());
        move |records: Vec<Record>, _cx| {
            let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
            let first = offsets.first() == Some(&0);
            calls.lock().unwrap().push(offsets);
            let poison = records.iter().any(|r| r.offset == 5)
                && poisoned.swap(false, AtomicOrdering::SeqCst);
            let outputs: Vec<OutputRecord> = records
                .iter()
                .map(|r| {
                    let out = output_of(&output, r).partition(0);
                    if poison && r.offset == 5 {
                        out.partition(99)
                    } else {
                        out
                    }
                })
                .collect();
            let mut gate = gate.clone();
            async move {
                if first {
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(HandlerError::terminal)?;
                }
                Ok(outputs)
            }
        }
    };
    let pc = builder(b, &group, &input, Ordering::Partition, 4)
        .max_batch(4)
        .exactly_once(eos)
        .runtime(rt.handle().clone())
        .start_transform_batch(handler)
        .expect("start");
    common::wait_until("20 delivered", || all_delivered(&pc, 1, 20));
    open.send(true).expect("open the gate");
    common::wait_until_or(
        "20 committed",
        || common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 20),
        || format!("{:#?}", events.lock().unwrap()),
    );
    pc.shutdown_blocking().expect("shutdown");
    let events = events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| matches!(e, TxnEvent::Aborted { .. })),
        "no transaction aborted: {events:#?}"
    );
    let calls = calls.lock().unwrap().clone();
    let poisoned_at = calls
        .iter()
        .position(|c| c.contains(&5))
        .expect("a call held 5");
    let batch = &calls[poisoned_at];
    assert!(batch.len() > 1, "the poisoned call was a batch: {calls:?}");
    for o in batch {
        assert!(
            calls[poisoned_at + 1..].iter().any(|c| c.contains(o)),
            "record {o} of the aborted batch {batch:?} did not run again: {calls:?}"
        );
    }
    let got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
    assert_key_order(&got);
}

/// Key order, one handler call at a time: record 0 (key c) waits until
/// all four records were delivered, so key a's records 1 and 3 then run
/// as one batch and key b's record 2, between them, runs after it and
/// never finishes. The engine's watermark is 2, inside the batch: a
/// transaction committing it would carry record 1 without the batch's
/// outputs (they go with 3), and the next owner, starting at 2, would lose
/// 1's output. The shutdown's transaction commits 1 instead; the next
/// consumer runs the batch again and the output holds every input once.
#[test]
fn a_shutdown_inside_a_batch_span_commits_no_part_of_the_batch() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eosb-span-in"),
        common::unique("eosb-span-out"),
        common::unique("eosb-span-g"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    let records = [("c", "c/0"), ("a", "a/0"), ("b", "b/0"), ("a", "a/1")];
    let refs: Vec<(Option<&str>, &str)> = records.iter().map(|(k, v)| (Some(*k), *v)).collect();
    common::produce(b, &input, 0, &refs);
    let want: Vec<String> = records.iter().map(|(_, v)| v.to_string()).collect();
    let calls: Arc<Mutex<Vec<Vec<i64>>>> = Arc::default();
    let (open, gate) = tokio::sync::watch::channel(false);
    let first_handler = {
        let (calls, output) = (calls.clone(), output.clone());
        move |records: Vec<Record>, cx: weir_parallel_consumer::driver::HandlerContext| {
            let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
            calls.lock().unwrap().push(offsets.clone());
            let outputs: Vec<OutputRecord> = records
                .iter()
                .map(|r| output_of(&output, r).partition(0))
                .collect();
            let mut gate = gate.clone();
            async move {
                match offsets[0] {
                    0 => {
                        gate.wait_for(|open| *open)
                            .await
                            .map_err(HandlerError::terminal)?;
                    }
                    // Runs until the shutdown gives up on it.
                    2 => {
                        cx.cancelled().await;
                        return Err(HandlerError::terminal("cancelled"));
                    }
                    _ => {}
                }
                Ok(outputs)
            }
        }
    };
    let first = builder(b, &group, &input, Ordering::Key, 1)
        .max_batch(4)
        .shutdown_timeout(Duration::from_millis(300))
        .exactly_once(ExactlyOnceConfig::new(common::unique("txn-first")))
        .runtime(rt.handle().clone())
        .start_transform_batch(first_handler)
        .expect("first");
    common::wait_until("4 delivered", || all_delivered(&first, 1, 4));
    open.send(true).expect("open the gate");
    common::wait_until_or(
        "the batch of a done and b running",
        || calls.lock().unwrap().iter().any(|c| c[0] == 2),
        || format!("{:?} {:?}", calls.lock().unwrap(), first.stats()),
    );
    assert_eq!(
        *calls.lock().unwrap(),
        vec![vec![0], vec![1, 3], vec![2]],
        "one call at a time: c, the batch of a, then b"
    );
    let report = first.shutdown_blocking().expect("shutdown first");
    assert_eq!(report.final_commit_error, None);
    let finals: Vec<i64> = report.final_commits.iter().map(|c| c.offset).collect();
    assert_eq!(
        finals,
        vec![1],
        "not 2: that would commit record 1 without its batch"
    );
    assert_eq!(
        common::committed(b, &group, &input, 0).map(|(o, _)| o),
        Some(1)
    );
    let second = builder(b, &group, &input, Ordering::Key, 4)
        .max_batch(4)
        .exactly_once(ExactlyOnceConfig::new(common::unique("txn-second")))
        .runtime(rt.handle().clone())
        .start_transform_batch({
            let output = output.clone();
            move |records: Vec<Record>, _cx| {
                let outputs: Vec<OutputRecord> = records
                    .iter()
                    .map(|r| output_of(&output, r).partition(0))
                    .collect();
                async move { Ok::<_, HandlerError>(outputs) }
            }
        })
        .expect("second");
    common::wait_until("4 committed", || {
        common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 4)
    });
    second.shutdown_blocking().expect("shutdown second");
    let got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
}

/// Partition order, batches of up to 4, dead-letter policy: the call
/// holding record 6 fails terminally, so each record of that batch is
/// dead-lettered on its own, and its copies are written in the transaction
/// like outputs. read_committed, the dead-letter topic holds exactly that
/// batch's records once each and the output topic every other record once.
#[test]
fn a_failed_batch_is_dead_lettered_record_by_record_in_the_transaction() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, dead, group) = (
        common::unique("eosb-dlt-in"),
        common::unique("eosb-dlt-out"),
        common::unique("eosb-dlt-dead"),
        common::unique("eosb-dlt-g"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    broker.create_topic(&rt, &dead, 1);
    let want = produce_keyed(b, &input, 1, 12, 3);
    let calls: Arc<Mutex<Vec<Vec<i64>>>> = Arc::default();
    let (open, gate) = tokio::sync::watch::channel(false);
    let handler = {
        let (calls, output) = (calls.clone(), output.clone());
        move |records: Vec<Record>, _cx| {
            let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
            calls.lock().unwrap().push(offsets.clone());
            let outputs: Vec<OutputRecord> = records
                .iter()
                .map(|r| output_of(&output, r).partition(0))
                .collect();
            let mut gate = gate.clone();
            async move {
                if offsets[0] == 0 {
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(HandlerError::terminal)?;
                }
                if offsets.contains(&6) {
                    return Err(HandlerError::terminal("record 6 is malformed"));
                }
                Ok(outputs)
            }
        }
    };
    let pc = builder(b, &group, &input, Ordering::Partition, 4)
        .max_batch(4)
        .on_failure(FailurePolicy::DeadLetter {
            topic: dead.clone(),
        })
        .exactly_once(ExactlyOnceConfig::new(common::unique("txn")))
        .runtime(rt.handle().clone())
        .start_transform_batch(handler)
        .expect("start");
    common::wait_until("12 delivered", || all_delivered(&pc, 1, 12));
    open.send(true).expect("open the gate");
    common::wait_until("12 committed", || {
        common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 12)
    });
    pc.shutdown_blocking().expect("shutdown");
    let calls = calls.lock().unwrap().clone();
    let failed: Vec<&Vec<i64>> = calls.iter().filter(|c| c.contains(&6)).collect();
    let [failed] = failed.as_slice() else {
        panic!("one call held record 6 (a terminal error is not retried): {calls:?}")
    };
    assert!(failed.len() > 1, "the failed call was a batch: {calls:?}");
    let dead_want: Vec<String> = failed.iter().map(|o| want[*o as usize].clone()).collect();
    let out_want: Vec<String> = want
        .iter()
        .enumerate()
        .filter(|(o, _)| !failed.contains(&(*o as i64)))
        .map(|(_, w)| w.clone())
        .collect();
    let dead_got = read_all(b, &dead, 1, "read_committed");
    assert_eq!(not_exactly_once(&dead_want, &dead_got), vec![]);
    let out_got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&out_want, &out_got), vec![]);
}
