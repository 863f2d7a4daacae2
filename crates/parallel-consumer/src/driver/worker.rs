//! Worker tasks: run the handler with retries, resolve final failures by
//! policy, report the outcome through the results queue. Workers never touch
//! the consumer.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use tokio::sync::broadcast;

use super::events::ConsumerEvent;
use super::handler::{CancellationToken, HandlerContext, HandlerError, RetryDelay};
use crate::engine::{Outcome, TaskRef};
use crate::exactly_once::OutputRecord;
use crate::record::{FailurePolicy, Record, RetryPolicy};
use crate::scheduler::TaskId;
use crate::tracker::TopicPartition;

/// The user's handler. Returns the record's outputs (exactly-once mode;
/// always none otherwise).
pub(crate) type BoxHandler = Arc<dyn Fn(Record, HandlerContext) -> HandlerFuture + Send + Sync>;

/// The user's batch handler. Returns the outputs of the whole batch
/// (exactly-once mode; always none otherwise).
pub(crate) type BoxBatchHandler =
    Arc<dyn Fn(Vec<Record>, HandlerContext) -> HandlerFuture + Send + Sync>;

/// The user's handler: one call per record, or per batch.
#[derive(Clone)]
pub(crate) enum Handler {
    Record(BoxHandler),
    /// Every job goes to it as one call (its records, in order).
    Batch(BoxBatchHandler),
}

/// A finished task, sent from a worker to the owner thread.
#[derive(Debug)]
pub(crate) struct Report {
    pub id: TaskId,
    pub task: TaskRef,
    pub outcome: Outcome,
    /// What the record writes once committed (exactly-once mode). A
    /// batch's outputs (its handler's, or its records' dead-letter copies)
    /// all travel with its last record.
    pub outputs: Vec<OutputRecord>,
    /// Set on the last record of a batch of several: the offset of its
    /// first record. The batch commits as one: no commit offset falls
    /// between the two ([`crate::exactly_once::OutputBuffer::insert_batch`]).
    pub batch_first: Option<i64>,
}

/// Everything a worker needs besides its record.
#[derive(Clone)]
pub(crate) struct WorkerEnv {
    pub handler: Handler,
    pub retry: RetryPolicy,
    /// Replaces the policy's backoff when set.
    pub retry_delay: Option<RetryDelay>,
    pub on_failure: FailurePolicy,
    pub dead_letter: Option<FutureProducer>,
    pub dead_letter_timeout: Duration,
    /// Exactly-once mode: a dead-letter copy is an output of the record
    /// (written in the transaction) instead of a write of its own.
    pub dead_letter_as_output: bool,
    /// Reports go to the owner thread in batches (an empty batch only
    /// wakes it: the reports were applied by the worker).
    pub results: Sender<Vec<Report>>,
    /// Lets workers apply their reports and take the next records
    /// themselves (none in unit tests: everything goes to `results`).
    pub refill: Option<Arc<dyn Refill>>,
    /// Counters and the handler latency histogram.
    pub counters: Arc<crate::metrics::Counters>,
    pub events: broadcast::Sender<ConsumerEvent>,
}

pub(crate) type HandlerFuture =
    Pin<Box<dyn Future<Output = Result<Vec<OutputRecord>, HandlerError>> + Send>>;

/// The handler's future, with a panic while it is polled turned into an
/// error (the attempt failed) instead of a task that never reports.
struct CatchPanic(HandlerFuture);

impl Future for CatchPanic {
    type Output = Result<Vec<OutputRecord>, HandlerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => Poll::Ready(Err(panicked(&*panic))),
        }
    }
}

/// A panic counts as a retriable failure.
fn panicked(panic: &(dyn std::any::Any + Send)) -> HandlerError {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    HandlerError::retriable(format!("handler panicked: {text}"))
}

/// One attempt: the handler (of a record or of a batch) called and
/// awaited in this task (no task of its own), a panic in either counting
/// as a failed attempt.
async fn attempt<A>(
    handler: &Arc<dyn Fn(A, HandlerContext) -> HandlerFuture + Send + Sync>,
    input: A,
    cx: HandlerContext,
) -> Result<Vec<OutputRecord>, HandlerError> {
    match catch_unwind(AssertUnwindSafe(|| handler(input, cx))) {
        Ok(fut) => CatchPanic(fut).await,
        Err(panic) => Err(panicked(&*panic)),
    }
}

/// A submitted record: its task id and reference, the record, and the
/// cancellation token of its partition assignment.
pub(crate) struct Job {
    pub id: TaskId,
    pub task: TaskRef,
    pub record: Record,
    pub cancel: CancellationToken,
    /// The rest of its batch (batch handlers), in order.
    pub more: Vec<(TaskId, TaskRef, Record)>,
}

impl Job {
    /// Adds a submitted record to `jobs`: to the last job when it belongs
    /// to that job's batch, else as a job of its own.
    pub(crate) fn add(
        jobs: &mut Vec<Job>,
        id: TaskId,
        batch: TaskId,
        task: TaskRef,
        record: Record,
        cancel: impl FnOnce(&TaskRef) -> CancellationToken,
    ) {
        if batch != id
            && let Some(last) = jobs.last_mut()
            && last.id == batch
        {
            last.more.push((id, task, record));
            return;
        }
        let cancel = cancel(&task);
        jobs.push(Job {
            id,
            task,
            record,
            cancel,
            more: Vec::new(),
        });
    }
}

/// Runs one record to its outcome.
async fn run_one(env: &WorkerEnv, handler: &BoxHandler, job: Job) -> Report {
    let Job {
        id,
        task,
        record,
        cancel,
        more: _,
    } = job;
    let (outcome, outputs) = outcome_of(env, handler, record, task.generation, &cancel).await;
    Report {
        id,
        task,
        outcome,
        outputs,
        batch_first: None,
    }
}

/// The reports of a finished job.
enum Done {
    One(Report),
    Batch(Vec<Report>),
}

impl Done {
    fn into(self, reports: &mut Vec<Report>) {
        match self {
            Done::One(r) => reports.push(r),
            Done::Batch(rs) => reports.extend(rs),
        }
    }
}

async fn run_job(env: &WorkerEnv, job: Job) -> Done {
    match &env.handler {
        Handler::Record(handler) => Done::One(run_one(env, handler, job).await),
        Handler::Batch(handler) => Done::Batch(run_batch(env, handler, job).await),
    }
}

/// Runs a batch through one handler call per attempt; every record gets
/// the call's outcome (retries and failure policy as for one record, the
/// policy applied to each record of a batch that finally failed). The
/// call's outputs, or the dead-letter copies of its records (exactly-once
/// mode), go with the report of its last record.
async fn run_batch(env: &WorkerEnv, handler: &BoxBatchHandler, job: Job) -> Vec<Report> {
    let Job {
        id,
        task,
        record,
        cancel,
        more,
    } = job;
    let generation = task.generation;
    let mut items = Vec::with_capacity(more.len() + 1);
    items.push((id, task, record));
    items.extend(more);
    let records: Vec<Record> = items.iter().map(|(_, _, r)| r.clone()).collect();
    let mut result = retry(env, generation, &cancel, &items[0].2, |cx| {
        attempt(handler, records.clone(), cx)
    })
    .await;
    let done = matches!(result, Attempts::Done(_));
    let mut outputs = match &mut result {
        Attempts::Done(outputs) => std::mem::take(outputs),
        _ => Vec::new(),
    };
    let mut reports = Vec::with_capacity(items.len());
    for (id, task, record) in items {
        let outcome = match &result {
            Attempts::Done(_) => Outcome::Success,
            Attempts::Cancelled(attempts) => Outcome::Failed {
                attempts: *attempts,
            },
            Attempts::Failed(attempts, error) => {
                let (outcome, copies) = resolve_failure(env, &record, *attempts, error).await;
                outputs.extend(copies);
                outcome
            }
        };
        reports.push(Report {
            id,
            task,
            outcome,
            outputs: Vec::new(),
            batch_first: None,
        });
    }
    let first = reports[0].task.offset;
    if let Some(last) = reports.last_mut() {
        last.outputs = outputs;
        last.batch_first = (last.task.offset != first).then_some(first);
    }
    if done {
        env.counters.processed_more(reports.len() as u64 - 1);
    }
    reports
}

/// Where finished tasks go when a worker may apply them itself.
pub(crate) trait Refill: Send + Sync {
    /// Applies `reports` and returns the records that may run now, or
    /// gives the reports back when it cannot apply them without waiting
    /// (they then go to the owner thread).
    fn finished(&self, reports: Vec<Report>) -> Result<Vec<Job>, Vec<Report>>;
}

/// Runs a batch of records concurrently inside one task (no task spawned
/// per record). The reports of the records that finished by the same
/// wake-up are applied together: by this task itself when the engine is
/// free ([`Refill`]), which also hands it the records that may run next,
/// so a freed slot is refilled without a round trip through the owner
/// thread; otherwise they go to the owner thread as one message.
pub(crate) async fn run(env: Arc<WorkerEnv>, jobs: Vec<Job>) {
    let mut running: FuturesUnordered<_> = jobs.into_iter().map(|j| run_job(&env, j)).collect();
    while let Some(first) = running.next().await {
        let mut reports = Vec::with_capacity(running.len() + 1);
        first.into(&mut reports);
        while let Some(Some(done)) = running.next().now_or_never() {
            done.into(&mut reports);
        }
        let reports = match &env.refill {
            Some(refill) => match refill.finished(reports) {
                Ok(jobs) => {
                    running.extend(jobs.into_iter().map(|j| run_job(&env, j)));
                    // Applied here: the owner thread only needs waking (it
                    // may wait for results to poll again).
                    Vec::new()
                }
                Err(reports) => reports,
            },
            None => reports,
        };
        // The owner thread may be gone (shutdown): then nobody needs the
        // result.
        let _ = env.results.send(reports);
    }
}

fn event(env: &WorkerEnv, record: &Record, make: impl FnOnce(TopicPartition) -> ConsumerEvent) {
    if env.events.receiver_count() > 0 {
        let tp = TopicPartition {
            topic: record.topic.clone(),
            partition: record.partition,
        };
        let _ = env.events.send(make(tp));
    }
}

/// How a record's (or a batch's) attempts ended.
enum Attempts<T> {
    /// An attempt succeeded.
    Done(T),
    /// The partition is going: neither retried nor resolved (it runs again
    /// on its next owner).
    Cancelled(u32),
    /// Every attempt failed (or one terminally): the failure policy
    /// decides.
    Failed(u32, String),
}

/// Calls `call` per attempt (from 1) until it succeeds, the retry policy
/// gives up or the partition's token fires; `what` names it in the log.
async fn retry<T, F, Fut>(
    env: &WorkerEnv,
    generation: u64,
    cancel: &CancellationToken,
    what: &Record,
    mut call: F,
) -> Attempts<T>
where
    F: FnMut(HandlerContext) -> Fut,
    Fut: Future<Output = Result<T, HandlerError>>,
{
    let mut attempts = 0u32;
    loop {
        attempts = attempts.saturating_add(1);
        if attempts > 1 {
            env.counters.retry();
        }
        let cx = HandlerContext::new(attempts, generation, cancel.clone());
        let started = std::time::Instant::now();
        let result = call(cx).await;
        env.counters.attempt(started.elapsed(), result.is_ok());
        let error = match result {
            Ok(done) => return Attempts::Done(done),
            Err(e) => e,
        };
        if cancel.is_cancelled() {
            env.counters.cancelled();
            tracing::debug!(
                topic = %what.topic, partition = what.partition, offset = what.offset,
                attempts, error = %error, "handler failed after cancellation"
            );
            return Attempts::Cancelled(attempts);
        }
        if error.is_terminal() {
            return Attempts::Failed(attempts, error.to_string());
        }
        let wait = match &env.retry_delay {
            Some(delay) => (attempts < env.retry.max_attempts).then(|| delay.delay(attempts)),
            None => env.retry.backoff(attempts),
        };
        match wait {
            Some(wait) => {
                tracing::warn!(
                    topic = %what.topic, partition = what.partition, offset = what.offset,
                    attempts, error = %error, "handler failed, retrying"
                );
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = cancel.cancelled() => {
                        env.counters.cancelled();
                        return Attempts::Cancelled(attempts);
                    }
                }
            }
            None => return Attempts::Failed(attempts, error.to_string()),
        }
    }
}

async fn outcome_of(
    env: &WorkerEnv,
    handler: &BoxHandler,
    record: Record,
    generation: u64,
    cancel: &CancellationToken,
) -> (Outcome, Vec<OutputRecord>) {
    match retry(env, generation, cancel, &record, |cx| {
        attempt(handler, record.clone(), cx)
    })
    .await
    {
        Attempts::Done(outputs) => (Outcome::Success, outputs),
        Attempts::Cancelled(attempts) => (Outcome::Failed { attempts }, Vec::new()),
        Attempts::Failed(attempts, error) => resolve_failure(env, &record, attempts, &error).await,
    }
}

/// The failure policy for a record whose attempts all failed.
async fn resolve_failure(
    env: &WorkerEnv,
    record: &Record,
    attempts: u32,
    error: &str,
) -> (Outcome, Vec<OutputRecord>) {
    let error = error.to_string();
    match &env.on_failure {
        FailurePolicy::StopPartition => {
            env.counters.failed();
            tracing::error!(
                topic = %record.topic, partition = record.partition, offset = record.offset,
                attempts, error = %error, "handler failed: partition stopped"
            );
            event(env, record, |tp| ConsumerEvent::PartitionStopped {
                tp,
                offset: record.offset,
                attempts,
                error: error.clone(),
            });
            (Outcome::Failed { attempts }, Vec::new())
        }
        FailurePolicy::DeadLetter { topic } if env.dead_letter_as_output => {
            tracing::warn!(
                topic = %record.topic, partition = record.partition, offset = record.offset,
                dead_letter_topic = %topic, attempts, error = %error,
                "record goes to the dead-letter topic with the next transaction"
            );
            let copy = OutputRecord::dead_letter(topic, record, attempts, &error);
            env.counters.dead_lettered();
            (Outcome::DeadLettered { attempts }, vec![copy])
        }
        FailurePolicy::DeadLetter { topic } => {
            match dead_letter(env, topic, record, attempts, &error).await {
                Ok(()) => {
                    env.counters.dead_lettered();
                    tracing::warn!(
                        topic = %record.topic, partition = record.partition,
                        offset = record.offset, dead_letter_topic = %topic, attempts,
                        error = %error, "record sent to the dead-letter topic"
                    );
                    (Outcome::DeadLettered { attempts }, Vec::new())
                }
                Err(e) => {
                    env.counters.dead_letter_error();
                    env.counters.failed();
                    tracing::error!(
                        topic = %record.topic, partition = record.partition,
                        offset = record.offset, dead_letter_topic = %topic,
                        error = %e, "dead-letter write failed: partition stopped"
                    );
                    event(env, record, |tp| ConsumerEvent::DeadLetterFailed {
                        tp,
                        offset: record.offset,
                        error: e,
                    });
                    (Outcome::Failed { attempts }, Vec::new())
                }
            }
        }
    }
}

async fn dead_letter(
    env: &WorkerEnv,
    topic: &str,
    record: &Record,
    attempts: u32,
    error: &str,
) -> Result<(), String> {
    let Some(producer) = &env.dead_letter else {
        return Err("no dead-letter producer".into());
    };
    let mut headers = OwnedHeaders::new();
    let dlt_headers = record.dead_letter_headers(attempts, error);
    for (key, value) in &dlt_headers {
        headers = headers.insert(Header {
            key,
            value: value.as_deref(),
        });
    }
    let mut out: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
    if let Some(k) = &record.key {
        out = out.key(&k[..]);
    }
    if let Some(p) = &record.payload {
        out = out.payload(&p[..]);
    }
    if let Some(ts) = record.timestamp_ms {
        out = out.timestamp(ts);
    }
    producer
        .send(out, env.dead_letter_timeout)
        .await
        .map(|_| ())
        .map_err(|(e, _)| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::mpsc::channel;

    use super::*;
    use crate::tracker::TopicPartition;

    fn env(
        handler: BoxHandler,
        on_failure: FailurePolicy,
    ) -> (WorkerEnv, std::sync::mpsc::Receiver<Vec<Report>>) {
        let (results, rx) = channel();
        let env = WorkerEnv {
            handler: Handler::Record(handler),
            retry: RetryPolicy {
                max_attempts: 3,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(1),
            },
            retry_delay: None,
            on_failure,
            dead_letter: None,
            dead_letter_timeout: Duration::from_secs(1),
            dead_letter_as_output: false,
            results,
            refill: None,
            counters: Arc::new(crate::metrics::Counters::new()),
            events: broadcast::channel(4).0,
        };
        (env, rx)
    }

    /// Runs one task and returns the report it sent.
    fn report(env: WorkerEnv, rx: std::sync::mpsc::Receiver<Vec<Report>>) -> Report {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let task = TaskRef {
            tp: TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            generation: 7,
            offset: 42,
        };
        rt.block_on(run(
            Arc::new(env),
            vec![Job {
                id: TaskId(1),
                task,
                record: Record::default(),
                cancel: CancellationToken::new(),
                more: Vec::new(),
            }],
        ));
        single(&rx)
    }

    /// The one report of a one-record batch.
    fn single(rx: &std::sync::mpsc::Receiver<Vec<Report>>) -> Report {
        let mut reports = rx.recv().unwrap();
        assert_eq!(reports.len(), 1);
        reports.pop().unwrap()
    }

    /// A handler failing (or panicking) on its first `failures` calls.
    fn flaky(failures: u32, panic: bool) -> (BoxHandler, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let h: BoxHandler = Arc::new(move |_r, cx| {
            let n = c.fetch_add(1, Ordering::SeqCst);
            assert_eq!(cx.attempt(), n + 1, "attempts count from 1");
            Box::pin(async move {
                if n < failures {
                    if panic {
                        panic!("boom");
                    }
                    return Err(HandlerError::retriable(format!("failure {n}")));
                }
                Ok(vec![OutputRecord::to("out").payload(format!("call {n}"))])
            })
        });
        (h, calls)
    }

    #[test]
    fn retries_until_success_and_reports_the_task() {
        let (h, calls) = flaky(2, false);
        let (env, rx) = env(h, FailurePolicy::StopPartition);
        let r = report(env, rx);
        assert_eq!(r.outcome, Outcome::Success);
        assert_eq!((r.id, r.task.generation, r.task.offset), (TaskId(1), 7, 42));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(
            r.outputs,
            vec![OutputRecord::to("out").payload("call 2")],
            "the outputs of the successful attempt only"
        );
    }

    #[test]
    fn a_panicking_handler_is_a_failed_attempt() {
        let (h, calls) = flaky(1, true);
        let (env, rx) = env(h, FailurePolicy::StopPartition);
        assert_eq!(report(env, rx).outcome, Outcome::Success);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn exhausted_retries_stop_the_partition() {
        let (h, calls) = flaky(u32::MAX, false);
        let (env, rx) = env(h, FailurePolicy::StopPartition);
        assert_eq!(report(env, rx).outcome, Outcome::Failed { attempts: 3 });
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_dead_letter_write_that_cannot_happen_stops_the_partition() {
        let (h, _) = flaky(u32::MAX, false);
        let (env, rx) = env(
            h,
            FailurePolicy::DeadLetter {
                topic: "dead".into(),
            },
        );
        assert_eq!(report(env, rx).outcome, Outcome::Failed { attempts: 3 });
    }

    #[test]
    fn in_exactly_once_mode_the_dead_letter_copy_is_the_output() {
        let (h, _) = flaky(u32::MAX, false);
        let (mut env, rx) = env(
            h,
            FailurePolicy::DeadLetter {
                topic: "dead".into(),
            },
        );
        env.dead_letter_as_output = true;
        let r = report(env, rx);
        assert_eq!(r.outcome, Outcome::DeadLettered { attempts: 3 });
        assert_eq!(r.outputs.len(), 1);
        assert_eq!(r.outputs[0].topic, "dead");
        assert!(
            r.outputs[0]
                .headers
                .contains(&(crate::record::DLT_ERROR.into(), Some(b"failure 2".to_vec())))
        );
    }

    #[test]
    fn a_terminal_error_skips_the_retries() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let h: BoxHandler = Arc::new(move |_r, _cx| {
            c.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Err(HandlerError::terminal("malformed")) })
        });
        let (mut env, rx) = env(
            h,
            FailurePolicy::DeadLetter {
                topic: "dead".into(),
            },
        );
        env.dead_letter_as_output = true;
        let r = report(env, rx);
        assert_eq!(r.outcome, Outcome::DeadLettered { attempts: 1 });
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_retry_delay_is_asked_per_attempt() {
        let (h, calls) = flaky(u32::MAX, false);
        let (mut env, rx) = env(h, FailurePolicy::StopPartition);
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let a = asked.clone();
        env.retry_delay = Some(RetryDelay::new(move |n| {
            a.lock().unwrap().push(n);
            Duration::from_millis(1)
        }));
        assert_eq!(report(env, rx).outcome, Outcome::Failed { attempts: 3 });
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(*asked.lock().unwrap(), vec![1, 2]);
    }

    #[test]
    fn a_cancelled_record_is_neither_retried_nor_dead_lettered() {
        let (h, calls) = flaky(u32::MAX, false);
        let (mut env, rx) = env(
            h,
            FailurePolicy::DeadLetter {
                topic: "dead".into(),
            },
        );
        env.dead_letter_as_output = true;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let token = CancellationToken::new();
        token.cancel();
        let task = TaskRef {
            tp: TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            generation: 1,
            offset: 0,
        };
        rt.block_on(run(
            Arc::new(env),
            vec![Job {
                id: TaskId(1),
                task,
                record: Record::default(),
                cancel: token,
                more: Vec::new(),
            }],
        ));
        let r = single(&rx);
        assert_eq!(r.outcome, Outcome::Failed { attempts: 1 });
        assert!(r.outputs.is_empty(), "no dead-letter copy");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// A batch of three records is one call per attempt; once the retries
    /// are used up every record is resolved by the policy on its own.
    #[test]
    fn a_batch_is_one_call_and_its_records_share_the_outcome() {
        let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let c = calls.clone();
        let (mut env, rx) = env(
            Arc::new(|_r, _cx| Box::pin(async { Ok(Vec::new()) })),
            FailurePolicy::DeadLetter {
                topic: "dead".into(),
            },
        );
        env.dead_letter_as_output = true;
        env.handler = Handler::Batch(Arc::new(move |records: Vec<Record>, cx| {
            c.lock().unwrap().push((
                cx.attempt(),
                records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            ));
            Box::pin(async { Err(HandlerError::retriable("down")) })
        }));
        let task = |offset| TaskRef {
            tp: TopicPartition::new("t", 0),
            generation: 1,
            offset,
        };
        let record = |offset| Record {
            offset,
            ..Record::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(
            Arc::new(env),
            vec![Job {
                id: TaskId(1),
                task: task(4),
                record: record(4),
                cancel: CancellationToken::new(),
                more: vec![
                    (TaskId(2), task(5), record(5)),
                    (TaskId(3), task(7), record(7)),
                ],
            }],
        ));
        let reports = rx.recv().unwrap();
        assert_eq!(
            *calls.lock().unwrap(),
            vec![(1, vec![4, 5, 7]), (2, vec![4, 5, 7]), (3, vec![4, 5, 7])]
        );
        let got: Vec<_> = reports
            .iter()
            .map(|r| (r.id, r.task.offset, r.outcome))
            .collect();
        let dl = Outcome::DeadLettered { attempts: 3 };
        assert_eq!(
            got,
            vec![(TaskId(1), 4, dl), (TaskId(2), 5, dl), (TaskId(3), 7, dl)]
        );
        // Exactly-once mode: the three dead-letter copies go with the last
        // record, which spans the batch from its first.
        let spans: Vec<_> = reports
            .iter()
            .map(|r| (r.outputs.len(), r.batch_first))
            .collect();
        assert_eq!(spans, vec![(0, None), (0, None), (3, Some(4))]);
        assert!(reports[2].outputs.iter().all(|o| o.topic == "dead"));
    }

    /// A batch call's outputs are the batch's: they go with its last
    /// record, once, whatever the number of records.
    #[test]
    fn a_batch_call_outputs_go_with_its_last_record() {
        let (mut env, rx) = env(
            Arc::new(|_r, _cx| Box::pin(async { Ok(Vec::new()) })),
            FailurePolicy::StopPartition,
        );
        env.handler = Handler::Batch(Arc::new(move |records: Vec<Record>, _cx| {
            let outs = vec![OutputRecord::to("out").payload(format!("{}", records.len()))];
            Box::pin(async move { Ok(outs) })
        }));
        let task = |offset| TaskRef {
            tp: TopicPartition::new("t", 0),
            generation: 1,
            offset,
        };
        let record = |offset| Record {
            offset,
            ..Record::default()
        };
        let job = |first: i64, more: &[i64]| Job {
            id: TaskId(first as u64),
            task: task(first),
            record: record(first),
            cancel: CancellationToken::new(),
            more: more
                .iter()
                .map(|o| (TaskId(*o as u64), task(*o), record(*o)))
                .collect(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(Arc::new(env), vec![job(2, &[3, 6]), job(9, &[])]));
        let mut reports: Vec<Report> = rx.try_iter().flatten().collect();
        reports.sort_by_key(|r| r.task.offset);
        let got: Vec<_> = reports
            .iter()
            .map(|r| (r.task.offset, r.outcome, r.outputs.len(), r.batch_first))
            .collect();
        let ok = Outcome::Success;
        assert_eq!(
            got,
            vec![
                (2, ok, 0, None),
                (3, ok, 0, None),
                (6, ok, 1, Some(2)),
                (9, ok, 1, None)
            ]
        );
        assert_eq!(reports[2].outputs[0].payload.as_deref(), Some(&b"3"[..]));
    }
}
