//! The async lifecycle against a weir broker embedded in the test process
//! (or `WEIR_PC_BOOTSTRAP`): async shutdown on a current-thread runtime, a
//! drop that does not wait, the event stream, attempt numbers and
//! retriable / terminal errors, cancellation on revoke, user pause.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Log, TestBroker};
use rdkafka::message::{Header, Headers, Message};
use tokio::sync::watch;
use weir_parallel_consumer::driver::{
    CommitMode, ConsumerEvent, DriverError, HandlerContext, HandlerError, ParallelConsumer,
    ParallelConsumerBuilder,
};
use weir_parallel_consumer::record::{self, FailurePolicy, Record};
use weir_parallel_consumer::scheduler::Ordering;
use weir_parallel_consumer::tracker::TopicPartition;

const WAIT: Duration = Duration::from_secs(60);

fn builder(bootstrap: &str, group: &str, topic: &str) -> ParallelConsumerBuilder {
    ParallelConsumer::builder()
        .client(common::client(bootstrap, group))
        .topic(topic)
        .config(common::config(Ordering::Unordered, 8))
}

/// A context handler that logs, and blocks every record until `gate` opens.
fn gated(
    log: Log,
    gate: watch::Receiver<bool>,
) -> impl Fn(
    Record,
    HandlerContext,
) -> std::pin::Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>>
+ Send
+ Sync
+ 'static {
    move |r: Record, _cx: HandlerContext| {
        let log = log.clone();
        let mut gate = gate.clone();
        Box::pin(async move {
            log.lock().unwrap().push(("start", r.partition, r.offset));
            gate.wait_for(|open| *open)
                .await
                .map_err(HandlerError::retriable)?;
            log.lock().unwrap().push(("end", r.partition, r.offset));
            Ok(())
        })
    }
}

fn count(log: &Log, what: &str) -> usize {
    log.lock().unwrap().iter().filter(|e| e.0 == what).count()
}

/// [`common::wait_until`] for async code: checks every 20 ms on the
/// runtime's timer, so the runtime keeps running other tasks meanwhile.
async fn wait_async(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "gave up waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// On a current-thread runtime, `shutdown().await` must not block the one
/// thread the handlers run on: the handlers are released only after the
/// shutdown began, by a future polled by the same thread, and every one
/// must still finish within the drain and be in the final commit.
#[test]
fn async_shutdown_drains_on_a_current_thread_runtime() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let admin = common::runtime();
    let (topic, group) = (common::unique("ashut"), common::unique("g-ashut"));
    broker.create_topic(&admin, &topic, 1);
    let records: Vec<(Option<&str>, &str)> = (0..6).map(|_| (None, "x")).collect();
    common::produce(b, &topic, 0, &records);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let log = Log::default();
    let (open, gate) = watch::channel(false);
    let report = rt.block_on(async {
        let pc = builder(b, &group, &topic)
            .shutdown_timeout(WAIT)
            .start(gated(log.clone(), gate))
            .expect("start");
        wait_async("6 handlers running", || count(&log, "start") == 6).await;
        assert_eq!(count(&log, "end"), 0);
        let (report, ()) = tokio::time::timeout(WAIT, async {
            tokio::join!(pc.shutdown(), async {
                open.send(true).expect("open the gate");
            })
        })
        .await
        .expect("shutdown returned within the test's deadline");
        report.expect("shutdown")
    });
    assert_eq!(count(&log, "end"), 6, "{:?}", log.lock().unwrap());
    assert_eq!(report.abandoned, 0, "{report:?}");
    assert!(report.drained <= 6, "{report:?}");
    let finals: Vec<_> = report
        .final_commits
        .iter()
        .map(|c| (c.tp.partition, c.offset))
        .collect();
    assert_eq!(finals, vec![(0, 6)], "{report:?}");
    assert_eq!(report.final_commit_error, None);
    assert_eq!(
        common::committed(b, &group, &topic, 0).map(|(o, _)| o),
        Some(6)
    );
}

/// Handlers that never finish by themselves are abandoned at the drain
/// deadline: the report counts them, the commit does not move, and their
/// cancellation tokens fire (which is what ends them here).
#[test]
fn shutdown_abandons_at_its_deadline_and_cancels_the_rest() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("abandon"), common::unique("g-abandon"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "a"), (None, "b"), (None, "c")]);
    let log = Log::default();
    let l = log.clone();
    let pc = builder(b, &group, &topic)
        .runtime(rt.handle().clone())
        .start(move |r: Record, cx: HandlerContext| {
            let log = l.clone();
            async move {
                log.lock().unwrap().push(("start", r.partition, r.offset));
                cx.cancelled().await;
                log.lock()
                    .unwrap()
                    .push(("cancelled", r.partition, r.offset));
                Err(HandlerError::retriable("cancelled"))
            }
        })
        .expect("start");
    common::wait_until("3 handlers running", || count(&log, "start") == 3);
    let report = rt
        .block_on(pc.shutdown_with_timeout(Duration::from_millis(200)))
        .expect("shutdown");
    assert_eq!((report.abandoned, report.drained), (3, 0), "{report:?}");
    // The prefix did not move: the final commit (the partition's first)
    // says 0.
    let finals: Vec<_> = report.final_commits.iter().map(|c| c.offset).collect();
    assert_eq!(finals, vec![0], "{report:?}");
    common::wait_until("the abandoned handlers saw their tokens fire", || {
        count(&log, "cancelled") == 3
    });
    assert_eq!(
        common::committed(b, &group, &topic, 0).map(|(o, _)| o),
        Some(0)
    );
}

/// Dropping the consumer returns while its handlers are blocked; once
/// they are released, the background drain commits their records (the
/// only commit that can: nothing had completed before the drop, and the
/// periodic commits end with it).
#[test]
fn drop_returns_at_once_and_drains_in_the_background() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("drop"), common::unique("g-drop"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "a"), (None, "b"), (None, "c")]);
    let log = Log::default();
    let (open, gate) = watch::channel(false);
    let pc = builder(b, &group, &topic)
        .runtime(rt.handle().clone())
        // Far longer than the test waits for the drop to return.
        .shutdown_timeout(WAIT * 3)
        .start(gated(log.clone(), gate))
        .expect("start");
    common::wait_until("3 handlers running", || count(&log, "start") == 3);
    let (dropped_tx, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(pc);
        let _ = dropped_tx.send(());
    });
    dropped
        .recv_timeout(WAIT)
        .expect("drop returned while handlers were still blocked");
    assert_eq!(count(&log, "end"), 0, "a handler finished before the gate");
    assert_eq!(common::committed(b, &group, &topic, 0), None);
    open.send(true).expect("open the gate");
    common::wait_until("the drain after the drop committed 3", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    assert_eq!(count(&log, "end"), 3);
}

/// A commit the broker refuses (it allows 4 bytes of metadata; record 0
/// runs while 1 and 2 are done, so the commit carries {1, 2}) reaches
/// the event receiver, in both commit modes; once record 0 is done the
/// commit of 3 is confirmed.
#[test]
fn a_refused_commit_is_an_event() {
    refused_commit_is_an_event(CommitMode::Async);
}

#[test]
fn a_refused_synchronous_commit_is_an_event() {
    refused_commit_is_an_event(CommitMode::Sync);
}

fn refused_commit_is_an_event(mode: CommitMode) {
    let broker = TestBroker::embedded(&[("offset.metadata.max.bytes", "4")]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("ev"), common::unique("g-ev"));
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "a"), (None, "b"), (None, "c")]);
    let (open, gate) = watch::channel(false);
    let pc = builder(b, &group, &topic)
        .commit_mode(mode)
        .runtime(rt.handle().clone())
        .start(move |r: Record, _cx| {
            let mut gate = gate.clone();
            async move {
                if r.offset == 0 {
                    gate.wait_for(|open| *open).await?;
                }
                Ok(())
            }
        })
        .expect("start");
    let mut events = pc.events();
    let (offset, ownership) = rt.block_on(common::next_event(
        &mut events,
        "a failed commit",
        |e| match e {
            ConsumerEvent::CommitFailed {
                tp,
                offset,
                ownership,
                ..
            } if *tp.topic == *topic && tp.partition == 0 => Some((*offset, *ownership)),
            _ => None,
        },
    ));
    assert_eq!((offset, ownership), (0, false));
    open.send(true).expect("open the gate");
    common::wait_until("3 committed", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    pc.shutdown_blocking().expect("shutdown");
}

/// A broker that goes away is reported as a client error.
#[test]
fn a_stopped_broker_is_an_event() {
    let TestBroker::Embedded(embedded) = TestBroker::embedded(&[]) else {
        unreachable!()
    };
    let b = &embedded.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("down"), common::unique("g-down"));
    let broker = TestBroker::Embedded(embedded);
    broker.create_topic(&rt, &topic, 1);
    common::produce(b, &topic, 0, &[(None, "a")]);
    let done = Log::default();
    let d = done.clone();
    let pc = builder(b, &group, &topic)
        .runtime(rt.handle().clone())
        .start(move |r, _cx| {
            d.lock().unwrap().push(("end", r.partition, r.offset));
            async { Ok(()) }
        })
        .expect("start");
    common::wait_until("record 0 handled", || count(&done, "end") == 1);
    let mut events = pc.events();
    let TestBroker::Embedded(embedded) = broker else {
        unreachable!()
    };
    embedded.shutdown().expect("broker shutdown");
    let error = rt.block_on(common::next_event(
        &mut events,
        "a client error",
        |e| match e {
            ConsumerEvent::Client { error } => Some(error.clone()),
            _ => None,
        },
    ));
    eprintln!("client error after the broker stopped: {error}");
    rt.block_on(pc.abort()).expect("abort");
}

/// Attempt numbers count 1, 2, 3 for a record failing twice with a
/// retriable error; a terminal error goes to the dead-letter topic on its
/// first attempt.
#[test]
fn attempts_count_up_and_terminal_errors_skip_the_retries() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, dlt, group) = (
        common::unique("att"),
        common::unique("att-dead"),
        common::unique("g-att"),
    );
    broker.create_topic(&rt, &topic, 1);
    broker.create_topic(&rt, &dlt, 1);
    common::produce(
        b,
        &topic,
        0,
        &[(None, "flaky"), (Some("k"), "poison"), (None, "ok")],
    );
    let attempts: Arc<Mutex<HashMap<i64, Vec<u32>>>> = Arc::default();
    let seen = attempts.clone();
    let delays: Arc<Mutex<Vec<u32>>> = Arc::default();
    let asked = delays.clone();
    let pc = builder(b, &group, &topic)
        .ordering(Ordering::Partition)
        .max_attempts(5)
        .retry_delay(move |n| {
            asked.lock().unwrap().push(n);
            Duration::from_millis(5)
        })
        .on_failure(FailurePolicy::DeadLetter { topic: dlt.clone() })
        .runtime(rt.handle().clone())
        .start(move |r: Record, cx: HandlerContext| {
            seen.lock()
                .unwrap()
                .entry(r.offset)
                .or_default()
                .push(cx.attempt());
            async move {
                match r.payload.as_deref() {
                    Some(b"flaky") if cx.attempt() < 3 => {
                        Err(HandlerError::retriable(format!("try {}", cx.attempt())))
                    }
                    Some(b"poison") => Err(HandlerError::terminal("malformed")),
                    _ => Ok(()),
                }
            }
        })
        .expect("start");
    common::wait_until("3 committed", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    pc.shutdown_blocking().expect("shutdown");
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(attempts.get(&0), Some(&vec![1, 2, 3]), "{attempts:?}");
    assert_eq!(attempts.get(&1), Some(&vec![1]), "{attempts:?}");
    assert_eq!(attempts.get(&2), Some(&vec![1]), "{attempts:?}");
    assert_eq!(*delays.lock().unwrap(), vec![1, 2], "delays asked");
    let m = common::first_record(b, &dlt);
    assert_eq!(m.payload(), Some(b"poison".as_slice()));
    let headers = m.headers().expect("headers");
    let get = |name: &str| {
        headers
            .iter()
            .find(|h: &Header<'_, &[u8]>| h.key == name)
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).to_string())
    };
    assert_eq!(get(record::DLT_OFFSET).as_deref(), Some("1"));
    assert_eq!(get(record::DLT_ATTEMPTS).as_deref(), Some("1"));
    assert_eq!(get(record::DLT_ERROR).as_deref(), Some("malformed"));
}

/// A second member joins and takes one of two partitions: the first
/// member's handlers, waiting only for their cancellation, see it fire on
/// the revoke; the record they gave up on is not committed, so the new
/// owner runs it.
#[test]
fn cancellation_fires_on_revoke() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("cancel"), common::unique("g-cancel"));
    broker.create_topic(&rt, &topic, 2);
    for p in 0..2 {
        common::produce(b, &topic, p, &[(None, "x")]);
    }
    let first_log = Log::default();
    let generations: Arc<Mutex<Vec<(i32, u64)>>> = Arc::default();
    let (log, gens) = (first_log.clone(), generations.clone());
    let mut client = common::client(b, &group);
    client.set("partition.assignment.strategy", "range");
    let first = ParallelConsumer::builder()
        .client(client.clone())
        .topic(&topic)
        .config(common::config(Ordering::Unordered, 8))
        // Longer than the test waits: only the cancellation lets the
        // handlers end before the revoke gives up on them.
        .revoke_timeout(WAIT * 3)
        .runtime(rt.handle().clone())
        .start(move |r: Record, cx: HandlerContext| {
            let log = log.clone();
            gens.lock().unwrap().push((r.partition, cx.generation()));
            async move {
                log.lock().unwrap().push(("start", r.partition, r.offset));
                cx.cancelled().await;
                assert!(cx.is_cancelled());
                log.lock()
                    .unwrap()
                    .push(("cancelled", r.partition, r.offset));
                Err(HandlerError::retriable("revoked"))
            }
        })
        .expect("first member");
    common::wait_until("both records running", || count(&first_log, "start") == 2);
    for (p, g) in generations.lock().unwrap().iter() {
        let s = common::stats_of(&first, &topic, *p).expect("owned");
        assert_eq!(s.generation, *g, "partition {p}");
    }
    assert_eq!(count(&first_log, "cancelled"), 0);
    let second_log = Log::default();
    let log = second_log.clone();
    let second = ParallelConsumer::builder()
        .client(client)
        .topic(&topic)
        .config(common::config(Ordering::Unordered, 8))
        .runtime(rt.handle().clone())
        .start(move |r: Record, _cx| {
            log.lock().unwrap().push(("end", r.partition, r.offset));
            async { Ok(()) }
        })
        .expect("second member");
    common::wait_until_or(
        "the second member took a partition and committed its record",
        || {
            second.stats().iter().any(|s| {
                common::committed(b, &group, &topic, s.partition).is_some_and(|(o, _)| o == 1)
            })
        },
        || {
            format!(
                "first: {:?}\nsecond: {:?}\nfirst log: {:?}",
                first.stats(),
                second.stats(),
                first_log.lock().unwrap()
            )
        },
    );
    let moved: Vec<i32> = second.stats().iter().map(|s| s.partition).collect();
    let first_log_now = first_log.lock().unwrap().clone();
    for p in &moved {
        assert!(
            first_log_now.contains(&("cancelled", *p, 0)),
            "partition {p} moved without its handler's token firing: {first_log_now:?}"
        );
        assert!(
            second_log.lock().unwrap().contains(&("end", *p, 0)),
            "the new owner did not run the record given up on"
        );
    }
    second.shutdown_blocking().expect("shutdown second");
    first.abort_blocking().expect("abort first");
}

/// A user-paused partition delivers nothing, although its buffer is empty
/// (flow control alone would fetch), while the other partition keeps
/// going; after `resume` its records run.
#[test]
fn a_user_paused_partition_delivers_nothing_until_resumed() {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("upause"), common::unique("g-upause"));
    broker.create_topic(&rt, &topic, 2);
    for p in 0..2 {
        common::produce(b, &topic, p, &[(None, "x")]);
    }
    let log = Log::default();
    let l = log.clone();
    let pc = builder(b, &group, &topic)
        .runtime(rt.handle().clone())
        .start(move |r: Record, _cx| {
            l.lock().unwrap().push(("end", r.partition, r.offset));
            async { Ok(()) }
        })
        .expect("start");
    common::wait_until("offset 0 of both partitions handled", || {
        count(&log, "end") == 2
    });
    let p0 = TopicPartition::new(topic.as_str(), 0);
    pc.pause(&p0);
    common::wait_until("partition 0 paused", || {
        common::stats_of(&pc, &topic, 0).is_some_and(|s| s.paused)
    });
    // Partition 0's records go first: had it kept fetching, they would come
    // with or before partition 1's.
    common::produce(b, &topic, 0, &[(None, "y"), (None, "z")]);
    common::produce(b, &topic, 1, &[(None, "y"), (None, "z")]);
    common::wait_until("partition 1's new records handled", || {
        log.lock().unwrap().contains(&("end", 1, 2))
    });
    // And a few more loop turns of the owner thread (commits every 100 ms)
    // with partition 0's buffer empty.
    common::wait_until("partition 1 committed 3", || {
        common::committed(b, &group, &topic, 1).is_some_and(|(o, _)| o == 3)
    });
    let s = common::stats_of(&pc, &topic, 0).expect("owned");
    assert!(s.paused, "{s:?}");
    assert_eq!((s.position, s.in_flight), (1, 0), "{s:?}");
    assert!(
        !log.lock().unwrap().iter().any(|e| e.1 == 0 && e.2 > 0),
        "a paused partition delivered: {:?}",
        log.lock().unwrap()
    );
    pc.resume(&p0);
    common::wait_until("partition 0 committed 3 after resume", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 3)
    });
    assert!(log.lock().unwrap().contains(&("end", 0, 2)));
    pc.shutdown_blocking().expect("shutdown");
}

/// The (key, offset) pairs of one batch-handler call.
type Batch = Vec<(String, i64)>;

/// Batch handlers in key order: each call gets up to 3 records of one key
/// (the records its lock covers), in offset order; every record is
/// handled once and the commit reaches the end. A batch limit without a
/// batch handler is refused.
#[test]
fn a_batch_handler_gets_records_of_one_key_in_order() {
    let broker = TestBroker::embedded(&[]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("batch"), common::unique("g-batch"));
    broker.create_topic(&rt, &topic, 1);
    let keys = ["a", "b", "a", "a", "c", "a", "b", "a", "a", "c"];
    let records: Vec<(Option<&str>, String)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (Some(*k), format!("{k}{i}")))
        .collect();
    let records: Vec<(Option<&str>, &str)> =
        records.iter().map(|(k, v)| (*k, v.as_str())).collect();
    common::produce(b, &topic, 0, &records);
    assert!(matches!(
        builder(b, &group, &topic)
            .max_batch(3)
            .runtime(rt.handle().clone())
            .start(|_r: Record, _cx| async { Ok(()) }),
        Err(DriverError::BatchNeedsBatchHandler)
    ));
    let calls: Arc<Mutex<Vec<Batch>>> = Arc::default();
    let c = calls.clone();
    // The first call (key a, offset 0) waits until every record was
    // delivered, so the rest of key a waits behind it and runs in batches.
    let (open, gate) = watch::channel(false);
    let pc = builder(b, &group, &topic)
        .ordering(Ordering::Key)
        .max_batch(3)
        .runtime(rt.handle().clone())
        .start_batch(move |records: Vec<Record>, _cx| {
            let batch: Vec<(String, i64)> = records
                .iter()
                .map(|r| {
                    let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default());
                    (key.into_owned(), r.offset)
                })
                .collect();
            let first = batch.first().is_some_and(|(_, o)| *o == 0);
            c.lock().unwrap().push(batch);
            let mut gate = gate.clone();
            async move {
                if first {
                    gate.wait_for(|open| *open).await?;
                }
                Ok(())
            }
        })
        .expect("start");
    common::wait_until("10 delivered", || {
        pc.stats()
            .iter()
            .any(|s| s.partition == 0 && s.position == 10)
    });
    open.send(true).expect("open the gate");
    common::wait_until("10 committed", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 10)
    });
    pc.shutdown_blocking().expect("shutdown");
    let calls = calls.lock().unwrap().clone();
    let mut seen: Vec<i64> = calls.iter().flatten().map(|(_, o)| *o).collect();
    seen.sort();
    assert_eq!(
        seen,
        (0..10).collect::<Vec<_>>(),
        "every record once: {calls:?}"
    );
    for call in &calls {
        assert!(!call.is_empty() && call.len() <= 3, "batch size: {calls:?}");
        assert!(
            call.iter().all(|(k, _)| *k == call[0].0),
            "one key per batch: {calls:?}"
        );
        assert!(
            call.windows(2).all(|w| w[0].1 < w[1].1),
            "offset order: {calls:?}"
        );
        for (k, o) in call {
            assert_eq!(keys[*o as usize], k, "{calls:?}");
        }
    }
    assert!(
        calls.iter().any(|c| c.len() > 1),
        "some call got more than one record: {calls:?}"
    );
}
