//! Delivery of one transaction's markers: WriteTxnMarkers v1 to the leader
//! of every partition of the transaction (grouped by leader, at its
//! advertised client listener; to this broker's own partitions through the
//! same handler without a connection, as the broker itself, so neither a
//! SASL-only listener nor ACLs stand in the way), retried with back-off for partitions whose leader is unknown or that
//! answer a retriable error, until every partition has its marker.
//!
//! What a partition leader answers decides, as in Kafka's
//! `TransactionMarkerRequestCompletionHandler`:
//!
//! | answer | then |
//! | --- | --- |
//! | NONE | written |
//! | UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION | written (the producer could not have written there) |
//! | INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED | the job stops for good (a newer producer or coordinator wrote there) |
//! | anything else, no answer, a broken connection, a broker without the API | retried |
//!
//! A partition of a topic that no longer exists needs no marker. Where
//! leaders are and what the coordinator still wants are behind two small
//! traits ([`MarkerRoutes`], [`MarkerProgress`]), so the delivery is tested
//! against a stub partition leader.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use weir_client::Connection;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use weir_protocol::messages::{ApiKey, WriteTxnMarkersRequest};
use weir_txn::{MarkerJob, TopicPartition};

use crate::broker::Broker;

/// The only WriteTxnMarkers version sent (Kafka 4 removed v0).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// The client id markers are sent with.
pub const MARKER_CLIENT_ID: &str = "weir-txn-markers";

/// How long connecting to a partition leader, and each request, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a partition's marker goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Its leader and that leader's client listener (`host:port`).
    Leader { node: i32, addr: String },
    /// No leader now (or its broker is not live): retry later.
    Unknown,
    /// The topic or partition is gone: no marker is needed.
    Gone,
}

/// Where partition leaders are.
pub trait MarkerRoutes: Send + Sync {
    fn route(&self, tp: &TopicPartition) -> Route;

    /// This broker, when `node` is this broker: its markers are written
    /// without a connection.
    fn local(&self, _node: i32) -> Option<Arc<Broker>> {
        None
    }
}

/// The coordinator's side of a delivery.
pub trait MarkerProgress: Send + Sync {
    /// Whether the job is still wanted (the coordinator still owns the
    /// transaction at the job's load).
    fn wanted(&self, job: &MarkerJob) -> bool;
    /// `tp` has its marker.
    fn written(&self, job: &MarkerJob, tp: &TopicPartition);
    /// A leader refused the markers for good.
    fn cancelled(&self, job: &MarkerJob);
}

/// Retry delays: doubled after each round without progress, back to
/// `initial` after a round that wrote something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// Kafka's `retry.backoff.ms` start, capped at a second.
    pub const DEFAULT: Backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };
}

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every partition has its marker.
    Written,
    /// A leader refused for good (INVALID_PRODUCER_EPOCH,
    /// TRANSACTION_COORDINATOR_FENCED).
    Cancelled,
    /// The coordinator no longer wants the job (its partition moved).
    Stale,
    /// The broker is shutting down.
    Shutdown,
}

/// What one partition's answer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written,
    Retry,
    Cancel,
}

/// Kafka's handling of a WriteTxnMarkers partition error.
pub fn outcome(code: ErrorCode) -> Outcome {
    match code {
        ErrorCode::None
        | ErrorCode::UnsupportedForMessageFormat
        | ErrorCode::UnsupportedVersion => Outcome::Written,
        ErrorCode::InvalidProducerEpoch | ErrorCode::TransactionCoordinatorFenced => {
            Outcome::Cancel
        }
        _ => Outcome::Retry,
    }
}

/// The WriteTxnMarkers request for `partitions` of `job`.
pub fn request(job: &MarkerJob, partitions: &[TopicPartition]) -> WriteTxnMarkersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            transaction_result: job.result.committed(),
            topics: topics
                .into_iter()
                .map(|(name, partition_indexes)| WritableTxnMarkerTopic {
                    name: name.to_string(),
                    partition_indexes,
                    ..Default::default()
                })
                .collect(),
            coordinator_epoch: job.coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Sends `partitions` of `job` to one leader over `conn`; the answer per
/// partition (partitions the response leaves out are missing), or the
/// transport error.
async fn send(
    conn: &mut Connection,
    job: &MarkerJob,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, ErrorCode>, String> {
    let version = conn
        .version_for(
            ApiKey::WriteTxnMarkers,
            (WRITE_TXN_MARKERS_VERSION, WRITE_TXN_MARKERS_VERSION),
        )
        .map_err(|e| e.to_string())?;
    let resp = conn
        .send_version(&request(job, partitions), version)
        .await
        .map_err(|e| e.to_string())?;
    Ok(answers(job, &resp))
}

/// Acts on a leader's answer for `tp`: `Some(Written)` when its marker is
/// written (reported to `progress`), `Some(Cancelled)` when the job stops
/// for good (reported), `None` to retry.
fn settle(
    job: &MarkerJob,
    tp: &TopicPartition,
    code: Option<ErrorCode>,
    progress: &dyn MarkerProgress,
) -> Option<Delivery> {
    match code.map(outcome) {
        Some(Outcome::Written) => {
            progress.written(job, tp);
            Some(Delivery::Written)
        }
        Some(Outcome::Cancel) => {
            tracing::warn!(
                transactional_id = %job.transactional_id,
                partition = %tp,
                code = ?code,
                "transaction markers refused for good; stopping them"
            );
            progress.cancelled(job);
            Some(Delivery::Cancelled)
        }
        Some(Outcome::Retry) | None => {
            tracing::debug!(
                transactional_id = %job.transactional_id,
                partition = %tp,
                code = ?code,
                "marker not written yet; retrying"
            );
            None
        }
    }
}

/// Writes `partitions` of `job` on this broker through the WriteTxnMarkers
/// handler, as the broker itself; the answer per partition.
async fn send_local(
    broker: &Arc<Broker>,
    job: &MarkerJob,
    partitions: &[TopicPartition],
    shutdown: &watch::Receiver<bool>,
) -> Result<BTreeMap<TopicPartition, ErrorCode>, String> {
    let (host, port) = broker.advertised();
    let ctx = crate::handler::RequestContext {
        broker: broker.clone(),
        api_key: ApiKey::WriteTxnMarkers,
        api_version: WRITE_TXN_MARKERS_VERSION,
        correlation_id: 0,
        client_id: MARKER_CLIENT_ID.to_string(),
        peer: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        local: None,
        session: crate::session::Session::broker_itself(&host, port, broker.config.node_id),
        shutdown: shutdown.clone(),
    };
    let mut reply = crate::handler::write_txn_markers::handle(&ctx, request(job, partitions)).await;
    while let crate::handler::Reply::Later(later) = reply {
        reply = later.await;
    }
    match reply {
        crate::handler::Reply::Body(weir_protocol::messages::ResponseBody::WriteTxnMarkers(
            resp,
        )) => Ok(answers(job, &resp)),
        _ => Err("no WriteTxnMarkers answer".to_string()),
    }
}

/// The answer per partition of `job` in `resp`.
fn answers(
    job: &MarkerJob,
    resp: &weir_protocol::messages::WriteTxnMarkersResponse,
) -> BTreeMap<TopicPartition, ErrorCode> {
    let mut out = BTreeMap::new();
    for m in resp
        .markers
        .iter()
        .filter(|m| m.producer_id == job.producer_id)
    {
        for t in &m.topics {
            for p in &t.partitions {
                out.insert(
                    TopicPartition::new(t.name.clone(), p.partition_index),
                    ErrorCode::from_code_lossy(p.error_code),
                );
            }
        }
    }
    out
}

/// Writes every marker of `job`, retrying as the module doc says, until
/// all are written, the job is cancelled or no longer wanted, or
/// `shutdown`.
pub async fn deliver(
    job: &MarkerJob,
    routes: &dyn MarkerRoutes,
    progress: &dyn MarkerProgress,
    backoff: Backoff,
    mut shutdown: watch::Receiver<bool>,
) -> Delivery {
    let mut remaining: BTreeSet<TopicPartition> = job.partitions.clone();
    let mut conns: HashMap<String, Connection> = HashMap::new();
    let mut delay = backoff.initial;
    loop {
        if *shutdown.borrow() {
            return Delivery::Shutdown;
        }
        if !progress.wanted(job) {
            return Delivery::Stale;
        }
        let mut by_leader: BTreeMap<(i32, String), Vec<TopicPartition>> = BTreeMap::new();
        let mut wrote = false;
        for tp in remaining.clone() {
            match routes.route(&tp) {
                Route::Leader { node, addr } => by_leader.entry((node, addr)).or_default().push(tp),
                Route::Gone => {
                    progress.written(job, &tp);
                    remaining.remove(&tp);
                    wrote = true;
                }
                Route::Unknown => {}
            }
        }
        for ((node, addr), partitions) in by_leader {
            if let Some(me) = routes.local(node) {
                match send_local(&me, job, &partitions, &shutdown).await {
                    Ok(answers) => {
                        for tp in &partitions {
                            match settle(job, tp, answers.get(tp).copied(), progress) {
                                Some(Delivery::Cancelled) => return Delivery::Cancelled,
                                Some(_) => {
                                    remaining.remove(tp);
                                    wrote = true;
                                }
                                None => {}
                            }
                        }
                    }
                    Err(e) => tracing::debug!(node, "WriteTxnMarkers to this broker failed: {e}"),
                }
                continue;
            }
            let conn = match conns.entry(addr.clone()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    match Connection::connect_timeout(&addr, MARKER_CLIENT_ID, CONNECT_TIMEOUT)
                        .await
                    {
                        Ok(mut c) => {
                            c.set_request_timeout(REQUEST_TIMEOUT);
                            v.insert(c)
                        }
                        Err(e) => {
                            tracing::debug!(node, %addr, "cannot reach a partition leader for markers: {e}");
                            continue;
                        }
                    }
                }
            };
            let answers = match send(conn, job, &partitions).await {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(node, %addr, "WriteTxnMarkers failed: {e}");
                    conns.remove(&addr);
                    continue;
                }
            };
            for tp in &partitions {
                match settle(job, tp, answers.get(tp).copied(), progress) {
                    Some(Delivery::Cancelled) => return Delivery::Cancelled,
                    Some(_) => {
                        remaining.remove(tp);
                        wrote = true;
                    }
                    None => {}
                }
            }
        }
        if remaining.is_empty() {
            return Delivery::Written;
        }
        if wrote {
            delay = backoff.initial;
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return Delivery::Shutdown,
        }
        if !wrote {
            delay = (delay * 2).min(backoff.max);
        }
    }
}

/// Partition leaders from the broker's cluster view.
pub struct ClusterRoutes(pub Arc<Broker>);

impl MarkerRoutes for ClusterRoutes {
    fn local(&self, node: i32) -> Option<Arc<Broker>> {
        (node == self.0.config.node_id).then(|| self.0.clone())
    }

    fn route(&self, tp: &TopicPartition) -> Route {
        let snap = self.0.cluster();
        let Some(topic) = snap.topic(&tp.topic) else {
            return Route::Gone;
        };
        let Some(p) = usize::try_from(tp.partition)
            .ok()
            .and_then(|i| topic.partitions.get(i))
        else {
            return Route::Gone;
        };
        match snap.broker(p.leader) {
            Some(n) if p.leader >= 0 => Route::Leader {
                node: n.id,
                addr: format!("{}:{}", n.host, n.port),
            },
            _ => Route::Unknown,
        }
    }
}

/// The broker's coordinator.
pub struct CoordinatorProgress(pub Arc<Broker>);

impl MarkerProgress for CoordinatorProgress {
    fn wanted(&self, job: &MarkerJob) -> bool {
        self.0
            .transactions()
            .is_some_and(|t| t.lock().markers_wanted(job))
    }

    fn written(&self, job: &MarkerJob, tp: &TopicPartition) {
        if let Some(t) = self.0.transactions() {
            t.lock().marker_written(job, tp);
        }
    }

    fn cancelled(&self, job: &MarkerJob) {
        if let Some(t) = self.0.transactions() {
            t.lock().markers_cancelled(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_answers_as_kafka_handles_them() {
        use ErrorCode::*;
        for (code, want) in [
            (None, Outcome::Written),
            (UnsupportedForMessageFormat, Outcome::Written),
            (UnsupportedVersion, Outcome::Written),
            (InvalidProducerEpoch, Outcome::Cancel),
            (TransactionCoordinatorFenced, Outcome::Cancel),
            (NotLeaderOrFollower, Outcome::Retry),
            (UnknownTopicOrPartition, Outcome::Retry),
            (NotEnoughReplicas, Outcome::Retry),
            (NotEnoughReplicasAfterAppend, Outcome::Retry),
            (RequestTimedOut, Outcome::Retry),
            (KafkaStorageError, Outcome::Retry),
            (CorruptMessage, Outcome::Retry),
        ] {
            assert_eq!(outcome(code), want, "{code:?}");
        }
    }
}
