//! What a broker's partition layer asks the active controller, over a
//! [`ControllerClient`]: ISR changes of the partitions it leads
//! ([`alter_partition`], Kafka's AlterPartition) and blocks of producer ids
//! for idempotent producers ([`allocate_producer_ids`]).
//!
//! The wire types stay here; callers deal in topic ids, epochs and broker
//! ids. A whole-request refusal (STALE_BROKER_EPOCH, an unsupported
//! version, a timeout on the controller) is an [`BrokerRequestError`]; a
//! partition's refusal is that partition's result.
//!
//! ```no_run
//! use weir_cluster::ControllerClient;
//! use weir_cluster::broker_requests::{alter_partition, allocate_producer_ids};
//! use weir_metadata::controller::AlterPartition;
//!
//! # async fn run(client: &ControllerClient, topic_id: weir_protocol::Uuid) {
//! // Broker 1 (epoch 7) leads partition 0 and drops broker 3 from its ISR.
//! let shrink = AlterPartition {
//!     topic_id,
//!     partition: 0,
//!     leader_epoch: 0,
//!     partition_epoch: 0,
//!     new_isr: vec![(1, 7), (2, 7)],
//! };
//! match alter_partition(client, 1, 7, vec![shrink]).await {
//!     Ok(results) => for ((_, partition), result) in results {
//!         println!("partition {partition}: {result:?}");
//!     },
//!     Err(e) => println!("not sent: {e}"),
//! }
//! let block = allocate_producer_ids(client, 1, 7).await;
//! # }
//! ```

use std::collections::BTreeMap;

use weir_metadata::controller::AlterPartition;
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use weir_protocol::messages::{AllocateProducerIdsRequest, AlterPartitionRequest};

use crate::client::{ControllerClient, ControllerClientError};
use crate::listener::partitions::RECOVERED;

/// Why a request to the controller was not done at all.
#[derive(Debug, thiserror::Error)]
pub enum BrokerRequestError {
    /// No active controller answered.
    #[error(transparent)]
    Client(#[from] ControllerClientError),
    /// The controller refused the whole request (STALE_BROKER_EPOCH,
    /// BROKER_ID_NOT_REGISTERED, REQUEST_TIMED_OUT, …).
    #[error("the controller refused the request: {}", .0.name())]
    Refused(ErrorCode),
}

/// A partition as the controller committed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
    /// Kafka's `LeaderRecoveryState`: 0 recovered, 1 recovering.
    pub leader_recovery_state: i8,
}

/// One result per change asked, in the order asked, keyed by (topic id,
/// partition).
pub type AlterPartitionResults = Vec<((Uuid, i32), Result<PartitionState, ErrorCode>)>;

/// A block of producer ids: `first..first + len` are this broker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub first: i64,
    pub len: i32,
}

impl ProducerIdBlock {
    /// The first id after the block.
    pub fn end(&self) -> i64 {
        self.first.saturating_add(i64::from(self.len))
    }
}

/// AlterPartition from broker `broker_id` at `broker_epoch`, the leader of
/// every partition in `changes`. Each change names the leader and
/// partition epochs the broker knows and the whole proposed ISR with each
/// member's broker epoch (-1: not checked). A change the answer does not
/// mention is UNKNOWN_SERVER_ERROR; name each partition at most once.
pub async fn alter_partition(
    client: &ControllerClient,
    broker_id: i32,
    broker_epoch: i64,
    changes: Vec<AlterPartition>,
) -> Result<AlterPartitionResults, BrokerRequestError> {
    let asked: Vec<(Uuid, i32)> = changes.iter().map(|c| (c.topic_id, c.partition)).collect();
    let resp = client
        .send(&alter_partition_request(broker_id, broker_epoch, changes))
        .await?;
    if resp.error_code != ErrorCode::None.code() {
        return Err(BrokerRequestError::Refused(ErrorCode::from_code_lossy(
            resp.error_code,
        )));
    }
    let mut answered: BTreeMap<(Uuid, i32), Result<PartitionState, ErrorCode>> = BTreeMap::new();
    for topic in resp.topics {
        for p in topic.partitions {
            let result = if p.error_code == ErrorCode::None.code() {
                Ok(PartitionState {
                    leader: p.leader_id,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr,
                    partition_epoch: p.partition_epoch,
                    leader_recovery_state: p.leader_recovery_state,
                })
            } else {
                Err(ErrorCode::from_code_lossy(p.error_code))
            };
            answered.insert((topic.topic_id, p.partition_index), result);
        }
    }
    Ok(asked
        .into_iter()
        .map(|tp| {
            let result = answered
                .remove(&tp)
                .unwrap_or(Err(ErrorCode::UnknownServerError));
            (tp, result)
        })
        .collect())
}

/// The request for `changes`, grouped by topic in the order first named,
/// in v3's form (ISR members with epochs): the version the client
/// negotiates, the highest of both the protocol crate and the CONTROLLER
/// listener.
fn alter_partition_request(
    broker_id: i32,
    broker_epoch: i64,
    changes: Vec<AlterPartition>,
) -> AlterPartitionRequest {
    let mut topics: Vec<TopicData> = Vec::new();
    for c in changes {
        let partition = PartitionData {
            partition_index: c.partition,
            leader_epoch: c.leader_epoch,
            new_isr_with_epochs: c
                .new_isr
                .iter()
                .map(|(id, epoch)| BrokerState {
                    broker_id: *id,
                    broker_epoch: *epoch,
                    ..Default::default()
                })
                .collect(),
            leader_recovery_state: RECOVERED,
            partition_epoch: c.partition_epoch,
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.topic_id == c.topic_id) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(TopicData {
                topic_id: c.topic_id,
                partitions: vec![partition],
                ..Default::default()
            }),
        }
    }
    AlterPartitionRequest {
        broker_id,
        broker_epoch,
        topics,
        ..Default::default()
    }
}

/// AllocateProducerIds for broker `broker_id` at `broker_epoch`: a block no
/// other call, on any controller, has handed out.
pub async fn allocate_producer_ids(
    client: &ControllerClient,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<ProducerIdBlock, BrokerRequestError> {
    let resp = client
        .send(&AllocateProducerIdsRequest {
            broker_id,
            broker_epoch,
            ..Default::default()
        })
        .await?;
    if resp.error_code != ErrorCode::None.code() {
        return Err(BrokerRequestError::Refused(ErrorCode::from_code_lossy(
            resp.error_code,
        )));
    }
    Ok(ProducerIdBlock {
        first: resp.producer_id_start,
        len: resp.producer_id_len,
    })
}
