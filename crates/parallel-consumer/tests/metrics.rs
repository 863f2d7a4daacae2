//! The consumer's metrics against a weir broker embedded in the test
//! process (or `WEIR_PC_BOOTSTRAP`): one partition whose records succeed,
//! fail once then succeed, fail every attempt, fail terminally (both
//! dead-lettered) and one that blocks until the test lets it finish. The
//! counters, the histogram's count (one observation per attempt) and the
//! watermark lag are checked while the blocked record holds the watermark
//! and once everything is committed: through
//! `ParallelConsumer::metrics`, its Prometheus text and, with the
//! `metrics` feature, a recorder installed for the consumer.

use crate::common;

use std::time::Duration;

use common::TestBroker;
use tokio::sync::watch;
use weir_parallel_consumer::driver::{HandlerContext, HandlerError, ParallelConsumer};
use weir_parallel_consumer::metrics::{ConsumerMetrics, watermark_lag};
use weir_parallel_consumer::record::{FailurePolicy, Record};
use weir_parallel_consumer::scheduler::Ordering;

#[cfg(feature = "metrics")]
#[path = "../src/metrics/test_recorder.rs"]
mod test_recorder;

/// Where the scenario stands when it asks for checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Records 1..5 resolved, record 0 blocked: position 5, watermark 0.
    Blocked,
    /// Everything resolved and committed.
    Done,
}

/// The records of partition 0, by payload: offset 0 blocks until the
/// gate opens, 1 succeeds, 2 fails its first attempt then succeeds, 3
/// fails all 3 attempts (retriable), 4 fails terminally (1 attempt).
const PAYLOADS: [&str; 5] = ["gate", "ok", "flaky", "retry", "poison"];

/// Attempts so far in each phase: 1 + 2 + 3 + 1 resolved ones, and the
/// blocked record's single attempt once it finished.
fn expected(phase: Phase) -> Counts {
    let blocked_done = u64::from(phase == Phase::Done);
    Counts {
        processed: 2 + blocked_done,
        attempts_failed: 1 + 3 + 1,
        retries: 1 + 2,
        dead_lettered: 2,
        failed: 0,
        cancelled: 0,
        attempts: 7 + blocked_done,
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Counts {
    processed: u64,
    attempts_failed: u64,
    retries: u64,
    dead_lettered: u64,
    failed: u64,
    cancelled: u64,
    /// The handler latency histogram's count.
    attempts: u64,
}

fn counts(m: &ConsumerMetrics) -> Counts {
    Counts {
        processed: m.records_processed,
        attempts_failed: m.attempts_failed,
        retries: m.retries,
        dead_lettered: m.records_dead_lettered,
        failed: m.records_failed,
        cancelled: m.records_cancelled,
        attempts: m.handler_seconds.count(),
    }
}

/// Runs the scenario; `start` starts the consumer (given the function
/// that does it), `check` runs at each phase.
fn scenario(
    start: impl FnOnce(Box<dyn FnOnce() -> ParallelConsumer + 'static>) -> ParallelConsumer,
    mut check: impl FnMut(&ParallelConsumer, &str, Phase),
) {
    let broker = TestBroker::from_env();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, dlt, group) = (
        common::unique("metrics"),
        common::unique("metrics-dead"),
        common::unique("g-metrics"),
    );
    broker.create_topic(&rt, &topic, 1);
    broker.create_topic(&rt, &dlt, 1);
    let records: Vec<(Option<&str>, &str)> = PAYLOADS.iter().map(|p| (None, *p)).collect();
    common::produce(b, &topic, 0, &records);
    let (open, gate) = watch::channel(false);
    let builder = ParallelConsumer::builder()
        .client(common::client(b, &group))
        .topic(&topic)
        .config(common::config(Ordering::Unordered, 8))
        .max_attempts(3)
        .retry_delay(|_| Duration::from_millis(5))
        .on_failure(FailurePolicy::DeadLetter { topic: dlt.clone() })
        .runtime(rt.handle().clone());
    let handler = move |r: Record, cx: HandlerContext| {
        let mut gate = gate.clone();
        async move {
            match r.payload.as_deref() {
                Some(b"gate") => {
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(HandlerError::retriable)?;
                    Ok(())
                }
                Some(b"flaky") if cx.attempt() == 1 => {
                    Err(HandlerError::retriable("fails its first attempt"))
                }
                Some(b"retry") => Err(HandlerError::retriable("fails every attempt")),
                Some(b"poison") => Err(HandlerError::terminal("cannot be parsed")),
                _ => Ok(()),
            }
        }
    };
    let pc = start(Box::new(move || builder.start(handler).expect("start")));
    let stats = || common::stats_of(&pc, &topic, 0);
    common::wait_until_or(
        "records 1..5 resolved while record 0 runs",
        || stats().is_some_and(|s| s.position == 5 && s.in_flight == 1),
        || format!("{:?}\n{:?}", stats(), pc.metrics()),
    );
    check(&pc, &topic, Phase::Blocked);
    open.send(true).expect("open the gate");
    common::wait_until("5 committed", || {
        common::committed(b, &group, &topic, 0).is_some_and(|(o, _)| o == 5)
    });
    check(&pc, &topic, Phase::Done);
    rt.block_on(pc.shutdown()).expect("shutdown");
}

/// The snapshot and the Prometheus text count every attempt and outcome
/// and show the lag the blocked record causes, then none.
#[test]
fn counts_attempts_retries_and_dead_letters_and_the_lag() {
    scenario(
        |start| start(),
        |pc, topic, phase| {
            let m = pc.metrics();
            assert_eq!(counts(&m), expected(phase), "{phase:?}: {m:#?}");
            let lag = if phase == Phase::Blocked { 5 } else { 0 };
            let p = m
                .partitions
                .iter()
                .find(|s| s.topic == topic && s.partition == 0)
                .expect("partition 0 owned");
            assert_eq!(watermark_lag(p), lag, "{phase:?}: {p:?}");
            let text = pc.prometheus_text();
            let want = expected(phase);
            for line in [
                format!("weir_pc_records_processed_total {}", want.processed),
                format!("weir_pc_attempts_failed_total {}", want.attempts_failed),
                format!("weir_pc_retries_total {}", want.retries),
                format!("weir_pc_records_dead_lettered_total {}", want.dead_lettered),
                format!("weir_pc_handler_seconds_count {}", want.attempts),
                format!(
                    "weir_pc_handler_seconds_bucket{{le=\"+Inf\"}} {}",
                    want.attempts
                ),
                format!("weir_pc_watermark_lag{{topic=\"{topic}\",partition=\"0\"}} {lag}"),
            ] {
                assert!(
                    text.lines().any(|l| l == line),
                    "{phase:?}: missing {line}\n{text}"
                );
            }
        },
    );
}

/// With the `metrics` feature, a recorder installed when the consumer
/// starts sees the same counts as they happen (one histogram observation
/// per attempt), and `publish_metrics` sets the partition's gauges.
#[cfg(feature = "metrics")]
#[test]
fn a_metrics_recorder_sees_the_same_counts() {
    use test_recorder::TestRecorder;
    use weir_parallel_consumer::metrics as m;

    let recorder = TestRecorder::default();
    scenario(
        |start| ::metrics::with_local_recorder(&recorder, start),
        |pc, topic, phase| {
            let want = expected(phase);
            let seen = Counts {
                processed: recorder.counter(m::RECORDS_PROCESSED).unwrap_or(0),
                attempts_failed: recorder.counter(m::ATTEMPTS_FAILED).unwrap_or(0),
                retries: recorder.counter(m::RETRIES).unwrap_or(0),
                dead_lettered: recorder.counter(m::RECORDS_DEAD_LETTERED).unwrap_or(0),
                failed: recorder.counter(m::RECORDS_FAILED).unwrap_or(0),
                cancelled: recorder.counter(m::RECORDS_CANCELLED).unwrap_or(0),
                attempts: recorder
                    .histogram(m::HANDLER_SECONDS)
                    .map_or(0, |h| h.len() as u64),
            };
            assert_eq!(seen, want, "{phase:?}");
            ::metrics::with_local_recorder(&recorder, || pc.publish_metrics());
            let id = |name: &str| format!("{name}{{partition=0,topic={topic}}}");
            let lag = if phase == Phase::Blocked { 5.0 } else { 0.0 };
            assert_eq!(
                recorder.gauge(&id(m::WATERMARK_LAG)),
                Some(lag),
                "{phase:?}"
            );
            assert_eq!(recorder.gauge(&id("weir_pc_position")), Some(5.0));
        },
    );
}
