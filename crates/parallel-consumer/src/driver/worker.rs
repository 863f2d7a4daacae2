//! Worker tasks: run the handler with retries, resolve final failures by
//! policy, report the outcome through the results queue. Workers never touch
//! the consumer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::engine::{Outcome, TaskRef};
use crate::record::{FailurePolicy, Record, RetryPolicy};
use crate::scheduler::TaskId;

/// The user's handler with its error turned into text.
pub(crate) type BoxHandler =
    Arc<dyn Fn(Record) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// A finished task, sent from a worker to the owner thread.
#[derive(Debug)]
pub(crate) struct Report {
    pub id: TaskId,
    pub task: TaskRef,
    pub outcome: Outcome,
}

/// Everything a worker needs besides its record.
#[derive(Clone)]
pub(crate) struct WorkerEnv {
    pub handler: BoxHandler,
    pub retry: RetryPolicy,
    pub on_failure: FailurePolicy,
    pub dead_letter: Option<FutureProducer>,
    pub dead_letter_timeout: Duration,
    pub results: Sender<Report>,
}

/// Runs one record to its outcome and reports it.
pub(crate) async fn run(env: WorkerEnv, id: TaskId, task: TaskRef, record: Record) {
    let outcome = outcome_of(&env, record).await;
    // The owner thread may be gone (shutdown): then nobody needs the result.
    let _ = env.results.send(Report { id, task, outcome });
}

async fn outcome_of(env: &WorkerEnv, record: Record) -> Outcome {
    let mut attempts = 0u32;
    let error = loop {
        attempts = attempts.saturating_add(1);
        // Run the handler as its own task so that a panic becomes a failed
        // attempt instead of a record that never finishes.
        let error = match tokio::spawn((env.handler)(record.clone())).await {
            Ok(Ok(())) => return Outcome::Success,
            Ok(Err(e)) => e,
            Err(join) => format!("handler panicked: {join}"),
        };
        match env.retry.backoff(attempts) {
            Some(wait) => {
                tracing::warn!(
                    topic = %record.topic, partition = record.partition, offset = record.offset,
                    attempts, error = %error, "handler failed, retrying"
                );
                tokio::time::sleep(wait).await;
            }
            None => break error,
        }
    };
    match &env.on_failure {
        FailurePolicy::StopPartition => {
            tracing::error!(
                topic = %record.topic, partition = record.partition, offset = record.offset,
                attempts, error = %error, "handler failed every attempt: partition stopped"
            );
            Outcome::Failed { attempts }
        }
        FailurePolicy::DeadLetter { topic } => {
            match dead_letter(env, topic, &record, attempts, &error).await {
                Ok(()) => {
                    tracing::warn!(
                        topic = %record.topic, partition = record.partition,
                        offset = record.offset, dead_letter_topic = %topic, attempts,
                        error = %error, "record sent to the dead-letter topic"
                    );
                    Outcome::DeadLettered { attempts }
                }
                Err(e) => {
                    tracing::error!(
                        topic = %record.topic, partition = record.partition,
                        offset = record.offset, dead_letter_topic = %topic,
                        error = %e, "dead-letter write failed: partition stopped"
                    );
                    Outcome::Failed { attempts }
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
        out = out.key(k.as_slice());
    }
    if let Some(p) = &record.payload {
        out = out.payload(p.as_slice());
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
