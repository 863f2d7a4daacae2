//! Produce: validation, idempotent sequence checks, transactions (a
//! producer's transactional batch opens its transaction on the partition,
//! see [`crate::producer_state`]), append, acks.
//!
//! Kafka 4's server-side verification that a transaction added the
//! partition before writing to it (KIP-890 part 1) is not done: a
//! transactional batch is accepted from a producer with a valid epoch and
//! sequence whether or not its coordinator knows the partition.

use std::sync::Arc;

use bytes::Bytes;
use weir_acl::{Operation, ResourceType};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use weir_protocol::messages::{ProduceRequest, ProduceResponse, ResponseBody};
use weir_protocol::records::BatchHeader;
use weir_storage::{Log, StorageError};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::codes;
use crate::producer_state::{BatchMeta, SeqCheck, last_seq};
use crate::replica_manager::AppendRole;

/// The outcome for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionResult {
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
    pub base_offset: i64,
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// The records refused one by one, as (index in the batch, message):
    /// answered from Produce v8 (`record_errors`), so that a client fails
    /// only those and may resend the others.
    pub record_errors: Vec<(i32, String)>,
    /// The offset after the appended records (what acks=all waits for the
    /// high watermark to reach); -1 on error.
    pub end_offset: i64,
    /// Appended (or found already appended) as the leader of a replicated
    /// partition in this leader epoch: acks=all waits for its in-sync
    /// replicas. Decided with the append, never from a later look at the
    /// leadership (which may have moved on by then).
    pub replicated_in: Option<i32>,
}

impl PartitionResult {
    fn error(code: ErrorCode, msg: impl Into<String>) -> Self {
        PartitionResult {
            error_code: code,
            error_message: Some(msg.into()),
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
            end_offset: -1,
            replicated_in: None,
        }
    }

    /// A refused append: the error's code and message, and each record
    /// refused one by one.
    fn storage_error(e: &StorageError) -> Self {
        let mut r = PartitionResult::error(codes::from_storage(e), e.to_string());
        if let StorageError::RejectedRecords { records, .. } = e {
            r.record_errors = records
                .iter()
                .map(|rec| {
                    (
                        i32::try_from(rec.batch_index).unwrap_or(i32::MAX),
                        rec.message.clone(),
                    )
                })
                .collect();
        }
        r
    }
}

/// The idempotence fields of the only batch of an idempotent produce.
struct IdempotentBatch {
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
    last_seq: i32,
    max_timestamp: i64,
    /// A transactional producer's batch.
    transactional: bool,
}

/// Whether the records hold a transactional batch (headers only; malformed
/// records are refused later, per partition).
pub fn has_transactional_batch(records: &[u8]) -> bool {
    let mut rest = records;
    while let Ok(h) = BatchHeader::parse(rest) {
        if h.is_transactional() {
            return true;
        }
        match rest.get(h.total_size()..) {
            Some(next) if !next.is_empty() => rest = next,
            _ => break,
        }
    }
    false
}

/// Whether the first batch of the records carries a producer id (headers
/// only; malformed records are refused by the append).
fn has_producer_id(records: &[u8]) -> bool {
    BatchHeader::parse(records).is_ok_and(|h| h.producer_id >= 0)
}

/// Reads batch headers: returns the idempotence info when the records are a
/// single batch with a producer id, an error for malformed input and for
/// what a client may not write (Kafka's `LogValidator`): a control batch,
/// a producer id without a sequence, a transactional batch without a
/// producer id.
fn inspect(records: &[u8]) -> Result<Option<IdempotentBatch>, PartitionResult> {
    let mut rest = records;
    let mut batches = 0;
    let mut idem = None;
    while !rest.is_empty() {
        let h = BatchHeader::parse(rest).map_err(|e| {
            PartitionResult::error(
                ErrorCode::CorruptMessage,
                format!("invalid record batch: {e}"),
            )
        })?;
        let Some((_, next)) = rest.split_at_checked(h.total_size()) else {
            return Err(PartitionResult::error(
                ErrorCode::CorruptMessage,
                "record batch is truncated",
            ));
        };
        batches += 1;
        let refused = if h.is_control() {
            Some("clients are not allowed to write control records".to_string())
        } else if h.producer_id >= 0 && h.base_sequence < 0 {
            Some(format!(
                "invalid sequence number {} in record batch with producer id {}",
                h.base_sequence, h.producer_id
            ))
        } else if h.is_transactional() && h.producer_id < 0 {
            Some("transactional records must have a producer id".to_string())
        } else {
            None
        };
        if let Some(msg) = refused {
            return Err(PartitionResult::error(ErrorCode::InvalidRecord, msg));
        }
        if h.producer_id >= 0 {
            idem = Some(IdempotentBatch {
                producer_id: h.producer_id,
                epoch: h.producer_epoch,
                first_seq: h.base_sequence,
                last_seq: last_seq(h.base_sequence, h.last_offset_delta.saturating_add(1)),
                max_timestamp: h.max_timestamp,
                transactional: h.is_transactional(),
            });
        }
        rest = next;
    }
    if batches == 0 {
        return Err(PartitionResult::error(
            ErrorCode::InvalidRecord,
            "no record batch",
        ));
    }
    if idem.is_some() && batches > 1 {
        return Err(PartitionResult::error(
            ErrorCode::InvalidRecord,
            "an idempotent produce must contain exactly one record batch",
        ));
    }
    Ok(idem)
}

/// A sync the flush policy (`flush.messages`) asks for before an append may
/// be acknowledged: every record of `log` below `end_offset`.
pub struct PendingFlush {
    pub log: Arc<Log>,
    pub end_offset: i64,
    pub now_ms: i64,
}

impl PendingFlush {
    /// Starts the sync on a blocking thread (group-committed with any other
    /// sync of the same partition).
    pub fn start(self) -> tokio::task::JoinHandle<Result<(), weir_storage::StorageError>> {
        tokio::task::spawn_blocking(move || self.log.flush_through(self.end_offset, self.now_ms))
    }
}

/// Appends one partition's records, without the sync the flush policy may
/// ask for: that comes back as a [`PendingFlush`] to run before answering.
/// Pure of wire types so tests can call it.
pub fn append_partition(
    b: &Broker,
    topic: &str,
    partition: i32,
    records: Option<&Bytes>,
) -> (PartitionResult, Option<PendingFlush>) {
    let replicas = &b.replicas;
    let Some(log) = replicas.log(topic, partition) else {
        return (
            PartitionResult::error(
                replicas.missing_log_error(b.topic(topic).as_ref(), partition),
                format!("unknown topic or partition {topic}-{partition}"),
            ),
            None,
        );
    };
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return (
            PartitionResult::error(ErrorCode::InvalidRecord, "no records"),
            None,
        );
    };
    let idem = match inspect(records) {
        Ok(i) => i,
        Err(e) => return (e, None),
    };
    let now = b.now_ms();
    let mut flush_end = None;
    // The request's bytes go to the segment file as they are (no copy);
    // a leader with followers stamps its leader epoch on each batch, and
    // appends only while it still leads in that epoch.
    let role = replicas.append_role(log.topic_partition());
    if role == AppendRole::NotLeader {
        // Not even a retried duplicate is answered: its records may not be
        // replicated, and this broker no longer waits on that.
        return (
            PartitionResult::error(
                ErrorCode::NotLeaderOrFollower,
                format!("this broker does not lead {topic}-{partition}"),
            ),
            None,
        );
    }
    let epoch = role.stamp();
    let mut do_append = |buf: &[u8]| {
        let appended = replicas.append_in_role(log.topic_partition(), role, |stamp| match stamp {
            Some(epoch) => log.append_shared_as_leader(buf, now, epoch),
            None => log.append_shared(buf, now),
        });
        match appended {
            Some(Ok((info, flush))) => {
                replicas.advance_high_watermark(&log);
                replicas.notify_append(&log);
                flush_end = flush;
                Ok(info)
            }
            Some(Err(e)) => Err(PartitionResult::storage_error(&e)),
            None => Err(PartitionResult::error(
                ErrorCode::NotLeaderOrFollower,
                format!(
                    "the leadership of {} moved before the append",
                    log.topic_partition()
                ),
            )),
        }
    };
    let mut dup_flush = None;
    let result = match idem {
        None => do_append(records).map(|i| {
            (
                i.base_offset,
                i.log_append_time,
                i.log_start_offset,
                i.last_offset + 1,
            )
        }),
        Some(ib) => replicas.with_producers(&log, |state| {
            let check = state.check(ib.producer_id, ib.epoch, ib.first_seq, ib.last_seq);
            tracing::debug!(
                partition = %log.topic_partition(),
                producer = ib.producer_id,
                epoch = ib.epoch,
                seq = ?(ib.first_seq, ib.last_seq),
                leo = log.log_end_offset(),
                leader_epoch = ?epoch,
                ?check,
                "idempotent append"
            );
            match check {
                SeqCheck::Append => {
                    if let Err(first) = state.check_txn(ib.producer_id, ib.transactional) {
                        return Err(PartitionResult::error(
                            ErrorCode::InvalidTxnState,
                            format!(
                                "expected a transactional write from producer {}: its transaction is open since offset {first}",
                                ib.producer_id
                            ),
                        ));
                    }
                    let info = do_append(records)?;
                    state.record_data(
                        ib.producer_id,
                        ib.epoch,
                        Some(BatchMeta {
                            first_seq: ib.first_seq,
                            last_seq: ib.last_seq,
                            first_offset: info.base_offset,
                            last_offset: info.last_offset,
                            timestamp: info.log_append_time.unwrap_or(ib.max_timestamp),
                        }),
                        ib.transactional,
                    );
                    Ok((
                        info.base_offset,
                        info.log_append_time,
                        info.log_start_offset,
                        info.last_offset + 1,
                    ))
                }
                SeqCheck::Duplicate(m) => {
                    // The original append's sync may have failed (its answer
                    // was then an error): a retry is acknowledged only once
                    // the duplicate's records are synced too.
                    if log.config().flush_messages != u64::MAX {
                        dup_flush = Some(m.last_offset + 1);
                    }
                    Ok((
                        m.first_offset,
                        None,
                        log.log_start_offset(),
                        m.last_offset + 1,
                    ))
                }
                SeqCheck::OutOfOrder { expected, got } => Err(PartitionResult::error(
                    ErrorCode::OutOfOrderSequenceNumber,
                    format!(
                        "out of order sequence number for producer {}: expected {expected}, got {got}",
                        ib.producer_id
                    ),
                )),
                SeqCheck::Fenced { current, got } => Err(PartitionResult::error(
                    ErrorCode::InvalidProducerEpoch,
                    format!("producer epoch {got} is older than the current epoch {current}"),
                )),
            }
        }),
    };
    match result {
        Ok((base_offset, append_time, log_start_offset, end_offset)) => (
            PartitionResult {
                error_code: ErrorCode::None,
                error_message: None,
                base_offset,
                log_append_time: append_time.unwrap_or(-1),
                log_start_offset,
                record_errors: Vec::new(),
                end_offset,
                replicated_in: epoch,
            },
            flush_end.or(dup_flush).map(|end_offset| PendingFlush {
                log,
                end_offset,
                now_ms: now,
            }),
        ),
        Err(e) => (e, None),
    }
}

/// The topic's `min.insync.replicas` (1 for an unknown topic): an acks=all
/// append is refused (NOT_ENOUGH_REPLICAS) while the ISR is smaller.
pub fn min_insync_replicas(b: &Broker, topic: &str) -> i64 {
    let Some(t) = b.topic(topic) else {
        return 1;
    };
    let Some(def) = crate::configdef::topic_def("min.insync.replicas") else {
        return 1;
    };
    let r = crate::topic_config::resolve(&b.effective_config(), &t.configs, def);
    r.value.as_deref().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// The first version with the new leader in `current_leader` and
/// `node_endpoints` (KIP-951).
const CURRENT_LEADER_VERSION: i16 = 10;

pub async fn handle(ctx: &RequestContext, req: ProduceRequest) -> Reply {
    let b = &ctx.broker;
    let snap = b.cluster();
    let node_id = b.config.node_id;
    let with_leader = ctx.api_version >= CURRENT_LEADER_VERSION;
    // leaders named in `current_leader`, for `node_endpoints`
    let mut named_leaders = Vec::new();
    let acks = req.acks;
    let global_error = if !matches!(acks, -1..=1) {
        Some((
            ErrorCode::InvalidRequiredAcks,
            "acks must be -1, 0 or 1".to_string(),
        ))
    } else if req.topic_data.iter().any(|t| {
        t.partition_data
            .iter()
            .any(|p| p.records.as_deref().is_some_and(has_transactional_batch))
    }) && !req
        .transactional_id
        .as_deref()
        .is_some_and(|id| ctx.authorize(Operation::Write, ResourceType::TransactionalId, id))
    {
        // Kafka refuses transactional records sent without the
        // transactional id they are authorized by, or by a client that may
        // not WRITE that id.
        Some((
            ErrorCode::TransactionalIdAuthorizationFailed,
            match &req.transactional_id {
                None => "transactional records without a transactional id".to_string(),
                Some(id) => format!("not authorized to WRITE transactional id {id}"),
            },
        ))
    } else {
        None
    };
    let min_isr_of = |topic: &str| min_insync_replicas(b, topic);
    let min_isr_error = |topic: &str, partition: i32| -> Option<PartitionResult> {
        if acks != -1 {
            return None;
        }
        let min_isr = min_isr_of(topic);
        let isr = snap
            .partition(topic, partition)
            .map_or(1, |p| i64::try_from(p.isr.len()).unwrap_or(i64::MAX));
        (min_isr > isr).then(|| {
            PartitionResult::error(
                ErrorCode::NotEnoughReplicas,
                format!("in-sync replicas ({isr}) are fewer than min.insync.replicas ({min_isr})"),
            )
        })
    };
    let mut any_error = false;
    let mut responses = Vec::with_capacity(req.topic_data.len());
    // Syncs asked for by the flush policy, with the (topic, partition) slot
    // of the response they belong to: run together after all appends.
    let mut flushes = Vec::new();
    // acks=all appends to partitions with followers: the answer waits for
    // the high watermark to pass them.
    let mut replication_waits = Vec::new();
    for topic in req.topic_data {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        // before the topic's existence, so that a client without WRITE
        // learns nothing of it (Kafka's order)
        let writable = ctx.authorize(Operation::Write, ResourceType::Topic, &topic.name);
        for p in topic.partition_data {
            let mut current_leader = LeaderIdAndEpoch::default();
            let leadership = snap.check_leader(node_id, &topic.name, p.index, -1);
            let r = if let Some((code, msg)) = &global_error {
                PartitionResult::error(*code, msg.clone())
            } else if !writable {
                PartitionResult::error(
                    ErrorCode::TopicAuthorizationFailed,
                    format!("not authorized to WRITE topic {}", topic.name),
                )
            } else if let Some((code, msg)) =
                crate::groups::internal_produce_error(&topic.name, &ctx.client_id)
            {
                PartitionResult::error(code, msg)
            } else if let Err(refused) = leadership {
                if with_leader && refused.leader_id >= 0 {
                    current_leader.leader_id = refused.leader_id;
                    current_leader.leader_epoch = refused.leader_epoch;
                    named_leaders.push(refused.leader_id);
                }
                let msg = if refused.code == ErrorCode::UnknownTopicOrPartition {
                    format!("unknown topic or partition {}-{}", topic.name, p.index)
                } else {
                    format!(
                        "this broker (node {node_id}) does not lead {}-{}",
                        topic.name, p.index
                    )
                };
                PartitionResult::error(refused.code, msg)
            } else if let Some(e) = min_isr_error(&topic.name, p.index) {
                e
            } else if let Ok(epoch) = leadership
                && !b.replicas.leads(
                    &weir_storage::TopicPartition::new(topic.name.clone(), p.index),
                    epoch,
                )
            {
                // Named leader by the metadata, not yet taken up: retriable.
                PartitionResult::error(
                    ErrorCode::NotLeaderOrFollower,
                    format!(
                        "this broker (node {node_id}) is taking up the leadership of {}-{}",
                        topic.name, p.index
                    ),
                )
            } else {
                // An idempotent batch needs the partition's producer state:
                // loaded here, off the async workers, the first time.
                if p.records.as_deref().is_some_and(has_producer_id)
                    && let Some(log) = b.replicas.log(&topic.name, p.index)
                {
                    b.replicas.load_producers_ahead(&log).await;
                }
                let (r, flush) = append_partition(b, &topic.name, p.index, p.records.as_ref());
                if let Some(f) = flush {
                    flushes.push(((responses.len(), partitions.len()), f));
                }
                let tp = weir_storage::TopicPartition::new(topic.name.clone(), p.index);
                if acks == -1 && r.error_code.is_ok() && r.replicated_in.is_some() {
                    let min_isr = usize::try_from(min_isr_of(&topic.name)).unwrap_or(1);
                    replication_waits.push((
                        (responses.len(), partitions.len()),
                        tp,
                        r.end_offset,
                        min_isr,
                        r.replicated_in,
                    ));
                }
                r
            };
            if !r.error_code.is_ok() {
                any_error = true;
                tracing::debug!(topic = %topic.name, partition = p.index, code = r.error_code.code(), "produce failed: {:?}", r.error_message);
            }
            partitions.push(PartitionProduceResponse {
                index: p.index,
                error_code: r.error_code.code(),
                base_offset: r.base_offset,
                log_append_time_ms: r.log_append_time,
                log_start_offset: r.log_start_offset,
                error_message: r.error_message,
                record_errors: r
                    .record_errors
                    .into_iter()
                    .map(|(batch_index, message)| BatchIndexAndErrorMessage {
                        batch_index,
                        batch_index_error_message: Some(message),
                        ..Default::default()
                    })
                    .collect(),
                current_leader,
                ..Default::default()
            });
        }
        responses.push(TopicProduceResponse {
            name: topic.name,
            partition_responses: partitions,
            ..Default::default()
        });
    }
    let node_endpoints: Vec<NodeEndpoint> = snap
        .nodes(named_leaders)
        .into_iter()
        .filter_map(|n| {
            let (host, port) = ctx.node_address(&snap, n)?;
            Some(NodeEndpoint {
                node_id: n.id,
                host,
                port,
                rack: n.rack.clone(),
                ..Default::default()
            })
        })
        .collect();
    if flushes.is_empty() && replication_waits.is_empty() {
        return answer(acks, any_error, responses, node_endpoints);
    }
    let timeout_ms = u64::try_from(req.timeout_ms).unwrap_or(0);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
    let broker = Arc::clone(b);
    // The partitions of one request sync concurrently, each on a blocking
    // thread, started now; the answer waits for all of them, while the
    // connection goes on with the next Produce request.
    let started: Vec<_> = flushes
        .into_iter()
        .map(|(slot, f)| (slot, f.start()))
        .collect();
    Reply::Later(Box::pin(async move {
        let mut any_error = any_error;
        let mut responses = responses;
        for ((t, p), task) in started {
            let failed = match task.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some((codes::from_storage(&e), e.to_string())),
                Err(e) => Some((ErrorCode::KafkaStorageError, format!("flush failed: {e}"))),
            };
            if let Some((code, msg)) = failed
                && let Some(topic) = responses.get_mut(t)
                && let Some(slot) = topic.partition_responses.get_mut(p)
            {
                tracing::warn!(topic = %topic.name, partition = slot.index, "flush failed: {msg}");
                slot.error_code = code.code();
                slot.error_message = Some(msg);
                slot.base_offset = -1;
                slot.log_append_time_ms = -1;
                slot.log_start_offset = -1;
                any_error = true;
            }
        }
        // One deadline for all: waiting on them in turn takes no longer
        // than waiting on them together.
        for ((t, p), tp, end, min_isr, epoch) in replication_waits {
            let code = broker
                .replicas
                .wait_for_replication_in(&tp, end, min_isr, epoch, deadline)
                .await;
            tracing::debug!(partition = %tp, end, ?code, "acks=all wait ended");
            if code.is_ok() {
                continue;
            }
            if let Some(topic) = responses.get_mut(t)
                && let Some(slot) = topic.partition_responses.get_mut(p)
                && slot.error_code == ErrorCode::None.code()
            {
                slot.error_code = code.code();
                slot.error_message = Some(match code {
                    ErrorCode::RequestTimedOut => format!(
                        "the in-sync replicas did not all have the records within {timeout_ms} ms"
                    ),
                    ErrorCode::NotEnoughReplicasAfterAppend => {
                        "the records were written to fewer in-sync replicas than min.insync.replicas"
                            .to_string()
                    }
                    _ => "leadership moved while waiting for the in-sync replicas".to_string(),
                });
                any_error = true;
            }
        }
        answer(acks, any_error, responses, node_endpoints)
    }))
}

fn answer(
    acks: i16,
    any_error: bool,
    responses: Vec<TopicProduceResponse>,
    node_endpoints: Vec<NodeEndpoint>,
) -> Reply {
    if acks == 0 {
        // no response to carry the error: close the connection so the
        // producer notices and refreshes its metadata (as Kafka does)
        return if any_error {
            Reply::Close("produce with acks=0 failed".to_string())
        } else {
            Reply::None
        };
    }
    Reply::Body(ResponseBody::Produce(ProduceResponse {
        responses,
        throttle_time_ms: 0,
        node_endpoints,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use weir_protocol::records::{Compression, RecordBatchBuilder};

    use super::*;

    fn batch(producer: Option<(i64, i16, i32)>, values: &[&str]) -> Vec<u8> {
        let mut b = RecordBatchBuilder::new(Compression::None);
        if let Some((id, epoch, seq)) = producer {
            b = b.producer(id, epoch, seq);
        }
        for v in values {
            b.push(
                1_000,
                Some(Bytes::from_static(b"k")),
                Some(Bytes::copy_from_slice(v.as_bytes())),
                Vec::new(),
            )
            .unwrap();
        }
        b.build().unwrap().as_bytes().to_vec()
    }

    fn inspect_code(records: &[u8]) -> Result<Option<(i64, i32, i32)>, ErrorCode> {
        inspect(records)
            .map(|i| i.map(|b| (b.producer_id, b.first_seq, b.last_seq)))
            .map_err(|e| e.error_code)
    }

    #[test]
    fn inspect_walks_every_batch_of_the_section() {
        let one = batch(Some((7, 0, 5)), &["a", "b", "c"]);
        assert_eq!(inspect_code(&one), Ok(Some((7, 5, 7))));

        let mut two = batch(None, &["a"]);
        two.extend_from_slice(&batch(None, &["b", "c"]));
        assert_eq!(inspect_code(&two), Ok(None));

        // The producer id is in the second batch: found only by stepping
        // over the first.
        let mut idem_second = batch(None, &["a"]);
        idem_second.extend_from_slice(&batch(Some((7, 0, 0)), &["b"]));
        assert_eq!(inspect_code(&idem_second), Err(ErrorCode::InvalidRecord));

        assert_eq!(inspect_code(&[]), Err(ErrorCode::InvalidRecord));
    }

    #[test]
    fn inspect_refuses_what_clients_may_not_write() {
        let txn = |pid: i64, seq: i32| {
            let mut b = RecordBatchBuilder::new(Compression::None)
                .producer(pid, 0, seq)
                .transactional(true);
            b.push(1, None, Some(Bytes::from_static(b"v")), Vec::new())
                .unwrap();
            b.build().unwrap().as_bytes().to_vec()
        };
        assert_eq!(inspect_code(&txn(7, 0)), Ok(Some((7, 0, 0))));
        assert!(inspect(&txn(7, 0)).unwrap().unwrap().transactional);
        assert!(has_transactional_batch(&txn(7, 0)));
        let mut second = batch(None, &["a"]);
        second.extend_from_slice(&txn(7, 0));
        assert!(has_transactional_batch(&second));
        assert!(!has_transactional_batch(&batch(Some((7, 0, 0)), &["a"])));
        for refused in [
            // a transactional batch without a producer id
            txn(-1, -1),
            // a producer id without a sequence
            batch(Some((7, 0, -1)), &["a"]),
            // a control batch
            weir_protocol::records::RecordBatchBuilder::end_txn_marker_batch(
                0,
                -1,
                7,
                0,
                1,
                &weir_protocol::records::EndTxnMarker::commit(0),
            )
            .unwrap()
            .as_bytes()
            .to_vec(),
        ] {
            assert_eq!(inspect_code(&refused), Err(ErrorCode::InvalidRecord));
        }
    }

    #[test]
    fn inspect_refuses_a_batch_cut_short() {
        let mut two = batch(None, &["a"]);
        two.extend_from_slice(&batch(None, &["b"]));
        for cut in 1..=3 {
            let short = &two[..two.len() - cut];
            assert_eq!(
                inspect_code(short),
                Err(ErrorCode::CorruptMessage),
                "cut {cut}"
            );
        }
        // Cut inside the second batch's header: its header cannot be read.
        let first_len = batch(None, &["a"]).len();
        assert_eq!(
            inspect_code(&two[..first_len + 5]),
            Err(ErrorCode::CorruptMessage)
        );
    }
}
