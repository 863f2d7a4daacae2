//! Fetch: reads below the high watermark (read_committed: below the last
//! stable offset, with the aborted transactions overlapping what it
//! returns), long-polls until `min_bytes` are available or `max_wait_ms`
//! passes (woken by appends to the request's partitions, markers included,
//! see [`crate::wakeups`]), and hands file regions to the connection, which
//! sends them with sendfile.
//!
//! Fetch sessions (KIP-227) are not kept: every response carries session id
//! 0, which tells clients to send full fetch requests.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use weir_acl::{Operation, ResourceType};
use weir_protocol::codec::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::fetch_request::FetchTopic;
use weir_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use weir_protocol::messages::{FetchRequest, FetchResponse, ResponseBody};
use weir_storage::{FileRegion, Log, StorageError, TopicPartition};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::cluster::{ClusterSnapshot, TopicView};
use crate::codes;
use crate::connection::Marker;
use crate::replication::state::IsrChange;

/// `fetch.max.bytes`-style cap on one response, whatever the client asks.
const BROKER_FETCH_MAX_BYTES: usize = 57_671_680;
/// Cap on long-poll waits, whatever the client asks.
const MAX_WAIT_CAP_MS: i64 = 30_000;

/// The first version with the leader in a partition's `current_leader`.
const CURRENT_LEADER_VERSION: i16 = 12;
/// The first version with the leaders' `node_endpoints`.
const NODE_ENDPOINTS_VERSION: i16 = 16;

struct Pass {
    /// ISR expansions a follower's fetch made due (leader side).
    isr_changes: Vec<IsrChange>,
    topics: Vec<FetchableTopicResponse>,
    node_endpoints: Vec<NodeEndpoint>,
    files: Vec<(Marker, Vec<FileRegion>)>,
    bytes: usize,
    errors: bool,
}

/// The broker id of a follower's fetch, -1 for a consumer's.
fn replica_id(req: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        req.replica_state.replica_id
    } else {
        req.replica_id
    }
}

/// Which of the request's topics (by position) the client may not fetch:
/// a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each
/// topic (Kafka answers both refusals with TOPIC_AUTHORIZATION_FAILED). A
/// topic id this broker does not know stays UNKNOWN_TOPIC_ID, as in Kafka.
/// Empty (no allocation) without an authorizer.
fn refused_topics(ctx: &RequestContext, req: &FetchRequest, version: i16) -> Vec<bool> {
    let b = &ctx.broker;
    if !b.acls.enabled() {
        return Vec::new();
    }
    if replica_id(req, version) >= 0 {
        let refused = !ctx.authorize_cluster(Operation::ClusterAction);
        return vec![refused; req.topics.len()];
    }
    let snap = b.cluster();
    req.topics
        .iter()
        .map(|ft| {
            let name = match request_topic(&snap, ft, version) {
                Some(t) => t.name.as_str(),
                None if version >= 13 => return false,
                None => ft.topic.as_str(),
            };
            !ctx.authorize(Operation::Read, ResourceType::Topic, name)
        })
        .collect()
}

/// One read of every requested partition; `listener` is the client's, for
/// the leaders' endpoints in `node_endpoints`.
fn read_pass(
    b: &Broker,
    req: &FetchRequest,
    version: i16,
    refused: &[bool],
    listener: &crate::session::ListenerInfo,
) -> Pass {
    let replica = replica_id(req, version);
    let from_follower = replica >= 0;
    let mut remaining = if version >= 3 {
        (req.max_bytes.max(0) as usize).min(BROKER_FETCH_MAX_BYTES)
    } else {
        BROKER_FETCH_MAX_BYTES
    };
    let read_committed = req.isolation_level == 1;
    let snap = b.cluster();
    let node_id = b.config.node_id;
    let mut named_leaders = Vec::new();
    let mut pass = Pass {
        isr_changes: Vec::new(),
        topics: Vec::with_capacity(req.topics.len()),
        node_endpoints: Vec::new(),
        files: Vec::new(),
        bytes: 0,
        errors: false,
    };
    for (i, ft) in req.topics.iter().enumerate() {
        let meta = request_topic(&snap, ft, version);
        let topic_refused = refused.get(i).copied().unwrap_or(false);
        let mut parts = Vec::with_capacity(ft.partitions.len());
        for fp in &ft.partitions {
            let mut pd = PartitionData {
                partition_index: fp.partition,
                error_code: ErrorCode::None.code(),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                aborted_transactions: if read_committed { Some(vec![]) } else { None },
                preferred_read_replica: -1,
                records: Some(Bytes::new()),
                ..Default::default()
            };
            if topic_refused {
                pd.error_code = ErrorCode::TopicAuthorizationFailed.code();
                pass.errors = true;
                parts.push(pd);
                continue;
            }
            let leadership = meta.map(|t| {
                snap.check_leader(node_id, &t.name, fp.partition, fp.current_leader_epoch)
            });
            if let Some(Err(refused)) = leadership
                && refused.code != ErrorCode::UnknownTopicOrPartition
            {
                pd.error_code = refused.code.code();
                if version >= CURRENT_LEADER_VERSION && refused.leader_id >= 0 {
                    pd.current_leader = LeaderIdAndEpoch {
                        leader_id: refused.leader_id,
                        leader_epoch: refused.leader_epoch,
                        ..Default::default()
                    };
                    named_leaders.push(refused.leader_id);
                }
                pass.errors = true;
                parts.push(pd);
                continue;
            }
            let log = meta
                .filter(|_| matches!(leadership, Some(Ok(_))))
                .and_then(|t| b.replicas.log(&t.name, fp.partition));
            let Some(log) = log else {
                pd.error_code = match meta {
                    None if version >= 13 => ErrorCode::UnknownTopicId,
                    None => ErrorCode::UnknownTopicOrPartition,
                    Some(t) => b
                        .replicas
                        .missing_log_error(b.topic(&t.name).as_ref(), fp.partition),
                }
                .code();
                pass.errors = true;
                parts.push(pd);
                continue;
            };
            // A follower reads up to the log end offset; its fetch offset is
            // its log end offset, which may move the high watermark.
            let mut bound = log.high_watermark();
            if from_follower {
                if !b.replicas.has_follower(log.topic_partition(), replica) {
                    pd.error_code = ErrorCode::NotLeaderOrFollower.code();
                    pass.errors = true;
                    parts.push(pd);
                    continue;
                }
                // A divergent follower truncates first; its fetch offset is
                // not its position in this leader's log, so it is not
                // recorded (as Kafka).
                if let Some(diverging) =
                    diverging_epoch(&log, fp.last_fetched_epoch, fp.fetch_offset)
                {
                    pd.high_watermark = log.high_watermark();
                    pd.log_start_offset = log.log_start_offset();
                    pd.diverging_epoch = diverging;
                    parts.push(pd);
                    continue;
                }
                let live = |id: i32| snap.may_join_isr(id);
                match b.replicas.record_follower_fetch(
                    &log,
                    replica,
                    fp.fetch_offset,
                    b.now_ms(),
                    live,
                ) {
                    Ok(change) => pass.isr_changes.extend(change),
                    Err(code) => {
                        pd.error_code = code.code();
                        pass.errors = true;
                        parts.push(pd);
                        continue;
                    }
                }
                bound = log.log_end_offset();
            }
            let hw = log.high_watermark();
            let lso = b.replicas.last_stable_offset(&log);
            pd.high_watermark = hw;
            pd.last_stable_offset = lso;
            pd.log_start_offset = log.log_start_offset();
            // A read_committed consumer reads only decided transactions.
            if read_committed && !from_follower {
                bound = lso;
            }
            let limit = (fp.partition_max_bytes.max(0) as usize).min(remaining);
            let min_one = pass.bytes == 0;
            if fp.fetch_offset == bound && fp.fetch_offset >= pd.log_start_offset {
                parts.push(pd);
                continue;
            }
            if fp.fetch_offset > bound && fp.fetch_offset <= log.log_end_offset() {
                // between HW and LEO: nothing visible yet
                parts.push(pd);
                continue;
            }
            match log.read(fp.fetch_offset, limit, bound, min_one) {
                Ok(r) => {
                    pd.log_start_offset = r.log_start_offset;
                    if read_committed && r.total_bytes > 0 {
                        // Kafka's bound: the offset after the last batch
                        // returned.
                        pd.aborted_transactions = Some(
                            log.aborted_txns(fp.fetch_offset, r.end_offset)
                                .into_iter()
                                .map(|t| AbortedTransaction {
                                    producer_id: t.producer_id,
                                    first_offset: t.first_offset,
                                    ..Default::default()
                                })
                                .collect(),
                        );
                    }
                    if r.total_bytes > 0 {
                        remaining = remaining.saturating_sub(r.total_bytes);
                        pass.bytes += r.total_bytes;
                        if r.regions.iter().all(|rg| rg.raw_fd().is_some()) {
                            let marker: Marker = rand::random();
                            pd.records = Some(Bytes::copy_from_slice(&marker));
                            pass.files.push((marker, r.regions));
                        } else {
                            let mut data = Vec::with_capacity(r.total_bytes);
                            for rg in &r.regions {
                                match rg.read_to_vec() {
                                    Ok(v) => data.extend_from_slice(&v),
                                    Err(e) => {
                                        tracing::warn!("fetch read failed: {e}");
                                        pd.error_code = ErrorCode::KafkaStorageError.code();
                                        data.clear();
                                        break;
                                    }
                                }
                            }
                            pd.records = Some(Bytes::from(data));
                        }
                    }
                }
                Err(e @ StorageError::OffsetOutOfRange { .. }) => {
                    tracing::debug!("fetch: {e}");
                    pd.error_code = ErrorCode::OffsetOutOfRange.code();
                    pass.errors = true;
                }
                Err(e) => {
                    tracing::warn!("fetch failed: {e}");
                    pd.error_code = codes::from_storage(&e).code();
                    pass.errors = true;
                }
            }
            parts.push(pd);
        }
        pass.topics.push(FetchableTopicResponse {
            topic: ft.topic.clone(),
            topic_id: if version >= 13 {
                ft.topic_id
            } else {
                Uuid::ZERO
            },
            partitions: parts,
            ..Default::default()
        });
    }
    if version >= NODE_ENDPOINTS_VERSION {
        pass.node_endpoints = snap
            .nodes(named_leaders)
            .into_iter()
            // each leader at its endpoint of the client's listener, as
            // Kafka answers; one without that listener is left out
            .filter_map(|n| {
                let (host, port) = snap.client_endpoint(n, node_id, listener)?;
                Some(NodeEndpoint {
                    node_id: n.id,
                    host,
                    port: i32::from(port),
                    rack: n.rack.clone(),
                    ..Default::default()
                })
            })
            .collect();
    }
    pass
}

/// Where a follower's log diverges from this leader's (KIP-320): its last
/// fetched epoch ends here earlier than its fetch offset, or is unknown
/// here. None when the follower may go on from its fetch offset.
fn diverging_epoch(
    log: &Log,
    last_fetched_epoch: i32,
    fetch_offset: i64,
) -> Option<EpochEndOffset> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end_offset) = log.end_offset_for_epoch(last_fetched_epoch);
    if epoch < 0 || end_offset < 0 {
        return None;
    }
    (epoch < last_fetched_epoch || end_offset < fetch_offset).then(|| EpochEndOffset {
        epoch,
        end_offset,
        ..Default::default()
    })
}

/// A request topic as the cluster knows it: by id from v13, else by name.
fn request_topic<'a>(
    snap: &'a ClusterSnapshot,
    ft: &FetchTopic,
    version: i16,
) -> Option<&'a TopicView> {
    if version >= 13 {
        snap.topic_by_id(&ft.topic_id.0)
    } else {
        snap.topic(&ft.topic)
    }
}

/// The partitions of a request, by topic name (unknown topics are left
/// out).
fn partitions(b: &Broker, req: &FetchRequest, version: i16) -> Vec<TopicPartition> {
    let snap = b.cluster();
    let mut out = Vec::new();
    for ft in &req.topics {
        if let Some(t) = request_topic(&snap, ft, version) {
            out.extend(
                ft.partitions
                    .iter()
                    .map(|fp| TopicPartition::new(t.name.clone(), fp.partition)),
            );
        }
    }
    out
}

pub async fn handle(ctx: &RequestContext, req: FetchRequest) -> Reply {
    let b = &ctx.broker;
    let version = ctx.api_version;
    if req.session_id != 0 {
        return Reply::Body(ResponseBody::Fetch(FetchResponse {
            error_code: ErrorCode::FetchSessionIdNotFound.code(),
            session_id: 0,
            ..Default::default()
        }));
    }
    let max_wait = (req.max_wait_ms as i64).clamp(0, MAX_WAIT_CAP_MS);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(max_wait as u64);
    let min_bytes = req.min_bytes.max(0) as usize;
    // Registered under the request's partitions once the first pass finds
    // too little, and before the pass that decides to wait: no append made
    // after that pass's reads goes unnoticed.
    let mut registration = None;
    let refused = refused_topics(ctx, &req, version);
    let pass = loop {
        let mut pass = read_pass(b, &req, version, &refused, &ctx.session.listener);
        for change in pass.isr_changes.drain(..) {
            crate::replication::send_isr_change(b, change);
        }
        if pass.bytes >= min_bytes || pass.errors || tokio::time::Instant::now() >= deadline {
            break pass;
        }
        // release file handles while waiting
        drop(pass);
        let Some(reg) = &registration else {
            registration = Some(b.replicas.wakeups().register(partitions(b, &req, version)));
            continue;
        };
        let mut shutdown = ctx.shutdown.clone();
        let _parked = b.metrics.fetch_parked();
        let woken = tokio::select! {
            r = tokio::time::timeout_at(deadline, reg.notified()) => r.is_ok(),
            _ = shutdown.wait_for(|stop| *stop) => false,
        };
        if !woken {
            let mut pass = read_pass(b, &req, version, &refused, &ctx.session.listener);
            for change in pass.isr_changes.drain(..) {
                crate::replication::send_isr_change(b, change);
            }
            break pass;
        }
        b.metrics.fetch_wakeups.fetch_add(1, Ordering::Relaxed);
    };
    if replica_id(&req, version) >= 0 {
        b.replicas
            .replication_counters()
            .record_bytes_out(pass.bytes);
    }
    let body = ResponseBody::Fetch(FetchResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::None.code(),
        session_id: 0,
        responses: pass.topics,
        node_endpoints: pass.node_endpoints,
        ..Default::default()
    });
    if pass.files.is_empty() {
        Reply::Body(body)
    } else {
        Reply::WithFiles {
            body,
            files: pass.files,
        }
    }
}
