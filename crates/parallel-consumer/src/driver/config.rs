//! [`DriverConfig`] (the driver's settings, checked by
//! [`DriverConfig::validate`]) and [`DriverError`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::KafkaError;

use super::handler::RetryDelay;
use crate::engine::EngineConfig;
use crate::record::{FailurePolicy, RetryPolicy};
use crate::scheduler::ConfigError;

/// Settings of the driver (the Kafka client's own settings are the
/// `ClientConfig` passed to [`super::ParallelConsumer::start`] or the builder).
/// Start from `DriverConfig::default()` and change fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverConfig {
    pub engine: EngineConfig,
    pub retry: RetryPolicy,
    /// The wait after failed attempt `n` (1-based) before the next one;
    /// `None`: `retry`'s exponential backoff. `retry.max_attempts` bounds
    /// the attempts either way.
    pub retry_delay: Option<RetryDelay>,
    pub on_failure: FailurePolicy,
    /// How often completed work is committed.
    pub commit_interval: Duration,
    /// Whether the periodic commit waits for the broker's answer
    /// (revoke and shutdown commits always do).
    pub commit_mode: CommitMode,
    /// How long a revoke waits for in-flight work before committing the
    /// completed prefix (keep well below `max.poll.interval.ms`).
    pub revoke_timeout: Duration,
    /// How long shutdown (and the background drain after a drop) waits for
    /// in-flight work before committing the completed prefix.
    pub shutdown_timeout: Duration,
    /// Longest wait of one loop turn: in `poll` for records while no task
    /// runs; otherwise on the worker result queue (a result ends it at once,
    /// a record that arrives meanwhile waits up to this long).
    pub poll_timeout: Duration,
    /// Records taken from the consumer per loop turn.
    pub max_poll_records: usize,
    /// Timeout of the committed-offset lookup on assignment.
    pub committed_fetch_timeout: Duration,
    /// Timeout of a dead-letter write.
    pub dead_letter_timeout: Duration,
    /// The dead-letter producer's librdkafka settings
    /// ([`FailurePolicy::DeadLetter`], at-least-once mode), used as given
    /// (for example a dead-letter topic on another cluster), with
    /// `acks=all` added (another `acks` is refused). `None`: the consumer's
    /// connection and security settings ([`super::connection::producer_base`]:
    /// `bootstrap.servers`, `client.id`, `security.protocol`, `ssl.*`,
    /// `sasl.*`, …) and `acks=all`.
    pub dead_letter_producer: Option<BTreeMap<String, String>>,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            engine: EngineConfig::default(),
            retry: RetryPolicy::default(),
            retry_delay: None,
            on_failure: FailurePolicy::default(),
            commit_interval: Duration::from_secs(1),
            commit_mode: CommitMode::default(),
            revoke_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
            poll_timeout: Duration::from_millis(20),
            max_poll_records: 500,
            committed_fetch_timeout: Duration::from_secs(10),
            dead_letter_timeout: Duration::from_secs(30),
            dead_letter_producer: None,
        }
    }
}

impl DriverConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.engine.scheduler.validate()?;
        if self.max_poll_records == 0 {
            return Err(ConfigError::Zero {
                name: "max_poll_records",
            });
        }
        if self.retry.max_attempts == 0 {
            return Err(ConfigError::Zero {
                name: "retry.max_attempts",
            });
        }
        if self.engine.max_tracked_per_partition == 0 {
            return Err(ConfigError::Zero {
                name: "engine.max_tracked_per_partition",
            });
        }
        for (name, d) in [
            ("commit_interval", self.commit_interval),
            ("poll_timeout", self.poll_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::Zero { name });
            }
        }
        Ok(())
    }
}

/// How the periodic commit of completed work is sent. Either way a
/// partition's offset counts as a checkpoint only once the broker confirmed
/// it for that partition, a refused partition is a
/// [`super::ConsumerEvent::CommitFailed`], and the commits made when
/// partitions are revoked or the consumer shuts down wait for the answer.
/// Exactly-once mode commits in its transactions instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CommitMode {
    /// Sent without waiting: the owner thread goes on polling and handing
    /// out work, and each partition's result is read from librdkafka's
    /// commit callback (run on the owner thread). A commit still in flight
    /// is not sent again.
    #[default]
    Async,
    /// The owner thread waits for the answer (one request for every
    /// partition) and records each partition's result before going on.
    Sync,
}

/// Errors of the driver.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DriverError {
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("the client configuration has no group.id")]
    NoGroupId,
    #[error("{setting} must not be set: the driver commits explicit offsets itself")]
    ForbiddenSetting { setting: &'static str },
    #[error("exactly-once mode needs a transactional id")]
    NoTransactionalId,
    #[error("kafka client error: {0}")]
    Kafka(#[from] KafkaError),
    /// Another producer with the same `transactional.id` took over: this
    /// consumer stopped without committing anything more.
    #[error("the transactional producer was fenced: {0}")]
    ProducerFenced(#[source] KafkaError),
    /// A fatal transaction error (or a commit whose outcome stayed unknown):
    /// the consumer stopped.
    #[error("transaction failed: {0}")]
    Transaction(#[source] KafkaError),
    /// Seeking back after an aborted transaction failed: the consumer's
    /// position is unknown, so it stopped.
    #[error("cannot rewind after an aborted transaction: {0}")]
    Rewind(#[source] KafkaError),
    #[error("cannot spawn the consumer thread: {0}")]
    Spawn(#[source] Arc<std::io::Error>),
    #[error("no tokio runtime: pass one to the builder or start inside one")]
    NoRuntime,
    #[error("no topics to subscribe to")]
    NoTopics,
    #[error("max_batch above 1 needs a batch handler (start_batch)")]
    BatchNeedsBatchHandler,
    #[error("the consumer thread panicked")]
    ThreadPanicked,
}
