//! [`ControllerClient`]: sends controller requests (registration,
//! heartbeats, topic admin and topic configs, ElectLeaders, partition
//! reassignments, DescribeQuorum, AlterPartition, AllocateProducerIds) to
//! whichever
//! voter is the active controller, over the Kafka protocol on their
//! CONTROLLER listeners.
//!
//! A request goes to the last controller that answered, else to each voter
//! in turn. A connection error or a NOT_CONTROLLER answer moves on to the
//! next voter; after a full round without an answer the client backs off
//! (doubling from `backoff_initial` up to `backoff_max`). The whole request
//! is bounded by `deadline`. One request at a time; one connection, kept to
//! the controller that last answered.
//!
//! A CreateTopics, DeleteTopics or CreatePartitions of several topics
//! whose controller stepped down midway is sent again whole to the next
//! one, so topics done by the first answer TOPIC_ALREADY_EXISTS /
//! UNKNOWN_TOPIC_OR_PARTITION / INVALID_PARTITIONS the second time, as with
//! Kafka's own retries.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use weir_client::{ClientError, Connection};
use weir_protocol::codec::Request;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    AllocateProducerIdsRequest, AlterClientQuotasRequest, AlterPartitionReassignmentsRequest,
    AlterPartitionRequest, AlterUserScramCredentialsRequest, BrokerHeartbeatRequest,
    BrokerRegistrationRequest, ControlledShutdownRequest, CreateAclsRequest,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteTopicsRequest,
    DescribeQuorumRequest, ElectLeadersRequest, FetchRequest, FetchSnapshotRequest,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
};

/// How a [`ControllerClient`] retries.
#[derive(Debug, Clone)]
pub struct ControllerClientConfig {
    pub client_id: String,
    /// Bound on one attempt at one voter (connect, or request and answer).
    pub attempt_timeout: Duration,
    /// Bound on the whole request, over every attempt.
    pub deadline: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Default for ControllerClientConfig {
    fn default() -> Self {
        ControllerClientConfig {
            client_id: "weir-controller-client".into(),
            attempt_timeout: Duration::from_secs(5),
            deadline: Duration::from_secs(30),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
        }
    }
}

/// Why a request got no answer from an active controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerClientError {
    #[error("no active controller answered within {deadline:?} (last: {last})")]
    NoController { deadline: Duration, last: String },
    #[error("controller.quorum.voters is empty")]
    NoVoters,
}

/// A request the active controller answers; a response says whether the
/// node that sent it was not the active controller.
pub trait ControllerRequest: Request {
    fn not_controller(resp: &Self::Response) -> bool;
}

fn is_not_controller(code: i16) -> bool {
    code == ErrorCode::NotController.code()
}

impl ControllerRequest for BrokerRegistrationRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for BrokerHeartbeatRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for ControlledShutdownRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for CreateTopicsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.topics.iter().any(|t| is_not_controller(t.error_code))
    }
}

impl ControllerRequest for DeleteTopicsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.responses
            .iter()
            .any(|t| is_not_controller(t.error_code))
    }
}

impl ControllerRequest for CreatePartitionsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.results.iter().any(|t| is_not_controller(t.error_code))
    }
}

impl ControllerRequest for ElectLeadersRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
            || resp
                .replica_election_results
                .iter()
                .flat_map(|t| &t.partition_result)
                .any(|p| is_not_controller(p.error_code))
    }
}

impl ControllerRequest for IncrementalAlterConfigsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.responses
            .iter()
            .any(|r| is_not_controller(r.error_code))
    }
}

impl ControllerRequest for CreateAclsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.results.iter().any(|r| is_not_controller(r.error_code))
    }
}

impl ControllerRequest for DeleteAclsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.filter_results
            .iter()
            .any(|r| is_not_controller(r.error_code))
    }
}

impl ControllerRequest for AlterUserScramCredentialsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.results.iter().any(|r| is_not_controller(r.error_code))
    }
}

impl ControllerRequest for AlterClientQuotasRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        resp.entries.iter().any(|e| is_not_controller(e.error_code))
    }
}

/// Only the top-level code: a partition's NOT_CONTROLLER (its epochs are
/// newer than the controller's image) is that partition's answer.
impl ControllerRequest for AlterPartitionRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for AllocateProducerIdsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for AlterPartitionReassignmentsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for ListPartitionReassignmentsRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

impl ControllerRequest for DescribeQuorumRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
    }
}

/// A fetch of the metadata log goes to the active controller; another
/// voter answers NOT_LEADER_OR_FOLLOWER.
impl ControllerRequest for FetchRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
            || resp
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == ErrorCode::NotLeaderOrFollower.code())
    }
}

impl ControllerRequest for FetchSnapshotRequest {
    fn not_controller(resp: &Self::Response) -> bool {
        is_not_controller(resp.error_code)
            || resp
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == ErrorCode::NotLeaderOrFollower.code())
    }
}

struct State {
    /// The voter that last answered as the active controller.
    leader: Option<u64>,
    /// A connection to the voter of that id.
    conn: Option<(u64, Connection)>,
}

/// Sends controller requests to the active controller. Cloning is not
/// offered: share it behind an `Arc`.
pub struct ControllerClient {
    voters: BTreeMap<u64, String>,
    config: ControllerClientConfig,
    state: Mutex<State>,
}

impl ControllerClient {
    /// A client of the voters `id -> host:port` (their CONTROLLER
    /// listeners).
    pub fn new(voters: BTreeMap<u64, String>, config: ControllerClientConfig) -> Self {
        ControllerClient {
            voters,
            config,
            state: Mutex::new(State {
                leader: None,
                conn: None,
            }),
        }
    }

    /// The voter that last answered as the active controller.
    pub async fn known_controller(&self) -> Option<u64> {
        self.state.lock().await.leader
    }

    /// Sends `req` to the active controller and returns its answer (which
    /// may carry any error but NOT_CONTROLLER).
    pub async fn send<R: ControllerRequest>(
        &self,
        req: &R,
    ) -> Result<R::Response, ControllerClientError> {
        if self.voters.is_empty() {
            return Err(ControllerClientError::NoVoters);
        }
        let mut state = self.state.lock().await;
        let end = Instant::now() + self.config.deadline;
        let mut backoff = self.config.backoff_initial;
        let mut last = String::from("nothing tried");
        loop {
            for id in self.round(state.leader) {
                if Instant::now() >= end {
                    return Err(self.timed_out(last));
                }
                match self.attempt(&mut state, id, req, end).await {
                    Ok(resp) if !R::not_controller(&resp) => {
                        state.leader = Some(id);
                        return Ok(resp);
                    }
                    Ok(_) => {
                        last = format!("node {id} is not the controller");
                        if state.leader == Some(id) {
                            state.leader = None;
                        }
                    }
                    Err(e) => {
                        last = format!("node {id}: {e}");
                        state.conn = None;
                        if state.leader == Some(id) {
                            state.leader = None;
                        }
                    }
                }
            }
            let now = Instant::now();
            if now >= end {
                return Err(self.timed_out(last));
            }
            tokio::time::sleep(backoff.min(end - now)).await;
            backoff = (backoff * 2).min(self.config.backoff_max);
        }
    }

    fn timed_out(&self, last: String) -> ControllerClientError {
        ControllerClientError::NoController {
            deadline: self.config.deadline,
            last,
        }
    }

    /// The voters to try in one round: the known leader first.
    fn round(&self, leader: Option<u64>) -> Vec<u64> {
        let mut ids: Vec<u64> = leader.into_iter().collect();
        ids.extend(self.voters.keys().copied().filter(|id| Some(*id) != leader));
        ids
    }

    async fn attempt<R: ControllerRequest>(
        &self,
        state: &mut State,
        id: u64,
        req: &R,
        end: Instant,
    ) -> Result<R::Response, ClientError> {
        let timeout = self
            .config
            .attempt_timeout
            .min(end.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let conn = match &mut state.conn {
            Some((cid, conn)) if *cid == id => conn,
            slot => {
                *slot = None;
                let addr = self.voters.get(&id).map(String::as_str).unwrap_or_default();
                let conn =
                    Connection::connect_timeout(addr, &self.config.client_id, timeout).await?;
                &mut slot.insert((id, conn)).1
            }
        };
        conn.set_request_timeout(timeout);
        conn.send(req).await
    }
}
