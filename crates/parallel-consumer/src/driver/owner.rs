//! The owner thread: poll, apply worker results, submit, pause/resume,
//! commit; shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::topic_partition_list::TopicPartitionList;

use super::events::ConsumerEvent;
use super::rebalance::PcContext;
use super::worker::{self, Job, WorkerEnv};
use super::{
    ABORT, CommitMode, DriverError, FAILED, RUN, Shared, ShutdownReport, commit, ownership_error,
    txn,
};
use crate::engine::{Delivered, Task};
use crate::record::Record;
use crate::scheduler::Decision;
use crate::tracker::TopicPartition;
use bytes::Bytes;

/// Copies a polled message into a [`Record`] of partition `tp` (whose topic
/// name it shares): key and value in one buffer.
fn to_record(m: &BorrowedMessage<'_>, tp: &TopicPartition) -> Record {
    let key = m.key();
    let payload = m.payload();
    let (key, payload) = match (key, payload) {
        (None, None) => (None, None),
        (Some(k), None) => (Some(Bytes::copy_from_slice(k)), None),
        (None, Some(p)) => (None, Some(Bytes::copy_from_slice(p))),
        (Some(k), Some(p)) => {
            let mut both = Vec::with_capacity(k.len() + p.len());
            both.extend_from_slice(k);
            both.extend_from_slice(p);
            let mut key = Bytes::from(both);
            let payload = key.split_off(k.len());
            (Some(key), Some(payload))
        }
    };
    Record {
        topic: Arc::clone(&tp.topic),
        partition: tp.partition,
        offset: m.offset(),
        key,
        payload,
        headers: m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default(),
        timestamp_ms: m.timestamp().to_millis(),
    }
}

/// How often the owner thread rechecks that the completed sets still fit
/// the commit metadata.
const METADATA_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Bytes a record holds in the buffers (key, value, headers).
fn record_bytes(r: &Record) -> usize {
    r.key.as_ref().map_or(0, Bytes::len)
        + r.payload.as_ref().map_or(0, Bytes::len)
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
}

fn execute(
    consumer: &BaseConsumer<PcContext>,
    shared: &Shared,
    decisions: Vec<Decision<Task<Record>>>,
    env: &Arc<WorkerEnv>,
    runtime: &tokio::runtime::Handle,
) {
    let mut pause = TopicPartitionList::new();
    let mut resume = TopicPartitionList::new();
    let submits = shared.jobs(decisions, |d| match d {
        Decision::Pause(tp) => {
            tracing::debug!(topic = %tp.topic, partition = tp.partition, "pause");
            pause.add_partition(&tp.topic, tp.partition);
        }
        Decision::Resume(tp) => {
            tracing::debug!(topic = %tp.topic, partition = tp.partition, "resume");
            resume.add_partition(&tp.topic, tp.partition);
        }
        Decision::Submit { .. } => {}
    });
    // Tasks enter the runtime from this thread through its shared injection
    // queue (a lock and maybe a wake-up each): the records go over in as
    // many batches as the runtime has worker threads, each batch one task
    // that runs its records concurrently.
    if !submits.is_empty() {
        let workers = runtime.metrics().num_workers().max(1);
        let per_batch = submits.len().div_ceil(workers);
        let mut submits = submits.into_iter().peekable();
        while submits.peek().is_some() {
            let jobs: Vec<Job> = submits.by_ref().take(per_batch).collect();
            runtime.spawn(worker::run(Arc::clone(env), jobs));
        }
    }
    if pause.count() > 0
        && let Err(e) = consumer.pause(&pause)
    {
        tracing::warn!(error = %e, "pause failed");
    }
    if resume.count() > 0
        && let Err(e) = consumer.resume(&resume)
    {
        tracing::warn!(error = %e, "resume failed");
    }
}

fn periodic_commit(consumer: &BaseConsumer<PcContext>, shared: &Shared) {
    let mut requests = shared.lock_engine().commits();
    if requests.is_empty() {
        return;
    }
    let results = match shared.config.commit_mode {
        CommitMode::Sync => commit(consumer, &requests),
        CommitMode::Async => {
            let mut inflight = shared.lock_inflight();
            requests.retain(|r| !inflight.contains(r));
            if requests.is_empty() {
                return;
            }
            match commit::send_async(consumer, &requests) {
                // The answer comes through the commit callback.
                Ok(()) => {
                    inflight.extend(requests);
                    return;
                }
                Err(e) => requests.iter().map(|_| Err(e.clone())).collect(),
            }
        }
    };
    shared.record_commits(requests.iter().zip(results));
}

pub(super) fn run(
    consumer: BaseConsumer<PcContext>,
    shared: Arc<Shared>,
    env: Arc<WorkerEnv>,
    runtime: tokio::runtime::Handle,
) -> Result<ShutdownReport, DriverError> {
    let config = shared.config.clone();
    let mut next_commit = Instant::now() + config.commit_interval;
    let mut next_metadata_check = Instant::now();
    while shared.state.load(AtomicOrdering::SeqCst) == RUN {
        shared.apply_ready_results();
        let now = Instant::now();
        if now >= next_metadata_check {
            shared.lock_engine().check_metadata();
            next_metadata_check = now + METADATA_CHECK_INTERVAL;
        }
        let decisions = shared.actions();
        execute(&consumer, &shared, decisions, &env, &runtime);
        let outputs_full = shared.txn.as_ref().is_some_and(|t| t.outputs_full());
        if Instant::now() >= next_commit || outputs_full {
            match &shared.txn {
                None => periodic_commit(&consumer, &shared),
                Some(t) => {
                    if let Err(e) = txn::commit_round(&consumer, &shared, t) {
                        shared.fail(e);
                        break;
                    }
                }
            }
            next_commit = Instant::now() + config.commit_interval;
        }
        // With tasks running, a finished task must not wait for `poll` to
        // time out: poll without blocking, and if no record came, block on
        // the result queue instead (a result wakes the loop at once).
        let running = shared.lock_engine().running() > 0;
        let mut timeout = if running {
            Duration::ZERO
        } else {
            config.poll_timeout
        };
        let mut polled_any = false;
        // One clock reading per batch: delivery times are for ages in the
        // stats, where a loop turn's resolution is plenty.
        let now = shared.now_ms();
        let mut tp = TopicPartition::new("", -1);
        for _ in 0..config.max_poll_records {
            // Rebalance callbacks run inside this call, on this thread.
            let Some(polled) = consumer.poll(timeout) else {
                break;
            };
            timeout = Duration::ZERO;
            polled_any = true;
            let m = match polled {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "poll error");
                    shared.emit(|| ConsumerEvent::Client { error: e });
                    break;
                }
            };
            // Consecutive records mostly come from one partition: share its
            // name instead of allocating it per record.
            if tp.partition != m.partition() || *tp.topic != *m.topic() {
                tp = TopicPartition::new(m.topic(), m.partition());
            }
            let record = to_record(&m, &tp);
            drop(m);
            let offset = record.offset;
            let bytes = record_bytes(&record);
            let key = crate::scheduler::key_hash(record.key.as_deref());
            match shared
                .lock_engine()
                .deliver_sized(&tp, offset, key, bytes, record, now)
            {
                Delivered::Queued | Delivered::Skipped => {}
                Delivered::NotOwned => {
                    tracing::debug!(topic = %tp.topic, partition = tp.partition, offset, "record of an unowned partition dropped");
                }
                Delivered::Rejected(e) => {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, offset, error = %e, "record not tracked");
                }
            }
        }
        if running && !polled_any {
            shared.apply_one_result(config.poll_timeout);
        }
    }
    let stopping = Instant::now();
    let state = shared.state.load(AtomicOrdering::SeqCst);
    let mut report = if state == ABORT || state == FAILED {
        let mut engine = shared.lock_engine();
        let owned = engine.owned();
        let abandoned = engine.running();
        for tp in &owned {
            engine.lost(tp);
        }
        drop(engine);
        shared.cancel_all();
        shared.forget_outputs(&owned);
        ShutdownReport {
            abandoned,
            ..ShutdownReport::default()
        }
    } else {
        finish(&consumer, &shared)
    };
    // Leaving the group runs the revoke callback, which finds nothing left.
    drop(consumer);
    report.duration = stopping.elapsed();
    match shared
        .failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        Some(error) => Err(error),
        None => Ok(report),
    }
}

/// Shutdown: stop submitting, wait for in-flight work, commit the prefix.
fn finish(consumer: &BaseConsumer<PcContext>, shared: &Shared) -> ShutdownReport {
    let owned = {
        let mut engine = shared.lock_engine();
        let owned = engine.owned();
        for tp in &owned {
            engine.revoking(tp);
        }
        owned
    };
    let timeout = Duration::from_millis(shared.shutdown_timeout_ms.load(AtomicOrdering::SeqCst));
    let deadline = Instant::now() + timeout;
    let running_at_start = shared.lock_engine().running_for(&owned);
    while shared.lock_engine().running_for(&owned) > 0 {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() || !shared.apply_one_result(remaining) {
            break;
        }
    }
    let (mut final_commits, abandoned) = {
        let mut engine = shared.lock_engine();
        let abandoned = engine.running_for(&owned);
        let requests: Vec<_> = owned
            .iter()
            .filter_map(|tp| engine.revoke_finish(tp))
            .collect();
        (requests, abandoned)
    };
    // What did not finish in time runs again on the next owner: tell it
    // to stop.
    shared.cancel_all();
    let final_commit_error = match &shared.txn {
        None => {
            let errors: Vec<String> = commit(consumer, &final_commits)
                .into_iter()
                .zip(&final_commits)
                .filter_map(|(r, c)| {
                    let e = r.err()?;
                    let text = format!("{}-{}: {e}", c.tp.topic, c.tp.partition);
                    let ownership = ownership_error(&e);
                    shared.commit_failed(c, e, ownership);
                    Some(text)
                })
                .collect();
            (!errors.is_empty()).then(|| errors.join("; "))
        }
        Some(t) => {
            match txn::commit_leaving(consumer, t, std::mem::take(&mut final_commits), &owned) {
                Ok((commits, aborted)) => {
                    final_commits = commits;
                    aborted
                }
                Err(e) => {
                    let text = e.to_string();
                    shared.fail(e);
                    Some(text)
                }
            }
        }
    };
    ShutdownReport {
        final_commits,
        final_commit_error,
        drained: running_at_start.saturating_sub(abandoned),
        abandoned,
        duration: Duration::ZERO,
    }
}
