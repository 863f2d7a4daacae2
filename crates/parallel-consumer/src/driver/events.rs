//! What happens to a running consumer that its user may need to act on,
//! delivered through [`super::ParallelConsumer::events`].

use rdkafka::error::KafkaError;

use super::DriverError;
use crate::tracker::TopicPartition;

/// Events kept for a receiver that falls behind; older ones are dropped
/// and the receiver sees `RecvError::Lagged` with their count.
pub const EVENT_CAPACITY: usize = 1024;

/// Something that went wrong after start. The consumer keeps running after
/// every event except [`ConsumerEvent::Stopped`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// A fatal error stopped the consumer (producer fenced, transaction
    /// failure, rewind failure); shutdown returns the same error.
    Stopped(DriverError),
    /// A commit of a partition's completed prefix was refused or failed.
    /// Not recorded as a checkpoint; a transient failure is retried with
    /// the next commit, an ownership error (`ownership`) stops commits for
    /// this assignment.
    CommitFailed {
        tp: TopicPartition,
        offset: i64,
        error: KafkaError,
        ownership: bool,
    },
    /// A record's dead-letter write failed: its partition stopped.
    DeadLetterFailed {
        tp: TopicPartition,
        offset: i64,
        error: String,
    },
    /// A record failed every attempt under `FailurePolicy::StopPartition`:
    /// its partition stopped.
    PartitionStopped {
        tp: TopicPartition,
        offset: i64,
        attempts: u32,
        error: String,
    },
    /// The assignment was lost (session timeout, fenced member, rebalance
    /// error): nothing of these partitions was committed at the loss.
    PartitionsLost { partitions: Vec<TopicPartition> },
    /// An exactly-once transaction aborted; its partitions run again from
    /// their committed offsets.
    TransactionAborted { error: String },
    /// An error of the Kafka client (for example every broker down, a
    /// broker connection that failed, or authentication refused);
    /// librdkafka keeps retrying.
    Client { error: KafkaError },
}
